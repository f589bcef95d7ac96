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
use http::{Method, Request, Response, StatusCode};
use http_body_util::Either;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::server::conn::auto;

use super::problem;
use super::server::{Requests, Stream};
use super::tee::{ResponseBody, own};
use super::tunnel::NotOpened;
use super::{Api, Sidecar};
use crate::config::UnknownHosts;
use crate::settings::HostPort;
use crate::sink::Tunnel;

type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

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

/// The forward listener's part of a connection's service.
#[derive(Clone)]
pub(super) struct Front {
    pub after: After,
    pub builder: auto::Builder<hyper_util::rt::TokioExecutor>,
    /// The service the requests inside an intercepted tunnel go through.
    pub inner: Requests,
}

/// Where a request goes.
pub(super) enum Door {
    /// `CONNECT` to this host.
    Connect(HostPort),
    /// Absolute-form, to a host no API serves.
    Pass(HostPort),
    /// This API's request, for its upstream of that index: the request path takes it.
    Api(Arc<Api>, usize),
    /// No API serves it: 404.
    Nowhere,
    /// A `CONNECT` this proxy cannot open: 400 saying why.
    Unopenable(&'static str),
}

impl Door {
    /// An origin-form request's API, by prefix or `Host` (`api::select`).
    pub fn select(s: &Sidecar, req: &mut Request<Incoming>) -> Door {
        match super::api::select(&s.apis, req) {
            Some(api) => Door::Api(api, 0),
            None => Door::Nowhere,
        }
    }
}

impl Front {
    pub fn door(s: &Sidecar, req: &mut Request<Incoming>) -> Door {
        let authority = req.uri().authority().map(|a| a.as_str());
        if req.method() == Method::CONNECT {
            // Its tunnel runs once hyper hands the socket over, which an HTTP/2 connection
            // never does: answered 200, it would relay nothing.
            if req.version() == http::Version::HTTP_2 {
                return Door::Unopenable(
                    "CONNECT over HTTP/2 is not served: open the tunnel over HTTP/1.1",
                );
            }
            return match authority.and_then(|a| HostPort::parse(a, 443)) {
                Some(host) => Door::Connect(host),
                None => Door::Unopenable(
                    "CONNECT needs a host:port target, its port 1 to 65535 (RFC 9110, section 9.3.6)",
                ),
            };
        }
        let default = match req.uri().scheme_str() {
            Some("https") => 443,
            _ => 80,
        };
        match authority.and_then(|a| HostPort::parse(a, default)) {
            Some(host) => match s.intercepts(&host) {
                Some(api) => Door::Api(api.clone(), api.upstream_for(&host)),
                None => Door::Pass(host),
            },
            None => Door::select(s, req),
        }
    }

    /// Answer a `CONNECT`, leaving the tunnel or the intercepted connection to `after`.
    pub async fn connect(
        &self,
        s: &Arc<Sidecar>,
        req: Request<Incoming>,
        host: HostPort,
    ) -> Response<ResponseBody> {
        if let Some(api) = s.intercepts(&host) {
            return self.intercept(s, req, host, api.clone());
        }
        if let Some(refused) = refusal(s, &host) {
            return refused;
        }
        let to = match super::tunnel::dial(s, &host).await {
            Ok(to) => to,
            Err(not) => return not_opened(s, &host, not),
        };
        s.tunnels.count(&host.to_string(), Tunnel::Passed);
        let upgrade = hyper::upgrade::on(req);
        self.after.set(Box::pin(async move {
            let Ok(upgraded) = upgrade.await else { return };
            let mut from = TokioIo::new(upgraded);
            let mut to = to;
            let _ = tokio::io::copy_bidirectional(&mut from, &mut to).await;
        }));
        established()
    }

    /// End the client's TLS with a leaf for `host` and serve the requests inside.
    fn intercept(
        &self,
        s: &Arc<Sidecar>,
        req: Request<Incoming>,
        host: HostPort,
        api: Arc<Api>,
    ) -> Response<ResponseBody> {
        let ca = s.ca.as_ref().expect("a forward proxy has its CA");
        let config = match ca.server_config(&host.host) {
            Ok(config) => config,
            Err(e) => {
                tracing::error!("{e}");
                return unreachable(&host, &e.to_string());
            }
        };
        let upgrade = hyper::upgrade::on(req);
        let upstream = api.upstream_for(&host);
        let inner = self.inner.clone().for_api(api, upstream);
        let builder = self.builder.clone();
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
            let (stream, inner) = match opened {
                Ok(Ok(Some((stream, true)))) => (stream, inner),
                // Plain HTTP tunneled: its requests' `X-Forwarded-Proto` is `http`.
                Ok(Ok(Some((stream, false)))) => (stream, inner.plain()),
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
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), inner);
            let served = conn.await;
            if let Err(e) = served {
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
                s.tunnels.count(&host.to_string(), Tunnel::Passed);
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
        s.tunnels.count(&host.to_string(), Tunnel::Refused);
        refused(host)
    })
}

/// A tunnel the policy denied (403, counted as refused) or that could not reach its host
/// (502, counted as failed).
fn not_opened(s: &Sidecar, host: &HostPort, not: NotOpened) -> Response<ResponseBody> {
    match not {
        NotOpened::Denied(why) => {
            s.tunnels.count(&host.to_string(), Tunnel::Refused);
            answer(StatusCode::FORBIDDEN, "Tunnel denied", &why)
        }
        NotOpened::Unreachable(reason) => {
            s.tunnels.count(&host.to_string(), Tunnel::Failed);
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
    let stalls = s.metrics.body_stalls();
    Ok(response.map(|b| {
        let b = super::stall::Stalling::new(b, stall, stalls);
        Either::Left(super::tee::Tee::pass(b))
    }))
}

/// 400 for a `CONNECT` that names no host and port this proxy can open, counted as a
/// client error.
pub(super) fn unopenable(s: &Sidecar, why: &str) -> Response<ResponseBody> {
    s.metrics.client_error("connect_target");
    answer(StatusCode::BAD_REQUEST, "Bad CONNECT", why)
}

/// 404 for an origin-form request no API serves (several APIs, and neither a prefix nor a
/// `Host` names one), counted as a client error.
pub(super) fn no_api<B>(s: &Sidecar, req: &Request<B>) -> Response<ResponseBody> {
    s.metrics.client_error("no_api");
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
