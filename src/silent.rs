//! Silent-clear detection, shared by the proxy and `driftwatch check` so that replaying an
//! incident's traffic gives the verdict the live sidecar gave. Before a replace write:
//! `omitted_on_replace` becomes `silent_clear_risk` where the last GET showed the field holding
//! a value. After the write: its 2xx response, or the next GET, showing the field emptied
//! confirms a `silent_clear`, linked to the write's request id. Times are passed in; nothing
//! here reads a clock or a socket.

use std::collections::HashMap;
use std::time::SystemTime;

use crate::contract::{ListOf, Operation, WriteSemantics};
use crate::finding::{Evidence, Finding, Kind, Severity};
use crate::json::Node;
use crate::memory::{Key, Memory, Pending, Seen, Shown, Snapshot};

/// The memory key of a request to `op`: its resource's name, the path parameter values the
/// audit routed with (so a GET and a write on different templates meet when mapped), and the
/// credential scope. `None` when the operation has no remembered resource.
pub fn resource_key(op: &Operation, path_values: &[&str], scope: u64) -> Option<Key> {
    let resource = op.resource.as_ref()?;
    // Written into one string sized up front: a key is made for every remembered request.
    let values: usize = path_values.iter().map(|v| v.len() + 1).sum();
    let mut path = String::with_capacity(resource.len() + values.max(1));
    path.push_str(resource);
    path.push(':');
    for (i, value) in path_values.iter().enumerate() {
        if i > 0 {
            path.push('/');
        }
        path.push_str(value);
    }
    Some(Key { path, scope })
}

pub struct Tracker<'m> {
    pub memory: &'m Memory,
    /// Per operation id: write field name to read field name, where the models differ.
    pub field_maps: &'m HashMap<String, HashMap<String, String>>,
    /// The API the operations are of (its label; empty for one API), for what is learned.
    pub api: &'m str,
    /// The tool behind the request being looked at, when known: a read it remembers keeps it,
    /// so the incident its evidence begins names the read's tool.
    pub tool: Option<&'m str>,
}

/// Fields of one write found at risk: (read name, write name, evidence).
pub type AtRisk = Vec<(String, String, Evidence)>;

/// A replace write compared with what the memory holds of its resource.
#[derive(Debug, Default)]
pub struct Compared {
    pub at_risk: AtRisk,
    /// The memory cannot decide: some field the write omits is in no view of the resource it
    /// holds (none at all, or a list's item that left the field out). Enforce reads the
    /// resource before the write (`enforce.read_before_write`).
    pub unseen: bool,
}

impl Tracker<'_> {
    /// Before a replace write is forwarded: drop its `omitted_on_replace` findings of fields
    /// earlier answers showed surviving omission, and upgrade those whose field was non-empty
    /// at the last view of the same resource (same credential scope) to `silent_clear_risk`.
    /// `unseen` says where the memory cannot decide: it has no view of the resource, or only a
    /// partial one (a list's item) that does not show every omitted field.
    pub fn before_write(
        &self,
        op: &Operation,
        key: &Key,
        now: SystemTime,
        findings: &mut Vec<Finding>,
    ) -> Compared {
        if op.write != WriteSemantics::Replace {
            return Compared::default();
        }
        let map = self.field_maps.get(&op.id);
        self.drop_survivors(op, map, findings);
        // The omitted fields a view of the resource can show: a write-only field, or one its
        // GET does not declare, is in no view, and waits for none.
        let omitted = || {
            findings
                .iter()
                .filter(|f| f.kind == Kind::OmittedOnReplace)
                .filter_map(|f| viewed(op, map, f.field.trim_start_matches('/')))
        };
        let Some(snapshot) = self.memory.recall(key, now) else {
            let unseen = omitted().next().is_some();
            return Compared {
                at_risk: Vec::new(),
                unseen,
            };
        };
        let unseen = snapshot.partial && omitted().any(|name| snapshot.field(name).is_none());
        let at_risk = self.compare(op, &snapshot, false, findings);
        Compared { at_risk, unseen }
    }

    /// A replace write compared with driftwatch's own read of its resource, made just before
    /// it because the memory could not decide ([`Compared::unseen`]): each omitted field the
    /// read shows holding a value becomes a `silent_clear_risk` naming that read.
    pub fn before_write_read(
        &self,
        op: &Operation,
        read: &Snapshot,
        findings: &mut [Finding],
    ) -> AtRisk {
        if op.write != WriteSemantics::Replace {
            return Vec::new();
        }
        self.compare(op, read, true, findings)
    }

    /// Upgrade each `omitted_on_replace` whose field `snapshot` shows holding a value.
    fn compare(
        &self,
        op: &Operation,
        snapshot: &Snapshot,
        read_before_write: bool,
        findings: &mut [Finding],
    ) -> AtRisk {
        let map = self.field_maps.get(&op.id);
        let mut at_risk = Vec::new();
        for f in findings
            .iter_mut()
            .filter(|f| f.kind == Kind::OmittedOnReplace)
        {
            // Borrowed names, and the snapshot asked first: most omitted fields held no value
            // at the last GET, and a stale write omits dozens.
            let write_name = f.field.trim_start_matches('/');
            let read_name = read_name(map, write_name);
            let Some(state) = snapshot.field(read_name) else {
                continue;
            };
            if state.empty || viewed(op, map, write_name).is_none() {
                continue;
            }
            let (write_name, read_name) = (write_name.to_string(), read_name.to_string());
            let evidence = Evidence {
                read_request_id: snapshot.request_id.clone(),
                read_at: snapshot.at,
                value_hash: format!("{:016x}", state.hash),
                read_tool: (!snapshot.tool.is_empty()).then(|| snapshot.tool.clone()),
                write_request_id: None,
                read_before_write,
            };
            at_risk_finding(f, op, snapshot, &write_name, &evidence);
            at_risk.push((read_name, write_name, evidence));
        }
        at_risk
    }

    /// Drop the `omitted_on_replace` of each field this operation's answers showed kept.
    fn drop_survivors(
        &self,
        op: &Operation,
        map: Option<&HashMap<String, String>>,
        findings: &mut Vec<Finding>,
    ) {
        let name = crate::memory::survival::name(self.api, op);
        let Some(learned) = self.memory.survival.of(&name) else {
            return;
        };
        findings.retain(|f| {
            let write_name = f.field.trim_start_matches('/');
            f.kind != Kind::OmittedOnReplace || !learned.kept.contains(read_name(map, write_name))
        });
    }

    /// After a response: remember a GET, and read a write's own answer for the fields it put
    /// at risk: one the answer shows holding a value survived (the risk is withdrawn, and the
    /// operation learns it), one shown empty is a confirmed `silent_clear`, one not shown is
    /// left pending for the next GET to confirm. What it did to the memory comes back, for a
    /// store shared by replicas to mirror.
    #[allow(clippy::too_many_arguments)]
    pub fn after_response<B: Shown>(
        &self,
        op: &Operation,
        key: &Key,
        request_id: &str,
        at: SystemTime,
        status: u16,
        body: Option<&B>,
        at_risk: AtRisk,
    ) -> Outcome {
        let mut outcome = Outcome::default();
        if !(200..300).contains(&status) {
            return outcome;
        }
        if op.write == WriteSemantics::Replace && !at_risk.is_empty() {
            let shown = |read: &str| body.and_then(|b| b.shows(read));
            self.decide_risks(op, key, request_id, at_risk, shown, &mut outcome);
        }
        if op.answers_resource
            && let Some(body) = body
        {
            // The write's answer is the resource as it now is: what a next write is judged by,
            // as far as it shows (a field it leaves out is unknown, not absent).
            let seen = Seen {
                request_id,
                tool: self.tool,
                at,
                partial: true,
            };
            outcome.remembered = self.memory.remember_seen(key, seen, body);
            return outcome;
        }
        if op.write != WriteSemantics::None {
            return outcome;
        }
        if op.remembers && op.method == "GET" {
            let Some(body) = body else { return outcome };
            if let Some(pending) = self.memory.take_pending(key) {
                let shows_empty = |read: &str| body.shows_empty(read);
                outcome.confirmed = confirm(&pending, shows_empty, op);
                outcome.took = Some(pending.write_request_id);
            }
            let seen = Seen {
                request_id,
                tool: self.tool,
                at,
                partial: false,
            };
            outcome.remembered = self.memory.remember_seen(key, seen, body);
        }
        outcome
    }
}

impl Tracker<'_> {
    /// A replace write's fields at risk, decided by its own answer (`shown`): one it shows
    /// holding a value survived (the operation learns it), one shown empty is a confirmed
    /// `silent_clear`, one not shown is left pending for the next view.
    fn decide_risks(
        &self,
        op: &Operation,
        key: &Key,
        request_id: &str,
        at_risk: AtRisk,
        shown: impl Fn(&str) -> Option<bool>,
        outcome: &mut Outcome,
    ) {
        let (mut kept, mut erased) = (Vec::new(), Vec::new());
        let mut left = Vec::new();
        for field in at_risk {
            match shown(&field.0) {
                Some(false) => kept.push(field),
                Some(true) => erased.push(field),
                None => left.push(field),
            }
        }
        let names = |fields: &AtRisk| fields.iter().map(|(read, _, _)| read.clone()).collect();
        let lesson = crate::memory::survival::Lesson {
            operation: crate::memory::survival::name(self.api, op),
            kept: names(&kept),
            erased: names(&erased),
        };
        if self.memory.survival.learn(&lesson) {
            outcome.lesson = Some(lesson);
        }
        outcome.survived = kept.into_iter().map(|(_, write, _)| write).collect();
        let write = |fields| Pending {
            operation: op.id.clone(),
            write_request_id: request_id.to_string(),
            fields,
        };
        outcome.confirmed = confirm(&write(erased), |_| true, op);
        if !left.is_empty() {
            let pending = write(left);
            self.memory.expect_clear(key.clone(), pending.clone());
            outcome.left = Some(pending);
        }
    }
}

/// At most this many items of one list answer are remembered: a long page must not push
/// every other resource out of the memory, nor cost more than the page is worth.
pub const MAX_LIST_ITEMS: usize = 256;

impl Tracker<'_> {
    /// After a collection GET's answer (`list`): each item remembered as if it had been read
    /// alone, under the key its item GET's would have (`list_key`, the list's, plus the item's
    /// id), partial (what the list shows of an item is all that is known of it), and a clear
    /// left pending on it confirmed where the item shows the field empty. Items past
    /// [`MAX_LIST_ITEMS`], without an id, or not objects are skipped (`skipped` counts them).
    pub fn after_list(
        &self,
        list: &ListOf,
        item_op: &Operation,
        list_key: &Key,
        seen: Seen<'_>,
        body: Node<'_>,
    ) -> Listed {
        let mut listed = Listed::default();
        let items = match &list.at {
            None => body.as_array(),
            Some(member) => body
                .as_object()
                .and_then(|o| o.get(member))
                .and_then(Node::as_array),
        };
        let Some(items) = items else { return listed };
        for (n, item) in items.items().enumerate() {
            let id = item
                .as_object()
                .and_then(|o| o.get(&list.id_field))
                .and_then(id_text);
            let Some(id) = id.filter(|_| n < MAX_LIST_ITEMS) else {
                listed.skipped += 1;
                continue;
            };
            let key = item_key(list_key, &id);
            if let Some(pending) = self.memory.take_pending(&key) {
                let shows_empty = |read: &str| item.shows_empty(read);
                listed
                    .confirmed
                    .extend(confirm(&pending, shows_empty, item_op));
            }
            let seen = Seen {
                partial: true,
                ..seen
            };
            if let Some(snapshot) = self.memory.remember_seen(&key, seen, &item) {
                listed.remembered.push((key, snapshot));
            }
        }
        listed
    }
}

/// What a list answer did to the memory.
#[derive(Debug, Default)]
pub struct Listed {
    /// `silent_clear`s its items confirmed.
    pub confirmed: Vec<Finding>,
    /// Each item's key and the snapshot kept, for a shared store.
    pub remembered: Vec<(Key, std::sync::Arc<Snapshot>)>,
    /// Items not remembered (past the bound, without an id, not objects).
    pub skipped: usize,
}

/// An item's id as its item GET's path would carry it: a string percent-encoded as a path
/// segment, a number as written.
fn id_text(value: Node<'_>) -> Option<String> {
    const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    match value.as_str() {
        Some(text) if !text.is_empty() => {
            Some(percent_encoding::utf8_percent_encode(text, SEGMENT).to_string())
        }
        Some(_) => None,
        None => value.as_number().map(|n| n.to_string()),
    }
}

/// The key of an item of a list whose key is `list_key` (its path values, then the item's).
fn item_key(list_key: &Key, id: &str) -> Key {
    let mut path = list_key.path.clone();
    if !path.ends_with(':') {
        path.push('/');
    }
    path.push_str(id);
    Key {
        path,
        scope: list_key.scope,
    }
}

/// The name a view of the resource shows a write's field by, unless no view shows it: it is
/// write-only, or the resource's GET does not declare it.
fn viewed<'a>(
    op: &Operation,
    map: Option<&'a HashMap<String, String>>,
    write_name: &'a str,
) -> Option<&'a str> {
    let read_name = read_name(map, write_name);
    let declared_in_read = op
        .read_fields
        .as_ref()
        .is_none_or(|fields| fields.is_empty() || fields.iter().any(|field| field == read_name));
    let write_only = (op.body_properties().iter()).any(|p| p.name == write_name && p.write_only);
    (declared_in_read && !write_only).then_some(read_name)
}

/// A write field's name in the read model: mapped in `[memory.field_map]`, else the same.
fn read_name<'a>(map: Option<&'a HashMap<String, String>>, write_name: &'a str) -> &'a str {
    map.and_then(|m| m.get(write_name))
        .map_or(write_name, String::as_str)
}

/// Withdraw the `silent_clear_risk` findings of fields the write's own answer showed surviving.
pub fn withdraw(findings: &mut Vec<Finding>, survived: &[String]) {
    if survived.is_empty() {
        return;
    }
    findings.retain(|f| {
        f.kind != Kind::SilentClearRisk
            || !survived
                .iter()
                .any(|w| f.field.trim_start_matches('/') == w)
    });
}

/// What a response did to the memory.
#[derive(Debug, Default)]
pub struct Outcome {
    /// `silent_clear`s it confirmed.
    pub confirmed: Vec<Finding>,
    /// The snapshot a GET left.
    pub remembered: Option<std::sync::Arc<Snapshot>>,
    /// The write whose pending clear a GET took (confirmed or not).
    pub took: Option<String>,
    /// The clear a write left pending, for the next GET to confirm.
    pub left: Option<Pending>,
    /// Fields (by their name in the write) the write put at risk and its own answer showed
    /// still holding a value: their `silent_clear_risk` is withdrawn.
    pub survived: Vec<String>,
    /// What the answer taught of the operation that was new here, for a shared store.
    pub lesson: Option<crate::memory::survival::Lesson>,
}

/// `silent_clear` for a pending clear that another replica left, seen in `snapshot`: the
/// snapshot this replica just took of the resource, so the GET's body is not read twice.
pub fn confirm_from(pending: &Pending, snapshot: &Snapshot, seen_by: &Operation) -> Vec<Finding> {
    let shows_empty = |read: &str| snapshot.field(read).is_some_and(|f| f.empty);
    confirm(pending, shows_empty, seen_by)
}

/// `silent_clear` for each pending field the resource now shows empty.
fn confirm(
    pending: &Pending,
    shows_empty: impl Fn(&str) -> bool,
    seen_by: &Operation,
) -> Vec<Finding> {
    pending
        .fields
        .iter()
        .filter(|(read, _, _)| shows_empty(read))
        .map(|(read, write, evidence)| {
            let mut evidence = evidence.clone();
            evidence.write_request_id = Some(pending.write_request_id.clone());
            let shown_by = if seen_by.id == pending.operation {
                "the write's own response".to_string()
            } else {
                format!("the next {} ({})", seen_by.id, seen_by.method)
            };
            let mut f = Finding::new(Kind::SilentClear, crate::finding::Location::Body, format!("/{write}"))
                .observed("emptied")
                .message(format!(
                    "`{read}` was erased by the write {} ({}): it held a value at GET {}, the write omitted it, and {shown_by} shows it empty",
                    pending.write_request_id, pending.operation, evidence.read_request_id
                ));
            f.operation = Some(pending.operation.as_str().into());
            f.evidence = Some(Box::new(evidence));
            f
        })
        .collect()
}

/// `f`, an omitted field the last GET showed holding a value, made a critical
/// `silent_clear_risk` naming that GET.
fn at_risk_finding(
    f: &mut Finding,
    op: &Operation,
    snapshot: &Snapshot,
    write_name: &str,
    evidence: &Evidence,
) {
    f.kind = Kind::SilentClearRisk;
    f.severity = Severity::Critical;
    let (observed, shown_by) = match (evidence.read_before_write, snapshot.partial) {
        (true, _) => (
            "absent; held a value at driftwatch's read before the write",
            "driftwatch's read",
        ),
        (false, true) => ("absent; held a value at the last read", "the read"),
        (false, false) => ("absent; held a value at the last GET", "the GET"),
    };
    f.observed = Some(observed.into());
    f.message = compact_str::format_compact!(
        "Send `{write_name}` with its current value: {} {} ({}) replaces the whole resource and would erase it, and {shown_by} {} at {} showed it holding a value",
        op.method,
        op.template,
        op.id,
        snapshot.request_id,
        humantime::format_rfc3339_seconds(snapshot.at)
    );
    f.evidence = Some(Box::new(evidence.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Contract, ContractOptions};
    use crate::finding::Location;
    use crate::spec::Spec;
    use serde_json::json;
    use std::time::Duration;

    /// A read model that nests what the write model flattens, and a writeOnly secret that the
    /// read model also lists.
    fn contract() -> Contract {
        let doc = json!({"openapi": "3.1.0", "paths": {"/c/{id}": {
            "get": {"responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"name": {"type": "string"}, "graphicsElements": {"type": "array"},
                "password": {"type": "string"}}}}}}}},
            "put": {"operationId": "updateC", "requestBody": {"content": {"application/json": {"schema": {
                "type": "object", "properties": {"name": {"type": "string"}, "graphicsElementIds": {"type": "array"},
                "password": {"type": "string", "writeOnly": true}}}}}}, "responses": {"200": {"description": "ok"}}}}}});
        Contract::compile(
            &Spec::from_document(std::path::Path::new("c.json"), doc).unwrap(),
            &ContractOptions::default(),
        )
        .unwrap()
    }

    fn omitted(field: &str) -> Finding {
        Finding::new(Kind::OmittedOnReplace, Location::Body, format!("/{field}"))
    }

    #[test]
    fn differently_named_fields_are_compared_only_when_mapped_and_write_only_never() {
        let c = contract();
        let put = c.operation("updateC").unwrap();
        let memory = Memory::new(
            10,
            Duration::from_secs(60),
            crate::memory::HashKey::random(),
        );
        let key = Key {
            path: "/c/1".into(),
            scope: 1,
        };
        let t = SystemTime::now();
        memory.remember(
            &key,
            "g1",
            t,
            &json!({"name": "x", "graphicsElements": [{"id": 3}], "password": "p"}),
        );
        let unmapped = HashMap::new();
        let tracker = Tracker {
            memory: &memory,
            field_maps: &unmapped,
            api: "",
            tool: None,
        };
        let mut findings = vec![omitted("graphicsElementIds"), omitted("password")];
        assert!(
            tracker
                .before_write(put, &key, t, &mut findings)
                .at_risk
                .is_empty(),
            "unmapped names are not guessed"
        );
        assert!(findings.iter().all(|f| f.kind == Kind::OmittedOnReplace));
        let mapped: HashMap<String, HashMap<String, String>> = [(
            "updateC".to_string(),
            [(
                "graphicsElementIds".to_string(),
                "graphicsElements".to_string(),
            )]
            .into(),
        )]
        .into();
        let tracker = Tracker {
            memory: &memory,
            field_maps: &mapped,
            api: "",
            tool: None,
        };
        let at_risk = tracker.before_write(put, &key, t, &mut findings).at_risk;
        assert_eq!(at_risk.len(), 1);
        assert_eq!(
            (findings[0].kind, findings[1].kind),
            (Kind::SilentClearRisk, Kind::OmittedOnReplace)
        );
        assert_eq!(findings[0].evidence.as_ref().unwrap().read_request_id, "g1");
    }

    /// The memory key of a request routed in `contract` (credential scope 1).
    fn key_of(contract: &Contract, method: &str, path: &str) -> Key {
        let headers: Vec<(String, String)> = Vec::new();
        let request = crate::request::RequestView::new(method, path, &headers, None);
        let audited = crate::audit::audit(contract, &request);
        resource_key(audited.operation.unwrap(), &audited.path_values, 1).unwrap()
    }

    #[test]
    fn the_config_links_a_write_to_a_get_on_another_template() {
        let doc = json!({"openapi": "3.1.0", "paths": {
            "/c/{id}/view": {"get": {"operationId": "viewC", "responses": {"200": {"description": "ok"}}}},
            "/c/{cid}": {"put": {"operationId": "putC", "x-driftwatch-write": "replace", "responses": {"200": {"description": "ok"}}}},
            "/d/{id}": {"get": {"operationId": "getD", "responses": {}}, "put": {"operationId": "putD", "x-driftwatch-write": "replace", "responses": {}}}}});
        let spec = Spec::from_document(std::path::Path::new("c.json"), doc).unwrap();
        let unlinked = Contract::compile(&spec, &ContractOptions::default()).unwrap();
        assert_eq!(unlinked.operation("putC").unwrap().resource, None);
        assert_eq!(
            unlinked.operation("putD").unwrap().resource.as_deref(),
            Some("getD"),
            "same template links itself"
        );
        let options = ContractOptions {
            read_for: [("PUT /c/{cid}".to_string(), "viewC".to_string())].into(),
            ..Default::default()
        };
        let linked = Contract::compile(&spec, &options).unwrap();
        let (put, view) = (
            linked.operation("putC").unwrap(),
            linked.operation("viewC").unwrap(),
        );
        assert_eq!(
            (put.resource.as_deref(), view.remembers),
            (Some("viewC"), true)
        );
        let key = |method, path| key_of(&linked, method, path);
        assert_eq!(key("PUT", "/c/7"), key("GET", "/c/7/view"));
        assert_ne!(key("PUT", "/c/7"), key("GET", "/c/8/view"));
    }

    #[test]
    fn a_key_is_the_text_earlier_releases_wrote() {
        // Replicas of two releases share a Redis store during a rollout: the text must not move.
        let doc = json!({"openapi": "3.1.0", "paths": {
            "/o/{org}/r/{repo}": {"get": {"operationId": "getR", "responses": {}},
                                  "put": {"operationId": "putR", "x-driftwatch-write": "replace", "responses": {}}},
            "/me": {"get": {"operationId": "getMe", "responses": {}},
                    "put": {"operationId": "putMe", "x-driftwatch-write": "replace", "responses": {}}}}});
        let spec = Spec::from_document(std::path::Path::new("k.json"), doc).unwrap();
        let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
        let (r, me) = (
            contract.operation("getR").unwrap(),
            contract.operation("getMe").unwrap(),
        );
        let path = |op, values: &[&str]| resource_key(op, values, 9).unwrap().path;
        assert_eq!(path(r, &["acme", "tools"]), "getR:acme/tools");
        assert_eq!(path(r, &["a%2Fb", ""]), "getR:a%2Fb/");
        assert_eq!(path(me, &[]), "getMe:");
        assert_eq!(resource_key(me, &[], 9).unwrap().scope, 9);
    }

    #[test]
    fn two_gets_that_share_an_id_remember_apart() {
        let pair = |get: &str| json!({"get": {"operationId": get, "responses": {}}, "put": {"x-driftwatch-write": "replace", "responses": {}}});
        let doc = json!({"openapi": "3.1.0", "paths": {
            "/a/{id}": pair("getThing"), "/b/{id}": pair("getThing"), "/c/{id}": pair("getC")}});
        let spec = Spec::from_document(std::path::Path::new("d.json"), doc).unwrap();
        let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
        let key = |method, path| key_of(&contract, method, path);
        assert_ne!(key("GET", "/a/7"), key("GET", "/b/7"));
        assert_eq!(key("PUT", "/a/7"), key("GET", "/a/7"));
        assert_eq!(key("PUT", "/b/7"), key("GET", "/b/7"));
        assert_eq!(key("GET", "/b/7").path, "GET /b/{id}:7");
        // A unique id names its resource as before (Redis stores of earlier releases).
        assert_eq!(key("PUT", "/c/7").path, "getC:7");
    }

    /// Issue 50: a field the resource's GET marks `readOnly` is the API's to compute, though
    /// the write's body schema declares it plainly (as many real specs do): omitting it is
    /// nothing. Each field the write puts at risk is then decided by the write's own answer.
    #[test]
    fn the_writes_own_answer_decides_each_field_and_read_only_in_the_get_is_no_omission() {
        let doc = json!({"openapi": "3.1.0", "paths": {"/c/{id}": {
            "get": {"operationId": "getC", "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"name": {"type": "string"}, "ids": {"type": "array"},
                "links": {"type": "object"}, "note": {"type": "string"},
                "created": {"type": "string", "readOnly": true}}}}}}}},
            "put": {"operationId": "putC", "x-driftwatch-write": "replace", "requestBody": {"content": {"application/json": {"schema": {
                "type": "object", "properties": {"name": {"type": "string"}, "ids": {"type": "array"},
                "links": {"type": "object"}, "note": {"type": "string"}, "created": {"type": "string"}}}}}},
                "responses": {"200": {"description": "ok"}}}}}});
        let spec = Spec::from_document(std::path::Path::new("c.json"), doc).unwrap();
        let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
        let put = contract.operation("putC").unwrap();
        assert_eq!(put.computed, ["created"]);
        let memory = Memory::new(
            10,
            Duration::from_secs(60),
            crate::memory::HashKey::random(),
        );
        let key = key_of(&contract, "PUT", "/c/1");
        let t = SystemTime::now();
        let held = json!({"name": "x", "ids": [1], "links": {"self": "/c/1"}, "note": "n", "created": "2026"});
        memory.remember(&key, "g1", t, &held);
        let maps = HashMap::new();
        let tracker = Tracker {
            memory: &memory,
            field_maps: &maps,
            api: "",
            tool: None,
        };
        let write = |body: &str| {
            let headers = vec![("content-type".to_string(), "application/json".to_string())];
            let view =
                crate::request::RequestView::new("PUT", "/c/1", &headers, Some(body.as_bytes()));
            crate::audit::audit(&contract, &view).findings
        };
        let mut findings = write(r#"{"name": "y"}"#);
        let fields = |f: &[Finding]| -> Vec<(Kind, String)> {
            f.iter().map(|f| (f.kind, f.field.to_string())).collect()
        };
        assert!(
            !fields(&findings).iter().any(|(_, f)| f == "/created"),
            "{:?}",
            fields(&findings)
        );
        let at_risk = tracker.before_write(put, &key, t, &mut findings).at_risk;
        assert_eq!(at_risk.len(), 3, "ids, links, note");
        // The answer: `ids` emptied, `links` still held, `note` not shown.
        let answer = json!({"name": "y", "ids": [], "links": {"self": "/c/1"}});
        let outcome = tracker.after_response(put, &key, "p1", t, 200, Some(&answer), at_risk);
        assert_eq!(outcome.survived, ["links"]);
        assert_eq!(
            fields(&outcome.confirmed),
            [(Kind::SilentClear, "/ids".to_string())]
        );
        let left = outcome.left.expect("`note` waits for the next GET");
        assert_eq!(
            left.fields.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
            ["note"]
        );
        crate::silent::withdraw(&mut findings, &outcome.survived);
        assert_eq!(
            fields(&findings),
            [
                (Kind::SilentClearRisk, "/ids".into()),
                (Kind::SilentClearRisk, "/note".into())
            ]
        );
        let learned = memory
            .survival
            .of(&crate::memory::survival::name("", put))
            .unwrap();
        assert_eq!(
            (learned.kept.len(), learned.erased, learned.reading()),
            (1, true, "replace")
        );
        // The next stale write: `links` is known to survive, so it is not even omitted.
        let mut findings = write(r#"{"name": "z"}"#);
        let at_risk = tracker.before_write(put, &key, t, &mut findings).at_risk;
        assert!(!fields(&findings).iter().any(|(_, f)| f == "/links"));
        assert_eq!(
            at_risk.iter().map(|f| f.1.as_str()).collect::<Vec<_>>(),
            ["ids", "note"]
        );
        // An answer that is no representation (or a refusal) decides nothing.
        let outcome = tracker.after_response(
            put,
            &key,
            "p2",
            t,
            204,
            None::<&serde_json::Value>,
            at_risk.clone(),
        );
        assert!(outcome.survived.is_empty() && outcome.confirmed.is_empty());
        let outcome = tracker.after_response(put, &key, "p3", t, 409, Some(&answer), at_risk);
        assert!(outcome.survived.is_empty() && outcome.confirmed.is_empty());
    }

    /// Issue 63: a list read teaches the memory each item under the key its item GET's
    /// would have, partial; a write omitting a field the list did not show is unseen.
    #[test]
    fn a_list_remembers_each_item_as_its_get_would_and_what_it_did_not_show_is_unseen() {
        let doc = json!({"openapi": "3.1.0",
            "components": {"schemas": {"C": {"type": "object", "properties": {
                "id": {"type": "integer"}, "name": {"type": "string"}, "ids": {"type": "array"}, "note": {"type": "string"}}}}},
            "paths": {
                "/c": {"get": {"operationId": "listC", "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/C"}}}}}}}},
                "/c/{id}": {
                    "get": {"operationId": "getC", "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/C"}}}}}},
                    "put": {"operationId": "putC", "x-driftwatch-write": "replace", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/C"}}}}, "responses": {"204": {"description": "ok"}}}}}});
        let spec = Spec::from_document(std::path::Path::new("l.json"), doc).unwrap();
        let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
        let (list_op, get, put) = (
            contract.operation("listC").unwrap(),
            contract.operation("getC").unwrap(),
            contract.operation("putC").unwrap(),
        );
        let memory = Memory::new(
            10,
            Duration::from_secs(60),
            crate::memory::HashKey::random(),
        );
        let maps = HashMap::new();
        let tracker = Tracker {
            memory: &memory,
            field_maps: &maps,
            api: "",
            tool: None,
        };
        let t = SystemTime::now();
        let list_key = key_of(&contract, "GET", "/c");
        // Item 8 leaves `note` out (a trimmed item), item "x y" is a string id, one has none.
        let body = r#"[{"id": 7, "name": "a", "ids": [1], "note": "n"}, {"id": 8, "name": "b", "ids": [2]},
                       {"id": "x y", "name": "c"}, {"name": "no id"}]"#;
        let parsed = crate::json::parse(body.as_bytes()).unwrap();
        let seen = Seen {
            request_id: "l1",
            tool: None,
            at: t,
            partial: true,
        };
        let listed = tracker.after_list(
            list_op.lists.as_ref().unwrap(),
            get,
            &list_key,
            seen,
            parsed.root(),
        );
        assert_eq!((listed.remembered.len(), listed.skipped), (3, 1));
        assert_eq!(listed.remembered[2].0.path, "getC:x%20y");
        let write = |path: &str, body: &str| {
            let headers = vec![("content-type".to_string(), "application/json".to_string())];
            let view =
                crate::request::RequestView::new("PUT", path, &headers, Some(body.as_bytes()));
            crate::audit::audit(&contract, &view).findings
        };
        // Channel 7: the list showed every field; `ids` held a value, so it is at risk.
        let mut findings = write("/c/7", r#"{"id": 7, "name": "z"}"#);
        let compared =
            tracker.before_write(put, &key_of(&contract, "PUT", "/c/7"), t, &mut findings);
        let at_risk: Vec<&str> = compared.at_risk.iter().map(|f| f.1.as_str()).collect();
        assert_eq!((at_risk, compared.unseen), (vec!["ids", "note"], false));
        assert_eq!(compared.at_risk[0].2.read_request_id, "l1");
        // Channel 8: `note` was not shown, so the memory cannot decide it.
        let mut findings = write("/c/8", r#"{"id": 8, "name": "z"}"#);
        let compared =
            tracker.before_write(put, &key_of(&contract, "PUT", "/c/8"), t, &mut findings);
        assert_eq!((compared.at_risk.len(), compared.unseen), (1, true));
        // Channel 9 was never shown.
        let mut findings = write("/c/9", r#"{"id": 9, "name": "z"}"#);
        let compared =
            tracker.before_write(put, &key_of(&contract, "PUT", "/c/9"), t, &mut findings);
        assert_eq!((compared.at_risk.len(), compared.unseen), (0, true));
    }
}
