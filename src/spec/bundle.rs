//! `$ref` resolution. Local refs (`#/components/...`) are checked to resolve and kept as they
//! are, so recursive schemas stay finite. Refs into other local files (`common.yaml#/Pet`) are
//! bundled: the target is copied once into `#/components/x-driftwatch-external/N` and the ref
//! rewritten, recursively, so the rest of driftwatch sees one self-contained document.
//! Written by hand because the JSON Schema bundlers do not know OpenAPI's non-schema objects
//! (parameters, request bodies) and do not report failures with file and pointer.
//!
//! A spec is input, so the files it names are confined (`LoadOptions::refs`): under the spec's
//! directory (or `spec.ref_root`) once symlinks and `..` are resolved, regular files only, each
//! read up to `spec.max_bytes`, and none at all for a spec fetched from a URL unless configured.
//! An error names the `$ref` and why, never what the file holds.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use percent_encoding::percent_decode_str;
use serde_json::Value;

use super::read::read_document_revision;
use super::{LoadOptions, RefRoot, SpecError, SpecFile};

/// Where bundled copies of external targets live inside the document.
pub(crate) const EXTERNAL: &str = "x-driftwatch-external";

/// Bundle `doc`'s refs into other files; returns the files read, in the order read, each with
/// the revision (hash) of its bytes.
pub(crate) fn bundle(
    root_path: &Path,
    doc: &mut Value,
    options: &LoadOptions,
) -> Result<Vec<(SpecFile, String)>, SpecError> {
    let mut refs = Vec::new();
    collect_refs(doc, &mut String::new(), false, &mut refs);
    let mut bundler = Bundler {
        root: doc,
        root_path,
        options,
        files: HashMap::new(),
        read: Vec::new(),
        index: HashMap::new(),
        slots: Vec::new(),
        pending: Vec::new(),
    };
    let mut rewrites = Vec::new();
    for (at, reference) in refs {
        let new = bundler.retarget(None, &reference, &at)?;
        if new != reference {
            rewrites.push((at, new));
        }
    }
    while let Some((slot, file, mut value)) = bundler.pending.pop() {
        let mut inner = Vec::new();
        collect_refs(&value, &mut String::new(), false, &mut inner);
        for (at, reference) in inner {
            let new = bundler.retarget(Some(&file), &reference, &at)?;
            set_ref(&mut value, &at, new);
        }
        bundler.slots[slot] = value;
    }
    let slots = std::mem::take(&mut bundler.slots);
    let read = std::mem::take(&mut bundler.read);
    for (at, new) in rewrites {
        set_ref(doc, &at, new);
    }
    if !slots.is_empty() {
        let components = doc
            .as_object_mut()
            .expect("checked to be an object")
            .entry("components")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(components) = components.as_object_mut() {
            components.insert(EXTERNAL.into(), Value::Array(slots));
        }
    }
    Ok(read)
}

struct Bundler<'a> {
    root: &'a Value,
    root_path: &'a Path,
    options: &'a LoadOptions,
    /// External documents read so far, by path.
    files: HashMap<PathBuf, Value>,
    /// The same files in the order read, each stamped before it was read, with its revision.
    read: Vec<(SpecFile, String)>,
    /// (file, fragment) already bundled, to its slot number.
    index: HashMap<(PathBuf, String), usize>,
    slots: Vec<Value>,
    /// Copies whose own refs still have to be rewritten: (slot, file they came from, copy).
    pending: Vec<(usize, PathBuf, Value)>,
}

impl Bundler<'_> {
    /// The local ref that replaces `reference`, found in `base` (`None` for the root document)
    /// at pointer `at`.
    fn retarget(
        &mut self,
        base: Option<&Path>,
        reference: &str,
        at: &str,
    ) -> Result<String, SpecError> {
        let error_file = base.unwrap_or(self.root_path);
        let (file_part, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let pointer = percent_decode_str(fragment)
            .decode_utf8()
            .map_err(|_| {
                SpecError::at(
                    error_file,
                    at,
                    format!("$ref `{reference}` is not valid UTF-8"),
                )
            })?
            .into_owned();
        let file = match (file_part, base) {
            ("", None) => {
                check_pointer(self.root, &pointer, error_file, at, reference)?;
                return Ok(reference.to_string());
            }
            ("", Some(base)) => base.to_path_buf(),
            (rel, _) if rel.contains("://") => {
                return Err(SpecError::at(
                    error_file,
                    at,
                    format!(
                        "$ref `{reference}` points to a remote document; only local files are read (nothing is fetched)"
                    ),
                ));
            }
            (rel, _) => error_file.parent().unwrap_or(Path::new("")).join(rel),
        };
        if file == self.root_path {
            check_pointer(self.root, &pointer, error_file, at, reference)?;
            return Ok(format!("#{fragment}"));
        }
        let key = (file.clone(), pointer.clone());
        if let Some(slot) = self.index.get(&key) {
            return Ok(format!("#/components/{EXTERNAL}/{slot}"));
        }
        if !self.files.contains_key(&file) {
            let fail = |reason: String| SpecError::at(error_file, at, reason);
            self.read_file(&file)
                .map_err(|why| fail(format!("$ref `{reference}` {why}")))?;
        }
        let target =
            check_pointer(&self.files[&file], &pointer, error_file, at, reference)?.clone();
        let slot = self.slots.len();
        self.slots.push(Value::Null);
        self.index.insert(key, slot);
        self.pending.push((slot, file, target));
        Ok(format!("#/components/{EXTERNAL}/{slot}"))
    }
}

impl Bundler<'_> {
    /// Read a file a `$ref` names, within the root's directory and `max_bytes`, and keep it;
    /// why not, as the rest of a sentence that begins with the reference.
    fn read_file(&mut self, file: &Path) -> Result<(), String> {
        self.confine(file)?;
        let stamped = SpecFile::before_reading(file);
        let (doc, revision, _) = read_document_revision(file, self.options.max_bytes)
            .map_err(|e| format!("cannot be followed: {e}"))?;
        if !doc.is_object() {
            return Err("names a file that is not a JSON or YAML object".into());
        }
        self.files.insert(file.to_path_buf(), doc);
        self.read.push((stamped, revision));
        Ok(())
    }

    /// Why `file` may not be read, if it may not (the end of a sentence that starts with the
    /// `$ref`): it is missing, outside the confined directory (after symlinks and `..`), not
    /// a regular file, or no file may be read at all.
    fn confine(&self, file: &Path) -> Result<(), String> {
        let root = match &self.options.refs {
            RefRoot::Refused => {
                return Err(
                    "is not read: the spec was fetched from a URL, and files are read for it only under spec.ref_root"
                        .into(),
                );
            }
            RefRoot::SpecDir => match self.root_path.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir,
                _ => Path::new("."),
            },
            RefRoot::Dir(dir) => dir,
        };
        let root = root
            .canonicalize()
            .map_err(|e| format!("cannot be followed: {}: {e}", root.display()))?;
        let real = file
            .canonicalize()
            .map_err(|e| format!("cannot be followed: {}: {e}", file.display()))?;
        if !real.starts_with(&root) {
            return Err(format!(
                "is not read: it points outside {} (files are read only under the spec's directory, or spec.ref_root)",
                root.display()
            ));
        }
        if !real.metadata().is_ok_and(|m| m.is_file()) {
            return Err(format!(
                "is not read: {} is not a regular file",
                real.display()
            ));
        }
        Ok(())
    }
}

fn check_pointer<'v>(
    doc: &'v Value,
    pointer: &str,
    file: &Path,
    at: &str,
    reference: &str,
) -> Result<&'v Value, SpecError> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(SpecError::at(
            file,
            at,
            format!("$ref `{reference}`: only JSON pointer fragments are supported"),
        ));
    }
    doc.pointer(pointer).ok_or_else(|| {
        SpecError::at(
            file,
            at,
            format!("$ref `{reference}` does not resolve: nothing at `{pointer}`"),
        )
    })
}

fn set_ref(doc: &mut Value, at: &str, new: String) {
    if let Some(Value::Object(map)) = doc.pointer_mut(at) {
        map.insert("$ref".into(), Value::String(new));
    }
}

/// Keys whose value is a map from names to objects; inside one, every key is a name, so a
/// property called `example` is walked like any other.
pub(crate) const NAME_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "schemas",
    "paths",
    "responses",
    "headers",
    "content",
    "parameters",
    "requestBodies",
    "examples",
    "encoding",
    "callbacks",
    "pathItems",
    "webhooks",
    "links",
    "securitySchemes",
    "variables",
];

/// Keys whose value is a literal, never a place a `$ref` or a schema can be.
pub(crate) fn is_literal_key(key: &str) -> bool {
    matches!(key, "example" | "default" | "const" | "enum") || key.starts_with("x-")
}

/// The `$ref`s under `value` that point into the same document, as (pointer of the object
/// holding it, decoded target pointer). Bundled, every reference is local: `#` and a
/// percent-encoded pointer.
pub(crate) fn local_refs(value: &Value) -> Vec<(String, String)> {
    let mut refs = Vec::new();
    collect_refs(value, &mut String::new(), false, &mut refs);
    refs.into_iter()
        .filter_map(|(at, r)| Some((at, local_target(&r)?)))
        .collect()
}

/// The pointer a local `$ref` (`#` and a percent-encoded pointer) names; `None` for another
/// document's.
pub(crate) fn local_target(reference: &str) -> Option<String> {
    let pointer = reference.strip_prefix('#')?;
    Some(percent_decode_str(pointer).decode_utf8_lossy().into_owned())
}

/// Every `$ref` string in `value`, with the JSON pointer of the object holding it.
pub(crate) fn collect_refs(
    value: &Value,
    at: &mut String,
    in_names: bool,
    out: &mut Vec<(String, String)>,
) {
    match value {
        Value::Object(map) => {
            if !in_names && let Some(Value::String(r)) = map.get("$ref") {
                out.push((at.clone(), r.clone()));
            }
            for (key, child) in map {
                if !in_names && is_literal_key(key) {
                    continue;
                }
                let names = !in_names && NAME_MAPS.contains(&key.as_str()) && child.is_object();
                let len = at.len();
                push_token(at, key);
                collect_refs(child, at, names, out);
                at.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let len = at.len();
                at.push('/');
                at.push_str(&i.to_string());
                collect_refs(child, at, false, out);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

/// Append one JSON pointer token, escaped (`~` as `~0`, `/` as `~1`).
pub(crate) fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    // Most tokens need no escaping: one copy, not a char at a time (whole-document walks).
    if !token.contains(['~', '/']) {
        pointer.push_str(token);
        return;
    }
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("driftwatch-bundle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn bundles_refs_into_other_files_recursively() {
        let dir = dir();
        std::fs::write(
            dir.join("common.yaml"),
            "Pet:\n  type: object\n  properties:\n    owner: {$ref: '#/Owner'}\n    tags: {$ref: 'tags.json#/Tags'}\nOwner:\n  type: object\n  properties:\n    pet: {$ref: '#/Pet'}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("tags.json"),
            r#"{"Tags":{"type":"array","items":{"type":"string"}}}"#,
        )
        .unwrap();
        let root = dir.join("api.json");
        let mut doc = json!({"openapi":"3.1.0","paths":{},"components":{"schemas":{
            "Pet":{"$ref":"common.yaml#/Pet"},"Again":{"$ref":"./common.yaml#/Pet"}}}});
        bundle(&root, &mut doc, &LoadOptions::default()).unwrap();
        let ext = &doc["components"][EXTERNAL];
        assert_eq!(
            doc["components"]["schemas"]["Pet"]["$ref"],
            "#/components/x-driftwatch-external/0"
        );
        assert_eq!(
            ext[0]["properties"]["owner"]["$ref"],
            "#/components/x-driftwatch-external/1"
        );
        // The recursive cycle Pet -> Owner -> Pet closes on the first slot.
        assert_eq!(
            ext[1]["properties"]["pet"]["$ref"],
            "#/components/x-driftwatch-external/0"
        );
        assert_eq!(ext[2]["items"]["type"], "string");
        assert_eq!(ext.as_array().unwrap().len(), 3);
    }

    #[test]
    fn a_dangling_ref_names_file_pointer_and_target() {
        let mut doc = json!({"openapi":"3.1.0","paths":{"/a":{"get":{"parameters":[{"$ref":"#/components/parameters/Nope"}]}}}});
        let e = bundle(Path::new("api.json"), &mut doc, &LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "api.json: at /paths/~1a/get/parameters/0: $ref `#/components/parameters/Nope` does not resolve: nothing at `/components/parameters/Nope`"
        );
        let mut doc =
            json!({"openapi":"3.1.0","components":{"schemas":{"A":{"$ref":"missing.yaml#/A"}}}});
        let e = bundle(&dir().join("api.json"), &mut doc, &LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("at /components/schemas/A: $ref `missing.yaml#/A` cannot be followed"),
            "{e}"
        );
    }

    #[test]
    fn literals_and_extensions_are_not_walked_but_properties_named_like_them_are() {
        let mut doc = json!({"openapi":"3.1.0","components":{"schemas":{"A":{
            "example":{"$ref":"#/not/a/ref"},"x-tool":{"$ref":"#/nope"},
            "properties":{"default":{"$ref":"#/components/schemas/B"}}},"B":{"type":"string"}}}});
        bundle(Path::new("api.json"), &mut doc, &LoadOptions::default()).unwrap();
        let mut doc = json!({"openapi":"3.1.0","components":{"schemas":{"A":{
            "properties":{"default":{"$ref":"#/components/schemas/Missing"}}}}}});
        assert!(bundle(Path::new("api.json"), &mut doc, &LoadOptions::default()).is_err());
    }
}
