//! What to do with a request's findings: in `observe` mode, always forward; in `enforce` mode,
//! block when any finding's action is `block`. The action comes from the operation's override,
//! then the kind's, then the default (block `error` and `critical`, log the rest).

use std::collections::HashMap;

use serde::Deserialize;

use crate::config::EnforceConfig;
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
}

#[derive(Debug, Clone)]
pub struct Policy {
    pub mode: Mode,
    kinds: HashMap<Kind, Action>,
    operations: HashMap<String, HashMap<Kind, Action>>,
}

impl Policy {
    /// Build from validated config (kind names were checked by `Config::validate`).
    pub fn new(mode: Mode, enforce: &EnforceConfig) -> Policy {
        let kinds = |m: &HashMap<String, Action>| {
            m.iter()
                .filter_map(|(k, a)| Some((Kind::parse(k)?, *a)))
                .collect()
        };
        Policy {
            mode,
            kinds: kinds(&enforce.kinds),
            operations: enforce
                .operations
                .iter()
                .map(|(op, m)| (op.clone(), kinds(m)))
                .collect(),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Location;

    #[test]
    fn defaults_then_kind_then_operation() {
        let mut enforce = EnforceConfig::default();
        enforce
            .kinds
            .insert("unknown_query_param".into(), Action::Log);
        enforce.operations.insert(
            "updateChannel".into(),
            [("omitted_on_replace".to_string(), Action::Block)].into(),
        );
        let policy = Policy::new(Mode::Enforce, &enforce);
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
        let observe = Policy::new(Mode::Observe, &enforce);
        assert_eq!(observe.action(Some("updateChannel"), &omitted), Action::Log);
        assert_eq!(observe.action(None, &mismatch), Action::Log);
    }
}
