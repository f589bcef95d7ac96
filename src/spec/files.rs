//! The files a spec was read from, and its revision over all of them. A spec that `$ref`s
//! `common.yaml` is as much `common.yaml` as its own file: an edit to either is a new revision,
//! so the revision hashes every file the bundle read (in the order it read them, which the
//! files' bytes decide), and each file keeps its length and modification time from just before
//! it was read, so a watcher that sees any of them change knows the document may have.
//!
//! A spec of one file keeps the revision it always had: the hash of that file's bytes.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::Digest;

/// A file's length and modification time.
pub type Stamp = (u64, SystemTime);

/// A file's length and modification time now (`None`: it cannot be read).
fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// A file a spec was read from, stamped just before it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecFile {
    pub path: PathBuf,
    pub stamp: Option<Stamp>,
}

impl SpecFile {
    /// `path`, stamped now: call it before reading the file.
    pub fn before_reading(path: &Path) -> SpecFile {
        SpecFile {
            path: path.to_path_buf(),
            stamp: stamp(path),
        }
    }
}

/// The files a spec was read from: its own (none for a document given as bytes, such as one
/// fetched from a URL), then those its `$ref`s bundled, in the order read, and the overlays
/// applied to it, in the order applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecFiles {
    pub own: Option<SpecFile>,
    pub bundled: Vec<SpecFile>,
    pub overlays: Vec<SpecFile>,
}

impl SpecFiles {
    /// Each file's stamp now, in the same order as [`SpecFiles::stamps_when_read`].
    pub fn stamps_now(&self) -> Vec<Option<Stamp>> {
        self.all().map(|f| stamp(&f.path)).collect()
    }

    /// Each file's stamp from just before it was read.
    pub fn stamps_when_read(&self) -> Vec<Option<Stamp>> {
        self.all().map(|f| f.stamp).collect()
    }

    fn all(&self) -> impl Iterator<Item = &SpecFile> {
        self.own.iter().chain(&self.bundled).chain(&self.overlays)
    }

    /// Whether anything besides the document's own bytes makes its revision.
    pub fn has_others(&self) -> bool {
        !self.bundled.is_empty() || !self.overlays.is_empty()
    }
}

/// A short hash of a file's bytes (12 hex digits of their SHA-256).
pub(crate) fn revision(bytes: &[u8]) -> String {
    short(&sha2::Sha256::digest(bytes))
}

/// The revision of a document whose own bytes hash to `main` and which bundled files whose
/// bytes hash to `bundled`, in the order read: `main` itself when it bundled none.
pub(crate) fn combined(main: String, bundled: &[String]) -> String {
    if bundled.is_empty() {
        return main;
    }
    let mut hash = sha2::Sha256::new();
    for part in std::iter::once(&main).chain(bundled) {
        hash.update(part.as_bytes());
        hash.update(b"\n");
    }
    short(&hash.finalize())
}

fn short(digest: &[u8]) -> String {
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{LoadOptions, Spec, file_revision_now};

    const MAIN: &str = "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /pets:\n    put:\n      requestBody:\n        content:\n          application/json:\n            schema: {$ref: 'common.yaml#/Pet'}\n      responses: {'200': {description: ok}}\n";

    #[test]
    fn a_spec_is_the_files_it_bundles_and_hashing_them_again_says_whether_they_changed() {
        let dir = std::env::temp_dir().join(format!("driftwatch-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (main, common) = (dir.join("spec.yaml"), dir.join("common.yaml"));
        std::fs::write(&main, MAIN).unwrap();
        std::fs::write(&common, "Pet: {type: object}\n").unwrap();
        let spec = Spec::load(&main).unwrap();
        assert_eq!(spec.files.own.as_ref().unwrap().path, main);
        assert!(spec.files.own.as_ref().unwrap().stamp.is_some());
        assert_eq!(spec.files.bundled.len(), 1);
        assert_eq!(spec.files.bundled[0].path, common);
        assert_ne!(
            spec.revision,
            revision(MAIN.as_bytes()),
            "the bundled file counts"
        );
        let max = LoadOptions::default().max_bytes;
        let now = || file_revision_now(&main, &spec.files, max);
        assert_eq!(now().as_ref(), Some(&spec.revision), "nothing changed");

        std::fs::write(&common, "Pet: {type: array}\n").unwrap();
        assert_ne!(
            now().as_ref(),
            Some(&spec.revision),
            "the bundled file changed"
        );
        assert_eq!(
            Spec::load(&main).unwrap().revision,
            now().unwrap(),
            "as a load reads it"
        );
        std::fs::remove_file(&common).unwrap();
        assert_eq!(
            now(),
            None,
            "a file that cannot be read: compile, and say why"
        );
        // A named pipe in its place is not opened (the read would block until a writer came).
        let made = std::process::Command::new("mkfifo").arg(&common).status();
        assert!(made.unwrap().success());
        assert_eq!(now(), None, "not a regular file: compile, which refuses it");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_file_keeps_its_own_hash_and_each_bundled_file_changes_the_whole() {
        let main = revision(b"openapi: 3.1.0");
        assert_eq!(combined(main.clone(), &[]), main);
        let a = combined(main.clone(), &[revision(b"Pet: {}")]);
        let b = combined(main.clone(), &[revision(b"Pet: {type: object}")]);
        assert_ne!(a, main);
        assert_ne!(a, b);
        assert_eq!(a, combined(main.clone(), &[revision(b"Pet: {}")]));
        assert_eq!(a.len(), 12);
        let two = [revision(b"a"), revision(b"b")];
        let swapped = [revision(b"b"), revision(b"a")];
        assert_ne!(combined(main.clone(), &two), combined(main, &swapped));
    }
}
