//! Accepting connections: HTTP/1.1 and cleartext HTTP/2 on one port (hyper-util's auto
//! builder), optional TLS with ALPN, and a graceful drain on shutdown: stop accepting, let
//! in-flight requests finish up to the deadline, then return.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use std::convert::Infallible;
use std::pin::Pin;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio_rustls::TlsAcceptor;

use super::error::StartError;
use super::front::{After, Door, Front};
use super::lanes::{Handed, Lanes};
use super::outgoing::Peer;
use super::pool::Pools;
use super::stages::handle;
use super::tee::ResponseBody;
use super::upstream::{read_certs, read_key};
use super::{Api, Sidecar};
use crate::config::ProxyKind;
use crate::listener::{Accepted, Activity, Counted, Held, Listener, ended, watched};

/// Serve the proxy on `listener` until `shutdown` resolves, then drain in-flight requests (and
/// the response work they left) for up to `proxy.drain_timeout_ms`. The caller serves the
/// admin listener beside it.
///
/// This thread accepts; each connection goes, in turn, to one of `proxy.workers` serving
/// threads (this one among them, see `lanes`), which serves it start to end.
pub async fn run(
    mut listener: Listener,
    s: Arc<Sidecar>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StartError> {
    let accepting = Accepting {
        tls: acceptor(&s)?,
        builder: builder(&s),
    };
    // SIGHUP's handler first: once anything answers, a SIGHUP must reload, not end the process.
    let hup_task = tokio::spawn(super::reload::on_sighup(s.clone()));
    let watch_task = tokio::spawn(super::reload::watch(s.clone()));
    let pool = Arc::new(super::pool::pools(&s.settings, &s.apis)?);
    let mut lanes = Lanes::start(&s, &accepting)?;
    let graceful = GracefulShutdown::new();
    s.ready.store(true, Ordering::SeqCst);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            Accepted { stream, peer, place } = listener.accept() => {
                let Some(here) = lanes.hand(Handed { stream, peer, place }) else {
                    continue; // another serving thread has it
                };
                spawn_connection(&s, &pool, here, &accepting, &graceful);
            },
            () = &mut shutdown => break,
        }
    }
    s.ready.store(false, Ordering::SeqCst);
    drop(listener);
    tokio::join!(drain(&s, graceful), lanes.stop());
    watch_task.abort();
    hup_task.abort();
    s.events.close();
    Ok(())
}

/// What every serving thread shares: the TLS acceptor and the connection builder.
#[derive(Clone)]
pub(super) struct Accepting {
    tls: Option<TlsAcceptor>,
    builder: auto::Builder<TokioExecutor>,
}

/// Serve one accepted connection on this thread's runtime, sending upstream on `pool` (this
/// thread's connections); its place is given back when it ends.
pub(super) fn spawn_connection(
    s: &Arc<Sidecar>,
    pool: &Arc<Pools>,
    handed: Handed<TcpStream>,
    accepting: &Accepting,
    graceful: &GracefulShutdown,
) {
    let Handed {
        stream,
        peer,
        place,
    } = handed;
    let conn = connection(
        s.clone(),
        pool.clone(),
        stream,
        peer,
        accepting.clone(),
        graceful.watcher(),
    );
    tokio::spawn(async move {
        conn.await;
        drop(place);
    });
}

/// HTTP/1.1 and HTTP/2 on one port; hyper's header timer bounds an HTTP/1.1 head, and header
/// names keep their case on the way through (the upstream client keeps it too).
fn builder(s: &Sidecar) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(s.settings.proxy.header_read_timeout)
        .preserve_header_case(s.settings.proxy.preserve_header_case);
    builder
}

/// Let in-flight requests, and the response work they left, finish within the deadline.
pub(super) async fn drain(s: &Sidecar, graceful: GracefulShutdown) {
    let drain = s.settings.proxy.drain_timeout;
    let drained = async {
        graceful.shutdown().await;
        s.late.idle().await;
        if let Some(store) = &s.store {
            store.flushed().await;
        }
    };
    if tokio::time::timeout(drain, drained).await.is_err() {
        tracing::warn!("drain deadline of {drain:?} reached with requests still in flight");
    }
}

/// TLS on the listener when `proxy.tls_cert` and `tls_key` are set, offering h2 and http/1.1.
fn acceptor(s: &Sidecar) -> Result<Option<TlsAcceptor>, StartError> {
    let Some((cert, key)) = &s.settings.proxy.tls else {
        return Ok(None);
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(read_certs(cert)?, read_key(key)?)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some(TlsAcceptor::from(Arc::new(config))))
}

/// One client connection, HTTP/1.1 or HTTP/2, watched by the graceful drain and by its
/// time bounds (`listener`).
async fn connection(
    s: Arc<Sidecar>,
    pool: Arc<Pools>,
    stream: TcpStream,
    peer: SocketAddr,
    accepting: Accepting,
    watcher: Watcher,
) {
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(Activity::default());
    let bounds = s.settings.proxy.bounds();
    let hits = s.limit_hits();
    let served = serve(
        s,
        pool,
        Counted::new(stream, activity.clone()),
        peer,
        accepting,
        watcher,
    );
    watched(&bounds, &hits, activity, peer, served).await;
}

async fn serve(
    s: Arc<Sidecar>,
    pool: Arc<Pools>,
    stream: Counted<TcpStream>,
    peer: SocketAddr,
    accepting: Accepting,
    watcher: Watcher,
) {
    let Accepting { tls, builder } = accepting;
    let activity = stream.activity();
    let after = After::default();
    let front = (s.settings.proxy.kind == ProxyKind::Forward).then(|| Front {
        after: after.clone(),
        builder: builder.clone(),
        inner: Requests::new(&s, &pool, Peer::new(peer, true), &activity, None),
    });
    let service = Requests::new(&s, &pool, Peer::new(peer, tls.is_some()), &activity, front);
    let stream: Stream = match tls {
        Some(acceptor) => match acceptor.accept(stream).await {
            Ok(stream) => Box::new(stream),
            Err(e) => {
                tracing::debug!(%peer, "TLS handshake failed: {e}");
                return;
            }
        },
        None => Box::new(stream),
    };
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    let served = watcher.watch(conn.into_owned()).await;
    if let Err(e) = served {
        ended(&*e, "proxy", &s.limit_hits(), peer);
    }
    // A CONNECT's tunnel, or the connection inside it, on the socket hyper handed over.
    after.run().await;
}

/// A connection the proxy serves HTTP on: plain, TLS, or TLS inside a `CONNECT` tunnel, behind
/// one type, so that hyper's server (HTTP/1.1 and HTTP/2) is compiled once rather than once
/// per kind of stream: unboxed, the three kinds made the image's binary 0.26 MB larger
/// (scripts/docker-build: 27.40 against 27.14 MB). A call through the box per read or write
/// is nothing beside the system call it makes (scripts/bench-forward, docs/benchmarks.md).
pub(super) trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

pub(super) type Stream = Box<dyn Io>;

/// Every request of a connection: a place among the requests in flight, held to the
/// response's last byte (only an HTTP/2 connection's extra streams ever wait for one), then the
/// API it is for (fixed inside an intercepted tunnel; else by host, prefix or `Host`), or the
/// forward proxy's front (`CONNECT`, a host no API serves).
#[derive(Clone)]
pub(super) struct Requests {
    s: Arc<Sidecar>,
    pools: Arc<Pools>,
    from: Peer,
    activity: Arc<Activity>,
    front: Option<Box<Front>>,
    /// The API (and its upstream) of every request on this connection: an intercepted host's.
    fixed: Option<(Arc<Api>, usize)>,
}

impl Requests {
    fn new(
        s: &Arc<Sidecar>,
        pools: &Arc<Pools>,
        from: Peer,
        activity: &Arc<Activity>,
        front: Option<Front>,
    ) -> Requests {
        Requests {
            s: s.clone(),
            pools: pools.clone(),
            from,
            activity: activity.clone(),
            front: front.map(Box::new),
            fixed: None,
        }
    }

    /// The same service for a connection that is not TLS (plain HTTP inside a `CONNECT`).
    pub fn plain(mut self) -> Requests {
        self.from.tls = false;
        self
    }

    /// The same service with every request for `api`, sent to its upstream `upstream`.
    pub fn for_api(mut self, api: Arc<Api>, upstream: usize) -> Requests {
        self.fixed = Some((api, upstream));
        self
    }
}

type Answer = Response<Held<ResponseBody, OwnedSemaphorePermit>>;

impl hyper::service::Service<Request<Incoming>> for Requests {
    type Response = Answer;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, Infallible>> + Send>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.begin();
        let Requests {
            s,
            pools,
            from,
            front,
            fixed,
            ..
        } = self.clone();
        Box::pin(async move {
            let Ok(place) = s.requests.clone().acquire_owned().await else {
                unreachable!("the requests' semaphore is never closed");
            };
            let door = match (fixed, &front) {
                (Some((api, upstream)), _) => Door::Api(api, upstream),
                (None, Some(_)) => Front::door(&s, &mut req),
                (None, None) => Door::select(&s, &mut req),
            };
            let response = match (door, front) {
                (Door::Connect(host), Some(front)) => front.connect(&s, req, host).await,
                (Door::Pass(host), Some(front)) => front.pass(&s, req, host).await,
                (Door::Api(api, upstream), _) => {
                    let pool = &pools[api.index][upstream];
                    let Ok(response) = handle(s, (api, upstream), pool, req, from).await;
                    response
                }
                (Door::Unopenable(why), _) => super::front::unopenable(&s, why),
                _ => super::front::no_api(&s, &req),
            };
            drop(in_flight);
            Ok(response.map(|body| Held::new(body, place)))
        })
    }
}
