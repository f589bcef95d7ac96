//! The most recent audit events, kept in memory for `/findings`, so that an operator can see
//! what drifted a minute ago without a log pipeline.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::Event;

pub struct Recent {
    capacity: usize,
    events: Mutex<VecDeque<Arc<Event>>>,
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
    pub fn new(capacity: usize) -> Recent {
        Recent {
            capacity,
            events: Mutex::new(VecDeque::with_capacity(capacity.min(4096))),
        }
    }

    pub fn push(&self, event: Arc<Event>) {
        if self.capacity == 0 {
            return;
        }
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if events.len() == self.capacity {
            events.pop_front();
        }
        events.push_back(event);
    }

    /// Matching events, newest first.
    pub fn query(&self, q: &RecentQuery) -> Vec<Arc<Event>> {
        let events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        events
            .iter()
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
