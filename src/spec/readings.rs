//! Readings of real specs, applied to the document when it is loaded, before anything else
//! reads it (in place: a second copy of GitHub's document would add 60 MB). Load warnings are
//! given with the document's own pointers ([`original_pointer`]). docs/findings.md lists the
//! readings with the requests that show each.
//!
//! - `oneOf` is read as `anyOf`. Real specs (Zoom, Adyen, 1Password, ShipEngine, Jira, IX-API)
//!   write `oneOf` over branches that overlap, so a value their servers accept fits two branches
//!   and fails "exactly one", at the top of a body or deep inside a branch of another `oneOf`.
//!   A client cannot drift into an overlap, and a value that fits no branch is still reported.
//!   jsonschema has no switch for this, so the keyword is renamed, and every `$ref` that points
//!   through a renamed `oneOf` is renamed with it. A `oneOf` beside an `anyOf` of its own is
//!   left as it is.
//! - An `enum` whose members are not of the schema's `type` lists them in that type:
//!   `type: string, enum: [1, 2]` (Zoom's `tspId`) accepts `"1"`, `type: integer, enum: ["1"]`
//!   (Trakt's `rating`) accepts `1`; no value could fit it as written, and on the wire (a path, a
//!   query) the two spellings are one text. An `enum` of scalars on an array schema (BBC's
//!   `mixin`) lists its items' values.

use std::collections::HashSet;

use percent_encoding::percent_decode_str;
use serde_json::{Map, Value};

use super::push_token;

/// Keys whose values are data, not schemas: never walked.
const DATA: [&str; 5] = ["example", "examples", "default", "enum", "const"];

fn walked(key: &str) -> bool {
    !DATA.contains(&key) && !key.starts_with("x-")
}

/// A `oneOf` list with no `anyOf` beside it: read as `anyOf`.
fn renamable_one_of(map: &Map<String, Value>) -> bool {
    map.get("oneOf").is_some_and(Value::is_array) && !map.contains_key("anyOf")
}

/// Apply the readings to `doc`; the pointers (as written) of the `oneOf`s renamed `anyOf`.
pub(crate) fn read(doc: &mut Value) -> HashSet<String> {
    let mut found = Found::default();
    find(doc, &mut String::new(), &mut found);
    if !found.one_ofs.is_empty() || found.mistyped_enum {
        rename(doc, &found.one_ofs);
    }
    found.one_ofs
}

/// A pointer into the document as read, spelled as in the document as written (`anyOf` back
/// to `oneOf` where it was renamed).
pub(crate) fn original_pointer(pointer: &str, renamed: &HashSet<String>) -> String {
    if renamed.is_empty() {
        return pointer.to_string();
    }
    let mut out = String::new();
    for token in pointer.split('/').skip(1) {
        out.push('/');
        let as_written = format!("{out}oneOf");
        if token == "anyOf" && renamed.contains(&as_written) {
            out.push_str("oneOf");
        } else {
            out.push_str(token);
        }
    }
    out
}

#[derive(Default)]
struct Found {
    /// The pointer of every `oneOf` list that can be renamed.
    one_ofs: HashSet<String>,
    /// Whether some `enum` lists members of another type than its schema's.
    mistyped_enum: bool,
}

fn find(value: &Value, pointer: &mut String, out: &mut Found) {
    match value {
        Value::Object(map) => {
            out.mistyped_enum |= typed_enum(map).is_some();
            let one_of = renamable_one_of(map);
            for (key, child) in map.iter().filter(|(key, _)| walked(key)) {
                let len = pointer.len();
                push_token(pointer, key);
                if one_of && key == "oneOf" {
                    out.one_ofs.insert(pointer.clone());
                }
                find(child, pointer, out);
                pointer.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                find(item, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// Rename what [`find`] found: the same test on each map, so no pointers are built here.
fn rename(value: &mut Value, renamed: &HashSet<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get_mut("$ref")
                && target.contains("/oneOf/")
            {
                *target = renamed_ref(target, renamed);
            }
            if let Some(fix) = typed_enum(map) {
                fix.apply(map);
            }
            for (_, child) in map.iter_mut().filter(|(key, _)| walked(key)) {
                rename(child, renamed);
            }
            if renamable_one_of(map)
                && let Some(branches) = map.shift_remove("oneOf")
            {
                map.insert("anyOf".into(), branches);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename(v, renamed)),
        _ => {}
    }
}

/// How a schema's `enum` is read when its members are not of its `type`.
enum EnumFix {
    /// The members, each in the schema's type (those that have no such spelling left out).
    Members(Vec<Value>),
    /// An array's `enum` of scalars: moved into `items` (dropped if `items` has one).
    ToItems,
}

impl EnumFix {
    fn apply(self, map: &mut Map<String, Value>) {
        match self {
            EnumFix::Members(members) => {
                map.insert("enum".into(), Value::Array(members));
            }
            EnumFix::ToItems => {
                let members = map.shift_remove("enum").unwrap_or_default();
                if let Some(Value::Object(items)) = map.get_mut("items") {
                    items.entry("enum").or_insert(members);
                }
            }
        }
    }
}

/// The fix for `map`'s `enum`, or `None` when its members are of its `type` (or no `type`).
fn typed_enum(map: &Map<String, Value>) -> Option<EnumFix> {
    let ty = map.get("type")?.as_str()?;
    let members = map.get("enum")?.as_array()?;
    if ty == "array" {
        return members
            .iter()
            .all(|m| !m.is_array() && !m.is_null())
            .then_some(EnumFix::ToItems);
    }
    let fits = |m: &Value| m.is_null() || of_type(ty, m);
    if members.iter().all(fits) {
        return None;
    }
    let mut typed: Vec<Value> = Vec::new();
    for member in members.iter().filter_map(|m| as_type(ty, m)) {
        if !typed.contains(&member) {
            typed.push(member);
        }
    }
    (!typed.is_empty()).then_some(EnumFix::Members(typed))
}

fn of_type(ty: &str, v: &Value) -> bool {
    match ty {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        _ => true,
    }
}

/// `v` spelled in type `ty`, as a path or query carries it: `1` as `"1"`, `"1"` as `1`.
fn as_type(ty: &str, v: &Value) -> Option<Value> {
    if v.is_null() || of_type(ty, v) {
        return Some(v.clone());
    }
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(_) | Value::Bool(_) => v.to_string(),
        _ => return None,
    };
    match ty {
        "string" => Some(Value::String(text)),
        "integer" => text.parse::<i64>().ok().map(Value::from),
        "number" => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        "boolean" => text.parse::<bool>().ok().map(Value::Bool),
        _ => None,
    }
}

/// `#/a/oneOf/0` as `#/a/anyOf/0` where `/a/oneOf` was renamed. Each token is compared
/// percent-decoded (`%7Bid%7D`) and written back as it was.
fn renamed_ref(target: &str, renamed: &HashSet<String>) -> String {
    let Some(fragment) = target.strip_prefix('#') else {
        return target.to_string();
    };
    let mut decoded = String::new();
    let mut out = String::from("#");
    for (i, token) in fragment.split('/').enumerate() {
        if i > 0 {
            decoded.push('/');
            out.push('/');
        }
        decoded.push_str(&percent_decode_str(token).decode_utf8_lossy());
        if token == "oneOf" && renamed.contains(&decoded) {
            out.push_str("anyOf");
        } else {
            out.push_str(token);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_of_and_the_refs_through_it_are_renamed() {
        let mut out = json!({"components": {"schemas": {
            "A": {"oneOf": [{"type": "string"}, {"properties": {"oneOf": {"type": "string"}}}]},
            "B": {"$ref": "#/components/schemas/A/oneOf/1"},
            "C": {"anyOf": [{"type": "object"}], "oneOf": [{"required": ["a"]}]},
            "D": {"$ref": "#/components/schemas/C/oneOf/0"},
            "E": {"example": {"oneOf": [1]}}
        }}});
        let renamed = read(&mut out);
        assert_eq!(
            original_pointer("/components/schemas/A/anyOf/1/properties", &renamed),
            "/components/schemas/A/oneOf/1/properties"
        );
        let s = &out["components"]["schemas"];
        assert_eq!(s["A"].get("oneOf"), None);
        assert_eq!(
            s["A"]["anyOf"][1]["properties"]["oneOf"],
            json!({"type": "string"})
        );
        assert_eq!(s["B"]["$ref"], "#/components/schemas/A/anyOf/1");
        assert_eq!(s["C"]["oneOf"], json!([{"required": ["a"]}]));
        assert_eq!(s["D"]["$ref"], "#/components/schemas/C/oneOf/0");
        assert_eq!(s["E"]["example"], json!({"oneOf": [1]}));
    }

    #[test]
    fn an_enum_of_another_type_is_read_in_the_schema_s_type() {
        let mut out = json!({"components": {"schemas": {
            "Tsp": {"type": "string", "enum": [1, 2]},
            "Rating": {"type": "integer", "enum": ["1", "2", "x", null]},
            "Mixin": {"type": "array", "enum": ["live", "promotions"], "items": {"type": "string"}},
            "Tagged": {"type": "array", "enum": ["a"], "items": {"enum": ["b"]}},
            "Fine": {"type": ["string", "null"], "enum": [1]}
        }}});
        read(&mut out);
        let s = &out["components"]["schemas"];
        assert_eq!(s["Tsp"]["enum"], json!(["1", "2"]));
        assert_eq!(s["Rating"]["enum"], json!([1, 2, null]));
        assert_eq!(
            s["Mixin"],
            json!({"type": "array", "items": {"type": "string", "enum": ["live", "promotions"]}})
        );
        assert_eq!(
            s["Tagged"],
            json!({"type": "array", "items": {"enum": ["b"]}})
        );
        assert_eq!(
            s["Fine"]["enum"],
            json!([1]),
            "a type list is left as written"
        );
    }

    #[test]
    fn percent_encoded_tokens_are_compared_decoded() {
        let renamed = HashSet::from(["/paths/~1a~1{id}/post/oneOf".to_string()]);
        assert_eq!(
            renamed_ref("#/paths/~1a~1%7Bid%7D/post/oneOf/0", &renamed),
            "#/paths/~1a~1%7Bid%7D/post/anyOf/0"
        );
    }
}
