//! `tools --generate`: a `tools/list` derived from the spec, one flat tool per enabled
//! operation with every parameter and body property, its type, description and required flag.
//! It passes the parity check against the same spec by construction (and by test).

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::find_operation;
use crate::contract::{BodyShape, Contract, FieldType, Operation, WriteSemantics};
use crate::finding::Location;

/// A name in the enabled list that the spec does not have: the list is the user's to fix.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not an operation of the spec")]
pub struct UnknownOperation(pub String);

/// The `tools/list` for the operations `enabled` names (operationIds or `"METHOD /path"`), or
/// every operation when `enabled` is `None`. An unknown name is an error naming it.
pub fn generate(
    contract: &Contract,
    enabled: Option<&[String]>,
) -> Result<Value, UnknownOperation> {
    let ops: Vec<&Operation> = match enabled {
        None => contract.operations().iter().collect(),
        Some(names) => names
            .iter()
            .map(|n| find_operation(contract, n).ok_or_else(|| UnknownOperation(n.clone())))
            .collect::<Result<_, _>>()?,
    };
    let mut taken = HashSet::new();
    let tools: Vec<Value> = ops.iter().map(|op| tool(op, &mut taken)).collect();
    Ok(json!({ "tools": tools }))
}

/// MCP tool names are `[A-Za-z0-9_-]{1,64}`: the operationId made to fit, unique.
fn tool_name(op: &Operation, taken: &mut HashSet<String>) -> String {
    let base: String = op
        .id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(56)
        .collect();
    let mut name = base.clone();
    let mut n = 2;
    while !taken.insert(name.clone()) {
        name = format!("{base}_{n}");
        n += 1;
    }
    name
}

/// `METHOD /path`; a full replace also says what it does to a field it is not sent, the
/// sentence that would have saved the agent whose schema lacked a field.
fn description(op: &Operation) -> String {
    let route = op.label();
    match op.write == WriteSemantics::Replace && op.body.is_some() {
        true => format!(
            "{route}. Replaces the whole resource: send every field, read it first and send back \
             what you do not change; a field left out is cleared."
        ),
        false => route,
    }
}

/// Where another operation has the same operationId, the tool also names its operation by its
/// label (`_meta.operation`), which is what `driftwatch mcp` and `driftwatch tools` follow.
fn tool(op: &Operation, taken: &mut HashSet<String>) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    // Cookies are the MCP server's business, not an argument an agent passes.
    for p in op.params.iter().filter(|p| p.location != Location::Cookie) {
        props.insert(
            p.name.clone(),
            schema_for(
                &p.summary.ty,
                &p.members,
                p.summary.nullable,
                p.description.as_deref(),
            ),
        );
        if p.required {
            required.push(p.name.clone());
        }
    }
    if let Some(media) = super::expected::body_media(op) {
        body_arguments(op, media, &mut props, &mut required);
    }
    let mut meta = json!({"operationId": op.id});
    if op.id_shared {
        meta["operation"] = json!(op.label());
    }
    json!({
        "name": tool_name(op, taken),
        "description": description(op),
        "inputSchema": {"type": "object", "properties": props, "required": required},
        "_meta": meta,
    })
}

/// The body's arguments: its fields beside the parameters, or, for a body that is not a plain
/// object or whose fields collide with parameters, one `requestBody` argument.
fn body_arguments(
    op: &Operation,
    media: &crate::contract::MediaBody,
    props: &mut Map<String, Value>,
    required: &mut Vec<String>,
) {
    let fields = match &*media.shape {
        BodyShape::Object { properties, .. } => Some(properties),
        _ => None,
    };
    let schema = |f: &crate::contract::Property| {
        schema_for(
            &f.summary.ty,
            &f.members,
            f.summary.nullable,
            f.description.as_deref(),
        )
    };
    let flat = fields.filter(|fields| {
        fields
            .iter()
            .all(|f| f.read_only || !props.contains_key(&f.name) && f.name != "requestBody")
    });
    if let Some(fields) = flat {
        for f in fields.iter().filter(|f| !f.read_only) {
            props.insert(f.name.clone(), schema(f));
            if f.required {
                required.push(f.name.clone());
            }
        }
        return;
    }
    let body = match fields {
        Some(fields) => {
            let inner: Map<String, Value> = (fields.iter())
                .filter(|f| !f.read_only)
                .map(|f| (f.name.clone(), schema(f)))
                .collect();
            json!({"type": "object", "properties": inner})
        }
        None => schema_for(&media.summary.ty, &[], media.summary.nullable, None),
    };
    props.insert("requestBody".into(), body);
    if op.body.as_ref().is_some_and(|b| b.required) {
        required.push("requestBody".into());
    }
}

/// The JSON Schema a generated tool declares for a type (the inverse of `declared`): a union's
/// members as `anyOf`.
fn schema_for(
    ty: &FieldType,
    members: &[FieldType],
    nullable: bool,
    description: Option<&str>,
) -> Value {
    let mut out = Map::new();
    let name = match ty {
        FieldType::String => Some("string"),
        FieldType::Integer => Some("integer"),
        FieldType::Number => Some("number"),
        FieldType::Boolean => Some("boolean"),
        FieldType::Object => Some("object"),
        FieldType::Array(item) => {
            out.insert("items".into(), schema_for(item, &[], false, None));
            Some("array")
        }
        FieldType::Any => {
            if !members.is_empty() {
                let branches = members.iter().map(|m| schema_for(m, &[], false, None));
                out.insert("anyOf".into(), Value::Array(branches.collect()));
            }
            None
        }
    };
    if let Some(name) = name {
        out.insert(
            "type".into(),
            if nullable {
                serde_json::json!([name, "null"])
            } else {
                Value::String(name.into())
            },
        );
    }
    if let Some(d) = description {
        out.insert("description".into(), Value::String(d.into()));
    }
    Value::Object(out)
}
