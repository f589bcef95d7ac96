//! The read before a write, between check and repair: a replace write that omits fields the
//! memory has no view of (a restart emptied it, the agent read the resource some other way, or
//! only a list showed it) is decided on a fresh read of its resource, not on what the memory
//! happens to hold. A field the read shows holding a value is a `silent_clear_risk`, which
//! enforce refuses or repairs as set; a field it shows empty has nothing to lose. A read that
//! fails or is not the resource decides nothing: where a risk would be refused or repaired, the
//! write is refused with the reason (fail closed); elsewhere it goes on as it would have.
//! On where `enforce.read_before_write` says (by default in enforce mode).

use std::sync::Arc;

use http::request::Parts;

use super::Sidecar;
use super::check::Pending;
use super::headers::RequestId;
use super::outgoing::Peer;
use super::pool::Pool;
use super::problem;
use super::record::{Ledger, Reply};
use super::resource::{Read, ReadError, read};
use super::tee::own;
use crate::finding::{Finding, Kind};
use crate::policy::Action;
use crate::revision::Revision;
use crate::silent::Tracker;
use crate::sink::{ReadNote, Repair};

/// Read the resource of a replace write the memory cannot judge, and decide on the read.
/// `Some`: the write is refused.
pub(super) async fn read_before_write(
    s: &Arc<Sidecar>,
    pool: &Pool,
    rev: &Revision,
    ledger: &mut Ledger<'_>,
    pending: &mut Pending,
    parts: &Parts,
    peer: &Peer,
) -> Option<Reply> {
    let op = ledger.operation?;
    let policy = &ledger.api.settings.policy;
    if !pending.unseen || !policy.read_before_write {
        return None;
    }
    let refused_anyway = !policy.blocking(Some(&op.id), &ledger.findings).is_empty();
    if refused_anyway {
        // Another finding refuses the write (a wrong type, an unknown field, or a field the
        // memory already shows held): nothing a read shows would let it through.
        return None;
    }
    let map = s.settings.memory.field_map.get(&op.id);
    let omitted: Vec<&str> = (ledger.findings.iter())
        .filter(|f| f.kind == Kind::OmittedOnReplace)
        .map(|f| read_name(map, f.field.trim_start_matches('/')))
        .collect();
    let (id, result) = read(s, pool, rev, ledger, (parts, &omitted), peer).await;
    let mut note = ReadNote {
        request_id: id.as_str().to_string(),
        outcome: "held",
        reason: None,
    };
    let reply = match result {
        Ok(fresh) => {
            note.outcome = decide(s, ledger, pending, fresh);
            None
        }
        Err(e) if e.absent() => {
            note.outcome = "absent";
            None
        }
        Err(e) => {
            note.outcome = "unusable";
            note.reason = Some(e.to_string());
            match ledger.api.settings.policy.on_risk(Some(&op.id)) {
                Action::Log => None,
                action => Some(refused(ledger, &id, &e, action)),
            }
        }
    };
    s.sinks
        .metrics
        .read_before_write(&ledger.api.label, &op.id, note.outcome);
    ledger.note_read(note);
    reply
}

/// The write compared with the read: each omitted field it shows holding a value is at risk,
/// and the read is remembered (it is the freshest view of the resource there is) and kept for
/// the repair. What the read decided, for the event.
fn decide(
    s: &Sidecar,
    ledger: &mut Ledger<'_>,
    pending: &mut Pending,
    fresh: Read,
) -> &'static str {
    let Some(op) = ledger.operation else {
        return "nothing_held";
    };
    let api = ledger.api.label.name().unwrap_or_default();
    let tracker = Tracker {
        memory: &s.memory,
        field_maps: &s.settings.memory.field_map,
        api,
        tool: None,
    };
    let at_risk = tracker.before_write_read(op, &fresh.snapshot, &mut ledger.findings);
    let outcome = if at_risk.is_empty() {
        "nothing_held"
    } else {
        "held"
    };
    pending.at_risk.extend(at_risk);
    if let Some(key) = &pending.memory_key {
        s.memory.offer(key.clone(), fresh.snapshot.clone());
        if let Some(store) = &s.store {
            let snapshot = Arc::new(fresh.snapshot.clone());
            store.remember(key, snapshot, None, Box::new(|_, _| {}));
        }
    }
    pending.read = Some(fresh);
    outcome
}

/// A write field's name in the read model: mapped in `[memory.field_map]`, else the same.
fn read_name<'a>(
    map: Option<&'a std::collections::HashMap<String, String>>,
    write_name: &'a str,
) -> &'a str {
    map.and_then(|m| m.get(write_name))
        .map_or(write_name, String::as_str)
}

/// 409: the write omits fields that may hold values, and driftwatch could not read the
/// resource to see: the fields to send, and why. Where the risk was to be repaired, it is a
/// refused repair (counted and said as one).
fn refused(ledger: &mut Ledger<'_>, id: &RequestId, why: &ReadError, action: Action) -> Reply {
    let omitted: Vec<&Finding> = (ledger.findings.iter())
        .filter(|f| f.kind == Kind::OmittedOnReplace)
        .collect();
    let fields: Vec<String> = (omitted.iter())
        .map(|f| f.field.trim_start_matches('/').to_string())
        .collect();
    let blocked = problem::blocked(&omitted, ledger.request_id.as_str());
    let response = match action {
        Action::Repair => problem::unrepaired(blocked, &fields, &why.to_string()),
        _ => problem::unread(blocked, &fields, &why.to_string()),
    };
    let response = match ledger.tool.as_deref() {
        Some(tool) => problem::with_tool(response, tool),
        None => response,
    };
    if action == Action::Repair {
        ledger.repair = Some(Repair {
            fields,
            read_request_id: Some(id.as_str().to_string()),
            if_match: false,
            refused: Some(why.to_string()),
        });
    }
    Reply::Blocked {
        said: problem::said(&response),
        response: own(response),
        kinds: [Kind::OmittedOnReplace].into(),
    }
}
