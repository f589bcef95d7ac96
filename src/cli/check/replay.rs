//! The audit of recorded traffic in two steps, so that every core works and the verdict is the
//! sequential one. **In parallel**, per exchange: the request audit, its resource's memory key,
//! the response audit and the parse of the response body, none of which depends on another
//! exchange. **In recording order**, on one thread: the silent-clear memory (a write compared
//! with the GETs before it, a clear confirmed by the responses after it) and the findings said
//! once per run (`replace_will_drop_field`). The memory's state is one recording's history:
//! keeping it on one thread keeps each resource's order without sharding.

use std::collections::BTreeMap;
use std::time::SystemTime;

use rayon::prelude::*;

use crate::audit::{ReportedOnce, SentProperties, audit, audit_response};
use crate::contract::{Contract, Operation};
use crate::coverage::Coverage;
use crate::finding::Finding;
use crate::memory::{HashKey, Key, Snapshot};
use crate::request::{Headers, RequestView};
use crate::response::ResponseView;
use crate::settings::Settings;
use crate::silent::{Tracker, resource_key};
use crate::traffic::Exchange;

/// What the parallel step found for one exchange.
pub struct Audited<'c> {
    op: Option<&'c Operation>,
    findings: Vec<Finding>,
    key: Option<Key>,
    answered: Vec<Finding>,
    /// The response body's fields, taken for the memory (only where the exchange has a memory
    /// key; a parsed body borrows the exchange, which moves to the reporting thread).
    body: Option<Snapshot>,
    /// Where it went: its shape in the spec, or the path itself under `events.log_values`.
    pub path: String,
    /// The body properties the request audit found sent (for `--coverage`).
    sent: Option<SentProperties>,
}

/// The parallel step over a chunk, in the chunk's order.
pub fn audit_all<'c>(
    contract: &'c Contract,
    settings: &Settings,
    (hash_key, coverage): (HashKey, Option<&Coverage>),
    exchanges: &[Exchange],
) -> Vec<Audited<'c>> {
    exchanges
        .par_iter()
        .map(|e| {
            let audited = audit_one(contract, settings, hash_key, e);
            if let Some(coverage) = coverage {
                exercised(coverage, settings, e, &audited);
            }
            audited
        })
        .collect()
}

/// What the exchange exercised of the spec (`--coverage`), as the sidecar counts it: the
/// request, the recorded answer, and the tool named in `events.tool_header`.
fn exercised(coverage: &Coverage, settings: &Settings, e: &Exchange, audited: &Audited) {
    let Some(op) = audited.op else {
        return coverage.unrouted();
    };
    let body = e.body.as_deref().filter(|_| !e.body_unknown);
    let sent = audited.sent.as_ref().filter(|_| !e.body_unknown);
    let request = RequestView::new(&e.method, &e.url, &e.headers, body);
    coverage.request(op, &request, sent);
    if let Some(response) = &e.response {
        coverage.response(op, response.status);
    }
    let tool_header = settings.events.tool_header.as_str();
    if let Some(tool) = Headers::get(e.headers.as_slice(), tool_header) {
        coverage.tool(op, tool);
    }
}

fn audit_one<'c>(
    contract: &'c Contract,
    settings: &Settings,
    hash_key: HashKey,
    exchange: &Exchange,
) -> Audited<'c> {
    let request = RequestView::new(
        &exchange.method,
        &exchange.url,
        &exchange.headers,
        exchange.body.as_deref(),
    );
    let mut audited = audit(contract, &request);
    audited.findings.retain(|f| recorded(exchange, f));
    let credential = Headers::get(
        exchange.headers.as_slice(),
        settings.memory.scope_header.as_str(),
    );
    let key = audited
        .operation
        .and_then(|op| resource_key(op, &audited.path_values, hash_key.scope(credential)));
    let response = exchange.response.as_ref();
    // Parsed once, for the audit and the memory alike (as the proxy does).
    let parsed = response
        .filter(|_| audited.operation.is_some())
        .and_then(|r| r.body.as_deref())
        .and_then(|b| crate::json::parse(b).ok());
    let answered = match (audited.operation, response) {
        (Some(op), Some(response)) => {
            let view = ResponseView {
                status: response.status,
                headers: &response.headers,
                body: response.body.as_deref(),
                parsed: parsed.as_ref().map(crate::json::Doc::root),
            };
            audit_response(contract, op, &view)
        }
        _ => Vec::new(),
    };
    let body = parsed
        .filter(|_| key.is_some())
        .and_then(|doc| Snapshot::of(&hash_key, doc.root()));
    let path = match settings.events.log_values {
        true => request.path.to_string(),
        false => contract.path_shape(request.path),
    };
    Audited {
        op: audited.operation,
        findings: audited.findings,
        key,
        answered,
        body,
        path,
        sent: audited.sent_properties,
    }
}

/// Whether the recording shows what `finding` is about: an access log says nothing of the
/// body (an absent one is no finding), and a recording without request headers nothing of
/// the credentials sent.
fn recorded(exchange: &Exchange, finding: &Finding) -> bool {
    let body = exchange.body_unknown && finding.is_about_the_body();
    let credentials =
        exchange.credentials_unknown && finding.kind == crate::finding::Kind::MissingCredentials;
    !(body || credentials)
}

/// The sequential step's state: one recording's memory, what was said once, what went
/// unaudited.
pub struct Replay<'m> {
    pub tracker: Tracker<'m>,
    pub reported: ReportedOnce,
    /// Exchanges that reached an operation with parts skipped at load, by reason.
    pub unaudited: BTreeMap<&'static str, usize>,
}

impl<'m> Replay<'m> {
    /// A replay on `memory`, with the write-to-read field names of `memory.field_map`.
    pub fn new(
        memory: &'m crate::memory::Memory,
        field_maps: &'m std::collections::HashMap<
            String,
            std::collections::HashMap<String, String>,
        >,
    ) -> Replay<'m> {
        Replay {
            tracker: Tracker {
                memory,
                field_maps,
                api: "",
                tool: None,
            },
            reported: ReportedOnce::default(),
            unaudited: BTreeMap::new(),
        }
    }
}

impl Replay<'_> {
    /// The exchange's findings in the order the sidecar reports them: the request's (a write
    /// upgraded where the memory shows a value), the clears its response confirms, the
    /// response's.
    pub fn findings(&mut self, exchange: &Exchange, audited: Audited<'_>) -> Vec<Finding> {
        let Audited {
            op,
            mut findings,
            key,
            mut answered,
            body,
            ..
        } = audited;
        for reason in op.iter().flat_map(|op| op.skipped_known()) {
            *self.unaudited.entry(reason.unaudited_reason()).or_default() += 1;
        }
        if let (Some(op), Some(key)) = (op, key) {
            let at = exchange.at.unwrap_or_else(SystemTime::now);
            let at_risk = self
                .tracker
                .before_write(op, &key, at, &mut findings)
                .at_risk;
            if let Some(response) = &exchange.response {
                let request_id = Headers::get(exchange.headers.as_slice(), "x-request-id")
                    .map_or_else(|| format!("exchange-{}", exchange.index), String::from);
                let status = response.status;
                let outcome = self.tracker.after_response(
                    op,
                    &key,
                    &request_id,
                    at,
                    status,
                    body.as_ref(),
                    at_risk,
                );
                crate::silent::withdraw(&mut findings, &outcome.survived);
                findings.extend(outcome.confirmed);
            }
        }
        self.reported.retain_new(&mut answered);
        findings.extend(answered);
        findings
    }
}
