//! The response: the API's side of the contract. A status the operation does not declare, a
//! media type it does not list, a body that breaks its schema, or a property the schema does
//! not know all mean the spec (or the server) has drifted: blame is the server's. A GET that
//! returns a property the resource's replace body lacks is the next silent clear in waiting.

use compact_str::ToCompactString;
use std::collections::HashSet;
use std::sync::Mutex;

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;

use super::body::{field, masked, match_media, not_json_at, type_at, type_names};
use super::branches::chosen_shape;
use crate::contract::{Additional, BodyShape, Contract, Operation, WriteSemantics};
use crate::finding::{Finding, Kind, Location};
use crate::json::Node;
use crate::response::ResponseView;

/// Schema findings kept per response: a list of a thousand drifted items says it once per
/// field (array indices become `*`), and never more than this many fields.
const MAX_FINDINGS: usize = 32;

/// Audit `response`, the answer to a request routed to `op`. Findings carry `op`'s id, except
/// `replace_will_drop_field`, which names the write that will drop the field.
pub fn audit_response(
    contract: &Contract,
    op: &Operation,
    response: &ResponseView,
) -> Vec<Finding> {
    let mut out = Vec::new();
    check(contract, op, response, &mut out);
    for f in &mut out {
        f.operation.get_or_insert_with(|| op.id.as_str().into());
    }
    out.into_iter().map(super::bounded::cut_text).collect()
}

fn check(contract: &Contract, op: &Operation, response: &ResponseView, out: &mut Vec<Finding>) {
    let status = response.status;
    if status < 200 || op.responses.declared.is_empty() {
        return; // 1xx are interim; an operation without `responses` declares nothing to hold to.
    }
    let Some(declared) = op.responses.for_status(status) else {
        out.push(undeclared_status(op, status));
        return;
    };
    let Some(body) = response.body.filter(|b| !b.is_empty()) else {
        return;
    };
    let content_type = response.content_type();
    let sent = content_type.unwrap_or("none");
    let Some(media) = content_type.and_then(|ct| match_media(&declared.media, ct)) else {
        out.push(undeclared_media(op, status, declared, sent));
        return;
    };
    if !media.json {
        return;
    }
    let compiled = contract.response_schema(media);
    let shape = compiled.map_or(&BodyShape::Opaque, |c| &*c.shape);
    let owned;
    let value = match response.parsed {
        Some(v) => v,
        None => match crate::json::parse(body) {
            Ok(doc) => {
                owned = doc;
                owned.root()
            }
            Err(e) => {
                out.push(not_json(op, status, sent, &e));
                return;
            }
        },
    };
    let mut seen = HashSet::new();
    let mut push = |f: Finding, out: &mut Vec<Finding>| {
        if out.len() < MAX_FINDINGS && seen.insert((f.kind, f.field.clone())) {
            out.push(f);
        }
    };
    // `is_valid` first: it stops at the first error and builds none; most answers are valid.
    let validator = compiled.and_then(|c| c.validator.get());
    if let Some(validator) = validator.filter(|v| !v.is_valid(value)) {
        for error in validator.iter_errors(value) {
            for f in schema_findings(&error, shape, value) {
                push(f, out);
            }
        }
    }
    undeclared_fields(shape, value, String::new(), &mut |f| push(f, out), 0);
    if op.method == "GET" && (200..300).contains(&status) {
        drop_hazards(contract, op, out);
    }
}

/// A status the operation does not declare.
fn undeclared_status(op: &Operation, status: u16) -> Finding {
    let expected = op.responses.statuses();
    Finding::new(
        Kind::UndeclaredStatus,
        Location::Response,
        status.to_compact_string(),
    )
    .expected(expected.clone())
    .observed(status.to_compact_string())
    .message(format!(
        "{} {} ({}) answered {status}, which the spec does not declare (declared: {expected})",
        op.method, op.template, op.id
    ))
}

/// A body `sent` as a media type the status does not declare.
fn undeclared_media(
    op: &Operation,
    status: u16,
    declared: &crate::contract::DeclaredResponse,
    sent: &str,
) -> Finding {
    let listed: Vec<&str> = declared
        .media
        .iter()
        .map(|m| m.media_type.as_str())
        .collect();
    let expected = if listed.is_empty() {
        "no body".to_string()
    } else {
        listed.join(", ")
    };
    Finding::new(
        Kind::UndeclaredResponseMediaType,
        Location::Response,
        "content-type",
    )
    .expected(expected.clone())
    .observed(sent)
    .message(format!(
        "{} {} ({}) answered {status} with a `{sent}` body; the spec declares {expected} for {}",
        op.method, op.template, op.id, declared.status
    ))
}

fn not_json(op: &Operation, status: u16, sent: &str, e: &serde_json::Error) -> Finding {
    Finding::new(Kind::ResponseSchemaViolation, Location::Response, "")
        .expected("JSON")
        .observed(not_json_at(e))
        .message(format!(
            "{} {} ({}) answered {status} with a `{sent}` body that is not valid JSON",
            op.method, op.template, op.id
        ))
}

/// Findings for one JSON Schema error. `additionalProperties: false` errors become one
/// `undeclared_response_field` per name; a required writeOnly property is never expected.
fn schema_findings(error: &ValidationError, shape: &BodyShape, value: Node) -> Vec<Finding> {
    let path = generalize(value, error.instance_path().as_str());
    match error.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => unexpected
            .iter()
            .map(|name| undeclared(&format!("{path}/{name}"), false))
            .collect(),
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            let write_only = object_at(shape, value, error.instance_path().as_str())
                .is_some_and(|props| props.iter().any(|p| p.name == name && p.write_only));
            if write_only {
                return Vec::new();
            }
            vec![
                Finding::new(
                    Kind::ResponseSchemaViolation,
                    Location::Response,
                    format!("{path}/{name}"),
                )
                .expected("required")
                .observed("absent")
                .message(format!("the response lacks required field `{path}/{name}`")),
            ]
        }
        ValidationErrorKind::Type { kind } => {
            let expected = type_names(kind);
            let observed = type_at(value, error.instance_path().as_str());
            vec![
                Finding::new(Kind::ResponseSchemaViolation, Location::Response, &path)
                    .expected(expected.clone())
                    .observed(observed)
                    .message(format!(
                        "{} is {observed}, the spec says {expected}",
                        field("response", &path)
                    )),
            ]
        }
        kind => vec![
            Finding::new(Kind::ResponseSchemaViolation, Location::Response, &path)
                .expected(kind.keyword())
                .message(format!("{}: {}", field("response", &path), masked(error))),
        ],
    }
}

/// Properties present where the schema does not declare them and says nothing about others
/// (`additionalProperties` absent), at the top level and in the items of a top-level list,
/// plus writeOnly properties, which a response never carries.
fn undeclared_fields(
    shape: &BodyShape,
    value: Node,
    path: String,
    push: &mut dyn FnMut(Finding),
    depth: usize,
) {
    match (chosen_shape(shape, value), value.as_object()) {
        (
            Some(BodyShape::Object {
                properties,
                additional,
                ..
            }),
            Some(map),
        ) => {
            let mut declared = super::members::Cursor::new(properties);
            for (key, _) in map.members() {
                match declared.find(key) {
                    Some(p) if p.write_only => push(undeclared(&format!("{path}/{key}"), true)),
                    None if *additional == Additional::Absent
                        && !super::branches::declared_in_any(shape, key, value) =>
                    {
                        push(undeclared(&format!("{path}/{key}"), false))
                    }
                    _ => {}
                }
            }
        }
        (Some(BodyShape::Array(items)), None) if depth == 0 => {
            for item in value.as_array().into_iter().flat_map(|list| list.items()) {
                undeclared_fields(items, item, format!("{path}/*"), push, depth + 1);
            }
        }
        _ => {}
    }
}

fn undeclared(pointer: &str, write_only: bool) -> Finding {
    let message = if write_only {
        format!(
            "the response carries `{pointer}`, which the spec marks writeOnly: it is never to be returned"
        )
    } else {
        format!(
            "the response carries `{pointer}`, which its schema does not declare: the spec is stale, and clients built from it drop the field"
        )
    };
    Finding::new(Kind::UndeclaredResponseField, Location::Response, pointer)
        .observed("present")
        .message(message)
}

/// `replace_will_drop_field` for each top-level undeclared field of a GET's response that a
/// replace write of the same resource does not declare in its body either.
fn drop_hazards(contract: &Contract, get: &Operation, out: &mut Vec<Finding>) {
    let fields: Vec<String> = out
        .iter()
        .filter(|f| f.kind == Kind::UndeclaredResponseField)
        .filter_map(|f| f.field.strip_prefix('/'))
        .filter(|name| !name.contains('/'))
        .map(String::from)
        .collect();
    if fields.is_empty() {
        return; // the common answer: nothing undeclared, no write to look up
    }
    for write in get
        .replaced_by
        .iter()
        .filter_map(|&index| contract.operation_at(index))
    {
        let declared = write.body_properties();
        if write.write != WriteSemantics::Replace || declared.is_empty() {
            continue; // a body that is not a plain object schema: nothing to compare against
        }
        for name in fields
            .iter()
            .filter(|n| !declared.iter().any(|p| &p.name == *n))
        {
            let mut f = Finding::new(
                Kind::ReplaceWillDropField,
                Location::Body,
                format!("/{name}"),
            )
            .observed(format!("returned by {} {}", get.method, get.template))
            .message(format!(
                "{} {} returns `{name}`, which the spec's body for {} {} does not declare: clients built from the spec will erase it on every update",
                get.method, get.template, write.method, write.template
            ));
            f.operation = Some(write.id.as_str().into());
            f.related_operation = Some(get.id.as_str().into());
            out.push(f);
        }
    }
}

/// The declared properties of the object at `pointer` inside `value`, where the shape knows
/// them (the top level, or an item of a top-level list).
fn object_at<'s>(
    shape: &'s BodyShape,
    value: Node,
    pointer: &str,
) -> Option<&'s [crate::contract::Property]> {
    let mut shape = chosen_shape(shape, value)?;
    let mut value = value;
    for segment in pointer.split('/').filter(|s| !s.is_empty()) {
        let (BodyShape::Array(items), Some(list)) = (shape, value.as_array()) else {
            return None;
        };
        value = list.get(segment.parse::<usize>().ok()?)?;
        shape = chosen_shape(items, value)?;
    }
    match shape {
        BodyShape::Object { properties, .. } => Some(properties),
        _ => None,
    }
}

/// `pointer` with every array index replaced by `*`, so that one drift across a list's items
/// is one finding (`/*/id`); object keys that look like numbers stay as they are.
fn generalize(value: Node, pointer: &str) -> String {
    let mut out = String::new();
    let mut at = Some(value);
    for segment in pointer.split('/').skip(1) {
        out.push('/');
        match (at.and_then(Node::as_array), at.and_then(Node::as_object)) {
            (Some(list), _) => {
                out.push('*');
                at = segment.parse::<usize>().ok().and_then(|i| list.get(i));
            }
            (_, Some(map)) => {
                out.push_str(segment);
                let key = segment.replace("~1", "/").replace("~0", "~");
                at = map.get(&key);
            }
            _ => {
                out.push_str(segment);
                at = None;
            }
        }
    }
    out
}

/// `replace_will_drop_field` is a fact about the spec, not about one response: each write and
/// field is reported once per process (bounded, since field names come from the server).
#[derive(Default)]
pub struct ReportedOnce {
    seen: Mutex<HashSet<(String, String)>>,
}

const REPORTED_LIMIT: usize = 10_000;

impl ReportedOnce {
    /// Drop the `replace_will_drop_field` findings already reported.
    pub fn retain_new(&self, findings: &mut Vec<Finding>) {
        if !findings
            .iter()
            .any(|f| f.kind == Kind::ReplaceWillDropField)
        {
            return;
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        findings.retain(|f| {
            if f.kind != Kind::ReplaceWillDropField {
                return true;
            }
            let key = (
                f.operation.as_deref().unwrap_or_default().to_string(),
                f.field.to_string(),
            );
            seen.len() < REPORTED_LIMIT && seen.insert(key)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_indices_generalize_and_object_keys_stay() {
        let v = crate::json::parse(br#"{"items": [{"a": 1}, {"a": 2}], "by_id": {"7": {"a": 1}}}"#)
            .unwrap();
        let v = v.root();
        assert_eq!(generalize(v, "/items/1/a"), "/items/*/a");
        assert_eq!(generalize(v, "/by_id/7/a"), "/by_id/7/a");
        let list = crate::json::parse(b"[1, 2]").unwrap();
        assert_eq!(generalize(list.root(), "/0"), "/*");
        assert_eq!(generalize(v, ""), "");
    }
}
