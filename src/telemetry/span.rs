//! driftwatch's spans, recorded here rather than by the OpenTelemetry SDK, whose span cost
//! about 3.3 µs of a serving thread per request (docs/benchmarks.md): a `Context` and its
//! `Arc`s per start, a `KeyValue` with an owned `String` per attribute, its limits checked per
//! set, then each converted and freed again on export. Here a sampled span is its OTLP
//! protobuf message, written as it is recorded: its ids, name and start when it starts, each
//! attribute and event as it is set (borrowed text copied once, into the message), its end
//! time and status when it ends. What the export queue holds is that buffer, which a batch
//! copies once. A span that is not sampled records nothing. A span ends when it is dropped
//! (the SDK's rule too).
//!
//! Text a span records (its name, each attribute's and event's value, its status) is cut to
//! `MAX_TEXT` bytes, a metric label's bound (`sink::labels`): a peer sets much of it (a request
//! id, a tool, a JSON-RPC id, a protocol version) and 3 MB of it was 3 MB in every span, queued
//! and exported (issue 64). A cut value is the longest prefix that ends at a character, left as
//! the peer sent it (searchable, nothing added that a peer could also send), and its span says
//! so once, whatever was cut: `driftwatch.truncated = true`.

use std::borrow::Cow;
use std::time::SystemTime;

use super::encode::{self, Any};
use super::export::Queue;
use super::record::{Attribute, SpanContext, SpanKind, Value};

/// The most events a span keeps; the rest are counted as dropped (the SDK's default limit).
const MAX_EVENTS: usize = 128;

/// The most links a span keeps (an ambiguous request links each call in flight); the rest are
/// counted as dropped (the SDK's default limit).
pub(super) const MAX_LINKS: usize = 128;

/// The most bytes of text in one place of a span: a metric label value's bound.
pub const MAX_TEXT: usize = 256;

/// The attribute that says some text of the span was cut to `MAX_TEXT`.
pub const TRUNCATED: &str = "driftwatch.truncated";

/// `text` within `MAX_TEXT` bytes, cut where a character ends; and whether it was cut.
pub(super) fn bounded(text: &str) -> (&str, bool) {
    match text.len() > MAX_TEXT {
        true => (&text[..text.floor_char_boundary(MAX_TEXT)], true),
        false => (text, false),
    }
}

/// A span's name within `MAX_TEXT` bytes, its two parts and the space between them counted,
/// the second cut first; and whether it was cut.
pub(super) fn bounded_name<'a>((first, second): (&'a str, &'a str)) -> ((&'a str, &'a str), bool) {
    let (first, cut) = bounded(first);
    if cut || second.is_empty() {
        return ((first, ""), cut);
    }
    // What is left after the first part and the space.
    let room = (MAX_TEXT - first.len()).saturating_sub(1);
    match second.len() <= room {
        true => ((first, second), false),
        false => ((first, &second[..second.floor_char_boundary(room)]), true),
    }
}

/// Attributes that many spans carry alike (an API's server, mode and name), encoded once;
/// whether a value was cut.
#[derive(Clone, Debug, Default)]
pub struct Attributes(Vec<u8>, bool);

impl Attributes {
    pub fn new(attributes: &[Attribute]) -> Attributes {
        let (mut out, mut truncated) = (Vec::new(), false);
        for a in attributes {
            truncated |= attribute(&mut out, a.key, Any::from(&a.value));
        }
        Attributes(out, truncated)
    }
}

/// `key = value`, its text within `MAX_TEXT`; whether it was cut.
fn attribute(out: &mut Vec<u8>, key: &str, value: Any<'_>) -> bool {
    let (value, cut) = match value {
        Any::Str(s) => {
            let (s, cut) = bounded(s);
            (Any::Str(s), cut)
        }
        other => (other, false),
    };
    encode::attribute(out, key, value);
    cut
}

/// How a span starts: what `Telemetry::span` is given.
pub struct Start<'a> {
    /// The name in two parts, joined by a space when the second is not empty (`GET`,
    /// `/channels/{id}`): written into the span's message, never formatted on its own.
    pub name: (&'a str, &'a str),
    pub kind: SpanKind,
    /// When it began (now, if not given).
    pub time: Option<SystemTime>,
    pub links: Vec<SpanContext>,
}

/// A span in progress. Sampled, it records, and its drop ends it and queues it for export; not
/// sampled, it has ids (which the API may still be told) and records nothing.
pub struct Span {
    context: SpanContext,
    recording: Option<Box<Recording>>,
}

/// A sampled span's message so far, and what its end writes.
pub(super) struct Recording {
    pub message: Vec<u8>,
    pub events: usize,
    pub dropped_events: u32,
    pub error: Option<Cow<'static, str>>,
    /// Some text was cut to `MAX_TEXT`: its end says so.
    pub truncated: bool,
    pub queue: Queue,
}

impl Span {
    pub(super) fn new(context: SpanContext, recording: Option<Box<Recording>>) -> Span {
        Span { context, recording }
    }

    pub fn context(&self) -> &SpanContext {
        &self.context
    }

    /// Whether it records (it was sampled): one that does not is done with at once.
    pub fn is_recording(&self) -> bool {
        self.recording.is_some()
    }

    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        if let Some(r) = &mut self.recording {
            r.truncated |= attribute(&mut r.message, key, Any::from(&value.into()));
        }
    }

    /// The span is of `kind` after all (a request driftwatch answered itself, never sent to
    /// the API, is its server span, not a client span).
    pub fn set_kind(&mut self, kind: SpanKind) {
        if let Some(r) = &mut self.recording {
            encode::kind_again(&mut r.message, kind);
        }
    }

    /// A text attribute, borrowed: copied only into the span's message.
    pub fn set_str(&mut self, key: &'static str, value: &str) {
        if let Some(r) = &mut self.recording {
            r.truncated |= attribute(&mut r.message, key, Any::Str(value));
        }
    }

    /// Attributes encoded once, for many spans (`Attributes::new`).
    pub fn set_all(&mut self, attributes: &Attributes) {
        if let Some(r) = &mut self.recording {
            r.message.extend_from_slice(&attributes.0);
            r.truncated |= attributes.1;
        }
    }

    /// An event now, with text attributes.
    pub fn event(&mut self, name: &'static str, attributes: &[(&'static str, &str)]) {
        let Some(r) = &mut self.recording else {
            return;
        };
        if r.events >= MAX_EVENTS {
            r.dropped_events += 1;
            return;
        }
        r.events += 1;
        let mut cut = false;
        let attributes = attributes.iter().map(|&(key, value)| {
            let (value, was) = bounded(value);
            cut |= was;
            (key, value)
        });
        encode::event(&mut r.message, SystemTime::now(), name, attributes);
        r.truncated |= cut;
    }

    pub fn set_error(&mut self, description: impl Into<Cow<'static, str>>) {
        let Some(r) = &mut self.recording else { return };
        let mut description = description.into();
        let at = description.floor_char_boundary(MAX_TEXT);
        if at < description.len() {
            r.truncated = true;
            match &mut description {
                Cow::Owned(s) => s.truncate(at),
                Cow::Borrowed(s) => *s = &s[..at],
            }
        }
        r.error = Some(description);
    }

    /// End it now (as its drop does).
    pub fn end(self) {}
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(r) = self.recording.take() {
            let Recording {
                mut message,
                dropped_events,
                error,
                truncated,
                queue,
                ..
            } = *r;
            if truncated {
                encode::attribute(&mut message, TRUNCATED, Any::Bool(true));
            }
            encode::end(
                &mut message,
                SystemTime::now(),
                dropped_events,
                error.as_deref(),
            );
            queue.push(message);
        }
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Wire;
    use opentelemetry_proto::tonic::trace::v1::Span as WireSpan;
    use prost::Message;

    use super::*;
    use crate::telemetry::{Sampler, Telemetry, attr};

    fn spans(t: &Telemetry) -> Vec<WireSpan> {
        let request = ExportTraceServiceRequest::decode(t.drain(&[]).as_slice()).unwrap();
        (request.resource_spans.into_iter())
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    }

    fn text(kv: &opentelemetry_proto::tonic::common::v1::KeyValue) -> Option<&str> {
        match kv.value.as_ref()?.value.as_ref()? {
            Wire::StringValue(s) => Some(s),
            _ => None,
        }
    }

    fn start(name: (&'static str, &'static str), links: Vec<SpanContext>) -> Start<'static> {
        Start {
            name,
            kind: SpanKind::Server,
            time: None,
            links,
        }
    }

    /// Every text a span records, wherever it goes (name, attribute, event, status, an
    /// attribute encoded once for many spans), is the longest prefix of what was set that ends
    /// where a character does within 256 bytes, and the span says `driftwatch.truncated`; a
    /// span with nothing cut does not.
    #[test]
    fn text_past_256_bytes_is_cut_where_a_character_ends_and_the_span_says_so() {
        let t = Telemetry::detached(Sampler::AlwaysOn);
        // 1 + 2k bytes: 256 falls inside a character, so the cut is at 255.
        let long: &'static str = format!("x{}", "é".repeat(2_000)).leak();
        let cut = &long[..255];
        let mut span = t.span(start(("tools/call", long), Vec::new()), None);
        span.set_str("jsonrpc.request.id", long);
        span.set("mcp.protocol.version", long.to_string());
        span.set("driftwatch.findings", 3_i64);
        span.set_all(&Attributes::new(&[attr("server.address", long)]));
        span.event("driftwatch.finding", &[("driftwatch.finding.field", long)]);
        span.set_error(format!("refused by driftwatch: {long}"));
        span.end();
        let mut short = t.span(start(("GET", "/channels/{id}"), Vec::new()), None);
        short.set_str("driftwatch.request_id", "r-1");
        short.event("driftwatch.finding", &[("driftwatch.finding.field", "/a")]);
        short.set_error("refused");
        short.end();
        let [cut_span, short] = &spans(&t)[..] else {
            panic!("two spans")
        };
        let mut wrong = Vec::new();
        let name = format!("tools/call {}", &long[..long.floor_char_boundary(256 - 11)]);
        if cut_span.name != name {
            wrong.push(format!("name of {} bytes", cut_span.name.len()));
        }
        for kv in (cut_span.attributes.iter()).chain(&cut_span.events[0].attributes) {
            match (kv.key.as_str(), text(kv)) {
                (_, Some(t)) if t != cut => wrong.push(format!("{}: {} bytes", kv.key, t.len())),
                ("driftwatch.truncated", _) => {
                    assert_eq!(
                        kv.value.as_ref().unwrap().value,
                        Some(Wire::BoolValue(true))
                    );
                }
                _ => {}
            }
        }
        let keys: Vec<&str> = cut_span.attributes.iter().map(|a| a.key.as_str()).collect();
        let expected = [
            "jsonrpc.request.id",
            "mcp.protocol.version",
            "driftwatch.findings",
            "server.address",
            "driftwatch.truncated",
        ];
        if keys != expected {
            wrong.push(format!("attributes {keys:?}"));
        }
        let status = cut_span.status.as_ref().unwrap().message.as_str();
        let refused = format!("refused by driftwatch: {long}");
        if status != &refused[..refused.floor_char_boundary(256)] {
            wrong.push(format!("status of {} bytes", status.len()));
        }
        if short.name != "GET /channels/{id}"
            || short.attributes.iter().any(|a| a.key == TRUNCATED)
            || short.status.as_ref().unwrap().message != "refused"
        {
            wrong.push(format!("the short span changed: {short:?}"));
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// A name's first part past the bound is cut and its second left out; a second part past
    /// what is left is cut, the space counted.
    #[test]
    fn a_names_two_parts_fit_the_bound_together() {
        let a = "a".repeat(300);
        assert_eq!(bounded_name((&a, "b")), ((&a[..256], ""), true));
        let b = "b".repeat(300);
        assert_eq!(bounded_name(("GET", &b)), (("GET", &b[..252]), true));
        assert_eq!(
            bounded_name(("GET", &b[..252])),
            (("GET", &b[..252]), false)
        );
        assert_eq!(bounded_name(("GET", "")), (("GET", ""), false));
        let a = "a".repeat(255);
        assert_eq!(bounded_name((&a, "b")), ((&a[..], ""), true));
    }

    /// Past 128 links a span keeps the first 128 and counts the rest as dropped.
    #[test]
    fn past_128_links_the_rest_are_counted_as_dropped() {
        let t = Telemetry::detached(Sampler::AlwaysOn);
        let link = |i: u64| SpanContext {
            trace_id: [1; 16],
            span_id: (i + 1).to_be_bytes(),
            sampled: true,
            remote: true,
            trace_state: None,
        };
        t.span(start(("GET", ""), (0..200).map(link).collect()), None)
            .end();
        let spans = spans(&t);
        assert_eq!(spans[0].links.len(), 128);
        assert_eq!(spans[0].links[127].span_id, 128_u64.to_be_bytes());
        assert_eq!(spans[0].dropped_links_count, 72);
    }
}
