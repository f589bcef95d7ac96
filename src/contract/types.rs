//! The small type vocabulary driftwatch talks in: `string|integer|number|boolean|object|
//! array<T>`, plus a nullable flag. Findings, tool-catalog parity and spec diffs compare on it,
//! so 3.0 `nullable: true` and a 3.1 `["null", T]` summarize to the same thing.

use std::fmt;

use serde_json::Value;

use super::resolve::deref;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FieldType {
    String,
    Integer,
    Number,
    Boolean,
    Object,
    Array(Box<FieldType>),
    /// No type constraint, or a union the vocabulary has no single name for.
    Any,
}

/// A schema's type in the vocabulary, and whether `null` is also allowed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TypeSummary {
    pub ty: FieldType,
    pub nullable: bool,
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::String => f.write_str("string"),
            FieldType::Integer => f.write_str("integer"),
            FieldType::Number => f.write_str("number"),
            FieldType::Boolean => f.write_str("boolean"),
            FieldType::Object => f.write_str("object"),
            FieldType::Array(item) => write!(f, "array<{item}>"),
            FieldType::Any => f.write_str("any"),
        }
    }
}

impl fmt::Display for TypeSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nullable {
            write!(f, "{}|null", self.ty)
        } else {
            write!(f, "{}", self.ty)
        }
    }
}

impl FieldType {
    pub(crate) fn from_name(name: &str) -> Option<FieldType> {
        Some(match name {
            "string" => FieldType::String,
            "integer" => FieldType::Integer,
            "number" => FieldType::Number,
            "boolean" => FieldType::Boolean,
            "object" => FieldType::Object,
            "array" => FieldType::Array(Box::new(FieldType::Any)),
            _ => return None,
        })
    }

    /// The vocabulary name of a JSON value's own type.
    pub fn of_value(value: &Value) -> &'static str {
        match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }
}

const DEPTH: usize = 16;

/// The non-null values of a schema's `enum` (or `const`), also through a `$ref` or a nullable
/// wrapper (`oneOf: [{type: null}, {$ref: Enum}]`); `None` when the schema is not an enum.
pub fn enum_values(doc: &Value, schema: &Value) -> Option<Vec<Value>> {
    enum_at(doc, schema, 0)
}

fn enum_at(doc: &Value, schema: &Value, depth: usize) -> Option<Vec<Value>> {
    let schema = deref(doc, schema);
    if depth > DEPTH {
        return None;
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Some(values.iter().filter(|v| !v.is_null()).cloned().collect());
    }
    if let Some(value) = schema.get("const") {
        return Some(vec![value.clone()]);
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        let Some(branches) = schema.get(key).and_then(Value::as_array) else {
            continue;
        };
        let concrete: Vec<&Value> = branches
            .iter()
            .filter(|b| {
                let s = summarize(doc, b);
                s.ty != FieldType::Any || !s.nullable
            })
            .collect();
        if let [one] = concrete.as_slice() {
            return enum_at(doc, one, depth + 1);
        }
    }
    None
}

/// The member types of a union of different types (`oneOf: [string, integer]`, `type:
/// [string, integer]`), which [`summarize`] can only call `any`; empty for any other schema.
/// Tool-catalog parity accepts a tool that declares any one of them. `summary` is the
/// schema's own, already made by the caller.
pub fn members(doc: &Value, schema: &Value, summary: &TypeSummary) -> Vec<FieldType> {
    if summary.ty != FieldType::Any {
        return Vec::new();
    }
    let schema = deref(doc, schema);
    let mut out: Vec<FieldType> = Vec::new();
    let mut push = |ty: FieldType| {
        if ty != FieldType::Any && !out.contains(&ty) {
            out.push(ty);
        }
    };
    if let Some(types) = schema.get("type").and_then(Value::as_array) {
        types
            .iter()
            .filter_map(Value::as_str)
            .filter_map(FieldType::from_name)
            .for_each(&mut push);
    }
    union_branches(schema).for_each(|branch| push(summarize(doc, branch).ty));
    out
}

/// The branches of a schema's `anyOf` and `oneOf`, in that order.
pub fn union_branches(schema: &Value) -> impl Iterator<Item = &Value> {
    ["anyOf", "oneOf"]
        .into_iter()
        .filter_map(|key| schema.get(key).and_then(Value::as_array))
        .flatten()
}

/// Summarize `schema` (which may be or contain `$ref`s into `doc`).
pub fn summarize(doc: &Value, schema: &Value) -> TypeSummary {
    summarize_at(doc, schema, 0)
}

fn summarize_at(doc: &Value, schema: &Value, depth: usize) -> TypeSummary {
    let any = TypeSummary {
        ty: FieldType::Any,
        nullable: false,
    };
    if depth > DEPTH {
        return any;
    }
    let schema = deref(doc, schema);
    let mut summary = match schema.get("type") {
        Some(Value::String(t)) => TypeSummary {
            ty: FieldType::from_name(t).unwrap_or(FieldType::Any),
            nullable: t == "null",
        },
        Some(Value::Array(types)) => {
            let names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
            let concrete: Vec<&str> = names.iter().copied().filter(|t| *t != "null").collect();
            let ty = match concrete.as_slice() {
                [one] => FieldType::from_name(one).unwrap_or(FieldType::Any),
                _ => FieldType::Any,
            };
            TypeSummary {
                ty,
                nullable: names.contains(&"null"),
            }
        }
        _ => untyped(doc, schema, depth),
    };
    if let FieldType::Array(_) = summary.ty {
        let item = schema
            .get("items")
            .map(|i| summarize_at(doc, i, depth + 1).ty)
            .unwrap_or(FieldType::Any);
        summary.ty = FieldType::Array(Box::new(item));
    }
    summary
}

/// A schema without `type`: infer from enum/const values, object/array keywords, or its
/// composition branches.
fn untyped(doc: &Value, schema: &Value, depth: usize) -> TypeSummary {
    let literal = schema
        .get("enum")
        .and_then(Value::as_array)
        .map(|v| v.as_slice())
        .or_else(|| schema.get("const").map(std::slice::from_ref));
    if let Some(values) = literal {
        return of_values(values);
    }
    if schema.get("properties").is_some()
        || schema.get("additionalProperties").is_some()
        || schema.get("unevaluatedProperties").is_some()
    {
        return TypeSummary {
            ty: FieldType::Object,
            nullable: false,
        };
    }
    if schema.get("items").is_some() {
        return TypeSummary {
            ty: FieldType::Array(Box::new(FieldType::Any)),
            nullable: false,
        };
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        let typed = all
            .iter()
            .map(|s| summarize_at(doc, s, depth + 1))
            .find(|s| s.ty != FieldType::Any);
        return typed.unwrap_or(TypeSummary {
            ty: FieldType::Any,
            nullable: false,
        });
    }
    let branches = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array);
    if let Some(branches) = branches {
        return of_branches(doc, branches, depth);
    }
    TypeSummary {
        ty: FieldType::Any,
        nullable: false,
    }
}

/// The type of an `enum` or `const`: its values' one type, or any; nullable with a null.
fn of_values(values: &[Value]) -> TypeSummary {
    let nullable = values.iter().any(Value::is_null);
    let mut names = values
        .iter()
        .filter(|v| !v.is_null())
        .map(FieldType::of_value);
    let ty = match names.next() {
        Some(first) if names.all(|n| n == first) => {
            FieldType::from_name(first).unwrap_or(FieldType::Any)
        }
        _ => FieldType::Any,
    };
    TypeSummary { ty, nullable }
}

/// The type of an `anyOf` or `oneOf`: its branches' one concrete type, or any; nullable when
/// a branch is.
fn of_branches(doc: &Value, branches: &[Value], depth: usize) -> TypeSummary {
    let summaries: Vec<TypeSummary> = branches
        .iter()
        .map(|s| summarize_at(doc, s, depth + 1))
        .collect();
    let nullable = summaries.iter().any(|s| s.nullable);
    let mut concrete = summaries
        .iter()
        .filter(|s| !(s.nullable && s.ty == FieldType::Any));
    let ty = match concrete.next() {
        Some(first) if concrete.all(|s| s.ty == first.ty) => first.ty.clone(),
        _ => FieldType::Any,
    };
    TypeSummary { ty, nullable }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn show(schema: Value) -> String {
        let doc =
            json!({"components":{"schemas":{"Id":{"type":"integer"},"Pet":{"type":"object"}}}});
        summarize(&doc, &schema).to_string()
    }

    #[test]
    fn the_vocabulary() {
        assert_eq!(show(json!({"type":"integer","format":"int32"})), "integer");
        assert_eq!(show(json!({"type":["null","integer"]})), "integer|null");
        assert_eq!(
            show(json!({"type":"array","items":{"$ref":"#/components/schemas/Id"}})),
            "array<integer>"
        );
        assert_eq!(
            show(json!({"anyOf":[{"$ref":"#/components/schemas/Pet"},{"type":"null"}]})),
            "object|null"
        );
        assert_eq!(show(json!({"enum":["a","b"]})), "string");
        assert_eq!(show(json!({"enum":[1,2,null]})), "integer|null");
        assert_eq!(
            show(json!({"allOf":[{"$ref":"#/components/schemas/Pet"}]})),
            "object"
        );
        assert_eq!(
            show(json!({"oneOf":[{"type":"string"},{"type":"integer"}]})),
            "any"
        );
        assert_eq!(show(json!({"type":["string","integer"]})), "any");
        assert_eq!(show(json!({})), "any");
    }
}
