//! Which API a request is for, decided in one place: [`door`] reads a request's target (a
//! `CONNECT` authority, an absolute-form URI, a prefix of its path, or its `Host` header) and
//! gives a [`Route`] (the API, which of its upstreams, and how it was chosen) or says where
//! else the request goes. Hosts are matched by one rule ([`by_host`]): host and port, or the
//! name alone where the port is this sidecar's rather than the destination's. Inside an
//! intercepted tunnel every request keeps the tunnel's route.

use std::sync::Arc;

use http::{Method, Request};

use super::{Api, Sidecar};
use crate::settings::HostPort;

/// An API, the upstream of it a request goes to, and how it was chosen.
#[derive(Clone)]
pub(super) struct Route {
    pub api: Arc<Api>,
    /// Its index among the API's upstreams (one per host with `hosts` and no `upstream`).
    pub upstream: usize,
    pub by: By,
}

/// How a route was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum By {
    /// The sidecar's one API, selected by nothing.
    Only,
    /// The longest prefix of its `prefix` that starts the path.
    Prefix,
    /// Its `hosts` name the request's `Host` (or its absolute-form URI's host).
    Host,
    /// No API's prefix or hosts took it: the API that names neither.
    Unselected,
    /// A `CONNECT` to one of its hosts, intercepted: every request inside the tunnel.
    Connect,
}

/// Where a request goes.
pub(super) enum Door {
    /// To an API's upstream, through the request path.
    Api(Route),
    /// A `CONNECT` to a host an API serves: its TLS ended here, its requests on `Route`.
    Intercept(Route, HostPort),
    /// A `CONNECT` to a host no API serves: tunneled (or refused).
    Tunnel(HostPort),
    /// Absolute-form, to a host no API serves: passed on (or refused).
    Pass(HostPort),
    /// No API serves it: 404.
    Nowhere,
    /// A `CONNECT` this proxy cannot open: 400 saying why.
    Unopenable(&'static str),
}

/// Whose port a host names: the destination's (a `CONNECT`, an absolute-form URI), where host
/// and port must both match, or this sidecar's (a `Host` header behind a reverse proxy), where
/// the name is enough unless several APIs name the host.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Port {
    Destination,
    Ours,
}

/// Where `req` goes. `forward`: the listener is a forward proxy, so a `CONNECT` or an
/// absolute-form URI names the destination. An origin-form request chosen by prefix has the
/// prefix taken off its target.
pub(super) fn door<B>(s: &Sidecar, req: &mut Request<B>, forward: bool) -> Door {
    if !forward {
        return origin(&s.apis, req);
    }
    let authority = req.uri().authority().map(|a| a.as_str());
    if req.method() == Method::CONNECT {
        // Its tunnel runs once hyper hands the socket over, which an HTTP/2 connection never
        // does: answered 200, it would relay nothing.
        if req.version() == http::Version::HTTP_2 {
            return Door::Unopenable(
                "CONNECT over HTTP/2 is not served: open the tunnel over HTTP/1.1",
            );
        }
        return match authority.and_then(|a| HostPort::parse(a, 443)) {
            Some(host) => match by_host(&s.apis, &host, Port::Destination, By::Connect) {
                Some(route) => Door::Intercept(route, host),
                None => Door::Tunnel(host),
            },
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
        Some(host) => match by_host(&s.apis, &host, Port::Destination, By::Host) {
            Some(route) => Door::Api(route),
            None => Door::Pass(host),
        },
        None => origin(&s.apis, req),
    }
}

/// An origin-form request's route: the API whose prefix starts its path, the longest when
/// prefixes nest (`/api/billing` before `/api`; the prefix then taken off the request's
/// target), else the one whose `hosts` name its `Host`, else the one selected by neither.
fn origin<B>(apis: &[Arc<Api>], req: &mut Request<B>) -> Door {
    let route = |api: &Arc<Api>, by| Route {
        api: api.clone(),
        upstream: 0,
        by,
    };
    if let [only] = apis
        && only.settings.prefix.is_none()
        && only.settings.hosts.is_empty()
    {
        return Door::Api(route(only, By::Only));
    }
    let path = req.uri().path();
    let by_prefix = (apis.iter())
        .filter_map(|api| {
            let prefix = api.settings.prefix.as_deref()?;
            let rest = path.strip_prefix(prefix)?;
            (rest.is_empty() || rest.starts_with('/')).then_some((prefix.len(), api))
        })
        .max_by_key(|(len, _)| *len);
    if let Some((len, api)) = by_prefix {
        strip(req, len);
        return Door::Api(route(api, By::Prefix));
    }
    let host = (req.headers().get(http::header::HOST))
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().host())
        .and_then(|h| HostPort::parse(h, 80));
    let unselected =
        |api: &&Arc<Api>| api.settings.prefix.is_none() && api.settings.hosts.is_empty();
    match host.and_then(|host| by_host(apis, &host, Port::Ours, By::Host)) {
        Some(found) => Door::Api(found),
        None => match apis.iter().find(unselected) {
            Some(api) => Door::Api(route(api, By::Unselected)),
            None => Door::Nowhere,
        },
    }
}

/// The API whose `hosts` name `host`, and the upstream of that host: host and port first;
/// where the port is ours, else the name alone, when one API names it (`svc.local:80` and
/// `svc.local:8080` of two APIs are told apart by the port, and neither takes the other's).
fn by_host(apis: &[Arc<Api>], host: &HostPort, port: Port, by: By) -> Option<Route> {
    let route = |api: &Arc<Api>, upstream| Route {
        api: api.clone(),
        upstream,
        by,
    };
    for api in apis {
        if let Some(upstream) = api.upstream_of(|h| h == host) {
            return Some(route(api, upstream));
        }
    }
    if port == Port::Destination {
        return None;
    }
    let mut by_name =
        (apis.iter()).filter_map(|api| Some((api, api.upstream_of(|h| h.host == host.host)?)));
    match (by_name.next(), by_name.next()) {
        (Some((api, upstream)), None) => Some(route(api, upstream)),
        _ => None,
    }
}

/// Take the first `len` bytes (a prefix) off the request's path, keeping its query.
fn strip<B>(req: &mut Request<B>, len: usize) {
    let Some(target) = req.uri().path_and_query().map(|p| p.as_str()) else {
        return;
    };
    let rest = &target[len..];
    let rest = match rest.starts_with('/') {
        true => rest.to_string(),
        false => format!("/{rest}"),
    };
    let mut parts = req.uri().clone().into_parts();
    parts.path_and_query = rest.parse().ok();
    if let Ok(uri) = http::Uri::from_parts(parts) {
        *req.uri_mut() = uri;
    }
}
