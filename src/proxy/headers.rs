//! Header rules for forwarding: hop-by-hop headers are connection-scoped and never forwarded
//! (RFC 9110 §7.6.1; hyper does not strip them); everything else passes untouched, including
//! `traceparent` and `Trailer` (end to end: hyper sends only the trailer fields it names).
//! driftwatch adds only the `X-Forwarded-*` headers (configurable), a request id when the
//! client sent none, and `TE: trailers` when the client accepts trailers (it is the one `TE`
//! a proxy that forwards trailers passes on). A `Connection` header cannot strip the request
//! id: it is how a request is traced through.

use http::header::{
    CONNECTION, CONTENT_ENCODING, CONTENT_LENGTH, HeaderMap, HeaderName, HeaderValue, TE,
    TRANSFER_ENCODING, UPGRADE,
};

const HOPS: usize = 5;

/// Besides these, every `Proxy-*` header (`Proxy-Connection`, `Proxy-Authorization`, ...).
/// Names, not text: a text name is parsed again on every removal, twice per request.
const HOP_BY_HOP: [HeaderName; HOPS] = [
    CONNECTION,
    HeaderName::from_static("keep-alive"),
    TE,
    TRANSFER_ENCODING,
    UPGRADE,
];

/// Where `Connection` and `TE` are in [`HOP_BY_HOP`]: `strip_hop_by_hop` reads them by place.
const AT_CONNECTION: usize = 0;
const AT_TE: usize = 2;

/// An upstream answer framed as RFC 9112 §6.3 says it is read: with `Transfer-Encoding`, any
/// `Content-Length` is not the body's length and goes (kept, the client got "hel" of "hello",
/// or a cut connection that lost its next pipelined request). hyper takes the `chunked` off;
/// a transfer coding under it (`gzip, chunked`) is kept as the last content coding, which the
/// client undoes the same way and which HTTP/2, with no transfer codings, can carry.
pub fn reframe_response(headers: &mut HeaderMap) {
    if !headers.contains_key(TRANSFER_ENCODING) {
        return;
    }
    headers.remove(CONTENT_LENGTH);
    let transfer: Vec<String> = codings(headers, &TRANSFER_ENCODING)
        .filter(|c| !c.eq_ignore_ascii_case("chunked"))
        .collect();
    if transfer.is_empty() {
        return;
    }
    let content =
        codings(headers, &CONTENT_ENCODING).filter(|c| !c.eq_ignore_ascii_case("identity"));
    let codings: Vec<String> = content.chain(transfer).collect();
    if let Ok(value) = HeaderValue::from_str(&codings.join(", ")) {
        headers.insert(CONTENT_ENCODING, value);
    }
}

/// The codings a `Transfer-Encoding` or `Content-Encoding` lists, in order, over all its fields.
fn codings<'h>(headers: &'h HeaderMap, name: &HeaderName) -> impl Iterator<Item = String> + 'h {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
}

/// Remove hop-by-hop headers, including those the `Connection` header names, except `keep`
/// (the request id). A client's `TE: trailers` is passed on. One look over the names comes
/// first: most requests carry none of these, most responses only `Connection`, and only what
/// is there is looked up and removed; a name is made only for a header `Connection` names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap, keep: Option<&HeaderName>) {
    let mut present = [false; HOPS];
    let mut proxy = false;
    for name in headers.keys() {
        match HOP_BY_HOP.iter().position(|h| h == name) {
            Some(i) => present[i] = true,
            None => proxy |= name.as_str().starts_with("proxy-"),
        }
    }
    if present[AT_CONNECTION] {
        for name in connection_named(headers, keep) {
            headers.remove(name);
        }
    }
    let trailers = present[AT_TE]
        && headers
            .get_all(TE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("trailers"));
    for (name, _) in HOP_BY_HOP.iter().zip(present).filter(|(_, there)| *there) {
        headers.remove(name);
    }
    if trailers {
        headers.insert(TE, HeaderValue::from_static("trailers"));
    }
    if proxy {
        let named: Vec<HeaderName> = headers
            .keys()
            .filter(|k| k.as_str().starts_with("proxy-"))
            .cloned()
            .collect();
        for name in named {
            headers.remove(name);
        }
    }
}

/// The headers `Connection` names that are present, besides the hop-by-hop ones removed
/// anyway, and besides `keep`.
fn connection_named(headers: &HeaderMap, keep: Option<&HeaderName>) -> Vec<HeaderName> {
    let present = |token: &str| {
        let token = token.trim();
        let removed_anyway = HOP_BY_HOP
            .iter()
            .any(|h| h.as_str().eq_ignore_ascii_case(token));
        let kept = keep.is_some_and(|k| k.as_str().eq_ignore_ascii_case(token));
        !removed_anyway && !kept && headers.contains_key(token)
    };
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter(|t| present(t))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect()
}

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Append the client to `X-Forwarded-For` and set `X-Forwarded-Proto` and `-Host`.
pub fn add_forwarded(
    headers: &mut HeaderMap,
    client_ip: &HeaderValue,
    proto: &str,
    host: Option<&HeaderValue>,
) {
    let xff = X_FORWARDED_FOR;
    let value = match headers.get(&xff).and_then(|v| v.to_str().ok()) {
        Some(existing) => {
            let ip = client_ip.to_str().unwrap_or_default();
            HeaderValue::from_str(&format!("{existing}, {ip}")).ok()
        }
        None => Some(client_ip.clone()),
    };
    if let Some(v) = value {
        headers.insert(xff, v);
    }
    headers.insert(
        X_FORWARDED_PROTO,
        HeaderValue::from_static(if proto == "https" { "https" } else { "http" }),
    );
    if let Some(host) = host {
        headers.insert(X_FORWARDED_HOST, host.clone());
    }
}

/// A header value as text, when it is valid text.
pub fn value_text(value: Option<&HeaderValue>) -> Option<String> {
    value.and_then(|v| v.to_str().ok()).map(String::from)
}

/// A request's id, kept as the header value it travels as: it goes to the upstream, back on the
/// response and on to the response work as a reference count, and becomes text only for an
/// event or a problem answer. Always header text (`to_str` holds).
#[derive(Clone, Debug)]
pub struct RequestId(HeaderValue);

impl RequestId {
    /// The client's id when it is text; else `None`, and the request needs a new one.
    pub fn given(value: &HeaderValue) -> Option<RequestId> {
        value.to_str().is_ok().then(|| RequestId(value.clone()))
    }

    /// A new id: a random UUID as 32 hex digits, written straight into the header value.
    pub fn new() -> RequestId {
        let mut hex = [0u8; 32];
        let text = uuid::Uuid::new_v4().simple().encode_lower(&mut hex);
        RequestId(HeaderValue::from_str(text).expect("hex digits are header text"))
    }

    pub fn as_str(&self) -> &str {
        self.0.to_str().unwrap_or_default()
    }

    pub fn value(&self) -> &HeaderValue {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_connection_named_headers_go_the_rest_stays() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, X-Drop-Me , x-absent"),
            ("keep-alive", "timeout=5"),
            ("x-drop-me", "1"),
            ("transfer-encoding", "chunked"),
            ("te", "gzip"),
            ("trailer", "x-sum"),
            ("upgrade", "h2c"),
            ("proxy-authorization", "Basic x"),
            ("proxy-foo", "1"),
            ("traceparent", "00-abc-def-01"),
            ("authorization", "Bearer t"),
            ("content-length", "5"),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        strip_hop_by_hop(&mut h, None);
        let mut kept: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        kept.sort();
        assert_eq!(
            kept,
            ["authorization", "content-length", "traceparent", "trailer"]
        );
        // `TE: trailers` goes on; the request id stays, whatever `Connection` says.
        let mut h = HeaderMap::new();
        h.insert("te", HeaderValue::from_static("gzip, trailers"));
        h.insert("connection", HeaderValue::from_static("x-request-id"));
        h.insert("x-request-id", HeaderValue::from_static("rid-1"));
        strip_hop_by_hop(&mut h, Some(&HeaderName::from_static("x-request-id")));
        assert_eq!(h.get("te").unwrap(), "trailers");
        assert_eq!(h.get("x-request-id").unwrap(), "rid-1");
    }

    #[test]
    fn a_hop_by_hop_header_alone_is_found_and_removed() {
        assert_eq!(
            (&HOP_BY_HOP[AT_CONNECTION], &HOP_BY_HOP[AT_TE]),
            (&CONNECTION, &TE)
        );
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("x-drop"));
        h.insert("x-drop", HeaderValue::from_static("1"));
        h.insert("accept", HeaderValue::from_static("*/*"));
        strip_hop_by_hop(&mut h, None);
        assert_eq!(h.keys().collect::<Vec<_>>(), ["accept"]);
        // Each alone, as most messages carry at most one: found by the first look, removed.
        for (name, value, left) in [
            ("proxy-authorization", "Basic x", None),
            ("upgrade", "websocket", None),
            ("keep-alive", "timeout=5", None),
            ("transfer-encoding", "chunked", None),
            ("te", "trailers", Some("trailers")),
            ("te", "deflate", None),
            ("connection", "close", None),
        ] {
            let mut h = HeaderMap::new();
            h.insert("accept", HeaderValue::from_static("*/*"));
            h.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
            strip_hop_by_hop(&mut h, None);
            assert_eq!(
                h.get(name).map(|v| v.to_str().unwrap()),
                left,
                "{name}: {value}"
            );
            assert_eq!(h.len(), 1 + usize::from(left.is_some()), "{name}: {value}");
        }
    }

    #[test]
    fn forwarded_for_appends() {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_static("10.0.0.1"));
        add_forwarded(
            &mut h,
            &HeaderValue::from_static("127.0.0.1"),
            "http",
            Some(&HeaderValue::from_static("api.test")),
        );
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 127.0.0.1");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(h["x-forwarded-host"], "api.test");
        let (a, b) = (RequestId::new(), RequestId::new());
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.as_str(), b.as_str());
        let given = HeaderValue::from_static("rid-7");
        assert_eq!(RequestId::given(&given).unwrap().value(), "rid-7");
        let not_text = HeaderValue::from_bytes(b"r\xffd").unwrap();
        assert!(RequestId::given(&not_text).is_none());
    }
}
