//! Accepting connections: HTTP/1.1 and cleartext HTTP/2 on one port (hyper-util's auto
//! builder), optional TLS with ALPN, and a graceful drain on shutdown: stop accepting, let
//! in-flight requests finish up to the deadline, then return.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

use super::Sidecar;
use super::conn_bounds::{Activity, Counted};
use super::error::StartError;
use super::forward::handle;
use super::lanes::{Handed, Lanes};
use super::outgoing::Peer;
use super::pool::Pool;
use super::upstream::{read_certs, read_key};

/// Serve the proxy on `proxy` until `shutdown` resolves, then drain in-flight requests (and
/// the response work they left) for up to `proxy.drain_timeout_ms`. The caller serves the
/// admin listener beside it.
///
/// This thread accepts; each connection goes, in turn, to one of `proxy.workers` serving
/// threads (this one among them, see `lanes`), which serves it start to end.
pub async fn run(
    proxy: TcpListener,
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
    let pool = Arc::new(Pool::new(&s.settings, &s.upstream)?);
    let mut lanes = Lanes::start(&s, &accepting)?;
    let graceful = GracefulShutdown::new();
    let places = Arc::new(Semaphore::new(s.settings.proxy.max_connections));
    s.ready.store(true, Ordering::SeqCst);
    // Out of file descriptors, or shedding: said once when it starts and once when it ends.
    let mut exhausted = false;
    let mut shedding = false;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = proxy.accept() => match accepted {
                Ok((stream, peer)) => {
                    if std::mem::take(&mut exhausted) {
                        tracing::info!("accepting connections again");
                    }
                    let Some(place) = admit(&s, &places, &mut shedding) else {
                        continue; // the stream is dropped: closed at once
                    };
                    let Some(here) = lanes.hand(Handed { stream, peer, place }) else {
                        continue; // another serving thread has it
                    };
                    spawn_connection(&s, &pool, here, &accepting, &graceful);
                }
                Err(e) => {
                    if let Some(pause) = accept_failed(&s, &e, &mut exhausted) {
                        tokio::time::sleep(pause).await;
                    }
                }
            },
            () = &mut shutdown => break,
        }
    }
    s.ready.store(false, Ordering::SeqCst);
    drop(proxy);
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
    pool: &Arc<Pool>,
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

/// How long to wait after a failed accept. Out of file descriptors (EMFILE, ENFILE) or memory,
/// the listener stays readable and a retry fails at once: without a pause the loop spins a
/// core and floods the log. Other errors concern one connection and are retried at once.
fn accept_failed(s: &Sidecar, error: &std::io::Error, exhausted: &mut bool) -> Option<Duration> {
    const EMFILE: i32 = 24;
    const ENFILE: i32 = 23;
    const ENOBUFS: i32 = 105;
    const ENOMEM: i32 = 12;
    let limit = match error.raw_os_error() {
        Some(EMFILE | ENFILE) => "open_files",
        Some(ENOBUFS | ENOMEM) => "memory",
        _ => {
            tracing::debug!("accept failed: {error}");
            return None;
        }
    };
    s.metrics.limit_hit(limit);
    if !std::mem::replace(exhausted, true) {
        tracing::warn!(
            "accept failed: {error}; pausing accepts 100 ms at a time until descriptors free up"
        );
    }
    Some(Duration::from_millis(100))
}

/// A place for one more connection, or `None` at `proxy.max_connections` (counted, and logged
/// once when shedding starts and once when it ends).
fn admit(
    s: &Sidecar,
    places: &Arc<Semaphore>,
    shedding: &mut bool,
) -> Option<OwnedSemaphorePermit> {
    match places.clone().try_acquire_owned() {
        Ok(place) => {
            if std::mem::take(shedding) {
                tracing::info!("below proxy.max_connections again: accepting connections");
            }
            Some(place)
        }
        Err(_) => {
            s.metrics.limit_hit("connections");
            if !std::mem::replace(shedding, true) {
                tracing::warn!(
                    max = s.settings.proxy.max_connections,
                    "at proxy.max_connections: closing new connections until some end"
                );
            }
            None
        }
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
/// time bounds (`conn_bounds`).
async fn connection(
    s: Arc<Sidecar>,
    pool: Arc<Pool>,
    stream: TcpStream,
    peer: SocketAddr,
    accepting: Accepting,
    watcher: Watcher,
) {
    let _ = stream.set_nodelay(true);
    let activity = Arc::new(Activity::default());
    let proxy = &s.settings.proxy;
    let lapsed = activity.clone();
    let bounds = lapsed.lapsed(proxy.header_read_timeout, proxy.idle_timeout);
    tokio::select! {
        () = serve(s.clone(), pool, Counted::new(stream, activity), peer, accepting, watcher) => {}
        limit = bounds => {
            tracing::debug!(%peer, "connection closed: {limit} timeout");
            s.metrics.limit_hit(limit);
        }
    }
}

async fn serve(
    s: Arc<Sidecar>,
    pool: Arc<Pool>,
    stream: Counted<TcpStream>,
    peer: SocketAddr,
    accepting: Accepting,
    watcher: Watcher,
) {
    let Accepting { tls, builder } = accepting;
    let from = Peer::new(peer, tls.is_some());
    let activity = stream.activity();
    let metrics = s.clone();
    let service = service_fn(move |req| {
        let in_flight = activity.begin();
        let handled = handle(s.clone(), pool.clone(), req, from.clone());
        async move {
            let response = handled.await;
            drop(in_flight);
            response
        }
    });
    let served = match tls {
        Some(acceptor) => match acceptor.accept(stream).await {
            Ok(stream) => {
                let conn = builder.serve_connection(TokioIo::new(stream), service);
                watcher.watch(conn.into_owned()).await
            }
            Err(e) => {
                tracing::debug!(%peer, "TLS handshake failed: {e}");
                return;
            }
        },
        None => {
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            watcher.watch(conn.into_owned()).await
        }
    };
    if let Err(e) = served {
        let timed_out = e
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_timeout);
        if timed_out {
            metrics.metrics.limit_hit("header_read");
        }
        tracing::debug!(%peer, "connection ended with an error: {e}");
    }
}
