//! OTLP's protobuf (`trace/v1/trace.proto`), written straight from driftwatch's spans: a
//! span's message begun at its start, each attribute and event appended as it is set
//! (`span`), closed at its end; and a batch's `ExportTraceServiceRequest` around the spans'
//! messages. Written here rather than taken from
//! `opentelemetry-otlp`: its path converts every span into `opentelemetry-proto`'s structs first
//! (a `String` allocated per attribute key and value, then each freed), which measured about
//! 3.9 µs of CPU a span, a tenth of an audited request (docs/benchmarks.md). The wire format is
//! small and fixed; a unit test decodes what this writes with the official messages and
//! compares it with their own conversion of the same spans.

use std::time::{SystemTime, UNIX_EPOCH};

use super::record::{SpanContext, SpanKind, Value};

/// The resource and the scope, encoded once: every batch starts with them.
pub struct Header {
    resource: Vec<u8>,
    scope: Vec<u8>,
}

impl Header {
    pub fn new(resource: &[(String, String)], scope: (&str, &str)) -> Header {
        let mut r = Vec::new();
        for (key, value) in resource {
            key_value(&mut r, 1, key, Any::Str(value));
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

/// An attribute's value as the wire has it: text, an integer or a boolean.
#[derive(Clone, Copy)]
pub enum Any<'a> {
    Str(&'a str),
    Int(i64),
    Bool(bool),
}

impl<'a> From<&'a Value> for Any<'a> {
    fn from(value: &'a Value) -> Any<'a> {
        match value {
            Value::Int(i) => Any::Int(*i),
            Value::Bool(b) => Any::Bool(*b),
            text => Any::Str(text.as_str().unwrap_or_default()),
        }
    }
}

/// `ExportTraceServiceRequest { resource_spans: [{ resource, scope_spans: [{ scope, spans }] }] }`,
/// each span's message already written (`start`, `attribute`, `event`, `end`).
pub fn request(header: &Header, spans: &[Vec<u8>]) -> Vec<u8> {
    let size: usize = spans.iter().map(|s| s.len() + 4).sum();
    let mut out = Vec::with_capacity(32 + header.resource.len() + header.scope.len() + size);
    message(&mut out, 1, |rs| {
        bytes(rs, 1, &header.resource);
        message(rs, 2, |ss| {
            bytes(ss, 1, &header.scope);
            for span in spans {
                bytes(ss, 2, span);
            }
        });
    });
    out
}

/// What a span's message holds of its start: its ids, parent, name, kind, start, links and
/// how many links were left out. Protobuf lets fields come in any order, so its attributes and
/// events follow as they are set (`attribute`, `event`) and `end` closes it: one buffer, never
/// moved.
pub fn start(
    out: &mut Vec<u8>,
    cx: &SpanContext,
    parent: Option<&SpanContext>,
    begun: ((&str, &str), SpanKind, SystemTime),
    (links, dropped_links): (&[SpanContext], u32),
) {
    let (name, kind, time) = begun;
    bytes(out, 1, &cx.trace_id);
    bytes(out, 2, &cx.span_id);
    trace_state(out, cx);
    if let Some(parent) = parent {
        bytes(out, 4, &parent.span_id);
    }
    fixed32(out, 16, flags(parent.is_some_and(|p| p.remote), cx.sampled));
    name_field(out, name);
    uint(out, 6, self::kind(kind));
    fixed64(out, 7, nanos(time));
    for link in links {
        message(out, 13, |o| {
            bytes(o, 1, &link.trace_id);
            bytes(o, 2, &link.span_id);
            trace_state(o, link);
            fixed32(o, 6, flags(link.remote, link.sampled));
        });
    }
    uint(out, 14, u64::from(dropped_links));
}

/// `Span.name` from its two parts, a space between them when the second is there.
fn name_field(out: &mut Vec<u8>, (first, second): (&str, &str)) {
    let len = first.len()
        + if second.is_empty() {
            0
        } else {
            1 + second.len()
        };
    key(out, 5, 2);
    varint(out, len as u64);
    out.extend_from_slice(first.as_bytes());
    if !second.is_empty() {
        out.push(b' ');
        out.extend_from_slice(second.as_bytes());
    }
}

/// The end of a span's message: its end time, the events it dropped, its status.
pub fn end(out: &mut Vec<u8>, time: SystemTime, dropped_events: u32, error: Option<&str>) {
    fixed64(out, 8, nanos(time));
    uint(out, 12, u64::from(dropped_events));
    message(out, 15, |o| {
        if let Some(description) = error {
            string(o, 2, description);
            uint(o, 3, 2);
        }
    });
}

/// `Span.kind` again, after its start: protobuf takes the last value of a field that came
/// twice, so a span that turned out to be another kind says so without being rewritten.
pub fn kind_again(out: &mut Vec<u8>, kind: SpanKind) {
    uint(out, 6, self::kind(kind));
}

/// One of `Span.attributes`.
pub fn attribute(out: &mut Vec<u8>, key: &str, value: Any<'_>) {
    key_value(out, 9, key, value);
}

/// One of `Span.events`, its attributes text.
pub fn event<'a>(
    out: &mut Vec<u8>,
    time: SystemTime,
    name: &str,
    attributes: impl IntoIterator<Item = (&'a str, &'a str)>,
) {
    message(out, 11, |o| {
        fixed64(o, 1, nanos(time));
        string(o, 2, name);
        for (key, value) in attributes {
            key_value(o, 3, key, Any::Str(value));
        }
    });
}

/// A `KeyValue`, its lengths counted first: an attribute is written in one pass, with no
/// length put in after.
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: Any<'_>) {
    let any = match value {
        Any::Str(s) => 1 + varint_len(s.len() as u64) + s.len(),
        Any::Int(i) => 1 + varint_len(i as u64),
        Any::Bool(_) => 2,
    };
    let kv = 1 + varint_len(key.len() as u64) + key.len() + 1 + varint_len(any as u64) + any;
    out.reserve(kv + 6);
    self::key(out, field, 2);
    varint(out, kv as u64);
    bytes(out, 1, key.as_bytes());
    self::key(out, 2, 2);
    varint(out, any as u64);
    match value {
        Any::Str(s) => bytes(out, 1, s.as_bytes()),
        Any::Int(i) => {
            self::key(out, 3, 0);
            varint(out, i as u64);
        }
        Any::Bool(b) => {
            self::key(out, 2, 0);
            out.push(u8::from(b));
        }
    }
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
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
    use std::time::{Duration, SystemTime};

    use opentelemetry::trace as otel;
    use opentelemetry::{InstrumentationScope, KeyValue};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::trace::v1::ResourceSpans;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
    use prost::Message;

    use super::{Any, Header, attribute, end, event, request, start};
    use crate::telemetry::record::{SpanContext, SpanKind, Value};

    type TextAttributes = Vec<(&'static str, &'static str)>;

    const LONG: &str = "a-tool-whose-name-is-long-enough-that-the-span-name-takes-a-length-of-two-bytes-\
        on-the-wire-which-is-what-this-test-needs-to-cover-and-a-little-more-to-be-sure-of-it";

    /// One span as the test states it, which both sides are built from.
    struct Case {
        cx: SpanContext,
        parent: Option<([u8; 8], bool)>,
        name: (&'static str, &'static str),
        kind: SpanKind,
        start: SystemTime,
        end: SystemTime,
        attributes: Vec<(&'static str, Value)>,
        events: Vec<(SystemTime, &'static str, TextAttributes)>,
        dropped_events: u32,
        links: Vec<SpanContext>,
        dropped_links: u32,
        error: Option<&'static str>,
    }

    fn context(trace: u128, span: u64, remote: bool, state: Option<&str>) -> SpanContext {
        SpanContext {
            trace_id: trace.to_be_bytes(),
            span_id: span.to_be_bytes(),
            sampled: true,
            remote,
            trace_state: state.map(Arc::from),
        }
    }

    fn cases() -> Vec<Case> {
        let start = std::time::UNIX_EPOCH + Duration::from_nanos(1_765_000_000_123_456_789);
        let full = Case {
            cx: context(
                0x0af7651916cd43dd8448eb211c80319c,
                0xb7ad6b7169203331,
                false,
                Some("vendor=x1,other=y"),
            ),
            parent: Some((0x00f067aa0ba902b7_u64.to_be_bytes(), true)),
            name: ("PUT", "/channels/{id}"),
            kind: SpanKind::Client,
            start,
            end: start + Duration::from_millis(3),
            attributes: vec![
                ("http.request.method", Value::Static("PUT")),
                ("http.response.status_code", Value::Int(422)),
                ("driftwatch.api", Value::Text("channels".into())),
                ("driftwatch.request_id", Value::Text("r-1".into())),
                ("driftwatch.negative", Value::Int(-3)),
                ("driftwatch.truncated", Value::Bool(true)),
                ("driftwatch.no", Value::Bool(false)),
            ],
            events: vec![(
                start + Duration::from_micros(40),
                "driftwatch.finding",
                vec![
                    ("driftwatch.finding.kind", "silent_clear_risk"),
                    ("driftwatch.finding.field", "/graphicsElementIds"),
                ],
            )],
            dropped_events: 1,
            links: vec![
                context(7, 8, true, Some("k=v")),
                context(9, 10, false, None),
            ],
            dropped_links: 3,
            error: Some("refused by driftwatch: silent_clear_risk /graphicsElementIds"),
        };
        let root = Case {
            cx: context(5, 6, false, None),
            parent: None,
            // Past 127 bytes: a length of two bytes.
            name: ("tools/call", LONG),
            kind: SpanKind::Server,
            start,
            end: start,
            attributes: Vec::new(),
            events: Vec::new(),
            dropped_events: 0,
            links: Vec::new(),
            dropped_links: 0,
            error: None,
        };
        let local = Case {
            cx: context(5, 12, false, None),
            parent: Some((11_u64.to_be_bytes(), false)),
            name: ("GET", ""),
            attributes: vec![("k", Value::Text("v".repeat(300)))],
            ..root_like(start)
        };
        vec![full, root, local]
    }

    fn root_like(start: SystemTime) -> Case {
        Case {
            cx: context(1, 2, false, None),
            parent: None,
            name: ("", ""),
            kind: SpanKind::Client,
            start,
            end: start + Duration::from_nanos(1),
            attributes: Vec::new(),
            events: Vec::new(),
            dropped_events: 0,
            links: Vec::new(),
            dropped_links: 0,
            error: None,
        }
    }

    /// Ours: written as a span writes it.
    fn ours(c: &Case) -> Vec<u8> {
        let parent = (c.parent).map(|(span_id, remote)| SpanContext {
            span_id,
            remote,
            ..c.cx.clone()
        });
        let mut out = Vec::new();
        start(
            &mut out,
            &c.cx,
            parent.as_ref(),
            (c.name, c.kind, c.start),
            (&c.links, c.dropped_links),
        );
        for (key, value) in &c.attributes {
            attribute(&mut out, key, Any::from(value));
        }
        for (time, name, attributes) in &c.events {
            event(&mut out, *time, name, attributes.iter().copied());
        }
        end(&mut out, c.end, c.dropped_events, c.error);
        out
    }

    /// Theirs: the same span as the SDK holds it, for the official conversion.
    fn sdk(c: &Case, scope: &InstrumentationScope) -> SpanData {
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
        let mut events = SpanEvents::default();
        events.events = (c.events.iter())
            .map(|(time, name, a)| {
                let a = a.iter().map(|(k, v)| KeyValue::new(*k, *v)).collect();
                otel::Event::new(*name, *time, a, 0)
            })
            .collect();
        events.dropped_count = c.dropped_events;
        let mut links = SpanLinks::default();
        links.links = (c.links.iter())
            .map(|l| otel::Link::new(cx(l), Vec::new(), 0))
            .collect();
        links.dropped_count = c.dropped_links;
        SpanData {
            span_context: cx(&c.cx),
            parent_span_id: (c.parent)
                .map(|(p, _)| otel::SpanId::from_bytes(p))
                .unwrap_or(otel::SpanId::INVALID),
            parent_span_is_remote: c.parent.is_some_and(|(_, remote)| remote),
            span_kind: match c.kind {
                SpanKind::Server => otel::SpanKind::Server,
                SpanKind::Client => otel::SpanKind::Client,
            },
            name: Cow::Owned(match c.name {
                (first, "") => first.to_owned(),
                (first, second) => format!("{first} {second}"),
            }),
            start_time: c.start,
            end_time: c.end,
            attributes: (c.attributes.iter())
                .map(|(k, v)| match v {
                    Value::Int(i) => KeyValue::new(*k, *i),
                    Value::Bool(b) => KeyValue::new(*k, *b),
                    v => KeyValue::new(*k, v.as_str().unwrap().to_owned()),
                })
                .collect(),
            dropped_attributes_count: 0,
            events,
            links,
            status: c.error.map_or(otel::Status::Unset, otel::Status::error),
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
        let cases = cases();
        let spans: Vec<Vec<u8>> = cases.iter().map(ours).collect();
        let ours = request(&Header::new(&owned, ("driftwatch", "1.2.3")), &spans);
        let ours = ExportTraceServiceRequest::decode(ours.as_slice()).unwrap();
        let sdk_resource = Resource::builder_empty()
            .with_attributes(resource.map(|(k, v)| KeyValue::new(k, v)))
            .build();
        let mut theirs: Vec<ResourceSpans> = group_spans_by_resource_and_scope(
            cases.iter().map(|c| sdk(c, &scope)).collect(),
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
