//! The MCP gateway's core: a tool call's arguments become the HTTP request its operation
//! describes (path parameters in the template, query parameters in their declared style,
//! header parameters, the rest as the JSON body), and the API's answer becomes the tool's
//! result. Pure, like the audit: `cli::mcp` sends the request through the sidecar's own
//! pipeline, so a call is audited, remembered and refused exactly as a request from any other
//! client would be.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};

use crate::contract::{Operation, Param, Style};
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
}

/// What a path or query value may hold unencoded (RFC 3986 unreserved).
const VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The request for `op` from a tool call's `args`, under `base` (the spec's base path).
pub fn request(
    op: &Operation,
    base: &str,
    args: &Map<String, Value>,
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
                let encoded = utf8_percent_encode(&text, VALUE).to_string();
                path = path.replace(&format!("{{{}}}", p.name), &encoded);
            }
            Location::Query => query_pairs(p, value, &mut query)?,
            Location::Header => {
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

/// A scalar as text: strings as they are, numbers and booleans as JSON writes them.
fn scalar(p: &Param, value: &Value) -> Result<String, ArgumentError> {
    match value {
        Value::String(s) => Ok(s.clone()),
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
            request(get, "", &args(json!({}))),
            Err(ArgumentError::MissingPath("id".into()))
        );
        assert_eq!(
            request(get, "", &args(json!({"id": 1, "extra": true}))),
            Err(ArgumentError::Unknown("extra".into()))
        );
        assert_eq!(
            request(get, "", &args(json!({"id": {"a": 1}}))),
            Err(ArgumentError::Shape(
                "id".into(),
                "expected a string, number or boolean"
            ))
        );
        let path = request(get, "", &args(json!({"id": "a/b?"}))).unwrap();
        assert_eq!(path.target, "/api/v1/channels/a%2Fb%3F");
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
            matches!(request(put, "", &sent), Err(ArgumentError::Shape(name, _)) if name == *header)
        );
        sent.insert(header.clone(), json!("\"v1\""));
        let call = request(put, "", &sent).unwrap();
        assert_eq!(call.headers, [(header.clone(), "\"v1\"".to_string())]);
    }
}
