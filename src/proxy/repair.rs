//! The repair stage, between check and decide: a replace write whose omitted fields are set to
//! `repair` is completed from a fresh read of its resource and sent guarded by `If-Match`, or
//! refused (409) saying which field and why. The read is the GET the memory pairs with the
//! write, sent upstream with the write's own headers and credentials and nothing more; what to
//! read and how to fill are the core's (`crate::repair`), this is the plumbing around them.

use std::sync::Arc;

use bytes::Bytes;
use compact_str::format_compact;
use http::HeaderMap;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, HeaderValue, IF_MATCH, TRANSFER_ENCODING};
use http::request::Parts;

use super::Sidecar;
use super::body::{BodyRead, UpstreamBody};
use super::check::{Pending, check_again, compare_with_last_get};
use super::outgoing::Peer;
use super::pool::Pool;
use super::problem;
use super::record::{Ledger, Reply};
use super::resource::{Read, ReadError, read};
use super::tee::own;
use crate::finding::{Finding, Kind};
use crate::policy::Action;
use crate::repair::fill;
use crate::revision::Revision;
use crate::silent::AtRisk;
use crate::sink::Repair;

/// Why a write set to `repair` was refused instead: what the agent and operator read.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("the body is sent with a Content-Encoding, which driftwatch does not rewrite")]
    Encoded,
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(
        "the read does not show `{field}`, which {shown_by} showed holding a value: it is not the resource the memory knows"
    )]
    NotShown { field: String, shown_by: String },
    #[error("`{field}` as the read shows it does not fit the write's body: {reason}")]
    DoesNotFit { field: String, reason: String },
    #[error("the completed body could not be audited (an internal audit error, counted)")]
    Unaudited,
}

/// What the stage needs of the request besides its ledger, and changes in place when it
/// completes the body.
pub(super) struct Write<'w> {
    pub parts: &'w mut Parts,
    pub read: &'w mut BodyRead,
    pub forward: &'w mut UpstreamBody,
    pub pending: &'w mut Pending,
    pub peer: &'w Peer,
}

/// Complete a replace write set to `repair` from a fresh read of its resource, or refuse it.
/// `None`: go on (nothing to repair, or repaired).
pub(super) async fn repair<'c>(
    s: &Arc<Sidecar>,
    pool: &Pool,
    rev: &'c Arc<Revision>,
    ledger: &mut Ledger<'c>,
    write: Write<'_>,
) -> Option<Reply> {
    let op = ledger.operation?;
    let policy = &ledger.api.settings.policy;
    let wanted: Vec<String> = policy
        .repairing(Some(op.id.as_str()), &ledger.findings)
        .iter()
        .map(|f| f.field.trim_start_matches('/'))
        .filter(|name| !name.contains('/'))
        .map(str::to_string)
        .collect();
    if wanted.is_empty() {
        return None;
    }
    let mut note = Repair {
        fields: wanted,
        read_request_id: None,
        if_match: false,
        refused: None,
    };
    match complete(s, pool, rev, ledger, write, &mut note).await {
        Ok(()) => {
            ledger.repair = Some(note);
            None
        }
        Err(refusal) => {
            note.refused = Some(refusal.to_string());
            let reply = refused(ledger, &note, &refusal);
            ledger.repair = Some(note);
            Some(reply)
        }
    }
}

/// Read, fill, audit again; on success the request carries the completed body.
async fn complete<'c>(
    s: &Arc<Sidecar>,
    pool: &Pool,
    rev: &'c Arc<Revision>,
    ledger: &mut Ledger<'c>,
    mut w: Write<'_>,
    note: &mut Repair,
) -> Result<(), Refusal> {
    let op = ledger.operation.expect("a repair is of an operation");
    let BodyRead::Whole(body) = &*w.read else {
        return Err(ReadError::Body("the write's body was not read".into()).into());
    };
    let body = body.clone();
    let encoding = w.parts.headers.get(CONTENT_ENCODING);
    if encoding.is_some_and(|e| e != "identity") {
        return Err(Refusal::Encoded);
    }
    let map = s.settings.memory.field_map.get(&op.id);
    let pairs: Vec<(&str, &str)> = note
        .fields
        .iter()
        .map(|f| (f.as_str(), map.and_then(|m| m.get(f)).unwrap_or(f).as_str()))
        .collect();
    let fresh = match w.pending.read.take() {
        Some(fresh) => fresh,
        None => {
            let omitted: Vec<&str> = pairs.iter().map(|(_, read)| *read).collect();
            let (id, fresh) = read(s, pool, rev, ledger, (w.parts, &omitted), w.peer).await;
            note.read_request_id = Some(id.as_str().to_string());
            fresh?
        }
    };
    note.read_request_id = Some(fresh.request_id.as_str().to_string());
    let id = fresh.request_id.clone();
    shown_where_held(&w.pending.at_risk, &fresh, &note.fields)?;
    let filled = fill(&body, &fresh.body, &pairs)
        .map_err(|e| Refusal::Read(ReadError::Body(e.to_string())))?;
    note.fields = filled.fields;
    let completed = Bytes::from(filled.body);
    audit_again(s, rev, ledger, &mut w, completed.clone(), note).await?;
    for f in &mut ledger.repaired {
        f.message = format_compact!(
            "{}; repaired: filled from driftwatch's read {}",
            f.message,
            id.as_str()
        );
    }
    send_completed(w, completed, fresh.etag, note);
    Ok(())
}

/// The completed body audited before it goes: its findings replace the write's, and those of
/// the fields filled are kept aside as repaired. A filled field the audit finds fault with
/// does not fit the write, and the write is refused with the request's findings as they were.
async fn audit_again<'c>(
    s: &Arc<Sidecar>,
    rev: &'c Arc<Revision>,
    ledger: &mut Ledger<'c>,
    w: &mut Write<'_>,
    completed: Bytes,
    note: &Repair,
) -> Result<(), Refusal> {
    set_length(&mut w.parts.headers, completed.len());
    let before = std::mem::take(&mut ledger.findings);
    let read = BodyRead::Whole(completed);
    let refusal = match check_again(s, rev, w.parts, &read, ledger) {
        None => Some(Refusal::Unaudited),
        Some(pending) => {
            *w.pending = pending;
            unfit(&ledger.findings, &before, &note.fields)
        }
    };
    if let Some(refusal) = refusal {
        ledger.findings = before;
        return Err(refusal);
    }
    compare_with_last_get(s, ledger, w.pending).await;
    ledger.repaired = before.into_iter().filter(|f| note.names(f)).collect();
    *w.read = read;
    Ok(())
}

/// The completed body as the one forwarded, guarded by the read's ETag: a change made by
/// another client between the read and the write fails with 412 instead of being overwritten.
/// A weak ETag never matches `If-Match` (RFC 9110 §13.1.1): without a strong one the read is
/// the freshest there is, and the write goes unguarded. The agent's own `If-Match` stands.
fn send_completed(w: Write<'_>, completed: Bytes, etag: Option<HeaderValue>, note: &mut Repair) {
    let trailers = match w.forward {
        UpstreamBody::Buffered { trailers, .. } => trailers.take(),
        UpstreamBody::Replay { .. } => None,
    };
    *w.forward = UpstreamBody::Buffered {
        data: (!completed.is_empty()).then_some(completed),
        trailers,
        exact: true,
    };
    if let Some(etag) = etag.filter(|e| !e.as_bytes().starts_with(b"W/"))
        && !w.parts.headers.contains_key(IF_MATCH)
    {
        w.parts.headers.insert(IF_MATCH, etag);
        note.if_match = true;
    }
}

/// Fail closed: a field the memory saw holding a value (it is at risk) that the fresh read
/// does not show at all is no field with nothing to lose, but a read that is not the view the
/// memory knows (a trimmed or other representation): refused rather than sent still omitting it.
fn shown_where_held(at_risk: &AtRisk, fresh: &Read, wanted: &[String]) -> Result<(), Refusal> {
    for (read_name, write_name, evidence) in at_risk {
        if !wanted.contains(write_name) || fresh.snapshot.field(read_name).is_some() {
            continue;
        }
        return Err(Refusal::NotShown {
            field: read_name.clone(),
            shown_by: format!("the read {}", evidence.read_request_id),
        });
    }
    Ok(())
}

/// A body's length set as its `Content-Length` (the completed body is sent whole).
fn set_length(headers: &mut HeaderMap, len: usize) {
    headers.remove(TRANSFER_ENCODING);
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
}

/// A finding of the completed body that the write's own body did not have: a filled field the
/// read shows in a shape the write does not take (an expanded object where the write takes an
/// id), or a body the audit can no longer read whole (a filled value nested past the parser).
/// Nothing filled goes unaudited.
fn unfit(findings: &[Finding], before: &[Finding], filled: &[String]) -> Option<Refusal> {
    let had = |f: &Finding| {
        before
            .iter()
            .any(|b| b.kind == f.kind && b.field == f.field)
    };
    let f = findings
        .iter()
        .find(|f| f.is_about_the_body() && !Action::repairs(f.kind) && !had(f))?;
    let at = f.field.trim_start_matches('/');
    let named = filled
        .iter()
        .find(|n| at == n.as_str() || at.starts_with(&format!("{n}/")));
    let reason = match f.kind {
        Kind::Unaudited => format!(
            "the completed body could not be audited ({})",
            f.observed.as_deref().unwrap_or("unread")
        ),
        _ => f.message.to_string(),
    };
    Some(Refusal::DoesNotFit {
        field: named.cloned().unwrap_or_else(|| filled.join("`, `")),
        reason,
    })
}

/// 409: the write would erase data and could not be completed, and why.
fn refused(ledger: &Ledger<'_>, note: &Repair, refusal: &Refusal) -> Reply {
    let fields: Vec<&Finding> = ledger.findings.iter().filter(|f| note.names(f)).collect();
    let blocked = problem::blocked(&fields, ledger.request_id.as_str());
    let response = problem::unrepaired(blocked, &note.fields, &refusal.to_string());
    let response = match ledger.tool.as_deref() {
        Some(tool) => problem::with_tool(response, tool),
        None => response,
    };
    Reply::Blocked {
        said: problem::said(&response),
        response: own(response),
        kinds: fields
            .iter()
            .map(|f| f.kind)
            .collect::<std::collections::BTreeSet<Kind>>(),
    }
}
