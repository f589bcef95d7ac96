//! Every real spec in `../shared/specs/` loads and compiles, and every operation is reached
//! through the router by a request built from its own template. Counts are pinned per spec so
//! that a lost operation fails instead of shrinking the loop.

use driftwatch::contract::Route;

use super::util::{contract, shared_spec};

/// (spec, operations). From `../shared/specs/README.md`, checked by counting.
pub const SPECS: &[(&str, usize)] = &[
    ("ersatztv/v1.json", 18),
    ("ersatztv/scripted-schedule.json", 28),
    ("github/api.github.com.json.gz", 1223),
    ("github/ghes-3.17.json.gz", 966),
    ("github/ghes-3.19.json.gz", 1039),
    ("readme/petstore-3.0.json", 20),
    ("readme/petstore-3.1.json", 20),
    ("readme/parameters-style-3.1.json", 25),
    ("readme/schema-types-3.1.json", 23),
    ("scalar/galaxy.json", 9),
];

/// A concrete path for a template: each `{param}` replaced by a plain token; a `?` or `#` part
/// (`/cookies#formExploded`) is not part of the path a client sends.
pub fn concrete(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template.split(['?', '#']).next().unwrap_or(template);
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').expect("balanced template") + open;
        out.push_str("x1");
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

#[test]
fn every_operation_of_every_real_spec_is_routed_to_itself() {
    let mut problems = Vec::new();
    for (rel, expected) in SPECS {
        let contract = contract(&shared_spec(rel));
        if contract.operations().len() != *expected {
            problems.push(format!(
                "{rel}: {} operations, expected {expected}",
                contract.operations().len()
            ));
        }
        for op in contract.operations() {
            match contract.route(&op.method, &concrete(&op.template)) {
                Route::Found { operation, .. } if std::ptr::eq(operation, op) => {}
                // Operations sharing one route: the request is audited against each of them.
                Route::Found { operation, .. }
                    if contract.alternates(operation).any(|o| std::ptr::eq(o, op)) => {}
                Route::Found { operation, .. } => {
                    // A literal segment may legitimately win over a parameter (`/a/{x}` vs `/a/x1`).
                    if !operation.template.contains("x1") {
                        problems.push(format!(
                            "{rel}: {} {} routed to {}",
                            op.method, op.template, operation.id
                        ));
                    }
                }
                other => problems.push(format!(
                    "{rel}: {} {} not routed: {other:?}",
                    op.method, op.template
                )),
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
