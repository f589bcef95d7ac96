//! What a span is made of, as data: its context (ids, as W3C trace context carries them), its
//! kind, and attributes whose keys are driftwatch's own, static, and whose values are mostly
//! static or shared text (the SDK's `KeyValue` owned a `String` each).

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

pub(super) fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(HEX[usize::from(b >> 4)] as char);
        s.push(HEX[usize::from(b & 0xf)] as char);
    }
    s
}

pub(super) const HEX: &[u8; 16] = b"0123456789abcdef";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// driftwatch answering for the MCP server it wraps (a `tools/call`).
    Server,
    /// A request to the API.
    Client,
}

/// An attribute's value: static or shared text costs no copy per span.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Static(&'static str),
    Shared(Arc<str>),
    Text(String),
    Int(i64),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Static(s) => Some(s),
            Value::Shared(s) => Some(s),
            Value::Text(s) => Some(s),
            Value::Int(_) => None,
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

impl From<Arc<str>> for Value {
    fn from(s: Arc<str>) -> Value {
        Value::Shared(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
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
