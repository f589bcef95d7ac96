//! Loading an OpenAPI document: read JSON or YAML (optionally gzip'd), check that it is
//! OpenAPI 3.0 or 3.1, bundle `$ref`s into other local files into one document, and normalize
//! 3.0 schema forms (also where 3.1 documents still use them) into JSON Schema 2020-12. Downstream code sees one shape
//! only. Every failure names the file, the JSON pointer and the reason.

mod action;
mod bundle;
mod documents;
pub(crate) use bundle::{local_refs, local_target, push_token};
pub use documents::DocumentInfo;
mod error;
mod files;
pub use files::{SpecFile, SpecFiles, Stamp};
use files::{combined, revision};
mod normalize;
mod notes;
mod overlay;
mod read;
mod readings;

use std::path::{Path, PathBuf};

use serde_json::Value;

pub use error::SpecError;
pub(crate) use notes::circular_refs;
pub use notes::{Note, NoteKind};

/// The operations a path item may hold, by their keys.
pub(crate) const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Bytes one spec file (or fetched document) may have, by default: the largest public specs
/// (Microsoft Graph beta, 47 MB of JSON) fit with room.
pub const DEFAULT_MAX_BYTES: u64 = 128 << 20;

/// What loading a spec may read: bytes per file (after gzip), and where a `$ref` to another
/// file may point. A spec is input: a `$ref` cannot make driftwatch read `/etc/passwd` or
/// `/dev/zero`, and a file cannot fill memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    pub max_bytes: u64,
    pub refs: RefRoot,
    /// OpenAPI Overlays applied in order to the document as read (`spec.overlays`).
    pub overlays: Vec<PathBuf>,
}

/// The directory `$ref`s to files are confined to (after symlinks and `..` are resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefRoot {
    /// The spec file's own directory and below.
    SpecDir,
    /// A configured directory (`spec.ref_root`) and below.
    Dir(PathBuf),
    /// No file is read: a spec fetched from a URL, unless `spec.ref_root` is set.
    Refused,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            max_bytes: DEFAULT_MAX_BYTES,
            refs: RefRoot::SpecDir,
            overlays: Vec::new(),
        }
    }
}

/// The OpenAPI major.minor line of a document; the rest of driftwatch treats both alike once
/// the document has been normalized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenApiVersion {
    V3_0,
    V3_1,
}

/// A loaded, bundled and normalized OpenAPI document.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Where it came from, for error messages.
    pub source: PathBuf,
    /// The `openapi` field as written (`3.0.3`).
    pub openapi: String,
    pub version: OpenApiVersion,
    /// The whole document. Every `$ref` in it is local (`#/...`) and resolves. Shared: the
    /// compiled contract keeps it to compile response schemas when first needed.
    pub doc: std::sync::Arc<Value>,
    /// A short hash of the document (12 hex digits of its SHA-256, or of the hashes of every
    /// file it was read from when it bundles others: `files`), carried by every finding event
    /// and metric so a finding can be tied to the spec revision that produced it.
    pub revision: String,
    /// The files it was read from, each stamped just before it was read.
    pub files: SpecFiles,
    /// What the document says ambiguously (a key written twice): load warnings. A `$ref` loop
    /// is found by the contract's whole-document checks (`contract/compiler.rs`).
    pub notes: Vec<Note>,
    /// Pointers (as written) of the `oneOf`s read as `anyOf` (docs/findings.md, readings).
    one_ofs_read: std::sync::Arc<std::collections::HashSet<String>>,
    /// The documents merged into this one, for an API of several (`spec.documents`).
    pub documents: Vec<DocumentInfo>,
}

/// The documents of an API of several, read and bundled one by one.
#[derive(Default)]
struct Documents {
    parts: Vec<documents::Part>,
    files: SpecFiles,
    /// The first document's own hash; the others' and every bundled file's follow in `hashes`.
    first: Option<String>,
    hashes: Vec<String>,
    notes: Vec<Note>,
    infos: Vec<DocumentInfo>,
    line: Option<(String, OpenApiVersion)>,
}

impl Documents {
    fn add(&mut self, path: &Path, base: &str, options: &LoadOptions) -> Result<(), SpecError> {
        let own = SpecFile::before_reading(path);
        let (mut doc, revision, notes) = read::read_document_revision(path, options.max_bytes)?;
        let (openapi, version) = detect_version(path, &doc)?;
        match &self.line {
            Some((first, line)) if *line != version => {
                return Err(SpecError::at(
                    path,
                    "/openapi",
                    format!(
                        "OpenAPI {openapi} beside {first}: the documents of one API share a line (3.0 or 3.1)"
                    ),
                ));
            }
            Some(_) => {}
            None => self.line = Some((openapi, version)),
        }
        let (bundled, hashes): (Vec<SpecFile>, Vec<String>) =
            bundle::bundle(path, &mut doc, options)?.into_iter().unzip();
        self.infos.push(DocumentInfo {
            path: path.to_path_buf(),
            base_path: base.to_string(),
            revision: combined(revision.clone(), &hashes),
        });
        match self.first {
            None => {
                self.first = Some(revision);
                self.files.own = Some(own);
            }
            Some(_) => {
                self.files.bundled.push(own);
                self.hashes.push(revision);
            }
        }
        self.files.bundled.extend(bundled);
        self.hashes.extend(hashes);
        self.notes.extend(notes.into_iter().map(|mut n| {
            n.pointer = format!("{}#{}", path.display(), n.pointer);
            n
        }));
        let base = base.trim_end_matches('/').to_string();
        self.parts.push(documents::Part {
            path: path.to_path_buf(),
            base,
            doc,
        });
        Ok(())
    }
}

/// Apply `options.overlays` in order; their files and hashes, their warnings into `notes`.
/// Together they may add at most `options.max_bytes` to the document (`action::Growth`).
fn apply_overlays(
    doc: &mut Value,
    options: &LoadOptions,
    notes: &mut Vec<Note>,
) -> Result<(Vec<SpecFile>, Vec<String>), SpecError> {
    let mut files = Vec::with_capacity(options.overlays.len());
    let mut hashes = Vec::with_capacity(options.overlays.len());
    let mut growth = action::Growth::new(options.max_bytes);
    for path in &options.overlays {
        let applied = overlay::apply(doc, path, options.max_bytes, &mut growth)?;
        notes.extend(applied.notes);
        files.push(applied.file);
        hashes.push(applied.hash);
    }
    Ok((files, hashes))
}

/// The document in the file at `path` with `overlays` applied in order, as read (not bundled
/// nor normalized: what every Overlay tool gives), and a warning per action that matched
/// nothing: `driftwatch overlay apply`.
pub fn with_overlays(
    path: &Path,
    overlays: &[PathBuf],
    max: u64,
) -> Result<(Value, Vec<Note>), SpecError> {
    let (mut doc, _, _) = read::read_document_revision(path, max)?;
    let options = LoadOptions {
        max_bytes: max,
        overlays: overlays.to_vec(),
        ..LoadOptions::default()
    };
    let mut notes = Vec::new();
    apply_overlays(&mut doc, &options, &mut notes)?;
    Ok((doc, notes))
}

/// A spec file's text as written (gunzipped, within the default bounds), for pointing at its
/// lines: CI annotations name the line of an operation.
pub fn read_text(path: &Path) -> Result<String, SpecError> {
    let (bytes, _) = read::read_bytes(path, LoadOptions::default().max_bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

impl Spec {
    /// Read, bundle and normalize the spec at `path`, with the default bounds.
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        Spec::load_with(path, &LoadOptions::default())
    }

    pub fn load_with(path: &Path, options: &LoadOptions) -> Result<Spec, SpecError> {
        let own = SpecFile::before_reading(path);
        let (doc, revision, notes) = read::read_document_revision(path, options.max_bytes)?;
        Spec::build(path, doc, (revision, Some(own)), notes, options)
    }

    /// Parse a document from text already in memory (an embedded spec); `source` names it in
    /// errors and resolves relative file refs.
    pub fn parse(source: &Path, bytes: &[u8]) -> Result<Spec, SpecError> {
        Spec::parse_with(source, bytes, &LoadOptions::default())
    }

    pub fn parse_with(
        source: &Path,
        bytes: &[u8],
        options: &LoadOptions,
    ) -> Result<Spec, SpecError> {
        if bytes.len() as u64 > options.max_bytes {
            return Err(SpecError::TooLarge {
                file: source.to_path_buf(),
                max: options.max_bytes,
            });
        }
        let name = source.to_string_lossy().to_ascii_lowercase();
        let (doc, revision, notes) = read::parse_whole(source, bytes, &name)?;
        Spec::build(source, doc, (revision, None), notes, options)
    }

    /// Build a spec from an already parsed document; `source` resolves relative file refs.
    pub fn from_document(source: &Path, doc: Value) -> Result<Spec, SpecError> {
        let revision = revision(doc.to_string().as_bytes());
        let options = LoadOptions::default();
        Spec::build(source, doc, (revision, None), Vec::new(), &options)
    }

    /// `read`: the document's own revision, and its file when it was read from one.
    fn build(
        source: &Path,
        mut doc: Value,
        (revision, own): (String, Option<SpecFile>),
        mut notes: Vec<Note>,
        options: &LoadOptions,
    ) -> Result<Spec, SpecError> {
        let (overlays, overlay_hashes) = apply_overlays(&mut doc, options, &mut notes)?;
        let (openapi, version) = detect_version(source, &doc)?;
        let (bundled, mut hashes): (Vec<SpecFile>, Vec<String>) =
            bundle::bundle(source, &mut doc, options)?
                .into_iter()
                .unzip();
        hashes.extend(overlay_hashes);
        let revision = combined(revision, &hashes);
        let files = SpecFiles {
            own,
            bundled,
            overlays,
        };
        let read = (notes, files, Vec::new());
        Ok(Spec::normalized(
            source,
            doc,
            (openapi, version),
            revision,
            read,
        ))
    }

    /// The last step of every load: 3.0 forms normalized, `oneOf`s read, the spec made.
    fn normalized(
        source: &Path,
        mut doc: Value,
        (openapi, version): (String, OpenApiVersion),
        revision: String,
        (notes, files, documents): (Vec<Note>, SpecFiles, Vec<DocumentInfo>),
    ) -> Spec {
        // 3.1 documents in the wild still write `nullable: true` (readme's and Scalar's
        // examples do); it has no other meaning in 2020-12, so it is honoured in both lines.
        normalize::normalize_document(&mut doc);
        let one_ofs_read = readings::read(&mut doc);
        Spec {
            notes,
            source: source.to_path_buf(),
            openapi,
            version,
            doc: std::sync::Arc::new(doc),
            revision,
            files,
            one_ofs_read: std::sync::Arc::new(one_ofs_read),
            documents,
        }
    }

    /// Read each document (its path and the base path it is served under) and bundle it on
    /// its own, then merge them into one API's document (`spec/documents.rs`); the overlays
    /// apply to the merged one. The revision covers every file read, in order, so a reload
    /// hashes them as it does a single document's.
    pub fn load_documents(
        docs: &[(PathBuf, String)],
        options: &LoadOptions,
    ) -> Result<Spec, SpecError> {
        let Some((source, _)) = docs.first() else {
            return Err(SpecError::at(
                Path::new("spec.documents"),
                "",
                "no document",
            ));
        };
        let mut read = Documents::default();
        for (path, base) in docs {
            read.add(path, base, options)?;
        }
        let Documents {
            parts,
            mut files,
            first,
            mut hashes,
            mut notes,
            infos,
            line,
        } = read;
        let mut doc = documents::merge(parts)?;
        let (overlays, overlay_hashes) = apply_overlays(&mut doc, options, &mut notes)?;
        files.overlays = overlays;
        hashes.extend(overlay_hashes);
        let line = line.unwrap_or(("3.1.0".into(), OpenApiVersion::V3_1));
        let revision = combined(first.unwrap_or_default(), &hashes);
        let read = (notes, files, infos);
        Ok(Spec::normalized(source, doc, line, revision, read))
    }

    /// A pointer into [`Spec::doc`] as the file spells it (a `oneOf` read as `anyOf` is named
    /// `oneOf`), for messages that send the reader to the file.
    pub fn pointer_as_written(&self, pointer: &str) -> String {
        self.as_written().pointer(pointer)
    }

    /// What [`Spec::pointer_as_written`] reads, kept by a contract for what it finds later.
    pub fn as_written(&self) -> AsWritten {
        AsWritten(self.one_ofs_read.clone())
    }
}

/// Maps a pointer into [`Spec::doc`] to the file's spelling (see [`Spec::pointer_as_written`]).
#[derive(Clone, Debug, Default)]
pub struct AsWritten(std::sync::Arc<std::collections::HashSet<String>>);

impl AsWritten {
    pub fn pointer(&self, pointer: &str) -> String {
        readings::original_pointer(pointer, &self.0)
    }
}

/// The revision a document whose own bytes are `bytes` would load as now, if the files it
/// bundled and the overlays applied to it are the ones in `files` (the revision in force's):
/// `None` when one cannot be read within `max` bytes. Equal to the revision in force, nothing
/// it was read from changed, so a reload can keep it without compiling anything: which files a
/// document bundles is decided by the bytes of the files before them.
pub fn revision_now(bytes: &[u8], files: &SpecFiles, max: u64) -> Option<String> {
    // Only what a load reads: a regular file (a named pipe put in a bundled file's place is
    // never opened), within `max` bytes.
    let each = |f: &SpecFile| {
        let (bytes, _) = read::read_bytes(&f.path, max).ok()?;
        Some(revision(&bytes))
    };
    let read = files.bundled.iter().chain(&files.overlays);
    let hashes: Option<Vec<String>> = read.map(each).collect();
    Some(combined(revision(bytes), &hashes?))
}

/// [`revision_now`] of the document in the file at `path` (gunzipped as a load would).
pub fn file_revision_now(path: &Path, files: &SpecFiles, max: u64) -> Option<String> {
    let (bytes, _) = read::read_bytes(path, max).ok()?;
    revision_now(&bytes, files, max)
}

fn detect_version(source: &Path, doc: &Value) -> Result<(String, OpenApiVersion), SpecError> {
    let err = |reason: String| SpecError::at(source, "", reason);
    if !doc.is_object() {
        return Err(err("the document is not a JSON/YAML object".into()));
    }
    if let Some(swagger) = doc.get("swagger") {
        return Err(err(format!(
            "Swagger {swagger} is not supported: convert it to OpenAPI 3.0 or 3.1 first"
        )));
    }
    let Some(openapi) = doc.get("openapi") else {
        return Err(err(
            "no `openapi` key: this is not an OpenAPI document".into()
        ));
    };
    let Some(openapi) = openapi.as_str() else {
        return Err(SpecError::at(
            source,
            "/openapi",
            "`openapi` must be a string such as \"3.1.0\"",
        ));
    };
    let version = if openapi.starts_with("3.0.") || openapi == "3.0" {
        OpenApiVersion::V3_0
    } else if openapi.starts_with("3.1.") || openapi == "3.1" {
        OpenApiVersion::V3_1
    } else {
        return Err(SpecError::at(
            source,
            "/openapi",
            format!("OpenAPI {openapi} is not supported (3.0.x and 3.1.x are)"),
        ));
    };
    Ok((openapi.to_string(), version))
}

/// `token("/api/{id}")` is `"/~1api~1{id}"`: one escaped JSON pointer token with its slash.
pub(crate) fn bundle_pointer(name: &str) -> String {
    let mut out = String::new();
    push_token(&mut out, name);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn version_error(doc: Value) -> String {
        Spec::from_document(Path::new("api.json"), doc)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn refuses_swagger_and_documents_without_openapi() {
        assert_eq!(
            version_error(json!({"swagger": "2.0", "paths": {}})),
            "api.json: at /: Swagger \"2.0\" is not supported: convert it to OpenAPI 3.0 or 3.1 first"
        );
        assert!(version_error(json!({"paths": {}})).contains("no `openapi` key"));
        assert!(version_error(json!({"openapi": "4.0.0"})).contains("at /openapi: OpenAPI 4.0.0"));
        assert!(version_error(json!([1])).contains("not a JSON/YAML object"));
    }

    #[test]
    fn accepts_both_lines() {
        let v30 = Spec::from_document(
            Path::new("a.json"),
            json!({"openapi": "3.0.3", "paths": {}}),
        );
        let v31 = Spec::from_document(
            Path::new("a.json"),
            json!({"openapi": "3.1.0", "paths": {}}),
        );
        assert_eq!(v30.unwrap().version, OpenApiVersion::V3_0);
        assert_eq!(v31.unwrap().version, OpenApiVersion::V3_1);
    }
}
