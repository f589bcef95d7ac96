//! The three kinds of action a tally supports, each only when the answers say the API took it:
//! - a query parameter the spec declares nowhere, sent on requests of several of the spec's
//!   operations that the API answered 2xx (a global paging parameter such as `page`), and
//!   never answered 400 or 422 when sent;
//! - an endpoint no template fits that the API answered 2xx (newer than the spec), unless the
//!   spec has that method on a path of its shape already;
//! - a top-level response field every 2xx answer of an operation carried (among the answers
//!   that had findings: an answer with none is no event), declared `readOnly`.
//!
//! Never proposed: what the API rejected (the client's drift, not the spec's gap), and a query
//! parameter the finding names a declared one for (`customer_id`, spec `customerId`: a rename
//! the tool is to blame for). A comment says how many requests and operations; the rest of the
//! evidence is the action's `x-driftwatch-evidence`.

use serde_json::{Value, json};

use super::{Action, Options, Tally};

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
            let parameter = json!({"name": name, "in": "query", "schema": {"type": "string"}});
            for ((method, template), seen) in ops {
                let operation = doc.pointer(&pointer(&["paths", template, method]));
                let Some(path) = quoted(template).filter(|_| operation.is_some()) else {
                    continue;
                };
                actions.push(Action {
                    comment: format!(
                        "query parameter (named below): sent on {requests} requests of {} operations, each answered 2xx, never 400 or 422; {} of them here",
                        ops.len(),
                        seen.requests,
                    ),
                    target: format!("$.paths[{path}].{method}"),
                    update: json!({"parameters": [parameter]}),
                    evidence: seen.evidence(),
                });
            }
        }
        actions
    }

    pub(super) fn endpoints(&self, doc: &Value, o: Options) -> Vec<Action> {
        let mut actions = Vec::new();
        for ((method, shape), seen) in &self.endpoints {
            if seen.requests < o.min_requests {
                continue;
            }
            let (template, parameters) = template_of(shape, doc);
            if doc
                .pointer(&pointer(&["paths", &template, method]))
                .is_some()
            {
                continue;
            }
            let mut operation = json!({"responses": {"200": {"description": "answered 2xx (proposed by driftwatch from traffic)"}}});
            if !parameters.is_empty() {
                operation["parameters"] = Value::Array(parameters);
            }
            actions.push(Action {
                comment: format!(
                    "endpoint {} (its path below): no template fits it; answered 2xx {} times",
                    method.to_uppercase(),
                    seen.requests,
                ),
                target: "$.paths".into(),
                update: json!({ template: { method.as_str(): operation } }),
                evidence: seen.evidence(),
            });
        }
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

/// A path shape from an event (`/v2/tasks/*`) as a template (`/v2/tasks/{param1}`) and the
/// path parameters it then has; the spec's own template and names where it has a path of that
/// shape (`/v2/tasks/{id}`), so that no second template of one shape is proposed.
fn template_of(shape: &str, doc: &Value) -> (String, Vec<Value>) {
    let mut names = Vec::new();
    let segments: Vec<String> = shape
        .split('/')
        .map(|s| match s {
            "*" => {
                names.push(format!("param{}", names.len() + 1));
                format!("{{{}}}", names[names.len() - 1])
            }
            s => s.to_string(),
        })
        .collect();
    let mut template = segments.join("/");
    let paths = doc.get("paths").and_then(Value::as_object);
    let same = |t: &&String| *t != &template && unnamed(t) == unnamed(&template);
    if let Some(own) = paths.and_then(|p| p.keys().find(same)) {
        template = own.clone();
        names = own
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .map(String::from)
            .collect();
    }
    let parameters = (names.iter())
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    (template, parameters)
}

/// A template with its parameters' names left out (`/t/{}`): two templates of one shape.
fn unnamed(template: &str) -> String {
    let segments = template.split('/');
    let each = segments.map(|s| match s.starts_with('{') && s.ends_with('}') {
        true => "{}",
        false => s,
    });
    each.collect::<Vec<_>>().join("/")
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

    #[test]
    fn an_endpoint_shape_becomes_a_template_and_a_response_field_finds_its_schema() {
        let empty = json!({});
        assert_eq!(
            template_of("/v2/tasks/*/logs/*", &empty).0,
            "/v2/tasks/{param1}/logs/{param2}"
        );
        assert_eq!(quoted("/it's").unwrap(), "'/it\\'s'");
        assert_eq!(quoted("/a\u{85}"), None);
        let doc = json!({"paths": {"/t/{id}": {"get": {"responses": {
            "2XX": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Task"}}}}}}}}});
        assert_eq!(
            template_of("/t/*", &doc),
            (
                "/t/{id}".to_string(),
                vec![
                    json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string"}})
                ]
            )
        );
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
