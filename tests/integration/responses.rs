//! The response audit: every response kind with an answer that must produce it and a twin that
//! must not, and the real specs' own example responses auditing clean (no false positives).

use driftwatch::audit::audit_response;
use driftwatch::contract::{Contract, ContractOptions, deref};
use std::collections::BTreeMap;

use driftwatch::finding::{Finding, Kind};
use driftwatch::response::ResponseView;
use driftwatch::spec::Spec;
use serde_json::Value;

use super::util::shared_spec;

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
/// kinds tests and by the story tests.
const EXAMPLES: &[(&str, usize, usize, &[(&str, usize)])] = &[
    ("ersatztv/v1.json", 0, 0, &[]),
    ("ersatztv/scripted-schedule.json", 0, 0, &[]),
    (
        "github/api.github.com.json.gz",
        1051,
        236,
        &[
            ("replace_will_drop_field", 1),
            ("response_schema_violation", 519),
            ("undeclared_response_field", 116),
        ],
    ),
    (
        "github/ghes-3.17.json.gz",
        778,
        161,
        &[
            ("response_schema_violation", 343),
            ("undeclared_response_field", 40),
        ],
    ),
    (
        "github/ghes-3.19.json.gz",
        835,
        179,
        &[
            ("response_schema_violation", 365),
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
    // GET returns `visibility`; the PUT that writes the secret has no such body property.
    (
        "github/api.github.com.json.gz",
        "codespaces/create-or-update-repo-secret",
        "replace_will_drop_field",
        "/visibility",
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
