//! The MCP gateway's core: a tool call's arguments become the HTTP request its operation
//! describes (path parameters in the template, query parameters in their declared style,
//! header parameters, the rest as the JSON body), and the API's answer becomes the tool's
//! result. Pure, like the audit: `cli::mcp` sends the request through the sidecar's own
//! pipeline, so a call is audited, remembered and refused exactly as a request from any other
//! client would be.

pub mod bindings;
pub mod call_span;
pub mod calls;
pub mod message;
pub mod relay;
mod requests;
mod trace_meta;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};

use crate::audit::coerce;
use crate::contract::{FieldType, Operation, Param, Style};
use crate::finding::Location;

/// The request a tool call makes.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: String,
    /// Path and query, percent-encoded, with the spec's base path.
    pub target: String,
    pub headers: Vec<(String, String)>,
    /// JSON, with its media type.
    pub body: Option<(String, Vec<u8>)>,
}

/// Arguments that cannot make a request: the model's mistake, said back to it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgumentError {
    #[error("missing argument `{0}`: the path needs it")]
    MissingPath(String),
    #[error("argument `{0}`: {1}")]
    Shape(String, &'static str),
    #[error("unknown argument `{0}`: the operation takes no body")]
    Unknown(String),
    #[error("argument `{0}`: `{1}` is not of its type, {2}")]
    Type(String, String, String),
    #[error("argument `{0}`: {1}; driftwatch sets it, never a tool call")]
    Reserved(String, &'static str),
}

/// Header parameters that are not the model's to set: a spec may declare them (AWS declares
/// `Content-Length`), but sent from a tool call they would cut or stall the body, strip the
/// operator's credentials (`Connection: x-api-key`) or go out before them.
#[derive(Clone, Debug, Default)]
pub struct Reserved {
    /// The operator's credential headers (`--header`) and the spec's apiKey header names,
    /// lowercase.
    credentials: Vec<String>,
}

impl Reserved {
    pub fn new<'a>(credentials: impl IntoIterator<Item = &'a str>) -> Reserved {
        let credentials = credentials
            .into_iter()
            .map(str::to_ascii_lowercase)
            .collect();
        Reserved { credentials }
    }

    /// Why the header `name` is not an argument, or `None` when it may be one.
    pub fn why(&self, name: &str) -> Option<&'static str> {
        const HOP_BY_HOP: [&str; 6] = [
            "connection",
            "keep-alive",
            "te",
            "trailer",
            "transfer-encoding",
            "upgrade",
        ];
        const FRAMING: [&str; 5] = [
            "content-length",
            "content-type",
            "content-encoding",
            "host",
            "expect",
        ];
        const CREDENTIALS: [&str; 2] = ["authorization", "cookie"];
        let name = name.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&name.as_str()) || name.starts_with("proxy-") {
            Some("a hop-by-hop header")
        } else if FRAMING.contains(&name.as_str()) {
            Some("it frames the request")
        } else if CREDENTIALS.contains(&name.as_str()) || self.credentials.contains(&name) {
            Some("it carries the operator's credentials")
        } else {
            None
        }
    }
}

/// What a path or query value may hold unencoded (RFC 3986 unreserved).
const VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The request for `op` from a tool call's `args`, under `base` (the spec's base path): never
/// more than the spec describes. A path value is one segment that validates as its type (not
/// `.`, `..` or empty, which a server would read as a move up the path); a header that is
/// `reserved` is refused.
pub fn request(
    op: &Operation,
    base: &str,
    args: &Map<String, Value>,
    reserved: &Reserved,
) -> Result<Call, ArgumentError> {
    let mut path = format!("{}{}", base.trim_end_matches('/'), op.template);
    let mut query = Vec::new();
    let mut headers = Vec::new();
    for p in &op.params {
        let Some(value) = args.get(&p.name).filter(|v| !v.is_null()) else {
            if p.location == Location::Path {
                return Err(ArgumentError::MissingPath(p.name.clone()));
            }
            continue;
        };
        match p.location {
            Location::Path => {
                let text = joined(p, value, ",")?;
                path_segment(p, &text)?;
                // A value that may span segments (`x-multi-segment`) keeps its `/`.
                let encoded = match p.spans_segments {
                    true => text
                        .split('/')
                        .map(|s| utf8_percent_encode(s, VALUE).to_string())
                        .collect::<Vec<_>>()
                        .join("/"),
                    false => utf8_percent_encode(&text, VALUE).to_string(),
                };
                path = path.replace(&format!("{{{}}}", p.name), &encoded);
            }
            Location::Query => query_pairs(p, value, &mut query)?,
            Location::Header => {
                if let Some(why) = reserved.why(&p.name) {
                    return Err(ArgumentError::Reserved(p.name.clone(), why));
                }
                let text = joined(p, value, ",")?;
                if http::HeaderValue::from_str(&text).is_err() {
                    let why = "a header value cannot hold line breaks or control characters";
                    return Err(ArgumentError::Shape(p.name.clone(), why));
                }
                headers.push((p.name.clone(), text));
            }
            _ => {}
        }
    }
    let body = body(op, args)?;
    if !query.is_empty() {
        path.push('?');
        path.push_str(&query.join("&"));
    }
    Ok(Call {
        method: op.method.clone(),
        target: path,
        headers,
        body,
    })
}

/// A path value as the API will read it: one segment (or whole segments where it may span
/// them), of its declared type (read as the audit reads a path value, so `"30"` is an integer
/// and `".."` is not).
fn path_segment(p: &Param, text: &str) -> Result<(), ArgumentError> {
    let dots = |s: &str| matches!(s, "" | "." | "..");
    if dots(text) || (p.spans_segments && text.split('/').any(dots)) {
        let why = "a path value cannot be empty, `.` or `..`: the API would read another path";
        return Err(ArgumentError::Shape(p.name.clone(), why));
    }
    let scalar = !matches!(p.summary.ty, FieldType::Array(_) | FieldType::Object);
    let valid = |v: &jsonschema::Validator| v.is_valid(&coerce::scalar(text, &p.summary.ty));
    if scalar && !p.validator.get().is_none_or(|v| valid(v)) {
        let ty = p.summary.to_string();
        return Err(ArgumentError::Type(p.name.clone(), text.to_string(), ty));
    }
    Ok(())
}

/// The JSON body: the `requestBody` argument when the tool nests it, else every argument that
/// is no parameter. `None` when nothing is sent and the body is optional.
fn body(
    op: &Operation,
    args: &Map<String, Value>,
) -> Result<Option<(String, Vec<u8>)>, ArgumentError> {
    let is_param = |name: &str| op.params.iter().any(|p| p.name == name);
    let rest: Map<String, Value> = args
        .iter()
        .filter(|(k, _)| !is_param(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let Some(body) = &op.body else {
        return match rest.keys().next() {
            Some(name) => Err(ArgumentError::Unknown(name.clone())),
            None => Ok(None),
        };
    };
    let Some(media) = body.media.iter().find(|m| m.json) else {
        return Ok(None);
    };
    let nested =
        rest.len() == 1 && rest.contains_key("requestBody") && !declares(media, "requestBody");
    let value = match nested {
        true => rest.get("requestBody").cloned().unwrap_or(Value::Null),
        false if rest.is_empty() && !body.required => return Ok(None),
        false => Value::Object(rest),
    };
    let media_type = match media.media_type.contains('*') {
        true => "application/json".to_string(),
        false => media.media_type.clone(),
    };
    let bytes = serde_json::to_vec(&value).unwrap_or_default();
    Ok(Some((media_type, bytes)))
}

fn declares(media: &crate::contract::MediaBody, name: &str) -> bool {
    matches!(&*media.shape, crate::contract::BodyShape::Object { properties, .. } if properties.iter().any(|p| p.name == name))
}

/// A scalar as text: strings as they are, numbers and booleans as JSON writes them. A whole
/// number past 64 bits was parsed as a float (`1.2345678901234568e+22`) and would go out as
/// another number: it is refused.
fn scalar(p: &Param, value: &Value) -> Result<String, ArgumentError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n)
            if n.as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f.abs() >= 2f64.powi(63))
                && !n.is_i64()
                && !n.is_u64() =>
        {
            Err(ArgumentError::Shape(
                p.name.clone(),
                "a whole number past 64 bits cannot be sent exactly: send it as a string",
            ))
        }
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(ArgumentError::Shape(
            p.name.clone(),
            "expected a string, number or boolean",
        )),
    }
}

/// A scalar, or an array's items joined by `sep`.
fn joined(p: &Param, value: &Value, sep: &str) -> Result<String, ArgumentError> {
    match value {
        Value::Array(items) => Ok(items
            .iter()
            .map(|v| scalar(p, v))
            .collect::<Result<Vec<_>, _>>()?
            .join(sep)),
        v => scalar(p, v),
    }
}

/// `name=value` pairs for a query parameter in its declared style.
fn query_pairs(p: &Param, value: &Value, out: &mut Vec<String>) -> Result<(), ArgumentError> {
    let enc = |s: &str| utf8_percent_encode(s, VALUE).to_string();
    let name = enc(&p.name);
    if p.json_content {
        out.push(format!("{name}={}", enc(&value.to_string())));
        return Ok(());
    }
    match (value, p.style) {
        (Value::Object(map), Style::DeepObject) => {
            for (k, v) in map {
                out.push(format!("{name}%5B{}%5D={}", enc(k), enc(&scalar(p, v)?)));
            }
        }
        (Value::Object(map), _) if p.explode => {
            for (k, v) in map {
                out.push(format!("{}={}", enc(k), enc(&scalar(p, v)?)));
            }
        }
        (Value::Object(map), _) => {
            let mut parts = Vec::new();
            for (k, v) in map {
                parts.push(enc(k));
                parts.push(enc(&scalar(p, v)?));
            }
            out.push(format!("{name}={}", parts.join(",")));
        }
        (Value::Array(items), Style::Form) if p.explode => {
            for v in items {
                out.push(format!("{name}={}", enc(&scalar(p, v)?)));
            }
        }
        (Value::Array(_), style) => {
            let sep = match style {
                Style::SpaceDelimited => " ",
                Style::PipeDelimited => "|",
                _ => ",",
            };
            out.push(format!("{name}={}", enc(&joined(p, value, sep)?)));
        }
        (v, _) => out.push(format!("{name}={}", enc(&scalar(p, v)?))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Contract;
    use serde_json::json;

    fn contract() -> Contract {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/channels.openapi.yaml");
        let spec = crate::spec::Spec::load(&path).unwrap();
        Contract::compile(&spec, &Default::default()).unwrap()
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn path_query_and_body_come_from_the_arguments() {
        let c = contract();
        let put = c.operation("updateChannel").unwrap();
        let call = request(
            put,
            "",
            &args(json!({"id": 7, "name": "Retro TV", "graphicsElementIds": [3, 7]})),
            &Reserved::default(),
        )
        .unwrap();
        assert_eq!(
            (call.method.as_str(), call.target.as_str()),
            ("PUT", "/api/v1/channels/7")
        );
        let (media, bytes) = call.body.unwrap();
        assert_eq!(media, "application/json");
        assert_eq!(
            serde_json::from_slice::<Value>(&bytes).unwrap(),
            json!({"name": "Retro TV", "graphicsElementIds": [3, 7]})
        );
        let list = c.operation("listPlayouts").unwrap();
        let call = request(
            list,
            "/base/",
            &args(json!({"pageSize": 5, "query": "a b&c"})),
            &Reserved::default(),
        )
        .unwrap();
        assert_eq!(
            call.target,
            "/base/api/v1/playouts?query=a%20b%26c&pageSize=5"
        );
        assert_eq!(call.body, None);
    }

    #[test]
    fn arguments_that_cannot_make_the_request_are_said_back() {
        let c = contract();
        let get = c.operation("getChannel").unwrap();
        assert_eq!(
            request(get, "", &args(json!({})), &Reserved::default()),
            Err(ArgumentError::MissingPath("id".into()))
        );
        assert_eq!(
            request(
                get,
                "",
                &args(json!({"id": 1, "extra": true})),
                &Reserved::default()
            ),
            Err(ArgumentError::Unknown("extra".into()))
        );
        assert_eq!(
            request(
                get,
                "",
                &args(json!({"id": {"a": 1}})),
                &Reserved::default()
            ),
            Err(ArgumentError::Shape(
                "id".into(),
                "expected a string, number or boolean"
            ))
        );
        // A header argument cannot smuggle a header of its own.
        let put = c.operation("updateChannel").unwrap();
        let header = &put
            .params
            .iter()
            .find(|p| p.location == Location::Header)
            .unwrap()
            .name;
        let mut sent = args(json!({"id": 7, "name": "x"}));
        sent.insert(header.clone(), json!("\"v1\"\r\nx-admin: yes"));
        assert!(
            matches!(request(put, "", &sent, &Reserved::default()), Err(ArgumentError::Shape(name, _)) if name == *header)
        );
        sent.insert(header.clone(), json!("\"v1\""));
        let call = request(put, "", &sent, &Reserved::default()).unwrap();
        assert_eq!(call.headers, [(header.clone(), "\"v1\"".to_string())]);
    }

    /// A spec with string and integer path parameters, and header parameters a real spec may
    /// declare (AWS declares `Content-Length`), one of them also an apiKey scheme.
    fn repos() -> Contract {
        let doc = json!({
            "openapi": "3.0.3", "info": {"title": "t", "version": "1"},
            "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}}},
            "security": [{"key": []}],
            "paths": {
                "/repos/{owner}/{repo}/contents/{path}": {"get": {"operationId": "getContent",
                    "parameters": [
                        {"name": "owner", "in": "path", "required": true, "schema": {"type": "string"}},
                        {"name": "repo", "in": "path", "required": true, "schema": {"type": "string"}},
                        {"name": "path", "in": "path", "required": true, "x-multi-segment": true, "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "ok"}}}},
                "/repos/{owner}/{repo}/issues": {"get": {"operationId": "listIssues",
                    "parameters": [
                        {"name": "owner", "in": "path", "required": true, "schema": {"type": "string"}},
                        {"name": "repo", "in": "path", "required": true, "schema": {"type": "string"}},
                        {"name": "Content-Length", "in": "header", "schema": {"type": "integer"}},
                        {"name": "Connection", "in": "header", "schema": {"type": "string"}},
                        {"name": "X-Api-Key", "in": "header", "schema": {"type": "string"}},
                        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "ok"}}}},
                "/items/{n}": {"get": {"operationId": "getItem",
                    "parameters": [{"name": "n", "in": "path", "required": true, "schema": {"type": "integer"}}],
                    "responses": {"200": {"description": "ok"}}}}
            }
        });
        let spec =
            crate::spec::Spec::from_document(std::path::Path::new("repos.json"), doc).unwrap();
        Contract::compile(&spec, &Default::default()).unwrap()
    }

    #[test]
    fn a_path_value_is_one_segment_of_its_type() {
        let c = repos();
        let list = c.operation("listIssues").unwrap();
        let none = Reserved::default();
        for dots in ["..", ".", ""] {
            let sent = args(json!({"owner": dots, "repo": "r"}));
            assert!(
                matches!(request(list, "", &sent, &none), Err(ArgumentError::Shape(name, _)) if name == "owner"),
                "{dots:?} was sent"
            );
        }
        // Dots inside a segment, and a slash, stay in the one segment.
        let call = request(
            list,
            "",
            &args(json!({"owner": "a/b?", "repo": "..."})),
            &none,
        )
        .unwrap();
        assert_eq!(call.target, "/repos/a%2Fb%3F/.../issues");
        // A multi-segment value keeps its `/`, each segment encoded, none of them dots.
        let content = c.operation("getContent").unwrap();
        let sent = args(json!({"owner": "o", "repo": "r", "path": "docs/a b.md"}));
        let call = request(content, "", &sent, &none).unwrap();
        assert_eq!(call.target, "/repos/o/r/contents/docs/a%20b.md");
        for bad in ["docs/../secrets", "docs//a", "a/"] {
            let sent = args(json!({"owner": "o", "repo": "r", "path": bad}));
            assert!(
                matches!(request(content, "", &sent, &none), Err(ArgumentError::Shape(name, _)) if name == "path"),
                "{bad:?} was sent"
            );
        }
        let item = c.operation("getItem").unwrap();
        assert_eq!(
            request(item, "", &args(json!({"n": "abc"})), &none),
            Err(ArgumentError::Type(
                "n".into(),
                "abc".into(),
                "integer".into()
            ))
        );
        // A whole number past 64 bits is no longer the number the model sent.
        let big: Value = serde_json::from_str("12345678901234567890123").unwrap();
        assert!(matches!(
            request(item, "", &args(json!({"n": big})), &none),
            Err(ArgumentError::Shape(..))
        ));
        // The text an integer is sent as is the integer.
        for (n, sent) in [
            (json!(30), "30"),
            (json!("30"), "30"),
            (json!(u64::MAX), "18446744073709551615"),
        ] {
            let target = request(item, "", &args(json!({"n": n})), &none)
                .unwrap()
                .target;
            assert_eq!(target, format!("/items/{sent}"));
        }
    }

    #[test]
    fn headers_that_frame_the_request_or_carry_credentials_are_not_arguments() {
        let c = repos();
        let list = c.operation("listIssues").unwrap();
        let reserved = Reserved::new(c.secrets.headers.iter().map(String::as_str));
        for (header, value) in [
            ("content-length", json!(3)),
            ("connection", json!("x-api-key")),
            ("x-api-key", json!("the model's")),
        ] {
            let mut sent = args(json!({"owner": "o", "repo": "r"}));
            sent.insert(header.into(), value);
            assert!(
                matches!(request(list, "", &sent, &reserved), Err(ArgumentError::Reserved(name, _)) if name == header),
                "{header} was sent"
            );
        }
        let mut sent = args(json!({"owner": "o", "repo": "r", "x-trace": "t1"}));
        let call = request(list, "", &sent, &reserved).unwrap();
        assert_eq!(call.headers, [("x-trace".to_string(), "t1".to_string())]);
        // The operator's own `--header` names are theirs too.
        sent.insert("x-trace".into(), json!("t2"));
        let operator = Reserved::new(["X-Trace"]);
        assert!(matches!(
            request(list, "", &sent, &operator),
            Err(ArgumentError::Reserved(..))
        ));
    }
}
