//! The comparison: each tool's arguments, sorted by layout into path, query, header and body,
//! against its operation's parameters and request body, on the small type vocabulary
//! (`string|integer|number|boolean|object|array<T>`; `["null", T]` is T, an enum a string, a
//! `$ref` model an object).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{
    CatalogError, Defect, DefectKind, Layout, Mapping, Matched, Report, Tool, find_operation,
};
use crate::contract::{BodyShape, Contract, FieldType, Operation, WriteSemantics};
use crate::finding::Location;

const GROUPS: [&str; 4] = [
    "pathParameters",
    "queryParameters",
    "headerParameters",
    "body",
];

/// Check every tool against the contract; all defects of all tools in one report.
pub fn check(
    contract: &Contract,
    tools: &[Tool],
    mapping: &Mapping,
) -> Result<Report, CatalogError> {
    let mut report = Report::default();
    let mut reached = std::collections::HashSet::new();
    for tool in tools {
        let (reference, by, headers) = match mapping.tools.get(&tool.name) {
            Some(m) => (m.operation().to_string(), "map", m.headers().to_vec()),
            None => match &tool.meta_operation {
                Some(op) => (op.clone(), "meta", Vec::new()),
                None if contract.operation(&tool.name).is_some() => {
                    (tool.name.clone(), "inferred", Vec::new())
                }
                None => return Err(CatalogError::Unmapped(tool.name.clone())),
            },
        };
        let op =
            find_operation(contract, &reference).ok_or_else(|| CatalogError::UnknownOperation {
                tool: tool.name.clone(),
                operation: reference.clone(),
            })?;
        reached.insert(op.id.clone());
        let layout = compare_tool(tool, op, &headers, &mut report.defects)?;
        report.tools.push(Matched {
            tool: tool.name.clone(),
            operation: op.id.clone(),
            layout,
            by,
        });
    }
    report.unexposed = contract
        .operations()
        .iter()
        .filter(|op| !reached.contains(&op.id))
        .map(|op| format!("{} {} ({})", op.method, op.template, op.id))
        .collect();
    Ok(report)
}

/// A tool's arguments by where they go.
#[derive(Default)]
struct Args<'t> {
    path: BTreeMap<String, &'t Value>,
    query: BTreeMap<String, &'t Value>,
    header: BTreeMap<String, &'t Value>,
    /// Body fields (flat and grouped-as-object), or the one body argument's schema.
    body: BTreeMap<String, &'t Value>,
    body_schema: Option<&'t Value>,
}

fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

fn compare_tool(
    tool: &Tool,
    op: &Operation,
    headers: &[String],
    out: &mut Vec<Defect>,
) -> Result<Layout, CatalogError> {
    let root = &tool.input_schema;
    let top: Vec<&String> = properties(root).map(|(k, _)| k).collect();
    let layout = if !top.is_empty() && top.iter().all(|k| GROUPS.contains(&k.as_str())) {
        Layout::Grouped
    } else if top.iter().any(|k| *k == "requestBody") {
        Layout::Nested
    } else {
        Layout::Flat
    };
    let is_param = |loc: Location, name: &str| {
        op.params_in(loc).any(|p| {
            if loc == Location::Header {
                p.name.eq_ignore_ascii_case(name)
            } else {
                p.name == name
            }
        })
    };
    let mut args = Args::default();
    match layout {
        Layout::Grouped => {
            let group = |g: &str| root.get("properties").and_then(|p| p.get(g));
            for (g, target) in [
                ("pathParameters", &mut args.path),
                ("queryParameters", &mut args.query),
                ("headerParameters", &mut args.header),
            ] {
                if let Some(schema) = group(g) {
                    target.extend(properties(deref(root, schema)).map(|(k, v)| (k.clone(), v)));
                }
            }
            args.body_schema = group("body");
        }
        Layout::Flat | Layout::Nested => {
            for (name, schema) in properties(root) {
                if layout == Layout::Nested && name == "requestBody" {
                    args.body_schema = Some(schema);
                } else if is_param(Location::Path, name) {
                    args.path.insert(name.clone(), schema);
                } else if is_param(Location::Query, name) {
                    args.query.insert(name.clone(), schema);
                } else if is_param(Location::Header, name)
                    || headers.iter().any(|h| h.eq_ignore_ascii_case(name))
                {
                    args.header.insert(name.clone(), schema);
                } else {
                    args.body.insert(name.clone(), schema);
                }
            }
        }
    }
    let defect = |kind, field: &str, expected: Option<String>, declared: Option<String>| Defect {
        tool: tool.name.clone(),
        operation: op.id.clone(),
        kind,
        field: field.to_string(),
        expected,
        declared,
    };
    let untaught = |reason: String| CatalogError::Untaught {
        tool: tool.name.clone(),
        reason,
    };
    // One expected field against what the tool declares for it: absent, or of another type.
    let one = |out: &mut Vec<Defect>,
               name: &str,
               ty: &FieldType,
               declared: Option<&Value>,
               missing: DefectKind,
               what: &str|
     -> Result<(), CatalogError> {
        let Some(schema) = declared else {
            out.push(defect(
                missing,
                name,
                Some(ty.to_string()),
                Some("absent".into()),
            ));
            return Ok(());
        };
        let got = tool_type(root, schema).map_err(|e| untaught(format!("{what} `{name}`: {e}")))?;
        if got != *ty {
            out.push(defect(
                DefectKind::TypeMismatch,
                name,
                Some(ty.to_string()),
                Some(got.to_string()),
            ));
        }
        Ok(())
    };
    // Parameters: path and query exactly, both ways; headers only one way (optional headers
    // such as If-Match may be set by the MCP server itself).
    for (loc, declared) in [(Location::Path, &args.path), (Location::Query, &args.query)] {
        for p in op.params_in(loc) {
            let found = declared.get(&p.name).copied();
            one(
                out,
                &p.name,
                &p.summary.ty,
                found,
                DefectKind::MissingParam,
                "argument",
            )?;
        }
        for name in declared.keys().filter(|n| !is_param(loc, n)) {
            out.push(defect(
                DefectKind::UnreachableArgument,
                name,
                None,
                Some(loc.as_str().into()),
            ));
        }
    }
    for name in args.header.keys().filter(|n| {
        !is_param(Location::Header, n) && !headers.iter().any(|h| h.eq_ignore_ascii_case(n))
    }) {
        out.push(defect(
            DefectKind::UnreachableArgument,
            name,
            None,
            Some("header".into()),
        ));
    }
    // The body.
    let media = op
        .body
        .as_ref()
        .and_then(|b| b.media.iter().find(|m| m.json));
    let Some(media) = media else {
        let extra = args
            .body
            .keys()
            .cloned()
            .chain(args.body_schema.map(|_| "requestBody".to_string()));
        for name in extra {
            out.push(defect(
                DefectKind::UnreachableArgument,
                &name,
                None,
                Some("body".into()),
            ));
        }
        return Ok(layout);
    };
    let declared_body: Option<BTreeMap<String, &Value>> = match args.body_schema {
        Some(schema) => {
            let schema = deref(root, schema);
            (schema.get("properties").is_some())
                .then(|| properties(schema).map(|(k, v)| (k.clone(), v)).collect())
        }
        None => Some(args.body.clone()),
    };
    match (&*media.shape, declared_body) {
        (
            BodyShape::Object {
                properties: expected,
                ..
            },
            Some(declared),
        ) => {
            for p in expected.iter().filter(|p| !p.read_only) {
                let missing = if op.write == WriteSemantics::Replace {
                    DefectKind::SilentClear
                } else {
                    DefectKind::MissingField
                };
                let found = declared.get(&p.name).copied();
                one(out, &p.name, &p.summary.ty, found, missing, "body field")?;
            }
            for name in declared
                .keys()
                .filter(|n| !expected.iter().any(|p| &p.name == *n && !p.read_only))
            {
                out.push(defect(
                    DefectKind::UnreachableArgument,
                    name,
                    None,
                    Some("body".into()),
                ));
            }
        }
        (_, Some(declared)) if !declared.is_empty() || args.body_schema.is_some() => {
            return Err(untaught(format!(
                "the request body of {} {} is not a plain object schema ({}); declare it as one `requestBody` argument",
                op.method, op.template, media.summary
            )));
        }
        (_, Some(_)) => {
            if op.body.as_ref().is_some_and(|b| b.required) {
                out.push(defect(
                    DefectKind::MissingField,
                    "requestBody",
                    Some(media.summary.ty.to_string()),
                    Some("absent".into()),
                ));
            }
        }
        (_, None) => {
            // One body argument that is not an object of properties: compare its type whole.
            let schema = args.body_schema.unwrap_or(&Value::Null);
            let ty = tool_type(root, schema)
                .map_err(|e| untaught(format!("argument `requestBody`: {e}")))?;
            if ty != media.summary.ty {
                out.push(defect(
                    DefectKind::TypeMismatch,
                    "requestBody",
                    Some(media.summary.ty.to_string()),
                    Some(ty.to_string()),
                ));
            }
        }
    }
    Ok(layout)
}

/// Follow a local `$ref` (`#/$defs/X`) inside the tool's input schema.
fn deref<'v>(root: &'v Value, schema: &'v Value) -> &'v Value {
    let mut schema = schema;
    for _ in 0..16 {
        let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|p| root.pointer(p))
        else {
            break;
        };
        schema = target;
    }
    schema
}

/// A tool argument's type in the vocabulary: `["null", T]` and `nullable` are T, an enum is a
/// string, a `$ref` model an object, arrays by element type. A union of two real types is not
/// taught: an error.
fn tool_type(root: &Value, schema: &Value) -> Result<FieldType, String> {
    let referenced = schema.get("$ref").is_some();
    let schema = deref(root, schema);
    let named = |name: &str, s: &Value| -> Result<FieldType, String> {
        Ok(match name {
            "string" => FieldType::String,
            "integer" => FieldType::Integer,
            "number" => FieldType::Number,
            "boolean" => FieldType::Boolean,
            "object" => FieldType::Object,
            "array" => FieldType::Array(Box::new(match s.get("items") {
                Some(items) => tool_type(root, items)?,
                None => FieldType::Any,
            })),
            other => return Err(format!("type `{other}` is not in the vocabulary")),
        })
    };
    match schema.get("type") {
        Some(Value::String(t)) => named(t, schema),
        Some(Value::Array(types)) => {
            let real: Vec<&str> = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            match real.as_slice() {
                [one] => named(one, schema),
                [] => Ok(FieldType::Any),
                many => Err(format!("the type union {many:?} is not taught")),
            }
        }
        _ if schema.get("enum").is_some() => Ok(FieldType::String),
        _ if referenced || schema.get("properties").is_some() => Ok(FieldType::Object),
        _ => {
            for key in ["anyOf", "oneOf"] {
                if let Some(branches) = schema.get(key).and_then(Value::as_array) {
                    let real: Vec<&Value> = branches
                        .iter()
                        .filter(|b| {
                            deref(root, b).get("type") != Some(&Value::String("null".into()))
                        })
                        .collect();
                    return match real.as_slice() {
                        [one] => tool_type(root, one),
                        _ => Err(format!("the `{key}` union is not taught")),
                    };
                }
            }
            Ok(FieldType::Any)
        }
    }
}

/// The JSON Schema a generated tool declares for a type (the inverse of [`tool_type`]).
pub(super) fn schema_for(ty: &FieldType, nullable: bool, description: Option<&str>) -> Value {
    let mut out = Map::new();
    let name = match ty {
        FieldType::String => Some("string"),
        FieldType::Integer => Some("integer"),
        FieldType::Number => Some("number"),
        FieldType::Boolean => Some("boolean"),
        FieldType::Object => Some("object"),
        FieldType::Array(item) => {
            out.insert("items".into(), schema_for(item, false, None));
            Some("array")
        }
        FieldType::Any => None,
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
