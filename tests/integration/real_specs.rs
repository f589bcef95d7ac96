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

static NO_HEADERS: Vec<(String, String)> = Vec::new();

/// GitHub's `x-multi-segment` parameters take a value holding `/`: every such operation is
/// routed to itself with `x1/y1/z1` there, as the GitHub MCP server's nested file paths and
/// branch refs are; a plain parameter holding `/` is `slash_in_path_value` naming its template.
#[test]
fn github_multi_segment_values_are_routed_and_a_plain_one_is_named() {
    let contract = contract(&shared_spec("github/api.github.com.json.gz"));
    let mut spanning = 0;
    let mut problems = Vec::new();
    for op in contract.operations() {
        let Some(param) = op
            .params
            .iter()
            .find(|p| p.spans_segments && op.template.contains(&format!("/{{{}}}", p.name)))
        else {
            continue;
        };
        spanning += 1;
        let template = op
            .template
            .replace(&format!("{{{}}}", param.name), "x1/y1/z1");
        let path = concrete(&template);
        match contract.route(&op.method, &path) {
            Route::Found {
                operation,
                path_values,
            } if std::ptr::eq(operation, op) => {
                let at = op
                    .path_params
                    .iter()
                    .position(|p| *p == param.name)
                    .unwrap();
                if path_values[at] != "x1/y1/z1" {
                    problems.push(format!("{path}: {} = {}", param.name, path_values[at]));
                }
            }
            other => problems.push(format!("{} {path}: {other:?}", op.method)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // 68 operations carry the marker; on two it is a query parameter (`rule-suites?ref=`).
    assert_eq!(
        spanning, 66,
        "operations with a multi-segment path parameter"
    );
    let routed = |method, path| match contract.route(method, path) {
        Route::Found { operation, .. } => operation.id.clone(),
        other => format!("{other:?}"),
    };
    assert_eq!(
        routed("GET", "/repos/o/r/contents/docs/README.md"),
        "repos/get-content"
    );
    assert_eq!(
        routed("PUT", "/repos/o/r/contents/docs/README.md"),
        "repos/create-or-update-file-contents"
    );
    assert_eq!(
        routed("GET", "/repos/o/r/git/ref/heads/main"),
        "git/get-ref"
    );
    // GitHub documents `git/ref/{ref}` for a GET; `git/refs/{ref}` has only PATCH and DELETE.
    assert!(routed("GET", "/repos/o/r/git/refs/heads/main").starts_with("MethodNotAllowed"));
    // A label name is a plain parameter: a `/` in it routes nowhere, and is said so.
    let label =
        driftwatch::request::RequestView::new("GET", "/repos/o/r/labels/a/b", &NO_HEADERS, None);
    let findings = driftwatch::audit::audit_request(&contract, &label);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].kind.as_str(), "slash_in_path_value");
    assert_eq!(findings[0].field, "name");
    assert_eq!(
        findings[0].expected.as_deref(),
        Some("GET /repos/{owner}/{repo}/labels/{name}")
    );
    // Issue 50: where the spec goes on past the parameter (`.../secrets/{secret_name}/repositories`),
    // a segment after it names an endpoint GitHub lacks: `unknown_operation`, naming the nearest.
    let stop = driftwatch::request::RequestView::new(
        "GET",
        "/orgs/o/actions/secrets/S/stop",
        &NO_HEADERS,
        None,
    );
    let findings = driftwatch::audit::audit_request(&contract, &stop);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].kind.as_str(), "unknown_operation");
    assert!(
        findings[0].message.contains("; nearest: "),
        "{}",
        findings[0].message
    );
}

/// The GitHub MCP server's `create_repository` sends `autoInit`: the API ignores it and never
/// creates the README. An error naming `auto_init`; `fork_repository`'s `?organization=` too.
#[test]
fn github_mcp_servers_renamed_fields_are_errors() {
    let contract = contract(&shared_spec("github/api.github.com.json.gz"));
    let headers = vec![("content-type".to_string(), "application/json".to_string())];
    let body = br#"{"name": "demo", "private": false, "autoInit": true}"#;
    let view = driftwatch::request::RequestView::new("POST", "/user/repos", &headers, Some(body));
    let findings = driftwatch::audit::audit_request(&contract, &view);
    assert_eq!(findings.len(), 1, "{findings:?}");
    let f = &findings[0];
    assert_eq!(
        (f.kind.as_str(), f.field.as_str(), f.suggestion.as_deref()),
        ("undeclared_body_field", "/autoInit", Some("auto_init"))
    );
    assert_eq!(f.severity.as_str(), "error");
    // The near twin: GitHub's own example of the bulk-list body sends `predicateType` where
    // its schema says `predicate_type`; the spec names the field both ways, so a warning.
    let body = br#"{"subject_digests": ["sha256:abc123"], "predicateType": "provenance"}"#;
    let path = "/orgs/o/attestations/bulk-list";
    let view = driftwatch::request::RequestView::new("POST", path, &headers, Some(body));
    let findings = driftwatch::audit::audit_request(&contract, &view);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(
        (findings[0].kind.as_str(), findings[0].severity.as_str()),
        ("undeclared_body_field", "warning")
    );
    let view = driftwatch::request::RequestView::new(
        "POST",
        "/repos/o/r/forks?organization=acme",
        &headers,
        Some(b"{}"),
    );
    let findings = driftwatch::audit::audit_request(&contract, &view);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(
        (findings[0].kind.as_str(), findings[0].severity.as_str()),
        ("unknown_query_param", "error")
    );
}

/// The near twin: an integer path value cannot hold `/`, so a deeper path under it is an
/// endpoint the spec lacks, still `unknown_operation`.
#[test]
fn an_integer_path_value_with_a_slash_is_an_unknown_operation() {
    let contract = contract(&super::util::example("channels.openapi.yaml"));
    let view = driftwatch::request::RequestView::new(
        "GET",
        "/api/v1/schedules/7/settings",
        &NO_HEADERS,
        None,
    );
    let findings = driftwatch::audit::audit_request(&contract, &view);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].kind.as_str(), "unknown_operation");
}
