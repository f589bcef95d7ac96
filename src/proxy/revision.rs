//! The spec in force, as one value swapped whole: the compiled contract, what the spec is, and
//! how it differs from the revision before. A request loads the revision once when it starts
//! and keeps it to its end (its response audit included), so a reload never changes the rules
//! under a request in flight.

use std::sync::Arc;

use crate::config::Config;
use crate::contract::Contract;
use crate::diff::Change;
use crate::spec::{Spec, SpecError};

/// What the spec is, for `/spec`, events and `driftwatch_spec_info`.
#[derive(Debug, Clone)]
pub struct SpecInfo {
    pub revision: String,
    pub openapi: String,
    pub operations: usize,
    pub source: String,
}

#[derive(Debug)]
pub struct Revision {
    pub contract: Arc<Contract>,
    pub spec: SpecInfo,
    /// The revision this one replaced, and what changed (empty for the first).
    pub previous: Option<String>,
    pub changes: Vec<Change>,
}

impl Revision {
    /// Say what was skipped at load: one line per part (the first 20), then how many more.
    pub fn log_warnings(&self) {
        const SHOWN: usize = 20;
        let warnings = &self.contract.warnings;
        for w in warnings.iter().take(SHOWN) {
            tracing::warn!(spec = %self.spec.source, pointer = %w.pointer, reason = w.reason.as_str(),
                "part of the spec skipped at load: {}", w.detail);
        }
        if warnings.len() > SHOWN {
            tracing::warn!(spec = %self.spec.source, more = warnings.len() - SHOWN,
                "more parts of the spec skipped at load (see /spec)");
        }
    }

    /// Compile `spec` with the config's contract options.
    pub fn compile(spec: &Spec, config: &Config) -> Result<Revision, SpecError> {
        let contract = Contract::compile(spec, &config.contract_options())?;
        Ok(Revision {
            spec: SpecInfo {
                revision: spec.revision.clone(),
                openapi: spec.openapi.clone(),
                operations: contract.operations().len(),
                source: spec.source.display().to_string(),
            },
            contract: Arc::new(contract),
            previous: None,
            changes: Vec::new(),
        })
    }
}
