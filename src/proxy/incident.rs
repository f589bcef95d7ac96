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

/// What a forwarded write's incident holds from the request: the values its fields held, and
/// the read's tool.
pub(super) struct KeptWrite {
    pub kept: Kept,
    pub read_tool: Option<String>,
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
    let body = w.body.and_then(|b| serde_json::from_slice(b).ok());
    let patch = patch_media(contract, op);
    let write = (op.method.as_str(), w.path, body.as_ref());
    Some(KeptWrite {
        kept: Kept::new(recalled.lost, write, patch.as_deref()),
        read_tool: recalled.tool,
    })
}

/// The JSON media type of a PATCH the spec has on the write's path: the restore sends only
/// the lost fields, in it.
fn patch_media(contract: &Contract, write: &Operation) -> Option<String> {
    let patch = (contract.operations().iter())
        .find(|op| op.method.eq_ignore_ascii_case("patch") && op.template == write.template)?;
    let media = patch
        .body
        .as_ref()?
        .media
        .iter()
        .find(|m| m.json && !m.media_type.contains('*'))?;
    Some(media.media_type.clone())
}

/// What an event of `findings` (request `id`, operation `op`) tells the incidents: a forwarded
/// write's risks that stand open or add to its incident, a confirmed clear adds the answer
/// or read that showed it.
pub(super) fn tell(
    s: &Sidecar,
    (api, contract, revision): (&Api, &Contract, &str),
    (op, id, status): (&Operation, &str, u16),
    (tool, trace, path): (Option<&Attribution>, Option<&SpanContext>, &str),
    findings: &[Finding],
    mut kept: Option<KeptWrite>,
) {
    let silent = |k: Kind| matches!(k, Kind::SilentClear | Kind::SilentClearRisk);
    let Some(first) = findings.iter().find(|f| silent(f.kind)) else {
        return;
    };
    let Some(evidence) = first.evidence.as_deref() else {
        return;
    };
    let write_id = evidence.write_request_id.as_deref().unwrap_or(id);
    let what = match first.kind {
        Kind::SilentClearRisk => What::Write,
        _ if write_id == id => What::Answer,
        _ => What::ReadAfter,
    };
    let fields: Vec<String> = (findings.iter())
        .filter(|f| f.kind == first.kind)
        .map(|f| f.field.trim_start_matches('/').to_string())
        .collect();
    let read_tool = (kept.as_mut().and_then(|k| k.read_tool.take())).map(|t| peer_text(&t));
    let step = Step {
        at: SystemTime::now(),
        what,
        request_id: peer_text(id),
        operation: Some(op.id.clone()),
        tool: tool.map(|t| peer_text(t.label())),
        trace_id: trace.filter(|t| t.sampled).map(|t| t.trace_id_hex()),
        status: Some(status),
        fields: fields.clone(),
    };
    let write_op = (first.operation.as_deref())
        .and_then(|w| contract.operation(w))
        .unwrap_or(op);
    let about = About {
        api: api.settings.name.clone(),
        operation: write_op.id.clone(),
        method: write_op.method.clone(),
        path: path.to_string(),
        path_template: write_op.template.clone(),
        spec_revision: revision.to_string(),
        mode: api.settings.policy.mode.as_str().to_string(),
    };
    let told = Told {
        write_request_id: peer_text(write_id),
        step,
        read: Some(read_step(evidence, read_tool, fields)),
        about,
    };
    let kept = kept.map(|k| k.kept);
    if let Some(store) = &s.store {
        share(s, store, &told, kept.as_ref());
    }
    s.sinks.incidents.tell(told, kept);
}

/// An incident's entry and values to the store replicas share: the entry sealed where a seal
/// key is set, the values only sealed.
fn share(s: &Sidecar, store: &super::store::Store, told: &Told, kept: Option<&Kept>) {
    let seal = s.settings.incidents.seal.as_deref();
    let Ok(story) = serde_json::to_vec(told) else {
        return;
    };
    let story = match seal {
        Some(seal) => seal.seal(&story),
        None => Some(story),
    };
    let kept = (kept.zip(seal))
        .and_then(|(k, seal)| serde_json::to_vec(k).ok().and_then(|b| seal.seal(&b)));
    if let Some(story) = story {
        let max = s.settings.incidents.max;
        store.tell(&told.write_request_id, story, kept, max);
    }
}

/// `/incidents` on any replica: from the store replicas share when there is one (every
/// replica's part of each story), else, or when it does not answer, this replica's ring.
impl crate::incident::View for Sidecar {
    fn query(&self, q: Query) -> crate::incident::Queried<'_> {
        Box::pin(async move {
            if let Some(store) = &self.store {
                match store.incidents(self.settings.incidents.max).await {
                    Ok(stored) => return self.unsealed(stored, &q),
                    Err(why) => tracing::warn!(
                        error = why,
                        "/incidents: the store did not answer; this replica's own incidents shown"
                    ),
                }
            }
            self.sinks.incidents.query(&q, SystemTime::now())
        })
    }
}

impl Sidecar {
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
