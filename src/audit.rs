//! Checking one request, or its response, against the contract. Pure: no I/O, no clock, no globals, so the proxy
//! and the offline checker share it and tests call it directly. One file per check family.

mod body;
mod coerce;
mod params;
mod response;
mod suggest;

pub use response::{ReportedOnce, audit_response};
pub use suggest::did_you_mean;

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
}

/// Audit `request` against `contract`; every finding carries the operation id.
pub fn audit<'c, 'p>(contract: &'c Contract, request: &RequestView<'p>) -> Audit<'c, 'p> {
    let mut findings = Vec::new();
    match contract.route(request.method, request.path) {
        Route::Found {
            operation,
            path_values,
        } => {
            let (mut operation, found) = best_fit(contract, operation, request, &path_values);
            findings = found;
            let mut path_values = path_values;
            // Refused where it was routed: another template the path fits may declare what
            // the request sends (`/sites/{id}/zones/count` is `/sites/{id}/{kind}/count` too).
            if weight(&findings).0 >= Some(crate::finding::Severity::Error) {
                for (other, values) in
                    contract.also_matching(request.method, request.path, operation)
                {
                    let theirs = check_operation(other, request, &values);
                    if weight(&theirs) < weight(&findings) {
                        (operation, findings, path_values) = (other, theirs, values);
                    }
                }
            }
            Audit {
                operation: Some(operation),
                path_values,
                findings,
            }
        }
        Route::MethodNotAllowed { allowed } => {
            let allowed = allowed.join(", ");
            findings.push(
                Finding::new(Kind::MethodNotAllowed, Location::Path, request.path)
                    .expected(allowed.clone())
                    .observed(request.method.to_ascii_uppercase())
                    .message(format!(
                        "{} is not declared for {}; the spec allows {allowed}",
                        request.method.to_ascii_uppercase(),
                        request.path
                    )),
            );
            Audit {
                operation: None,
                path_values: Vec::new(),
                findings,
            }
        }
        Route::NotFound => {
            findings.push(
                Finding::new(Kind::UnknownOperation, Location::Path, request.path)
                    .observed(format!(
                        "{} {}",
                        request.method.to_ascii_uppercase(),
                        request.path
                    ))
                    .message(format!(
                        "no operation in the spec matches {} {}",
                        request.method.to_ascii_uppercase(),
                        request.path
                    )),
            );
            Audit {
                operation: None,
                path_values: Vec::new(),
                findings,
            }
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
) -> (&'c Operation, Vec<Finding>) {
    if op.alternates.is_empty() {
        return (op, check_operation(op, request, path_values));
    }
    let all: Vec<&Operation> = std::iter::once(op).chain(contract.alternates(op)).collect();
    let keyed: Vec<&Operation> = all
        .iter()
        .copied()
        .filter(|o| carries_keys(o, request))
        .collect();
    let pool = if keyed.is_empty() { all } else { keyed };
    let mut best: Option<(&Operation, Vec<Finding>)> = None;
    for candidate in pool {
        let findings = check_operation(candidate, request, path_values);
        let better = best
            .as_ref()
            .is_none_or(|(_, b)| weight(&findings) < weight(b));
        if better {
            let clean = findings.is_empty();
            best = Some((candidate, findings));
            if clean {
                break;
            }
        }
    }
    best.unwrap_or_else(|| (op, Vec::new()))
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

fn check_operation(op: &Operation, request: &RequestView, path_values: &[&str]) -> Vec<Finding> {
    let mut findings = Vec::new();
    params::check(op, request, path_values, &mut findings);
    body::check(op, request, &mut findings);
    for finding in &mut findings {
        finding.operation = Some(op.id.clone());
    }
    findings
}

/// How bad a set of findings is: the worst severity first, then how many.
fn weight(findings: &[Finding]) -> (Option<crate::finding::Severity>, usize) {
    (findings.iter().map(|f| f.severity).max(), findings.len())
}

/// The findings of [`audit`] alone.
pub fn audit_request(contract: &Contract, request: &RequestView) -> Vec<Finding> {
    audit(contract, request).findings
}
