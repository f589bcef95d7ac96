//! A request's span after the exit: the response work, which runs after the answer's last
//! byte, adds what it found there as the span's events and ends it. Apart from `trace` so that
//! the response work need not know the request's ledger.

use std::sync::{Arc, Mutex};

use crate::finding::Finding;
use crate::telemetry::Span;

/// A request's span between the exit and its response's last byte: the response work adds
/// what it found there.
pub(super) type Slot = Arc<Mutex<Option<Span>>>;

/// What the response work found, as the span's events; then the span ends.
pub(super) fn after_response(slot: Option<&Slot>, findings: &[Finding]) {
    let span = slot.and_then(|s| s.lock().unwrap_or_else(|e| e.into_inner()).take());
    let Some(mut span) = span else { return };
    for f in findings {
        span.event("driftwatch.finding", &finding(f, "log"));
    }
    span.set("driftwatch.response_findings", findings.len() as i64);
    span.end();
}

/// A finding as a span event's attributes: where and what, never a value.
pub(super) fn finding<'f>(f: &'f Finding, action: &'static str) -> [(&'static str, &'f str); 6] {
    [
        ("driftwatch.finding.kind", f.kind.as_str()),
        ("driftwatch.finding.severity", f.severity.as_str()),
        ("driftwatch.finding.blame", f.blame.as_str()),
        ("driftwatch.finding.location", f.location.as_str()),
        ("driftwatch.finding.field", f.field.as_str()),
        ("driftwatch.finding.action", action),
    ]
}
