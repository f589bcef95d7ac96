//! Why a spec could not be loaded, always with the file and the JSON pointer, so that the
//! person reading the message can open the file and go straight to the problem.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{}: cannot read: {source}", file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: larger than {max} bytes (spec.max_bytes); nothing past that was read", file.display())]
    TooLarge { file: PathBuf, max: u64 },
    /// A named pipe would hold a start or a reload until something wrote to it, a device
    /// (`/dev/zero`) never ends: neither is opened.
    #[error("{}: not a regular file ({kind}): a spec, an overlay or a document is read from a file", file.display())]
    NotAFile { file: PathBuf, kind: &'static str },
    /// An overlay's action would take what the overlays add to the document past the bound.
    #[error(
        "{}: at /actions/{action}: this action may add {} bytes or more to the document ({targets} targets, {each} bytes or more each) after the {added} bytes the overlays may have added before it, more than they may add in all ({max} bytes, spec.max_bytes, counted in memory); refused before it was applied",
        file.display(),
        each.saturating_mul(*targets as u64)
    )]
    Overgrown {
        file: PathBuf,
        action: usize,
        targets: usize,
        each: u64,
        added: u64,
        max: u64,
    },
    #[error("{}: at {}: {reason}", file.display(), display_pointer(pointer))]
    Invalid {
        file: PathBuf,
        /// JSON pointer of the offending value (`/paths/~1pets/get`), empty for the root.
        pointer: String,
        reason: String,
    },
}

impl SpecError {
    /// What is wrong, without the file and pointer (for a load warning that names them).
    pub fn reason(&self) -> String {
        match self {
            SpecError::Io { source, .. } => source.to_string(),
            SpecError::TooLarge { max, .. } => format!("larger than {max} bytes"),
            SpecError::NotAFile { kind, .. } => format!("not a regular file ({kind})"),
            SpecError::Overgrown { action, max, .. } => {
                format!("the overlays would add more than {max} bytes at /actions/{action}")
            }
            SpecError::Invalid { reason, .. } => reason.clone(),
        }
    }

    pub(crate) fn at(file: &Path, pointer: &str, reason: impl Into<String>) -> SpecError {
        SpecError::Invalid {
            file: file.to_path_buf(),
            pointer: pointer.to_string(),
            reason: reason.into(),
        }
    }
}

fn display_pointer(pointer: &str) -> &str {
    if pointer.is_empty() { "/" } else { pointer }
}
