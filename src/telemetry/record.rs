//! What a span is made of, as data: its context (ids, as W3C trace context carries them), its
//! kind, and attributes whose keys are driftwatch's own, static (the SDK's `KeyValue` owned a
//! `String` each).

use std::sync::Arc;

/// A span's place in a trace, as W3C trace context carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub sampled: bool,
    /// Read from a request or a message, not started here.
    pub remote: bool,
    /// `tracestate`, as read (members joined by `,`); passed on as it came.
    pub trace_state: Option<Arc<str>>,
}

impl SpanContext {
    /// The trace id in lowercase hex, as `traceparent` and every backend write it.
    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    pub fn span_id_hex(&self) -> String {
        hex(&self.span_id)
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = vec![0; bytes.len() * 2];
    write_hex(&mut out, bytes);
    out.into_iter().map(char::from).collect()
}

/// `bytes` in lowercase hex, into `out` (twice their length).
pub(super) fn write_hex(out: &mut [u8], bytes: &[u8]) {
    for (pair, b) in out.chunks_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 0xf)];
    }
}

pub(super) const HEX: &[u8; 16] = b"0123456789abcdef";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// driftwatch answering for the MCP server it wraps (a `tools/call`).
    Server,
    /// A request to the API.
    Client,
}

/// An attribute's value: static text is never copied but into the span's message.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Static(&'static str),
    Text(String),
    Int(i64),
    Bool(bool),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Static(s) => Some(s),
            Value::Text(s) => Some(s),
            Value::Int(_) | Value::Bool(_) => None,
        }
    }
}

impl From<&'static str> for Value {
    fn from(s: &'static str) -> Value {
        Value::Static(s)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Text(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

/// An attribute: its key is one of driftwatch's own, static.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribute {
    pub key: &'static str,
    pub value: Value,
}

/// `key = value`.
pub fn attr(key: &'static str, value: impl Into<Value>) -> Attribute {
    Attribute {
        key,
        value: value.into(),
    }
}
