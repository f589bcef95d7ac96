//! The findings of one request, bounded (`audit.max_findings`): past the bound a finding is not
//! kept, and the loops that could make thousands (undeclared body fields, schema errors, unknown
//! query keys) stop asking. A body with 60,000 undeclared keys costs the bound, not 60,000
//! findings, suggestions and a 17 MB event.

use std::ops::Deref;

use crate::finding::Finding;

pub(crate) struct Findings {
    list: Vec<Finding>,
    limit: usize,
    /// Some were left out.
    more: bool,
}

impl Findings {
    pub fn new(limit: usize) -> Findings {
        Findings {
            list: Vec::new(),
            limit,
            more: false,
        }
    }

    pub fn push(&mut self, finding: Finding) {
        if self.list.len() < self.limit {
            self.list.push(finding);
        } else {
            self.more = true;
        }
    }

    /// True once the bound is reached: the caller stops looking (and the rest is said to exist).
    pub fn full(&mut self) -> bool {
        let full = self.list.len() >= self.limit;
        self.more |= full;
        full
    }

    /// How many more fit.
    pub fn room(&self) -> usize {
        self.limit.saturating_sub(self.list.len())
    }

    /// Some were not even looked for: say so.
    pub fn left_out(&mut self) {
        self.more = true;
    }

    pub fn more(&self) -> bool {
        self.more
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Finding> {
        self.list.iter_mut()
    }

    pub fn into_vec(self) -> Vec<Finding> {
        self.list
    }
}

impl Deref for Findings {
    type Target = [Finding];

    fn deref(&self) -> &[Finding] {
        &self.list
    }
}
