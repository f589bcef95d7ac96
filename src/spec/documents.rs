//! Several OpenAPI documents as one API: an issue tracker serves its platform API, its agile
//! API and its service-desk API on one host, each with a spec of its own. Each document is read
//! and bundled on its own, then merged into one document the contract routes as one: every path
//! under its document's base path (`/rest/agile/1.0` + `/board/{id}`), every `$ref` rewritten to
//! match, a component whose name another document already uses renamed to a name no other
//! component has (`agile.Issue`), and a document's top-level `security` pushed down to its
//! operations. The same method on one route in two documents (`/items/{id}` is
//! `/items/{itemId}` to the router) is refused naming both: which one is meant could not be told.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

use super::bundle::{EXTERNAL, collect_refs, local_target, push_token};
use super::{METHODS, SpecError};
use crate::template::normalize_template;

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
    let mut routes = Routes::default();
    let files: Vec<PathBuf> = parts.iter().map(|p| p.path.clone()).collect();
    for (i, mut part) in parts.into_iter().enumerate() {
        if i == 0 {
            for key in ["openapi", "info", "jsonSchemaDialect"] {
                if let Some(v) = part.doc.get(key) {
                    merged.insert(key.into(), v.clone());
                }
            }
        }
        let renamed = rename_components(&part, i + 1, &components);
        let bundled = components.get(EXTERNAL).and_then(Value::as_array);
        retarget(&mut part, &renamed, bundled.map_or(0, Vec::len));
        take_components(&mut part.doc, &renamed, &mut components);
        let security = part.doc.get("security").cloned();
        let Some(Value::Object(own)) = part.doc.get_mut("paths").map(Value::take) else {
            continue;
        };
        for (template, item) in own {
            let full = format!("{}{template}", part.base);
            let item = with_security(item, security.as_ref());
            routes.claim(&full, &item, (i, &files))?;
            add_path(&mut paths, &full, item);
        }
    }
    merged.insert("paths".into(), Value::Object(paths));
    merged.insert("components".into(), Value::Object(components));
    Ok(Value::Object(merged))
}

/// A component's new name, by its section and old name.
type Renamed = HashMap<(String, String), String>;

/// A free name for each component of `part` (the `number`th document) whose section and
/// name are taken already.
fn rename_components(part: &Part, number: usize, taken: &Map<String, Value>) -> Renamed {
    let mut renamed = HashMap::new();
    let Some(Value::Object(sections)) = part.doc.get("components") else {
        return renamed;
    };
    let stem = label(&part.path);
    for (section, names) in sections {
        let (Some(names), Some(Value::Object(have))) = (names.as_object(), taken.get(section))
        else {
            continue;
        };
        // A new name may be none of the merged ones nor one the part keeps as it is.
        let mut used: HashSet<String> = have.keys().chain(names.keys()).cloned().collect();
        for name in names.keys().filter(|n| have.contains_key(*n)) {
            let new = free_name(&stem, number, name, &used);
            used.insert(new.clone());
            renamed.insert((section.clone(), name.clone()), new);
        }
    }
    renamed
}

/// `api.Item`; where that is taken too (two documents named `api.yaml`), `api-3.Item` for the
/// third document, then `api-3-2.Item` and on until one is free.
fn free_name(stem: &str, number: usize, name: &str, used: &HashSet<String>) -> String {
    let plain = format!("{stem}.{name}");
    if !used.contains(&plain) {
        return plain;
    }
    (1..)
        .map(|k| match k {
            1 => format!("{stem}-{number}.{name}"),
            k => format!("{stem}-{number}-{k}.{name}"),
        })
        .find(|n| !used.contains(n))
        .unwrap_or(plain)
}

/// `agile` for `/etc/jira/agile.json`: what a renamed component is prefixed with.
fn label(path: &Path) -> String {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let stem = stem.trim_end_matches(".json").trim_end_matches(".yaml");
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    stem.chars().map(|c| if ok(c) { c } else { '_' }).collect()
}

/// Every local `$ref` of the part, pointed where its target will be once merged: a copy of a
/// file it bundled is `shift` places on, after the earlier documents' copies.
fn retarget(part: &mut Part, renamed: &Renamed, shift: usize) {
    let mut refs = Vec::new();
    collect_refs(&part.doc, &mut String::new(), false, &mut refs);
    // The copies' own `$ref`s (an `x-` key, which `collect_refs` passes over).
    if let Some(copies) = part.doc.pointer(&format!("/components/{EXTERNAL}")) {
        let mut at = format!("/components/{EXTERNAL}");
        collect_refs(copies, &mut at, false, &mut refs);
    }
    for (at, reference) in refs {
        let Some(target) = local_target(&reference) else {
            continue;
        };
        let tokens: Vec<String> = target.split('/').skip(1).map(unescape).collect();
        let moved = match tokens.as_slice() {
            [c, section, slot, rest @ ..] if c == "components" && section == EXTERNAL => {
                let Ok(slot) = slot.parse::<usize>() else {
                    continue;
                };
                let slot = (slot + shift).to_string();
                pointer(
                    [c.as_str(), section, &slot]
                        .into_iter()
                        .chain(rest.iter().map(String::as_str)),
                )
            }
            [c, section, name, rest @ ..] if c == "components" => {
                let Some(name) = renamed.get(&(section.clone(), name.clone())) else {
                    continue;
                };
                pointer(
                    [c.as_str(), section, name]
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

/// Move the part's components into `into`, the renamed ones under their new names, and the
/// copies of the files it bundled after the earlier documents' copies.
fn take_components(doc: &mut Value, renamed: &Renamed, into: &mut Map<String, Value>) {
    let Some(Value::Object(sections)) = doc.get_mut("components").map(Value::take) else {
        return;
    };
    for (section, names) in sections {
        if section == EXTERNAL {
            let have = into
                .entry(EXTERNAL)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let (Value::Array(have), Value::Array(copies)) = (have, names) {
                have.extend(copies);
            }
            continue;
        }
        let Value::Object(names) = names else {
            continue;
        };
        let have = into
            .entry(section.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(have) = have else { continue };
        for (name, value) in names {
            let key = match renamed.get(&(section.clone(), name.clone())) {
                Some(new) => new.clone(),
                None => name,
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

/// Which document holds each method of each route, as the router tells routes apart:
/// `/items/{id}` and `/items/{itemId}` are one route (`contract::normalize_template`), and a
/// segment of several parameters is routed apart from one of a single parameter.
#[derive(Default)]
struct Routes(HashMap<(&'static str, String, bool), (String, usize)>);

impl Routes {
    /// Claim the methods of `item` at `full` for document `i`; a method another document holds
    /// on the same route is refused, naming both files. Two templates of one route within one
    /// document are the contract's to warn of (`ambiguous_route`), as for a single document.
    fn claim(
        &mut self,
        full: &str,
        item: &Value,
        (i, files): (usize, &[PathBuf]),
    ) -> Result<(), SpecError> {
        let Value::Object(item) = item else {
            return Ok(());
        };
        let route = normalize_template(full);
        let compound = full.split('/').any(|s| s.matches('{').count() > 1);
        for method in METHODS.into_iter().filter(|m| item.contains_key(*m)) {
            let key = (method, route.clone(), compound);
            match self.0.get(&key) {
                Some((first, d)) if *d != i => {
                    let (a, b) = (files[*d].display(), files[i].display());
                    let there = match first == full {
                        true => String::new(),
                        false => format!(" (there as {first})"),
                    };
                    return Err(SpecError::at(
                        &files[i],
                        &pointer(["paths", full, method].into_iter()),
                        format!(
                            "{} {full} is in two documents of this API, {a} and {b}{there}: \
                             give them base paths that tell them apart",
                            method.to_uppercase()
                        ),
                    ));
                }
                Some(_) => {}
                None => {
                    self.0.insert(key, (full.to_string(), i));
                }
            }
        }
        Ok(())
    }
}

/// Add `item` at `full`; when another document has that path too, each keeps its own
/// operations (its path-level parameters moved onto them): [`Routes::claim`] has seen that
/// no method is in both.
fn add_path(paths: &mut Map<String, Value>, full: &str, item: Value) {
    let Some(have) = paths.get_mut(full) else {
        paths.insert(full.to_string(), item);
        return;
    };
    let mut have_map = lowered(have.take());
    have_map.extend(lowered(item));
    *have = Value::Object(have_map);
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

    #[test]
    fn a_renamed_component_takes_a_name_no_component_has() {
        use super::{Part, merge};
        let part = |dir: &str, schemas: serde_json::Value| Part {
            path: PathBuf::from(format!("/etc/{dir}/api.yaml")),
            base: format!("/{dir}"),
            doc: json!({"paths": {"/items": {"post": {"requestBody": {"content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/Item"}}}}}}},
                "components": {"schemas": schemas}}),
        };
        let merged = merge(vec![
            part("svc1", json!({"Item": {"title": "1"}})),
            // Its own `api.Item` is kept as it is: its `Item` must take another name.
            part(
                "svc2",
                json!({"Item": {"title": "2"}, "api.Item": {"title": "2b"}}),
            ),
            part("svc3", json!({"Item": {"title": "3"}})),
        ])
        .unwrap();
        let schemas = merged["components"]["schemas"].as_object().unwrap();
        let names: Vec<&str> = schemas.keys().map(String::as_str).collect();
        assert_eq!(names, ["Item", "api-2.Item", "api.Item", "api-3.Item"]);
        for n in 1..=3 {
            let op = &merged["paths"][format!("/svc{n}/items")]["post"];
            let at = &op["requestBody"]["content"]["application/json"]["schema"]["$ref"];
            let name = at.as_str().unwrap().rsplit('/').next().unwrap();
            assert_eq!(schemas[name]["title"], n.to_string(), "svc{n}: {at}");
        }
    }

    /// Each document's files are bundled on its own into `x-driftwatch-external`: merged, each
    /// keeps its own copies (they were dropped, leaving every such `$ref` unresolved).
    #[test]
    fn the_files_each_document_bundles_stay_its_own() {
        let dir = std::env::temp_dir().join(format!("driftwatch-docs-ext-{}", std::process::id()));
        let mut docs = Vec::new();
        for (n, field) in [(1, "a"), (2, "b")] {
            let sub = dir.join(format!("svc{n}"));
            std::fs::create_dir_all(&sub).unwrap();
            let pet = json!({"Pet": {"type": "object", "properties": {"tag": {"$ref": "#/Tag"}},
                "required": [field]}, "Tag": {"title": field}});
            write(&sub, "common.json", pet);
            let schema = json!({"$ref": "common.json#/Pet"});
            let api = json!({"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
                "paths": {"/pets": {"post": {"requestBody": {"content": {"application/json":
                    {"schema": schema}}}, "responses": {"200": {"description": "ok"}}}}}});
            docs.push((write(&sub, "api.json", api), format!("/svc{n}")));
        }
        let spec = Spec::load_documents(&docs, &LoadOptions::default()).unwrap();
        for (n, field) in [(1, "a"), (2, "b")] {
            let op = &spec.doc["paths"][format!("/svc{n}/pets")]["post"];
            let at = &op["requestBody"]["content"]["application/json"]["schema"]["$ref"];
            let pet = spec
                .doc
                .pointer(at.as_str().unwrap().trim_start_matches('#'));
            let pet = pet.unwrap_or_else(|| panic!("svc{n}: {at} resolves to nothing"));
            assert_eq!(pet["required"], json!([field]), "svc{n}: {at}");
            let tag = pet["properties"]["tag"]["$ref"].as_str().unwrap();
            let tag = spec.doc.pointer(tag.trim_start_matches('#')).unwrap();
            assert_eq!(tag["title"], field, "svc{n}: {at}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
