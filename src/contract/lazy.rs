//! Handles on validators compiled when first asked for: a parameter's ([`Lazy`], kept once
//! compiled) and a body's ([`LazyBody`], let go under the compiler's bound and compiled again
//! when next asked). They ask whatever compiles validators ([`Validators`]: the contract's
//! compiler), so the operations and body shapes that hold them need not know the compiler
//! that builds them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};

use jsonschema::Validator;
use jsonschema::json::SerdeJson;

use crate::json::Tape;

/// What compiles the validator of the schema at a pointer into the document; `None` where
/// it cannot be compiled.
pub(super) trait Validators: Send + Sync {
    /// A validator of parsed values (parameters).
    fn for_values(&self, pointer: &str) -> Option<Arc<Validator<SerdeJson>>>;
    /// A validator of bodies as read onto a tape.
    fn for_bodies(&self, pointer: &str) -> Option<Arc<Validator<Tape>>>;
}

/// A parameter's validator, compiled on first use and kept (parameter schemas are small, so
/// no bound applies). `None` where the spec gives no schema, or its schema cannot be compiled.
pub struct Lazy {
    pointer: Option<Box<str>>,
    compiler: Arc<dyn Validators>,
    slot: OnceLock<Option<Arc<Validator<SerdeJson>>>>,
}

/// A body's validator (a request body's, a `oneOf` branch's, a response's), which reads
/// bodies as parsed. These reach a document's large schemas (a Graph entity and every entity
/// it refers to: about 0.5 MB compiled), so the compiler keeps at most
/// `spec.max_compiled_schemas` of them, the oldest let go first; the slot holds a weak
/// reference, and compiles again when next asked after its validator was let go.
pub struct LazyBody {
    pointer: Option<Box<str>>,
    compiler: Arc<dyn Validators>,
    slot: RwLock<Weak<Validator<Tape>>>,
    failed: AtomicBool,
}

impl LazyBody {
    pub(super) fn new(pointer: Option<String>, compiler: Arc<dyn Validators>) -> LazyBody {
        LazyBody {
            pointer: pointer.map(String::into_boxed_str),
            compiler,
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
        let Some(compiled) = self.compiler.for_bodies(pointer) else {
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
    pub(super) fn new(pointer: Option<String>, compiler: Arc<dyn Validators>) -> Lazy {
        Lazy {
            pointer: pointer.map(String::into_boxed_str),
            compiler,
            slot: OnceLock::new(),
        }
    }

    /// The validator, compiled now if this is its first use.
    pub fn get(&self) -> Option<&Arc<Validator<SerdeJson>>> {
        self.slot
            .get_or_init(|| self.compiler.for_values(self.pointer.as_deref()?))
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
