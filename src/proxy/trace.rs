//! A request's span, when traces are exported. Started once the request's operation and tool
//! call are known (after check), so that it can be the call's child; ended at the one exit with
//! the status the client receives. Its parent: the `traceparent` the request carried, else the
//! span of the `tools/call` it was attributed to, else none (a server's own request, made with
//! no call in flight, is a root of its own). An ambiguous request links each candidate call.
//! The request forwarded names the span as its `traceparent` (`telemetry.propagation`).
//!
//! Per the HTTP semantic conventions for a client span (the API is the server): method, the
//! route template, server address and port, status. driftwatch's own attributes say which API,
//! operation, spec revision and mode, and what was done; each finding is an event (kind,
//! severity, blame, where and which field: never a value).

use std::sync::{Arc, Mutex};

use http::HeaderMap;
use opentelemetry::KeyValue;
use opentelemetry::trace::{Span as _, TraceContextExt};

use super::Sidecar;
use super::record::Ledger;
use crate::finding::Finding;
use crate::revision::Revision;
use crate::settings::Propagation;
use crate::sink::{Outcome, TraceIds};
use crate::telemetry::{Link, Span, SpanBuilder, SpanKind, Status, context};

/// A request's span between the exit and its response's last byte: the response work adds
/// what it found there.
pub(super) type Slot = Arc<Mutex<Option<Span>>>;

/// Start the request's span, if traced and not yet started; then, as `propagation` says, name
/// it as the parent in `headers`, the ones the API will get.
pub(super) fn begin(s: &Sidecar, rev: &Revision, ledger: &mut Ledger<'_>, headers: &mut HeaderMap) {
    let Some(t) = &s.telemetry else { return };
    start(s, rev, ledger);
    let Some(span) = &ledger.span else { return };
    let sent = headers.contains_key(context::TRACEPARENT);
    let inject = match t.propagation {
        Propagation::Always => true,
        Propagation::WhenAbsent => !sent,
        Propagation::Never => false,
    };
    if inject && span.span_context().is_valid() {
        context::inject(span.span_context(), headers);
    }
}

/// The span, started now unless it was.
pub(super) fn start(s: &Sidecar, rev: &Revision, ledger: &mut Ledger<'_>) {
    let Some(t) = &s.telemetry else { return };
    if ledger.span.is_some() {
        return;
    }
    let call = ledger.tool.as_deref();
    let call_parent = call.and_then(|c| c.parent.clone());
    let mut links: Vec<Link> = call
        .map(|c| c.links.iter().cloned().map(Link::with_context).collect())
        .unwrap_or_default();
    let parent = match (&ledger.parent, call_parent) {
        (Some(remote), call_parent) => {
            // The request's own parent wins; the call it was tied to is linked.
            links.extend(call_parent.map(Link::with_context));
            Some(remote.clone())
        }
        (None, Some(call)) => Some(opentelemetry::Context::new().with_remote_span_context(call)),
        (None, None) => None,
    };
    let builder = SpanBuilder::from_name(name(ledger))
        .with_kind(SpanKind::Client)
        .with_start_time(ledger.started)
        .with_attributes(attributes(rev, ledger))
        .with_links(links);
    ledger.span = Some(t.span(builder, parent.as_ref()));
}

/// `GET /channels/{id}`, or the method alone when no operation matched.
fn name(ledger: &Ledger<'_>) -> String {
    match ledger.operation {
        Some(op) => format!("{} {}", ledger.method(), op.template),
        None => ledger.method().to_string(),
    }
}

fn attributes(rev: &Revision, ledger: &Ledger<'_>) -> Vec<KeyValue> {
    let upstream = &ledger.api.upstreams[ledger.upstream];
    let mut a = vec![
        KeyValue::new("http.request.method", ledger.method().to_string()),
        KeyValue::new("server.address", upstream.authority.host().to_owned()),
        KeyValue::new("driftwatch.api", ledger.api.name().to_owned()),
        KeyValue::new("driftwatch.spec.revision", rev.spec.revision.clone()),
        KeyValue::new("driftwatch.mode", ledger.api.settings.policy.mode.as_str()),
        KeyValue::new(
            "driftwatch.request_id",
            ledger.request_id.as_str().to_owned(),
        ),
    ];
    if let Some(port) = upstream.authority.port_u16() {
        a.push(KeyValue::new("server.port", i64::from(port)));
    }
    if let Some(op) = ledger.operation {
        a.push(KeyValue::new("url.template", op.template.clone()));
        a.push(KeyValue::new("driftwatch.operation", op.id.clone()));
    }
    if let Some(tool) = ledger.tool.as_deref() {
        a.push(KeyValue::new("gen_ai.tool.name", tool.label().to_owned()));
        a.push(KeyValue::new(
            "driftwatch.tool_attribution",
            tool.by.as_str(),
        ));
    }
    a
}

/// End the span with what the client receives: its status, what driftwatch did, each finding,
/// and for a refusal or a fault, an error status that says so. The ids go into the event.
pub(super) fn end(
    ledger: &mut Ledger<'_>,
    outcome: Outcome,
    status: http::StatusCode,
    actions: &[&'static str],
) -> TraceIds {
    let Some(mut span) = ledger.span.take() else {
        return TraceIds::default();
    };
    span.set_attribute(KeyValue::new(
        "http.response.status_code",
        i64::from(status.as_u16()),
    ));
    span.set_attribute(KeyValue::new("driftwatch.action", outcome.as_str()));
    span.set_attribute(KeyValue::new(
        "driftwatch.findings",
        ledger.findings.len() as i64,
    ));
    for (f, action) in ledger.findings.iter().zip(actions) {
        span.add_event("driftwatch.finding", finding(f, action));
    }
    if status.as_u16() >= 400 {
        span.set_attribute(KeyValue::new("error.type", status.as_u16().to_string()));
    }
    match outcome {
        Outcome::Blocked => span.set_status(Status::error(refused(&ledger.findings, actions))),
        Outcome::ClientError | Outcome::UpstreamError => {
            span.set_status(Status::error(outcome.as_str()))
        }
        Outcome::Forwarded if status.is_server_error() => span.set_status(Status::error("")),
        Outcome::Forwarded => {}
    }
    let ids = TraceIds::of(span.span_context());
    match ledger.late_span.take() {
        // The response work may still find something: it ends the span (or, done already,
        // the slot's drop does).
        Some(slot) => *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(span),
        None => span.end(),
    }
    ids
}

/// The slot the response work will find the span in, made when the span is there.
pub(super) fn slot(ledger: &mut Ledger<'_>) -> Option<Slot> {
    ledger.span.as_ref()?;
    Some(ledger.late_span.get_or_insert_with(Slot::default).clone())
}

/// What the response work found, as the span's events; then the span ends.
pub(super) fn after_response(slot: Option<&Slot>, findings: &[Finding]) {
    let span = slot.and_then(|s| s.lock().unwrap_or_else(|e| e.into_inner()).take());
    let Some(mut span) = span else { return };
    for f in findings {
        span.add_event("driftwatch.finding", finding(f, "log"));
    }
    span.set_attribute(KeyValue::new(
        "driftwatch.response_findings",
        findings.len() as i64,
    ));
    span.end();
}

fn finding(f: &Finding, action: &'static str) -> Vec<KeyValue> {
    vec![
        KeyValue::new("driftwatch.finding.kind", f.kind.as_str()),
        KeyValue::new("driftwatch.finding.severity", f.severity.as_str()),
        KeyValue::new("driftwatch.finding.blame", f.blame.as_str()),
        KeyValue::new("driftwatch.finding.location", f.location.as_str()),
        KeyValue::new("driftwatch.finding.field", f.field.to_string()),
        KeyValue::new("driftwatch.finding.action", action),
    ]
}

/// `refused by driftwatch: silent_clear_risk /graphicsElementIds`, the blocked findings named.
fn refused(findings: &[Finding], actions: &[&'static str]) -> String {
    let blocked: Vec<String> = (findings.iter().zip(actions))
        .filter(|(_, a)| **a == "block")
        .map(|(f, _)| format!("{} {}", f.kind, f.field))
        .collect();
    format!("refused by driftwatch: {}", blocked.join(", "))
}
