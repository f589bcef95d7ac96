//! Accepting connections: HTTP/1.1 and cleartext HTTP/2 on one port (hyper-util's auto
//! builder), optional TLS with ALPN, and a graceful drain on shutdown: stop accepting, let
//! in-flight requests finish up to the deadline, then return. Each accepted connection goes to
//! a serving thread (`lanes`), which serves it (`connection`).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use hyper_util::server::graceful::GracefulShutdown;
use tokio_rustls::TlsAcceptor;

use super::Sidecar;
use super::connection::{Accepting, Handed, drain, spawn_connection};
use super::error::StartError;
use super::lanes::Lanes;
use super::upstream::{read_certs, read_key};
use crate::listener::{Accepted, Listener};

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
    let accepting = Accepting::new(&s, acceptor(&s)?);
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
    s.sinks.events.close();
    Ok(())
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
