//! One request, as named stages: **read** the body (buffered up to `audit.max_body`) → **check**
//! it (audit and silent-clear memory) → **decide** (enforce may refuse it) → **send** it
//! upstream → **stream back** the answer, with the response work handed on to run after its
//! last byte. A stage returns what the next needs, or a `ProxyError` that says whose fault it
//! was; whatever comes out goes to the one exit, `Ledger::close`, which records the request
//! exactly once with the status the client receives.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;

use http::header::{CONTENT_ENCODING, CONTENT_TYPE, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::Either;
use hyper::body::Incoming;

use super::Sidecar;
use super::before_write::read_before_write;
use super::body::{BodyRead, read};
use super::check::{Pending, check, compare_with_last_get};
use super::error::ProxyError;
use super::headers::{reframe_response, strip_hop_by_hop};
use super::late::{Copied, Late, Remember};
use super::outgoing::{Peer, outgoing, send};
use super::pool::Pool;
use super::problem;
use super::record::{Ledger, Reply};
use super::repair::{Write, repair};
use super::route::Route;
use super::stall::Stalling;
use super::tee::{ResponseBody, Tee, own};
use super::vet::vet;
use crate::finding::{Finding, Kind};
use crate::revision::Revision;

/// One request through its stages, sent upstream on `pool`: the connections of the serving
/// thread that accepted the connection, so that the request never waits on another thread.
pub async fn handle(
    s: Arc<Sidecar>,
    route: Route,
    pool: &Pool,
    req: Request<Incoming>,
    peer: Peer,
) -> Result<Response<ResponseBody>, Infallible> {
    let _in_flight = s.sinks.metrics.in_flight();
    // The spec in force when the request arrived; it stays with the request to its end.
    let rev = route.api.revision();
    let (mut parts, body) = req.into_parts();
    let mut ledger = Ledger::open(&s, route, &mut parts);
    let reply = match stages(&s, pool, &rev, &mut ledger, parts, body, &peer).await {
        Ok(reply) => reply,
        Err(error) => Reply::Failed(error),
    };
    Ok(ledger.close(&s, &rev, reply))
}

async fn stages<'c>(
    s: &Arc<Sidecar>,
    pool: &Pool,
    rev: &'c Arc<Revision>,
    ledger: &mut Ledger<'c>,
    mut parts: Parts,
    body: Incoming,
    peer: &Peer,
) -> Result<Reply, ProxyError> {
    vet(&parts)?;
    let (mut read, mut forward) = read(s, &parts, body).await?;
    let mut pending = check(s, rev, &parts, &read, ledger);
    super::tool::attribute(s, &rev.contract, &parts, &read, ledger);
    ledger.begin_trace(s, rev, &mut parts.headers);
    compare_with_last_get(s, ledger, &mut pending).await;
    let before = read_before_write(s, pool, rev, ledger, &mut pending, &parts, peer).await;
    if let Some(refused) = before {
        return Ok(refused);
    }
    let write = Write {
        parts: &mut parts,
        read: &mut read,
        forward: &mut forward,
        pending: &mut pending,
        peer,
    };
    if let Some(refused) = repair(s, pool, rev, ledger, write).await {
        return Ok(refused);
    }
    if let Some(refused) = decide(ledger) {
        return Ok(refused);
    }
    pending.kept = kept_for_write(s, rev, ledger, &pending, &read);
    pending.defer_risks(&mut ledger.findings);
    let upstream = &ledger.api.upstreams[ledger.upstream];
    let sent = match outgoing(s, upstream, parts, forward, peer) {
        Ok(request) => send(s, upstream, pool, request).await,
        Err(e) => Err(e),
    };
    match sent {
        Ok(response) => Ok(stream_back(s, rev, ledger, response, pending)),
        Err(e) => {
            // No answer will decide them: the risks stand with the request.
            ledger.findings.append(&mut pending.deferred);
            Err(e)
        }
    }
}

/// What a write forwarded with fields at risk held, for its incident.
fn kept_for_write(
    s: &Sidecar,
    rev: &Revision,
    ledger: &Ledger<'_>,
    pending: &Pending,
    read: &BodyRead,
) -> Option<super::incident::KeptWrite> {
    let write = super::incident::Write {
        op: ledger.operation?,
        path: ledger.uri.path(),
        body: match read {
            BodyRead::Whole(bytes) => Some(bytes),
            BodyRead::TooLarge | BodyRead::Off => None,
        },
        key: pending.memory_key.as_ref(),
        at_risk: &pending.at_risk,
    };
    super::incident::kept_for_write(s, &rev.contract, write)
}

/// Enforce mode: refuse the request when a finding's action is `block` (409 for a silent
/// clear, else 422), naming each blocked kind once.
fn decide(ledger: &Ledger<'_>) -> Option<Reply> {
    let op_id = ledger.operation.map(|op| op.id.as_str());
    let blocking = ledger.api.settings.policy.blocking(op_id, &ledger.findings);
    if blocking.is_empty() {
        return None;
    }
    let refused = problem::blocked(&blocking, ledger.request_id.as_str());
    let refused = if blocking.iter().any(|f| f.kind == Kind::SilentClearRisk) {
        problem::silent_clear(refused, &blocking)
    } else {
        refused
    };
    let refused = match ledger.tool.as_deref() {
        Some(tool) => problem::with_tool(refused, tool),
        None => refused,
    };
    let kinds: BTreeSet<Kind> = blocking.iter().map(|f| f.kind).collect();
    Some(Reply::Blocked {
        said: problem::said(&refused),
        response: own(refused),
        kinds,
    })
}

/// The upstream's answer on its way to the client, headers adjusted; its body streams through
/// a tee that hands a copy to the response work when one is wanted.
fn stream_back(
    s: &Arc<Sidecar>,
    rev: &Arc<Revision>,
    ledger: &mut Ledger<'_>,
    mut response: Response<Incoming>,
    pending: Pending,
) -> Reply {
    let status = response.status();
    let mut extra = Vec::new();
    if status.is_client_error() && !ledger.findings.is_empty() {
        extra.push(rejected(status, &ledger.findings));
    }
    reframe_response(response.headers_mut());
    strip_hop_by_hop(response.headers_mut(), None);
    if s.settings.proxy.report_header && !ledger.findings.is_empty() {
        let compacted = compact(ledger.findings.iter().chain(&extra));
        if let Ok(v) = HeaderValue::from_str(&compacted) {
            let name = HeaderName::from_static("driftwatch-findings");
            response.headers_mut().insert(name, v);
        }
    }
    let late = late_work(s, rev, ledger, &response, pending);
    let limit = s.settings.audit.max_response_body;
    let stall = s.settings.proxy.body_stall_timeout;
    let response = response.map(|b| Stalling::new(b, stall, s.sinks.metrics.body_stalls()));
    let response = match late {
        None => response.map(|b| Either::Left(Tee::pass(b))),
        Some(late) if !late.wants_body() => {
            late.run(Copied::NotWanted);
            response.map(|b| Either::Left(Tee::pass(b)))
        }
        Some(late) => response.map(|b| Either::Left(Tee::copying(b, limit, late))),
    };
    Reply::Forwarded { response, extra }
}

/// The response work of a routed request: its audit, and the memory's part.
fn late_work(
    s: &Arc<Sidecar>,
    rev: &Arc<Revision>,
    ledger: &mut Ledger<'_>,
    response: &Response<Incoming>,
    pending: Pending,
) -> Option<Late> {
    let op = ledger.operation?;
    let status = response.status();
    let remember = match pending.memory_key {
        Some(key)
            if status.is_success() && (op.shows_resource() || !pending.at_risk.is_empty()) =>
        {
            Some(Remember {
                key,
                at_risk: pending.at_risk,
            })
        }
        _ => None,
    };
    let rate = s.settings.audit.response_sample_rate;
    Some(Late {
        s: s.clone(),
        api: ledger.api.clone(),
        rev: rev.clone(),
        op: op.index,
        request_id: ledger.request_id.clone(),
        meta: ledger.late_meta(),
        status: status.as_u16(),
        content_type: response.headers().get(CONTENT_TYPE).cloned(),
        encoding: response.headers().get(CONTENT_ENCODING).cloned(),
        audit_body: rate >= 1.0 || (rate > 0.0 && fastrand::f64() < rate),
        remember,
        deferred: pending.deferred,
        kept: pending.kept,
    })
}

/// `upstream_rejected`: the API refused a request that had findings, so those findings are
/// the likely cause; the message names the first, or for a 401 or 403 the missing credential.
fn rejected(status: StatusCode, findings: &[Finding]) -> Finding {
    let refused_entry = matches!(status.as_u16(), 401 | 403);
    let first = (findings.iter())
        .find(|f| refused_entry && f.kind == Kind::MissingCredentials)
        .unwrap_or(&findings[0]);
    Finding::new(Kind::UpstreamRejected, first.location, first.field.clone())
        .observed(status.as_u16().to_string())
        .message(format!(
            "the API answered {} to a request with {} finding(s); first: {} `{}`",
            status.as_u16(),
            findings.len(),
            first.kind,
            first.field
        ))
}

/// `kind:field` pairs for the `driftwatch-findings` response header, bounded in length.
fn compact<'f>(findings: impl Iterator<Item = &'f Finding>) -> String {
    let mut out = String::new();
    for f in findings {
        let item = format!("{}:{}", f.kind, f.field);
        if out.len() + item.len() + 1 > 512 {
            break;
        }
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(&item);
    }
    out.chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control())
        .collect()
}
