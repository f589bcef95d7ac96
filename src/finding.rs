//! What an audit reports. Findings are data, never errors: a request that drifts from the spec
//! is exactly what driftwatch exists to see. Kind names are stable: metrics, alert rules,
//! dashboards and the audit log key on them, so renaming one is a breaking change.

use std::fmt;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

/// Every kind of finding driftwatch emits, in the order `docs/findings.md` documents them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    UnknownOperation,
    MethodNotAllowed,
    /// No template fits the path, but one would if a path value could hold the `/` it sends
    /// unescaped, and the spec does not let that parameter span segments.
    SlashInPathValue,
    UnknownQueryParam,
    MissingRequiredParam,
    /// The request carries no credential that its operation's `security` accepts: the API
    /// will refuse it.
    MissingCredentials,
    ParamTypeMismatch,
    UnsupportedMediaType,
    InvalidJsonBody,
    UndeclaredBodyField,
    BodyTypeMismatch,
    BodySchemaViolation,
    OmittedOnReplace,
    /// A replace write omits a field that held a value at the last GET: it is about to be erased.
    SilentClearRisk,
    /// Confirmed: after a write that omitted it, the resource shows the field emptied.
    SilentClear,
    /// The API answered 4xx to a request that had findings: the drift that caused it.
    UpstreamRejected,
    Unaudited,
    /// The API answered with a status the operation does not declare (and no `default`).
    UndeclaredStatus,
    /// The response's `Content-Type` is not declared for its status.
    UndeclaredResponseMediaType,
    /// The response body breaks its schema: a type, a required property, an enum.
    ResponseSchemaViolation,
    /// The response carries a property its schema does not declare: the spec is stale.
    UndeclaredResponseField,
    /// A GET returns a field the resource's replace body does not declare: clients built from
    /// the spec will erase it on every update.
    ReplaceWillDropField,
}

impl Kind {
    /// All kinds, so that tests and docs can pin the set by name.
    pub const ALL: [Kind; 22] = [
        Kind::UnknownOperation,
        Kind::MethodNotAllowed,
        Kind::SlashInPathValue,
        Kind::UnknownQueryParam,
        Kind::MissingRequiredParam,
        Kind::MissingCredentials,
        Kind::ParamTypeMismatch,
        Kind::UnsupportedMediaType,
        Kind::InvalidJsonBody,
        Kind::UndeclaredBodyField,
        Kind::BodyTypeMismatch,
        Kind::BodySchemaViolation,
        Kind::OmittedOnReplace,
        Kind::SilentClearRisk,
        Kind::SilentClear,
        Kind::UpstreamRejected,
        Kind::Unaudited,
        Kind::UndeclaredStatus,
        Kind::UndeclaredResponseMediaType,
        Kind::ResponseSchemaViolation,
        Kind::UndeclaredResponseField,
        Kind::ReplaceWillDropField,
    ];

    /// The stable name used in metrics labels, events and JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::UnknownOperation => "unknown_operation",
            Kind::MethodNotAllowed => "method_not_allowed",
            Kind::SlashInPathValue => "slash_in_path_value",
            Kind::UnknownQueryParam => "unknown_query_param",
            Kind::MissingRequiredParam => "missing_required_param",
            Kind::MissingCredentials => "missing_credentials",
            Kind::ParamTypeMismatch => "param_type_mismatch",
            Kind::UnsupportedMediaType => "unsupported_media_type",
            Kind::InvalidJsonBody => "invalid_json_body",
            Kind::UndeclaredBodyField => "undeclared_body_field",
            Kind::BodyTypeMismatch => "body_type_mismatch",
            Kind::BodySchemaViolation => "body_schema_violation",
            Kind::OmittedOnReplace => "omitted_on_replace",
            Kind::SilentClearRisk => "silent_clear_risk",
            Kind::SilentClear => "silent_clear",
            Kind::UpstreamRejected => "upstream_rejected",
            Kind::Unaudited => "unaudited",
            Kind::UndeclaredStatus => "undeclared_status",
            Kind::UndeclaredResponseMediaType => "undeclared_response_media_type",
            Kind::ResponseSchemaViolation => "response_schema_violation",
            Kind::UndeclaredResponseField => "undeclared_response_field",
            Kind::ReplaceWillDropField => "replace_will_drop_field",
        }
    }

    /// The kind with this stable name (config files name kinds this way).
    pub fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The default severity from design.md. `undeclared_body_field` is raised to `error`
    /// by the audit where the schema says `additionalProperties: false`.
    pub fn default_severity(self) -> Severity {
        match self {
            Kind::SilentClearRisk | Kind::SilentClear | Kind::ReplaceWillDropField => {
                Severity::Critical
            }
            Kind::UndeclaredBodyField
            | Kind::OmittedOnReplace
            | Kind::UndeclaredStatus
            | Kind::UndeclaredResponseMediaType
            | Kind::ResponseSchemaViolation
            | Kind::UndeclaredResponseField => Severity::Warning,
            Kind::Unaudited => Severity::Info,
            _ => Severity::Error,
        }
    }

    /// Who has to act: the client (request kinds) or the API and its spec (response kinds).
    pub fn blame(self) -> Blame {
        match self {
            Kind::UndeclaredStatus
            | Kind::UndeclaredResponseMediaType
            | Kind::ResponseSchemaViolation
            | Kind::UndeclaredResponseField
            | Kind::ReplaceWillDropField => Blame::Server,
            _ => Blame::Client,
        }
    }
}

/// Which side of the exchange a finding is about: the request the client sent, or the
/// response the API gave (the spec or the server has drifted). A label on the findings metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Blame {
    Client,
    Server,
}

impl Blame {
    pub fn as_str(self) -> &'static str {
        match self {
            Blame::Client => "client",
            Blame::Server => "server",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How bad a finding is; ordered so that `--fail-on` can compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Error,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
            Severity::Critical => "critical",
        }
    }

    pub fn parse(s: &str) -> Option<Severity> {
        Some(match s {
            "info" => Severity::Info,
            "warning" => Severity::Warning,
            "error" => Severity::Error,
            "critical" => Severity::Critical,
            _ => return None,
        })
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Where in the request a finding points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    Path,
    Query,
    Header,
    Cookie,
    Body,
    /// The upstream's response: its status, `Content-Type` or body (field is a JSON pointer).
    Response,
}

impl Location {
    pub fn as_str(self) -> &'static str {
        match self {
            Location::Path => "path",
            Location::Query => "query",
            Location::Header => "header",
            Location::Cookie => "cookie",
            Location::Body => "body",
            Location::Response => "response",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Location> {
        Some(match s {
            "path" => Location::Path,
            "query" => Location::Query,
            "header" => Location::Header,
            "cookie" => Location::Cookie,
            _ => return None,
        })
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One observed deviation from the contract. Never carries a value from the request: only
/// names, types and positions, so that findings can be logged and exported safely.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    pub severity: Severity,
    /// Follows from the kind; carried so that events and JSON output say it.
    pub blame: Blame,
    /// The operation id, or `None` when the request matched no operation.
    pub operation: Option<CompactString>,
    pub location: Location,
    /// Parameter name, or a JSON pointer inside the body (`/graphicsElementIds`).
    pub field: CompactString,
    /// What the spec declares there (`integer`, `array<integer>`, `application/json`).
    pub expected: Option<CompactString>,
    /// What the request carried, as a type or shape, never as a value.
    pub observed: Option<CompactString>,
    /// A fix an agent can apply (`customerId`), where one is known.
    pub suggestion: Option<CompactString>,
    /// One sentence a person or an agent can act on.
    pub message: CompactString,
    /// For silent clears: the GET the write was compared with, and the write that erased.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Box<Evidence>>,
    /// The other operation a finding ties together: for `replace_will_drop_field`, the GET
    /// whose response carried the field (`operation` is the replace write that will drop it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related_operation: Option<CompactString>,
}

/// What a silent-clear finding was concluded from: enough for an incident responder to find
/// both requests in the API's own logs. Never a value, only its hash.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    /// Request id of the GET that showed the field holding a value.
    pub read_request_id: String,
    #[serde(serialize_with = "rfc3339")]
    pub read_at: std::time::SystemTime,
    /// Hash of the field's value at that GET.
    pub value_hash: String,
    /// The tool call that made that GET, when one is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_tool: Option<String>,
    /// The write that omitted the field (on `silent_clear`).
    pub write_request_id: Option<String>,
    /// The read was driftwatch's own, sent just before the write because the memory had no
    /// record of the resource (`enforce.read_before_write`): `read_request_id` is its id.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub read_before_write: bool,
}

/// `text` cut to at most `max` bytes at a character boundary, ending in `...` when cut (problem
/// details, load warnings).
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// Serialize a time as RFC 3339 with milliseconds, as every event and finding writes it.
pub(crate) fn rfc3339<S: serde::Serializer>(
    at: &std::time::SystemTime,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_millis(*at))
}

impl Finding {
    /// A finding with the kind's default severity; fill in the rest with the builder methods.
    pub fn new(kind: Kind, location: Location, field: impl Into<CompactString>) -> Finding {
        Finding {
            kind,
            severity: kind.default_severity(),
            blame: kind.blame(),
            operation: None,
            location,
            field: field.into(),
            expected: None,
            observed: None,
            suggestion: None,
            message: CompactString::default(),
            evidence: None,
            related_operation: None,
        }
    }

    /// Whether it was read from the request body (its fields, or its media type): what a
    /// body that was not read, or not recorded, cannot say.
    pub fn is_about_the_body(&self) -> bool {
        self.location == Location::Body || self.kind == Kind::UnsupportedMediaType
    }

    pub fn expected(mut self, expected: impl Into<CompactString>) -> Finding {
        self.expected = Some(expected.into());
        self
    }

    pub fn observed(mut self, observed: impl Into<CompactString>) -> Finding {
        self.observed = Some(observed.into());
        self
    }

    pub fn suggestion(mut self, suggestion: Option<impl Into<CompactString>>) -> Finding {
        self.suggestion = suggestion.map(Into::into);
        self
    }

    pub fn severity(mut self, severity: Severity) -> Finding {
        self.severity = severity;
        self
    }

    pub fn message(mut self, message: impl Into<CompactString>) -> Finding {
        self.message = message.into();
        self
    }
}
