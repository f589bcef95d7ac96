//! driftwatch's spans, recorded here rather than by the OpenTelemetry SDK, whose span cost
//! about 3.3 µs of a serving thread per request (docs/benchmarks.md): a `Context` and its
//! `Arc`s per start, a `KeyValue` with an owned `String` per attribute, its limits checked per
//! set. Here a span that is not sampled records nothing, and a span ends when it is dropped
//! (the SDK's rule too), into the export queue.

use std::borrow::Cow;
use std::time::SystemTime;

use super::export::Queue;
use super::record::{Attribute, Event, Record, SpanContext, SpanKind, Status, Value, attr};

/// The most events a span keeps; the rest are counted as dropped (the SDK's default limit).
const MAX_EVENTS: usize = 128;

/// How a span starts: what `Telemetry::span` is given.
pub struct Start {
    pub name: String,
    pub kind: SpanKind,
    /// When it began (now, if not given).
    pub time: Option<SystemTime>,
    pub attributes: Vec<Attribute>,
    pub links: Vec<SpanContext>,
}

/// A span in progress. Sampled, it records, and its drop ends it and queues it for export; not
/// sampled, it has ids (which the API may still be told) and records nothing.
pub struct Span {
    context: SpanContext,
    record: Option<(Box<Record>, Queue)>,
}

impl Span {
    pub(super) fn new(context: SpanContext, record: Option<(Box<Record>, Queue)>) -> Span {
        Span { context, record }
    }

    pub fn context(&self) -> &SpanContext {
        &self.context
    }

    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        if let Some((r, _)) = &mut self.record {
            r.attributes.push(attr(key, value));
        }
    }

    /// An event now, with `attributes` (made only when the span records).
    pub fn event(&mut self, name: &'static str, attributes: impl FnOnce() -> Vec<Attribute>) {
        let Some((r, _)) = &mut self.record else {
            return;
        };
        if r.events.len() >= MAX_EVENTS {
            r.dropped_events += 1;
            return;
        }
        r.events.push(Event {
            name,
            time: SystemTime::now(),
            attributes: attributes(),
        });
    }

    pub fn set_error(&mut self, description: impl Into<Cow<'static, str>>) {
        if let Some((r, _)) = &mut self.record {
            r.status = Status::Error(description.into());
        }
    }

    /// End it now (as its drop does).
    pub fn end(self) {}
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some((mut record, queue)) = self.record.take() {
            record.end = SystemTime::now();
            queue.push(*record);
        }
    }
}
