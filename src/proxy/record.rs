//! The one exit of the request path. A `Ledger` is opened when a request arrives and filled by
//! the stages; `close` takes whatever the stages produced (a forwarded answer, a refusal, a
//! fault) and records the request exactly once: its outcome and the status the client
//! receives, each blocked kind once, its findings, and an event when there is something to say.

use std::collections::BTreeSet;
use std::time::SystemTime;

use http::header::HeaderValue;
use http::request::Parts;
use http::{Method, Response, StatusCode, Uri};

use std::sync::Arc;

use super::error::{Fault, ProxyError};
use super::headers::{RequestId, value_text};
use super::late::LateMeta;
use super::problem;
use super::route::{By, Route};
use super::tee::ResponseBody;
use super::trace::{Facts, Failure, RequestTrace};
use super::{Api, Sidecar};
use crate::contract::Operation;
use crate::finding::{Finding, Kind};
use crate::mcp::calls::Attribution;
use crate::policy::Action;
use crate::revision::Revision;
use crate::sink::{
    Event, EventError, EventFinding, NO_OPERATION, Outcome, ReadNote, Repair, ToolFields, TraceIds,
};
use crate::telemetry::SpanContext;

/// What became of a write set to `repair` (`driftwatch_repairs_total`'s `outcome`).
const REPAIRED: &str = "repaired";
const REFUSED: &str = "refused";
const PRECONDITION_FAILED: &str = "precondition_failed";

/// W3C trace context: a name, not text parsed again on every request.
const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");

/// What the stages made of a request, for the exit to record and send.
pub(super) enum Reply {
    /// The upstream answered; `extra` holds findings its answer raised (`upstream_rejected`).
    Forwarded {
        response: Response<ResponseBody>,
        extra: Vec<Finding>,
    },
    /// Refused in enforce mode; each kind that blocked it, once, and what the refusal says to
    /// the tool call behind it.
    Blocked {
        response: Response<ResponseBody>,
        kinds: BTreeSet<Kind>,
        said: String,
    },
    /// Not forwarded, or no answer: the client's fault or the upstream's.
    Failed(ProxyError),
}

/// What is known of a request so far. Header values and the URI share the request's buffers
/// (a clone is a reference count): a clean request makes no text for an event it never writes.
pub(super) struct Ledger<'c> {
    /// The API the request is for, and which of its upstreams it goes to.
    pub api: Arc<Api>,
    pub upstream: usize,
    /// How the API was chosen, for the log of a request that failed.
    routed: By,
    /// The client's id, or the one made for it; returned on the response.
    pub request_id: RequestId,
    method: Method,
    pub uri: Uri,
    /// The tool call behind the request: the tool header's, or found by `tool::attribute`.
    pub tool: Option<Arc<Attribution>>,
    traceparent: Option<HeaderValue>,
    /// Its span, when traces are exported.
    trace: RequestTrace,
    pub operation: Option<&'c Operation>,
    pub findings: Vec<Finding>,
    /// Query, body and headers, when `events.log_values` is on and there are findings.
    pub values: Option<serde_json::Value>,
    /// A replace write set to `repair`: what was filled from the read, or why it was refused.
    pub repair: Option<Repair>,
    /// The findings of the fields the repair filled: the audit of the completed body has none,
    /// and they are recorded with the request as `repaired`.
    pub repaired: Vec<Finding>,
    /// driftwatch's read of the resource before the write, and what it decided.
    read_before_write: Option<ReadNote>,
}

impl<'c> Ledger<'c> {
    /// Open the ledger; a request without an id gets one, and the upstream sees it.
    pub fn open(s: &Sidecar, route: Route, parts: &mut Parts) -> Ledger<'c> {
        let Route { api, upstream, by } = route;
        let name = &s.settings.events.request_id_header;
        let request_id = match parts.headers.get(name).and_then(RequestId::given) {
            Some(id) => id,
            None => {
                let id = RequestId::new();
                parts.headers.insert(name.clone(), id.value().clone());
                id
            }
        };
        Ledger {
            api,
            upstream,
            routed: by,
            request_id,
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            tool: parts
                .headers
                .get(&s.settings.events.tool_header)
                .and_then(|v| v.to_str().ok())
                .map(|name| Arc::new(Attribution::header(name))),
            traceparent: parts.headers.get(&TRACEPARENT).cloned(),
            trace: RequestTrace::open(s.telemetry.as_deref(), &parts.headers),
            operation: None,
            findings: Vec::new(),
            values: None,
            repair: None,
            repaired: Vec::new(),
            read_before_write: None,
        }
    }

    /// Start the request's span (traced) and name it in `headers` as `telemetry.propagation`
    /// says.
    pub fn begin_trace(&mut self, s: &Sidecar, rev: &Revision, headers: &mut http::HeaderMap) {
        if let Some(t) = &s.telemetry {
            let (trace, facts) = self.trace_and_facts(s, rev);
            trace.begin(t, &facts, headers);
        }
    }

    /// The span, and what it says of the request: one borrow of the ledger split in two.
    fn trace_and_facts<'a>(
        &'a mut self,
        s: &Sidecar,
        rev: &'a Revision,
    ) -> (&'a mut RequestTrace, Facts<'a>) {
        let facts = Facts {
            method: &self.method,
            uri: &self.uri,
            log_values: s.settings.events.log_values,
            contract: &rev.contract,
            operation: self.operation,
            api: &self.api,
            upstream: self.upstream,
            request_id: self.request_id.as_str(),
            tool: self.tool.as_deref(),
            revision: &rev.spec.revision,
            findings: &self.findings,
        };
        (&mut self.trace, facts)
    }

    /// The request's span context, for a span of driftwatch's own under it (its reads).
    pub fn span_context(&self) -> Option<SpanContext> {
        self.trace.context()
    }

    /// What the read before the write decided: in the event, and on the request's span.
    pub fn note_read(&mut self, note: ReadNote) {
        self.trace.read_before_write(&note);
        self.read_before_write = Some(note);
    }

    /// The request's side of an event raised after its response.
    pub fn late_meta(&mut self) -> LateMeta {
        LateMeta {
            span: self.trace.late(),
            tool: self.tool.clone(),
            traceparent: self.traceparent.clone(),
            trace: self.trace.context(),
            uri: self.uri.clone(),
        }
    }

    /// Record the request once and give back the response to send, carrying the request id
    /// (the client's, or the one made for it) unless the upstream set one.
    pub fn close(mut self, s: &Sidecar, rev: &Revision, reply: Reply) -> Response<ResponseBody> {
        let op_id = self.operation.map_or(NO_OPERATION, |op| op.id.as_str());
        let mut error = None;
        let (mut response, outcome, kinds) = match reply {
            Reply::Forwarded {
                mut response,
                extra,
            } => {
                self.findings.extend(extra);
                self.findings.append(&mut self.repaired);
                match self.repair_outcome(response.status()) {
                    Some(REPAIRED) => self.said_repaired(&mut response),
                    // The 412 answers driftwatch's `If-Match` (not one the agent sent).
                    Some(PRECONDITION_FAILED)
                        if self.repair.as_ref().is_some_and(|r| r.if_match) =>
                    {
                        self.tell_the_call(s, problem::changed_since_read())
                    }
                    _ => {}
                }
                (response, Outcome::Forwarded, BTreeSet::new())
            }
            Reply::Blocked {
                response,
                kinds,
                said,
            } => {
                self.tell_the_call(s, &said);
                (response, Outcome::Blocked, kinds)
            }
            Reply::Failed(failure) => {
                let (response, outcome, e) = self.fault(s, rev, &failure);
                error = Some((e, failure.error_type()));
                (response, outcome, BTreeSet::new())
            }
        };
        let name = &s.settings.events.request_id_header;
        if !response.headers().contains_key(name) {
            let id = self.request_id.value().clone();
            response.headers_mut().insert(name.clone(), id);
        }
        self.count(s, op_id, (outcome, response.status()), &kinds);
        self.exercised(rev, outcome, response.status());
        let actions: Vec<&'static str> = (self.findings.iter())
            .map(|f| self.done(outcome, response.status(), f))
            .collect();
        let failure = (error.as_ref()).map(|(e, error_type)| Failure {
            error_type,
            detail: &e.detail,
        });
        let trace = self.end_trace(s, rev, &actions, (outcome, response.status()), failure);
        if !self.findings.is_empty() || error.is_some() {
            let status = response.status().as_u16();
            let error = error.map(|(e, _)| e);
            self.event(s, rev, (outcome, status, error), actions, trace);
        }
        response
    }

    /// A request that was not forwarded or not answered: the answer driftwatch makes, whose
    /// fault it was, and what its event says.
    fn fault(
        &mut self,
        s: &Sidecar,
        rev: &Revision,
        failure: &ProxyError,
    ) -> (Response<ResponseBody>, Outcome, EventError) {
        let detail = failure.to_string();
        let response = self.failed(s, rev, failure, &detail);
        let outcome = match failure.fault() {
            Fault::Client => Outcome::ClientError,
            Fault::Upstream => Outcome::UpstreamError,
        };
        let fault = failure.fault().as_str();
        (response, outcome, EventError { fault, detail })
    }

    /// The span, started if the request failed before it was, ended; its ids.
    fn end_trace(
        &mut self,
        s: &Sidecar,
        rev: &Revision,
        actions: &[&'static str],
        done: (Outcome, StatusCode),
        failure: Option<Failure<'_>>,
    ) -> Option<SpanContext> {
        let t = s.telemetry.as_ref()?;
        let (trace, facts) = self.trace_and_facts(s, rev);
        trace.start(t, &facts);
        trace.end(facts.findings, actions, done, failure)
    }

    /// What an event and a span say was done about `f`: its action, except that a field
    /// filled for a write the API then refused with 412 was not repaired (`precondition_failed`).
    fn done(&self, outcome: Outcome, status: StatusCode, f: &Finding) -> &'static str {
        match self.action(outcome, f) {
            Action::Repair => self.repair_outcome(status).unwrap_or(REPAIRED),
            action => action.done(),
        }
    }

    /// What was done about `f`: repaired, blocked, or logged.
    fn action(&self, outcome: Outcome, f: &Finding) -> Action {
        let policy = &self.api.settings.policy;
        let operation = self.operation.map(|op| op.id.as_str());
        match repaired(self.repair.as_ref(), f) {
            Some(done) => done,
            None if outcome == Outcome::Blocked && policy.action(operation, f) == Action::Block => {
                Action::Block
            }
            None => Action::Log,
        }
    }

    /// The request in the metrics: its outcome, each blocked kind, the repair, each finding.
    fn count(
        &self,
        s: &Sidecar,
        op_id: &str,
        (outcome, status): (Outcome, StatusCode),
        kinds: &BTreeSet<Kind>,
    ) {
        let api = &self.api.label;
        s.sinks.metrics.request(api, op_id, outcome, status);
        for kind in kinds {
            s.sinks.metrics.blocked(api, op_id, kind.as_str());
        }
        self.count_repair(s, op_id, outcome, status);
        let exemplar = (!self.findings.is_empty()).then(|| {
            let trace = self.span_context().filter(|t| t.sampled);
            crate::sink::exemplar(trace.map(|t| t.trace_id_hex()), self.request_id.as_str())
        });
        for f in &self.findings {
            s.sinks.metrics.finding(api, op_id, f, exemplar.as_ref());
        }
        s.sinks.tools.findings(self.tool.as_deref(), &self.findings);
    }

    /// The API's answer, and the tool that made the request, in what the traffic exercised
    /// (`/coverage`). An answer driftwatch made (a refusal, a fault) is not the API's.
    fn exercised(&self, rev: &Revision, outcome: Outcome, status: StatusCode) {
        let Some(op) = self.operation else {
            return;
        };
        if outcome == Outcome::Forwarded {
            rev.coverage.response(op, status.as_u16());
        }
        if let Some(tool) = self.tool.as_deref().and_then(Attribution::known) {
            rev.coverage.tool(op, tool);
        }
    }

    /// A refused request's tool call is told, for its answer to say why (`wrap`); so is a
    /// repaired write's that the API answered 412.
    fn tell_the_call(&self, s: &Sidecar, said: &str) {
        let call = self.tool.as_ref().and_then(|t| t.call.as_ref());
        if let (Some(calls), Some(call)) = (s.calls(), call) {
            calls.refused(call, said);
        }
    }

    /// Each field of a write set to `repair`, by what became of it.
    fn count_repair(&self, s: &Sidecar, op_id: &str, outcome: Outcome, status: StatusCode) {
        let Some(repair) = &self.repair else { return };
        if matches!(outcome, Outcome::ClientError | Outcome::UpstreamError) {
            return;
        }
        let Some(done) = self.repair_outcome(status) else {
            return;
        };
        for field in &repair.fields {
            s.sinks.metrics.repair(&self.api.label, op_id, field, done);
        }
    }

    /// What became of a write set to `repair`, answered `status`: `refused` (driftwatch refused
    /// it instead), `precondition_failed` (the API answered 412: the resource changed after the
    /// read, and nothing was written) or `repaired`. The one place the three are told apart: the
    /// metric, the header, the event and the tool call's answer all follow it.
    fn repair_outcome(&self, status: StatusCode) -> Option<&'static str> {
        let repair = self.repair.as_ref()?;
        Some(match (&repair.refused, status) {
            (Some(_), _) => REFUSED,
            (None, StatusCode::PRECONDITION_FAILED) => PRECONDITION_FAILED,
            (None, _) => REPAIRED,
        })
    }

    /// A repaired write's answer names the fields driftwatch filled (`driftwatch-repaired`).
    fn said_repaired(&self, response: &mut Response<ResponseBody>) {
        let Some(repair) = self.repair.as_ref().filter(|r| !r.fields.is_empty()) else {
            return;
        };
        if let Ok(v) = HeaderValue::from_str(&repair.fields.join(", ")) {
            let name = http::HeaderName::from_static("driftwatch-repaired");
            response.headers_mut().insert(name, v);
        }
    }

    /// The problem+json answer for a fault, counted by cause and logged with whose it is.
    fn failed(
        &self,
        s: &Sidecar,
        rev: &Revision,
        error: &ProxyError,
        detail: &str,
    ) -> Response<ResponseBody> {
        if let Some(cause) = error.cause() {
            s.sinks.metrics.upstream_error(cause);
        }
        if let Some(reason) = error.reason() {
            s.sinks.metrics.client_error(reason);
        }
        let path = s.path_text(&rev.contract, self.uri.path());
        tracing::warn!(request_id = self.request_id.as_str(), method = %self.method, path,
            api = self.api.name(), routed = ?self.routed,
            fault = error.fault().as_str(), status = error.status().as_u16(), cause = error.cause(),
            "{detail}");
        let response = problem::response(
            error.status(),
            error.title(),
            detail,
            self.request_id.as_str(),
            None,
        );
        super::tee::own(response)
    }

    fn event(
        self,
        s: &Sidecar,
        rev: &Revision,
        (outcome, status, error): (Outcome, u16, Option<EventError>),
        actions: Vec<&'static str>,
        trace: Option<SpanContext>,
    ) {
        let policy = &self.api.settings.policy;
        let operation = self.operation.map(|op| op.id.clone());
        let findings = (self.findings.into_iter().zip(actions))
            .map(|(finding, action)| EventFinding { action, finding })
            .collect();
        let event = Event {
            api: self.api.settings.name.clone(),
            at: SystemTime::now(),
            request_id: self.request_id.as_str().to_owned(),
            traceparent: value_text(self.traceparent.as_ref()),
            trace: trace.as_ref().map_or_else(TraceIds::default, TraceIds::of),
            tool: ToolFields::of(self.tool.as_deref()),
            path_template: self.operation.map(|op| op.template.clone()),
            operation,
            method: self.method.to_string(),
            path: s.path_text(&rev.contract, self.uri.path()),
            status: Some(status),
            action: outcome.as_str(),
            error,
            mode: policy.mode.as_str(),
            spec_revision: rev.spec.revision.clone(),
            findings,
            findings_left_out: 0,
            catalog_defects: Vec::new(),
            repair: self.repair,
            read_before_write: self.read_before_write,
            values: self.values,
        };
        s.publish(event);
    }
}

/// What a repair did about `f`: filled its field (`Repair`), or, refused, blocked the request.
fn repaired(repair: Option<&Repair>, f: &Finding) -> Option<Action> {
    let r = repair.filter(|r| r.names(f))?;
    Some(match r.refused {
        None => Action::Repair,
        Some(_) => Action::Block,
    })
}
