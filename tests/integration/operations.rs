//! What an operator and an incident responder see: the admin endpoints, the audit event log
//! (no secrets, no values), and the optional `driftwatch-findings` response header.

use std::time::Duration;

use serde_json::Value;

use super::kinds::channel_without;
use super::sidecar::{admin_get, config, raw, start};
use super::upstream::{self, ok};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_endpoints() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    // The upstream answers `{"ok":true}` to everything: its bodies are not audited here, so
    // that the events are the requests' (responses.rs covers the response audit).
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.audit.response_sample_rate = 0.0
    }))
    .await;
    assert_eq!(admin_get(dw.admin, "/healthz").await.status, 200);
    assert_eq!(admin_get(dw.admin, "/readyz").await.status, 200);
    let spec = admin_get(dw.admin, "/spec").await.json();
    assert_eq!(
        (
            spec["openapi"].as_str(),
            spec["operations"].as_u64(),
            spec["mode"].as_str()
        ),
        (Some("3.1.0"), Some(10), Some("observe"))
    );
    assert_eq!(spec["revision"].as_str().unwrap().len(), 12);
    raw(
        dw.addr,
        b"GET /api/v1/playouts?page_size=1 HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await;
    raw(
        dw.addr,
        b"GET /api/v1/playouts/1/items?showFiller=maybe HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await;
    raw(
        dw.addr,
        b"GET /api/v1/channels/1 HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await;
    let all = admin_get(dw.admin, "/findings").await.json();
    let ops = super::util::strings(&all["events"], "operation");
    assert_eq!(
        ops,
        ["getPlayoutItems", "listPlayouts"],
        "newest first, clean requests have no event"
    );
    let by_kind = admin_get(dw.admin, "/findings?kind=param_type_mismatch")
        .await
        .json();
    assert_eq!(by_kind["events"].as_array().unwrap().len(), 1);
    let by_op = admin_get(dw.admin, "/findings?operation=listPlayouts&limit=5")
        .await
        .json();
    assert_eq!(by_op["events"][0]["findings"][0]["field"], "page_size");
    let future = admin_get(dw.admin, "/findings?since=2999-01-01T00:00:00Z")
        .await
        .json();
    assert_eq!(future["events"].as_array().unwrap().len(), 0);
    assert_eq!(
        admin_get(dw.admin, "/findings?colour=red").await.status,
        400
    );
    assert_eq!(admin_get(dw.admin, "/nope").await.status, 404);
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_name_request_tool_operation_and_field_and_never_secrets_or_values() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let log = std::env::temp_dir().join(format!("driftwatch-events-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let path = log.display().to_string();
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.events.output = path
    }))
    .await;
    let mut body = channel_without("graphicsElementIds");
    body["ffmpegProfileId"] = Value::String("SECRET-VALUE-1".into());
    let body = body.to_string();
    let request = format!(
        "PUT /api/v1/channels/7?token=SECRET-VALUE-2 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer SECRET-VALUE-3\r\ncookie: s=SECRET-VALUE-4\r\nx-mcp-tool: update_channel\r\nx-request-id: rid-42\r\ntraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    raw(dw.addr, request.as_bytes()).await;
    dw.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("SECRET-VALUE"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    // One event for the request, one for the response (`{"ok":true}` is no channel).
    assert_eq!(lines.len(), 2, "{text}");
    let event: Value = serde_json::from_str(lines[0]).unwrap();
    let answer: Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(
        (&answer["request_id"], &answer["tool"], &answer["action"]),
        (
            &"rid-42".into(),
            &"update_channel".into(),
            &"observed".into()
        )
    );
    let blames = |e: &Value| -> Vec<String> {
        e["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["blame"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(blames(&event).iter().all(|b| b == "client"), "{event}");
    assert!(blames(&answer).iter().all(|b| b == "server"), "{answer}");
    assert!(
        answer["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "undeclared_response_field" && f["field"] == "/ok"),
        "{answer}"
    );
    assert_eq!(event["request_id"], "rid-42");
    assert_eq!(event["tool"], "update_channel");
    assert_eq!(
        event["traceparent"],
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    );
    assert_eq!(event["operation"], "updateChannel");
    assert_eq!(event["path_template"], "/api/v1/channels/{id}");
    assert_eq!(
        event["path"], "/api/v1/channels/*",
        "its values stay out (log_values)"
    );
    assert_eq!(event["status"], 200);
    assert_eq!(event["action"], "forwarded");
    assert!(event["timestamp"].as_str().unwrap().ends_with('Z'));
    let found: Vec<(&str, &str)> = event["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap(), f["field"].as_str().unwrap()))
        .collect();
    assert_eq!(
        found,
        [
            ("unknown_query_param", "token"),
            ("body_type_mismatch", "/ffmpegProfileId"),
            ("omitted_on_replace", "/graphicsElementIds")
        ]
    );
    assert!(event.get("values").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_values_shows_values_but_still_never_secret_headers() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let log = std::env::temp_dir().join(format!("driftwatch-values-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let path = log.display().to_string();
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.events.output = path;
        c.events.log_values = true;
        c.events.secret_headers = vec!["X-Api-Key".into()];
    }))
    .await;
    raw(dw.addr, b"GET /api/v1/playouts?page_size=7 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer SECRET-A\r\nx-api-key: SECRET-B\r\nx-visible: shown\r\n\r\n").await;
    dw.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("SECRET-"), "{text}");
    let event: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(event["values"]["query"], "page_size=7");
    assert_eq!(event["values"]["headers"]["x-visible"], "shown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_header_tells_the_mcp_server_what_drifted() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let with = start(config(&format!("http://{}", up.addr), |c| {
        c.proxy.report_header = true
    }))
    .await;
    let resp = raw(
        with.addr,
        b"GET /api/v1/playouts?page_size=7 HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await;
    assert_eq!(
        resp.header("driftwatch-findings"),
        Some("unknown_query_param:page_size")
    );
    let clean = raw(
        with.addr,
        b"GET /api/v1/playouts?pageSize=7 HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await;
    assert_eq!(clean.header("driftwatch-findings"), None);
    let without = start(config(&format!("http://{}", up.addr), |_| {})).await;
    let resp = raw(
        without.addr,
        b"GET /api/v1/playouts?page_size=7 HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await;
    assert_eq!(
        resp.header("driftwatch-findings"),
        None,
        "off by default: responses pass unchanged"
    );
}
