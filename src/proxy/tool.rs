//! The tool call behind a request, under `driftwatch wrap`: asked of the calls in flight once
//! the request is checked (its operation known), counted by tool, and learned. A request that
//! named its tool in `events.tool_header` keeps that name.

use std::sync::Arc;

use http::request::Parts;

use super::Sidecar;
use super::body::BodyRead;
use super::record::Ledger;
use crate::mcp::bindings::{Seen, learn};
use crate::mcp::calls::RequestValues;

pub(super) fn attribute(
    s: &Sidecar,
    contract: &crate::contract::Contract,
    parts: &Parts,
    read: &BodyRead,
    ledger: &mut Ledger<'_>,
) {
    let Some(calls) = s.calls() else {
        // No MCP side seen: only a request that names its tool is counted by tool.
        if let Some(tool) = ledger.tool.as_deref() {
            s.sinks.tools.request(Some(tool));
        }
        return;
    };
    if ledger.tool.is_none() {
        let body = match read {
            BodyRead::Whole(bytes) => Some(&bytes[..]),
            _ => None,
        };
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let template = ledger.operation.map(|op| op.template.as_str());
        ledger.tool = calls
            .attribute(|| RequestValues::of(target, template, body))
            .map(Arc::new);
    }
    let tool = ledger.tool.clone();
    let tool = tool.as_deref();
    s.sinks.tools.request(tool);
    // The call's own values say whether a `/` in the path was one of them.
    if let Some(arguments) = tool.and_then(|t| t.arguments.as_deref()) {
        let path = parts.uri.path();
        let method = parts.method.as_str();
        crate::audit::confirm_slashes(contract, method, path, arguments, &mut ledger.findings);
    }
    let (Some(attribution), Some(op)) = (tool, ledger.operation) else {
        return;
    };
    let Some(name) = attribution.known() else {
        return;
    };
    calls.learn(ledger.api.index, name, &op.id);
    // Tied to one call: where its argument values went says what the server does with them.
    if let Some(arguments) = &attribution.arguments {
        let body = match read {
            BodyRead::Whole(bytes) => Some(&bytes[..]),
            _ => None,
        };
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let headers = parts
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)));
        let seen = Seen::of(&op.template, target, body).with_headers(headers);
        calls.learn_bindings(name, learn(arguments, &seen));
    }
}
