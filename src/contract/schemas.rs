//! Compiling JSON Schema validators and body shapes. The whole document is registered once
//! under a URN and each validator is built from `{"$ref": "urn:driftwatch:spec#<pointer>"}`,
//! so refs inside a schema resolve against the document (compiling a sub-schema on its own
//! loses them). Results are cached by pointer: ErsatzTV declares one schema under four media
//! types, and GitHub reuses components across hundreds of operations.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jsonschema::json::{Json, SerdeJson};
use jsonschema::{Draft, Registry, Validator};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::{Value, json};

use super::lazy::{LazyBody, Validators};
use super::operation::{Additional, BodyShape, Property};
use super::resolve::deref_at;
use super::types::summarize;
use crate::json::Tape;
use crate::spec::SpecError;

const URN: &str = "urn:driftwatch:spec";

/// Characters a URI fragment cannot carry as they are.
const FRAGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'|')
    .add(b'\\')
    .add(b'^')
    .add(b'[')
    .add(b']');

const MAX_DEPTH: usize = 8;

/// Validators and shapes by schema pointer, compiled on demand against one registry. Owns its
/// document, so the contract keeps it after the load to compile response schemas lazily.
pub(super) struct Schemas {
    pub doc: Arc<Value>,
    file: PathBuf,
    registry: Arc<Registry<'static>>,
    /// Parameter validators, which read `Value`s (a coerced parameter is one).
    validators: HashMap<String, Arc<Validator>>,
    /// Body and response validators, which read bodies as parsed (`crate::json`): at most
    /// `max_bodies`, the oldest let go first (`bodies_kept` holds their order).
    body_validators: HashMap<String, Arc<Validator<Tape>>>,
    bodies_kept: std::collections::VecDeque<String>,
    pub max_bodies: usize,
    /// Schemas that could not be compiled, with the reason: a shared component refused once is
    /// not compiled again for every operation that refers to it.
    failed: HashMap<String, String>,
    shapes: HashMap<String, Arc<BodyShape>>,
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schemas")
            .field("validators", &self.validators.len())
            .field("shapes", &self.shapes.len())
            .finish()
    }
}

/// A representation validators are compiled for, each with its own cache.
pub(super) trait Reads: Json {
    fn cache(schemas: &mut Schemas) -> &mut HashMap<String, Arc<Validator<Self>>>;
    /// Keep a validator just compiled.
    fn keep(schemas: &mut Schemas, pointer: String, validator: Arc<Validator<Self>>) {
        Self::cache(schemas).insert(pointer, validator);
    }
}

impl Reads for SerdeJson {
    fn cache(schemas: &mut Schemas) -> &mut HashMap<String, Arc<Validator<Self>>> {
        &mut schemas.validators
    }
}

impl Reads for Tape {
    fn cache(schemas: &mut Schemas) -> &mut HashMap<String, Arc<Validator<Self>>> {
        &mut schemas.body_validators
    }

    /// Past `max_bodies`, the oldest is let go: it is compiled again if asked for again.
    fn keep(schemas: &mut Schemas, pointer: String, validator: Arc<Validator<Self>>) {
        while schemas.bodies_kept.len() >= schemas.max_bodies.max(1) {
            let Some(oldest) = schemas.bodies_kept.pop_front() else {
                break;
            };
            schemas.body_validators.remove(&oldest);
        }
        schemas.bodies_kept.push_back(pointer.clone());
        schemas.body_validators.insert(pointer, validator);
    }
}

/// What asking for a validator takes ([`Schemas::wanted`]).
pub(super) enum Wanted<F: Json> {
    Kept(Arc<Validator<F>>),
    Failed(SpecError),
    Compile(Compile),
}

/// A schema to compile, with the registry its references resolve in.
pub(super) struct Compile {
    pointer: String,
    registry: Arc<Registry<'static>>,
}

impl Compile {
    pub fn run<F: Reads>(&self) -> Result<Validator<F>, String> {
        let reference = format!("{URN}#{}", utf8_percent_encode(&self.pointer, FRAGMENT));
        jsonschema::options_for::<F>()
            .with_draft(Draft::Draft202012)
            .with_registry(&self.registry)
            .offline()
            .build(&json!({ "$ref": reference }))
            .map_err(|e| format!("the schema cannot be compiled: {e}"))
    }
}

impl Schemas {
    pub fn new(doc: Arc<Value>, file: &Path) -> Result<Schemas, SpecError> {
        let registry = Registry::new()
            .draft(Draft::Draft202012)
            .add(URN, doc.clone())
            .and_then(|b| b.prepare())
            .map_err(|e| {
                SpecError::at(
                    file,
                    "",
                    format!("the document cannot be used as a JSON Schema registry: {e}"),
                )
            })?;
        Ok(Schemas {
            doc,
            file: file.to_path_buf(),
            registry: Arc::new(registry),
            validators: HashMap::new(),
            body_validators: HashMap::new(),
            bodies_kept: Default::default(),
            max_bodies: usize::MAX,
            failed: HashMap::new(),
            shapes: HashMap::new(),
        })
    }

    /// What the validator for the schema at `pointer` (refs followed first, so aliases share
    /// one) takes, for the representation `F` its instances come in: one kept, a failure
    /// known, or a compile, which the caller runs without holding these schemas (a large
    /// schema takes tens of milliseconds, and every other compile would wait for it).
    pub fn wanted<F: Reads>(&mut self, pointer: &str) -> Wanted<F> {
        let doc = self.doc.clone();
        let value = doc.pointer(pointer).unwrap_or(&Value::Null);
        let (pointer, _) = deref_at(&doc, Cow::Borrowed(pointer), value);
        if let Some(v) = F::cache(self).get(pointer.as_ref()) {
            return Wanted::Kept(v.clone());
        }
        if let Some(reason) = self.failed.get(pointer.as_ref()) {
            return Wanted::Failed(SpecError::at(&self.file, &pointer, reason.clone()));
        }
        Wanted::Compile(Compile {
            pointer: pointer.into_owned(),
            registry: self.registry.clone(),
        })
    }

    /// Keep what `compile` made (or the validator another thread kept for it meanwhile), or
    /// its failure, so that it is not compiled again.
    pub fn keep<F: Reads>(
        &mut self,
        compile: Compile,
        made: Result<Validator<F>, String>,
    ) -> Result<Arc<Validator<F>>, SpecError> {
        let pointer = compile.pointer;
        if let Some(v) = F::cache(self).get(&pointer) {
            return Ok(v.clone());
        }
        match made {
            Ok(validator) => {
                let validator = Arc::new(validator);
                F::keep(self, pointer, validator.clone());
                Ok(validator)
            }
            Err(reason) => {
                let error = SpecError::at(&self.file, &pointer, reason.clone());
                self.failed.insert(pointer, reason);
                Err(error)
            }
        }
    }

    /// The top-level shape of the body schema at `pointer`; its branches' validators come
    /// from `compiler` when first used.
    pub fn shape(&mut self, pointer: &str, compiler: &Arc<dyn Validators>) -> Arc<BodyShape> {
        let doc = self.doc.clone();
        let value = doc.pointer(pointer).unwrap_or(&Value::Null);
        let (pointer, _) = deref_at(&doc, Cow::Borrowed(pointer), value);
        if let Some(shape) = self.shapes.get(pointer.as_ref()) {
            return shape.clone();
        }
        let shape = Arc::new(self.build_shape(&pointer, 0, compiler));
        self.shapes.insert(pointer.into_owned(), shape.clone());
        shape
    }

    fn build_shape(
        &mut self,
        pointer: &str,
        depth: usize,
        compiler: &Arc<dyn Validators>,
    ) -> BodyShape {
        let shared = self.doc.clone();
        let doc: &Value = &shared;
        let value = doc.pointer(pointer).unwrap_or(&Value::Null);
        let (pointer, schema) = deref_at(doc, Cow::Borrowed(pointer), value);
        if depth > MAX_DEPTH {
            return BodyShape::Opaque;
        }
        for keyword in ["oneOf", "anyOf"] {
            let Some(branches) = schema.get(keyword).and_then(Value::as_array) else {
                continue;
            };
            let concrete: Vec<String> = (0..branches.len())
                .filter(|i| !is_null_schema(doc, &branches[*i]))
                .map(|i| format!("{pointer}/{keyword}/{i}"))
                .collect();
            if let [only] = concrete.as_slice() {
                return self.build_shape(only, depth + 1, compiler);
            }
            let mut variants = Vec::with_capacity(concrete.len());
            for branch in concrete {
                let shape = self.build_shape(&branch, depth + 1, compiler);
                variants.push((LazyBody::new(Some(branch), compiler.clone()), shape));
            }
            return BodyShape::Variants(variants);
        }
        if is_array_schema(schema) && schema.get("items").is_some() {
            let items = self.build_shape(&format!("{pointer}/items"), depth + 1, compiler);
            return match items {
                BodyShape::Opaque => BodyShape::Opaque,
                items => BodyShape::Array(Arc::new(items)),
            };
        }
        object_shape(doc, &pointer, schema)
    }
}

/// The shape of an object schema (its properties, from `allOf` unions and `$ref`s, each
/// marked required or not; the names only some branch declares; whether it takes others), or
/// opaque where the schema is no object.
fn object_shape(doc: &Value, pointer: &str, schema: &Value) -> BodyShape {
    let (mut properties, mut alternatives) = (Vec::new(), Vec::new());
    let mut required = Vec::new();
    let mut is_object = false;
    collect_object(
        doc,
        pointer,
        schema,
        (&mut properties, &mut alternatives),
        &mut required,
        &mut is_object,
        0,
    );
    if !is_object {
        return BodyShape::Opaque;
    }
    for p in &mut properties {
        p.required = required.contains(&p.name);
    }
    let additional = match (
        schema.get("additionalProperties"),
        schema.get("unevaluatedProperties"),
    ) {
        (Some(Value::Bool(false)), _) | (_, Some(Value::Bool(false))) => Additional::Forbidden,
        (Some(_), _) | (None, Some(_)) => Additional::Allowed,
        (None, None) => Additional::Absent,
    };
    alternatives.retain(|name| !properties.iter().any(|p| &p.name == name));
    BodyShape::Object {
        properties,
        additional,
        alternatives,
    }
}

/// Gather the properties and `required` names of an object schema and its `allOf` branches.
fn collect_object(
    doc: &Value,
    pointer: &str,
    schema: &Value,
    (properties, alternatives): (&mut Vec<Property>, &mut Vec<String>),
    required: &mut Vec<String>,
    is_object: &mut bool,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    if schema.get("type") == Some(&json!("object")) || schema.get("properties").is_some() {
        *is_object = true;
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            if !properties.iter().any(|p| &p.name == name) {
                properties.push(property(doc, name, prop));
            }
        }
    }
    if let Some(names) = schema.get("required").and_then(Value::as_array) {
        required.extend(names.iter().filter_map(Value::as_str).map(String::from));
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for (i, branch) in all.iter().enumerate() {
            let (branch_ptr, branch) =
                deref_at(doc, Cow::Owned(format!("{pointer}/allOf/{i}")), branch);
            collect_object(
                doc,
                &branch_ptr,
                branch,
                (properties, alternatives),
                required,
                is_object,
                depth + 1,
            );
        }
    }
    if depth > 0 {
        let seen = (properties.as_slice(), alternatives);
        collect_alternatives(doc, pointer, schema, seen, is_object, depth);
    }
}

/// One declared property, as the audit and the catalog read it.
fn property(doc: &Value, name: &str, prop: &Value) -> Property {
    let summary = summarize(doc, prop);
    Property {
        name: name.to_string(),
        members: super::types::members(doc, prop, &summary),
        summary,
        required: false,
        read_only: flag(doc, prop, "readOnly"),
        write_only: flag(doc, prop, "writeOnly"),
        enum_values: super::types::enum_values(doc, prop),
        description: super::resolve::deref(doc, prop)
            .get("description")
            .or_else(|| prop.get("description"))
            .and_then(Value::as_str)
            .map(String::from),
    }
}

/// Inside an `allOf` branch, the properties of its `anyOf`/`oneOf` branches are declared too
/// (a body may carry any of them), as alternatives: none is required of every body, nor
/// omitted by a body that carries another branch's.
fn collect_alternatives(
    doc: &Value,
    pointer: &str,
    schema: &Value,
    (properties, alternatives): (&[Property], &mut Vec<String>),
    is_object: &mut bool,
    depth: usize,
) {
    for keyword in ["anyOf", "oneOf"] {
        for (i, branch) in schema
            .get(keyword)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let (branch_ptr, branch) =
                deref_at(doc, Cow::Owned(format!("{pointer}/{keyword}/{i}")), branch);
            let (mut theirs, mut optional) = (Vec::new(), Vec::new());
            collect_object(
                doc,
                &branch_ptr,
                branch,
                (&mut theirs, alternatives),
                &mut optional,
                is_object,
                depth + 1,
            );
            for p in theirs {
                if !properties.iter().any(|q| q.name == p.name) && !alternatives.contains(&p.name) {
                    alternatives.push(p.name);
                }
            }
        }
    }
}

/// Whether `readOnly`/`writeOnly` is set on a property: on its schema, on what its `$ref`
/// points to, or on an `allOf`/`anyOf` member (the usual way to annotate a referenced model).
pub(super) fn flag(doc: &Value, schema: &Value, name: &str) -> bool {
    let direct = |s: &Value| s.get(name) == Some(&Value::Bool(true));
    if direct(schema) || direct(super::resolve::deref(doc, schema)) {
        return true;
    }
    ["allOf", "anyOf"]
        .iter()
        .filter_map(|k| schema.get(*k).and_then(Value::as_array))
        .flatten()
        .any(|s| direct(s) || direct(super::resolve::deref(doc, s)))
}

fn is_null_schema(doc: &Value, schema: &Value) -> bool {
    let schema = super::resolve::deref(doc, schema);
    schema.get("type") == Some(&json!("null")) || schema.get("enum") == Some(&json!([null]))
}

/// `type: array`, or a type list naming it (`["array", "null"]`, a normalized 3.0 nullable).
fn is_array_schema(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(types)) => types.iter().any(|t| t == "array"),
        _ => false,
    }
}
