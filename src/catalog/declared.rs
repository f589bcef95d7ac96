//! What a tool declares for one argument, in the small type vocabulary, and whether that fits
//! what the spec says. Hand-written catalogs declare unions the spec does not (Notion's every
//! object argument is `anyOf: [X, string]`, a JSON text or the object), and specs declare unions
//! the tool narrows (GitHub's `title` is `oneOf: [string, integer]`): a union fits when one of its
//! branches is the spec's type, a spec-side union accepts each of its members.

use serde_json::Value;

use crate::contract::{FieldType, deref, union_branches};

/// The types a tool's argument schema allows (one, or the branches of a union), `null` aside:
/// `["null", T]` and `nullable` are T, an enum is its values' type, a `$ref` model or a schema
/// with `properties` an object, arrays by element type. A type name outside the vocabulary is
/// not taught: an error naming it.
pub fn declared(root: &Value, schema: &Value) -> Result<Vec<FieldType>, String> {
    declared_at(root, schema, 0)
}

const DEPTH: usize = 16;

fn declared_at(root: &Value, schema: &Value, depth: usize) -> Result<Vec<FieldType>, String> {
    if depth > DEPTH {
        return Ok(vec![FieldType::Any]);
    }
    let referenced = schema.get("$ref").is_some();
    let schema = deref(root, schema);
    let named = |name: &str| -> Result<Vec<FieldType>, String> {
        Ok(match name {
            "string" => vec![FieldType::String],
            "integer" => vec![FieldType::Integer],
            "number" => vec![FieldType::Number],
            "boolean" => vec![FieldType::Boolean],
            "object" => vec![FieldType::Object],
            "array" => match schema.get("items") {
                Some(items) => declared_at(root, items, depth + 1)?
                    .into_iter()
                    .map(|item| FieldType::Array(Box::new(item)))
                    .collect(),
                None => vec![FieldType::Array(Box::new(FieldType::Any))],
            },
            other => return Err(format!("type `{other}` is not in the vocabulary")),
        })
    };
    let mut out = Vec::new();
    match schema.get("type") {
        Some(Value::String(t)) if t != "null" => out = named(t)?,
        Some(Value::Array(types)) => {
            for t in types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
            {
                out.extend(named(t)?);
            }
        }
        _ => out = untyped(root, schema, referenced, depth)?,
    }
    let mut unique: Vec<FieldType> = Vec::new();
    for ty in out {
        if !unique.contains(&ty) {
            unique.push(ty);
        }
    }
    if unique.is_empty() {
        unique.push(FieldType::Any);
    }
    Ok(unique)
}

/// What a schema without `type` declares: its enum values' types, an object where it is a
/// reference or has properties, else its union branches' types and its first `allOf`'s.
fn untyped(
    root: &Value,
    schema: &Value,
    referenced: bool,
    depth: usize,
) -> Result<Vec<FieldType>, String> {
    let mut out = Vec::new();
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let typed = values
            .iter()
            .filter(|v| !v.is_null())
            .map(|v| FieldType::from_name(FieldType::of_value(v)).unwrap_or(FieldType::String));
        out.extend(typed);
    } else if referenced || schema.get("properties").is_some() {
        out.push(FieldType::Object);
    } else {
        for branch in union_branches(schema) {
            let null = deref(root, branch).get("type") == Some(&"null".into());
            if !null {
                out.extend(declared_at(root, branch, depth + 1)?);
            }
        }
        if let Some(first) = schema
            .get("allOf")
            .and_then(Value::as_array)
            .and_then(|all| all.first())
        {
            out.extend(declared_at(root, first, depth + 1)?);
        }
    }
    Ok(out)
}

/// Does a tool that declares `declared` fit a spec field of type `expected` (with `members`
/// where the spec's schema is a union)? One declared branch that fits is enough: the union
/// carries the spec's type, and the other branches are the server's to convert.
pub fn fits(expected: &FieldType, members: &[FieldType], declared: &[FieldType]) -> bool {
    declared.iter().any(|d| match (expected, members) {
        (FieldType::Any, []) => true,
        (FieldType::Any, members) => members.iter().any(|m| same(m, d)),
        (expected, _) => same(expected, d),
    })
}

/// Equal types, where the spec's `any` (no constraint) inside an array matches any item type.
/// A tool's `number` does not fit the spec's `integer` (zod's default, unless told `.int()`): it
/// invites `10.5` where Stripe takes an amount in cents.
fn same(expected: &FieldType, declared: &FieldType) -> bool {
    match (expected, declared) {
        (FieldType::Any, _) => true,
        (FieldType::Array(e), FieldType::Array(d)) => same(e, d),
        (e, d) => e == d,
    }
}

/// How `declared` reads in a defect: `string`, or `object|string` for a union.
pub fn show(declared: &[FieldType]) -> String {
    declared
        .iter()
        .map(FieldType::to_string)
        .collect::<Vec<_>>()
        .join("|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(schema: Value) -> String {
        show(&declared(&json!({}), &schema).unwrap())
    }

    #[test]
    fn unions_are_read_branch_by_branch() {
        assert_eq!(of(json!({"type": ["string", "null"]})), "string");
        assert_eq!(
            of(json!({"anyOf": [{"type": "object", "properties": {}}, {"type": "string"}]})),
            "object|string"
        );
        assert_eq!(
            of(
                json!({"type": "array", "items": {"anyOf": [{"type": "object"}, {"type": "object"}]}})
            ),
            "array<object>"
        );
        assert_eq!(of(json!({"enum": [1, 2]})), "integer");
        assert!(declared(&json!({}), &json!({"type": "file"})).is_err());
    }

    #[test]
    fn a_union_fits_when_one_branch_is_the_spec_type_and_a_spec_union_takes_each_member() {
        use FieldType::*;
        assert!(fits(&Object, &[], &[Object, String]));
        assert!(!fits(&Integer, &[], &[String]));
        assert!(fits(&Any, &[String, Integer], &[String]));
        assert!(!fits(&Any, &[String, Integer], &[Boolean]));
        assert!(fits(&Any, &[], &[Boolean]));
        assert!(fits(&Array(Box::new(Any)), &[], &[Array(Box::new(String))]));
        assert!(!fits(&Integer, &[], &[Any]));
        assert!(!fits(&Integer, &[], &[Number]));
        assert!(fits(&Integer, &[], &[Number, Integer]));
    }
}
