//! W3C trace context in and out: from a request's `traceparent` and `tracestate` headers, from
//! an MCP message's `params._meta` (SEP-414 carries the same two keys there), and into the
//! headers of the request driftwatch forwards. A malformed `traceparent` reads as none, a
//! malformed `tracestate` as empty, flags other than sampled are dropped: as the SDK's
//! `TraceContextPropagator` reads them, which a test holds side by side with this over valid
//! and malformed headers (where W3C is stricter than the SDK, as on an empty key or `a==b`,
//! this follows W3C). An empty `tracestate` is not sent (W3C: avoid it; the SDK sends one).

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::record::{HEX, SpanContext, write_hex};

/// The header that names a request's parent span.
pub const TRACEPARENT: &str = "traceparent";

/// The remote parent a request's headers name, if any.
pub fn from_headers(headers: &HeaderMap) -> Option<SpanContext> {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    read(text(&TRACEPARENT_NAME)?, text(&TRACESTATE_NAME))
}

/// The remote parent an MCP request's `params._meta` names, if any.
pub fn from_meta(meta: Option<&Value>) -> Option<SpanContext> {
    let meta = meta?;
    let text = |key| meta.get(key).and_then(Value::as_str);
    read(text(TRACEPARENT)?, text("tracestate"))
}

/// `version-traceid-spanid-flags`: a version up to `fe` (`00` with exactly those four parts),
/// lowercase hex, ids not all zero.
fn read(parent: &str, state: Option<&str>) -> Option<SpanContext> {
    // 55 bytes for version 00; a later version may add parts, not megabytes.
    if parent.len() > 512 {
        return None;
    }
    let parts: Vec<&str> = parent.trim().split_terminator('-').collect();
    let [version, trace, span, flags, ..] = parts[..] else {
        return None;
    };
    let version = u8::from_str_radix(version, 16).ok()?;
    if version == 0xff || (version == 0 && parts.len() != 4) {
        return None;
    }
    let trace_id: [u8; 16] = lower_hex(trace)?;
    let span_id: [u8; 8] = lower_hex(span)?;
    let flags: [u8; 1] = lower_hex(flags)?;
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some(SpanContext {
        trace_id,
        span_id,
        sampled: flags[0] & 1 == 1,
        remote: true,
        trace_state: state.and_then(trace_state),
    })
}

/// Exactly `2 * N` lowercase hex digits.
fn lower_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digit = |c: u8| HEX.iter().position(|&h| h == c).map(|d| d as u8);
    let text = text.as_bytes();
    if text.len() != 2 * N {
        return None;
    }
    let mut out = [0; N];
    for (i, pair) in text.chunks(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// `tracestate`'s members, trimmed and joined by `,`: at most 32 of them, each `key=value` with
/// W3C's key (lowercase, digits, `_-*/`, one `@` before a vendor of at most 13) and a value
/// without `,` or `=`. A malformed one makes it none (what the SDK does). None when empty.
/// Past 512 bytes, cut as W3C says (`within_bound`).
fn trace_state(text: &str) -> Option<Arc<str>> {
    let mut members = Vec::new();
    for member in text.split_terminator(',').take(32) {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let (key, value) = member.split_once('=')?;
        if !valid_key(key) || value.len() > 256 || value.contains('=') {
            return None;
        }
        members.push(member);
    }
    within_bound(&mut members);
    (!members.is_empty()).then(|| Arc::from(members.join(",")))
}

/// Bytes of `tracestate` kept and passed on: W3C's "at least 512 characters" that every
/// platform should propagate, so a peer's 16 KB of valid members does not ride on each span.
const MAX_TRACE_STATE: usize = 512;

/// W3C's truncation: past the bound, members longer than 128 characters go first, then
/// members from the end (the oldest), until the rest fits.
fn within_bound(members: &mut Vec<&str>) {
    let joined = |m: &[&str]| {
        m.iter()
            .map(|m| m.len() + 1)
            .sum::<usize>()
            .saturating_sub(1)
    };
    if joined(members) > MAX_TRACE_STATE {
        members.retain(|m| m.len() <= 128);
    }
    while joined(members) > MAX_TRACE_STATE {
        members.pop();
    }
}

fn valid_key(key: &str) -> bool {
    let b = key.as_bytes();
    let allowed = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit() || b"_-*/@".contains(&c);
    let first = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if key.len() > 256 || !b.iter().all(|&c| allowed(c)) || !first(b.first()) {
        return false;
    }
    match key.split_once('@') {
        None => true,
        Some((_, vendor)) => {
            vendor.len() <= 13 && !vendor.contains('@') && first(vendor.as_bytes().first())
        }
    }
}

/// `traceparent` (and `tracestate`) naming `span` as the parent, replacing any there.
pub fn inject(span: &SpanContext, headers: &mut HeaderMap) {
    let mut text = [0u8; 55];
    text[..3].copy_from_slice(b"00-");
    write_hex(&mut text[3..35], &span.trace_id);
    text[35] = b'-';
    write_hex(&mut text[36..52], &span.span_id);
    text[52..].copy_from_slice(if span.sampled { b"-01" } else { b"-00" });
    if let Ok(value) = HeaderValue::from_bytes(&text) {
        headers.insert(TRACEPARENT_NAME, value);
    }
    match span.trace_state.as_deref().map(HeaderValue::from_str) {
        Some(Ok(value)) => {
            headers.insert(TRACESTATE_NAME, value);
        }
        _ => {
            headers.remove(TRACESTATE_NAME);
        }
    }
}

const TRACEPARENT_NAME: HeaderName = HeaderName::from_static(TRACEPARENT);
const TRACESTATE_NAME: HeaderName = HeaderName::from_static("tracestate");

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::{TraceContextExt, TraceState};
    use opentelemetry_http::{HeaderExtractor, HeaderInjector};
    use opentelemetry_sdk::propagation::TraceContextPropagator;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn headers(parent: &str, state: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("traceparent", parent.parse().unwrap());
        if let Some(state) = state {
            h.insert("tracestate", state.parse().unwrap());
        }
        h
    }

    /// What the SDK's propagator reads from the same headers, as ours.
    fn theirs(h: &HeaderMap) -> Option<SpanContext> {
        let cx = TraceContextPropagator::new().extract(&HeaderExtractor(h));
        let span = cx.span();
        let sc = span.span_context();
        let state = sc.trace_state().header();
        sc.is_valid().then(|| SpanContext {
            trace_id: sc.trace_id().to_bytes(),
            span_id: sc.span_id().to_bytes(),
            sampled: sc.is_sampled(),
            remote: sc.is_remote(),
            trace_state: (!state.is_empty()).then(|| Arc::from(state)),
        })
    }

    #[test]
    fn headers_read_as_the_sdks_propagator_reads_them() {
        let parents = [
            PARENT,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
            " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "junk",
        ];
        let states = [
            None,
            Some("vendor=v1"),
            Some(" a=1 ,, b@tenant=2\t"),
            Some("t@vendorname=1,k=v"),
            Some("Upper=1"),
            Some("novalue"),
            Some("a=b=c"),
            Some("@x=1"),
        ];
        for parent in parents {
            for state in states {
                let h = headers(parent, state);
                assert_eq!(from_headers(&h), theirs(&h), "{parent} {state:?}");
            }
        }
        let read = from_headers(&headers(PARENT, Some(" a=1 ,, b@tenant=2"))).unwrap();
        assert_eq!(read.trace_state.as_deref(), Some("a=1,b@tenant=2"));
        assert!(read.sampled && read.remote);
    }

    #[test]
    fn a_tracestate_past_512_bytes_loses_its_long_members_first_then_its_last() {
        let long = format!("big={}", "v".repeat(200));
        let member = |i: usize| format!("k{i:02}={}", "x".repeat(40));
        let mut sent: Vec<String> = (0..20).map(member).collect();
        sent.insert(3, long.clone());
        let read = from_headers(&headers(PARENT, Some(&sent.join(",")))).unwrap();
        let kept = read.trace_state.unwrap();
        let expected: Vec<String> = (0..11).map(member).collect();
        assert_eq!(&*kept, expected.join(","));
        assert!(kept.len() <= MAX_TRACE_STATE, "{}", kept.len());
        let short = format!("a=1,{long}");
        let read = from_headers(&headers(PARENT, Some(&short))).unwrap();
        assert_eq!(
            read.trace_state.as_deref(),
            Some(short.as_str()),
            "within the bound"
        );
    }

    #[test]
    fn meta_and_headers_name_the_same_parent() {
        let meta = serde_json::json!({"traceparent": PARENT, "progressToken": 3});
        let from_meta = from_meta(Some(&meta)).unwrap();
        let from_headers = from_headers(&headers(PARENT, None)).unwrap();
        assert_eq!(from_meta, from_headers);
        assert_eq!(from_meta.span_id_hex(), "00f067aa0ba902b7");
        assert_eq!(from_meta.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(from_meta.sampled && from_meta.remote);
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
        for (sampled, state) in [(true, Some("vendor=v1")), (false, None)] {
            let span = SpanContext {
                trace_id: 0x4bf92f3577b34da6a3ce929d0e0e4736_u128.to_be_bytes(),
                span_id: 0x00f067aa0ba902b7_u64.to_be_bytes(),
                sampled,
                remote: false,
                trace_state: state.map(Arc::from),
            };
            let mut ours = HeaderMap::new();
            inject(&span, &mut ours);
            let sdk = opentelemetry::trace::SpanContext::new(
                opentelemetry::trace::TraceId::from_bytes(span.trace_id),
                opentelemetry::trace::SpanId::from_bytes(span.span_id),
                opentelemetry::trace::TraceFlags::new(u8::from(sampled)),
                false,
                state
                    .map(|s| s.parse().unwrap())
                    .unwrap_or(TraceState::NONE),
            );
            let cx = opentelemetry::Context::new().with_remote_span_context(sdk);
            let mut theirs = HeaderMap::new();
            TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(&mut theirs));
            // The SDK writes an empty `tracestate`, which W3C says to avoid sending; we leave
            // it out.
            if theirs.get("tracestate").is_some_and(|v| v.is_empty()) {
                theirs.remove("tracestate");
            }
            assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn inject_replaces_the_parent() {
        let cx = from_headers(&headers(PARENT, None)).unwrap();
        let mut out = headers("junk", Some("old=1"));
        inject(&cx, &mut out);
        assert_eq!(out["traceparent"], PARENT);
        assert_eq!(out.get_all("traceparent").iter().count(), 1);
        assert!(out.get("tracestate").is_none());
    }
}
