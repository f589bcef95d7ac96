//! `driftwatch overlay propose`: an OpenAPI Overlay that would declare what the API has shown,
//! in the sidecar's events, that it accepts and returns, where its spec is silent. Three
//! things, each only when the answers say the API took it:
//! - a query parameter the spec declares nowhere, sent on requests of several operations that
//!   the API answered 2xx (a global paging parameter such as `page`), and never answered 400
//!   or 422 when sent;
//! - an endpoint no template fits that the API answered 2xx (newer than the spec);
//! - a top-level response field every 2xx answer of an operation carried (among the answers
//!   that had findings: an answer with none is no event), declared `readOnly`.
//!
//! Never proposed: what the API rejected (the client's drift, not the spec's gap), and a query
//! parameter the finding names a declared one for (`customer_id`, spec `customerId`: a rename
//! the tool is to blame for). Each action carries its evidence as a comment. Pure: events in,
//! text out; nothing is applied until the operator names the file.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// How much evidence an action needs.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// 2xx answers at least, for any action.
    pub min_requests: usize,
    /// Operations at least a query parameter was sent to (one operation's unknown parameter
    /// may be one the API ignores; many operations' is a global one).
    pub min_operations: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            min_requests: 2,
            min_operations: 2,
        }
    }
}

/// Where and when something was seen.
#[derive(Clone, Debug, Default)]
struct Seen {
    requests: usize,
    first: String,
    last: String,
    request_id: String,
}

impl Seen {
    /// One more; the example is the earliest request (the least id among those at one
    /// time), so events read in any order give the same evidence.
    fn add(&mut self, at: &str, request_id: &str) {
        let earlier = self.requests == 0 || at < self.first.as_str();
        if earlier || (at == self.first && request_id < self.request_id.as_str()) {
            self.first = at.to_string();
            self.request_id = request_id.to_string();
        }
        if at > self.last.as_str() {
            self.last = at.to_string();
        }
        self.requests += 1;
    }

    fn evidence(&self) -> String {
        format!(
            "first {}, last {}, e.g. request {}",
            self.first, self.last, self.request_id
        )
    }
}

/// An operation: its method (lowercase) and template.
type Op = (String, String);

/// The events, tallied.
#[derive(Default)]
pub struct Tally {
    pub events: usize,
    params: BTreeMap<String, BTreeMap<Op, Seen>>,
    rejected: BTreeSet<String>,
    endpoints: BTreeMap<Op, Seen>,
    /// (operation, status) → field → seen; and how many answers had response findings.
    fields: BTreeMap<(Op, String), BTreeMap<String, Seen>>,
    answers: BTreeMap<(Op, String), usize>,
}

/// One proposed action.
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    pub comment: String,
    pub target: String,
    pub update: Value,
}

impl Tally {
    /// Count one event (as the sidecar writes it, or as `/findings` lists it).
    pub fn add(&mut self, event: &Value) {
        self.events += 1;
        let text = |k: &str| event.get(k).and_then(Value::as_str).unwrap_or_default();
        let status = event.get("status").and_then(Value::as_u64).unwrap_or(0);
        let (at, id) = (text("timestamp"), text("request_id"));
        let ok = (200..300).contains(&status);
        let op = (
            text("method").to_ascii_lowercase(),
            text("path_template").to_string(),
        );
        let findings = event.get("findings").and_then(Value::as_array);
        let mut answered = false;
        for f in findings.into_iter().flatten() {
            let field = f.get("field").and_then(Value::as_str).unwrap_or_default();
            match f.get("kind").and_then(Value::as_str).unwrap_or_default() {
                "unknown_query_param" if f.get("suggestion").is_some_and(|s| !s.is_null()) => {}
                "unknown_query_param" if matches!(status, 400 | 422) => {
                    self.rejected.insert(field.to_string());
                }
                "unknown_query_param" if ok && !op.1.is_empty() => {
                    let ops = self.params.entry(field.to_string()).or_default();
                    ops.entry(op.clone()).or_default().add(at, id);
                }
                "unknown_operation" if ok => {
                    let shape = (op.0.clone(), text("path").to_string());
                    self.endpoints.entry(shape).or_default().add(at, id);
                }
                "undeclared_response_field" if ok && !op.1.is_empty() => {
                    answered = true;
                    let key = (op.clone(), status.to_string());
                    let fields = self.fields.entry(key).or_default();
                    fields.entry(field.to_string()).or_default().add(at, id);
                }
                _ if ok && f.get("location").and_then(Value::as_str) == Some("response") => {
                    answered = true;
                }
                _ => {}
            }
        }
        if answered {
            *self.answers.entry((op, status.to_string())).or_default() += 1;
        }
    }

    /// The actions the tally supports, against `doc` (the spec as read, which the overlay will
    /// be applied to): parameters, then endpoints, then response fields, each sorted.
    pub fn propose(&self, doc: &Value, o: Options) -> Vec<Action> {
        let mut actions = self.parameters(o);
        actions.extend(self.endpoints(o));
        actions.extend(self.response_fields(doc, o));
        actions
    }

    fn parameters(&self, o: Options) -> Vec<Action> {
        let mut actions = Vec::new();
        for (name, ops) in &self.params {
            let requests: usize = ops.values().map(|s| s.requests).sum();
            if self.rejected.contains(name)
                || ops.len() < o.min_operations
                || requests < o.min_requests
            {
                continue;
            }
            let parameter = json!({"name": name, "in": "query", "schema": {"type": "string"}});
            for ((method, template), seen) in ops {
                actions.push(Action {
                    comment: format!(
                        "query parameter `{name}`: sent on {requests} requests of {} operations, each answered 2xx, never 400 or 422; here {} ({})",
                        ops.len(),
                        seen.requests,
                        seen.evidence()
                    ),
                    target: format!("$.paths[{}].{method}", quoted(template)),
                    update: json!({"parameters": [parameter]}),
                });
            }
        }
        actions
    }

    fn endpoints(&self, o: Options) -> Vec<Action> {
        let mut actions = Vec::new();
        for ((method, shape), seen) in &self.endpoints {
            if seen.requests < o.min_requests || shape.is_empty() {
                continue;
            }
            let (template, parameters) = template_of(shape);
            let mut operation = json!({"responses": {"200": {"description": "answered 2xx (proposed by driftwatch from traffic)"}}});
            if !parameters.is_empty() {
                operation["parameters"] = Value::Array(parameters);
            }
            actions.push(Action {
                comment: format!(
                    "endpoint {} {template}: no template fits it; answered 2xx {} times ({})",
                    method.to_uppercase(),
                    seen.requests,
                    seen.evidence()
                ),
                target: "$.paths".into(),
                update: json!({ template: { method.as_str(): operation } }),
            });
        }
        actions
    }

    fn response_fields(&self, doc: &Value, o: Options) -> Vec<Action> {
        let mut actions = Vec::new();
        for (((method, template), status), fields) in &self.fields {
            let answers = self
                .answers
                .get(&((method.clone(), template.clone()), status.clone()));
            let Some(target) = schema_target(doc, template, method, status) else {
                continue;
            };
            for (field, seen) in fields {
                let name = field.trim_start_matches('/');
                let every = answers.is_some_and(|n| *n == seen.requests);
                if !every || seen.requests < o.min_requests || name.is_empty() || name.contains('/')
                {
                    continue;
                }
                actions.push(Action {
                    comment: format!(
                        "response field `{name}` of {} {template} ({status}): carried by every one of {} answers with findings ({})",
                        method.to_uppercase(),
                        seen.requests,
                        seen.evidence()
                    ),
                    target: target.clone(),
                    // readOnly: the API gave it unasked, so it is the API's to compute; a replace
                    // write need not carry it back (declared plainly, it would make every such
                    // write `omitted_on_replace`: the tests caught that).
                    update: json!({"properties": { name: {"readOnly": true} }}),
                });
            }
        }
        actions
    }
}

/// `'/a/{id}'` as a JSONPath name selector.
fn quoted(name: &str) -> String {
    format!("'{}'", name.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A path shape from an event (`/v2/tasks/*`) as a template (`/v2/tasks/{param1}`) and the
/// path parameters it then has.
fn template_of(shape: &str) -> (String, Vec<Value>) {
    let mut parameters = Vec::new();
    let segments: Vec<String> = shape
        .split('/')
        .map(|s| match s {
            "*" => {
                let name = format!("param{}", parameters.len() + 1);
                parameters.push(json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}));
                format!("{{{name}}}")
            }
            s => s.to_string(),
        })
        .collect();
    (segments.join("/"), parameters)
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
        return (!name.contains('/')).then(|| format!("$.components.schemas[{}]", quoted(name)));
    }
    Some(format!(
        "$.paths[{}].{method}.responses[{}].content[{}].schema",
        quoted(template),
        quoted(key),
        quoted(media)
    ))
}

/// The Overlay document, with each action's evidence as a comment above it.
pub fn render(actions: &[Action], source: &str, events: usize) -> String {
    let mut out = format!(
        "# Proposed by `driftwatch overlay propose` from {source} ({events} events).\n\
         # Nothing here is applied until this file is named in spec.overlays (or --overlay).\n\
         # Review each action: an API that ignores a parameter answers 2xx too.\n\
         overlay: 1.0.0\ninfo:\n  title: What the API answered and its spec does not say\n  version: \"1\"\nactions:\n"
    );
    for a in actions {
        out.push_str(&format!("  # {}\n", a.comment.replace('\n', " ")));
        out.push_str(&format!(
            "  - target: {}\n",
            Value::String(a.target.clone())
        ));
        out.push_str(&format!("    update: {}\n", a.update));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(method: &str, template: &str, status: u16, findings: Value) -> Value {
        json!({"timestamp": "2026-12-06T10:00:00Z", "request_id": "r1", "method": method,
               "path_template": template, "path": template, "status": status, "findings": findings})
    }

    fn unknown(name: &str, suggestion: Option<&str>) -> Value {
        json!({"kind": "unknown_query_param", "field": name, "location": "query", "suggestion": suggestion})
    }

    #[test]
    fn a_parameter_is_proposed_only_when_many_operations_took_it_and_none_refused_it() {
        let mut t = Tally::default();
        for template in ["/a", "/b"] {
            t.add(&event(
                "GET",
                template,
                200,
                json!([unknown("page", None), unknown("sort_by", None)]),
            ));
            t.add(&event(
                "GET",
                template,
                200,
                json!([unknown("customer_id", Some("customerId"))]),
            ));
        }
        t.add(&event(
            "GET",
            "/a",
            200,
            json!([unknown("page", None), unknown("only_here", None)]),
        ));
        t.add(&event(
            "GET",
            "/a",
            200,
            json!([unknown("only_here", None)]),
        ));
        t.add(&event("GET", "/b", 400, json!([unknown("sort_by", None)])));
        let actions = t.propose(&json!({}), Options::default());
        let targets: Vec<(&str, &Value)> = actions
            .iter()
            .map(|a| (a.target.as_str(), &a.update["parameters"][0]["name"]))
            .collect();
        assert_eq!(
            targets,
            [
                ("$.paths['/a'].get", &json!("page")),
                ("$.paths['/b'].get", &json!("page"))
            ]
        );
        assert!(
            actions[0]
                .comment
                .contains("sent on 3 requests of 2 operations"),
            "{}",
            actions[0].comment
        );
    }

    #[test]
    fn an_endpoint_shape_becomes_a_template_and_a_response_field_finds_its_schema() {
        assert_eq!(
            template_of("/v2/tasks/*/logs/*").0,
            "/v2/tasks/{param1}/logs/{param2}"
        );
        assert_eq!(quoted("/it's"), "'/it\\'s'");
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
    }
}
