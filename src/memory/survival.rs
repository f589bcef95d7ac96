//! What replace writes' own answers taught about each operation: the fields an answer showed
//! still holding a value after the write had omitted them (the API keeps or computes them), and
//! whether an answer ever showed an omitted field emptied. Many real specs mark no field the API
//! computes (`id`, `created_on`, `links`, counters) `readOnly`, and some PUTs keep what they are
//! not sent: the answer is the evidence, and a field learned to survive is no longer at risk,
//! before the next write is sent (enforce mode) as after it.
//!
//! Bounded by the spec: a field is learned only from an `omitted_on_replace` finding, so only
//! declared properties of replace writes are ever kept; the caps below hold whatever the spec.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Operations learned about, at most.
const MAX_OPERATIONS: usize = 4096;
/// Fields kept per operation, at most.
const MAX_FIELDS: usize = super::MAX_FIELDS;

/// What one operation's answers showed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Learned {
    /// Fields an answer showed holding a value after the write omitted them.
    pub kept: BTreeSet<String>,
    /// An answer (or the next GET) showed a field the write omitted emptied.
    pub erased: bool,
}

impl Learned {
    /// Every omitted field an answer showed survived, and none was ever erased: the operation
    /// behaves as a merge, whatever its spec says.
    pub fn reads_as_merge(&self) -> bool {
        !self.kept.is_empty() && !self.erased
    }

    /// How the write is read now: `merge`, or still `replace`.
    pub fn reading(&self) -> &'static str {
        match self.reads_as_merge() {
            true => "merge",
            false => "replace",
        }
    }

    /// Why, in words (`serve`'s `/spec`, `check --writes`).
    pub fn why(&self) -> String {
        let kept: Vec<&str> = self.kept.iter().map(String::as_str).collect();
        match (self.reads_as_merge(), kept.is_empty()) {
            (true, _) => format!(
                "its answers kept every omitted field that held a value ({}), and none was emptied",
                kept.join(", ")
            ),
            (false, true) => "an answer showed a field it omitted emptied".to_string(),
            (false, false) => format!(
                "an answer showed a field it omitted emptied; not at risk, as its answers kept them: {}",
                kept.join(", ")
            ),
        }
    }
}

/// What one write's answer taught of its operation (named as [`name`] names it): fields it
/// showed kept, fields it showed emptied. What a store shared by replicas is given, and gives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lesson {
    pub operation: String,
    pub kept: Vec<String>,
    pub erased: Vec<String>,
}

/// Per operation (named by its API and label, `"PUT /pulls/{id}"`), what its answers showed.
#[derive(Default)]
pub struct Survival {
    ops: Mutex<HashMap<String, Learned>>,
    /// Bumped by each lesson that changed something: what reads the lessons (the live catalog
    /// check) knows when to read them again.
    generation: AtomicU64,
}

impl Survival {
    /// Learn from one answer (this replica's, or another's from a shared store): fields it
    /// showed holding a value, fields it showed emptied (an erased field is never again
    /// counted as kept). Whether anything new was learned.
    pub fn learn(&self, lesson: &Lesson) -> bool {
        if lesson.kept.is_empty() && lesson.erased.is_empty() {
            return false;
        }
        let mut ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        if !ops.contains_key(&lesson.operation) && ops.len() >= MAX_OPERATIONS {
            return false;
        }
        let learned = ops.entry(lesson.operation.clone()).or_default();
        let before = learned.clone();
        for field in &lesson.erased {
            learned.kept.remove(field);
            learned.erased = true;
        }
        for field in lesson.kept.iter().filter(|f| !lesson.erased.contains(f)) {
            if learned.kept.len() < MAX_FIELDS {
                learned.kept.insert(field.clone());
            }
        }
        let changed = *learned != before;
        if changed {
            self.generation.fetch_add(1, Ordering::Relaxed);
        }
        changed
    }

    /// How many lessons changed something so far.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// What `op`'s answers showed, if any were read.
    pub fn of(&self, op: &str) -> Option<Learned> {
        let ops = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        ops.get(op).cloned()
    }
}

/// The name an operation's learning is kept under: its API (empty for a sidecar of one API, or
/// `check`) and its method and template, one per operation where ids may repeat.
pub fn name(api: &str, op: &crate::contract::Operation) -> String {
    format!("{api}\u{1f}{} {}", op.method, op.template)
}

/// The replace writes of `contract` whose answers taught something, with what.
pub fn taught<'c>(
    contract: &'c crate::contract::Contract,
    survival: &Survival,
    api: &str,
) -> Vec<(&'c crate::contract::Operation, Learned)> {
    use crate::contract::WriteSemantics;
    contract
        .operations()
        .iter()
        .filter(|op| op.write == WriteSemantics::Replace)
        .filter_map(|op| Some((op, survival.of(&name(api, op))?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lesson(operation: &str, kept: &[&str], erased: &[&str]) -> Lesson {
        let owned = |v: &[&str]| v.iter().map(|f| f.to_string()).collect();
        Lesson {
            operation: operation.to_string(),
            kept: owned(kept),
            erased: owned(erased),
        }
    }

    /// Whether an answer showed `field` surviving its omission by `op`.
    fn kept(s: &Survival, op: &str, field: &str) -> bool {
        s.of(op).is_some_and(|l| l.kept.contains(field))
    }

    #[test]
    fn a_field_kept_until_an_answer_shows_it_erased_and_the_merge_reading_follows() {
        let s = Survival::default();
        assert!(!kept(&s, "put", "id"));
        assert!(s.learn(&lesson("put", &["id", "links"], &[])));
        assert!(!s.learn(&lesson("put", &["id"], &[])), "nothing new");
        assert!(kept(&s, "put", "id") && kept(&s, "put", "links"));
        assert!(s.of("put").unwrap().reads_as_merge());
        assert!(s.learn(&lesson("put", &[], &["links"])));
        assert!(
            !kept(&s, "put", "links"),
            "an erased field is at risk again"
        );
        assert!(kept(&s, "put", "id"));
        assert!(!s.of("put").unwrap().reads_as_merge());
        assert_eq!(s.of("other"), None);
    }

    #[test]
    fn the_bounds_hold_whatever_is_taught() {
        let s = Survival::default();
        for i in 0..MAX_OPERATIONS + 10 {
            s.learn(&lesson(&format!("op{i}"), &["a"], &[]));
        }
        assert_eq!(s.ops.lock().unwrap().len(), MAX_OPERATIONS);
        let names: Vec<String> = (0..MAX_FIELDS + 10).map(|i| format!("f{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        s.learn(&lesson("op0", &names, &[]));
        assert_eq!(s.of("op0").unwrap().kept.len(), MAX_FIELDS);
    }
}
