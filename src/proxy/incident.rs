//! The proxy's part in incidents (see [`crate::incident`]): a read's values held where the
//! operator keeps them, a forwarded write's lost values and restore taken from them, and each
//! event that records a silent clear told to the ring as a step of its incident.

use std::time::SystemTime;

use super::{Api, Sidecar};
use crate::contract::{Contract, Operation};
use crate::finding::{Evidence, Finding, Kind};
use crate::incident::{About, Incident, Kept, Query, Step, Told, What};
use crate::mcp::calls::Attribution;
use crate::memory::Key;
use crate::silent::AtRisk;
use crate::telemetry::SpanContext;

/// What a forwarded write's incident holds from the request: the values its fields held, the
/// write as sent (for the restore), and the read's tool. The restore is made once the answer
/// has said which fields are still at risk.
pub(super) struct KeptWrite {
    lost: Vec<crate::incident::Lost>,
    method: String,
    path: String,
    body: Option<serde_json::Value>,
    patch: Option<String>,
    read_tool: Option<String>,
}

impl KeptWrite {
    /// The values of `fields` alone (those whose risk stood), and their restore.
    fn kept(self, fields: &[String]) -> Kept {
        let lost = (self.lost.into_iter())
            .filter(|l| fields.contains(&l.field))
            .collect();
        let write = (self.method.as_str(), self.path.as_str(), self.body.as_ref());
        Kept::new(lost, write, self.patch.as_deref())
    }
}

/// Hold the values of read `id` of `key`'s resource by `tool`, where incidents keep them.
pub(super) fn keep_read(
    s: &Sidecar,
    key: &Key,
    (id, tool): (&str, Option<&Attribution>),
    body: crate::json::Node,
) {
    let Some(vault) = &s.vault else {
        return;
    };
    let tool = tool.and_then(Attribution::known);
    vault.keep(key, (id, tool), SystemTime::now(), body);
    if let (Some(store), Some(seal)) = (&s.store, &s.settings.incidents.seal)
        && let Some(sealed) = vault.export(key).and_then(|bytes| seal.seal(&bytes))
    {
        store.keep_values(key, sealed);
    }
}

/// The values another replica held of `key`'s last read, taken into this one's vault: asked
/// of the store beside the resource's snapshot, within the same deadline.
pub(super) async fn recall_values(s: &Sidecar, key: &Key) {
    let (Some(vault), Some(store), Some(seal)) = (&s.vault, &s.store, &s.settings.incidents.seal)
    else {
        return;
    };
    if let Some(bytes) = store.recall_values(key).await.and_then(|b| seal.open(&b)) {
        vault.import(key, &bytes);
    }
}

/// A write as the request path holds it: its operation, path, body, memory key and the fields
/// it puts at risk.
pub(super) struct Write<'a> {
    pub op: &'a Operation,
    pub path: &'a str,
    pub body: Option<&'a [u8]>,
    pub key: Option<&'a Key>,
    pub at_risk: &'a AtRisk,
}

/// The lost values of a write about to be forwarded with fields at risk, and the request that
/// puts them back: from the vault's read, which must be the one the risks name.
pub(super) fn kept_for_write(s: &Sidecar, contract: &Contract, w: Write<'_>) -> Option<KeptWrite> {
    let vault = s.vault.as_ref()?;
    let (op, key) = (w.op, w.key?);
    let only = &s.settings.incidents.operations;
    if w.at_risk.is_empty() || !(only.is_empty() || only.contains(&op.id)) {
        return None;
    }
    let read_id = &w.at_risk[0].2.read_request_id;
    let fields: Vec<(&str, &str)> = (w.at_risk.iter())
        .map(|(read, write, _)| (read.as_str(), write.as_str()))
        .collect();
    let recalled = vault.recall(key, read_id, &fields, SystemTime::now())?;
    Some(KeptWrite {
        lost: recalled.lost,
        method: op.method.clone(),
        path: w.path.to_string(),
        body: w.body.and_then(|b| serde_json::from_slice(b).ok()),
        patch: patch_media(contract, op),
        read_tool: recalled.tool,
    })
}

/// Whether the spec has a JSON merge patch on the write's path: the restore sends only the
/// lost fields, in it. Another PATCH (a JSON Patch, a body of its own shape) is not one the
/// restore's object fits, so the write is sent again instead.
fn patch_media(contract: &Contract, write: &Operation) -> Option<String> {
    const MERGE_PATCH: &str = "application/merge-patch+json";
    let patch = (contract.operations().iter())
        .find(|op| op.method.eq_ignore_ascii_case("patch") && op.template == write.template)?;
    let media = patch.body.as_ref()?.media.iter();
    let merge = media
        .into_iter()
        .any(|m| m.media_type.eq_ignore_ascii_case(MERGE_PATCH));
    merge.then(|| MERGE_PATCH.to_string())
}

/// The request an event records, as incidents see it.
pub(super) struct Recorded<'a> {
    pub op: &'a Operation,
    pub id: &'a str,
    pub status: u16,
    pub tool: Option<&'a Attribution>,
    pub trace: Option<&'a SpanContext>,
    pub path: &'a str,
}

/// What an event of `findings` tells the incidents: a forwarded write's risks that stood open
/// or add to its incident (a write the API refused lost nothing, and opens none); a confirmed
/// clear adds the answer or read that showed it, to each write's own incident (a list's answer
/// may confirm the clears of several).
pub(super) fn tell(
    s: &Sidecar,
    at: (&Api, &Contract, &str),
    r: &Recorded<'_>,
    findings: &[Finding],
    mut kept: Option<KeptWrite>,
) {
    let mut groups: Vec<(&str, Kind, Vec<&Finding>)> = Vec::new();
    for f in findings {
        let Some(e) = f.evidence.as_deref() else {
            continue;
        };
        let write = e.write_request_id.as_deref().unwrap_or(r.id);
        match groups
            .iter_mut()
            .find(|(w, k, _)| *w == write && *k == f.kind)
        {
            Some((_, _, group)) => group.push(f),
            None if matches!(f.kind, Kind::SilentClear | Kind::SilentClearRisk) => {
                groups.push((write, f.kind, vec![f]))
            }
            None => {}
        }
    }
    for (write, kind, group) in groups {
        if kind == Kind::SilentClearRisk && !(200..300).contains(&r.status) {
            continue;
        }
        let told = told(at, r, write, &group, kept.as_mut());
        let kept = (kind == Kind::SilentClearRisk)
            .then(|| kept.take().map(|k| k.kept(&told.step.fields)))
            .flatten();
        record(s, told, kept);
    }
}

/// A write whose pending clear a later read took, and found every field still holding a
/// value: its incident says nothing was lost, and drops its restore.
pub(super) fn survived(s: &Sidecar, at: (&Api, &Contract, &str), r: &Recorded<'_>, write: &str) {
    let mut told = told(at, r, write, &[], None);
    told.step.what = What::Survived;
    told.read = None;
    record(s, told, None);
}

/// The step `group`'s findings (of one write `write`) tell, with the read they name.
fn told(
    (api, contract, revision): (&Api, &Contract, &str),
    r: &Recorded<'_>,
    write: &str,
    group: &[&Finding],
    kept: Option<&mut KeptWrite>,
) -> Told {
    let first = group.first();
    let what = match first.map(|f| f.kind) {
        Some(Kind::SilentClearRisk) => What::Write,
        _ if write == r.id => What::Answer,
        _ => What::ReadAfter,
    };
    let fields: Vec<String> = (group.iter())
        .map(|f| f.field.trim_start_matches('/').to_string())
        .collect();
    let evidence = first.and_then(|f| f.evidence.as_deref());
    let read_tool = (kept.and_then(|k| k.read_tool.take()))
        .or_else(|| evidence.and_then(|e| e.read_tool.clone()))
        .map(|t| peer_text(&t));
    let write_op = (first.and_then(|f| f.operation.as_deref()))
        .and_then(|w| contract.operation(w))
        .unwrap_or(r.op);
    Told {
        write_request_id: peer_text(write),
        step: Step {
            at: SystemTime::now(),
            what,
            request_id: peer_text(r.id),
            operation: Some(r.op.id.clone()),
            tool: r.tool.map(|t| peer_text(t.label())),
            trace_id: r.trace.filter(|t| t.sampled).map(|t| t.trace_id_hex()),
            status: Some(r.status),
            fields: fields.clone(),
        },
        read: evidence.map(|e| read_step(e, read_tool, fields)),
        about: About {
            api: api.settings.name.clone(),
            operation: write_op.id.clone(),
            method: write_op.method.clone(),
            path: r.path.to_string(),
            path_template: write_op.template.clone(),
            spec_revision: revision.to_string(),
            mode: api.settings.policy.mode.as_str().to_string(),
        },
    }
}

/// `told` to this replica's ring, and to the store replicas share.
fn record(s: &Sidecar, told: Told, kept: Option<Kept>) {
    if let Some(store) = &s.store
        && s.settings.incidents.max > 0
    {
        share(s, store, &told, kept.as_ref());
    }
    s.sinks.incidents.tell(told, kept);
}

/// An incident's entry and values to the store replicas share: the entry sealed where a seal
/// key is set, the values only sealed.
fn share(s: &Sidecar, store: &super::store::Store, told: &Told, kept: Option<&Kept>) {
    let seal = s.settings.incidents.seal.as_deref();
    let story = match seal {
        Some(_) => serde_json::to_vec(told),
        // Unsealed, the store holds the template, never the resource's ids.
        None => {
            let mut plain = told.clone();
            plain.about.path = plain.about.path_template.clone();
            serde_json::to_vec(&plain)
        }
    };
    let Ok(story) = story else {
        return;
    };
    let story = match seal {
        Some(seal) => seal.seal(&story),
        None => Some(story),
    };
    // Bounded as a read's values are held: past it the story goes without them.
    let most = s.settings.incidents.max_value_bytes / 16;
    let kept = (kept.zip(seal))
        .and_then(|(k, seal)| serde_json::to_vec(k).ok().and_then(|b| seal.seal(&b)))
        .filter(|sealed| sealed.len() <= most);
    if let Some(story) = story {
        let max = s.settings.incidents.max;
        let opens = told.step.what != What::Survived;
        store.tell(&told.write_request_id, (story, kept), max, opens);
    }
}

/// `/incidents` on any replica: from the store replicas share when there is one (every
/// replica's part of each story), else, or when it does not answer, this replica's ring.
impl crate::incident::View for Sidecar {
    fn query(&self, q: Query) -> crate::incident::Queried<'_> {
        Box::pin(async move {
            if let Some(store) = &self.store {
                match store.incidents(self.settings.incidents.max).await {
                    Ok(stored) => return self.shown(self.unsealed(stored, &q)),
                    Err(why) => tracing::warn!(
                        error = why,
                        "/incidents: the store did not answer; this replica's own incidents shown"
                    ),
                }
            }
            let found = self.sinks.incidents.query(&q, SystemTime::now());
            self.shown(found)
        })
    }
}

impl Sidecar {
    /// Incidents as the admin port may show them: the resource's path, its ids, only behind
    /// the admin token (events and `/findings` keep them out); else its template.
    fn shown(&self, mut incidents: Vec<Incident>) -> Vec<Incident> {
        if self.settings.admin_token.is_none() {
            for i in &mut incidents {
                i.path.clone_from(&i.path_template);
            }
        }
        incidents
    }

    /// The store's incidents opened and told again, filtered; an entry that does not open (another
    /// seal key, changed in the store) or does not hold together is left out.
    fn unsealed(&self, stored: Vec<super::store::StoredIncident>, q: &Query) -> Vec<Incident> {
        let seal = self.settings.incidents.seal.as_deref();
        let open = |bytes: Vec<u8>| match seal {
            Some(seal) => seal.open(&bytes),
            None => Some(bytes),
        };
        let incidents = stored.into_iter().filter_map(|(entries, kept)| {
            let told: Vec<Told> = (entries.into_iter())
                .filter_map(|e| open(e).and_then(|b| serde_json::from_slice(&b).ok()))
                .collect();
            let kept = (kept.zip(seal))
                .and_then(|(k, seal)| seal.open(&k))
                .and_then(|b| serde_json::from_slice(&b).ok());
            Incident::fold(told, kept)
        });
        let mut found: Vec<Incident> = incidents.filter(|i| i.matches(q)).collect();
        found.sort_by_key(|i| std::cmp::Reverse(i.updated_at));
        found.truncate(q.limit.unwrap_or(usize::MAX));
        found
    }
}

/// Bytes kept of what a peer chose (a request id, a tool's name), as events cut them: an
/// incident's story is bounded in the ring and in the store whatever the headers held.
const PEER_TEXT: usize = 256;

fn peer_text(text: &str) -> String {
    crate::finding::shorten(text, PEER_TEXT)
}

/// The read a finding's evidence names.
fn read_step(evidence: &Evidence, tool: Option<String>, fields: Vec<String>) -> Step {
    Step {
        at: evidence.read_at,
        what: What::Read,
        request_id: peer_text(&evidence.read_request_id),
        operation: None,
        tool,
        trace_id: None,
        status: None,
        fields,
    }
}
