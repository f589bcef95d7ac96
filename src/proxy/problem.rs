//! The answers driftwatch gives itself, as RFC 9457 `application/problem+json`: a refused request
//! in enforce mode (422), an unreachable upstream (502, 504), a broken client body (400). The
//! `detail` comes first and stays short: MCP servers hand the body to the model as it is, and
//! some cut it at 1,000 characters.

use crate::mcp::calls::Attribution;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};

use crate::finding::Finding;

const DETAIL_MAX: usize = 300;

pub fn response(
    status: StatusCode,
    title: &str,
    detail: &str,
    request_id: &str,
    extra: Option<(&str, Value)>,
) -> Response<Bytes> {
    let mut body = json!({
        "detail": shorten(detail),
        "title": title,
        "status": status.as_u16(),
        "type": format!("urn:driftwatch:problem:{}", status.as_u16()),
        "request_id": request_id,
    });
    if let (Some((key, value)), Some(map)) = (extra, body.as_object_mut()) {
        map.insert(key.into(), value);
    }
    let mut response = Response::new(Bytes::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

/// 422 for a request refused in enforce mode: the first blocking finding's message as the
/// detail, and every blocking finding (names and types only) in `findings`.
pub fn blocked(findings: &[&Finding], request_id: &str) -> Response<Bytes> {
    let first = findings
        .first()
        .map(|f| f.message.as_str())
        .unwrap_or("the request does not match the API's spec");
    let detail = match findings.len() {
        0 | 1 => first.to_string(),
        n => format!("{first} (and {} more)", n - 1),
    };
    let list: Vec<Value> = findings
        .iter()
        .map(|f| {
            json!({"kind": f.kind, "severity": f.severity, "location": f.location, "field": f.field,
                   "expected": f.expected, "suggestion": f.suggestion, "message": f.message})
        })
        .collect();
    response(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Request refused: it does not match the API's OpenAPI spec",
        &detail,
        request_id,
        Some(("findings", Value::Array(list))),
    )
}

/// 409 for a write that would erase data: the fields the agent must send back (their current
/// values are in the GET it already has).
pub fn silent_clear(blocked: Response<Bytes>, findings: &[&Finding]) -> Response<Bytes> {
    let fields: Vec<&str> = findings
        .iter()
        .filter(|f| f.kind == crate::finding::Kind::SilentClearRisk)
        .map(|f| f.field.trim_start_matches('/'))
        .collect();
    let detail = format!(
        "This PUT replaces the whole resource and would erase {}: include {} with the current value from your last GET.",
        quoted(&fields),
        them(fields.len())
    );
    let title = "Request refused: it would silently erase data";
    conflict(blocked, title, &detail, &fields, None)
}

/// 409 for a write set to `repair` that could not be completed: the fields it would erase,
/// and why driftwatch could not fill them from a fresh read.
pub fn unrepaired(blocked: Response<Bytes>, fields: &[String], why: &str) -> Response<Bytes> {
    let detail = format!(
        "This PUT replaces the whole resource and would erase {}; driftwatch could not fill {} from a fresh read: {why}. Include {} with the current value.",
        quoted(fields),
        them(fields.len()),
        them(fields.len()),
    );
    let title = "Request refused: it would erase data and could not be repaired";
    let why = ("repair_refused", Value::String(why.into()));
    conflict(blocked, title, &detail, fields, Some(why))
}

/// `blocked` made the 409 of a write that would erase data: its title and detail, the fields
/// to include, and one more member where given.
fn conflict(
    mut blocked: Response<Bytes>,
    title: &str,
    detail: &str,
    fields: &[impl AsRef<str>],
    extra: Option<(&str, Value)>,
) -> Response<Bytes> {
    let Ok(mut body) = serde_json::from_slice::<Value>(blocked.body()) else {
        return blocked;
    };
    body["detail"] = Value::String(shorten(detail));
    body["status"] = Value::from(409);
    body["type"] = Value::String("urn:driftwatch:problem:409".into());
    body["title"] = Value::String(title.into());
    body["include_fields"] = fields.iter().map(|f| f.as_ref()).collect();
    if let Some((key, value)) = extra {
        body[key] = value;
    }
    *blocked.body_mut() = Bytes::from(body.to_string());
    *blocked.status_mut() = StatusCode::CONFLICT;
    blocked
}

/// `a`, `b`: field names as a detail quotes them.
fn quoted(fields: &[impl AsRef<str>]) -> String {
    let quoted: Vec<String> = fields.iter().map(|f| format!("`{}`", f.as_ref())).collect();
    quoted.join(", ")
}

fn them(n: usize) -> &'static str {
    if n == 1 { "it" } else { "them" }
}

/// A refusal names the tool call it refused: the agent's MCP result then says which tool and
/// which finding, whatever the server makes of the answer.
pub fn with_tool(mut refused: Response<Bytes>, tool: &Attribution) -> Response<Bytes> {
    let Ok(mut body) = serde_json::from_slice::<Value>(refused.body()) else {
        return refused;
    };
    body["tool"] = Value::from(tool.label());
    if !tool.candidates.is_empty() {
        body["tool_candidates"] = tool.candidates.iter().map(|c| c.as_ref()).collect();
    }
    *refused.body_mut() = Bytes::from(body.to_string());
    refused
}

/// What a refusal says to the agent when its MCP server passes on only the status: the
/// status, the detail, and each finding's kind and field.
pub fn said(refused: &Response<Bytes>) -> String {
    let body: Value = serde_json::from_slice(refused.body()).unwrap_or_default();
    let status = refused.status();
    let detail = body["detail"].as_str().unwrap_or_default();
    let mut text = format!(
        "driftwatch refused the API request this tool call made ({} {}): {detail}",
        status.as_u16(),
        status.canonical_reason().unwrap_or_default()
    );
    let findings = body["findings"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for f in findings {
        let (kind, field) = (f["kind"].as_str(), f["field"].as_str());
        if let (Some(kind), Some(field)) = (kind, field) {
            text.push_str(&format!(" [{kind} {field}]"));
        }
    }
    text
}

fn shorten(detail: &str) -> String {
    crate::finding::shorten(detail, DETAIL_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Kind, Location};

    #[test]
    fn detail_comes_first_and_stays_short() {
        let f = Finding::new(Kind::UnknownQueryParam, Location::Query, "customer_id")
            .message("x".repeat(400));
        let g = Finding::new(Kind::ParamTypeMismatch, Location::Query, "limit").message("limit");
        let r = blocked(&[&f, &g], "rid");
        assert_eq!(r.status(), 422);
        let text = std::str::from_utf8(r.body()).unwrap();
        assert!(text.starts_with("{\"detail\":\""), "{text}");
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(v["detail"].as_str().unwrap().len(), 300);
        assert_eq!(v["findings"].as_array().unwrap().len(), 2);
    }
}
