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
            let mut operation = operation;
            findings = check_operation(operation, request, &path_values);
            // Operations sharing this route (an ambiguous spec): the one the request fits best.
            for other in contract.alternates(operation) {
                if findings.is_empty() {
                    break;
                }
                let theirs = check_operation(other, request, &path_values);
                if weight(&theirs) < weight(&findings) {
                    (operation, findings) = (other, theirs);
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
