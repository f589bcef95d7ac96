//! Several OpenAPI documents as one API: an issue tracker serves its platform API, its agile
//! API and its service-desk API on one host, each with a spec of its own. Each document is read
//! and bundled on its own, then merged into one document the contract routes as one: every path
//! under its document's base path (`/rest/agile/1.0` + `/board/{id}`), every `$ref` rewritten to
//! match, a component whose name another document already uses renamed `{document}.{name}`,
//! and a document's top-level `security` pushed down to its operations. The same method and
//! full path in two documents is refused naming both: which one is meant could not be told.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::bundle::{collect_refs, local_target, push_token};
use super::{METHODS, SpecError};

/// One document of an API made of several, as `/spec` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DocumentInfo {
    pub path: PathBuf,
    pub base_path: String,
    /// The hash of its bytes and of the files it bundles.
    pub revision: String,
}

/// A document read and bundled, and where it is served.
pub(crate) struct Part {
    pub path: PathBuf,
    pub base: String,
    pub doc: Value,
}

/// The documents as one, in order: the first's `openapi` and `info`.
pub(crate) fn merge(parts: Vec<Part>) -> Result<Value, SpecError> {
    let mut merged = Map::new();
    let mut paths = Map::new();
    let mut components = Map::new();
    let mut from: Vec<(String, usize)> = Vec::new();
    let files: Vec<PathBuf> = parts.iter().map(|p| p.path.clone()).collect();
    for (i, mut part) in parts.into_iter().enumerate() {
        if i == 0 {
            for key in ["openapi", "info", "jsonSchemaDialect"] {
                if let Some(v) = part.doc.get(key) {
                    merged.insert(key.into(), v.clone());
                }
            }
        }
        let renamed = rename_components(&part, &components);
        retarget(&mut part, &renamed);
        take_components(&mut part.doc, &label(&part.path), &renamed, &mut components);
        let security = part.doc.get("security").cloned();
        let Some(Value::Object(own)) = part.doc.get_mut("paths").map(Value::take) else {
            continue;
        };
        for (template, item) in own {
            let full = format!("{}{template}", part.base);
            let item = with_security(item, security.as_ref());
            add_path(&mut paths, &full, item, (i, &files), &mut from)?;
        }
    }
    merged.insert("paths".into(), Value::Object(paths));
    merged.insert("components".into(), Value::Object(components));
    Ok(Value::Object(merged))
}

/// `document.Name` for each component of `part` whose section and name are taken already.
fn rename_components(part: &Part, taken: &Map<String, Value>) -> HashSet<(String, String)> {
    let mut renamed = HashSet::new();
    let Some(Value::Object(sections)) = part.doc.get("components") else {
        return renamed;
    };
    for (section, names) in sections {
        let (Some(names), Some(Value::Object(have))) = (names.as_object(), taken.get(section))
        else {
            continue;
        };
        for name in names.keys().filter(|n| have.contains_key(*n)) {
            renamed.insert((section.clone(), name.clone()));
        }
    }
    renamed
}

/// `agile` for `/etc/jira/agile.json`: what a renamed component is prefixed with.
fn label(path: &Path) -> String {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let stem = stem.trim_end_matches(".json").trim_end_matches(".yaml");
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    stem.chars().map(|c| if ok(c) { c } else { '_' }).collect()
}

/// Every local `$ref` of the part, pointed where its target will be once merged.
fn retarget(part: &mut Part, renamed: &HashSet<(String, String)>) {
    let mut refs = Vec::new();
    collect_refs(&part.doc, &mut String::new(), false, &mut refs);
    let label = label(&part.path);
    for (at, reference) in refs {
        let Some(target) = local_target(&reference) else {
            continue;
        };
        let tokens: Vec<String> = target.split('/').skip(1).map(unescape).collect();
        let moved = match tokens.as_slice() {
            [c, section, name, rest @ ..]
                if c == "components" && renamed.contains(&(section.clone(), name.clone())) =>
            {
                let name = format!("{label}.{name}");
                pointer(
                    [c.as_str(), section, &name]
                        .into_iter()
                        .chain(rest.iter().map(String::as_str)),
                )
            }
            [p, template, rest @ ..] if p == "paths" => {
                let full = format!("{}{template}", part.base);
                pointer(
                    [p.as_str(), &full]
                        .into_iter()
                        .chain(rest.iter().map(String::as_str)),
                )
            }
            _ => continue,
        };
        if let Some(Value::Object(holder)) = part.doc.pointer_mut(&at) {
            holder.insert("$ref".into(), Value::String(format!("#{moved}")));
        }
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn pointer<'a>(tokens: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for t in tokens {
        push_token(&mut out, t);
    }
    out
}

/// Move the part's components into `into`, the renamed ones under their new names.
fn take_components(
    doc: &mut Value,
    label: &str,
    renamed: &HashSet<(String, String)>,
    into: &mut Map<String, Value>,
) {
    let Some(Value::Object(sections)) = doc.get_mut("components").map(Value::take) else {
        return;
    };
    for (section, names) in sections {
        let Value::Object(names) = names else {
            continue;
        };
        let have = into
            .entry(section.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(have) = have else { continue };
        for (name, value) in names {
            let key = match renamed.contains(&(section.clone(), name.clone())) {
                true => format!("{label}.{name}"),
                false => name,
            };
            have.insert(key, value);
        }
    }
}

/// The path item with the document's top-level `security` on each operation that has none.
fn with_security(mut item: Value, security: Option<&Value>) -> Value {
    let (Some(security), Value::Object(map)) = (security, &mut item) else {
        return item;
    };
    for method in METHODS {
        if let Some(Value::Object(op)) = map.get_mut(method) {
            op.entry("security").or_insert_with(|| security.clone());
        }
    }
    item
}

/// Add `item` at `full`; when another document has that path too, each keeps its own
/// operations (its path-level parameters moved onto them), and a method in both is refused.
fn add_path(
    paths: &mut Map<String, Value>,
    full: &str,
    item: Value,
    (i, files): (usize, &[PathBuf]),
    from: &mut Vec<(String, usize)>,
) -> Result<(), SpecError> {
    let Some(have) = paths.get_mut(full) else {
        from.push((full.to_string(), i));
        paths.insert(full.to_string(), item);
        return Ok(());
    };
    let first = from.iter().find(|(p, _)| p == full).map_or(0, |(_, d)| *d);
    let (mut have_map, item_map) = (lowered(have.take()), lowered(item));
    for (key, op) in item_map {
        if METHODS.contains(&key.as_str()) && have_map.contains_key(&key) {
            let (a, b) = (files[first].display(), files[i].display());
            return Err(SpecError::at(
                &files[i],
                &pointer(["paths", full, &key].into_iter()),
                format!(
                    "{} {full} is in two documents of this API, {a} and {b}: give them base \
                     paths that tell them apart",
                    key.to_uppercase()
                ),
            ));
        }
        have_map.insert(key, op);
    }
    *have = Value::Object(have_map);
    Ok(())
}

/// A path item with its path-level `parameters` moved onto each operation (an operation's own
/// parameter of the same name and place wins, as OpenAPI says).
fn lowered(item: Value) -> Map<String, Value> {
    let Value::Object(mut map) = item else {
        return Map::new();
    };
    let Some(Value::Array(shared)) = map.remove("parameters") else {
        return map;
    };
    let key = |p: &Value| {
        (
            p.get("name").cloned(),
            p.get("in").cloned(),
            p.get("$ref").cloned(),
        )
    };
    for method in METHODS {
        let Some(Value::Object(op)) = map.get_mut(method) else {
            continue;
        };
        let own = op
            .entry("parameters")
            .or_insert_with(|| Value::Array(Vec::new()));
        let Value::Array(own) = own else { continue };
        let have: Vec<_> = own.iter().map(key).collect();
        own.extend(shared.iter().filter(|p| !have.contains(&key(p))).cloned());
    }
    map
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use crate::spec::{LoadOptions, Spec, file_revision_now};

    fn write(dir: &std::path::Path, name: &str, doc: serde_json::Value) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, doc.to_string()).unwrap();
        path
    }

    #[test]
    fn documents_merge_under_their_base_paths_with_refs_and_names_kept_apart() {
        let dir = std::env::temp_dir().join(format!("driftwatch-docs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let issue = json!({"type": "object", "properties": {"key": {"type": "string"}}});
        let platform = write(
            &dir,
            "platform.json",
            json!({
                "openapi": "3.0.3", "info": {"title": "platform", "version": "3"},
                "security": [{"basic": []}],
                "paths": {"/issue/{key}": {
                    "parameters": [{"name": "key", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "get": {"operationId": "getIssue", "responses": {"200": {"description": "ok",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Issue"}}}}}}}},
                "components": {"schemas": {"Issue": issue}}
            }),
        );
        let board = json!({"type": "object", "properties": {"id": {"type": "integer"}}});
        let agile = write(
            &dir,
            "agile.json",
            json!({
                "openapi": "3.0.1", "info": {"title": "agile", "version": "1"},
                "paths": {
                    "/issue/{key}": {"get": {"operationId": "getAgileIssue",
                        "parameters": [{"$ref": "#/paths/~1board~1{id}/get/parameters/0"}],
                        "responses": {"200": {"description": "ok",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Issue"}}}}}}},
                    "/board/{id}": {"get": {"operationId": "getBoard",
                        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
                        "responses": {"200": {"description": "ok"}}}}},
                "components": {"schemas": {"Issue": board}}
            }),
        );
        let docs = vec![
            (platform.clone(), "/rest/api/3".into()),
            (agile.clone(), "/rest/agile/1.0/".into()),
        ];
        let spec = Spec::load_documents(&docs, &LoadOptions::default()).unwrap();
        let paths = &spec.doc["paths"];
        let ours = &paths["/rest/api/3/issue/{key}"]["get"];
        assert_eq!(
            ours["security"],
            json!([{"basic": []}]),
            "the document's security, pushed down"
        );
        assert_eq!(
            ours["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Issue"
        );
        let theirs = &paths["/rest/agile/1.0/issue/{key}"]["get"];
        assert_eq!(
            theirs["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/agile.Issue"
        );
        assert_eq!(
            theirs["parameters"][0]["$ref"],
            "#/paths/~1rest~1agile~11.0~1board~1{id}/get/parameters/0"
        );
        assert_eq!(
            spec.doc["components"]["schemas"]["Issue"]["properties"]["key"]["type"],
            "string"
        );
        assert_eq!(
            spec.doc["components"]["schemas"]["agile.Issue"]["properties"]["id"]["type"],
            "integer"
        );
        assert_eq!(spec.documents.len(), 2);
        assert_eq!(spec.documents[1].base_path, "/rest/agile/1.0/");
        assert_ne!(spec.documents[0].revision, spec.documents[1].revision);
        crate::contract::Contract::compile(&spec, &Default::default()).unwrap();

        // Both documents are watched and hashed: an edit to the second is a new revision.
        let max = LoadOptions::default().max_bytes;
        let now = || file_revision_now(&platform, &spec.files, max);
        assert_eq!(now().as_ref(), Some(&spec.revision));
        std::fs::write(
            &agile,
            std::fs::read_to_string(&agile)
                .unwrap()
                .replace("getBoard", "board"),
        )
        .unwrap();
        assert_ne!(now().as_ref(), Some(&spec.revision));
        assert_eq!(
            Spec::load_documents(&docs, &LoadOptions::default())
                .unwrap()
                .revision,
            now().unwrap()
        );

        // One path in two documents keeps each one's operations, its path parameters moved on.
        let shared = vec![
            (platform.clone(), "/".into()),
            (
                write(
                    &dir,
                    "put.json",
                    json!({
                        "openapi": "3.0.3", "info": {"title": "p", "version": "1"},
                        "paths": {"/issue/{key}": {"put": {"responses": {"200": {"description": "ok"}}},
                            "parameters": [{"name": "key", "in": "path", "required": true, "schema": {"type": "string"}}]}}
                    }),
                ),
                "/".into(),
            ),
        ];
        let spec = Spec::load_documents(&shared, &LoadOptions::default()).unwrap();
        let item = &spec.doc["paths"]["/issue/{key}"];
        assert_eq!(item["get"]["parameters"][0]["name"], "key");
        assert_eq!(item["put"]["parameters"][0]["name"], "key");
        assert!(item.get("parameters").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
