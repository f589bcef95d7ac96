//! Contract against contract: what changed between two revisions of a spec, and what each
//! change does to a client that has not updated. Compared on the compiled, normalized contract,
//! so a 3.0 `nullable: true` and a 3.1 `["null", T]` are the same type, and key order, `$ref`
//! layout and descriptions are no change at all. Unlike a plain breaking-change check, a new
//! property in a full-replace body is a `hazard`: every client that does not send it erases it.

mod compare;

use std::fmt;

use serde::Serialize;

use crate::contract::Contract;

/// What a change does to a client built against the old revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Nothing a client relied on moved: an addition, a widening.
    Info,
    /// A client that has not updated still works, but loses data or is silently ignored.
    Hazard,
    /// A client that worked now fails.
    Breaking,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Info => "info",
            Class::Hazard => "hazard",
            Class::Breaking => "breaking",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One difference between two revisions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    pub class: Class,
    /// Stable name: `operation_removed`, `param_renamed`, `body_property_added`, ...
    pub kind: &'static str,
    /// The operation id in the new revision (the old one's, for a removal).
    pub operation: String,
    /// `path`, `query`, `header`, `cookie`, `body`, `response`, or `operation`.
    pub location: &'static str,
    /// Parameter or property name (for a response property: `200 /name`); empty for the
    /// operation itself.
    pub field: String,
    pub from: Option<String>,
    pub to: Option<String>,
}

/// Every change from `old` to `new`, breaking first, then by operation and field.
pub fn diff(old: &Contract, new: &Contract) -> Vec<Change> {
    let mut changes = compare::contracts(old, new);
    changes.sort_by(|a, b| {
        (b.class, &a.operation, a.location, &a.field, a.kind).cmp(&(
            a.class,
            &b.operation,
            b.location,
            &b.field,
            b.kind,
        ))
    });
    changes
}
