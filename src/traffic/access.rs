//! Access logs as traffic: the logs people already keep. A JSON line without our `url` is
//! read as nginx's JSON log (`request_method`, `request_uri` or `uri` and `args`, `status`,
//! `request_body`, `time_iso8601`; the field names of nginx's variables) or Envoy's JSON access
//! log (`method`, `path`, `response_code`, `start_time`). A line in the combined format of
//! nginx and Apache (`host ident user [time] "METHOD target HTTP/x" status bytes "referer"
//! "agent"`) is read by [`combined`]. A log carries no response body, and a request body only
//! where the operator logged one: where it says nothing of the body, body findings are left
//! out (`body_unknown`) instead of reading the body as absent.

use serde_json::Value;

use super::{Exchange, RecordedResponse, time};

/// An nginx or Envoy JSON log line as an exchange; `None` when the line is neither (it is then
/// read as our own JSON Lines, whose error says what is missing).
pub(crate) fn json_log(index: usize, line: &Value) -> Option<Result<Exchange, String>> {
    let text = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| line.get(*k).and_then(Value::as_str))
            .filter(|v| !v.is_empty() && *v != "-")
    };
    let method = text(&["request_method", "method"])?;
    let target = match (text(&["request_uri", "path"]), text(&["uri"])) {
        (Some(target), _) => target.to_string(),
        (None, Some(uri)) => match text(&["args"]) {
            Some(args) => format!("{uri}?{args}"),
            None => uri.to_string(),
        },
        (None, None) => {
            return Some(Err(
                "an access log line without `request_uri`, `uri` or `path`".into(),
            ));
        }
    };
    let status = ["status", "response_code"]
        .iter()
        .find_map(|k| match line.get(*k)? {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        });
    let body = text(&["request_body"]).map(|b| b.as_bytes().to_vec());
    let mut headers = Vec::new();
    if let Some(ct) = text(&["http_content_type", "content_type"]) {
        headers.push(("content-type".to_string(), ct.to_string()));
    }
    if let Some(agent) = text(&["http_user_agent", "user_agent"]) {
        headers.push(("user-agent".to_string(), agent.to_string()));
    }
    let at = ["time_iso8601", "start_time", "@timestamp"]
        .iter()
        .find_map(|k| time(line.get(*k)).or_else(|| utc_offset_time(line.get(*k)?)));
    Some(Ok(Exchange {
        index,
        method: method.to_ascii_uppercase(),
        url: target,
        headers,
        body_unknown: body.is_none(),
        credentials_unknown: true,
        body,
        response: status
            .and_then(|s| u16::try_from(s).ok())
            .map(|status| RecordedResponse {
                status,
                headers: Vec::new(),
                body: None,
            }),
        at,
    }))
}

/// nginx's `$time_iso8601` writes UTC as `+00:00`.
fn utc_offset_time(value: &Value) -> Option<std::time::SystemTime> {
    let t = value.as_str()?.strip_suffix("+00:00")?;
    humantime::parse_rfc3339_weak(&format!("{t}Z")).ok()
}

/// Whether `line` looks like the combined (or common) log format: `host ident user [time]
/// "request" status`.
pub(crate) fn is_combined(line: &[u8]) -> bool {
    std::str::from_utf8(line).is_ok_and(|l| combined(0, l).is_ok())
}

/// A combined-format line as an exchange: the request line and the status. Its time is left
/// unread (no body is logged, so the memory, the one reader of times, has nothing to keep).
pub(crate) fn combined(index: usize, line: &str) -> Result<Exchange, String> {
    let not = |what: &str| format!("not a combined-format line: {what}");
    let (_, rest) = line.split_once(" [").ok_or_else(|| not("no `[time]`"))?;
    let (_, rest) = rest
        .split_once("] \"")
        .ok_or_else(|| not("no quoted request"))?;
    let (request, rest) = rest
        .split_once("\" ")
        .ok_or_else(|| not("no status after the request"))?;
    let mut parts = request.split(' ');
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Err(not("the request is not `METHOD target HTTP/x`"));
    };
    let status: u16 = rest
        .split(' ')
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| not("no numeric status"))?;
    let agent = rest
        .rsplit_once(" \"")
        .map(|(_, a)| a.trim_end().trim_end_matches('"'));
    let headers = agent
        .filter(|a| !a.is_empty() && *a != "-")
        .map(|a| vec![("user-agent".to_string(), a.to_string())])
        .unwrap_or_default();
    Ok(Exchange {
        index,
        method: method.to_ascii_uppercase(),
        url: target.to_string(),
        headers,
        body: None,
        body_unknown: true,
        credentials_unknown: true,
        response: Some(RecordedResponse {
            status,
            headers: Vec::new(),
            body: None,
        }),
        at: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nginx_and_envoy_json_lines_and_combined_lines_become_exchanges() {
        let nginx = json!({"time_iso8601": "2026-12-03T17:52:49+00:00", "request_method": "PUT",
            "request_uri": "/api/v1/channels/7", "status": 200, "http_content_type": "application/json",
            "request_body": "{\"name\":\"x\"}"});
        let e = json_log(0, &nginx).unwrap().unwrap();
        assert_eq!(
            (e.method.as_str(), e.url.as_str(), e.body_unknown),
            ("PUT", "/api/v1/channels/7", false)
        );
        assert_eq!(e.response.unwrap().status, 200);
        assert!(e.at.is_some());
        let split = json!({"request_method": "GET", "uri": "/a", "args": "x=1", "status": "404", "request_body": ""});
        let e = json_log(1, &split).unwrap().unwrap();
        assert_eq!(
            (e.url.as_str(), e.body_unknown, e.response.unwrap().status),
            ("/a?x=1", true, 404)
        );
        let envoy = json!({"start_time": "2026-12-03T17:52:49.120Z", "method": "GET", "path": "/b?y=2",
            "response_code": 200, "protocol": "HTTP/1.1"});
        let e = json_log(2, &envoy).unwrap().unwrap();
        assert_eq!((e.method.as_str(), e.url.as_str()), ("GET", "/b?y=2"));
        assert!(json_log(3, &json!({"method": "GET"})).unwrap().is_err());
        assert!(
            json_log(4, &json!({"hello": 1})).is_none(),
            "neither: our own format's error"
        );

        let line = r#"127.0.0.1 - - [03/Dec/2026:17:52:49 +0000] "GET /api/v1/playouts?page_size=25 HTTP/1.1" 200 2 "-" "mcp-server/1.4""#;
        let e = combined(5, line).unwrap();
        assert_eq!(
            (e.method.as_str(), e.url.as_str()),
            ("GET", "/api/v1/playouts?page_size=25")
        );
        assert_eq!(
            e.headers,
            [("user-agent".to_string(), "mcp-server/1.4".to_string())]
        );
        assert_eq!(e.response.unwrap().status, 200);
        let common = r#"10.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "PUT /a HTTP/1.0" 204 -"#;
        assert_eq!(combined(6, common).unwrap().method, "PUT");
        for broken in [
            "GET /a",
            r#"h - - [t] "GET" 200 1"#,
            r#"h - - [t] "GET /a HTTP/1.1" ok 1"#,
        ] {
            assert!(combined(7, broken).is_err(), "{broken}");
        }
    }
}
