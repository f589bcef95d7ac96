//! What to do with a request's findings: in `observe` mode, always forward; in `enforce` mode,
//! block when any finding's action is `block`, and complete the body from a fresh read of the
//! resource where a replace write's omitted fields are set to `repair`. The action comes from
//! the operation's override, then the kind's, then the default (block `error` and `critical`,
//! log the rest).

use std::collections::HashMap;

use serde::Deserialize;

use crate::finding::{Finding, Kind, Severity};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Observe,
    Enforce,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Observe => "observe",
            Mode::Enforce => "enforce",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Log,
    Block,
    /// Fill the fields a replace write omits from a fresh read of its resource (only for
    /// `silent_clear_risk` and `omitted_on_replace`: [`Action::repairs`]).
    Repair,
}

impl Action {
    /// The kinds `repair` may be chosen for: the omitted fields of a replace write.
    pub fn repairs(kind: Kind) -> bool {
        matches!(kind, Kind::SilentClearRisk | Kind::OmittedOnReplace)
    }

    /// How an event names what was done with a finding.
    pub fn done(self) -> &'static str {
        match self {
            Action::Log => "log",
            Action::Block => "block",
            Action::Repair => "repaired",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Policy {
    pub mode: Mode,
    /// Read a replace write's resource just before the write where the memory has no view of
    /// it, and decide on that read (`enforce.read_before_write`; unset: on in enforce mode).
    pub read_before_write: bool,
    kinds: HashMap<Kind, Action>,
    operations: HashMap<String, HashMap<Kind, Action>>,
}

impl Policy {
    /// `kinds` over the default, then `operations` (by operation id) over `kinds`.
    pub fn new(
        mode: Mode,
        kinds: HashMap<Kind, Action>,
        operations: HashMap<String, HashMap<Kind, Action>>,
    ) -> Policy {
        Policy {
            mode,
            read_before_write: mode == Mode::Enforce,
            kinds,
            operations,
        }
    }

    /// The policy with `enforce.read_before_write` as the config says, where it does.
    pub fn reading_before_writes(mut self, read: Option<bool>) -> Policy {
        if let Some(read) = read {
            self.read_before_write = read;
        }
        self
    }

    /// What would be done with a `silent_clear_risk` on `operation`: the action that decides
    /// a write driftwatch could not read the resource of.
    pub fn on_risk(&self, operation: Option<&str>) -> Action {
        let risk = Finding::new(Kind::SilentClearRisk, crate::finding::Location::Body, "")
            .severity(Severity::Critical);
        match self.repairs_finding(operation, &risk) {
            true => Action::Repair,
            false => self.action(operation, &risk),
        }
    }

    /// The action for one finding of a request to `operation`.
    pub fn action(&self, operation: Option<&str>, finding: &Finding) -> Action {
        if self.mode == Mode::Observe {
            return Action::Log;
        }
        let by_operation = operation
            .and_then(|op| self.operations.get(op))
            .and_then(|m| m.get(&finding.kind));
        match by_operation.or_else(|| self.kinds.get(&finding.kind)) {
            Some(action) => *action,
            None if finding.severity >= Severity::Error => Action::Block,
            None => Action::Log,
        }
    }

    /// The findings that block the request (empty: forward it).
    pub fn blocking<'f>(
        &self,
        operation: Option<&str>,
        findings: &'f [Finding],
    ) -> Vec<&'f Finding> {
        findings
            .iter()
            .filter(|f| self.action(operation, f) == Action::Block)
            .collect()
    }

    /// The findings whose field is to be filled from a fresh read (empty: nothing to repair).
    /// A `silent_clear_risk` is an omission with evidence: where omissions are repaired, so is
    /// it, unless its own action is set otherwise.
    pub fn repairing<'f>(
        &self,
        operation: Option<&str>,
        findings: &'f [Finding],
    ) -> Vec<&'f Finding> {
        findings
            .iter()
            .filter(|f| Action::repairs(f.kind) && self.repairs_finding(operation, f))
            .collect()
    }

    fn repairs_finding(&self, operation: Option<&str>, f: &Finding) -> bool {
        let action = self.action(operation, f);
        if action == Action::Repair {
            return true;
        }
        let omission = Finding {
            kind: Kind::OmittedOnReplace,
            severity: Severity::Warning,
            ..f.clone()
        };
        f.kind == Kind::SilentClearRisk
            && !self.set(operation, Kind::SilentClearRisk)
            && self.action(operation, &omission) == Action::Repair
    }

    /// Whether the config sets an action for `kind` (on `operation`, or for every operation).
    fn set(&self, operation: Option<&str>, kind: Kind) -> bool {
        let by_operation = operation.and_then(|op| self.operations.get(op));
        by_operation.is_some_and(|m| m.contains_key(&kind)) || self.kinds.contains_key(&kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Location;

    type Tables = (
        HashMap<Kind, Action>,
        HashMap<String, HashMap<Kind, Action>>,
    );

    /// One kind's action, and one for `updateChannel`.
    fn tables(kind: (Kind, Action), update_channel: (Kind, Action)) -> Tables {
        let operations = [("updateChannel".to_string(), [update_channel].into())];
        ([kind].into(), operations.into())
    }

    #[test]
    fn defaults_then_kind_then_operation() {
        let (kinds, operations) = tables(
            (Kind::UnknownQueryParam, Action::Log),
            (Kind::OmittedOnReplace, Action::Block),
        );
        let policy = Policy::new(Mode::Enforce, kinds.clone(), operations.clone());
        let unknown = Finding::new(Kind::UnknownQueryParam, Location::Query, "x");
        let mismatch = Finding::new(Kind::ParamTypeMismatch, Location::Query, "x");
        let omitted = Finding::new(Kind::OmittedOnReplace, Location::Body, "/a");
        assert_eq!(policy.action(Some("listPlayouts"), &unknown), Action::Log);
        assert_eq!(
            policy.action(Some("listPlayouts"), &mismatch),
            Action::Block
        );
        assert_eq!(policy.action(Some("createChannel"), &omitted), Action::Log);
        assert_eq!(
            policy.action(Some("updateChannel"), &omitted),
            Action::Block
        );
        let observe = Policy::new(Mode::Observe, kinds, operations);
        assert_eq!(observe.action(Some("updateChannel"), &omitted), Action::Log);
        assert_eq!(observe.action(None, &mismatch), Action::Log);
    }

    #[test]
    fn repair_is_chosen_like_block_and_only_in_enforce() {
        let (kinds, operations) = tables(
            (Kind::SilentClearRisk, Action::Repair),
            (Kind::OmittedOnReplace, Action::Repair),
        );
        let policy = Policy::new(Mode::Enforce, kinds.clone(), operations.clone());
        let risk = Finding::new(Kind::SilentClearRisk, Location::Body, "/a");
        let omitted = Finding::new(Kind::OmittedOnReplace, Location::Body, "/b");
        let findings = [risk, omitted];
        let fields = |op| -> Vec<String> {
            policy
                .repairing(op, &findings)
                .iter()
                .map(|f| f.field.to_string())
                .collect()
        };
        assert_eq!(fields(Some("updateOther")), ["/a"]);
        assert_eq!(fields(Some("updateChannel")), ["/a", "/b"]);
        assert!(policy.blocking(Some("updateChannel"), &findings).is_empty());
        let observe = Policy::new(Mode::Observe, kinds, operations);
        assert!(
            observe
                .repairing(Some("updateChannel"), &findings)
                .is_empty()
        );
    }
}
