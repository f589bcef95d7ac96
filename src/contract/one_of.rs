//! `oneOf` is read as `anyOf` (docs/findings.md, readings). Real specs (Zoom, Adyen,
//! 1Password, ShipEngine, Jira, IX-API) write `oneOf` over branches that overlap, so a value
//! their servers accept fits two branches and fails "exactly one", at the top of a body or deep
//! inside a branch of another `oneOf`. A client cannot drift into an overlap, and a value that
//! fits no branch is still reported. jsonschema has no switch for this, so the keyword is
//! renamed in the document before anything is compiled, and every `$ref` that points through a
//! renamed `oneOf` is renamed with it. A `oneOf` beside an `anyOf` of its own is left as it is.

use std::collections::HashSet;
use std::sync::Arc;

use percent_encoding::percent_decode_str;
use serde_json::Value;

use crate::spec::push_token;

/// Keys whose values are data, not schemas: never walked.
const DATA: [&str; 5] = ["example", "examples", "default", "enum", "const"];

/// The document with every `oneOf` list renamed `anyOf`; not copied when it has none.
pub(super) fn read_one_of_as_any_of(mut doc: Arc<Value>) -> Arc<Value> {
    let mut renamed = HashSet::new();
    find(&doc, &mut String::new(), &mut renamed);
    if renamed.is_empty() {
        return doc;
    }
    rename(Arc::make_mut(&mut doc), &mut String::new(), &renamed);
    doc
}

/// The pointer of every `oneOf` list that can be renamed.
fn find(value: &Value, pointer: &mut String, out: &mut HashSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if DATA.contains(&key.as_str()) || key.starts_with("x-") {
                    continue;
                }
                let len = pointer.len();
                push_token(pointer, key);
                if key == "oneOf" && child.is_array() && !map.contains_key("anyOf") {
                    out.insert(pointer.clone());
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

fn rename(value: &mut Value, pointer: &mut String, renamed: &HashSet<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get_mut("$ref") {
                *target = renamed_ref(target, renamed);
            }
            let mut one_of = false;
            for (key, child) in map.iter_mut() {
                if DATA.contains(&key.as_str()) || key.starts_with("x-") {
                    continue;
                }
                let len = pointer.len();
                push_token(pointer, key);
                one_of |= key == "oneOf" && renamed.contains(pointer.as_str());
                rename(child, pointer, renamed);
                pointer.truncate(len);
            }
            if one_of && let Some(branches) = map.shift_remove("oneOf") {
                map.insert("anyOf".into(), branches);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                rename(item, pointer, renamed);
                pointer.truncate(len);
            }
        }
        _ => {}
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
        let doc = Arc::new(json!({"components": {"schemas": {
            "A": {"oneOf": [{"type": "string"}, {"properties": {"oneOf": {"type": "string"}}}]},
            "B": {"$ref": "#/components/schemas/A/oneOf/1"},
            "C": {"anyOf": [{"type": "object"}], "oneOf": [{"required": ["a"]}]},
            "D": {"$ref": "#/components/schemas/C/oneOf/0"},
            "E": {"example": {"oneOf": [1]}}
        }}}));
        let out = read_one_of_as_any_of(doc);
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
    fn a_document_without_one_of_is_not_copied() {
        let doc = Arc::new(json!({"components": {"schemas": {"A": {"anyOf": [true]}}}}));
        assert!(Arc::ptr_eq(&doc, &read_one_of_as_any_of(doc.clone())));
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
