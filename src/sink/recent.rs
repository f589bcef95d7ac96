//! The most recent audit events, kept in memory for `/findings`, so that an operator can see
//! what drifted a minute ago without a log pipeline. Bounded twice: by findings
//! (`admin.recent_findings`) and by the bytes of the events' JSON (`admin.recent_bytes`), so a
//! burst of large events costs the bound, not a gigabyte of `/findings`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::Event;

pub struct Recent {
    max_findings: usize,
    max_bytes: usize,
    ring: Mutex<Ring>,
}

#[derive(Default)]
struct Ring {
    /// Each event with its weight in findings (at least one) and in bytes.
    events: VecDeque<(Arc<Event>, usize, usize)>,
    findings: usize,
    bytes: usize,
}

/// Filters of `/findings?kind=&operation=&since=&limit=`.
#[derive(Debug, Default)]
pub struct RecentQuery {
    pub kind: Option<String>,
    pub operation: Option<String>,
    pub since: Option<SystemTime>,
    pub limit: Option<usize>,
}

impl Recent {
    pub fn new(max_findings: usize, max_bytes: usize) -> Recent {
        Recent {
            max_findings,
            max_bytes,
            ring: Mutex::new(Ring::default()),
        }
    }

    /// Keep `event`, which weighs `bytes`, dropping the oldest until both bounds hold (an event
    /// larger than the whole ring is not kept).
    pub fn push(&self, event: Arc<Event>, bytes: usize) {
        let findings = event.findings.len().max(1);
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        ring.events.push_back((event, findings, bytes));
        ring.findings += findings;
        ring.bytes += bytes;
        while ring.findings > self.max_findings || ring.bytes > self.max_bytes {
            let Some((_, findings, bytes)) = ring.events.pop_front() else {
                break;
            };
            ring.findings -= findings;
            ring.bytes -= bytes;
        }
    }

    /// Matching events, newest first.
    pub fn query(&self, q: &RecentQuery) -> Vec<Arc<Event>> {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        ring.events
            .iter()
            .map(|(event, _, _)| event)
            .rev()
            .filter(|e| {
                q.operation
                    .as_ref()
                    .is_none_or(|op| e.operation.as_deref() == Some(op.as_str()))
            })
            .filter(|e| {
                q.kind
                    .as_ref()
                    .is_none_or(|k| e.findings.iter().any(|f| f.finding.kind.as_str() == k))
            })
            .filter(|e| q.since.is_none_or(|since| e.at >= since))
            .take(q.limit.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }
}
