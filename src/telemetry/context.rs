//! W3C trace context in and out: from a request's `traceparent` and `tracestate` headers, from
//! an MCP message's `params._meta` (SEP-414 carries the same two keys there), and into the
//! headers of the request driftwatch forwards. The SDK's `TraceContextPropagator` reads and
//! writes them; a malformed one reads as none.

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry_http::HeaderExtractor;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::Value;

/// The header that names a request's parent span.
pub const TRACEPARENT: &str = "traceparent";

/// The remote parent a request's headers name, if any.
pub fn from_headers(headers: &HeaderMap) -> Option<Context> {
    remote(&HeaderExtractor(headers))
}

/// The remote parent an MCP request's `params._meta` names, if any.
pub fn from_meta(meta: Option<&Value>) -> Option<Context> {
    remote(&Meta(meta?))
}

fn remote(extractor: &dyn Extractor) -> Option<Context> {
    let cx = TraceContextPropagator::new().extract_with_context(&Context::new(), extractor);
    cx.span().span_context().is_valid().then_some(cx)
}

/// `traceparent` (and `tracestate`) naming `span` as the parent, replacing any there. Written
/// here, not by the propagator: it parsed the header's name and formatted through a generic
/// writer on every request (1 % of a traced sidecar's time under load).
pub fn inject(span: &SpanContext, headers: &mut HeaderMap) {
    let flags = span.trace_flags().to_u8();
    let text = format!("00-{}-{}-{flags:02x}", span.trace_id(), span.span_id());
    if let Ok(value) = HeaderValue::try_from(text) {
        headers.insert(TRACEPARENT_NAME, value);
    }
    let state = span.trace_state().header();
    match HeaderValue::try_from(state) {
        Ok(value) if !value.is_empty() => {
            headers.insert(TRACESTATE_NAME, value);
        }
        _ => {
            headers.remove(TRACESTATE_NAME);
        }
    }
}

const TRACEPARENT_NAME: HeaderName = HeaderName::from_static(TRACEPARENT);
const TRACESTATE_NAME: HeaderName = HeaderName::from_static("tracestate");

/// `_meta` as the propagator reads it: its string members.
struct Meta<'a>(&'a Value);

impl Extractor for Meta<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn meta_and_headers_name_the_same_parent() {
        let meta = serde_json::json!({"traceparent": PARENT, "progressToken": 3});
        let from_meta = from_meta(Some(&meta)).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", PARENT.parse().unwrap());
        let from_headers = from_headers(&headers).unwrap();
        let a = from_meta.span().span_context().clone();
        let b = from_headers.span().span_context().clone();
        assert_eq!(a, b);
        assert_eq!(a.span_id().to_string(), "00f067aa0ba902b7");
        assert!(a.is_sampled() && a.is_remote());
    }

    #[test]
    fn a_malformed_or_absent_parent_reads_as_none() {
        assert!(from_meta(None).is_none());
        let meta = serde_json::json!({"traceparent": "00-zz-00f067aa0ba902b7-01"});
        assert!(from_meta(Some(&meta)).is_none());
        assert!(from_meta(Some(&serde_json::json!([1]))).is_none());
    }

    #[test]
    fn inject_writes_what_the_sdks_propagator_writes() {
        use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};
        let state = TraceState::from_key_value([("vendor", "v1")]).unwrap();
        let span = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            false,
            state,
        );
        let mut ours = HeaderMap::new();
        inject(&span, &mut ours);
        let mut theirs = HeaderMap::new();
        let cx = Context::new().with_remote_span_context(span);
        TraceContextPropagator::new()
            .inject_context(&cx, &mut opentelemetry_http::HeaderInjector(&mut theirs));
        assert_eq!(ours, theirs);
        assert_eq!(ours["traceparent"], PARENT);
    }

    #[test]
    fn inject_replaces_the_parent() {
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", PARENT.parse().unwrap());
        let cx = from_headers(&headers).unwrap();
        let mut out = HeaderMap::new();
        out.insert("traceparent", "junk".parse().unwrap());
        inject(cx.span().span_context(), &mut out);
        assert_eq!(out["traceparent"], PARENT);
        assert_eq!(out.get_all("traceparent").iter().count(), 1);
    }
}
