//! The check stage: the core audits the request, and a replace write is compared with the last
//! GET of its resource. Its results go into the request's ledger; what the response must carry
//! (the memory key, fields at risk) comes back as `Pending`. An internal failure of the audit is
//! counted and the request goes on unaudited: driftwatch's fault never stops traffic.

use std::time::{Instant, SystemTime};

use http::request::Parts;
use serde_json::json;

use super::body::BodyRead;
use super::record::Ledger;
use super::{Api, Sidecar};
use crate::audit::{SentProperties, audit};
use crate::contract::{Operation, WriteSemantics};
use crate::finding::{Finding, Kind, Location};
use crate::memory::Key;
use crate::request::{Headers, RequestView};
use crate::revision::Revision;
use crate::silent::{AtRisk, Tracker, resource_key};
use crate::sink::SECRET_HEADERS;

/// What the response of a checked request must carry to the memory.
#[derive(Default)]
pub(super) struct Pending {
    /// The resource's memory key, for an operation with a remembered resource.
    pub memory_key: Option<Key>,
    /// Fields the write omits that the last GET showed with a value.
    pub at_risk: AtRisk,
    /// The memory has no view of the resource that shows every field the write omits: enforce
    /// reads it before the write (`before_write.rs`).
    pub unseen: bool,
    /// driftwatch's read of the resource before the write, for the repair to complete from.
    pub read: Option<super::resource::Read>,
    /// Their `silent_clear_risk` findings, once the write is forwarded: its own answer decides
    /// them (withdrawn where it shows the field still holding a value), so they are recorded
    /// with the response, not the request.
    pub deferred: Vec<Finding>,
    /// What the fields at risk held, for the write's incident (`incidents.keep_values`).
    pub kept: Option<super::incident::KeptWrite>,
}

impl Pending {
    /// A forwarded write's `silent_clear_risk` findings, taken out of the request's ledger to
    /// wait for its answer.
    pub fn defer_risks(&mut self, findings: &mut Vec<Finding>) {
        if self.at_risk.is_empty() {
            return;
        }
        let (risks, rest) = std::mem::take(findings)
            .into_iter()
            .partition(|f| f.kind == Kind::SilentClearRisk);
        *findings = rest;
        self.deferred = risks;
    }
}

/// Header lookup for the audit over hyper's header map.
/// The request's headers as the API will get them: a request without `Authorization` is sent
/// the upstream URL's `user:password@` as Basic, so the audit sees it carried.
struct HeaderView<'a>(&'a http::HeaderMap, Option<&'a http::HeaderValue>);

impl Headers for HeaderView<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        let value = match (self.0.get(name), name) {
            (None, "authorization") => self.1,
            (value, _) => value,
        };
        value.and_then(|v| v.to_str().ok())
    }
}

pub(super) fn check<'c>(
    s: &Sidecar,
    rev: &'c Revision,
    parts: &Parts,
    read: &BodyRead,
    ledger: &mut Ledger<'c>,
) -> Pending {
    let body = match read {
        BodyRead::Off => return Pending::default(),
        BodyRead::Whole(bytes) => Some(&bytes[..]),
        BodyRead::TooLarge => None,
    };
    let started = Instant::now();
    let audited = audit_request(s, ledger.api.index, rev, parts, body);
    s.sinks
        .metrics
        .audit_seconds(started.elapsed().as_secs_f64());
    let Some(audited) = audited else {
        s.sinks.metrics.audit_error();
        let path = s.path_text(&rev.contract, parts.uri.path());
        tracing::error!(method = %parts.method, path, "internal audit error; request forwarded unaudited");
        return Pending::default();
    };
    let (operation, ref findings, _, truncated, ref sent) = audited;
    exercised(rev, parts, body, operation, sent.as_ref());
    watch_routing(s, &ledger.api, rev, parts, operation.is_some(), findings);
    if truncated {
        s.sinks.metrics.limit_hit("findings_per_request");
    }
    if let Some(op) = operation {
        // Parts of its spec were skipped at load: what they would have checked was not.
        let first_use = !op.skipped_settled();
        let skipped = rev.contract.skipped(op);
        for reason in skipped {
            s.sinks.metrics.unaudited(reason.unaudited_reason());
        }
        if first_use && skipped.contains(&crate::contract::Skipped::Validator) {
            // A schema that failed at its first use is a warning found after the load: said
            // once (two first requests racing may both say it, with the same figure).
            s.sinks
                .metrics
                .spec_warnings(&ledger.api.label, &rev.contract);
        }
    }
    record(s, rev, parts, read, ledger, audited)
}

/// What the request exercised of the spec in force (`/coverage`): its operation, or that it
/// routed nowhere, and the body properties the audit found it sending. Counted here, once per
/// request (a repaired write's second audit is not).
fn exercised(
    rev: &Revision,
    parts: &Parts,
    body: Option<&[u8]>,
    op: Option<&Operation>,
    sent: Option<&SentProperties>,
) {
    let Some(op) = op else {
        return rev.coverage.unrouted();
    };
    let headers = HeaderView(&parts.headers, None);
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let body = body.filter(|b| !b.is_empty());
    let view = RequestView::new(parts.method.as_str(), target, &headers, body);
    rev.coverage.request(op, &view, sent);
}

/// The completed body of a repaired write, audited again: its findings replace the write's.
/// What is counted once per request (the audit's time, routing, skipped parts, findings past
/// the bound) `check` counted; `None` if the audit panicked (counted).
pub(super) fn check_again<'c>(
    s: &Sidecar,
    rev: &'c Revision,
    parts: &Parts,
    completed: &BodyRead,
    ledger: &mut Ledger<'c>,
) -> Option<Pending> {
    let BodyRead::Whole(body) = completed else {
        return None;
    };
    let audited = audit_request(s, ledger.api.index, rev, parts, Some(body));
    if audited.is_none() {
        s.sinks.metrics.audit_error();
    }
    Some(record(s, rev, parts, completed, ledger, audited?))
}

/// An audit's findings into the request's ledger, each named by its operation; what the
/// response must carry back.
fn record<'c>(
    s: &Sidecar,
    rev: &'c Revision,
    parts: &Parts,
    read: &BodyRead,
    ledger: &mut Ledger<'c>,
    (operation, mut findings, memory_key, _, _): Audited<'c>,
) -> Pending {
    if matches!(read, BodyRead::TooLarge) {
        unaudited_body(s, &mut findings);
    }
    if let Some(op) = operation {
        for f in findings.iter_mut().filter(|f| f.operation.is_none()) {
            f.operation = Some(op.id.as_str().into());
        }
    }
    if !findings.is_empty() && s.settings.events.log_values {
        let body = match read {
            BodyRead::Whole(bytes) => Some(&bytes[..]),
            _ => None,
        };
        ledger.values = Some(values(s, &rev.contract.secrets, parts, body));
    }
    ledger.operation = operation;
    ledger.findings = findings;
    Pending {
        memory_key,
        ..Pending::default()
    }
}

/// A replace write that omits fields, compared with the last GET of its resource: asked of
/// the shared store first (within its deadline) where replicas share one, so a GET through
/// another replica counts; then this replica's memory, which holds the newer of the two.
pub(super) async fn compare_with_last_get(
    s: &Sidecar,
    ledger: &mut Ledger<'_>,
    pending: &mut Pending,
) {
    let (Some(op), Some(key)) = (ledger.operation, &pending.memory_key) else {
        return;
    };
    let omits = |f: &Finding| f.kind == Kind::OmittedOnReplace;
    if op.write != WriteSemantics::Replace || !ledger.findings.iter().any(omits) {
        return;
    }
    let api = ledger.api.label.name().unwrap_or_default();
    if let Some(store) = &s.store {
        // The resource's last GET and what the operation's answers taught, both through any
        // replica: asked together, each within the deadline.
        let operation = crate::memory::survival::name(api, op);
        let values = super::incident::recall_values(s, key);
        let (snapshot, lesson, ()) =
            tokio::join!(store.recall(key), store.lessons(&operation), values);
        if let Some(snapshot) = snapshot {
            s.memory.offer(key.clone(), snapshot);
        }
        if let Some(lesson) = lesson {
            s.memory.survival.learn(&lesson);
        }
    }
    let tracker = Tracker {
        memory: &s.memory,
        field_maps: &s.settings.memory.field_map,
        api,
        tool: None,
    };
    // The memory's entries may come from another process: a panic here is a counted audit
    // error, and the write is still forwarded (observe) or decided on what is known.
    let findings = &mut ledger.findings;
    let compared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tracker.before_write(op, key, SystemTime::now(), findings)
    }));
    match compared {
        Ok(compared) => {
            pending.at_risk = compared.at_risk;
            pending.unseen = compared.unseen;
        }
        Err(_) => s.sinks.metrics.audit_error(),
    }
}

/// Count whether the request routed to an operation (a known path with another method did);
/// each closed window sets the share metric and the warning.
fn watch_routing(
    s: &Sidecar,
    api: &Api,
    rev: &Revision,
    parts: &Parts,
    found: bool,
    findings: &[Finding],
) {
    let routed = found || findings.iter().any(|f| f.kind == Kind::MethodNotAllowed);
    if let Some(closed) = api.unrouted.record(routed, parts.uri.path()) {
        s.sinks.metrics.unrouted_share(&api.label, closed.share);
        let base = super::unrouted::base_text(
            api.settings.spec.contract.base_path.as_deref(),
            &rev.contract,
        );
        api.unrouted.settle(&closed, &rev.contract, &base);
    }
}

/// The operation, findings, memory key, whether findings were left out, and the body
/// properties sent (for coverage).
type Audited<'c> = (
    Option<&'c Operation>,
    Vec<Finding>,
    Option<Key>,
    bool,
    Option<SentProperties>,
);

/// The core's audit, and the resource's memory key; `None` if the audit panicked.
fn audit_request<'c>(
    s: &Sidecar,
    api: usize,
    rev: &'c Revision,
    parts: &Parts,
    body: Option<&[u8]>,
) -> Option<Audited<'c>> {
    let upstream = s.apis[api].settings.upstream.as_ref();
    let headers = HeaderView(&parts.headers, upstream.and_then(|u| u.basic.as_ref()));
    let path_and_query = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let body = body.filter(|b| !b.is_empty());
    let view = RequestView::new(parts.method.as_str(), path_and_query, &headers, body);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let a = audit(&rev.contract, &view);
        let key = a
            .operation
            .filter(|_| s.settings.memory.enabled)
            .and_then(|op| {
                let credential = view.headers.get(s.settings.memory.scope_header.as_str());
                let scope = s.memory.hash_key.scope(credential) ^ api_salt(api);
                resource_key(op, &a.path_values, scope)
            });
        (a.operation, a.findings, key, a.truncated, a.sent_properties)
    }))
    .ok()
}

/// What keeps two APIs' resources apart in the memory (and in a shared store): mixed into the
/// credential scope. The first API's is 0, so a sidecar of one API keeps the keys it had.
fn api_salt(index: usize) -> u64 {
    (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A body too large to read: its findings cannot be known, and one `unaudited` says so.
fn unaudited_body(s: &Sidecar, findings: &mut Vec<Finding>) {
    findings.retain(|f| !f.is_about_the_body());
    findings.push(
        Finding::new(Kind::Unaudited, Location::Body, "")
            .observed("body larger than audit.max_body")
            .message(format!(
                "the body is larger than {} bytes and was forwarded unaudited",
                s.settings.audit.max_body
            )),
    );
}

/// Query, body and non-secret headers, for `log_values = true` only. The spec's apiKey
/// credentials are secrets whatever the config says: their query values are redacted and their
/// headers left out.
fn values(
    s: &Sidecar,
    secrets: &crate::contract::Secrets,
    parts: &Parts,
    body: Option<&[u8]>,
) -> serde_json::Value {
    let secret = |name: &http::HeaderName| {
        SECRET_HEADERS.contains(&name.as_str())
            || secrets.is_secret_header(name.as_str())
            || s.settings.events.secret_headers.contains(name)
    };
    let headers: serde_json::Map<String, serde_json::Value> = parts
        .headers
        .iter()
        .filter(|(k, _)| !secret(k))
        .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or("(binary)"))))
        .collect();
    let query = parts.uri.query().map(|q| secrets.redact_query(q));
    let body = body.map(|b| String::from_utf8_lossy(&b[..b.len().min(4096)]).into_owned());
    json!({"query": query, "body": body, "headers": headers})
}
