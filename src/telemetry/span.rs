//! driftwatch's spans, recorded here rather than by the OpenTelemetry SDK, whose span cost
//! about 3.3 µs of a serving thread per request (docs/benchmarks.md): a `Context` and its
//! `Arc`s per start, a `KeyValue` with an owned `String` per attribute, its limits checked per
//! set, then each converted and freed again on export. Here a sampled span writes each
//! attribute and event straight into OTLP's protobuf as it is set (borrowed text is copied
//! once, into the message), and its end writes the span's message whole: what the export
//! queue holds is bytes, which a batch only concatenates. A span that is not sampled records
//! nothing. A span ends when it is dropped (the SDK's rule too).

use std::borrow::Cow;
use std::time::SystemTime;

use super::encode::{self, Any};
use super::export::Queue;
use super::record::{Attribute, Recording, SpanContext, SpanKind, Value};

/// The most events a span keeps; the rest are counted as dropped (the SDK's default limit).
const MAX_EVENTS: usize = 128;

/// How a span starts: what `Telemetry::span` is given.
pub struct Start {
    pub name: String,
    pub kind: SpanKind,
    /// When it began (now, if not given).
    pub time: Option<SystemTime>,
    pub links: Vec<SpanContext>,
}

/// A span in progress. Sampled, it records, and its drop ends it and queues it for export; not
/// sampled, it has ids (which the API may still be told) and records nothing.
pub struct Span {
    context: SpanContext,
    recording: Option<(Box<Recording>, Queue)>,
}

impl Span {
    pub(super) fn new(context: SpanContext, recording: Option<(Box<Recording>, Queue)>) -> Span {
        Span { context, recording }
    }

    pub fn context(&self) -> &SpanContext {
        &self.context
    }

    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        if let Some((r, _)) = &mut self.recording {
            encode::attribute(&mut r.attributes, key, Any::from(&value.into()));
        }
    }

    /// A text attribute, borrowed: copied only into the span's message.
    pub fn set_str(&mut self, key: &'static str, value: &str) {
        if let Some((r, _)) = &mut self.recording {
            encode::attribute(&mut r.attributes, key, Any::Str(value));
        }
    }

    pub fn set_all(&mut self, attributes: &[Attribute]) {
        if let Some((r, _)) = &mut self.recording {
            for a in attributes {
                encode::attribute(&mut r.attributes, a.key, Any::from(&a.value));
            }
        }
    }

    /// An event now, with text attributes.
    pub fn event(&mut self, name: &'static str, attributes: &[(&'static str, &str)]) {
        let Some((r, _)) = &mut self.recording else {
            return;
        };
        if r.event_count >= MAX_EVENTS {
            r.dropped_events += 1;
            return;
        }
        r.event_count += 1;
        encode::event(&mut r.events, SystemTime::now(), name, attributes);
    }

    pub fn set_error(&mut self, description: impl Into<Cow<'static, str>>) {
        if let Some((r, _)) = &mut self.recording {
            r.error = Some(description.into());
        }
    }

    /// End it now (as its drop does).
    pub fn end(self) {}
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some((r, queue)) = self.recording.take() {
            queue.push(encode::span(&self.context, &r, SystemTime::now()));
        }
    }
}
