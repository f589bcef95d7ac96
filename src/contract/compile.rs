//! Building a [`Contract`] from a [`Spec`]: one pass over `paths`, merging path-level and
//! operation-level parameters, compiling parameter and body schemas, deciding write semantics.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::compiler::Compiler;
use super::lazy::{Lazy, LazyBody};
use super::operation::{MediaBody, Operation, Param, RequestBody, Style, WriteSemantics};
use super::resolve::deref_at;
use super::response::{DeclaredResponse, ResponseMedia, Responses};
use super::router::{RouteError, Router, split_route, template_params};
use super::shown::{is_json, response_fields};
use super::types::{FieldType, summarize};
use super::warning::{LoadWarning, Skipped};
use super::{Contract, ContractOptions};
use crate::finding::Location;
use crate::spec::bundle_pointer as token;
use crate::spec::{Spec, SpecError};

use crate::spec::METHODS;

pub(super) fn compile(spec: &Spec, options: &ContractOptions) -> Result<Contract, SpecError> {
    let compiler = Arc::new(Compiler::new(
        spec.doc.clone(),
        &spec.source,
        options.max_ref_depth,
        options.max_compiled,
    )?);
    let doc: &Value = &spec.doc;
    let notes = spec.notes.iter().map(|n| {
        let reason = match n.kind {
            crate::spec::NoteKind::DuplicateKey => Skipped::DuplicateKey,
            crate::spec::NoteKind::CircularRef => Skipped::CircularRef,
            crate::spec::NoteKind::OverlayTarget => Skipped::OverlayTarget,
        };
        LoadWarning::new(&n.pointer, reason, &n.detail)
    });
    let mut warnings = Warnings {
        list: notes.collect(),
        skipped_here: Vec::new(),
    };
    let (mut operations, router) = compile_paths(&compiler, options, &mut warnings);
    let takes_credentials = credentials_checked(&mut operations, options.credentials);
    link_resources(doc, options, &mut operations);
    let base_paths = super::base::BasePaths::new(doc, options.base_path.as_deref());
    let mut by_id = std::collections::HashMap::new();
    for (i, op) in operations.iter_mut().enumerate() {
        op.index = i;
        by_id.entry(op.id.clone()).or_insert(i);
    }
    let shapes = super::shape::Shapes::new(
        operations.iter().map(|op| op.template.as_str()),
        base_paths.as_slice(),
    );
    let contract = Contract {
        shapes,
        openapi: spec.openapi.clone(),
        max_findings: options.max_findings.max(1),
        secrets: super::security::Secrets::of(doc),
        takes_credentials,
        warnings: warnings.list,
        operations,
        by_id,
        router,
        base_paths,
        compiler,
        as_written: spec.as_written(),
    };
    if options.lazy && !options.strict {
        return Ok(contract);
    }
    contract.compile_all();
    match options.strict {
        true => strict(spec, contract),
        false => Ok(contract),
    }
}

/// Whether some operation's `security` takes a credential; unless `check`, none is checked.
fn credentials_checked(operations: &mut [Operation], check: bool) -> bool {
    let takes = operations.iter().any(|op| op.security.is_some());
    if !check {
        operations.iter_mut().for_each(|op| op.security = None);
    }
    takes
}

/// Every operation of `paths`, each routed.
fn compile_paths(
    compiler: &Arc<Compiler>,
    options: &ContractOptions,
    warnings: &mut Warnings,
) -> (Vec<Operation>, Router) {
    let doc: &Value = compiler.doc();
    let mut operations: Vec<Operation> = Vec::new();
    let mut router = Router::default();
    let paths = doc
        .get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flatten();
    for (template, item) in paths {
        let item_ptr = format!("/paths{}", token(template));
        let (item_ptr, item) = deref_at(doc, Cow::Owned(item_ptr), item);
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let op_ptr = format!("{item_ptr}/{method}");
            let operation = compile_operation(
                compiler, warnings, options, template, method, item, &item_ptr, op, op_ptr,
            );
            let compiled = (&mut router, &mut operations, &mut *warnings);
            add_operation(compiled, template, operation);
        }
    }
    (operations, router)
}

/// Route `operation` (whose path is `template`), index it and keep it. A route another
/// operation holds is an ambiguous route, unless the keys of its template tell the two apart;
/// either way the first keeps the other as an alternate.
fn add_operation(
    (router, operations, warnings): (&mut Router, &mut Vec<Operation>, &mut Warnings),
    template: &str,
    mut operation: Operation,
) {
    let index = operations.len();
    // A template with a query or fragment part (`/a?x={x}`, `/#X-Amz-Target=...`) is routed
    // by its path alone; its keys tell apart the operations sharing the path.
    let (route, _) = split_route(template);
    let spanning: Vec<String> = operation
        .params_in(Location::Path)
        .filter(|p| p.spans_segments)
        .map(|p| p.name.clone())
        .collect();
    let inserted = router.insert(&operation.method, route, index, &spanning, |i| {
        operations_id(operations, i)
    });
    if let Err(e @ RouteError::Duplicate { first_index, .. }) = &inserted {
        let first = *first_index;
        let told_apart = !operation.route_keys.is_empty()
            && operation.route_keys != operations[first].route_keys;
        if !told_apart {
            warnings.push(&operation.pointer, Skipped::AmbiguousRoute, e.to_string());
            operation.skipped.push(Skipped::AmbiguousRoute);
            operations[first].skipped.push(Skipped::AmbiguousRoute);
        }
        operations[first].alternates.push(index);
    }
    operations.push(operation);
}

/// `--strict`: the contract, or its first warning as an error.
fn strict(spec: &Spec, contract: Contract) -> Result<Contract, SpecError> {
    let warnings = contract.warnings();
    let Some(first) = warnings.first() else {
        return Ok(contract);
    };
    Err(SpecError::at(
        &spec.source,
        &first.pointer,
        format!(
            "{} skipped: {} (refused by --strict; without it the spec loads with {} warning(s))",
            first.reason.as_str(),
            first.detail,
            warnings.len()
        ),
    ))
}

fn operations_id(operations: &[Operation], index: usize) -> String {
    operations
        .get(index)
        .map(|op| op.id.clone())
        .unwrap_or_default()
}

#[allow(clippy::too_many_arguments)]
fn compile_operation(
    compiler: &Arc<Compiler>,
    warnings: &mut Warnings,
    options: &ContractOptions,
    template: &str,
    method: &str,
    item: &Value,
    item_ptr: &str,
    op: &Value,
    op_ptr: String,
) -> Operation {
    let upper = method.to_ascii_uppercase();
    let id = text(op, "operationId").unwrap_or_else(|| format!("{upper} {template}"));
    warnings.skipped_here.clear();
    let levels = [
        (item.get("parameters"), format!("{item_ptr}/parameters")),
        (op.get("parameters"), format!("{op_ptr}/parameters")),
    ];
    let (params, open_query) = merged_params(compiler, warnings, levels);
    let body = (op.get("requestBody"))
        .map(|raw| compile_body(compiler, raw, format!("{op_ptr}/requestBody")));
    let shown = response_fields(compiler.doc(), op).unwrap_or_default();
    let (write, write_reason) = write_of(options, op, &id, &format!("{upper} {template}"));
    let (route, route_keys) = split_route(template);
    Operation {
        index: 0,
        id,
        id_shared: false,
        method: upper,
        template: template.to_string(),
        summary: summary(op),
        path_params: template_params(route),
        params,
        body,
        write,
        write_reason,
        response_fields: (!shown.names.is_empty()).then_some(shown.names),
        response_required: shown.required,
        computed: shown.read_only,
        responses: compile_responses(compiler.doc(), op, &op_ptr),
        replaced_by: Vec::new(),
        pointer: op_ptr,
        remembers: false,
        read_fields: None,
        resource: None,
        read: None,
        lists: None,
        answers_resource: false,
        read_hint: text(op, "x-driftwatch-read"),
        credentials: super::security::credentials(compiler.doc(), op),
        bearer: super::security::bearer(compiler.doc(), op),
        security: super::security::security(compiler.doc(), op),
        open_query,
        alternates: Vec::new(),
        route_keys,
        skipped: std::mem::take(&mut warnings.skipped_here),
        skipped_all: OnceLock::new(),
    }
}

/// Its `summary`, else its `description`, cut to 300 characters.
fn summary(op: &Value) -> Option<String> {
    (op.get("summary").or_else(|| op.get("description")))
        .and_then(Value::as_str)
        .map(|s| s.chars().take(300).collect())
}

/// How the write `label` (`PUT /a/{id}`) is read, and why: as the config or the spec names it,
/// else by its method.
fn write_of(
    options: &ContractOptions,
    op: &Value,
    id: &str,
    label: &str,
) -> (WriteSemantics, super::WriteReason) {
    let method = label.split(' ').next().unwrap_or_default();
    super::writes::named(&options.write_overrides, op, id, label).unwrap_or((
        WriteSemantics::default_for(method),
        super::WriteReason::Method,
    ))
}

/// The parameters of the path item and of the operation (`levels`, in that order), merged: an
/// operation's parameter replaces the path item's of the same name and place. `true` with
/// them when one could not be read: its name or place is unknown, so no query key can be
/// called unknown.
fn merged_params(
    compiler: &Arc<Compiler>,
    warnings: &mut Warnings,
    levels: [(Option<&Value>, String); 2],
) -> (Vec<Param>, bool) {
    let mut params: Vec<Param> = Vec::new();
    let mut open_query = false;
    for (list, list_ptr) in levels {
        for (i, raw) in list
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let param = match compile_param(compiler, raw, format!("{list_ptr}/{i}")) {
                Ok(Some(param)) => param,
                Ok(None) => continue,
                Err((pointer, reason)) => {
                    warnings.push(&pointer, Skipped::Parameter, reason);
                    open_query = true;
                    continue;
                }
            };
            params.retain(|p| !(p.name == param.name && p.location == param.location));
            params.push(param);
        }
    }
    (params, open_query)
}

/// A path parameter whose value may hold `/` unescaped, by the markers real specs use: GitHub's
/// `x-multi-segment`, Azure's `x-ms-skip-url-encoding`, and `allowReserved` (OpenAPI defines it
/// for the query only; OPA's spec puts it on its `/v1/data/{path}`).
fn spans_segments(param: &Value) -> bool {
    ["x-multi-segment", "x-ms-skip-url-encoding", "allowReserved"]
        .iter()
        .any(|marker| param.get(*marker) == Some(&Value::Bool(true)))
}

/// Mark each operation whose id another one has too.
fn mark_shared_ids(operations: &mut [Operation]) {
    let mut count: HashMap<String, usize> = HashMap::new();
    for op in operations.iter() {
        *count.entry(op.id.clone()).or_default() += 1;
    }
    for op in operations.iter_mut() {
        op.id_shared = count[&op.id] > 1;
    }
}

/// Each operation told what it is to the others: ids shared, each write's semantics and the
/// GET of its resource, and the answers that show a remembered resource besides its GET.
fn link_resources(doc: &Value, options: &ContractOptions, operations: &mut [Operation]) {
    mark_shared_ids(operations);
    let reads = reads_of(operations, &options.read_for);
    super::writes::infer(operations, &reads);
    link_reads_and_replaces(operations, &reads);
    super::views::link(doc, operations, &reads);
}

/// For each write, the GET that shows its resource: the one on the same path template, or on
/// another where the config (`read_for`) or the write's `x-driftwatch-read` says so.
fn reads_of(operations: &[Operation], read_for: &HashMap<String, String>) -> Vec<Option<usize>> {
    let shape = |t: &str| super::router::normalize_template(t);
    // The first GET of each route shape, computed once (a scan per write was quadratic).
    let mut gets: HashMap<String, usize> = HashMap::new();
    for (i, op) in operations.iter().enumerate() {
        if op.method == "GET" {
            gets.entry(shape(&op.template)).or_insert(i);
        }
    }
    operations
        .iter()
        .map(|op| {
            if op.write == WriteSemantics::None {
                return None;
            }
            let named = read_for
                .get(&op.id)
                .or_else(|| read_for.get(&op.label()))
                .or(op.read_hint.as_ref());
            match named {
                Some(name) => operations
                    .iter()
                    .position(|o| o.method == "GET" && (o.id == *name || o.label() == *name)),
                None => gets.get(&shape(&op.template)).copied(),
            }
        })
        .collect()
}

/// A GET and a replace write (`reads`: the GET of each write) are one resource: the GET's
/// responses are remembered, and the write is compared against them.
fn link_reads_and_replaces(operations: &mut [Operation], reads: &[Option<usize>]) {
    // A resource is named by its GET's id, or by the GET's label where another operation has
    // the same id: two GETs under one name would share the memory, and one's fields would
    // judge the other's writes.
    let name = |op: &Operation| match op.id_shared {
        false => op.id.clone(),
        true => op.label(),
    };
    for i in 0..operations.len() {
        if operations[i].write != WriteSemantics::Replace {
            continue;
        }
        if let Some(read) = reads[i] {
            operations[i].read_fields = operations[read]
                .response_fields
                .clone()
                .or_else(|| Some(Vec::new()));
            // What the resource's GET marks `readOnly` the API computes: not the write's to clear.
            let computed = operations[read].computed.clone();
            let write = &mut operations[i].computed;
            for name in computed {
                if !write.contains(&name) {
                    write.push(name);
                }
            }
            let resource = name(&operations[read]);
            operations[i].read = Some(read);
            operations[i].resource = Some(resource.clone());
            operations[read].remembers = true;
            operations[read].replaced_by.push(i);
            operations[read].resource = Some(resource);
        }
    }
}

/// A parameter, `None` for one OpenAPI says to ignore, or the pointer and reason it was left out.
fn compile_param(
    compiler: &Arc<Compiler>,
    raw: &Value,
    pointer: String,
) -> Result<Option<Param>, (String, String)> {
    let doc: &Value = compiler.doc();
    let (pointer, param) = deref_at(doc, Cow::Owned(pointer), raw);
    let invalid = |reason: &str| (pointer.to_string(), reason.to_string());
    let name = param
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("a parameter needs a string `name`"))?;
    let location = param
        .get("in")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("a parameter needs `in`"))?;
    let location = Location::parse(location)
        .ok_or_else(|| invalid("`in` must be one of path, query, header, cookie"))?;
    if location == Location::Header
        && ["accept", "content-type", "authorization"].contains(&name.to_ascii_lowercase().as_str())
    {
        return Ok(None); // OpenAPI: such header parameter definitions SHALL be ignored.
    }
    let (style, explode) = style_of(param, location).map_err(invalid)?;
    let (schema_ptr, json_content) = param_schema(param, &pointer);
    let schema = schema_ptr.as_deref().and_then(|p| doc.pointer(p));
    let any = super::TypeSummary {
        ty: FieldType::Any,
        nullable: false,
    };
    let summary = schema.map_or(any, |s| summarize(doc, s));
    let (properties, free_form) = match (&summary.ty, schema) {
        (FieldType::Object, Some(s)) => object_keys(doc, s),
        _ => (Vec::new(), false),
    };
    let validator = Lazy::new(schema_ptr, compiler.clone());
    Ok(Some(Param {
        name: if location == Location::Header {
            name.to_ascii_lowercase()
        } else {
            name.to_string()
        },
        location,
        required: location == Location::Path || param.get("required") == Some(&Value::Bool(true)),
        style,
        explode,
        members: schema
            .map(|s| super::types::members(doc, s, &summary))
            .unwrap_or_default(),
        summary,
        properties,
        free_form,
        json_content,
        allow_empty: param.get("allowEmptyValue") == Some(&Value::Bool(true)),
        spans_segments: location == Location::Path && spans_segments(param),
        enum_values: schema.and_then(|s| super::types::enum_values(doc, s)),
        description: text(param, "description"),
        validator,
    }))
}

/// A parameter's style (by default `form` in the query and cookies, else `simple`) and
/// whether it explodes (by default, `form` does); or why its style is none.
fn style_of(param: &Value, location: Location) -> Result<(Style, bool), &'static str> {
    let default_style = match location {
        Location::Query | Location::Cookie => Style::Form,
        _ => Style::Simple,
    };
    let style = match param.get("style").and_then(Value::as_str) {
        Some(s) => Style::parse(s).ok_or("unknown parameter `style`")?,
        None => default_style,
    };
    let explode = param
        .get("explode")
        .and_then(Value::as_bool)
        .unwrap_or(style == Style::Form);
    Ok((style, explode))
}

/// A text member of an object, if it is one.
fn text(object: &Value, key: &str) -> Option<String> {
    object.get(key).and_then(Value::as_str).map(String::from)
}

/// Where a parameter's schema is: its `schema`, or the schema of its `content`'s one media
/// type (and whether that type is JSON); `None` where it gives neither.
fn param_schema(param: &Value, pointer: &str) -> (Option<String>, bool) {
    match (
        param.get("schema"),
        param.get("content").and_then(Value::as_object),
    ) {
        (Some(_), _) => (Some(format!("{pointer}/schema")), false),
        (None, Some(content)) => match content.iter().next() {
            Some((media, m)) if m.get("schema").is_some() => (
                Some(format!("{pointer}/content{}/schema", token(media))),
                is_json(media),
            ),
            _ => (None, false),
        },
        (None, None) => (None, false),
    }
}

/// Declared property names of an object parameter, and whether it accepts other keys too.
fn object_keys(doc: &Value, schema: &Value) -> (Vec<(String, FieldType)>, bool) {
    let schema = super::resolve::deref(doc, schema);
    let names = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .map(|(name, s)| (name.clone(), summarize(doc, s).ty))
                .collect()
        })
        .unwrap_or_default();
    // JSON Schema: without `additionalProperties: false`, other keys are allowed.
    let free = schema.get("additionalProperties") != Some(&Value::Bool(false));
    (names, free)
}

/// Every entry of the operation's `responses`, with the pointer of each media type's schema:
/// compiled when a response first needs it (GitHub's responses, compiled all at load, would
/// double its load time and peak memory for schemas most deployments never see).
fn compile_responses(doc: &Value, op: &Value, op_ptr: &str) -> Responses {
    let mut declared = Vec::new();
    for (status, raw) in op
        .get("responses")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if status.starts_with("x-") {
            continue;
        }
        let pointer = format!("{op_ptr}/responses{}", token(status));
        let (pointer, response) = deref_at(doc, Cow::Owned(pointer), raw);
        let media = response
            .get("content")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(media_type, m)| ResponseMedia {
                media_type: media_type.to_ascii_lowercase(),
                json: is_json(media_type),
                schema: m
                    .get("schema")
                    .map(|_| format!("{pointer}/content{}/schema", token(media_type))),
                summary: m.get("schema").map(|s| summarize(doc, s)),
                compiled: Default::default(),
            })
            .collect();
        declared.push(DeclaredResponse {
            status: status.clone(),
            media,
        });
    }
    Responses { declared }
}

fn compile_body(compiler: &Arc<Compiler>, raw: &Value, pointer: String) -> RequestBody {
    let (pointer, body) = deref_at(compiler.doc(), Cow::Owned(pointer), raw);
    RequestBody {
        required: body
            .get("required")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        media: compile_media(compiler, body, &pointer),
        example_keys: example_keys(compiler.doc(), body),
    }
}

/// The top-level keys of a body's JSON examples (`example`, and each of `examples`' values).
fn example_keys(doc: &Value, body: &Value) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    let media = body
        .get("content")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(media_type, _)| is_json(media_type))
        .map(|(_, m)| super::resolve::deref(doc, m));
    for m in media {
        let named = m
            .get("examples")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(_, e)| super::resolve::deref(doc, e).get("value"));
        for example in m.get("example").into_iter().chain(named) {
            for key in example.as_object().into_iter().flat_map(|o| o.keys()) {
                if !keys.contains(key) {
                    keys.push(key.clone());
                }
            }
        }
    }
    keys
}

/// The `content` map of a request body: each media type with its validator and shape (the
/// validator for JSON types only, the shape for JSON and form types; others are matched by name
/// alone).
fn compile_media(compiler: &Arc<Compiler>, body: &Value, pointer: &str) -> Vec<MediaBody> {
    let mut media = Vec::new();
    for (media_type, m) in body
        .get("content")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let json = is_json(media_type);
        let schema_ptr = m
            .get("schema")
            .map(|_| format!("{pointer}/content{}/schema", token(media_type)));
        // Form bodies are not parsed on the wire, but their fields are the tool catalog's to
        // compare (Stripe and Slack send nothing else).
        let shape = match &schema_ptr {
            Some(p) if json || is_form(media_type) => compiler.shape(p),
            _ => Arc::new(super::BodyShape::Opaque),
        };
        media.push(MediaBody {
            media_type: media_type.to_ascii_lowercase(),
            json,
            validator: LazyBody::new(schema_ptr.filter(|_| json), compiler.clone()),
            shape,
            summary: summarize(compiler.doc(), m.get("schema").unwrap_or(&Value::Null)),
        });
    }
    media
}

/// Form media types, whose fields are named like a JSON object's: `application/x-www-form-urlencoded`
/// and `multipart/form-data`.
pub(crate) fn is_form(media_type: &str) -> bool {
    let essence = media_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/x-www-form-urlencoded")
        || essence.eq_ignore_ascii_case("multipart/form-data")
}

/// The warnings of one compile, and the reasons that touched the operation being compiled.
struct Warnings {
    list: Vec<LoadWarning>,
    skipped_here: Vec<Skipped>,
}

impl Warnings {
    fn push(&mut self, pointer: &str, reason: Skipped, detail: impl AsRef<str>) {
        if !self.skipped_here.contains(&reason) {
            self.skipped_here.push(reason);
        }
        if !self
            .list
            .iter()
            .any(|w| w.pointer == pointer && w.reason == reason)
        {
            self.list.push(LoadWarning::new(pointer, reason, detail));
        }
    }
}

/// The reasons of the whole-document checks' `warnings` that the operation at `op_ptr`
/// reaches (through `$ref`s): what they changed is not checked in its requests.
pub(super) fn reached(doc: &Value, warnings: &[LoadWarning], op_ptr: &str) -> Vec<Skipped> {
    let changed = |w: &&LoadWarning| {
        matches!(
            w.reason,
            Skipped::Pattern | Skipped::Schema | Skipped::RefDepth
        )
    };
    let mut reasons = Vec::new();
    if !warnings.iter().any(|w| changed(&w)) {
        return reasons;
    }
    let mut seen = std::collections::HashSet::new();
    let mut reached = Vec::new();
    reach(doc, op_ptr, &mut seen, &mut reached);
    for w in warnings.iter().filter(changed) {
        let hit = reached.iter().any(|p| {
            w.pointer
                .strip_prefix(p.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        });
        if hit && !reasons.contains(&w.reason) {
            reasons.push(w.reason);
        }
    }
    reasons
}

/// The pointers of `pointer`'s subtree and of every subtree its `$ref`s lead to.
fn reach(
    doc: &Value,
    pointer: &str,
    seen: &mut std::collections::HashSet<String>,
    out: &mut Vec<String>,
) {
    if !seen.insert(pointer.to_string()) {
        return;
    }
    out.push(pointer.to_string());
    let mut stack = vec![doc.pointer(pointer)];
    while let Some(Some(value)) = stack.pop() {
        match value {
            Value::Object(map) => {
                if let Some(target) = map
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(crate::spec::local_target)
                {
                    reach(doc, &target, seen, out);
                }
                stack.extend(map.values().map(Some));
            }
            Value::Array(items) => stack.extend(items.iter().map(Some)),
            _ => {}
        }
    }
}
