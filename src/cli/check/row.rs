//! One finding with the exchange it came from, as `json` and `jsonl` write it: the bytes
//! serde_json writes for it, written here without serde's machinery. At millions of findings a
//! run, serde's flattened map (one call per key through `FlatMapSerializer`) and its escaper,
//! which looks each byte up in a table, were a sixth of `check --format json`'s CPU. Keys and
//! enum names are constants; a string is copied whole after one pass that finds nothing to
//! escape (a loop the compiler vectorizes), and goes through serde_json's escaper otherwise.
//! A test holds the bytes equal to serde_json's for findings of every shape.

use crate::finding::Finding;

/// Append the row's JSON object to `out`, as `serde_json::to_writer` writes the `Row` of the
/// tests below.
pub fn write(out: &mut Vec<u8>, f: &Finding, method: &str, path: &str, exchange: usize) {
    out.extend_from_slice(b"{\"kind\":\"");
    out.extend_from_slice(f.kind.as_str().as_bytes());
    out.extend_from_slice(b"\",\"severity\":\"");
    out.extend_from_slice(f.severity.as_str().as_bytes());
    out.extend_from_slice(b"\",\"blame\":\"");
    out.extend_from_slice(f.blame.as_str().as_bytes());
    out.extend_from_slice(b"\",\"operation\":");
    optional(out, f.operation.as_deref());
    out.extend_from_slice(b",\"location\":\"");
    out.extend_from_slice(f.location.as_str().as_bytes());
    out.extend_from_slice(b"\",\"field\":");
    string(out, &f.field);
    out.extend_from_slice(b",\"expected\":");
    optional(out, f.expected.as_deref());
    out.extend_from_slice(b",\"observed\":");
    optional(out, f.observed.as_deref());
    out.extend_from_slice(b",\"suggestion\":");
    optional(out, f.suggestion.as_deref());
    out.extend_from_slice(b",\"message\":");
    string(out, &f.message);
    if let Some(evidence) = &f.evidence {
        out.extend_from_slice(b",\"evidence\":");
        serde_json::to_writer(&mut *out, evidence).expect("evidence serializes to a Vec");
    }
    if let Some(related) = &f.related_operation {
        out.extend_from_slice(b",\"related_operation\":");
        string(out, related);
    }
    out.extend_from_slice(b",\"method\":");
    string(out, method);
    out.extend_from_slice(b",\"path\":");
    string(out, path);
    out.extend_from_slice(b",\"exchange\":");
    out.extend_from_slice(itoa::Buffer::new().format(exchange).as_bytes());
    out.push(b'}');
}

fn optional(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        Some(text) => string(out, text),
        None => out.extend_from_slice(b"null"),
    }
}

/// `text` as a JSON string. serde_json escapes exactly the control characters, `"` and `\`.
fn string(out: &mut Vec<u8>, text: &str) {
    // `fold`, not `all`: no early exit, so the loop is vectorized.
    let plain = text.bytes().fold(true, |plain, b| {
        plain & (b >= 0x20) & (b != b'"') & (b != b'\\')
    });
    if plain {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, text).expect("a string serializes to a Vec");
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use serde::Serialize;

    use super::*;
    use crate::finding::{Evidence, Kind, Location, Severity};

    /// The row as serde derives it: what `write` must equal, byte for byte.
    #[derive(Serialize)]
    struct Row<'a> {
        #[serde(flatten)]
        finding: &'a Finding,
        method: &'a str,
        path: &'a str,
        exchange: usize,
    }

    fn both(f: &Finding, method: &str, path: &str, exchange: usize) -> (String, String) {
        let mut ours = Vec::new();
        write(&mut ours, f, method, path, exchange);
        let row = Row {
            finding: f,
            method,
            path,
            exchange,
        };
        let serde = serde_json::to_string(&row).unwrap();
        (String::from_utf8(ours).unwrap(), serde)
    }

    #[test]
    fn a_row_is_the_bytes_serde_json_writes_for_findings_of_every_shape() {
        let plain = Finding::new(
            Kind::OmittedOnReplace,
            Location::Body,
            "/graphicsElementIds",
        )
        .expected("array<integer>")
        .observed("absent")
        .message("PUT /api/v1/channels/{id} (updateChannel) replaces the whole resource");
        let bare = Finding::new(Kind::UnknownOperation, Location::Path, "");
        let mut odd = Finding::new(
            Kind::UnknownQueryParam,
            Location::Query,
            "a\"b\\c\nd\u{1}e\u{7f}é😀",
        )
        .severity(Severity::Critical)
        .suggestion(Some("customerId\t"))
        .message("tab\there, quote \" and a backslash \\ and \u{0}");
        odd.operation = Some("op\u{1f}".into());
        odd.related_operation = Some("getChannel".into());
        let mut evidenced = plain.clone();
        evidenced.kind = Kind::SilentClear;
        evidenced.evidence = Some(Box::new(Evidence {
            read_request_id: "r-1".into(),
            read_at: SystemTime::UNIX_EPOCH + Duration::from_millis(1_764_720_000_123),
            value_hash: "ab12".into(),
            read_tool: None,
            write_request_id: None,
            read_before_write: false,
        }));
        for (f, exchange) in [
            (&plain, 0),
            (&bare, 7),
            (&odd, 1_234_567_890),
            (&evidenced, usize::MAX),
        ] {
            for (method, path) in [("PUT", "/api/v1/channels/*"), ("GE\"T", "/a\\b\u{2}")] {
                let (ours, serde) = both(f, method, path, exchange);
                assert_eq!(ours, serde);
                serde_json::from_str::<serde_json::Value>(&ours).unwrap();
            }
        }
    }

    #[test]
    fn a_string_is_escaped_where_any_byte_needs_it_and_copied_where_none_does() {
        for text in [
            "",
            "plain",
            "\"",
            "\\",
            "\u{1f}",
            " ~\u{7f}\u{80}é",
            &"x".repeat(100),
        ] {
            let mut ours = Vec::new();
            string(&mut ours, text);
            assert_eq!(ours, serde_json::to_vec(text).unwrap(), "{text:?}");
        }
    }
}
