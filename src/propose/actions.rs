//! The three kinds of action a tally supports, each only when the answers say the API took it:
//! - a query parameter the spec declares nowhere, sent on requests of the spec's operations
//!   that the API answered 2xx (twice, at the defaults), and never answered 400 or 422 when
//!   sent; typed as the requests sent it;
//! - an endpoint no template fits that the API answered 2xx (newer than the spec), under the
//!   spec's base path, unless the spec has that method on a path of its shape already; its
//!   words literal, its values parameters (`template.rs`);
//! - a top-level response field every 2xx answer of an operation carried (among the answers
//!   that had findings: an answer with none is no event), declared `readOnly`.
//!
//! Never proposed: what the API rejected (the client's drift, not the spec's gap), and a query
//! parameter the finding names a declared one for (`customer_id`, spec `customerId`: a rename
//! the tool is to blame for). A comment says how many requests and operations; the rest of the
//! evidence is the action's `x-driftwatch-evidence`.

use serde_json::{Value, json};

use super::template::{self, unnamed};
use super::{Action, Options, Tally};
use crate::contract::BasePaths;

impl Tally {
    pub(super) fn parameters(&self, doc: &Value, o: Options) -> Vec<Action> {
        let mut actions = Vec::new();
        for (name, ops) in &self.params {
            let requests: usize = ops.values().map(|s| s.requests).sum();
            if self.rejected.contains(name)
                || ops.len() < o.min_operations
                || requests < o.min_requests
            {
                continue;
            }
            for ((method, template), seen) in ops {
                let operation = doc.pointer(&pointer(&["paths", template, method]));
                let Some(path) = quoted(template).filter(|_| operation.is_some()) else {
                    continue;
                };
                let schema = match seen.sent_type() {
                    Some(kind) => json!({"type": kind}),
                    None => json!({}),
                };
                let parameter = json!({"name": name, "in": "query", "schema": schema});
                let mut evidence = seen.evidence();
                evidence["operations"] = json!(ops.len());
                evidence["requests_all_operations"] = json!(requests);
                actions.push(Action {
                    comment: format!(
                        "query parameter (named below): sent on {requests} requests of {} operation(s), each answered 2xx, never 400 or 422; {} of them here",
                        ops.len(),
                        seen.requests,
                    ),
                    target: format!("$.paths[{path}].{method}"),
                    update: json!({"parameters": [parameter]}),
                    evidence,
                });
            }
        }
        actions
    }

    pub(super) fn endpoints(&self, doc: &Value, o: Options) -> Vec<Action> {
        let bases = BasePaths::new(doc, None);
        let within = (self.endpoints.iter()).filter_map(|((method, path), seen)| {
            Some((method.as_str(), template::relative(&bases, path)?, seen))
        });
        let mut actions = Vec::new();
        for group in template::group(within) {
            let (method, seen) = (&group.method, &group.seen);
            let (template, names) = template::named(&group.segments, doc);
            if seen.requests < o.min_requests || has(doc, &template, method) {
                continue;
            }
            let mut operation = json!({"responses": {"200": {"description": "answered 2xx (proposed by driftwatch from traffic)"}}});
            if !names.is_empty() {
                let each = names.iter().map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}));
                operation["parameters"] = Value::Array(each.collect());
            }
            let mut evidence = seen.evidence();
            evidence["paths"] = json!(group.paths);
            actions.push(Action {
                comment: format!(
                    "endpoint {} (its path below): no template fits it; answered 2xx {} times, on {} paths as events show them",
                    method.to_uppercase(),
                    seen.requests,
                    group.paths,
                ),
                target: "$.paths".into(),
                update: json!({ template: { method.as_str(): operation } }),
                evidence,
            });
        }
        actions.sort_by_key(endpoint_key);
        actions
    }

    pub(super) fn response_fields(&self, doc: &Value, o: Options) -> Vec<Action> {
        let mut actions = Vec::new();
        for (((method, template), status), fields) in &self.fields {
            let answers = self
                .answers
                .get(&((method.clone(), template.clone()), status.clone()));
            let Some(target) = schema_target(doc, template, method, status) else {
                continue;
            };
            for (name, seen) in fields {
                let every = answers.is_some_and(|n| *n == seen.requests);
                if !every || seen.requests < o.min_requests {
                    continue;
                }
                actions.push(Action {
                    comment: format!(
                        "response field (named below) of {} ({status}): carried by every one of {} answers with findings",
                        method.to_uppercase(),
                        seen.requests,
                    ),
                    target: target.clone(),
                    // readOnly: the API gave it unasked, so it is the API's to compute; a replace
                    // write need not carry it back (declared plainly, it would make every such
                    // write `omitted_on_replace`: the tests caught that).
                    update: json!({"properties": { name: {"readOnly": true} }}),
                    evidence: seen.evidence(),
                });
            }
        }
        actions
    }
}

/// `'/a/{id}'` as an RFC 9535 name selector; `None` for a name with a control character (the
/// spec's own text, but no target is proposed that needs more than `\'` and `\\`).
fn quoted(name: &str) -> Option<String> {
    let plain = !name.chars().any(char::is_control);
    plain.then(|| format!("'{}'", name.replace('\\', "\\\\").replace('\'', "\\'")))
}

/// The JSON pointer of `tokens`.
fn pointer(tokens: &[&str]) -> String {
    let escaped = tokens
        .iter()
        .map(|t| t.replace('~', "~0").replace('/', "~1"));
    escaped.map(|t| format!("/{t}")).collect()
}

/// Whether `doc` has `method` on a path of `template`'s shape, whatever its names.
fn has(doc: &Value, template: &str, method: &str) -> bool {
    let paths = doc.get("paths").and_then(Value::as_object);
    let shape = unnamed(template);
    let same = |(t, item): (&String, &Value)| unnamed(t) == shape && item.get(method).is_some();
    paths.is_some_and(|p| p.iter().any(same))
}

/// An endpoint action's method and template, to give them in that order.
fn endpoint_key(action: &Action) -> (String, String) {
    let paths = action.update.as_object();
    let first = paths.and_then(|p| p.iter().next());
    let method = first.and_then(|(_, ops)| ops.as_object()?.keys().next().cloned());
    (
        method.unwrap_or_default(),
        first.map(|(t, _)| t.clone()).unwrap_or_default(),
    )
}

/// Where a response's JSON schema is in `doc`, as a JSONPath: the component its `$ref` names,
/// or the schema where it is written; `None` when the answer has no JSON schema there.
fn schema_target(doc: &Value, template: &str, method: &str, status: &str) -> Option<String> {
    let responses = doc
        .get("paths")?
        .get(template)?
        .get(method)?
        .get("responses")?;
    let class = format!("{}XX", status.chars().next()?);
    let (key, response) = [status, class.as_str(), "default"]
        .into_iter()
        .find_map(|k| Some((k, responses.get(k)?)))?;
    let content = response.get("content")?.as_object()?;
    let (media, body) = content.iter().find(|(m, _)| m.contains("json"))?;
    let schema = body.get("schema")?;
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.strip_prefix("#/components/schemas/")?;
        if name.contains('/') {
            return None;
        }
        return Some(format!("$.components.schemas[{}]", quoted(name)?));
    }
    Some(format!(
        "$.paths[{}].{method}.responses[{}].content[{}].schema",
        quoted(template)?,
        quoted(key)?,
        quoted(media)?
    ))
}

#[cfg(test)]
mod tests {
    use super::super::tests::event;
    use super::*;

    /// The templates proposed for `paths` (each sent as `method path` twice, answered 200).
    fn proposed(doc: &Value, paths: &[(&str, &str)]) -> Vec<String> {
        let mut t = Tally::default();
        let get = json!([{"kind": "unknown_operation", "field": "", "location": "path"}]);
        for (method, path) in paths.iter().chain(paths) {
            let mut e = event(method, "", 200, get.clone());
            e["path"] = json!(path);
            t.add(&e);
        }
        let actions = t.propose(doc, Options::default());
        let each = actions.iter().flat_map(|a| {
            let paths = a.update.as_object().unwrap();
            paths.iter().map(|(template, ops)| {
                let op = ops.as_object().unwrap().values().next().unwrap();
                let names = op["parameters"].as_array().into_iter().flatten();
                let names: Vec<&str> = names.map(|p| p["name"].as_str().unwrap()).collect();
                format!("{template} {names:?}")
            })
        });
        each.collect()
    }

    /// Issue 66: the token endpoint came out `/realms/master/protocol/{param1}/{param2}`. Words
    /// stay literal; numbers, UUIDs, hashes, long tokens, the sidecar's `*` and a word that
    /// differs between requests at one place become parameters, named for the collection
    /// before them.
    #[test]
    fn an_endpoint_keeps_its_words_and_only_values_become_parameters() {
        let uuid = "/things/3f2b6c1e-8a4d-4e2f-9b1a-0c5d7e9f1a2b/logs";
        let other = "/things/0c5d7e9f-1a2b-4e2f-9b1a-3f2b6c1e8a4d/logs";
        let paths = [
            ("POST", "/realms/master/protocol/openid-connect/token"),
            ("GET", uuid),
            ("GET", other),
            ("GET", "/orders/1234/lines/9"),
            ("GET", "/blobs/9f86d081884c7d65"),
            ("GET", "/sessions/tok9A8b7C6d5E4f3"),
            ("GET", "/v2/tasks/*"),
            ("PUT", "/spaces/alpha/rooms/export.json"),
            ("PUT", "/spaces/beta/rooms/export.json"),
            ("GET", "/spaces/alpha/members"),
            ("GET", "/spaces/alpha/guests"),
            ("GET", "/*/*"),
        ];
        assert_eq!(
            proposed(&json!({}), &paths),
            [
                "/blobs/{blob_id} [\"blob_id\"]",
                "/orders/{order_id}/lines/{line_id} [\"order_id\", \"line_id\"]",
                "/sessions/{session_id} [\"session_id\"]",
                "/spaces/alpha/guests []",
                "/spaces/alpha/members []",
                "/things/{thing_id}/logs [\"thing_id\"]",
                "/v2/tasks/{task_id} [\"task_id\"]",
                "/{id}/{id_2} [\"id\", \"id_2\"]",
                "/realms/master/protocol/openid-connect/token []",
                "/spaces/{space_id}/rooms/export.json [\"space_id\"]",
            ]
        );
    }

    /// Issue 66: an endpoint outside every base path of the spec is another API's on the same
    /// host (Keycloak's token endpoint beside its admin API under `/admin/realms`): never
    /// proposed into this document. One under it is proposed relative to it, with the names
    /// the spec gives the places it shares.
    #[test]
    fn an_endpoint_outside_the_base_path_is_not_proposed_and_one_under_it_is_relative() {
        let doc = json!({"servers": [{"url": "https://sso.example.com/admin/realms"}],
            "paths": {"/{realm}/users/{user-id}": {"get": {}}}});
        let paths = [
            ("POST", "/realms/master/protocol/openid-connect/token"),
            ("GET", "/admin/realms/*/users/*/credentials"),
            ("GET", "/admin/realms/*/organizations/*"),
        ];
        assert_eq!(
            proposed(&doc, &paths),
            [
                "/{realm}/organizations/{organization_id} [\"realm\", \"organization_id\"]",
                "/{realm}/users/{user-id}/credentials [\"realm\", \"user-id\"]",
            ]
        );
        let mut t = Tally::default();
        let get = json!([{"kind": "unknown_operation", "field": "", "location": "path"}]);
        for _ in 0..2 {
            let mut e = event("POST", "", 200, get.clone());
            e["path"] = json!(paths[0].1);
            t.add(&e);
        }
        assert_eq!(t.outside(&doc), 2, "counted for the summary");
    }

    #[test]
    fn an_endpoint_shape_becomes_a_template_and_a_response_field_finds_its_schema() {
        assert_eq!(quoted("/it's").unwrap(), "'/it\\'s'");
        assert_eq!(quoted("/a\u{85}"), None);
        let doc = json!({"paths": {"/t/{id}": {"get": {"responses": {
            "2XX": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Task"}}}}}}}}});
        assert_eq!(
            schema_target(&doc, "/t/{id}", "get", "200").unwrap(),
            "$.components.schemas['Task']"
        );
        assert_eq!(schema_target(&doc, "/t/{id}", "put", "200"), None);
        let mut t = Tally::default();
        let field = json!([{"kind": "undeclared_response_field", "field": "/etag", "location": "response"}]);
        t.add(&event("GET", "/t/{id}", 200, field.clone()));
        t.add(&event("GET", "/t/{id}", 200, field));
        let other = json!([{"kind": "response_schema_violation", "field": "/name", "location": "response"}]);
        t.add(&event("GET", "/t/{id}", 200, other));
        assert!(
            t.propose(&doc, Options::default()).is_empty(),
            "one answer of three lacked it"
        );
        let get = json!([{"kind": "unknown_operation", "field": "/t/*", "location": "path"}]);
        let mut t = Tally::default();
        t.add(&event("GET", "/t/*", 200, get.clone()));
        t.add(&event("GET", "/t/*", 200, get));
        assert!(
            t.propose(&doc, Options::default()).is_empty(),
            "GET /t/{{id}} is the spec's: never overwritten"
        );
    }
}
