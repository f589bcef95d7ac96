//! The compiled contract: an immutable view of a spec built once at load, holding the router,
//! every operation with its parameters, body shapes and compiled JSON Schema validators. The
//! audit reads it; nothing re-parses the spec per request. Share it behind an `Arc`.

mod base;
mod compile;
mod compiler;
mod lazy;
mod operation;
mod ref_depth;
mod resolve;
mod response;
mod router;
mod sanitize;
mod schemas;
mod security;
mod shape;
mod shown;
mod types;
mod views;
mod warning;
mod writes;

use std::collections::HashMap;

pub(crate) use base::BasePaths;
pub use lazy::{Lazy, LazyBody};
pub use operation::{
    Additional, BodyShape, MediaBody, Operation, Param, Property, RequestBody, Style,
    WriteSemantics,
};
pub use resolve::deref;
pub use response::{CompiledSchema, DeclaredResponse, ResponseMedia, Responses};
pub use router::{RouteKey, Routed, normalize_template};
pub use security::{Credential, Scheme, Secrets, Security};
pub use types::{FieldType, TypeSummary, summarize, union_branches};
pub use views::ListOf;
pub use warning::{LoadWarning, Skipped, count_by_reason};
pub use writes::WriteReason;

use crate::finding::Location;
use crate::spec::{Spec, SpecError};

/// Findings listed per request at most unless set otherwise (`audit.max_findings`).
pub const DEFAULT_MAX_FINDINGS: usize = 100;

/// References followed in a row at most unless set otherwise (`spec.max_ref_depth`): seven
/// times the deepest of the 2,639 APIs.guru documents (Stripe's, 37).
pub const DEFAULT_MAX_REF_DEPTH: usize = 256;

/// Body and response validators kept compiled at most unless set otherwise
/// (`spec.max_compiled_schemas`): 250 of Microsoft Graph's responses hold about 0.12 GB
/// (docs/benchmarks.md, "A sidecar's footprint").
pub const DEFAULT_MAX_COMPILED: usize = 250;

/// Choices the spec cannot make for itself; come from the config file.
#[derive(Clone, Debug)]
pub struct ContractOptions {
    /// Path prefix to strip before routing, overriding the `servers` URLs (`/api/v1`).
    pub base_path: Option<String>,
    /// Write semantics by operation id or `"PUT /path/{id}"`, over `x-driftwatch-write`.
    pub write_overrides: HashMap<String, WriteSemantics>,
    /// The GET that shows a replace write's resource, where its path template differs: write
    /// (id or `"PUT /path/{id}"`) to read (id or `"GET /path/{id}"`), over `x-driftwatch-read`.
    pub read_for: HashMap<String, String>,
    /// Refuse a spec with any part that cannot be compiled, instead of skipping the part with
    /// a warning (`--strict`, `spec.strict`).
    pub strict: bool,
    /// Findings listed per request at most (`audit.max_findings`, 100 by default): what one
    /// request can make the audit hold is bounded for every user of the library, not only
    /// for the sidecar. At least 1.
    pub max_findings: usize,
    /// References followed in a row at most (`spec.max_ref_depth`, 256 by default): a `$ref`
    /// that leads deeper is not followed and said as a `ref_depth` warning. jsonschema's
    /// compile grows with the square of a chain's length; real specs nest 37 at most.
    pub max_ref_depth: usize,
    /// Leave the whole-document checks and each validator to their first use (the sidecar:
    /// ready sooner, in less memory; see `compiler.rs`) instead of doing all before
    /// [`Contract::compile`] returns. `strict` does all first whatever this says.
    pub lazy: bool,
    /// Body and response validators kept compiled at most (`spec.max_compiled_schemas`): each
    /// reaches its schema's whole graph of references (Microsoft Graph's: about 0.5 MB),
    /// so what a peer's requests to distinct operations can make the sidecar hold is bounded.
    /// Past it, the oldest is let go and compiled again when next needed.
    pub max_compiled: usize,
    /// Check that each request carries a credential its operation's `security` accepts
    /// (`audit.credentials`, on by default): off where a gateway behind driftwatch adds them.
    pub credentials: bool,
}

impl Default for ContractOptions {
    fn default() -> ContractOptions {
        ContractOptions {
            base_path: None,
            write_overrides: HashMap::new(),
            read_for: HashMap::new(),
            strict: false,
            max_findings: DEFAULT_MAX_FINDINGS,
            max_ref_depth: DEFAULT_MAX_REF_DEPTH,
            lazy: false,
            max_compiled: DEFAULT_MAX_COMPILED,
            credentials: true,
        }
    }
}

#[derive(Debug)]
pub struct Contract {
    /// The spec's `openapi` field, for `/spec` and events.
    pub openapi: String,
    /// Findings listed per request at most; past it, one finding says the rest are left out.
    pub max_findings: usize,
    /// Parts of the spec left out or weakened as it was built (notes, parameters, routes);
    /// [`Contract::warnings`] adds what the checks and compiles after it found.
    warnings: Vec<LoadWarning>,
    /// The names the spec's apiKey credentials travel under, to keep their values out of logs.
    pub secrets: Secrets,
    /// Some operation's `security` asks for a credential a request carries (a key, a token, a
    /// password), whether or not `audit.credentials` checks it.
    pub takes_credentials: bool,
    operations: Vec<Operation>,
    /// Operation id to index in `operations`.
    by_id: HashMap<String, usize>,
    router: router::Router,
    /// Prefixes stripped from request paths before routing, longest first; what is under
    /// none of them is not this API's.
    base_paths: base::BasePaths,
    /// The templates segment by segment: what [`Contract::path_shape`] keeps of a path.
    shapes: shape::Shapes,
    /// The document and what is compiled from it on first use: validators, response schemas.
    compiler: std::sync::Arc<compiler::Compiler>,
    /// Pointers of the document as the file spells them, for warnings.
    as_written: crate::spec::AsWritten,
}

/// A request's operation, once routed.
#[derive(Debug)]
pub enum Route<'c, 'p> {
    Found {
        operation: &'c Operation,
        path_values: Vec<&'p str>,
    },
    MethodNotAllowed {
        allowed: Vec<&'c str>,
    },
    /// No template fits a path that is the API's: under a base path, or the spec has none
    /// (or one at the host's root).
    NotFound,
    /// Under none of the spec's base paths, and no template fits the whole path either: a
    /// request to another endpoint of the same host (Keycloak's OAuth token endpoint
    /// `/realms/{realm}/protocol/openid-connect/token` beside its admin API under
    /// `/admin/realms`), not one of this API's.
    OutsideBasePath,
}

impl Contract {
    /// Compile a loaded spec. A part that cannot be compiled (a pattern in another dialect, a
    /// schema that is not a schema, a parameter without `in`) is skipped and said in
    /// [`Contract::warnings`]; with `options.strict` the first such part fails the load instead,
    /// naming file and pointer.
    pub fn compile(spec: &Spec, options: &ContractOptions) -> Result<Contract, SpecError> {
        compile::compile(spec, options)
    }

    /// The compiled schema of a declared response media type, compiled on first use and kept
    /// (`None`: no schema, or one that cannot be compiled; then only the media type is checked).
    pub fn response_schema<'m>(&self, media: &'m ResponseMedia) -> Option<&'m CompiledSchema> {
        media
            .compiled
            .get_or_init(|| {
                let pointer = media.schema.as_deref()?;
                let validator = LazyBody::new(Some(pointer.to_string()), self.compiler.clone());
                validator.get()?;
                Some(CompiledSchema {
                    validator,
                    shape: self.compiler.shape(pointer),
                })
            })
            .as_ref()
    }

    /// Whether auditing an answer of `op` with `status` may compile a schema first: its first
    /// such answer, or one whose validator the bound let go. The sidecar audits those off its
    /// serving threads (a large schema takes tens of milliseconds to compile).
    pub fn response_compiles(&self, op: &Operation, status: u16) -> bool {
        let Some(declared) = op.responses.for_status(status) else {
            return false;
        };
        declared
            .media
            .iter()
            .filter(|m| m.json && m.schema.is_some())
            .any(|m| match m.compiled.get() {
                None => true,
                Some(compiled) => compiled.as_ref().is_some_and(|c| !c.validator.ready()),
            })
    }

    /// The top-level shape of a declared response media type, without compiling its validator
    /// (spec diffs need the properties, not the validation).
    pub fn response_shape(&self, media: &ResponseMedia) -> Option<std::sync::Arc<BodyShape>> {
        if let Some(compiled) = media.compiled.get() {
            return compiled.as_ref().map(|c| c.shape.clone());
        }
        Some(self.compiler.shape(media.schema.as_deref()?))
    }

    /// Every part of the spec left out or weakened, in document order: the whole-document
    /// checks' (run now if they have not yet: this waits for them), then what was found as the
    /// contract was built, then each schema that could not be compiled when first used.
    pub fn warnings(&self) -> Vec<LoadWarning> {
        let checked = self.compiler.check().iter().map(|w| LoadWarning {
            pointer: self.as_written.pointer(&w.pointer),
            ..w.clone()
        });
        let late = self.compiler.late().into_iter().map(|w| LoadWarning {
            pointer: self.as_written.pointer(&w.pointer),
            ..w
        });
        checked
            .chain(self.warnings.iter().cloned())
            .chain(late)
            .collect()
    }

    /// Run the whole-document checks now if nothing has yet (the sidecar calls it once it is
    /// ready, off the request path; a validator asked for first runs them itself).
    pub fn check(&self) {
        self.compiler.check();
    }

    /// Whether the whole-document checks have run.
    pub fn is_checked(&self) -> bool {
        self.compiler.is_checked()
    }

    /// What a request to `op` is not checked for: its parts left out at load, those the
    /// whole-document checks changed, and its schemas that cannot be compiled. The first call
    /// for an operation compiles every validator of its requests (its parameters and bodies);
    /// later calls read what that found.
    pub fn skipped<'c>(&'c self, op: &'c Operation) -> &'c [Skipped] {
        op.skipped_all.get_or_init(|| {
            let mut all = op.skipped.clone();
            let reached = compile::reached(self.compiler.doc(), self.compiler.check(), &op.pointer);
            let failed = op.params.iter().any(|p| p.validator.failed())
                | op.body
                    .iter()
                    .flat_map(|b| &b.media)
                    .any(|m| m.validator.failed() | shape_failed(&m.shape));
            let more = reached
                .into_iter()
                .chain(failed.then_some(Skipped::Validator));
            for reason in more {
                if !all.contains(&reason) {
                    all.push(reason);
                }
            }
            all
        })
    }

    /// Compile everything now: the whole-document checks and every request validator, so that
    /// [`Contract::warnings`] holds every part that cannot be compiled (`check`, `--strict`).
    pub fn compile_all(&self) {
        for op in &self.operations {
            self.skipped(op);
        }
    }

    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    /// The operations sharing `op`'s method and route (see [`Operation::alternates`]).
    pub fn alternates<'c>(&'c self, op: &'c Operation) -> impl Iterator<Item = &'c Operation> {
        op.alternates.iter().filter_map(|i| self.operations.get(*i))
    }

    /// What a shared `operationId` means for the operator, as `serve --check` and the log at
    /// load say it beside [`Contract::shared_ids`].
    pub const SHARED_ID_MEANS: &str =
        "findings, metrics labels, [policy] and memory.field_map name them together";

    /// Each `operationId` the spec gives to more than one operation, with those operations'
    /// labels (`GET /a`), in the spec's order: what names an operation by id names all of them,
    /// which the operator is told at load.
    pub fn shared_ids(&self) -> Vec<(&str, Vec<String>)> {
        let mut shared: Vec<(&str, Vec<String>)> = Vec::new();
        for op in self.operations.iter().filter(|op| op.id_shared) {
            match shared.iter_mut().find(|(id, _)| *id == op.id) {
                Some((_, labels)) => labels.push(op.label()),
                None => shared.push((&op.id, vec![op.label()])),
            }
        }
        shared
    }

    /// The operation at `index` (its [`Operation::index`]).
    pub fn operation_at(&self, index: usize) -> Option<&Operation> {
        self.operations.get(index)
    }

    /// Find an operation by id (`listInvoices` or `"PUT /api/channels/{id}"`).
    pub fn operation(&self, id: &str) -> Option<&Operation> {
        self.by_id.get(id).map(|i| &self.operations[*i])
    }

    /// Every other operation whose template the path fits (base path stripped as in
    /// [`Contract::route`]), with its raw path values: the candidates for a request the
    /// routed operation refuses. Empty for most paths. A template the routed one is more
    /// concrete than is none (`/accounts/{id}` beside `/accounts/relationships`): OpenAPI
    /// routes the concrete path there whatever the query carries.
    pub fn also_matching<'c, 'p>(
        &'c self,
        method: &str,
        path: &'p str,
        routed: &Operation,
    ) -> Vec<(&'c Operation, Vec<&'p str>)> {
        let method = method.to_ascii_uppercase();
        let path = self.without_base_path(path).unwrap_or(path);
        self.router
            .matching(&method, path, routed.index)
            .into_iter()
            .filter_map(|(i, values)| Some((self.operations.get(i)?, values)))
            .filter(|(op, _)| op.id != routed.id)
            .collect()
    }

    /// The `servers` URLs' paths, longest first (a request made from the spec starts with one).
    pub fn base_paths(&self) -> &[String] {
        self.base_paths.as_slice()
    }

    /// `path` after the first base path (a `servers` URL's path) it starts with, if any.
    fn without_base_path<'p>(&self, path: &'p str) -> Option<&'p str> {
        self.base_paths.strip(path)
    }

    /// Route a request by method (any case) and raw path (no query string): the path with its
    /// base path taken off, then the whole path (a client that leaves the base path out).
    pub fn route<'c, 'p>(&'c self, method: &str, path: &'p str) -> Route<'c, 'p> {
        let mut upper = [0u8; 16];
        let method = match method.len() <= upper.len() {
            true => {
                upper[..method.len()].copy_from_slice(method.as_bytes());
                upper[..method.len()].make_ascii_uppercase();
                std::str::from_utf8(&upper[..method.len()]).unwrap_or(method)
            }
            false => method,
        };
        let stripped = self.without_base_path(path);
        let mut result = match stripped.is_none() && self.base_paths.bound() {
            true => Route::OutsideBasePath,
            false => Route::NotFound,
        };
        for candidate in stripped.into_iter().chain(std::iter::once(path)) {
            match self.router.route(method, candidate) {
                Routed::Found(index, values) => {
                    return Route::Found {
                        operation: &self.operations[index],
                        path_values: values,
                    };
                }
                Routed::MethodNotAllowed(allowed) => result = Route::MethodNotAllowed { allowed },
                Routed::NotFound => {}
            }
        }
        result
    }

    /// For a request no template fits: the operation it would fit if a path value could hold
    /// `/`, and the name of that parameter (which the spec does not let span segments). Only a
    /// value its schema accepts can: `7/settings` is no integer, but an endpoint the spec lacks.
    /// The operation, the parameter's name, and the value (as sent, slash kept).
    pub fn fits_with_slash<'p>(
        &self,
        method: &str,
        path: &'p str,
    ) -> Option<(&Operation, &str, &'p str)> {
        let method = method.to_ascii_uppercase();
        let stripped = self.without_base_path(path);
        stripped
            .into_iter()
            .chain(std::iter::once(path))
            .find_map(|candidate| self.router.fits_with_slash(&method, candidate))
            .and_then(|(index, param, value)| {
                let op = self.operations.get(index)?;
                let name = op.path_params.get(param)?.as_str();
                let declared = op.param(Location::Path, name);
                let ty = declared.map(|p| &p.summary.ty);
                let text = serde_json::Value::String(value.to_string());
                let valid = declared
                    .and_then(|p| p.validator.get())
                    .is_none_or(|v| v.is_valid(&text));
                (valid && matches!(ty, None | Some(FieldType::String | FieldType::Any)))
                    .then_some((op, name, value))
            })
    }

    /// The `n` templates (as `"GET /a/{id}"`) that a path no template fits comes nearest to,
    /// compared segment by segment from the end (a wrong base path or spec version differs at
    /// the start): a literal that matches counts two, a parameter one, the first mismatch
    /// stops. For the operator's warning when most traffic routes nowhere.
    pub fn nearest_templates(&self, path: &str, n: usize) -> Vec<String> {
        let path = path.split(['?', '#']).next().unwrap_or("");
        let path = router::trim_trailing_slash(path);
        let score = |template: &str| -> usize {
            let template = router::split_route(template).0;
            let template = router::trim_trailing_slash(template);
            template
                .rsplit('/')
                .zip(path.rsplit('/'))
                .map_while(|(t, p)| match (t.contains('{'), t == p && !t.is_empty()) {
                    (_, true) => Some(2),
                    (true, false) if !p.is_empty() => Some(1),
                    _ => None,
                })
                .sum()
        };
        let mut scored: Vec<(usize, &Operation)> = self
            .operations
            .iter()
            .map(|op| (score(&op.template), op))
            .filter(|(s, _)| *s > 1)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.index.cmp(&b.1.index)));
        scored
            .into_iter()
            .take(n)
            .map(|(_, op)| op.label())
            .collect()
    }

    /// `path` with every segment that may be a value written `*` (`/api/v1/channels/tok_9f2/x`
    /// is `/api/v1/channels/*/*`): where a request went, without the values a path carries (an
    /// id, a token), for findings, events and logs. The query is left out. The rule is `contract::shape`'s.
    pub fn path_shape(&self, path: &str) -> String {
        self.shapes.of(path)
    }
}

/// Whether a branch validator of `shape` (all compiled now) cannot be compiled.
fn shape_failed(shape: &BodyShape) -> bool {
    match shape {
        BodyShape::Variants(branches) => branches
            .iter()
            .any(|(validator, branch)| validator.failed() | shape_failed(branch)),
        BodyShape::Array(items) => shape_failed(items),
        BodyShape::Object { .. } | BodyShape::Opaque => false,
    }
}
