//! The send stage: the client's request made into the upstream's (hop-by-hop headers dropped,
//! `X-Forwarded-*` added, `Host` and target rewritten to the upstream) and sent within
//! `proxy.request_timeout_ms`. A failure comes back as a `ProxyError` naming whose fault it is.

use std::net::SocketAddr;
use std::time::Instant;

use http::header::{HOST, HeaderValue, TRANSFER_ENCODING};
use http::request::Parts;
use http::{Request, Response, Version};
use hyper::body::Incoming;

use super::Sidecar;
use super::body::UpstreamBody;
use super::error::ProxyError;
use super::headers::{add_forwarded, strip_hop_by_hop};
use super::pool::Pool;
use super::pool::{cause, client_body_failed, error_type, root_cause};
use crate::settings::Upstream;

/// Who sent the request, for `X-Forwarded-For` and `-Proto`: made once per connection, so a
/// request does not write its client's address out again.
#[derive(Clone)]
pub struct Peer {
    pub ip: HeaderValue,
    pub tls: bool,
}

impl Peer {
    pub fn new(addr: SocketAddr, tls: bool) -> Peer {
        let ip = HeaderValue::from_str(&addr.ip().to_string()).expect("an address is header text");
        Peer { ip, tls }
    }
}

pub(super) fn outgoing(
    s: &Sidecar,
    upstream: &Upstream,
    mut parts: Parts,
    body: UpstreamBody,
    peer: &Peer,
) -> Result<Request<UpstreamBody>, ProxyError> {
    let original_host = parts.headers.get(HOST).cloned().or_else(|| {
        let authority = parts.uri.authority()?;
        HeaderValue::from_str(authority.as_str()).ok()
    });
    // A chunked body stays chunked, whatever the method: hyper would send a GET's body of
    // unknown length as no body at all (vet has refused every other transfer coding).
    let chunked = parts.headers.contains_key(TRANSFER_ENCODING);
    strip_hop_by_hop(
        &mut parts.headers,
        Some(&s.settings.events.request_id_header),
    );
    if chunked {
        parts
            .headers
            .insert(TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
    }
    if s.settings.proxy.forwarded_headers {
        let proto = if peer.tls { "https" } else { "http" };
        add_forwarded(&mut parts.headers, &peer.ip, proto, original_host.as_ref());
    }
    let host = match original_host {
        Some(host) if s.settings.proxy.preserve_host => Some(host),
        _ => upstream.host.clone(),
    };
    if let Some(host) = host {
        parts.headers.insert(HOST, host);
    }
    if let Some(basic) = &upstream.basic
        && !parts.headers.contains_key(http::header::AUTHORIZATION)
    {
        parts
            .headers
            .insert(http::header::AUTHORIZATION, basic.clone());
    }
    // HTTP/1.0 goes up as HTTP/1.0 (its framing and keep-alive rules differ); HTTP/2 as 1.1.
    if parts.version != Version::HTTP_10 {
        parts.version = Version::HTTP_11;
    }
    parts.uri = upstream
        .target(parts.uri.path_and_query())
        .map_err(ProxyError::BadTarget)?;
    Ok(Request::from_parts(parts, body))
}

pub(super) async fn send(
    s: &Sidecar,
    upstream: &Upstream,
    pool: &Pool,
    request: Request<UpstreamBody>,
) -> Result<Response<Incoming>, ProxyError> {
    let started = Instant::now();
    let timeout = s.settings.proxy.request_timeout;
    let sent = tokio::time::timeout(timeout, pool.request(request)).await;
    s.sinks
        .metrics
        .upstream_seconds(started.elapsed().as_secs_f64());
    let authority = || upstream.authority.to_string();
    match sent {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(e)) if let Some(client) = client_body_failed(&e) => Err(client),
        Ok(Err(e)) => Err(ProxyError::Unreachable {
            authority: authority(),
            cause: cause(&e),
            reason: root_cause(&e),
            error_type: error_type(&e),
        }),
        Err(_) => Err(ProxyError::Timeout {
            authority: authority(),
            ms: timeout.as_millis(),
        }),
    }
}
