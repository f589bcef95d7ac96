//! The fast path for a line of our own JSON Lines: read straight into typed fields, bodies kept
//! as the line's own bytes (`RawValue`) instead of built into a `Value` and written out again.
//! Half of `check`'s reading went there. A line this path does not take as it is (no `url`,
//! an access log, a field of an odd type, a key written twice) is read again by the general
//! path, which says what is wrong with it: both give the same exchange for every line the fast
//! path takes.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Exchange, RecordedResponse, header_map, time_of};

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    url: Cow<'a, str>,
    #[serde(default)]
    headers: Option<Value>,
    #[serde(borrow, default, deserialize_with = "raw")]
    body: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    body_text: Option<&'a RawValue>,
    #[serde(borrow, default)]
    response: Option<Response<'a>>,
    #[serde(borrow, default)]
    time: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Response<'a> {
    status: u16,
    #[serde(default)]
    headers: Option<Value>,
    #[serde(borrow, default, deserialize_with = "raw")]
    body: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    body_text: Option<&'a RawValue>,
}

/// A body as written, `null` included (an `Option` would read `null` as absent).
fn raw<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// The exchange, or `None` for a line the general path must read.
pub(super) fn exchange(index: usize, line: &[u8]) -> Option<Exchange> {
    let line: Line = serde_json::from_slice(line).ok()?;
    let request_body = body(line.body, line.body_text)?;
    let response = match line.response {
        None => None,
        Some(r) => {
            let mut headers = header_map(r.headers.as_ref()).ok()?;
            // A response body recorded as JSON is JSON, whether or not its headers were kept.
            if r.body.is_some()
                && r.body_text.is_none()
                && !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            {
                headers.push(("content-type".into(), "application/json".into()));
            }
            Some(RecordedResponse {
                status: r.status,
                headers,
                body: body(r.body, r.body_text)?,
            })
        }
    };
    Some(Exchange {
        index,
        method: line.method.to_ascii_uppercase(),
        url: line.url.into_owned(),
        headers: header_map(line.headers.as_ref()).ok()?,
        body: request_body,
        response,
        at: line.time.as_deref().and_then(time_of),
        body_unknown: false,
        credentials_unknown: line.headers.is_none(),
    })
}

/// `body_text` as its bytes, else `body` as written; `Some(None)` for neither; `None` for a
/// `body_text` that is no string (an error the general path names).
fn body(body: Option<&RawValue>, text: Option<&RawValue>) -> Option<Option<Vec<u8>>> {
    match (text, body) {
        (Some(text), _) => serde_json::from_str::<String>(text.get())
            .ok()
            .map(|t| Some(t.into_bytes())),
        (None, None) => Some(None),
        (None, Some(raw)) => Some(Some(raw.get().as_bytes().to_vec())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exchange with its bodies parsed, so that `{"a": 1}` as written and `{"a":1}` as
    /// written again compare equal.
    fn normalized(mut e: Exchange) -> (Exchange, Vec<Option<Value>>) {
        let parse = |b: &mut Option<Vec<u8>>| {
            b.take()
                .map(|b| serde_json::from_slice(&b).unwrap_or(Value::String(format!("{b:?}"))))
        };
        let mut bodies = vec![parse(&mut e.body)];
        if let Some(r) = e.response.as_mut() {
            bodies.push(parse(&mut r.body));
        }
        (e, bodies)
    }

    #[test]
    fn the_fast_path_gives_what_the_general_path_gives_or_leaves_the_line_to_it() {
        let lines = [
            r#"{"method":"put","url":"/a/1","headers":{"content-type":"application/json"},"body":{"a": [1, 2.5, "\u00e9"]},"time":"2026-12-03T10:00:00Z"}"#,
            r#"{"method":"GET","url":"/a/1","response":{"status":200,"body":{"id":1}}}"#,
            r#"{"method":"GET","url":"/a/1","response":{"status":200,"headers":[{"name":"Content-Type","value":"text/plain"}],"body_text":"hi\n"}}"#,
            r#"{"method":"POST","url":"/a","body":null}"#,
            r#"{"method":"POST","url":"/a","body_text":"x=1&y=\"2\""}"#,
            r#"{"method":"POST","url":"/a","body_text":null}"#,
            r#"{"method":"GET","url":"/a","response":null,"time":null}"#,
            r#"{"method":"GET","url":"/a","time":"yesterday","x":{"y":[1]}}"#,
            r#"{"method":"GET","url":"/a","headers":{"a":["1","2"],"b":3}}"#,
            r#"{"method":"GET","url":"/a","headers":"nope"}"#,
            r#"{"method":"GET","url":"/a","response":{"status":70000}}"#,
            r#"{"method":"GET","url":"/a","response":{"status":"200"}}"#,
            r#"{"method":"GET","url":"/a","url":"/b"}"#,
            r#"{"method":"GET","url":7}"#,
            r#"{"request_method":"GET","request_uri":"/a?b=1","status":200}"#,
            r#"[1,2]"#,
        ];
        let mut taken = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let general = serde_json::from_str::<Value>(line)
                .map_err(|e| e.to_string())
                .and_then(|v| crate::traffic::jsonl_exchange(i, &v));
            if let Some(fast) = exchange(i, line.as_bytes()) {
                taken.push(i);
                let general = general.unwrap_or_else(|e| panic!("{line}: {e}"));
                assert_eq!(normalized(fast), normalized(general), "{line}");
            }
        }
        assert_eq!(taken, [0, 1, 2, 3, 4, 6, 7, 8], "lines the fast path took");
    }
}
