//! One client connection, from the serving thread that got it to its end: TLS if the listener
//! has it, HTTP/1.1 or HTTP/2, its requests served by `requests`, watched by the graceful
//! drain and by its time bounds (`listener`); then what a `CONNECT` left to run on the socket
//! hyper handed over (`front`).

use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio_rustls::TlsAcceptor;

use super::Sidecar;
use super::front::{After, Front, Inside};
use super::outgoing::Peer;
use super::pool::Pools;
use super::requests::Requests;
use super::route::Route;
use super::stream::Stream;
use crate::listener::{Activity, Counted, ended, watched};

/// An accepted connection, with its `proxy.max_connections` place.
pub(super) struct Handed<S = std::net::TcpStream> {
    pub stream: S,
    pub peer: SocketAddr,
    pub place: OwnedSemaphorePermit,
}

/// What every serving thread shares: the TLS acceptor and the connection builder.
#[derive(Clone)]
pub(super) struct Accepting {
    tls: Option<TlsAcceptor>,
    builder: auto::Builder<TokioExecutor>,
}

impl Accepting {
    pub fn new(s: &Sidecar, tls: Option<TlsAcceptor>) -> Accepting {
        Accepting {
            tls,
            builder: builder(s),
        }
    }
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
    let front = s.ca.clone().map(|ca| Front {
        ca,
        after: after.clone(),
        inside: inside(
            &builder,
            Requests::new(&s, &pool, Peer::new(peer, true), &activity, None),
        ),
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

/// How the requests inside an intercepted tunnel are served: on `requests` fixed to the
/// tunnel's route, by the same builder as the connection's.
fn inside(builder: &auto::Builder<TokioExecutor>, requests: Requests) -> Inside {
    let builder = builder.clone();
    Arc::new(move |stream: Stream, route: Route, tls: bool| {
        let service = requests.clone().inside(route, tls);
        let builder = builder.clone();
        Box::pin(async move {
            builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await
        })
    })
}
