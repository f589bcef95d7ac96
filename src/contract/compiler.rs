//! What a contract compiles after its load: the document's whole-schema checks (the
//! meta-schema, every `pattern`, `$ref` depth: `sanitize.rs`; `$ref` loops) and each validator, when first
//! asked for. A Microsoft Graph spec has 11,422 operations and its sidecar's MCP server uses a
//! fifth of them; compiling all at load took 2.4 s and 600 MB of its 3.7 s and 823 MB
//! (docs/benchmarks.md, "A sidecar's footprint"). So the contract is built without them, and:
//! - the whole-document check runs once, on the first validator asked for or when the sidecar
//!   calls [`Compiler::check`] after it is ready (whichever comes first; the other waits for it);
//! - each validator is compiled from the checked document on its first use and kept;
//! - a schema that cannot be compiled is a warning added then ([`Compiler::late`]), and the
//!   part is unaudited, never a failed request.
//!
//! Body shapes read the document as loaded (they need no check: a keyword the meta-schema
//! refuses is not one they read).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use jsonschema::Validator;
use jsonschema::json::SerdeJson;
use serde_json::Value;

use super::lazy::Validators;
use super::operation::BodyShape;
use super::schemas::{Reads, Schemas, Wanted};
use super::warning::{LoadWarning, Skipped};
use crate::json::Tape;
use crate::spec::SpecError;

/// The document a contract was built from, and what is compiled from it on demand.
pub(super) struct Compiler {
    /// The document as loaded: what body shapes are read from.
    shapes: Mutex<Schemas>,
    raw: Arc<Value>,
    file: PathBuf,
    max_ref_depth: usize,
    /// Body and response validators kept at most (see [`LazyBody`]).
    max_compiled: usize,
    checked: OnceLock<Checked>,
    /// Schemas that could not be compiled on first use, in the order they were asked for.
    late: Mutex<Vec<LoadWarning>>,
}

/// The document after its whole-schema checks, and what they said.
struct Checked {
    /// `Err`: the checked document cannot be a registry (its reason).
    schemas: Result<Mutex<Schemas>, String>,
    warnings: Vec<LoadWarning>,
}

impl std::fmt::Debug for Compiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiler")
            .field("checked", &self.checked.get().is_some())
            .finish()
    }
}

impl Compiler {
    pub fn new(
        doc: Arc<Value>,
        file: &Path,
        max_ref_depth: usize,
        max_compiled: usize,
    ) -> Result<Compiler, SpecError> {
        Ok(Compiler {
            shapes: Mutex::new(Schemas::new(doc.clone(), file)?),
            raw: doc,
            file: file.to_path_buf(),
            max_ref_depth,
            max_compiled,
            checked: OnceLock::new(),
            late: Mutex::new(Vec::new()),
        })
    }

    /// The document as loaded.
    pub fn doc(&self) -> &Arc<Value> {
        &self.raw
    }

    /// Run the whole-document checks now, if nothing has yet; what they took out, as warnings.
    /// Idempotent: a second caller waits for the first and reads its result.
    pub fn check(&self) -> &[LoadWarning] {
        &self.checked().warnings
    }

    /// Whether the whole-document checks have run.
    pub fn is_checked(&self) -> bool {
        self.checked.get().is_some()
    }

    fn checked(&self) -> &Checked {
        self.checked.get_or_init(|| {
            let (doc, mut warnings) =
                super::sanitize::sanitize(self.raw.clone(), self.max_ref_depth);
            let loops = crate::spec::circular_refs(&self.raw).into_iter();
            warnings
                .extend(loops.map(|n| LoadWarning::new(n.pointer, Skipped::CircularRef, n.detail)));
            Checked {
                schemas: Schemas::new(doc, &self.file)
                    .map(|mut schemas| {
                        schemas.max_bodies = self.max_compiled;
                        Mutex::new(schemas)
                    })
                    .map_err(|e| e.reason()),
                warnings,
            }
        })
    }

    /// The checked document's validator for the schema at `pointer`; `None`, and a warning
    /// kept in [`Compiler::late`], when it cannot be compiled.
    pub fn validator<F: Reads>(&self, pointer: &str) -> Option<Arc<Validator<F>>> {
        let compiled = match &self.checked().schemas {
            Ok(schemas) => {
                // Compiled without the lock held: see `Schemas::wanted`.
                let wanted = lock(schemas).wanted::<F>(pointer);
                match wanted {
                    Wanted::Kept(validator) => Ok(validator),
                    Wanted::Failed(e) => Err(e.reason()),
                    Wanted::Compile(compile) => {
                        let made = compile.run::<F>();
                        lock(schemas).keep(compile, made).map_err(|e| e.reason())
                    }
                }
            }
            Err(reason) => Err(reason.clone()),
        };
        compiled.map_err(|reason| self.fail(pointer, reason)).ok()
    }

    /// The shape of the body schema at `pointer`, with its `oneOf` branches' validators left
    /// to their first use.
    pub fn shape(self: &Arc<Self>, pointer: &str) -> Arc<BodyShape> {
        let validators: Arc<dyn Validators> = self.clone();
        lock(&self.shapes).shape(pointer, &validators)
    }

    fn fail(&self, pointer: &str, reason: String) {
        let mut late = lock(&self.late);
        if !late.iter().any(|w| w.pointer == pointer) {
            late.push(LoadWarning::new(pointer, Skipped::Validator, reason));
        }
    }

    /// The schemas that could not be compiled so far, in the order they were asked for.
    pub fn late(&self) -> Vec<LoadWarning> {
        lock(&self.late).clone()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The compiler, as the handles of `lazy` ask it.
impl Validators for Compiler {
    fn for_values(&self, pointer: &str) -> Option<Arc<Validator<SerdeJson>>> {
        self.validator::<SerdeJson>(pointer)
    }

    fn for_bodies(&self, pointer: &str) -> Option<Arc<Validator<Tape>>> {
        self.validator::<Tape>(pointer)
    }
}
