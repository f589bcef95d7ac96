//! Before anything is compiled, every schema of the document is checked against the JSON
//! Schema 2020-12 meta-schema (the check jsonschema runs when it compiles) and every `pattern`
//! is compiled (which that check does not do), and each keyword refused is taken out of a copy
//! of the document: a `pattern` in another regex dialect (`\p{XDigit}`, `\A...\Z`) is removed, an
//! invalid keyword is removed, an invalid subschema becomes `true` (a malformed annotation such
//! as `examples: "x"` is removed without a warning: it checked nothing). Without this, one bad
//! pattern in a shared component refuses every body that refers to it, or the whole spec.
//! A `$ref` that leads deeper than the bound is taken out too (`ref_depth.rs`).
//! The document is copied only when something must change.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use jsonschema::meta::MetaValidator;
use serde_json::{Value, json};

use super::warning::{LoadWarning, Skipped};

/// Keys whose values are data, not schemas or OpenAPI objects: never walked.
const DATA: [&str; 5] = ["example", "examples", "default", "enum", "const"];
/// Keywords that annotate and check nothing (a malformed one is removed without a warning).
const ANNOTATIONS: [&str; 8] = [
    "title",
    "description",
    "examples",
    "example",
    "default",
    "deprecated",
    "$comment",
    "readOnly",
];
/// Keywords whose members are subschemas by name.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose members are subschemas by position.
const SCHEMA_LISTS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];

fn meta() -> &'static MetaValidator<'static> {
    static META: OnceLock<MetaValidator<'static>> = OnceLock::new();
    META.get_or_init(|| {
        jsonschema::meta::validator_for(&json!({})).expect("the bundled 2020-12 meta-schema")
    })
}

/// The document with every refused keyword, and every `$ref` that leads more than
/// `max_ref_depth` references deep, taken out, and a warning for each.
pub(super) fn sanitize(doc: Arc<Value>, max_ref_depth: usize) -> (Arc<Value>, Vec<LoadWarning>) {
    let mut roots = Vec::new();
    find_roots(&doc, &mut String::new(), &mut roots);
    // Pointer of each fix to what it does and the warning it gives (none for an annotation); a
    // BTreeMap so that fixes apply in a stable order and one location is fixed once.
    let mut fixes: Fixes = BTreeMap::new();
    let mut tried = HashMap::new();
    for root in &roots {
        let Some(schema) = doc.pointer(root) else {
            continue;
        };
        let mut patterns = Vec::new();
        find_patterns(schema, &mut root.clone(), &mut patterns);
        for (pointer, pattern) in patterns {
            if let Some(reason) = refused_pattern(&mut tried, pattern) {
                fixes
                    .entry(pointer)
                    .or_insert((Fix::Remove, Some(Skipped::Pattern), reason));
            }
        }
        if meta().is_valid(schema) {
            continue;
        }
        for error in meta().iter_errors(schema) {
            let at = format!("{root}{}", error.instance_path().as_str());
            let (pointer, fix) = fix_for(&doc, root, &at);
            let reason = match pointer.rsplit('/').next() {
                Some("pattern") => Some(Skipped::Pattern),
                _ if pointer.contains("/patternProperties") => Some(Skipped::Pattern),
                // A malformed annotation checks nothing: removed, with nothing to warn about.
                Some(k) if ANNOTATIONS.contains(&k) => None,
                _ => Some(Skipped::Schema),
            };
            fixes
                .entry(pointer)
                .or_insert((fix, reason, error.masked().to_string()));
        }
    }
    depth_fixes(&doc, max_ref_depth, &mut fixes);
    if fixes.is_empty() {
        return (doc, Vec::new());
    }
    let mut fixed = Arc::unwrap_or_clone(doc);
    // Children before parents (reverse order): a parent's removal must not hide a child's fix.
    for (pointer, (fix, _, _)) in fixes.iter().rev() {
        apply(&mut fixed, pointer, *fix);
    }
    let warnings = fixes
        .into_iter()
        .filter_map(|(pointer, (_, reason, detail))| {
            Some(LoadWarning::new(pointer, reason?, detail))
        })
        .collect();
    (Arc::new(fixed), warnings)
}

/// What each fix does, the warning it gives (none for an annotation) and its detail, by
/// pointer.
type Fixes = BTreeMap<String, (Fix, Option<Skipped>, String)>;

/// Each `$ref` that leads deeper than `max_ref_depth` is cut; only the way into a chain is
/// said (the rest of it is cut without a word).
fn depth_fixes(doc: &Value, max_ref_depth: usize, fixes: &mut Fixes) {
    for cut in super::ref_depth::too_deep(doc, max_ref_depth) {
        let (reason, detail) = match cut.entry {
            true => (
                Some(Skipped::RefDepth),
                format!(
                    "this $ref leads {} references deep, more than spec.max_ref_depth ({max_ref_depth}): it is not followed, and nothing is checked there",
                    cut.depth
                ),
            ),
            false => (None, String::new()),
        };
        fixes.insert(format!("{}/$ref", cut.at), (Fix::Remove, reason, detail));
    }
}

#[derive(Clone, Copy, Debug)]
enum Fix {
    /// Take the keyword out of its schema.
    Remove,
    /// Replace a subschema with `true`.
    AcceptAnything,
}

/// Which location to change for an error at `at` (inside the schema rooted at `root`).
fn fix_for(doc: &Value, root: &str, at: &str) -> (String, Fix) {
    if at == root {
        return (at.to_string(), Fix::AcceptAnything);
    }
    let parent = at.rsplit_once('/').map_or("", |(parent, _)| parent);
    let grand_key = parent.rsplit('/').next().unwrap_or("");
    let parent_is_list = doc.pointer(parent).is_some_and(Value::is_array);
    if SCHEMA_MAPS.contains(&grand_key) && !parent_is_list {
        return (at.to_string(), Fix::AcceptAnything);
    }
    if parent_is_list && SCHEMA_LISTS.contains(&grand_key) {
        return (at.to_string(), Fix::AcceptAnything);
    }
    if parent_is_list {
        // An item of a keyword's list (`required/0`, `type/1`): the keyword goes.
        return (parent.to_string(), Fix::Remove);
    }
    (at.to_string(), Fix::Remove)
}

fn apply(doc: &mut Value, pointer: &str, fix: Fix) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let key = last.replace("~1", "/").replace("~0", "~");
    match (fix, doc.pointer_mut(parent)) {
        (Fix::Remove, Some(Value::Object(map))) => {
            map.shift_remove(&key);
        }
        (Fix::AcceptAnything, Some(Value::Object(map))) => {
            map.insert(key, Value::Bool(true));
        }
        (Fix::AcceptAnything, Some(Value::Array(items))) => {
            if let Some(item) = key.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *item = Value::Bool(true);
            }
        }
        _ => {}
    }
}

/// Whether jsonschema compiles `pattern` (with its ECMA-262 translation); the reason when not.
/// The meta-schema does not check this, so a pattern in another dialect would fail the compile
/// of every schema that holds it.
fn refused_pattern(tried: &mut HashMap<String, Option<String>>, pattern: &str) -> Option<String> {
    tried
        .entry(pattern.to_string())
        .or_insert_with(|| {
            jsonschema::options()
                .offline()
                .build(&json!({ "pattern": pattern }))
                .err()
                .map(|e| e.to_string())
        })
        .clone()
}

/// Every `pattern` keyword under a schema, with its pointer (data keys not entered).
fn find_patterns<'v>(value: &'v Value, pointer: &mut String, out: &mut Vec<(String, &'v str)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if DATA.contains(&key.as_str()) {
                    continue;
                }
                let len = pointer.len();
                crate::spec::push_token(pointer, key);
                match (key.as_str(), child) {
                    ("pattern", Value::String(p)) => out.push((pointer.clone(), p)),
                    _ => find_patterns(child, pointer, out),
                }
                pointer.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                find_patterns(item, pointer, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// JSON pointers of every schema root: each entry of `components/schemas` and every `schema`
/// of a parameter, header or media type. A root's own subschemas are checked with it.
fn find_roots(value: &Value, pointer: &mut String, out: &mut Vec<String>) {
    let Value::Object(map) = value else {
        if let Value::Array(items) = value {
            for (i, item) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                find_roots(item, pointer, out);
                pointer.truncate(len);
            }
        }
        return;
    };
    let schemas_map = pointer == "/components/schemas";
    for (key, child) in map {
        if DATA.contains(&key.as_str()) || key.starts_with("x-") {
            continue;
        }
        let len = pointer.len();
        crate::spec::push_token(pointer, key);
        if schemas_map || key == "schema" {
            out.push(pointer.clone());
        } else {
            find_roots(child, pointer, out);
        }
        pointer.truncate(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(doc: Value) -> (Value, Vec<String>) {
        let (doc, warnings) = sanitize(Arc::new(doc), 256);
        let said = warnings
            .iter()
            .map(|w| format!("{} {}", w.reason.as_str(), w.pointer))
            .collect();
        (Arc::unwrap_or_clone(doc), said)
    }

    #[test]
    fn refused_keywords_are_taken_out_and_said() {
        let (doc, said) = fixed(json!({
            "openapi": "3.0.3",
            "paths": {"/a": {"post": {"requestBody": {"content": {
                "application/json": {"schema": null},
                "text/json": {"schema": {"type": "object", "properties": {
                    "id": {"type": "string", "pattern": "\\p{XDigit}{8}"},
                    "ok": {"type": "string", "pattern": "^[a-z]+$"}
                }}}
            }}}}},
            "components": {"schemas": {
                "Item": {"type": "object", "required": {"enum": ["a"]}, "properties": {
                    "bad": 0,
                    "kind": {"type": "string", "enum": ["a", "b"]}
                }}
            }}
        }));
        assert_eq!(
            said,
            [
                "schema /components/schemas/Item/properties/bad",
                "schema /components/schemas/Item/required",
                "schema /paths/~1a/post/requestBody/content/application~1json/schema",
                "pattern /paths/~1a/post/requestBody/content/text~1json/schema/properties/id/pattern",
            ]
        );
        let body = &doc["paths"]["/a"]["post"]["requestBody"]["content"];
        assert_eq!(body["application/json"]["schema"], json!(true));
        assert_eq!(
            body["text/json"]["schema"]["properties"]["id"],
            json!({"type": "string"})
        );
        assert_eq!(
            body["text/json"]["schema"]["properties"]["ok"]["pattern"],
            "^[a-z]+$"
        );
        assert_eq!(
            doc["components"]["schemas"]["Item"]["properties"]["bad"],
            json!(true)
        );
        assert!(
            doc["components"]["schemas"]["Item"]
                .get("required")
                .is_none()
        );
    }

    #[test]
    fn a_valid_document_is_not_copied() {
        let doc = Arc::new(json!({"openapi": "3.1.0", "components": {"schemas": {
            "A": {"type": "string", "pattern": "^[a-z]{2,}$"}
        }}}));
        let (out, warnings) = sanitize(doc.clone(), 256);
        assert!(warnings.is_empty());
        assert!(Arc::ptr_eq(&doc, &out));
    }
}
