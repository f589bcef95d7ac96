//! A request's span, when traces are exported. Started once the request's operation and tool
//! call are known (after check), so that it can be the call's child; ended at the one exit with
//! the status the client receives. Its parent: the `traceparent` the request carried, else the
//! span of the `tools/call` it was attributed to, else none (a server's own request, made with
//! no call in flight, is a root of its own). An ambiguous request links each candidate call.
//! The request forwarded names the span as its `traceparent` (`telemetry.propagation`).
//!
//! Per the HTTP semantic conventions for a client span (the API is the server): method, the
//! route template, `url.full` (no credentials, every query value `REDACTED`), server address
//! and port, the status the API answered (4xx and 5xx are errors, `error.type` the status), or,
//! with no answer, no status and `error.type` saying why. A request driftwatch answered itself
//! (refused, or the client's fault) never reached the API: its span is driftwatch's server
//! span, with the status the client got, an error status saying why and, for a refusal, a
//! `driftwatch.refused` event. driftwatch's own attributes say which API, operation, spec
//! revision and mode, and what was done; each finding is an event (kind, severity, blame,
//! where and which field: never a value).

use std::time::SystemTime;

use http::{HeaderMap, Method};

use super::Api;
use super::late_span::{Slot, finding};
use crate::contract::Operation;
use crate::finding::Finding;
use crate::mcp::calls::Attribution;
use crate::settings::{ApiSettings, Propagation, Upstream};
use crate::sink::Outcome;
use crate::telemetry::{Attributes, Span, SpanContext, SpanKind, Start, Telemetry, attr, context};

/// Why a request was not answered by the API, for its span: `error.type` (low cardinality)
/// and the description of its error status.
pub(super) struct Failure<'a> {
    pub error_type: &'static str,
    pub detail: &'a str,
}

/// A request's span from its arrival to its exit (and, through `late`, to its answer's last
/// byte).
pub(super) struct RequestTrace {
    started: SystemTime,
    /// The parent its `traceparent` names (read only when traces are exported).
    parent: Option<SpanContext>,
    span: Option<Span>,
    /// `url.full`, made when the span records, set if the request went to the API.
    url: Option<String>,
    /// Where the exit leaves the span for the response work.
    late: Option<Slot>,
}

/// What the span says of the request, borrowed from the ledger.
pub(super) struct Facts<'a> {
    pub method: &'a Method,
    /// The request's target, after routing (an API prefix taken off).
    pub uri: &'a http::Uri,
    /// `events.log_values`: without it, `url.full`'s path shows its values as `*`, as the
    /// event's `path` does (the contract's `path_shape`).
    pub log_values: bool,
    pub contract: &'a crate::contract::Contract,
    pub operation: Option<&'a Operation>,
    pub api: &'a Api,
    pub upstream: usize,
    pub request_id: &'a str,
    pub tool: Option<&'a Attribution>,
    pub revision: &'a str,
    /// What the audit found so far; at the exit, all of it.
    pub findings: &'a [Finding],
}

impl RequestTrace {
    pub fn open(t: Option<&Telemetry>, headers: &HeaderMap) -> RequestTrace {
        RequestTrace {
            started: SystemTime::now(),
            parent: t.and_then(|_| context::from_headers(headers)),
            span: None,
            url: None,
            late: None,
        }
    }

    /// Start the span, if not yet started; then, as `propagation` says, name it as the parent
    /// in `headers`, the ones the API will get.
    pub fn begin(&mut self, t: &Telemetry, facts: &Facts<'_>, headers: &mut HeaderMap) {
        self.start(t, facts);
        let Some(span) = &self.span else { return };
        // One that could not be read is no parent: the API would get a trace nobody has.
        let sent = self.parent.is_some();
        let inject = match t.propagation {
            Propagation::Always => true,
            Propagation::WhenAbsent => !sent,
            Propagation::Never => false,
        };
        if inject {
            context::inject(span.context(), headers);
        }
    }

    /// The span, started now unless it was.
    pub fn start(&mut self, t: &Telemetry, facts: &Facts<'_>) {
        if self.span.is_some() {
            return;
        }
        let call_parent = facts.tool.and_then(|c| c.parent.as_ref());
        let mut links = (facts.tool).map(|c| c.links.clone()).unwrap_or_default();
        let parent = match (&self.parent, call_parent) {
            (Some(remote), call) => {
                // The request's own parent wins; the call it was tied to is linked.
                links.extend(call.cloned());
                Some(remote)
            }
            (None, call) => call,
        };
        let start = Start {
            name: name(facts),
            kind: SpanKind::Client,
            time: Some(self.started),
            links,
        };
        let mut span = t.span(start, parent);
        attributes(&mut span, facts);
        if span.is_recording() {
            let upstream = &facts.api.upstreams[facts.upstream];
            let path = super::path_text(facts.log_values, facts.contract, facts.uri.path());
            self.url = Some(url_full(upstream, &path, facts.uri.query()));
        }
        self.span = Some(span);
    }

    /// What driftwatch's read before the write decided, on the request's span: the read is a
    /// span of its own, and this names it.
    pub fn read_before_write(&mut self, note: &crate::sink::ReadNote) {
        let Some(span) = &mut self.span else { return };
        span.set_str("driftwatch.read_before_write.request_id", &note.request_id);
        span.set("driftwatch.read_before_write.outcome", note.outcome);
    }

    /// The span's context, for an event's ids (made only when an event is).
    pub fn context(&self) -> Option<SpanContext> {
        Some(self.span.as_ref()?.context().clone())
    }

    /// The slot the response work will find the span in, made when the span records.
    pub fn late(&mut self) -> Option<Slot> {
        if !self.span.as_ref()?.is_recording() {
            return None;
        }
        Some(self.late.get_or_insert_with(Slot::default).clone())
    }

    /// End the span with what the client receives: what the API answered (a client span), or
    /// what driftwatch answered itself (a server span), what driftwatch did, each finding
    /// (`actions`, one each); or leave it to the response work. Its context, for the event.
    pub fn end(
        &mut self,
        findings: &[Finding],
        actions: &[&'static str],
        (outcome, status): (Outcome, http::StatusCode),
        failure: Option<Failure<'_>>,
    ) -> Option<SpanContext> {
        let mut span = self.span.take()?;
        span.set("driftwatch.action", outcome.as_str());
        if !findings.is_empty() {
            span.set("driftwatch.findings", findings.len() as i64);
        }
        for (f, action) in findings.iter().zip(actions) {
            span.event("driftwatch.finding", &finding(f, action));
        }
        let url = self.url.take();
        match (outcome, failure) {
            (Outcome::Forwarded, _) => answered(&mut span, url, status),
            (Outcome::UpstreamError, failure) => {
                url.into_iter().for_each(|u| span.set("url.full", u));
                let failure = failure.unwrap_or(Failure {
                    error_type: "_OTHER",
                    detail: "",
                });
                span.set("error.type", failure.error_type);
                span.set_error(failure.detail.to_owned());
            }
            (Outcome::Blocked, _) => {
                let why = refused(findings, actions);
                span.event(
                    "driftwatch.refused",
                    &[("driftwatch.refused.reason", why.as_str())],
                );
                answered_here(&mut span, status, why);
            }
            (Outcome::ClientError, failure) => {
                let why = failure.map_or_else(String::new, |f| f.detail.to_owned());
                answered_here(&mut span, status, why);
            }
        }
        let cx = span.context().clone();
        match self.late.take() {
            // The response work may still find something: it ends the span (or, done already,
            // the slot's drop does).
            Some(slot) => *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(span),
            None => span.end(),
        }
        Some(cx)
    }
}

/// The API's answer on its client span: from 400 on an error, `error.type` its status.
pub(super) fn answered(span: &mut Span, url: Option<String>, status: http::StatusCode) {
    url.into_iter().for_each(|u| span.set("url.full", u));
    let code = status.as_u16();
    span.set("http.response.status_code", i64::from(code));
    if code >= 400 {
        span.set("error.type", code.to_string());
        span.set_error("");
    }
}

/// A request driftwatch answered itself: no request went to the API, so no client span; the
/// span is driftwatch's server span, with the status the client got, and an error saying why.
fn answered_here(span: &mut Span, status: http::StatusCode, why: String) {
    span.set_kind(SpanKind::Server);
    span.set("http.response.status_code", i64::from(status.as_u16()));
    span.set("error.type", status.as_u16().to_string());
    span.set_error(why);
}

/// `url.full` as the API got it: its scheme and authority (never credentials: `Upstream` holds
/// none), its base path, `path` (the request's, its values `*` unless `events.log_values`), and
/// every query value `REDACTED`, its key kept, a bare item (no `=`) `REDACTED` whole (spans
/// carry no values; the HTTP conventions redact with `REDACTED`).
pub(super) fn url_full(upstream: &Upstream, path: &str, query: Option<&str>) -> String {
    let mut url = format!(
        "{}://{}{}{}",
        upstream.scheme, upstream.authority, upstream.prefix, path
    );
    if let Some(query) = query {
        url.push('?');
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                url.push('&');
            }
            match pair.split_once('=') {
                Some((key, _)) => {
                    url.push_str(key);
                    url.push_str("=REDACTED");
                }
                // A bare item may be a value (`?sk_live_...`): it is redacted too.
                None => url.push_str("REDACTED"),
            }
        }
    }
    url
}

/// `GET /channels/{id}`, or the method alone when no operation matched.
fn name<'a>(facts: &Facts<'a>) -> (&'a str, &'a str) {
    let template = facts.operation.map_or("", |op| op.template.as_str());
    (facts.method.as_str(), template)
}

fn attributes(span: &mut Span, facts: &Facts<'_>) {
    span.set_all(&facts.api.span_attributes[facts.upstream]);
    span.set_str("http.request.method", facts.method.as_str());
    span.set_str("driftwatch.spec.revision", facts.revision);
    span.set_str("driftwatch.request_id", facts.request_id);
    if let Some(op) = facts.operation {
        span.set_str("url.template", &op.template);
        span.set_str("driftwatch.operation", &op.id);
    }
    // The call is named by the span's parent (or links), not by `gen_ai.tool.name`: a
    // backend would show every request as a tool call of its own.
    if let Some(tool) = facts.tool {
        span.set_str("driftwatch.tool", tool.label());
        span.set("driftwatch.tool_attribution", tool.by.as_str());
    }
}

/// What every request span of one API and upstream says alike: the server, the API's name
/// (when it has one) and its mode.
pub(super) fn api_attributes(api: &ApiSettings, upstream: &Upstream) -> Attributes {
    let mut a = vec![
        attr("server.address", upstream.authority.host().to_owned()),
        attr("driftwatch.mode", api.policy.mode.as_str()),
    ];
    if let Some(port) = upstream.authority.port_u16() {
        a.push(attr("server.port", i64::from(port)));
    }
    if let Some(name) = &api.name {
        a.push(attr("driftwatch.api", name.clone()));
    }
    Attributes::new(&a)
}

/// `refused by driftwatch: silent_clear_risk /graphicsElementIds`, the blocked findings named.
fn refused(findings: &[Finding], actions: &[&'static str]) -> String {
    let blocked: Vec<String> = (findings.iter().zip(actions))
        .filter(|(_, a)| **a == "block")
        .map(|(f, _)| format!("{} {}", f.kind, f.field))
        .collect();
    format!("refused by driftwatch: {}", blocked.join(", "))
}
