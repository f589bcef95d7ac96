//! The spec in force, as one value swapped whole: the compiled contract, what the spec is, and
//! how it differs from the revision before. A request loads the revision once when it starts
//! and keeps it to its end (its response audit included), so a reload never changes the rules
//! under a request in flight.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::contract::{Contract, ContractOptions};
use crate::diff::Change;
use crate::spec::{Spec, SpecError, SpecFiles};

/// What the spec is, for `/spec`, events and `driftwatch_spec_info`.
#[derive(Debug, Clone)]
pub struct SpecInfo {
    pub revision: String,
    pub openapi: String,
    pub operations: usize,
    pub source: String,
    /// For an API of several documents, each with its own revision.
    pub documents: Vec<crate::spec::DocumentInfo>,
}

#[derive(Debug)]
pub struct Revision {
    pub contract: Arc<Contract>,
    pub spec: SpecInfo,
    /// The files it was read from (`Spec::files`): what a watcher stamps, and what a reload
    /// hashes to know, before compiling anything, whether the revision is still the same.
    pub files: SpecFiles,
    /// The revision this one replaced, and what changed (empty for the first).
    pub previous: Option<String>,
    pub changes: Vec<Change>,
    /// What the traffic exercised of this revision's operations (`/coverage`): a reload
    /// starts a new one, as its operations may differ.
    pub coverage: crate::coverage::Coverage,
}

impl Revision {
    /// Say what was skipped at load: one line per part (the first 20), then how many more.
    pub fn log_warnings(&self) {
        const SHOWN: usize = 20;
        let warnings = &self.contract.warnings();
        for w in warnings.iter().take(SHOWN) {
            tracing::warn!(spec = %self.spec.source, pointer = %w.pointer, reason = w.reason.as_str(),
                "part of the spec skipped at load: {}", w.detail);
        }
        if warnings.len() > SHOWN {
            tracing::warn!(spec = %self.spec.source, more = warnings.len() - SHOWN,
                "more parts of the spec skipped at load (see /spec)");
        }
        for (id, labels) in self.contract.shared_ids().iter().take(SHOWN) {
            tracing::warn!(spec = %self.spec.source, operation_id = id, operations = %labels.join(", "),
                "one operationId on several operations: {}", Contract::SHARED_ID_MEANS);
        }
    }

    /// Compile `spec` with the settings' contract options.
    pub fn compile(spec: &Spec, options: &ContractOptions) -> Result<Revision, SpecError> {
        let contract = Contract::compile(spec, options)?;
        Ok(Revision {
            coverage: crate::coverage::Coverage::new(&contract),
            spec: SpecInfo {
                revision: spec.revision.clone(),
                openapi: spec.openapi.clone(),
                operations: contract.operations().len(),
                source: spec.source.display().to_string(),
                documents: spec.documents.clone(),
            },
            contract: Arc::new(contract),
            files: spec.files.clone(),
            previous: None,
            changes: Vec::new(),
        })
    }
}

/// Why a reload left the revision in force as it was.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("the spec is embedded (no spec.path or spec.url): nothing to reload")]
    Embedded,
    /// The spec URL could not be fetched: the server holding the spec is at fault.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The new document does not load: its author is at fault (file, pointer and reason).
    #[error(transparent)]
    Load(#[from] SpecError),
    #[error("the reload task failed: {0}")]
    Task(String),
    /// A reload asked for while another ran took the outcome of the next one, which failed.
    #[error("{0}")]
    Shared(String),
}

/// Why the spec URL gave no document.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{url}: not a URL driftwatch can fetch: {reason}")]
    Url { url: String, reason: String },
    #[error("{url}: no answer within {ms} ms")]
    Timeout { url: String, ms: u128 },
    #[error("{url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{url}: answered {status}")]
    Status {
        url: String,
        status: http::StatusCode,
    },
    #[error("{url}: reading the body: {reason}")]
    Body { url: String, reason: String },
    #[error("{url}: larger than {max} bytes (spec.max_bytes); the rest was not read")]
    TooLarge { url: String, max: u64 },
}

impl ReloadError {
    /// The document passed `spec.max_bytes` (counted as a limit hit).
    pub fn too_large(&self) -> bool {
        matches!(
            self,
            ReloadError::Fetch(FetchError::TooLarge { .. })
                | ReloadError::Load(SpecError::TooLarge { .. } | SpecError::Overgrown { .. })
        )
    }
}

/// What the admin listener may do with the spec: read the revision in force, ask for a reload.
/// The proxy implements it; the admin listener sees nothing else of the proxy.
pub trait Revisions: Send + Sync {
    /// Each API's name (`None`: the one unnamed API) and revision in force, in config order.
    fn all(&self) -> Vec<(Option<String>, Arc<Revision>)>;
    /// Reload the API named `only` (every API for `None`); the outcome of each.
    fn reload<'a>(
        &'a self,
        trigger: &'static str,
        only: Option<&'a str>,
    ) -> Pin<Box<dyn Future<Output = Reloaded> + Send + 'a>>;
}

/// Each API reloaded, by name, and what came of it.
pub type Reloaded = Vec<(Option<String>, Result<Arc<Revision>, ReloadError>)>;
