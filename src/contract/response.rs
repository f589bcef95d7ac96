//! What an operation says it answers with: per status (exact, `2XX` range, or `default`), the
//! media types and their compiled schemas. The response audit picks one by status and
//! `Content-Type`; nothing is parsed from the spec per response.

use std::sync::{Arc, OnceLock};

use super::operation::BodyShape;

/// One entry of an operation's `responses`.
#[derive(Debug)]
pub struct DeclaredResponse {
    /// As the spec writes it: `200`, `2XX` or `default`.
    pub status: String,
    /// Empty when the response declares no body (`204`, or a description alone).
    pub media: Vec<ResponseMedia>,
}

/// A response media type. Its schema is compiled on first use
/// ([`super::Contract::response_schema`]), not at load.
#[derive(Debug)]
pub struct ResponseMedia {
    /// As declared, lowercase; may be a range such as `application/*`.
    pub media_type: String,
    /// A JSON media type, so the body is parsed and validated.
    pub json: bool,
    /// JSON pointer of the schema, if the media type declares one.
    pub schema: Option<String>,
    /// The schema's type in the small vocabulary (for spec diffs), as for request bodies.
    pub summary: Option<super::TypeSummary>,
    pub(super) compiled: OnceLock<Option<CompiledSchema>>,
}

#[derive(Debug)]
pub struct CompiledSchema {
    pub validator: super::LazyBody,
    pub shape: Arc<BodyShape>,
}

/// An operation's declared responses.
#[derive(Debug, Default)]
pub struct Responses {
    pub declared: Vec<DeclaredResponse>,
}

impl Responses {
    /// The declared response for `status`: an exact code first, then its range (`4XX`), then
    /// `default` (OpenAPI's precedence).
    pub fn for_status(&self, status: u16) -> Option<&DeclaredResponse> {
        let find = |wanted: fn(&str, u16) -> bool| {
            self.declared.iter().find(|r| wanted(&r.status, status))
        };
        find(|s, status| s.parse() == Ok(status))
            .or_else(|| find(is_range_of))
            .or_else(|| find(|s, _| s.eq_ignore_ascii_case("default")))
    }

    /// The declared statuses, for a finding's `expected`.
    pub fn statuses(&self) -> String {
        let names: Vec<&str> = self.declared.iter().map(|r| r.status.as_str()).collect();
        names.join(", ")
    }
}

/// `4XX` (any case) for a 4xx status.
fn is_range_of(key: &str, status: u16) -> bool {
    let key = key.as_bytes();
    key.len() == 3
        && u16::from(key[0]) == u16::from(b'0') + status / 100
        && key[1..].eq_ignore_ascii_case(b"XX")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(statuses: &[&str]) -> Responses {
        Responses {
            declared: statuses
                .iter()
                .map(|s| DeclaredResponse {
                    status: s.to_string(),
                    media: Vec::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn exact_code_then_range_then_default() {
        let r = declared(&["default", "4xx", "404", "200"]);
        let pick = |s| r.for_status(s).map(|d| d.status.as_str());
        assert_eq!(pick(404), Some("404"));
        assert_eq!(pick(409), Some("4xx"));
        assert_eq!(pick(200), Some("200"));
        assert_eq!(pick(500), Some("default"));
        let r = declared(&["200", "2XX"]);
        assert_eq!(r.for_status(201).map(|d| d.status.as_str()), Some("2XX"));
        assert!(r.for_status(500).is_none());
    }
}
