//! The findings of one request, bounded (`audit.max_findings`): past the bound a finding is not
//! kept, and the loops that could make thousands (undeclared body fields, schema errors, unknown
//! query keys) stop asking. A body with 60,000 undeclared keys costs the bound, not 60,000
//! findings, suggestions and a 17 MB event. The text a peer chooses (a key name, a value) is
//! cut to a bound in each finding, so one finding stays small too.

use std::ops::Deref;

use crate::finding::Finding;

/// Bytes of a finding's field and observed value, and of its message, at most.
const FIELD_MAX: usize = 256;
const MESSAGE_MAX: usize = 1024;

fn cut(text: &mut compact_str::CompactString, max: usize) {
    if text.len() > max {
        *text = crate::finding::shorten(text, max).into();
    }
}

/// `finding` with the text a peer chose cut to its bound: every finding made from a request
/// or a response goes through here (or through [`Findings::push`], which calls it).
pub(crate) fn cut_text(mut finding: Finding) -> Finding {
    cut_in_place(&mut finding);
    finding
}

fn cut_in_place(finding: &mut Finding) {
    cut(&mut finding.field, FIELD_MAX);
    cut(&mut finding.message, MESSAGE_MAX);
    if let Some(observed) = finding.observed.as_mut() {
        cut(observed, FIELD_MAX);
    }
}

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

    /// Keep `finding` while there is room, its peer-chosen text cut to a bound (a key name can
    /// be as long as the body).
    pub fn push(&mut self, mut finding: Finding) {
        if self.list.len() >= self.limit {
            self.more = true;
            return;
        }
        cut_in_place(&mut finding);
        self.list.push(finding);
    }

    /// True once the bound is reached: the caller stops looking (and the rest is said to exist).
    pub fn full(&mut self) -> bool {
        let full = self.list.len() >= self.limit;
        self.more |= full;
        full
    }

    /// Room for `n` more (at most the bound), made at once rather than grown into.
    pub fn reserve(&mut self, n: usize) {
        self.list.reserve(n.min(self.room()));
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
