//! Lenient load: real specs carry parts no validator can use (a pattern in another regex
//! dialect, a `schema: null`, a parameter without `in`, two operations on one route). Each such
//! part is left out, or kept in a weaker form, and said here as a warning naming the JSON
//! pointer and reason, so the rest of the spec still audits. `--strict` turns the first warning
//! back into a load error.

use serde::Serialize;

/// What was left out of the contract, and so what a request touching it is not checked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Skipped {
    /// A `pattern` (or `patternProperties` key) no ECMA-262 engine accepts: removed, so values
    /// there are not checked against it.
    Pattern,
    /// A keyword or subschema that is not valid JSON Schema (`schema: null`, `required` that is
    /// not a list): removed or replaced by `true` (anything goes there).
    Schema,
    /// A schema that still cannot be compiled: that body or parameter is not validated.
    Validator,
    /// A parameter without a name or `in`, or with an unknown style: left out; query keys of
    /// its operation are not judged unknown.
    Parameter,
    /// Two operations share one method and route (`/v1/{name}` and `/v1/{parent}`): both are
    /// kept, and a request is audited against the one it fits best.
    AmbiguousRoute,
    /// A key written twice in one JSON object: the last one is used.
    DuplicateKey,
    /// A `$ref` chain that leads only back to itself: nothing is checked there.
    CircularRef,
    /// A `$ref` that leads more references deep than `spec.max_ref_depth`: not followed, so
    /// nothing is checked there.
    RefDepth,
    /// An overlay's action whose target matches nothing in the document: it changed nothing.
    OverlayTarget,
}

impl Skipped {
    pub const ALL: [Skipped; 9] = [
        Skipped::Pattern,
        Skipped::Schema,
        Skipped::Validator,
        Skipped::Parameter,
        Skipped::AmbiguousRoute,
        Skipped::DuplicateKey,
        Skipped::CircularRef,
        Skipped::RefDepth,
        Skipped::OverlayTarget,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Skipped::Pattern => "pattern",
            Skipped::Schema => "schema",
            Skipped::Validator => "validator",
            Skipped::Parameter => "parameter",
            Skipped::AmbiguousRoute => "ambiguous_route",
            Skipped::DuplicateKey => "duplicate_key",
            Skipped::CircularRef => "circular_ref",
            Skipped::RefDepth => "ref_depth",
            Skipped::OverlayTarget => "overlay_target",
        }
    }

    /// The `driftwatch_unaudited_total` reason for a request that touched such a part.
    pub fn unaudited_reason(self) -> &'static str {
        match self {
            Skipped::Pattern => "spec_pattern_skipped",
            Skipped::Schema => "spec_schema_skipped",
            Skipped::Validator => "spec_validator_skipped",
            Skipped::Parameter => "spec_parameter_skipped",
            Skipped::AmbiguousRoute => "spec_ambiguous_route",
            Skipped::DuplicateKey => "spec_duplicate_key",
            Skipped::CircularRef => "spec_circular_ref",
            Skipped::RefDepth => "spec_ref_depth",
            Skipped::OverlayTarget => "spec_overlay_target",
        }
    }
}

/// One part of the spec that was left out or weakened at load.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LoadWarning {
    /// JSON pointer into the (bundled) document.
    pub pointer: String,
    pub reason: Skipped,
    /// What was wrong, in the validator's or router's words (at most 300 characters).
    pub detail: String,
}

impl LoadWarning {
    pub fn new(pointer: impl Into<String>, reason: Skipped, detail: impl AsRef<str>) -> Self {
        LoadWarning {
            pointer: pointer.into(),
            reason,
            detail: crate::finding::shorten(detail.as_ref(), 300),
        }
    }
}

impl std::fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pointer = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        write!(
            f,
            "at {pointer}: {} skipped: {}",
            self.reason.as_str(),
            self.detail
        )
    }
}

/// Warnings counted by reason, every reason present (zero included), in [`Skipped::ALL`] order.
pub fn count_by_reason(warnings: &[LoadWarning]) -> Vec<(Skipped, usize)> {
    Skipped::ALL
        .iter()
        .map(|r| (*r, warnings.iter().filter(|w| w.reason == *r).count()))
        .collect()
}
