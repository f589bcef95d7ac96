//! A batch of spans as an OTLP `ExportTraceServiceRequest` in protobuf, written straight from
//! driftwatch's own span records (`span`). Written here rather than taken from
//! `opentelemetry-otlp`: its path converts every span into `opentelemetry-proto`'s structs first
//! (a `String` allocated per attribute key and value, then each freed), which measured about
//! 3.9 µs of CPU a span, a tenth of an audited request (docs/benchmarks.md). The wire format is
//! small and fixed (opentelemetry-proto's `trace/v1/trace.proto`); a unit test decodes what this
//! writes with the official messages and compares it with their own conversion of the same spans.

use std::time::{SystemTime, UNIX_EPOCH};

use super::record::{Attribute, Event, Record, SpanContext, SpanKind, Status, Value};

/// The resource and the scope, encoded once: every batch starts with them.
pub struct Header {
    resource: Vec<u8>,
    scope: Vec<u8>,
}

impl Header {
    pub fn new(resource: &[(String, String)], scope: (&str, &str)) -> Header {
        let mut r = Vec::new();
        for (key, value) in resource {
            message(&mut r, 1, |out| {
                string(out, 1, key);
                message(out, 2, |o| bytes(o, 1, value.as_bytes()));
            });
        }
        let mut s = Vec::new();
        string(&mut s, 1, scope.0);
        string(&mut s, 2, scope.1);
        Header {
            resource: r,
            scope: s,
        }
    }
}

/// `ExportTraceServiceRequest { resource_spans: [{ resource, scope_spans: [{ scope, spans }] }] }`.
pub fn request(header: &Header, spans: &[Record]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + spans.len() * 640);
    message(&mut out, 1, |rs| {
        bytes(rs, 1, &header.resource);
        message(rs, 2, |ss| {
            bytes(ss, 1, &header.scope);
            for span in spans {
                message(ss, 2, |s| self::span(s, span));
            }
        });
    });
    out
}

fn span(out: &mut Vec<u8>, span: &Record) {
    let cx = &span.context;
    bytes(out, 1, &cx.trace_id);
    bytes(out, 2, &cx.span_id);
    trace_state(out, cx);
    if let Some((parent, _)) = &span.parent {
        bytes(out, 4, parent);
    }
    let remote = span.parent.is_some_and(|(_, remote)| remote);
    fixed32(out, 16, flags(remote, cx.sampled));
    string(out, 5, &span.name);
    uint(out, 6, kind(span.kind));
    fixed64(out, 7, nanos(span.start));
    fixed64(out, 8, nanos(span.end));
    for a in &span.attributes {
        message(out, 9, |o| attribute(o, a));
    }
    for e in &span.events {
        message(out, 11, |o| event(o, e));
    }
    uint(out, 12, u64::from(span.dropped_events));
    for link in &span.links {
        message(out, 13, |o| {
            bytes(o, 1, &link.trace_id);
            bytes(o, 2, &link.span_id);
            trace_state(o, link);
            fixed32(o, 6, flags(link.remote, link.sampled));
        });
    }
    message(out, 15, |o| match &span.status {
        Status::Unset => {}
        Status::Error(description) => {
            string(o, 2, description);
            uint(o, 3, 2);
        }
    });
}

fn event(out: &mut Vec<u8>, event: &Event) {
    fixed64(out, 1, nanos(event.time));
    string(out, 2, event.name);
    for a in &event.attributes {
        message(out, 3, |o| attribute(o, a));
    }
}

/// `tracestate`, when there is one (most spans have none).
fn trace_state(out: &mut Vec<u8>, cx: &SpanContext) {
    if let Some(state) = &cx.trace_state {
        string(out, 3, state);
    }
}

/// The span flags: the W3C trace flags, and whether the parent was remote (OTLP 1.x).
fn flags(remote: bool, sampled: bool) -> u32 {
    const HAS_IS_REMOTE: u32 = 0x100;
    const IS_REMOTE: u32 = 0x200;
    u32::from(sampled) | HAS_IS_REMOTE | if remote { IS_REMOTE } else { 0 }
}

fn kind(kind: SpanKind) -> u64 {
    match kind {
        SpanKind::Server => 2,
        SpanKind::Client => 3,
    }
}

fn nanos(t: SystemTime) -> u64 {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}

fn attribute(out: &mut Vec<u8>, a: &Attribute) {
    string(out, 1, a.key);
    message(out, 2, |o| match &a.value {
        Value::Int(i) => {
            key(o, 3, 0);
            varint(o, *i as u64);
        }
        text => bytes(o, 1, text.as_str().unwrap_or_default().as_bytes()),
    });
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A string field; proto3 leaves an empty one out.
fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    if !s.is_empty() {
        bytes(out, field, s.as_bytes());
    }
}

/// An integer or enum field; proto3 leaves zero out.
fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        key(out, field, 0);
        varint(out, v);
    }
}

fn fixed32(out: &mut Vec<u8>, field: u32, v: u32) {
    key(out, field, 5);
    out.extend_from_slice(&v.to_le_bytes());
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A nested message, written in place after a one-byte length, which is all most need (under
/// 128 bytes: an attribute, an event's); a longer one's length takes the bytes it needs more,
/// put in by one move of the message (a span's few hundred bytes, a batch's once).
fn message(out: &mut Vec<u8>, field: u32, write: impl FnOnce(&mut Vec<u8>)) {
    key(out, field, 2);
    let at = out.len();
    out.push(0);
    write(out);
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
        return;
    }
    // The varint on the stack: a heap allocation per message showed in perf.
    let (mut more, mut n, mut v) = ([0u8; 10], 0, len as u64);
    while v >= 0x80 {
        more[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    more[n] = v as u8;
    out[at] = more[0];
    out.splice(at + 1..at + 1, more[1..=n].iter().copied());
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::Arc;
    use std::time::Duration;

    use opentelemetry::trace as otel;
    use opentelemetry::{InstrumentationScope, KeyValue};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::trace::v1::ResourceSpans;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
    use prost::Message;

    use super::{Header, request};
    use crate::telemetry::record::{Event, Record, SpanContext, SpanKind, Status, Value, attr};

    fn context(trace: u128, span: u64, remote: bool, state: Option<&str>) -> SpanContext {
        SpanContext {
            trace_id: trace.to_be_bytes(),
            span_id: span.to_be_bytes(),
            sampled: true,
            remote,
            trace_state: state.map(Arc::from),
        }
    }

    fn records() -> Vec<Record> {
        let start = std::time::UNIX_EPOCH + Duration::from_nanos(1_765_000_000_123_456_789);
        let full = Record {
            context: context(
                0x0af7651916cd43dd8448eb211c80319c,
                0xb7ad6b7169203331,
                false,
                Some("vendor=x1,other=y"),
            ),
            parent: Some((0x00f067aa0ba902b7_u64.to_be_bytes(), true)),
            name: "PUT /channels/{id}".into(),
            kind: SpanKind::Client,
            start,
            end: start + Duration::from_millis(3),
            attributes: vec![
                attr("http.request.method", "PUT"),
                attr("http.response.status_code", 422_i64),
                attr("driftwatch.api", Arc::<str>::from("channels")),
                attr("driftwatch.request_id", "r-1".to_owned()),
                attr("driftwatch.negative", -3_i64),
            ],
            events: vec![Event {
                name: "driftwatch.finding",
                time: start + Duration::from_micros(40),
                attributes: vec![attr("driftwatch.finding.kind", "silent_clear_risk")],
            }],
            dropped_events: 1,
            links: vec![
                context(7, 8, true, Some("k=v")),
                context(9, 10, false, None),
            ],
            status: Status::Error(
                "refused by driftwatch: silent_clear_risk /graphicsElementIds".into(),
            ),
        };
        let root = Record {
            context: context(5, 6, false, None),
            parent: None,
            name: format!("tools/call {}", "x".repeat(200)),
            kind: SpanKind::Server,
            start,
            end: start,
            attributes: Vec::new(),
            events: Vec::new(),
            dropped_events: 0,
            links: Vec::new(),
            status: Status::Unset,
        };
        let local = Record {
            parent: Some((11_u64.to_be_bytes(), false)),
            context: context(5, 12, false, None),
            ..root.clone()
        };
        vec![full, root, local]
    }

    /// The same span as the SDK holds it, for the official conversion.
    fn sdk(r: &Record, scope: &InstrumentationScope) -> SpanData {
        let cx = |c: &SpanContext| {
            let state = (c.trace_state.as_deref())
                .map(|s| s.parse().unwrap())
                .unwrap_or_default();
            otel::SpanContext::new(
                otel::TraceId::from_bytes(c.trace_id),
                otel::SpanId::from_bytes(c.span_id),
                otel::TraceFlags::new(u8::from(c.sampled)),
                c.remote,
                state,
            )
        };
        let kvs = |a: &[crate::telemetry::record::Attribute]| -> Vec<KeyValue> {
            (a.iter())
                .map(|a| match &a.value {
                    Value::Int(i) => KeyValue::new(a.key, *i),
                    v => KeyValue::new(a.key, v.as_str().unwrap().to_owned()),
                })
                .collect()
        };
        let mut events = SpanEvents::default();
        events.events = (r.events.iter())
            .map(|e| otel::Event::new(e.name, e.time, kvs(&e.attributes), 0))
            .collect();
        events.dropped_count = r.dropped_events;
        let mut links = SpanLinks::default();
        links.links = (r.links.iter())
            .map(|l| otel::Link::new(cx(l), Vec::new(), 0))
            .collect();
        SpanData {
            span_context: cx(&r.context),
            parent_span_id: (r.parent)
                .map(|(p, _)| otel::SpanId::from_bytes(p))
                .unwrap_or(otel::SpanId::INVALID),
            parent_span_is_remote: r.parent.is_some_and(|(_, remote)| remote),
            span_kind: match r.kind {
                SpanKind::Server => otel::SpanKind::Server,
                SpanKind::Client => otel::SpanKind::Client,
            },
            name: Cow::Owned(r.name.clone()),
            start_time: r.start,
            end_time: r.end,
            attributes: kvs(&r.attributes),
            dropped_attributes_count: 0,
            events,
            links,
            status: match &r.status {
                Status::Unset => otel::Status::Unset,
                Status::Error(d) => otel::Status::error(d.clone()),
            },
            instrumentation_scope: scope.clone(),
        }
    }

    /// What this writes, decoded with the official messages, is what their own conversion of
    /// the same spans gives.
    #[test]
    fn the_request_decodes_to_what_the_official_conversion_gives() {
        let scope = InstrumentationScope::builder("driftwatch")
            .with_version("1.2.3")
            .build();
        let resource = [
            ("deployment.environment", "test"),
            ("service.name", "sidecar"),
        ];
        let owned: Vec<(String, String)> = (resource.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let records = records();
        let ours = request(&Header::new(&owned, ("driftwatch", "1.2.3")), &records);
        let ours = ExportTraceServiceRequest::decode(ours.as_slice()).unwrap();
        let sdk_resource = Resource::builder_empty()
            .with_attributes(resource.map(|(k, v)| KeyValue::new(k, v)))
            .build();
        let mut theirs: Vec<ResourceSpans> = group_spans_by_resource_and_scope(
            records.iter().map(|r| sdk(r, &scope)).collect(),
            &ResourceAttributesWithSchema::from(&sdk_resource),
        );
        // The SDK's resource keeps its attributes in a map: their order is not the wire's.
        let key = |kv: &opentelemetry_proto::tonic::common::v1::KeyValue| kv.key.clone();
        let resource = theirs[0].resource.as_mut().unwrap();
        resource.attributes.sort_by_key(key);
        let mut ours = ours.resource_spans;
        ours[0]
            .resource
            .as_mut()
            .unwrap()
            .attributes
            .sort_by_key(key);
        assert_eq!(ours, theirs);
        assert_eq!(ours[0].scope_spans[0].spans.len(), 3);
    }
}
