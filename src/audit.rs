//! Checking one request, or its response, against the contract. Pure: no I/O, no clock, no globals, so the proxy
//! and the offline checker share it and tests call it directly. One file per check family.

mod body;
mod bounded;
mod branches;
pub(crate) mod coerce;
mod credentials;
mod members;
mod params;
mod response;
mod suggest;

pub use body::SentProperties;
pub use credentials::missing_credentials;
pub use response::{ReportedOnce, audit_response};
pub use suggest::did_you_mean;

use bounded::Findings;

use crate::contract::{Contract, Operation, Route};
use crate::finding::{Finding, Kind, Location};
use crate::request::RequestView;

/// The result of auditing one request: the operation it matched (if any), the raw path
/// parameter values it was routed with, and what was found.
#[derive(Debug)]
pub struct Audit<'c, 'p> {
    pub operation: Option<&'c Operation>,
    pub path_values: Vec<&'p str>,
    pub findings: Vec<Finding>,
    /// More than `audit.max_findings` were found: the last finding says so, the rest are left
    /// out.
    pub truncated: bool,
    /// The operation's top-level body properties the body sent, where the audit read them.
    pub sent_properties: Option<SentProperties>,
}

/// One operation's check of a request: its findings, and the body properties it saw sent.
struct Checked {
    findings: Findings,
    sent: Option<SentProperties>,
}

/// Audit `request` against `contract`; every finding carries the operation id. A request
/// outside every base path of the API that no template fits is not the API's: no finding.
pub fn audit<'c, 'p>(contract: &'c Contract, request: &RequestView<'p>) -> Audit<'c, 'p> {
    let finding = match contract.route(request.method, request.path) {
        Route::Found {
            operation,
            path_values,
        } => return audit_routed(contract, request, operation, path_values),
        Route::MethodNotAllowed { allowed } => {
            let allowed = allowed.join(", ");
            let method = request.method.to_ascii_uppercase();
            let path = contract.path_shape(request.path);
            Some(
                Finding::new(Kind::MethodNotAllowed, Location::Path, &path)
                    .expected(allowed.clone())
                    .observed(method.clone())
                    .message(format!(
                        "{method} is not declared for {path}; the spec allows {allowed}"
                    )),
            )
        }
        Route::NotFound => Some(unrouted(contract, request)),
        Route::OutsideBasePath => None,
    };
    Audit {
        operation: None,
        path_values: Vec::new(),
        findings: finding.map(bounded::cut_text).into_iter().collect(),
        truncated: false,
        sent_properties: None,
    }
}

/// The audit of a request routed to `operation`, or to another template its path fits where
/// that one declares what the request sends.
fn audit_routed<'c, 'p>(
    contract: &'c Contract,
    request: &RequestView<'p>,
    operation: &'c Operation,
    path_values: Vec<&'p str>,
) -> Audit<'c, 'p> {
    let (mut operation, mut checked) = best_fit(contract, operation, request, &path_values);
    let mut path_values = path_values;
    // Refused where it was routed: another template the path fits may declare what the
    // request sends (`/sites/{id}/zones/count` is `/sites/{id}/{kind}/count` too).
    if weight(&checked.findings).0 >= Some(crate::finding::Severity::Error) {
        for (other, values) in contract.also_matching(request.method, request.path, operation) {
            let theirs = check_operation(contract, other, request, &values);
            if weight(&theirs.findings) < weight(&checked.findings) {
                (operation, checked, path_values) = (other, theirs, values);
            }
        }
    }
    let Checked { findings, sent } = checked;
    let truncated = findings.more();
    let mut findings = findings.into_vec();
    if truncated {
        findings.push(left_out(operation, contract.max_findings));
    }
    Audit {
        operation: Some(operation),
        path_values,
        findings,
        truncated,
        sent_properties: sent,
    }
}

/// The finding for a request no template fits: `slash_in_path_value` where one would if a
/// value could hold the `/` it sends, else `unknown_operation`.
fn unrouted(contract: &Contract, request: &RequestView) -> Finding {
    let method = request.method.to_ascii_uppercase();
    match contract.fits_with_slash(&method, request.path) {
        Some((op, param, _)) => {
            let path = contract.path_shape(request.path);
            let mut finding = Finding::new(Kind::SlashInPathValue, Location::Path, param)
                .expected(format!("{method} {}", op.template))
                .observed(format!("{method} {path}"))
                .message(format!(
                    "{method} {path} fits {method} {} only if `{param}` holds a `/`, which the \
                     spec does not allow there: send it escaped as %2F",
                    op.template
                ));
            finding.operation = Some(op.id.as_str().into());
            finding
        }
        None => unknown_operation(contract, &method, request.path),
    }
}

/// `unknown_operation` for `path`, naming the templates it comes nearest to (as the unrouted
/// warning does), so the endpoint meant can be told without the path's values.
pub fn unknown_operation(contract: &Contract, method: &str, path: &str) -> Finding {
    let shape = contract.path_shape(path);
    let nearest = contract.nearest_templates(path, 3);
    let hint = match nearest.is_empty() {
        true => String::new(),
        false => format!("; nearest: {}", nearest.join(", ")),
    };
    Finding::new(Kind::UnknownOperation, Location::Path, &shape)
        .observed(format!("{method} {shape}"))
        .message(format!(
            "no operation in the spec matches {method} {shape}{hint}"
        ))
}

/// Under `driftwatch wrap`, with the arguments of the call that made the request: a
/// `slash_in_path_value` stands only where one of them holds the value, slash kept (a branch
/// `feature/login`). Where none does, the path names an endpoint the spec lacks
/// (`.../attachments/{id}/download/{name}`), and telling the agent to escape a `/` would be
/// wrong advice: it is `unknown_operation`.
pub fn confirm_slashes(
    contract: &Contract,
    method: &str,
    path: &str,
    arguments: &[(String, serde_json::Value)],
    findings: &mut [Finding],
) {
    for f in findings
        .iter_mut()
        .filter(|f| f.kind == Kind::SlashInPathValue)
    {
        let Some((_, _, value)) = contract.fits_with_slash(method, path) else {
            continue;
        };
        let value = percent_encoding::percent_decode_str(value).decode_utf8_lossy();
        let held = arguments
            .iter()
            .any(|(_, v)| v.as_str() == Some(value.as_ref()));
        if !held {
            *f = unknown_operation(contract, &method.to_ascii_uppercase(), path);
        }
    }
}

/// Among the operations sharing a route (AWS's `/#X-Amz-Target=...`, or an ambiguous spec),
/// those whose route keys the request carries, then the one it fits best; else `op` alone.
fn best_fit<'c>(
    contract: &'c Contract,
    op: &'c Operation,
    request: &RequestView,
    path_values: &[&str],
) -> (&'c Operation, Checked) {
    if op.alternates.is_empty() {
        return (op, check_operation(contract, op, request, path_values));
    }
    let all: Vec<&Operation> = std::iter::once(op).chain(contract.alternates(op)).collect();
    let keyed: Vec<&Operation> = all
        .iter()
        .copied()
        .filter(|o| carries_keys(o, request))
        .collect();
    let pool = if keyed.is_empty() { all } else { keyed };
    let mut best: Option<(&Operation, Checked)> = None;
    for candidate in pool {
        let checked = check_operation(contract, candidate, request, path_values);
        let better = best
            .as_ref()
            .is_none_or(|(_, b)| distance(&checked.findings) < distance(&b.findings));
        if better {
            let clean = checked.findings.is_empty();
            best = Some((candidate, checked));
            if clean {
                break;
            }
        }
    }
    best.unwrap_or_else(|| {
        let findings = Findings::new(contract.max_findings);
        (
            op,
            Checked {
                findings,
                sent: None,
            },
        )
    })
}

/// The request carries every key the operation's template fixes, in its query or as a header
/// (`X-Amz-Target: Svc.Op`).
fn carries_keys(op: &Operation, request: &RequestView) -> bool {
    let query = request.query.unwrap_or("");
    !op.route_keys.is_empty()
        && op.route_keys.iter().all(|key| {
            let in_query = form_urlencoded::parse(query.as_bytes())
                .any(|(k, v)| k == key.name && key.value.as_deref().is_none_or(|want| v == want));
            let header = request.headers.get(&key.name.to_ascii_lowercase());
            let in_header =
                header.is_some_and(|h| key.value.as_deref().is_none_or(|want| h == want));
            in_query || in_header
        })
}

fn check_operation(
    contract: &Contract,
    op: &Operation,
    request: &RequestView,
    path_values: &[&str],
) -> Checked {
    let mut findings = Findings::new(contract.max_findings);
    params::check(op, request, path_values, &mut findings);
    let sent = body::check(op, request, &mut findings);
    credentials::check(op, request, &mut findings);
    for finding in findings.iter_mut() {
        finding.operation = Some(op.id.as_str().into());
    }
    Checked { findings, sent }
}

/// The last finding of a request with more than `limit`: the rest are not listed.
fn left_out(op: &Operation, limit: usize) -> Finding {
    let mut f = Finding::new(Kind::Unaudited, Location::Body, "")
        .observed("findings left out")
        .message(format!(
            "more than {limit} findings: the rest are not listed (audit.max_findings)"
        ));
    f.operation = Some(op.id.as_str().into());
    f
}

/// How bad a set of findings is: the worst severity first, then how many.
fn weight(findings: &[Finding]) -> (Option<crate::finding::Severity>, usize) {
    (findings.iter().map(|f| f.severity).max(), findings.len())
}

/// How far a request is from one of a route's alternatives: first the body fields it sends
/// that the alternative does not declare (a body shaped for another one: Box's
/// `PUT /folders/{folder_id}#add_shared_link` takes `shared_link` alone beside the folder's
/// own PUT), then the worst finding and how many. So a body that fits none is told against
/// the one whose fields it sends, and its retyped field is said.
fn distance(findings: &[Finding]) -> (usize, Option<crate::finding::Severity>, usize) {
    let undeclared = (findings.iter())
        .filter(|f| f.kind == crate::finding::Kind::UndeclaredBodyField)
        .count();
    let (worst, count) = weight(findings);
    (undeclared, worst, count)
}

/// The findings of [`audit`] alone.
pub fn audit_request(contract: &Contract, request: &RequestView) -> Vec<Finding> {
    audit(contract, request).findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ContractOptions;
    use crate::spec::Spec;
    use serde_json::json;

    fn compile(doc: serde_json::Value) -> Contract {
        let spec = Spec::from_document(std::path::Path::new("t.json"), doc).unwrap();
        Contract::compile(&spec, &ContractOptions::default()).unwrap()
    }

    /// The operation a request was audited against, and its findings as `operation kind field`.
    fn audited(contract: &Contract, method: &str, target: &str) -> (Option<String>, Vec<String>) {
        let headers: Vec<(String, String)> = Vec::new();
        let view = RequestView::new(method, target, &headers, None);
        let a = audit(contract, &view);
        let findings = a.findings.iter().map(|f| {
            let op = f.operation.as_deref().unwrap_or("-");
            format!("{op} {} {}", f.kind.as_str(), f.field)
        });
        (a.operation.map(|op| op.id.clone()), findings.collect())
    }

    /// Issue 66: Mastodon's `GET /api/v1/accounts/relationships` refuses `id[]=1` (it reads
    /// `id`), and `/api/v1/accounts/{id}` takes the path with only `id[]` unknown: the request
    /// was audited against the template, and enforce refused citing it. The concrete path
    /// beats its templated sibling whatever the query carries.
    #[test]
    fn a_request_the_concrete_path_refuses_is_never_audited_against_its_templated_sibling() {
        let string = json!({"type": "string"});
        let c = compile(json!({"openapi": "3.1.0", "paths": {
            "/api/v1/accounts/relationships": {"get": {"operationId": "getRelationships",
                "responses": {}, "parameters": [{"name": "id", "in": "query", "required": true,
                    "schema": {"type": "array", "items": string}}]}},
            "/api/v1/accounts/{id}": {"get": {"operationId": "getAccount", "responses": {},
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": string}]}},
            "/sites/{site}/zones/{zone}": {"get": {"operationId": "getZone", "responses": {}}},
            "/sites/{site}/{kind}/count": {"get": {"operationId": "countZones", "responses": {},
                "parameters": [{"name": "distinct", "in": "query", "schema": string}]}}}}));
        let (op, findings) = audited(&c, "GET", "/api/v1/accounts/relationships?id[]=1");
        assert_eq!(op.as_deref(), Some("getRelationships"), "{findings:?}");
        assert_eq!(
            findings,
            [
                "getRelationships unknown_query_param id[]",
                "getRelationships missing_required_param id"
            ]
        );
        assert_eq!(
            audited(&c, "GET", "/api/v1/accounts/relationships?id=1"),
            (Some("getRelationships".into()), vec![])
        );
        // The near twin: neither template is the more concrete, so the one the request fits
        // is still tried.
        assert_eq!(
            audited(&c, "GET", "/sites/s/zones/count?distinct=scope"),
            (Some("countZones".into()), vec![])
        );
    }

    /// Issue 66: an unknown query parameter says the JSON type its values read as (a type,
    /// never a value), so that `overlay propose` declares a tool's boolean as `boolean`.
    #[test]
    fn an_unknown_query_parameter_says_the_type_it_was_sent_as() {
        let c = compile(json!({"openapi": "3.1.0", "paths": {
            "/users": {"get": {"operationId": "listUsers", "responses": {}}}}}));
        let sent = |target: &str| {
            let headers: Vec<(String, String)> = Vec::new();
            let view = RequestView::new("GET", target, &headers, None);
            let a = audit(&c, &view);
            let each = a.findings.iter();
            each.map(|f| format!("{} {}", f.field, f.observed.as_deref().unwrap_or("-")))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            sent("/users?brief=true&first=0&max=20&q=alice&ratio=0.5&x=true&x=1&e="),
            [
                "brief boolean",
                "first integer",
                "max integer",
                "q string",
                "ratio number",
                "x string",
                "e string"
            ]
        );
    }

    /// Issue 66: Keycloak's spec is based at `/admin/realms`; every call of a server starts with
    /// a token from `POST /realms/{realm}/protocol/openid-connect/token` on the same host,
    /// which was `unknown_operation`, so enforce refused every call. Outside every base path
    /// and routing nowhere whole, it is not the API's request: no finding.
    #[test]
    fn a_request_outside_every_base_path_that_routes_nowhere_is_not_the_apis() {
        let users = json!({"get": {"operationId": "getUsers", "responses": {}}});
        let keycloak = |servers: serde_json::Value| {
            compile(json!({"openapi": "3.1.0", "servers": servers,
                "paths": {"/{realm}/users": users.clone()}}))
        };
        let token = "/realms/master/protocol/openid-connect/token";
        let based = keycloak(json!([{"url": "https://kc.example/admin/realms"}]));
        assert_eq!(audited(&based, "POST", token), (None, vec![]));
        assert!(matches!(based.route("POST", token), Route::OutsideBasePath));
        assert_eq!(
            audited(&based, "GET", "/admin/realms/master/users"),
            (Some("getUsers".into()), vec![])
        );
        // Under the base path, a path no template fits is still an unknown operation; outside
        // it, one that fits whole is still routed (a client that leaves the base path out),
        // and a known path with another method is still `method_not_allowed`.
        let unknown = "- unknown_operation /admin/realms/*/groups";
        assert_eq!(
            audited(&based, "GET", "/admin/realms/master/groups"),
            (None, vec![unknown.to_string()])
        );
        assert_eq!(
            audited(&based, "GET", "/master/users").0.as_deref(),
            Some("getUsers")
        );
        let (_, findings) = audited(&based, "DELETE", "/master/users");
        assert_eq!(findings, ["- method_not_allowed /*/users"]);
        // No base path, or one server at the host's root: every path is the API's.
        for servers in [
            json!([]),
            json!([{"url": "https://kc.example/admin/realms"}, {"url": "https://kc.example"}]),
        ] {
            let (op, findings) = audited(&keycloak(servers.clone()), "POST", token);
            assert_eq!(op, None);
            assert_eq!(findings.len(), 1, "{servers}: {findings:?}");
            assert!(
                findings[0].starts_with("- unknown_operation "),
                "{findings:?}"
            );
        }
    }

    /// Issue 50: under wrap, a `/` in the path is a value's only where the call's own argument
    /// holds it; else the path names an endpoint the spec lacks.
    #[test]
    fn a_slash_is_a_values_only_where_the_calls_argument_holds_it() {
        let doc = json!({"openapi": "3.1.0", "paths": {
            "/cards/{idCard}/attachments/{idAttachment}": {"get": {"operationId": "getAttachment",
                "responses": {"200": {"description": "ok"}}}}}});
        let spec = Spec::from_document(std::path::Path::new("t.json"), doc).unwrap();
        let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
        let path = "/cards/c1/attachments/a7/download/report.pdf";
        let findings = |arguments: serde_json::Value| {
            let headers: Vec<(String, String)> = Vec::new();
            let view = RequestView::new("GET", path, &headers, None);
            let mut found = audit(&contract, &view).findings;
            assert_eq!(found[0].kind, Kind::SlashInPathValue, "{found:?}");
            let arguments: Vec<(String, serde_json::Value)> = arguments
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            confirm_slashes(&contract, "GET", path, &arguments, &mut found);
            found
        };
        let unknown =
            findings(json!({"cardId": "c1", "attachmentId": "a7", "fileName": "report.pdf"}));
        assert_eq!(unknown[0].kind, Kind::UnknownOperation);
        // Past the template's end nothing is known of a segment: all masked.
        assert_eq!(unknown[0].field, "/cards/*/attachments/*/*/*");
        let held = findings(json!({"cardId": "c1", "attachment": "a7/download/report.pdf"}));
        assert_eq!(held[0].kind, Kind::SlashInPathValue);
    }
}
