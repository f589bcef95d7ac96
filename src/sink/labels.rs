//! A label whose values come from peers (a host a client asked for, a tool an agent called):
//! the first `limit` values get a series of their own, the rest count as `_other`, and so does
//! a value longer than `MAX_VALUE_BYTES` (20 tool names of 4 MB made every scrape 188 MB), so
//! nothing a peer sends grows the registry, or a scrape, without a bound.

use std::collections::HashSet;
use std::sync::Mutex;

/// The longest value with a series of its own: a DNS name's 253 bytes fit, and an MCP tool
/// name is 128 characters at most by the specification.
pub const MAX_VALUE_BYTES: usize = 256;

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
        if value.len() > MAX_VALUE_BYTES {
            return "_other".to_string();
        }
        let mut named = self.named.lock().unwrap_or_else(|e| e.into_inner());
        match named.contains(value) || named.len() < self.limit && named.insert(value.into()) {
            true => value.to_string(),
            false => "_other".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn past_the_count_or_the_length_a_value_is_other() {
        let label = super::BoundedLabel::new(2);
        let long = "t".repeat(super::MAX_VALUE_BYTES + 1);
        assert_eq!(label.of(&long), "_other");
        assert_eq!(label.of("a"), "a");
        assert_eq!(
            label.of(&"b".repeat(super::MAX_VALUE_BYTES)).len(),
            super::MAX_VALUE_BYTES
        );
        assert_eq!(label.of("c"), "_other");
        assert_eq!(label.of("a"), "a");
    }
}
