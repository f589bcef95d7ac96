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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use jsonschema::Validator;
use jsonschema::json::SerdeJson;
use serde_json::Value;

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
        lock(&self.shapes).shape(pointer, self)
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

/// A parameter's validator, compiled on first use and kept (parameter schemas are small, so
/// no bound applies). `None` where the spec gives no schema, or its schema cannot be compiled.
pub struct Lazy {
    pointer: Option<Box<str>>,
    compiler: Arc<Compiler>,
    slot: OnceLock<Option<Arc<Validator<SerdeJson>>>>,
}

/// A body's validator (a request body's, a `oneOf` branch's, a response's), which reads
/// bodies as parsed. These reach a document's large schemas (a Graph entity and every entity
/// it refers to: about 0.5 MB compiled), so the compiler keeps at most
/// `spec.max_compiled_schemas` of them, the oldest let go first; the slot holds a weak
/// reference, and compiles again when next asked after its validator was let go.
pub struct LazyBody {
    pointer: Option<Box<str>>,
    compiler: Arc<Compiler>,
    slot: RwLock<Weak<Validator<Tape>>>,
    failed: AtomicBool,
}

impl LazyBody {
    pub(super) fn new(pointer: Option<String>, compiler: &Arc<Compiler>) -> LazyBody {
        LazyBody {
            pointer: pointer.map(String::into_boxed_str),
            compiler: compiler.clone(),
            slot: RwLock::new(Weak::new()),
            failed: AtomicBool::new(false),
        }
    }

    /// The validator, compiled now if it is not kept.
    pub fn get(&self) -> Option<Arc<Validator<Tape>>> {
        let pointer = self.pointer.as_deref()?;
        if self.failed.load(Ordering::Relaxed) {
            return None;
        }
        let kept = self
            .slot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade();
        if kept.is_some() {
            return kept;
        }
        let Some(compiled) = self.compiler.validator::<Tape>(pointer) else {
            self.failed.store(true, Ordering::Relaxed);
            return None;
        };
        *self.slot.write().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&compiled);
        Some(compiled)
    }

    /// The spec gives a schema here that cannot be compiled (compiled now if not yet).
    pub fn failed(&self) -> bool {
        self.pointer.is_some() && self.get().is_none()
    }

    /// [`LazyBody::get`] would answer without compiling.
    pub fn ready(&self) -> bool {
        self.pointer.is_none()
            || self.failed.load(Ordering::Relaxed)
            || self.slot.read().is_ok_and(|kept| kept.strong_count() > 0)
    }
}

impl std::fmt::Debug for LazyBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self
            .slot
            .read()
            .map(|w| w.strong_count() > 0)
            .unwrap_or(false);
        f.debug_struct("LazyBody")
            .field("pointer", &self.pointer)
            .field("kept", &kept)
            .finish()
    }
}

impl Lazy {
    pub(super) fn new(pointer: Option<String>, compiler: &Arc<Compiler>) -> Lazy {
        Lazy {
            pointer: pointer.map(String::into_boxed_str),
            compiler: compiler.clone(),
            slot: OnceLock::new(),
        }
    }

    /// The validator, compiled now if this is its first use.
    pub fn get(&self) -> Option<&Arc<Validator<SerdeJson>>> {
        self.slot
            .get_or_init(|| {
                self.compiler
                    .validator::<SerdeJson>(self.pointer.as_deref()?)
            })
            .as_ref()
    }

    /// The spec gives a schema here that cannot be compiled (compiled now if not yet).
    pub fn failed(&self) -> bool {
        self.pointer.is_some() && self.get().is_none()
    }
}

impl std::fmt::Debug for Lazy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lazy")
            .field("pointer", &self.pointer)
            .field("compiled", &self.slot.get().map(Option::is_some))
            .finish()
    }
}
