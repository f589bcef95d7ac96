//! The span of each MCP request and notification the relay passes from the client to the
//! server, per the OpenTelemetry semantic conventions for MCP (GenAI, `docs/gen-ai/mcp.md`):
//! of kind server (driftwatch answers for the server it wraps), named `{mcp.method.name}
//! {target}`, the target the tool of a `tools/call` (`tools/call getChannel`) and nothing else
//! (`initialize`, `tools/list`), parented on the `traceparent` the client put in
//! `params._meta` (SEP-414). A request's span ends with its answer: a JSON-RPC error is an
//! error status whose description is the error's message, `error.type` and
//! `rpc.response.status_code` its code; a `tools/call` result marked `isError` is
//! `error.type = tool_error`. A notification's span ends at once. The API requests a call
//! caused are its children (`proxy::trace`). The client sets the method, the tool, the id, the
//! protocol version and the message: the span cuts each to its bound (`telemetry::MAX_TEXT`),
//! and they are given to it borrowed, never copied whole.

use serde_json::Value;

use std::sync::Arc;

use crate::telemetry::{MAX_TEXT, Span, SpanContext, SpanKind, Start, Telemetry};

/// What the relay knows of a request's session, for its span.
#[derive(Clone, Debug, Default)]
pub struct CallTrace {
    /// The client's own span, from `params._meta`.
    pub parent: Option<SpanContext>,
    /// `pipe` (stdio) or `tcp` (the HTTP front).
    pub transport: &'static str,
    /// The protocol version the session's `initialize` asked for.
    pub protocol: Option<Arc<str>>,
}

/// The MCP method of a tool call.
pub const TOOLS_CALL: &str = "tools/call";

/// The span of a request (`id` given) or a notification (`None`) of `method`; `tool` is a
/// `tools/call`'s tool, when it names one.
pub fn start(
    t: &Telemetry,
    (method, tool): (&str, Option<&str>),
    id: Option<&Value>,
    trace: &CallTrace,
) -> Span {
    let tool = tool.filter(|t| !t.is_empty() && method == TOOLS_CALL);
    let start = Start {
        name: (method, tool.unwrap_or_default()),
        kind: SpanKind::Server,
        time: None,
        links: Vec::new(),
    };
    let mut span = t.span(start, trace.parent.as_ref());
    span.set_str("mcp.method.name", method);
    if let Some(tool) = tool {
        span.set_str("gen_ai.tool.name", tool);
    }
    if method == TOOLS_CALL {
        span.set("gen_ai.operation.name", "execute_tool");
    }
    match id {
        Some(Value::String(s)) => span.set_str("jsonrpc.request.id", s),
        Some(Value::Null) | None => {}
        Some(other) => span.set("jsonrpc.request.id", other.to_string()),
    }
    if !trace.transport.is_empty() {
        span.set("network.transport", trace.transport);
    }
    if let Some(protocol) = &trace.protocol {
        span.set_str("mcp.protocol.version", protocol);
    }
    span
}

/// End a request's span with what its answer says (`None`: cancelled or let go unanswered).
pub fn end(mut span: Span, answer: Option<&Value>) {
    let error = answer.and_then(|m| m.get("error"));
    let tool_error = answer
        .and_then(|m| m.pointer("/result/isError"))
        .and_then(Value::as_bool)
        == Some(true);
    if let Some(error) = error {
        match error.get("code").and_then(Value::as_i64) {
            Some(code) => {
                span.set("rpc.response.status_code", code.to_string());
                span.set("error.type", code.to_string());
            }
            None => span.set("error.type", "_OTHER"),
        }
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // Cut to the bound here, not copied whole first; the span marks it cut.
        // (past the bound by a character at least, so that the span says it was cut).
        span.set_error(message[..message.ceil_char_boundary(MAX_TEXT + 1)].to_owned());
    } else if tool_error {
        span.set("error.type", "tool_error");
        span.set_error("the tool's result is marked isError");
    } else if answer.is_none() {
        span.set("error.type", "unanswered");
    }
    span.end();
}
