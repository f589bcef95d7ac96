//! Recorded traffic for offline checks: HAR 1.2 files and JSON Lines, one exchange a line
//! (`{"method","url","headers","body"|"body_text","response"}`; a response `body` recorded as
//! JSON implies `content-type: application/json`). A malformed line or entry is
//! kept as a problem with its position and the rest is still read: one bad line must not hide
//! the drift in a thousand good ones.

mod access;
mod line;
mod stream;

pub use stream::{Format, Progress, Stream};

use std::path::PathBuf;

use serde_json::Value;

/// One recorded request (and its response, when recorded).
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// 0-based line (JSON Lines) or entry (HAR) index.
    pub index: usize,
    pub method: String,
    /// Absolute URL or path with query, as recorded.
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub response: Option<RecordedResponse>,
    /// When it was recorded (HAR `startedDateTime`, JSON Lines `time`), RFC 3339.
    pub at: Option<std::time::SystemTime>,
    /// The recording does not say what the body was (an access log): body findings are
    /// left out rather than guessed from an absent body.
    pub body_unknown: bool,
    /// The recording kept no request headers (an access log, a JSON line without `headers`):
    /// whether a credential was sent is unknown, so `missing_credentials` is left out.
    pub credentials_unknown: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RecordedResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

/// A line or entry that could not be read, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// 0-based, as in [`Exchange::index`].
    pub index: usize,
    pub reason: String,
}

/// What the stream gives: an exchange, or a line or entry that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Exchange(Exchange),
    Problem(Problem),
}

#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    #[error("{}: cannot read: {source}", file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
}

pub(crate) fn jsonl_exchange(index: usize, line: &Value) -> Result<Exchange, String> {
    if line.get("url").is_none()
        && let Some(exchange) = access::json_log(index, line)
    {
        return exchange;
    }
    let text = |key: &str| line.get(key).and_then(Value::as_str).map(String::from);
    let method = text("method")
        .ok_or("missing string `method`")?
        .to_ascii_uppercase();
    let url = text("url").ok_or("missing string `url`")?;
    let headers = header_map(line.get("headers"))?;
    let body = body_of(line)?;
    let response = match line.get("response") {
        None | Some(Value::Null) => None,
        Some(r) => {
            let mut headers = header_map(r.get("headers"))?;
            // A response body recorded as JSON is JSON, whether or not its headers were kept.
            let json_body = r.get("body").is_some() && r.get("body_text").is_none();
            if json_body
                && !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            {
                headers.push(("content-type".into(), "application/json".into()));
            }
            Some(RecordedResponse {
                status: status_of(r).ok_or("response needs a numeric `status`")?,
                headers,
                body: body_of(r)?,
            })
        }
    };
    let at = time(line.get("time"));
    Ok(Exchange {
        index,
        method,
        url,
        headers,
        body,
        response,
        at,
        body_unknown: false,
        credentials_unknown: line.get("headers").is_none_or(Value::is_null),
    })
}

fn status_of(response: &Value) -> Option<u16> {
    response
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
}

/// An RFC 3339 timestamp (`Z` form); anything else is treated as unknown.
pub(crate) fn time(value: Option<&Value>) -> Option<std::time::SystemTime> {
    value.and_then(Value::as_str).and_then(time_of)
}

pub(crate) fn time_of(text: &str) -> Option<std::time::SystemTime> {
    humantime::parse_rfc3339_weak(text).ok()
}

/// `{"name": "value"}` (a list of values repeats the header) or `[{"name","value"}]`.
fn header_map(value: Option<&Value>) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, v) in map {
                match v {
                    Value::String(s) => out.push((name.clone(), s.clone())),
                    Value::Array(items) => out.extend(
                        items
                            .iter()
                            .filter_map(Value::as_str)
                            .map(|s| (name.clone(), s.to_string())),
                    ),
                    other => out.push((name.clone(), other.to_string())),
                }
            }
        }
        Some(Value::Array(items)) => {
            for item in items {
                let name = item
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or("a header needs a `name`")?;
                let value = item.get("value").and_then(Value::as_str).unwrap_or("");
                out.push((name.to_string(), value.to_string()));
            }
        }
        Some(_) => return Err("`headers` must be an object or a list of {name, value}".into()),
    }
    Ok(out)
}

fn body_of(v: &Value) -> Result<Option<Vec<u8>>, String> {
    match (v.get("body_text"), v.get("body")) {
        (Some(Value::String(s)), _) => Ok(Some(s.clone().into_bytes())),
        (Some(_), _) => Err("`body_text` must be a string".into()),
        (None, None) => Ok(None),
        (None, Some(body)) => Ok(Some(serde_json::to_vec(body).map_err(|e| e.to_string())?)),
    }
}

pub(crate) fn har_exchange(index: usize, entry: &Value) -> Result<Exchange, String> {
    let request = entry.get("request").ok_or("entry has no `request`")?;
    let method = request
        .get("method")
        .and_then(Value::as_str)
        .ok_or("request has no `method`")?
        .to_ascii_uppercase();
    let url = request
        .get("url")
        .and_then(Value::as_str)
        .ok_or("request has no `url`")?
        .to_string();
    let mut headers = header_map(request.get("headers"))?;
    let body = har_content(request.get("postData"), &mut headers)?;
    let response = match entry.get("response") {
        // HAR writes status 0 for a request that got no response.
        Some(r)
            if r.get("status")
                .and_then(Value::as_u64)
                .is_some_and(|s| s > 0) =>
        {
            let mut headers = header_map(r.get("headers"))?;
            let body = har_content(r.get("content"), &mut headers)?;
            let status = status_of(r).ok_or("bad status")?;
            Some(RecordedResponse {
                status,
                headers,
                body,
            })
        }
        _ => None,
    };
    let at = time(entry.get("startedDateTime"));
    Ok(Exchange {
        index,
        method,
        url,
        headers,
        body,
        response,
        at,
        body_unknown: false,
        credentials_unknown: false,
    })
}

/// HAR `postData`/`content`: `text`, base64 when `encoding` says so; its `mimeType` stands in
/// for a missing `Content-Type` header.
fn har_content(
    content: Option<&Value>,
    headers: &mut Vec<(String, String)>,
) -> Result<Option<Vec<u8>>, String> {
    let Some(content) = content else {
        return Ok(None);
    };
    let Some(text) = content.get("text").and_then(Value::as_str) else {
        return Ok(None);
    };
    if let Some(mime) = content.get("mimeType").and_then(Value::as_str)
        && !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        && !mime.is_empty()
    {
        headers.push(("content-type".into(), mime.into()));
    }
    match content.get("encoding").and_then(Value::as_str) {
        None | Some("") => Ok(Some(text.as_bytes().to_vec())),
        // Chrome and Firefox write binary and compressed bodies this way.
        Some("base64") => {
            use base64::Engine;
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(|e| format!("a base64 body that does not decode: {e}"))?;
            Ok(Some(decoded))
        }
        Some(other) => Err(format!(
            "a body in encoding `{other}`, which HAR does not define"
        )),
    }
}
