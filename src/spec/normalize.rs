//! OpenAPI 3.0 schemas are a dialect of JSON Schema draft 4; 3.1 uses 2020-12. driftwatch
//! compiles one dialect, so 3.0 schemas are rewritten in place: `nullable: true` becomes a
//! type array (or an `anyOf` with `{"type": "null"}` where there is no `type` to extend, as for
//! a `$ref` or an `allOf`), and boolean `exclusiveMinimum`/`exclusiveMaximum` become numbers.
//! A `readOnly` property leaves `required` (OpenAPI requires it of responses only), and
//! `additionalProperties` beside `allOf`/`anyOf`/`oneOf` becomes `unevaluatedProperties`.

use serde_json::{Map, Value, json};

use super::bundle::{EXTERNAL, NAME_MAPS, is_literal_key};

/// Normalize every schema in a bundled 3.0 document.
pub(crate) fn normalize_document(doc: &mut Value) {
    mark_read_only_refs(doc);
    walk_document(doc, false);
}

/// A property that is a `$ref` to a `readOnly` schema (InfluxDB's `self: {$ref: Link}`) is
/// read-only too: the mark is copied beside the `$ref`, so that the property leaves `required`
/// like one marked in place.
fn mark_read_only_refs(doc: &mut Value) {
    let mut found = std::collections::HashSet::new();
    find_read_only_refs(doc, doc, &mut found);
    let read_only: std::collections::HashSet<String> =
        found.into_iter().map(String::from).collect();
    if !read_only.is_empty() {
        mark(doc, &read_only);
    }
}

/// Every `$ref` of a property whose target is `readOnly` (no pointers built on the way: this
/// walks the whole document).
fn find_read_only_refs<'d>(
    doc: &Value,
    value: &'d Value,
    out: &mut std::collections::HashSet<&'d str>,
) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = map.get("properties") {
                for property in properties.values() {
                    let Some(target) = property.get("$ref").and_then(Value::as_str) else {
                        continue;
                    };
                    let read_only = target
                        .strip_prefix('#')
                        .map(|p| percent_encoding::percent_decode_str(p).decode_utf8_lossy())
                        .and_then(|p| doc.pointer(&p))
                        .is_some_and(|t| t.get("readOnly") == Some(&Value::Bool(true)));
                    if read_only {
                        out.insert(target);
                    }
                }
            }
            for (key, child) in map {
                if !is_literal_key(key) {
                    find_read_only_refs(doc, child, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| find_read_only_refs(doc, v, out)),
        _ => {}
    }
}

fn mark(value: &mut Value, read_only: &std::collections::HashSet<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = map.get_mut("properties") {
                for property in properties.values_mut() {
                    let Value::Object(p) = property else { continue };
                    let hit = p
                        .get("$ref")
                        .and_then(Value::as_str)
                        .is_some_and(|r| read_only.contains(r));
                    if hit {
                        p.insert("readOnly".into(), Value::Bool(true));
                    }
                }
            }
            for (key, child) in map.iter_mut() {
                if !is_literal_key(key) {
                    mark(child, read_only);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| mark(v, read_only)),
        _ => {}
    }
}

fn walk_document(value: &mut Value, in_names: bool) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if in_names {
                    walk_document(child, false);
                } else if key == "schema" {
                    normalize_schema(child);
                } else if key == "schemas" {
                    child
                        .as_object_mut()
                        .into_iter()
                        .flat_map(|m| m.values_mut())
                        .for_each(normalize_schema);
                } else if key == EXTERNAL {
                    for slot in child.as_array_mut().into_iter().flatten() {
                        let openapi_object =
                            slot.get("in").is_some() || slot.get("content").is_some();
                        if openapi_object {
                            walk_document(slot, false)
                        } else {
                            normalize_schema(slot)
                        }
                    }
                } else if !is_literal_key(key) {
                    let names = NAME_MAPS.contains(&key.as_str()) && child.is_object();
                    walk_document(child, names);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| walk_document(v, false)),
        _ => {}
    }
}

/// Keywords whose value is one subschema.
const ONE: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "contains",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
];
/// Keywords whose value is a list of subschemas.
const LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value maps names to subschemas.
const MAP: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

pub(crate) fn normalize_schema(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    for (key, child) in map.iter_mut() {
        let key = key.as_str();
        if ONE.contains(&key) {
            match child {
                Value::Array(items) => items.iter_mut().for_each(normalize_schema),
                other => normalize_schema(other),
            }
        } else if LIST.contains(&key) {
            child
                .as_array_mut()
                .into_iter()
                .flatten()
                .for_each(normalize_schema);
        } else if MAP.contains(&key) {
            child
                .as_object_mut()
                .into_iter()
                .flat_map(|m| m.values_mut())
                .for_each(normalize_schema);
        }
    }
    exclusive_bound(map, "exclusiveMinimum", "minimum");
    exclusive_bound(map, "exclusiveMaximum", "maximum");
    drop_read_only_required(map);
    see_through_composition(map);
    if let Some(nullable) = map.remove("nullable")
        && nullable == Value::Bool(true)
    {
        make_nullable(schema);
    }
}

/// OpenAPI: a `readOnly` property in `required` is required of responses only, so a request
/// that leaves it out (at any depth) is valid. One schema serves both directions, so the name
/// leaves `required`; a response without it is not reported either.
fn drop_read_only_required(map: &mut Map<String, Value>) {
    let read_only: Vec<String> = map
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(_, p)| p.get("readOnly") == Some(&Value::Bool(true)))
        .map(|(name, _)| name.clone())
        .collect();
    if read_only.is_empty() {
        return;
    }
    if let Some(Value::Array(required)) = map.get_mut("required") {
        required.retain(|n| !n.as_str().is_some_and(|n| read_only.iter().any(|r| r == n)));
    }
}

/// `additionalProperties` beside `allOf`/`anyOf`/`oneOf` means, to every author who writes it,
/// "no fields but the ones declared here and in the branches"; JSON Schema reads it as "none
/// but this schema's own `properties`", so that a body with the branches' fields is refused
/// (and with `required` names from a branch, every body is). `unevaluatedProperties` says what
/// the author meant: it sees the properties the branches evaluated.
fn see_through_composition(map: &mut Map<String, Value>) {
    let composed = ["allOf", "anyOf", "oneOf"]
        .iter()
        .any(|k| map.contains_key(*k));
    if composed
        && !map.contains_key("unevaluatedProperties")
        && let Some(additional) = map.remove("additionalProperties")
    {
        map.insert("unevaluatedProperties".into(), additional);
    }
}

fn exclusive_bound(map: &mut Map<String, Value>, exclusive: &str, inclusive: &str) {
    if let Some(Value::Bool(flag)) = map.get(exclusive) {
        let flag = *flag;
        map.remove(exclusive);
        if flag && let Some(bound) = map.remove(inclusive) {
            map.insert(exclusive.into(), bound);
        }
    }
}

fn make_nullable(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    if let Some(values) = map.get_mut("enum").and_then(Value::as_array_mut)
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
    let wrap_instead = !map.contains_key("enum") && !map.is_empty();
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(types)) => {
            if !types.contains(&json!("null")) {
                types.push(json!("null"));
            }
        }
        _ if !wrap_instead => {}
        _ => {
            let inner = std::mem::take(schema);
            *schema = json!({"anyOf": [inner, {"type": "null"}]});
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(mut v: Value) -> Value {
        normalize_schema(&mut v);
        v
    }

    #[test]
    fn a_property_referring_to_a_read_only_schema_leaves_required() {
        let mut doc = json!({"components": {"schemas": {
            "Link": {"type": "string", "readOnly": true},
            "Links": {"type": "object", "required": ["self", "next"], "properties": {
                "self": {"$ref": "#/components/schemas/Link"},
                "next": {"type": "string"}
            }}
        }}});
        normalize_document(&mut doc);
        assert_eq!(
            doc["components"]["schemas"]["Links"]["required"],
            json!(["next"])
        );
    }

    #[test]
    fn nullable_becomes_a_type_array_or_a_null_wrap() {
        assert_eq!(
            norm(json!({"type":"integer","nullable":true})),
            json!({"type":["integer","null"]})
        );
        assert_eq!(
            norm(json!({"type":"string","nullable":false})),
            json!({"type":"string"})
        );
        assert_eq!(
            norm(json!({"type":"string","enum":["a"],"nullable":true})),
            json!({"type":["string","null"],"enum":["a",null]})
        );
        assert_eq!(
            norm(json!({"$ref":"#/components/schemas/A","nullable":true})),
            json!({"anyOf":[{"$ref":"#/components/schemas/A"},{"type":"null"}]})
        );
        assert_eq!(
            norm(json!({"allOf":[{"$ref":"#/x"}],"nullable":true})),
            json!({"anyOf":[{"allOf":[{"$ref":"#/x"}]},{"type":"null"}]})
        );
    }

    #[test]
    fn nested_schemas_and_boolean_bounds() {
        let v = norm(
            json!({"type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true,
            "maximum":9,"exclusiveMaximum":false}},"items":{"nullable":true,"type":"string"}}),
        );
        assert_eq!(
            v["properties"]["n"],
            json!({"type":"number","exclusiveMinimum":0,"maximum":9})
        );
        assert_eq!(v["items"]["type"], json!(["string", "null"]));
    }

    #[test]
    fn document_walk_reaches_parameters_bodies_and_components_but_not_examples() {
        let mut doc = json!({"paths":{"/a":{"get":{"parameters":[{"name":"x","in":"query","schema":{"type":"integer","nullable":true}}],
            "requestBody":{"content":{"application/json":{"schema":{"type":"string","nullable":true},
            "example":{"schema":{"nullable":true}}}}}}}},
            "components":{"schemas":{"A":{"type":"boolean","nullable":true}}}});
        normalize_document(&mut doc);
        assert_eq!(
            doc.pointer("/paths/~1a/get/parameters/0/schema/type")
                .unwrap(),
            &json!(["integer", "null"])
        );
        let media = doc
            .pointer("/paths/~1a/get/requestBody/content/application~1json")
            .unwrap();
        assert_eq!(media["schema"]["type"], json!(["string", "null"]));
        assert_eq!(media["example"]["schema"]["nullable"], json!(true));
        assert_eq!(
            doc.pointer("/components/schemas/A/type").unwrap(),
            &json!(["boolean", "null"])
        );
    }
}
