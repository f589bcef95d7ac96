//! Reading one file into a JSON value: JSON or YAML, optionally gzip'd (`.gz`). YAML goes
//! through `yaml_serde` (the maintained successor of the archived `serde_yaml`).

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use super::SpecError;
use super::notes::Note;

/// A document, its revision hash, and what it says ambiguously (keys written twice).
pub(crate) type Document = (Value, String, Vec<Note>);

/// The document and the revision hash of the file's bytes, read up to `max` bytes (after
/// gzip): a larger file, `/dev/zero` or a gzip bomb is refused after `max + 1` bytes.
pub(crate) fn read_document_revision(path: &Path, max: u64) -> Result<Document, SpecError> {
    let (bytes, name) = read_bytes(path, max)?;
    parse_whole(path, &bytes, &name)
}

/// The document, its revision hash and its repeated keys, read from `bytes`: the hash and the
/// scan for repeated keys on a thread of their own beside the parse (a second core takes
/// 0.09 s off Microsoft Graph's 19 MB load).
pub(crate) fn parse_whole(path: &Path, bytes: &[u8], name: &str) -> Result<Document, SpecError> {
    std::thread::scope(|scope| {
        let beside = scope.spawn(|| (super::revision(bytes), duplicates(bytes, name)));
        let doc = parse(path, bytes, name);
        let (revision, notes) = beside
            .join()
            .unwrap_or_else(|_| (super::revision(bytes), Vec::new()));
        Ok((doc?, revision, notes))
    })
}

/// The file's bytes, gunzipped when its name ends in `.gz`, refused past `max`; and its name
/// in lowercase without `.gz` (which tells JSON from YAML). Only a regular file is read: what
/// the path names is looked at before it is opened (opening a named pipe waits for a writer),
/// and what was opened is looked at again.
pub(crate) fn read_bytes(path: &Path, max: u64) -> Result<(Vec<u8>, String), SpecError> {
    let io = |source| SpecError::Io {
        file: path.to_path_buf(),
        source,
    };
    regular(path, &std::fs::metadata(path).map_err(io)?)?;
    let file = open_without_waiting(path).map_err(io)?;
    let name = path.to_string_lossy().to_ascii_lowercase();
    let size = regular(path, &file.metadata().map_err(io)?)?;
    let (reader, name, size): (Box<dyn Read>, String, Option<u64>) = match name.strip_suffix(".gz")
    {
        Some(inner) => (
            Box::new(flate2::read::GzDecoder::new(file)),
            inner.to_string(),
            None,
        ),
        None => (Box::new(file), name, Some(size)),
    };
    let bytes = read_at_most(reader, max, size).map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(SpecError::TooLarge {
            file: path.to_path_buf(),
            max,
        });
    }
    Ok((bytes, name))
}

/// `path` opened to read with `O_NONBLOCK`: a named pipe put in the file's place after it was
/// looked at opens at once instead of waiting for a writer (and is refused as what it is); a
/// regular file reads as without it.
fn open_without_waiting(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let nonblock = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    (std::fs::OpenOptions::new().read(true))
        .custom_flags(nonblock)
        .open(path)
}

/// The length of the file `meta` describes, if it is a regular file (after symlinks).
fn regular(path: &Path, meta: &std::fs::Metadata) -> Result<u64, SpecError> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    let kind = match () {
        _ if kind.is_file() => return Ok(meta.len()),
        _ if kind.is_dir() => "a directory",
        _ if kind.is_fifo() => "a named pipe",
        _ if kind.is_char_device() || kind.is_block_device() => "a device",
        _ if kind.is_socket() => "a socket",
        _ => "not a file",
    };
    Err(SpecError::NotAFile {
        file: path.to_path_buf(),
        kind,
    })
}

/// At most `max + 1` bytes of `reader`, whose size is `size` when known (a regular file): one
/// buffer of that size. A source that cannot tell (gzip) is read a MiB at a time and joined
/// once, instead of into one buffer grown by doubling and copied at each step: `driftwatch
/// check --spec /dev/zero` (refused unread now) peaked at 418 MB and took 0.8 s against the
/// 128 MiB bound that way, 287 MB and 0.04 s so.
fn read_at_most(reader: Box<dyn Read>, max: u64, size: Option<u64>) -> std::io::Result<Vec<u8>> {
    let limit = max.saturating_add(1);
    let mut reader = reader.take(limit);
    if let Some(size) = size {
        let mut bytes = Vec::with_capacity(usize::try_from(size.min(limit)).unwrap_or(0));
        reader.read_to_end(&mut bytes)?;
        return Ok(bytes);
    }
    const CHUNK: u64 = 1 << 20;
    let mut chunks = Vec::new();
    loop {
        let mut chunk = Vec::with_capacity(CHUNK as usize);
        let n = reader.by_ref().take(CHUNK).read_to_end(&mut chunk)?;
        if n == 0 {
            break;
        }
        chunks.push(chunk);
    }
    if chunks.len() == 1 {
        return Ok(chunks.pop().unwrap_or_default());
    }
    Ok(chunks.concat())
}

/// Keys written twice in one object of a JSON document (YAML refuses them as it parses).
pub(crate) fn duplicates(bytes: &[u8], name: &str) -> Vec<Note> {
    match looks_json(bytes, name) {
        true => super::notes::duplicate_keys(bytes),
        false => Vec::new(),
    }
}

fn looks_json(bytes: &[u8], name: &str) -> bool {
    name.ends_with(".json")
        || (!name.ends_with(".yaml")
            && !name.ends_with(".yml")
            && bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{'))
}

pub(crate) fn parse(path: &Path, bytes: &[u8], name: &str) -> Result<Value, SpecError> {
    if looks_json(bytes, name) {
        serde_json::from_slice(bytes).map_err(|e| {
            SpecError::at(
                path,
                "",
                format!(
                    "invalid JSON at line {}, column {}: {e}",
                    e.line(),
                    e.column()
                ),
            )
        })
    } else {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| SpecError::at(path, "", format!("the file is not UTF-8: {e}")))?;
        yaml_serde::from_str(text)
            .map_err(|e| SpecError::at(path, "", format!("invalid YAML: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The race `read_bytes` leaves between looking at the path and opening it: a named pipe
    /// there when it is opened. Opened as the load opens it, it is refused at once.
    #[test]
    fn a_named_pipe_opened_in_place_of_the_file_is_refused_without_waiting_for_a_writer() {
        let pipe = std::env::temp_dir().join(format!("driftwatch-fifo-{}", std::process::id()));
        let made = std::process::Command::new("mkfifo").arg(&pipe).status();
        assert!(made.unwrap().success());
        let (done, opened) = std::sync::mpsc::channel();
        let path = pipe.clone();
        std::thread::spawn(move || {
            let file = open_without_waiting(&path).unwrap();
            done.send(regular(&path, &file.metadata().unwrap()).map_err(|e| e.to_string()))
        });
        let refused = opened.recv_timeout(std::time::Duration::from_secs(5));
        std::fs::remove_file(&pipe).unwrap();
        let refused = refused.expect("the open waited for a writer");
        assert!(refused.unwrap_err().contains("a named pipe"));
    }

    #[test]
    fn yaml_and_json_parse_to_the_same_value() {
        let y = parse(
            Path::new("a.yaml"),
            b"openapi: 3.1.0\npaths: {}\n",
            "a.yaml",
        )
        .unwrap();
        let j = parse(
            Path::new("a.json"),
            br#"{"openapi":"3.1.0","paths":{}}"#,
            "a.json",
        )
        .unwrap();
        assert_eq!(y, j);
    }

    #[test]
    fn errors_name_file_and_position() {
        let e = parse(Path::new("bad.json"), b"{\n  \"openapi\": }", "bad.json").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("bad.json: at /: invalid JSON at line 2, column"),
            "{e}"
        );
        let e = parse(Path::new("bad.yaml"), b"a: [1,\n", "bad.yaml").unwrap_err();
        assert!(
            e.to_string().starts_with("bad.yaml: at /: invalid YAML"),
            "{e}"
        );
    }
}
