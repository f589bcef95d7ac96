//! A `tools/call`'s span, per the OpenTelemetry semantic conventions for MCP (GenAI,
//! `docs/gen-ai/mcp.md`): named `tools/call {tool}`, of kind server (driftwatch answers for
//! the server it wraps), parented on the `traceparent` the client put in `params._meta`
//! (SEP-414). It ends with the call's answer: `error.type` is `tool_error` for a result marked
//! `isError`, or the JSON-RPC error's code. The API requests the call caused are its children
//! (`proxy::trace`). The client sets the tool, the id and the protocol version: the span cuts
//! each to its bound (`telemetry::MAX_TEXT`), and they are given to it borrowed, never copied
//! whole.

use serde_json::Value;

use crate::telemetry::{Span, SpanContext, SpanKind, Start, Telemetry};

/// What the relay knows of a call's session, for its span.
#[derive(Clone, Debug, Default)]
pub struct CallTrace {
    /// The client's own span, from `params._meta`.
    pub parent: Option<SpanContext>,
    /// `pipe` (stdio) or `tcp` (the HTTP front).
    pub transport: &'static str,
    /// The protocol version the session's `initialize` asked for.
    pub protocol: Option<String>,
}

pub fn start(t: &Telemetry, tool: &str, id: &Value, trace: &CallTrace) -> Span {
    let start = Start {
        name: ("tools/call", tool),
        kind: SpanKind::Server,
        time: None,
        links: Vec::new(),
    };
    let mut span = t.span(start, trace.parent.as_ref());
    span.set("mcp.method.name", "tools/call");
    span.set_str("gen_ai.tool.name", tool);
    span.set("gen_ai.operation.name", "execute_tool");
    match id {
        Value::String(s) => span.set_str("jsonrpc.request.id", s),
        other => span.set("jsonrpc.request.id", other.to_string()),
    }
    if !trace.transport.is_empty() {
        span.set("network.transport", trace.transport);
    }
    if let Some(protocol) = &trace.protocol {
        span.set_str("mcp.protocol.version", protocol);
    }
    span
}

/// End the call's span with what its answer says (`None`: cancelled or let go unanswered).
pub fn end(mut span: Span, answer: Option<&Value>) {
    let error = answer.and_then(|m| m.get("error"));
    let tool_error = answer
        .and_then(|m| m.pointer("/result/isError"))
        .and_then(Value::as_bool)
        == Some(true);
    if let Some(code) = error.and_then(|e| e.get("code")).and_then(Value::as_i64) {
        span.set("rpc.response.status_code", code.to_string());
        span.set("error.type", code.to_string());
        span.set_error("the call was answered with a JSON-RPC error");
    } else if tool_error {
        span.set("error.type", "tool_error");
        span.set_error("the tool's result is marked isError");
    } else if answer.is_none() {
        span.set("error.type", "unanswered");
    }
    span.end();
}
