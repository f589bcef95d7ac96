//! A request's span after the exit: the response work, which runs after the answer's last
//! byte, adds what it found there as the span's events and ends it. Apart from `trace` so that
//! the response work need not know the request's ledger.

use std::sync::{Arc, Mutex};

use opentelemetry::KeyValue;
use opentelemetry::trace::Span as _;

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
        span.add_event("driftwatch.finding", finding(f, "log"));
    }
    span.set_attribute(KeyValue::new(
        "driftwatch.response_findings",
        findings.len() as i64,
    ));
    span.end();
}

/// A finding as a span event's attributes: where and what, never a value.
pub(super) fn finding(f: &Finding, action: &'static str) -> Vec<KeyValue> {
    vec![
        KeyValue::new("driftwatch.finding.kind", f.kind.as_str()),
        KeyValue::new("driftwatch.finding.severity", f.severity.as_str()),
        KeyValue::new("driftwatch.finding.blame", f.blame.as_str()),
        KeyValue::new("driftwatch.finding.location", f.location.as_str()),
        KeyValue::new("driftwatch.finding.field", f.field.to_string()),
        KeyValue::new("driftwatch.finding.action", action),
    ]
}
