//! No false positives: for every operation of every real spec, build a valid request from the
//! spec alone (examples, defaults, enums, minimal valid values; parameters serialized in their
//! declared style) and audit it. Every one must come back clean, and the number audited is
//! pinned per spec, so a skipped operation fails instead of shrinking the loop.

use driftwatch::audit::audit_request;
use driftwatch::finding::Kind;
use driftwatch::request::RequestView;
use driftwatch::spec::Spec;
use serde_json::Value;

use super::generator::build_all;
use super::real_specs::SPECS;
use super::util::shared_spec;

/// Operations of the real specs for which no valid request exists: their body schema is an
/// `allOf` of a string and an integer (readme's "quirks" examples). For these the audit must
/// report exactly that, and nothing else.
const UNSATISFIABLE: &[(&str, &str, &str)] = &[
    (
        "readme/schema-types-3.1.json",
        "quirks_entirelyIncompatibleAllOf",
        "",
    ),
    (
        "readme/schema-types-3.1.json",
        "quirks_incompatibleNestedAllOf",
        "/incompatible",
    ),
    (
        "readme/schema-types-3.1.json",
        "quirks_partiallyUsableIncompatibleAllOf",
        "",
    ),
];

#[test]
fn a_valid_request_for_every_operation_of_every_real_spec_audits_clean() {
    let mut problems = Vec::new();
    let mut total = 0;
    for (rel, operations) in SPECS {
        let path = shared_spec(rel);
        let spec = Spec::load(&path).unwrap();
        let contract = driftwatch::contract::Contract::compile(&spec, &Default::default()).unwrap();
        // Requests are built from the document as written, not from driftwatch's normalized
        // copy, so a normalization bug cannot hide itself.
        let built = build_all(&raw_document(&path));
        if built.len() != *operations {
            problems.push(format!(
                "{rel}: built {} requests for {operations} operations",
                built.len()
            ));
        }
        for (id, b) in &built {
            let view = RequestView::new(&b.method, &b.target, &b.headers, b.body.as_deref());
            let findings = audit_request(&contract, &view);
            if let Some((_, _, field)) =
                UNSATISFIABLE.iter().find(|(r, op, _)| r == rel && op == id)
            {
                let got: Vec<(Kind, &str)> = findings
                    .iter()
                    .map(|f| (f.kind, f.field.as_str()))
                    .collect();
                if got != [(Kind::BodyTypeMismatch, *field)] {
                    problems.push(format!("{rel} {id}: unsatisfiable body should give one body_type_mismatch at `{field}`, got {got:?}"));
                }
                continue;
            }
            let unexpected: Vec<_> = findings
                .iter()
                .filter(|f| !(b.opaque_body && f.kind == Kind::Unaudited))
                .collect();
            if !unexpected.is_empty() {
                let body = b
                    .body
                    .as_deref()
                    .map(String::from_utf8_lossy)
                    .unwrap_or_default();
                problems.push(format!(
                    "{rel} {id}: {} {}\n  body {body:.300}\n  {unexpected:?}",
                    b.method, b.target
                ));
            }
        }
        total += built.len();
    }
    assert!(
        problems.is_empty(),
        "{} false positives:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert_eq!(total, SPECS.iter().map(|(_, n)| n).sum::<usize>());
    assert_eq!(total, 3371);
}

fn raw_document(path: &std::path::Path) -> Value {
    let bytes = std::fs::read(path).unwrap();
    if path.extension().is_some_and(|e| e == "gz") {
        serde_json::from_reader(flate2::read::GzDecoder::new(&bytes[..])).unwrap()
    } else {
        serde_json::from_slice(&bytes).unwrap()
    }
}
