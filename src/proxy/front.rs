//! The forward proxy's front door: what a client that honours `HTTPS_PROXY` sends before any
//! request of the API. A `CONNECT host:port` for a host an API serves is answered 200, its TLS
//! ended with a leaf for that host from our CA (`ca`), and the requests inside go through the
//! same request path as the reverse proxy's; a host no API serves is tunneled byte for byte
//! (or refused, `forward.unknown_hosts`) and counted by host. An absolute-form request
//! (`GET http://host/path`, a client's plain-HTTP proxy request) is the API's request when an
//! API serves its host, and passed on to that host otherwise. driftwatch never ends TLS for a
//! host it has no spec for.
//!
//! What a `CONNECT` leaves to do (the tunnel, or the connection inside it) runs on the same
//! connection once hyper hands its socket over, inside the listener's bounds: the place among
//! `proxy.max_connections` and the idle cut hold for the tunnel's life.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Either;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use super::Sidecar;
use super::problem;
use super::route::Route;
use super::stream::Stream;
use super::tee::{ResponseBody, own};
use super::tunnel::NotOpened;
use crate::config::UnknownHosts;
use crate::settings::HostPort;
use crate::sink::Tunnel;

pub(super) type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What a `CONNECT` leaves for its connection to run once hyper hands the socket over.
#[derive(Clone, Default)]
pub(super) struct After(Arc<Mutex<Option<Work>>>);

impl After {
    fn set(&self, work: Work) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(work);
    }

    /// Run what was left, if anything.
    pub async fn run(self) {
        let work = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(work) = work {
            work.await;
        }
    }
}

/// Serves the requests inside an intercepted tunnel: the stream as the client opened it, the
/// tunnel's route, and whether the stream is TLS; how the connection ended. Given by the
/// connection, which owns the service the requests go through.
pub(super) type Inside = Arc<dyn Fn(Stream, Route, bool) -> Served + Send + Sync>;

/// The connection inside a tunnel, served to its end.
pub(super) type Served =
    Pin<Box<dyn Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>> + Send>>;

/// The forward listener's part of a connection's service.
#[derive(Clone)]
pub(super) struct Front {
    /// The CA that signs intercepted hosts' leaves.
    pub ca: Arc<super::ca::Ca>,
    pub after: After,
    pub inside: Inside,
}

impl Front {
    /// Answer a `CONNECT` to a host no API serves, leaving the tunnel to `after`.
    pub async fn connect(
        &self,
        s: &Arc<Sidecar>,
        req: Request<Incoming>,
        host: HostPort,
    ) -> Response<ResponseBody> {
        if let Some(refused) = refusal(s, &host) {
            return refused;
        }
        let to = match super::tunnel::dial(s, &host).await {
            Ok(to) => to,
            Err(not) => return not_opened(s, &host, not),
        };
        s.sinks.tunnels.count(&host.to_string(), Tunnel::Passed);
        let upgrade = hyper::upgrade::on(req);
        self.after.set(Box::pin(async move {
            let Ok(upgraded) = upgrade.await else { return };
            let mut from = TokioIo::new(upgraded);
            let mut to = to;
            let _ = tokio::io::copy_bidirectional(&mut from, &mut to).await;
        }));
        established()
    }

    /// End the client's TLS with a leaf for `host` and serve the requests inside on `route`.
    pub fn intercept(
        &self,
        s: &Arc<Sidecar>,
        req: Request<Incoming>,
        host: HostPort,
        route: Route,
    ) -> Response<ResponseBody> {
        let config = match self.ca.server_config(&host.host) {
            Ok(config) => config,
            Err(e) => {
                tracing::error!("{e}");
                return unreachable(&host, &e.to_string());
            }
        };
        let upgrade = hyper::upgrade::on(req);
        let inside = self.inside.clone();
        let deadline = s.settings.proxy.header_read_timeout;
        let hits = s.limit_hits();
        self.after.set(Box::pin(async move {
            let Ok(upgraded) = upgrade.await else { return };
            // The CONNECT was the connection's first request, so the listener's head deadline
            // is met; a ClientHello trickled a byte at a time would keep it from going idle.
            let opened = opened(TokioIo::new(upgraded), config);
            let opened = match deadline {
                Some(deadline) => tokio::time::timeout(deadline, opened).await,
                None => Ok(opened.await),
            };
            let (stream, tls) = match opened {
                Ok(Ok(Some(opened))) => opened,
                Ok(Ok(None)) => return,
                Ok(Err(e)) => {
                    tracing::debug!(%host, "TLS handshake inside CONNECT failed: {e}");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%host, "TLS handshake inside CONNECT: no ClientHello in time");
                    hits.hit("tls_handshake", "proxy");
                    return;
                }
            };
            if let Err(e) = inside(stream, route, tls).await {
                tracing::debug!(%host, "intercepted connection ended: {e}");
            }
        }));
        established()
    }

    /// Send an absolute-form request for a host no API serves on to that host, untouched
    /// but for its hop-by-hop headers; or refuse it.
    pub async fn pass(
        &self,
        s: &Arc<Sidecar>,
        req: Request<Incoming>,
        host: HostPort,
    ) -> Response<ResponseBody> {
        if let Some(refused) = refusal(s, &host) {
            return refused;
        }
        match pass_on(s, req, &host).await {
            Ok(response) => {
                s.sinks.tunnels.count(&host.to_string(), Tunnel::Passed);
                response
            }
            Err(not) => not_opened(s, &host, not),
        }
    }
}

/// The stream inside an intercepted tunnel, as the client opened it, and whether it is TLS:
/// TLS ended with the host's leaf, or plain HTTP (`sniff`); `None` when it closed before a byte.
async fn opened(
    io: TokioIo<hyper::upgrade::Upgraded>,
    config: Arc<rustls::ServerConfig>,
) -> std::io::Result<Option<(Stream, bool)>> {
    let Some(sniffed) = super::sniff::Sniffed::read(io).await? else {
        return Ok(None);
    };
    if !sniffed.is_tls() {
        return Ok(Some((Box::new(sniffed), false)));
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    Ok(Some((Box::new(acceptor.accept(sniffed).await?), true)))
}

/// Under `forward.unknown_hosts = "refuse"`, the 403 for a host no API serves, counted.
fn refusal(s: &Sidecar, host: &HostPort) -> Option<Response<ResponseBody>> {
    (s.settings.forward.unknown_hosts == UnknownHosts::Refuse).then(|| {
        s.sinks.tunnels.count(&host.to_string(), Tunnel::Refused);
        refused(host)
    })
}

/// A tunnel the policy denied (403, counted as refused) or that could not reach its host
/// (502, counted as failed).
fn not_opened(s: &Sidecar, host: &HostPort, not: NotOpened) -> Response<ResponseBody> {
    match not {
        NotOpened::Denied(why) => {
            s.sinks.tunnels.count(&host.to_string(), Tunnel::Refused);
            answer(StatusCode::FORBIDDEN, "Tunnel denied", &why)
        }
        NotOpened::Unreachable(reason) => {
            s.sinks.tunnels.count(&host.to_string(), Tunnel::Failed);
            unreachable(host, &reason)
        }
    }
}

async fn pass_on(
    s: &Sidecar,
    req: Request<Incoming>,
    host: &HostPort,
) -> Result<Response<ResponseBody>, NotOpened> {
    let to = super::tunnel::dial(s, host).await?;
    let failed = |e: &dyn std::fmt::Display| NotOpened::Unreachable(e.to_string());
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(to))
        .await
        .map_err(|e| failed(&e))?;
    tokio::spawn(conn);
    let (mut parts, body) = req.into_parts();
    super::headers::strip_hop_by_hop(&mut parts.headers, None);
    parts.uri = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .map_err(|e: http::uri::InvalidUri| failed(&e))?;
    let mut sender = sender;
    let request = Request::from_parts(parts, body);
    let timeout = s.settings.proxy.request_timeout;
    let response = match tokio::time::timeout(timeout, sender.send_request(request)).await {
        Ok(sent) => sent.map_err(|e| failed(&e))?,
        Err(_) => {
            let late = format!("no answer within {} ms", timeout.as_millis());
            return Err(NotOpened::Unreachable(late));
        }
    };
    let stall = s.settings.proxy.body_stall_timeout;
    let stalls = s.sinks.metrics.body_stalls();
    Ok(response.map(|b| {
        let b = super::stall::Stalling::new(b, stall, stalls);
        Either::Left(super::tee::Tee::pass(b))
    }))
}

/// 400 for a `CONNECT` that names no host and port this proxy can open, counted as a
/// client error.
pub(super) fn unopenable(s: &Sidecar, why: &str) -> Response<ResponseBody> {
    s.sinks.metrics.client_error("connect_target");
    answer(StatusCode::BAD_REQUEST, "Bad CONNECT", why)
}

/// 404 for an origin-form request no API serves (several APIs, and neither a prefix nor a
/// `Host` names one), counted as a client error.
pub(super) fn no_api<B>(s: &Sidecar, req: &Request<B>) -> Response<ResponseBody> {
    s.sinks.metrics.client_error("no_api");
    let names: Vec<String> = s
        .apis
        .iter()
        .map(|api| match &api.settings.prefix {
            Some(prefix) => format!("{} ({prefix})", api.name()),
            None => api.name().to_string(),
        })
        .collect();
    let detail = format!(
        "no API of this sidecar serves {}: its APIs are {}",
        req.uri().path(),
        names.join(", ")
    );
    answer(StatusCode::NOT_FOUND, "No API", &detail)
}

/// The front's own problem+json answer: `status`, its `title` and `detail`.
fn answer(status: StatusCode, title: &str, detail: &str) -> Response<ResponseBody> {
    own(problem::response(status, title, detail, "", None))
}

fn established() -> Response<ResponseBody> {
    own(Response::new(Bytes::new()))
}

fn refused(host: &HostPort) -> Response<ResponseBody> {
    let detail =
        format!("no API of this sidecar serves {host}, and forward.unknown_hosts is \"refuse\"");
    answer(StatusCode::FORBIDDEN, "Host not served", &detail)
}

fn unreachable(host: &HostPort, reason: &str) -> Response<ResponseBody> {
    let detail = format!("driftwatch could not reach {host}: {reason}");
    answer(StatusCode::BAD_GATEWAY, "Upstream unreachable", &detail)
}
