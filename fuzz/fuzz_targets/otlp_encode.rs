//! The hand-written OTLP encoder (`telemetry::encode`), held to the official messages
//! (`opentelemetry-proto`, prost): any span built from the input (its parent or none, a name in
//! two parts, a kind, a start, links, attributes of every type, events, status, attributes
//! encoded once for many spans, text from arbitrary bytes, up to 64 KB of it) is recorded by a
//! `Span`, exported as the request a batch sends, decoded by the official messages, and every
//! value is what was set: ids, flags, trace state, times, kind, each attribute in order, each
//! event and link, the counts of those dropped past 128, the status. Text past 256 bytes is the
//! longest prefix ending at a character, and the span says `driftwatch.truncated` exactly when
//! something was cut. Not only "no panic": a value lost, moved or mangled fails.
#![no_main]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use driftwatch::telemetry::{
    Attributes, MAX_TEXT, Sampler, SpanContext, SpanKind, Start, TRUNCATED, Telemetry, Value, attr,
};
use libfuzzer_sys::fuzz_target;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Wire;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::span::Link;
use prost::Message;

/// Keys are driftwatch's own, static: the input picks one.
const KEYS: [&str; 8] = [
    "jsonrpc.request.id",
    "mcp.protocol.version",
    "gen_ai.tool.name",
    "driftwatch.request_id",
    "http.response.status_code",
    "",
    "ключ.ünïcode",
    "k",
];

/// The most events and links a span keeps (the SDK's limits).
const MAX_EVENTS: usize = 128;
const MAX_LINKS: usize = 128;

/// The input, read front to back; past its end every read gives zeros and empty text.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        for b in &mut out {
            *b = self.byte();
        }
        out
    }

    fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// Text: a length byte, that many bytes read as UTF-8 (lossily: what is not becomes U+FFFD,
    /// three bytes), repeated as the next byte says: up to 64 KB, past the bound often.
    fn text(&mut self) -> String {
        let len = usize::from(self.byte());
        let take = len.min(self.0.len());
        let (chunk, rest) = self.0.split_at(take);
        self.0 = rest;
        let times = usize::from(self.byte()) + 1;
        String::from_utf8_lossy(chunk).repeat(times)
    }

    fn key(&mut self) -> &'static str {
        KEYS[usize::from(self.byte()) % KEYS.len()]
    }

    fn context(&mut self) -> SpanContext {
        SpanContext {
            trace_id: self.bytes(),
            span_id: self.bytes(),
            sampled: self.bool(),
            remote: self.bool(),
            trace_state: self.bool().then(|| self.text().into()),
        }
    }

    fn done(&self) -> bool {
        self.0.is_empty()
    }
}

/// What the model expects a text to arrive as, and notes whether it was cut.
fn cut(text: &str, truncated: &mut bool) -> String {
    let at = text.floor_char_boundary(MAX_TEXT);
    *truncated |= at < text.len();
    text[..at].to_string()
}

/// The name from its two parts: the first cut, the second dropped when the first was, else cut
/// to what is left after the space.
fn name(first: &str, second: &str, truncated: &mut bool) -> String {
    let head = cut(first, truncated);
    if head.len() < first.len() || second.is_empty() {
        return head;
    }
    let room = (MAX_TEXT - head.len()).saturating_sub(1);
    let tail = &second[..second.floor_char_boundary(room)];
    *truncated |= tail.len() < second.len();
    match tail.is_empty() {
        true => head,
        false => format!("{head} {tail}"),
    }
}

fn text(s: &str) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(Wire::StringValue(s.to_string())),
    })
}

fn kv(key: &str, value: Option<AnyValue>) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value,
        ..KeyValue::default()
    }
}

fn flags(sampled: bool, remote: bool) -> u32 {
    u32::from(sampled) | 0x100 | if remote { 0x200 } else { 0 }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let sampled = input.byte() != 0xff;
    let t = Telemetry::detached(match sampled {
        true => Sampler::AlwaysOn,
        false => Sampler::AlwaysOff,
    });
    let resource: Vec<(String, String)> = (0..input.byte() % 3)
        .map(|_| (input.text(), input.text()))
        .collect();
    let parent = input.bool().then(|| input.context());
    let (first, second) = (input.text(), input.text());
    let kind = if input.bool() {
        SpanKind::Server
    } else {
        SpanKind::Client
    };
    let time = input
        .bool()
        .then(|| UNIX_EPOCH + Duration::from_nanos(u64::from_le_bytes(input.bytes())));
    let links: Vec<SpanContext> = (0..input.byte()).map(|_| input.context()).collect();

    let mut truncated = false;
    let expected_name = name(&first, &second, &mut truncated);
    let before = SystemTime::now();
    let start = Start {
        name: (&first, &second),
        kind,
        time,
        links: links.clone(),
    };
    let mut span = t.span(start, parent.as_ref());
    let cx = span.context().clone();
    let (mut attributes, mut events, mut error) = (Vec::new(), Vec::new(), None);
    while !input.done() {
        match input.byte() % 7 {
            0 => {
                let (key, i) = (input.key(), i64::from_le_bytes(input.bytes()));
                span.set(key, i);
                attributes.push(kv(
                    key,
                    Some(AnyValue {
                        value: Some(Wire::IntValue(i)),
                    }),
                ));
            }
            1 => {
                let (key, b) = (input.key(), input.bool());
                span.set(key, b);
                attributes.push(kv(
                    key,
                    Some(AnyValue {
                        value: Some(Wire::BoolValue(b)),
                    }),
                ));
            }
            2 => {
                let (key, s) = (input.key(), input.text());
                span.set_str(key, &s);
                attributes.push(kv(key, text(&cut(&s, &mut truncated))));
            }
            3 => {
                let (key, s) = (input.key(), input.text());
                attributes.push(kv(key, text(&cut(&s, &mut truncated))));
                span.set(key, Value::Text(s));
            }
            4 => {
                let name = input.key();
                let pairs: Vec<(&'static str, String)> = (0..input.byte() % 7)
                    .map(|_| (input.key(), input.text()))
                    .collect();
                let borrowed: Vec<(&'static str, &str)> =
                    pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
                span.event(name, &borrowed);
                if events.len() < MAX_EVENTS {
                    let attributes = (pairs.iter())
                        .map(|(k, v)| kv(k, text(&cut(v, &mut truncated))))
                        .collect::<Vec<_>>();
                    events.push((name, attributes));
                } else {
                    events.push((name, Vec::new()));
                }
            }
            5 => {
                let s = input.text();
                error = Some(cut(&s, &mut truncated));
                span.set_error(s);
            }
            _ => {
                let pairs: Vec<(&'static str, String)> = (0..input.byte() % 4)
                    .map(|_| (input.key(), input.text()))
                    .collect();
                let once: Vec<_> = pairs.iter().map(|(k, v)| attr(k, v.clone())).collect();
                span.set_all(&Attributes::new(&once));
                for (k, v) in &pairs {
                    attributes.push(kv(k, text(&cut(v, &mut truncated))));
                }
            }
        }
    }
    span.end();
    let after = SystemTime::now();

    let request = ExportTraceServiceRequest::decode(t.drain(&resource).as_slice())
        .expect("what we encode decodes");
    let [resource_spans] = &request.resource_spans[..] else {
        panic!("one resource: {request:?}");
    };
    let given: Vec<KeyValue> = (resource.iter()).map(|(k, v)| kv(k, text(v))).collect();
    assert_eq!(resource_spans.resource.as_ref().unwrap().attributes, given);
    let [scope_spans] = &resource_spans.scope_spans[..] else {
        panic!("one scope");
    };
    assert_eq!(scope_spans.scope.as_ref().unwrap().name, "driftwatch");
    if !sampled {
        assert!(
            scope_spans.spans.is_empty(),
            "a span not sampled is not sent"
        );
        return;
    }
    let [got] = &scope_spans.spans[..] else {
        panic!("one span: {:?}", scope_spans.spans.len());
    };
    assert_eq!(
        got.trace_id,
        match &parent {
            Some(p) => p.trace_id.to_vec(),
            None => cx.trace_id.to_vec(),
        }
    );
    assert_eq!(got.span_id, cx.span_id);
    assert_ne!(cx.span_id, [0; 8]);
    assert_eq!(
        got.parent_span_id,
        parent.as_ref().map_or(Vec::new(), |p| p.span_id.to_vec())
    );
    let state = parent.as_ref().and_then(|p| p.trace_state.as_deref());
    assert_eq!(got.trace_state, state.unwrap_or_default());
    assert_eq!(
        got.flags,
        flags(true, parent.as_ref().is_some_and(|p| p.remote))
    );
    assert_eq!(got.name, expected_name);
    assert_eq!(got.kind, if kind == SpanKind::Server { 2 } else { 3 });
    match time {
        Some(t) => assert_eq!(got.start_time_unix_nano, nanos(t)),
        None => assert!((nanos(before)..=nanos(after)).contains(&got.start_time_unix_nano)),
    }
    assert!((nanos(before)..=nanos(after)).contains(&got.end_time_unix_nano));

    let kept = &links[..links.len().min(MAX_LINKS)];
    let expected_links: Vec<Link> = (kept.iter())
        .map(|l| Link {
            trace_id: l.trace_id.to_vec(),
            span_id: l.span_id.to_vec(),
            trace_state: l.trace_state.as_deref().unwrap_or_default().to_string(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            flags: flags(l.sampled, l.remote),
        })
        .collect();
    assert_eq!(got.links, expected_links);
    assert_eq!(got.dropped_links_count as usize, links.len() - kept.len());

    let kept_events = events.len().min(MAX_EVENTS);
    assert_eq!(got.events.len(), kept_events);
    assert_eq!(
        got.dropped_events_count as usize,
        events.len() - kept_events
    );
    for (g, (name, attributes)) in got.events.iter().zip(&events) {
        assert_eq!(g.name, *name);
        assert_eq!(&g.attributes, attributes);
        assert!((nanos(before)..=nanos(after)).contains(&g.time_unix_nano));
    }

    if truncated {
        let yes = AnyValue {
            value: Some(Wire::BoolValue(true)),
        };
        attributes.push(kv(TRUNCATED, Some(yes)));
    }
    assert_eq!(got.attributes, attributes);
    assert_eq!(got.dropped_attributes_count, 0);
    let status = got.status.as_ref().expect("a status, unset or error");
    match &error {
        Some(message) => assert_eq!(
            (status.code, status.message.as_str()),
            (2, message.as_str())
        ),
        None => assert_eq!((status.code, status.message.as_str()), (0, "")),
    }
});
