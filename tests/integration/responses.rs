//! The response audit: every response kind with an answer that must produce it and a twin that
//! must not, and the real specs' own example responses auditing clean (no false positives).

use driftwatch::audit::{ReportedOnce, audit, audit_response};
use driftwatch::contract::{Contract, ContractOptions, deref};
use std::collections::BTreeMap;

use driftwatch::finding::{Blame, Finding, Kind, Severity};
use driftwatch::request::RequestView;
use driftwatch::response::ResponseView;
use driftwatch::spec::Spec;
use serde_json::{Value, json};

use super::util::{contract, example, shared_spec};

/// Every example a response declares (`example`, or `examples.*.value`, refs followed), as
/// (status, media type, JSON text). Statuses like `2XX`/`default` get a code in their range.
fn response_examples(doc: &Value, operation: &Value) -> Vec<(u16, String, String)> {
    let mut out = Vec::new();
    let responses = operation.get("responses").and_then(Value::as_object);
    for (status, response) in responses.into_iter().flatten() {
        let code = match status.to_ascii_uppercase().as_str() {
            "DEFAULT" => 599,
            s if s.ends_with("XX") => s[..1].parse::<u16>().unwrap() * 100 + 99,
            s => s.parse().unwrap(),
        };
        let response = deref(doc, response);
        let content = response.get("content").and_then(Value::as_object);
        for (media, m) in content.into_iter().flatten() {
            let mut values: Vec<&Value> = m.get("example").into_iter().collect();
            let named = m.get("examples").and_then(Value::as_object);
            for example in named.into_iter().flatten().map(|(_, e)| deref(doc, e)) {
                values.extend(example.get("value"));
            }
            for v in values {
                out.push((code, media.clone(), v.to_string()));
            }
        }
    }
    out
}

/// Per spec: (examples audited, examples with findings, findings by kind). Only GitHub's
/// specs carry response examples, and GitHub writes them by hand without validating them:
/// these are real drift between its examples and its schemas, which the response audit finds
/// (every undeclared field is re-checked below against the raw schema; spot checks by name
/// follow). The other specs carry no response examples; their responses are covered by the
/// kinds tests and by the story tests. Nine examples of each GitHub spec fit two branches of
/// a `oneOf` and are not reported since `oneOf` is read as `anyOf` (docs/findings.md); in
/// each GHES spec one more leaves out a required property whose `$ref` target is `readOnly`.
/// (spec, examples, examples with findings, findings by kind)
type Pinned = (&'static str, usize, usize, &'static [(&'static str, usize)]);

const EXAMPLES: &[Pinned] = &[
    ("ersatztv/v1.json", 0, 0, &[]),
    ("ersatztv/scripted-schedule.json", 0, 0, &[]),
    (
        "github/api.github.com.json.gz",
        1051,
        227,
        &[
            // `replace_will_drop_field` on `codespaces/create-or-update-repo-secret` was a false
            // alarm: its body (`encrypted_value`, `key_id`) is no state of the secret its GET
            // shows (`name`, `visibility`, ...), so the PUT is an action, not a replace.
            ("response_schema_violation", 510),
            ("undeclared_response_field", 116),
        ],
    ),
    (
        "github/ghes-3.17.json.gz",
        778,
        151,
        &[
            ("response_schema_violation", 331),
            ("undeclared_response_field", 40),
        ],
    ),
    (
        "github/ghes-3.19.json.gz",
        835,
        169,
        &[
            ("response_schema_violation", 353),
            ("undeclared_response_field", 50),
        ],
    ),
    ("readme/petstore-3.0.json", 0, 0, &[]),
    ("readme/petstore-3.1.json", 0, 0, &[]),
    ("readme/parameters-style-3.1.json", 0, 0, &[]),
    ("readme/schema-types-3.1.json", 0, 0, &[]),
    ("scalar/galaxy.json", 0, 0, &[]),
];

/// Findings on GitHub's examples checked by hand against the document.
const SPOT_CHECKS: &[(&str, &str, &str, &str)] = &[
    // The `lexical-fallback` example's items are `["..."]`: strings where the schema says objects.
    (
        "github/ghes-3.19.json.gz",
        "search/issues-and-pull-requests",
        "response_schema_violation",
        "/items/*",
    ),
    // The example holds a literal, unresolved `{"$ref": ...}`.
    (
        "github/api.github.com.json.gz",
        "code-scanning/create-variant-analysis",
        "undeclared_response_field",
        "/$ref",
    ),
];

#[test]
fn the_real_specs_example_responses_audit_as_pinned() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (rel, examples, dirty, kinds) in EXAMPLES {
        let spec = Spec::load(&shared_spec(rel)).unwrap();
        let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
        let (mut count, mut with_findings) = (0, 0);
        let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
        for op in contract.operations() {
            let raw = spec.doc.pointer(&op.pointer).unwrap();
            for (status, media, body) in response_examples(&spec.doc, raw) {
                let headers = vec![("content-type".to_string(), media.clone())];
                let view = ResponseView {
                    status,
                    headers: &headers,
                    body: Some(body.as_bytes()),
                    parsed: None,
                };
                let findings: Vec<Finding> = audit_response(&contract, op, &view);
                count += 1;
                with_findings += usize::from(!findings.is_empty());
                for f in &findings {
                    *by_kind.entry(f.kind.as_str()).or_default() += 1;
                    let spot = SPOT_CHECKS.iter().position(|(r, o, k, field)| {
                        r == rel
                            && Some(*o) == f.operation.as_deref()
                            && *k == f.kind.as_str()
                            && *field == f.field
                    });
                    checked |= spot.map_or(0, |i| 1 << i);
                    if f.kind == Kind::UndeclaredResponseField
                        && declared_anywhere(&spec.doc, raw, status, &f.field)
                    {
                        problems.push(format!(
                            "{rel} {} {status}: `{}` is declared somewhere in the response schema",
                            op.id, f.field
                        ));
                    }
                }
            }
        }
        let want: BTreeMap<&str, usize> = kinds.iter().copied().collect();
        if (count, by_kind.clone()) != (*examples, want.clone()) {
            problems.push(format!(
                "{rel}: {count} examples, {by_kind:?}; pinned {examples}, {want:?}"
            ));
        }
        if with_findings != *dirty {
            problems.push(format!(
                "{rel}: {with_findings} examples with findings, pinned {dirty}"
            ));
        }
    }
    assert_eq!(
        checked,
        (1 << SPOT_CHECKS.len()) - 1,
        "a spot-checked finding is gone"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Whether any schema of the response (all its branches, its items) declares the property
/// named last in `field`: an independent check that `undeclared_response_field` is not a
/// branch the audit failed to pick.
fn declared_anywhere(doc: &Value, operation: &Value, status: u16, field: &str) -> bool {
    fn names(doc: &Value, schema: &Value, name: &str, depth: usize) -> bool {
        let s = deref(doc, schema);
        if depth > 12 {
            return false;
        }
        s.get("properties").and_then(|p| p.get(name)).is_some()
            || ["allOf", "anyOf", "oneOf"].iter().any(|k| {
                s.get(*k)
                    .and_then(Value::as_array)
                    .is_some_and(|bs| bs.iter().any(|b| names(doc, b, name, depth + 1)))
            })
            || s.get("items")
                .is_some_and(|i| names(doc, i, name, depth + 1))
    }
    let name = field.rsplit('/').next().unwrap_or_default();
    let responses = operation["responses"].as_object().unwrap();
    let response = responses
        .get(&status.to_string())
        .or_else(|| responses.get(&format!("{}XX", status / 100)))
        .or_else(|| responses.get("default"))
        .map(|r| deref(doc, r))
        .unwrap();
    response["content"]
        .as_object()
        .into_iter()
        .flatten()
        .any(|(_, m)| m.get("schema").is_some_and(|s| names(doc, s, name, 0)))
}

/// One response that must produce `kind` on `field`, and a twin that must be clean.
pub struct ResponseTwin {
    pub kind: Kind,
    pub field: &'static str,
    pub method: &'static str,
    pub target: &'static str,
    pub bad: Answer,
    pub good: Answer,
}

/// An upstream answer: status, content type, body.
#[derive(Clone)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

pub fn answer(status: u16, content_type: &'static str, body: &Value) -> Answer {
    Answer {
        status,
        content_type,
        body: if body.is_null() {
            String::new()
        } else {
            body.to_string()
        },
    }
}

/// The channel as GET returns it: the PUT body plus its read-only id.
pub fn stored_channel() -> Value {
    let mut c = super::kinds::channel();
    c["id"] = json!(7);
    c
}

fn stored_with(key: &str, value: Value) -> Value {
    let mut c = stored_channel();
    c[key] = value;
    c
}

/// Twins on the bundled Channels spec, for the offline audit here and for the sidecar.
pub fn response_twins() -> Vec<ResponseTwin> {
    let json = "application/json";
    let ok = answer(200, json, &stored_channel());
    vec![
        ResponseTwin {
            kind: Kind::UndeclaredStatus,
            field: "500",
            method: "GET",
            target: "/api/v1/channels/7",
            bad: answer(500, json, &json!({"error": "boom"})),
            good: answer(404, "", &Value::Null),
        },
        ResponseTwin {
            kind: Kind::UndeclaredResponseMediaType,
            field: "content-type",
            method: "GET",
            target: "/api/v1/channels/7",
            bad: Answer {
                status: 200,
                content_type: "text/html",
                body: "<p>channel 7</p>".into(),
            },
            good: ok.clone(),
        },
        ResponseTwin {
            kind: Kind::ResponseSchemaViolation,
            field: "/ffmpegProfileId",
            method: "GET",
            target: "/api/v1/channels/7",
            bad: answer(200, json, &stored_with("ffmpegProfileId", json!("1"))),
            good: ok.clone(),
        },
        ResponseTwin {
            kind: Kind::UndeclaredResponseField,
            field: "/*/legacyFlag",
            method: "GET",
            target: "/api/v1/channels",
            bad: answer(200, json, &json!([stored_with("legacyFlag", json!(true))])),
            good: answer(200, json, &json!([stored_channel()])),
        },
        ResponseTwin {
            kind: Kind::ReplaceWillDropField,
            field: "/legacyFlag",
            method: "GET",
            target: "/api/v1/channels/7",
            bad: answer(200, json, &stored_with("legacyFlag", json!(true))),
            good: ok,
        },
    ]
}

pub fn audit_answer(contract: &Contract, method: &str, target: &str, a: &Answer) -> Vec<Finding> {
    let none: Vec<(String, String)> = Vec::new();
    let request = RequestView::new(method, target, &none, None);
    let op = audit(contract, &request).operation.expect("routed");
    let headers = vec![("content-type".to_string(), a.content_type.to_string())];
    let view = ResponseView {
        status: a.status,
        headers: &headers,
        body: Some(a.body.as_bytes()),
        parsed: None,
    };
    audit_response(contract, op, &view)
}

#[test]
fn every_response_kind_has_a_producing_answer_and_a_clean_twin() {
    let contract = contract(&example("channels.openapi.yaml"));
    let mut problems = Vec::new();
    for t in response_twins() {
        let bad = audit_answer(&contract, t.method, t.target, &t.bad);
        match bad.iter().find(|f| f.kind == t.kind && f.field == t.field) {
            Some(f) if f.blame == Blame::Server => {}
            _ => problems.push(format!(
                "{}: expected on `{}` (blame server), got {bad:#?}",
                t.kind, t.field
            )),
        }
        let good = audit_answer(&contract, t.method, t.target, &t.good);
        if !good.is_empty() {
            problems.push(format!("twin of {} must be clean, got {good:#?}", t.kind));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_replace_hazard_names_both_operations_and_is_reported_once() {
    let contract = contract(&example("channels.openapi.yaml"));
    let hazard = answer(
        200,
        "application/json",
        &stored_with("legacyFlag", json!(true)),
    );
    let once = ReportedOnce::default();
    let mut reported = Vec::new();
    for _ in 0..3 {
        let mut findings = audit_answer(&contract, "GET", "/api/v1/channels/7", &hazard);
        once.retain_new(&mut findings);
        reported.extend(
            findings
                .into_iter()
                .filter(|f| f.kind == Kind::ReplaceWillDropField),
        );
    }
    assert_eq!(reported.len(), 1, "{reported:#?}");
    let f = &reported[0];
    assert_eq!(f.operation.as_deref(), Some("updateChannel"));
    assert_eq!(f.related_operation.as_deref(), Some("getChannel"));
    assert_eq!(f.severity, Severity::Critical);
    assert!(
        f.message.contains("GET /api/v1/channels/{id}")
            && f.message.contains("PUT /api/v1/channels/{id}"),
        "{}",
        f.message
    );
    // The undeclared field itself is reported on every response; only the hazard is once.
    let again = audit_answer(&contract, "GET", "/api/v1/channels/7", &hazard);
    assert!(
        again
            .iter()
            .any(|f| f.kind == Kind::UndeclaredResponseField && f.field == "/legacyFlag")
    );
}

const WRITE_ONLY: &str = r##"
openapi: 3.1.0
info: { title: accounts, version: "1" }
paths:
  /accounts/{id}:
    parameters: [{ name: id, in: path, required: true, schema: { type: integer } }]
    get:
      operationId: getAccount
      responses:
        "200":
          description: The account.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Account" }
    put:
      operationId: putAccount
      requestBody:
        content:
          application/json:
            schema:
              allOf:
                - $ref: "#/components/schemas/Account"
                - properties: { nickname: { type: string } }
      responses:
        "200": { description: Stored. }
        default:
          description: An error.
          content:
            application/problem+json:
              schema: { type: object, properties: { title: { type: string } } }
components:
  schemas:
    Account:
      type: object
      required: [name, password]
      properties:
        name: { type: string }
        password: { type: string, writeOnly: true }
"##;

#[test]
fn write_only_fields_are_never_expected_in_a_response_and_never_returned() {
    let spec = Spec::parse(std::path::Path::new("accounts.yaml"), WRITE_ONLY.as_bytes()).unwrap();
    let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
    let json = "application/json";
    let clean = audit_answer(
        &contract,
        "GET",
        "/accounts/1",
        &answer(200, json, &json!({"name": "a"})),
    );
    assert!(
        clean.is_empty(),
        "a required writeOnly field is not expected: {clean:#?}"
    );
    let leak = audit_answer(
        &contract,
        "GET",
        "/accounts/1",
        &answer(200, json, &json!({"name": "a", "password": "x"})),
    );
    let kinds: Vec<(Kind, &str)> = leak.iter().map(|f| (f.kind, f.field.as_str())).collect();
    assert_eq!(kinds, [(Kind::UndeclaredResponseField, "/password")]);
    assert!(leak[0].message.contains("writeOnly"));
    // `nickname` is undeclared on the GET but the PUT body declares it: no hazard.
    let extra = audit_answer(
        &contract,
        "GET",
        "/accounts/1",
        &answer(200, json, &json!({"name": "a", "nickname": "b"})),
    );
    let kinds: Vec<Kind> = extra.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [Kind::UndeclaredResponseField]);
    // `default` covers any status, with its own media type.
    let problem = answer(
        409,
        "application/problem+json",
        &json!({"title": "conflict"}),
    );
    assert!(audit_answer(&contract, "PUT", "/accounts/1", &problem).is_empty());
    // A response declared without content that carries a body.
    let body = audit_answer(
        &contract,
        "PUT",
        "/accounts/1",
        &answer(200, json, &json!({"name": "a"})),
    );
    assert_eq!(
        body.iter()
            .map(|f| (f.kind, f.expected.as_deref()))
            .collect::<Vec<_>>(),
        [(Kind::UndeclaredResponseMediaType, Some("no body"))]
    );
}

/// Two replace writes that share an `operationId` (invalid, found in real specs): a GET's
/// hazard is judged against the write of its own resource, not the first with that id.
#[test]
fn a_replace_hazard_is_judged_against_its_own_write_when_two_share_an_id() {
    let object = |names: &[&str]| {
        let properties: serde_json::Map<String, Value> = names
            .iter()
            .map(|n| (n.to_string(), json!({"type": "string"})))
            .collect();
        json!({"type": "object", "properties": properties})
    };
    let resource = |read: Value, write: Value| {
        json!({
            "get": {"operationId": "getIt", "responses": {"200": {"description": "ok",
                "content": {"application/json": {"schema": read}}}}},
            "put": {"operationId": "putThing", "requestBody": {"content":
                {"application/json": {"schema": write}}}, "responses": {"200": {"description": "ok"}}}})
    };
    let doc = json!({"openapi": "3.1.0", "info": {"title": "dup", "version": "1"}, "paths": {
        "/a/{id}": resource(object(&["name"]), object(&["name"])),
        "/b/{id}": resource(object(&["name"]), object(&["name", "extra"]))}});
    let spec = Spec::from_document(std::path::Path::new("dup.json"), doc).unwrap();
    let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
    let returns_extra = answer(200, "application/json", &json!({"name": "n", "extra": "x"}));
    let hazards = |target: &str| {
        let found = audit_answer(&contract, "GET", target, &returns_extra);
        let kinds = found.iter().map(|f| (f.kind.as_str(), f.field.clone()));
        kinds.collect::<Vec<_>>()
    };
    // `/b`'s write declares `extra`: only the undeclared field, no hazard.
    assert_eq!(
        hazards("/b/7"),
        [("undeclared_response_field", "/extra".into())]
    );
    // `/a`'s write lacks it: the hazard, naming that write.
    let a = audit_answer(&contract, "GET", "/a/7", &returns_extra);
    let hazard = a
        .iter()
        .find(|f| f.kind == Kind::ReplaceWillDropField)
        .expect("a hazard");
    assert!(hazard.message.contains("PUT /a/{id}"), "{}", hazard.message);
}
