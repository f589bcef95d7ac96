//! A label whose values come from peers (a host a client asked for, a tool an agent called):
//! the first `limit` values get a series of their own, the rest count as `_other`, so nothing
//! a peer sends grows the registry without a bound.

use std::collections::HashSet;
use std::sync::Mutex;

pub struct BoundedLabel {
    named: Mutex<HashSet<String>>,
    limit: usize,
}

impl BoundedLabel {
    pub fn new(limit: usize) -> BoundedLabel {
        BoundedLabel {
            named: Mutex::default(),
            limit,
        }
    }

    /// `value` if it has (or now gets) a series of its own, else `_other`.
    pub fn of(&self, value: &str) -> String {
        let mut named = self.named.lock().unwrap_or_else(|e| e.into_inner());
        match named.contains(value) || named.len() < self.limit && named.insert(value.into()) {
            true => value.to_string(),
            false => "_other".to_string(),
        }
    }
}
