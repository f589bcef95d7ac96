//! driftwatch's spans, recorded here rather than by the OpenTelemetry SDK, whose span cost
//! about 3.3 µs of a serving thread per request (docs/benchmarks.md): a `Context` and its
//! `Arc`s per start, a `KeyValue` with an owned `String` per attribute, its limits checked per
//! set, then each converted and freed again on export. Here a sampled span is its OTLP
//! protobuf message, written as it is recorded: its ids, name and start when it starts, each
//! attribute and event as it is set (borrowed text copied once, into the message), its end
//! time and status when it ends. What the export queue holds is that buffer, which a batch
//! copies once. A span that is not sampled records nothing. A span ends when it is dropped
//! (the SDK's rule too).

use std::borrow::Cow;
use std::time::SystemTime;

use super::encode::{self, Any};
use super::export::Queue;
use super::record::{Attribute, SpanContext, SpanKind, Value};

/// The most events a span keeps; the rest are counted as dropped (the SDK's default limit).
const MAX_EVENTS: usize = 128;

/// Attributes that many spans carry alike (an API's server, mode and name), encoded once.
#[derive(Clone, Debug, Default)]
pub struct Attributes(Vec<u8>);

impl Attributes {
    pub fn new(attributes: &[Attribute]) -> Attributes {
        let mut out = Vec::new();
        for a in attributes {
            encode::attribute(&mut out, a.key, Any::from(&a.value));
        }
        Attributes(out)
    }
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
            encode::attribute(&mut r.message, key, Any::from(&value.into()));
        }
    }

    /// A text attribute, borrowed: copied only into the span's message.
    pub fn set_str(&mut self, key: &'static str, value: &str) {
        if let Some(r) = &mut self.recording {
            encode::attribute(&mut r.message, key, Any::Str(value));
        }
    }

    /// Attributes encoded once, for many spans (`Attributes::new`).
    pub fn set_all(&mut self, attributes: &Attributes) {
        if let Some(r) = &mut self.recording {
            r.message.extend_from_slice(&attributes.0);
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
        encode::event(&mut r.message, SystemTime::now(), name, attributes);
    }

    pub fn set_error(&mut self, description: impl Into<Cow<'static, str>>) {
        if let Some(r) = &mut self.recording {
            r.error = Some(description.into());
        }
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
                queue,
                ..
            } = *r;
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
