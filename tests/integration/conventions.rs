//! The OpenTelemetry semantic conventions for HTTP client spans and for MCP, and trace context
//! passed on (issue 65), as a collector decoding each export with the official OTLP messages
//! (`opentelemetry-proto`) reads them: `url.full` with its query values redacted, 4xx and 5xx
//! answers errors on a client span, no status where the API never answered, no client span for
//! what driftwatch refused itself; under `wrap` a span for every MCP request and notification,
//! a JSON-RPC error's message as its status, `gen_ai.tool.name` only on `tools/call` spans,
//! and the `traceparent` relayed to an instrumented server (or an API) driftwatch's own.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode as Status;
use serde_json::{Value, json};

use super::hostile_traces::{exported, text};
use super::sidecar::{config, raw, start};
use super::upstream::{self, Upstream};
use super::util::{eventually, example, free_addr};

const SERVER: i32 = 2;
const CLIENT: i32 = 3;

fn has(span: &Span, key: &str) -> bool {
    span.attributes.iter().any(|a| a.key == key)
}

fn int(span: &Span, key: &str) -> Option<i64> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    let a = span.attributes.iter().find(|a| a.key == key)?;
    match a.value.as_ref()?.value.as_ref()? {
        Any::IntValue(i) => Some(*i),
        _ => None,
    }
}

fn status(span: &Span) -> (i32, &str) {
    let s = span.status.as_ref();
    (
        s.map_or(0, |s| s.code),
        s.map_or("", |s| s.message.as_str()),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn traceparent(span: &Span) -> String {
    format!("00-{}-{}-01", hex(&span.trace_id), hex(&span.span_id))
}

/// The spans exported once `count` of them carry a `driftwatch.request_id` in `ids`.
async fn by_request_id(collector: &Upstream, ids: &[&str]) -> Vec<Span> {
    eventually("the requests' spans exported", || async {
        let (spans, _) = exported(collector);
        let found = ids
            .iter()
            .all(|id| (spans.iter()).any(|s| text(s, "driftwatch.request_id") == Some(*id)));
        found.then_some(spans)
    })
    .await
}

fn of<'s>(spans: &'s [Span], id: &str) -> Vec<&'s Span> {
    (spans.iter())
        .filter(|s| text(s, "driftwatch.request_id") == Some(id))
        .collect()
}

fn get(path: &str, id: &str, extra: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nhost: a\r\nx-request-id: {id}\r\n{extra}connection: close\r\n\r\n"
    )
    .into_bytes()
}

/// `url.full` names the API's URL, every path value `*` and query value `REDACTED`; a 404 is an error on the
/// client span, `error.type` "404"; an upstream that never answered leaves no status code,
/// `error.type` says why and the span is an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_spans_url_is_redacted_and_4xx_and_no_answer_are_errors() {
    let api = upstream::start(
        std::sync::Arc::new(|r: &upstream::Recorded| match r.target.contains("/404") {
            true => (404, "{}".into()),
            false => (200, "{}".into()),
        }),
        Duration::ZERO,
        None,
    )
    .await;
    let collector = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let traced = |upstream: String| {
        config(&upstream, |c| {
            c.telemetry.endpoint = Some(format!("http://{}", collector.addr));
            c.telemetry.export_interval_ms = 10;
        })
    };
    let running = start(traced(format!("http://{}", api.addr))).await;
    let path = "/api/v1/channels/7?token=s3cret&limit=5&flag";
    assert_eq!(raw(running.addr, &get(path, "ok", "")).await.status, 200);
    let missing = get("/api/v1/channels/404", "missing", "");
    assert_eq!(raw(running.addr, &missing).await.status, 404);
    let two_hosts = get("/api/v1/channels/7", "two-hosts", "host: b\r\n");
    assert_eq!(raw(running.addr, &two_hosts).await.status, 400);
    let closed = start(traced(format!("http://{}", free_addr()))).await;
    let refused = get("/api/v1/channels/7", "closed", "");
    assert_eq!(raw(closed.addr, &refused).await.status, 502);
    let spans = by_request_id(&collector, &["ok", "missing", "closed", "two-hosts"]).await;
    let mut wrong = Vec::new();
    let (ok, missing, closed) = (
        of(&spans, "ok")[0],
        of(&spans, "missing")[0],
        of(&spans, "closed")[0],
    );
    // The path's values as the event shows them (`*`), without `events.log_values`.
    let url = format!(
        "http://{}/api/v1/channels/*?token=REDACTED&limit=REDACTED&REDACTED",
        api.addr
    );
    if text(ok, "url.full") != Some(url.as_str()) || status(ok).0 != 0 || has(ok, "error.type") {
        wrong.push(format!("200: {:?} {:?}", text(ok, "url.full"), ok.status));
    }
    let missing_seen = (missing.kind, status(missing).0, text(missing, "error.type"));
    if missing_seen != (CLIENT, Status::Error as i32, Some("404")) {
        wrong.push(format!("404: {missing_seen:?}"));
    }
    let closed_seen = (
        closed.kind,
        int(closed, "http.response.status_code"),
        text(closed, "error.type"),
        status(closed).0,
    );
    if closed_seen
        != (
            CLIENT,
            None,
            Some("connection_refused"),
            Status::Error as i32,
        )
    {
        wrong.push(format!("closed port: {closed_seen:?}"));
    }
    // Never forwarded (the client's fault): driftwatch's server span, not a client span.
    let bad = of(&spans, "two-hosts")[0];
    let bad_seen = (
        bad.kind,
        int(bad, "http.response.status_code"),
        status(bad).0,
    );
    if bad_seen != (SERVER, Some(400), Status::Error as i32) || has(bad, "url.full") {
        wrong.push(format!("two hosts: {bad_seen:?}"));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A write driftwatch refused in enforce mode never reached the API: no client span; its span
/// is driftwatch's server span, with a `driftwatch.refused` event and an error saying why.
/// The read driftwatch made before it did reach the API: a client span, its child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_is_an_error_on_drifwatchs_server_span_not_a_client_span() {
    let collector = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let api = super::silent_clears::demo_api().await;
    let running = start(config(&format!("http://{api}"), |c| {
        c.proxy.mode = driftwatch::policy::Mode::Enforce;
        c.telemetry.endpoint = Some(format!("http://{}", collector.addr));
        c.telemetry.export_interval_ms = 10;
    }))
    .await;
    let seed = Value::Object(driftwatch::demo::api::seed());
    let stale = super::silent_clears::stale_body(&seed);
    let put = super::silent_clears::put("/api/v1/channels/7", "Bearer a", "p1", &stale);
    assert_eq!(raw(running.addr, &put).await.status, 409);
    let spans = by_request_id(&collector, &["p1"]).await;
    let write = of(&spans, "p1");
    assert_eq!(write.len(), 1, "{write:#?}");
    let write = write[0];
    let mut wrong = Vec::new();
    if write.kind != SERVER {
        wrong.push(format!("kind {}", write.kind));
    }
    let (code, why) = status(write);
    if code != Status::Error as i32 || !why.starts_with("refused by driftwatch: silent_clear") {
        wrong.push(format!("status {code} {why:?}"));
    }
    let event = (write.events.iter()).find(|e| e.name == "driftwatch.refused");
    if event.is_none() {
        wrong.push("no driftwatch.refused event".into());
    }
    if has(write, "url.full") {
        wrong.push("url.full on a request never sent".into());
    }
    let reads: Vec<&Span> = (spans.iter())
        .filter(|s| text(s, "driftwatch.read_for") == Some("p1"))
        .collect();
    match reads.as_slice() {
        [read] if read.kind == CLIENT && read.parent_span_id == write.span_id => {}
        other => wrong.push(format!("the read: {other:#?}")),
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A `traceparent` that cannot be read starts a new trace, and the API gets that trace's
/// span as its `traceparent`, the `tracestate` that came with it left out: its spans join
/// driftwatch's trace instead of one nobody has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_traceparent_is_replaced_by_driftwatchs_span() {
    let api = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let collector = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let running = start(config(&format!("http://{}", api.addr), |c| {
        c.telemetry.endpoint = Some(format!("http://{}", collector.addr));
        c.telemetry.export_interval_ms = 10;
    }))
    .await;
    let junk = "traceparent: 00-zz-00f067aa0ba902b7-01\r\ntracestate: a=1\r\n";
    let request = get("/api/v1/channels/7", "junk", junk);
    assert_eq!(raw(running.addr, &request).await.status, 200);
    let spans = by_request_id(&collector, &["junk"]).await;
    let span = of(&spans, "junk")[0];
    let got = &api.recorded()[0];
    assert_eq!(got.header("traceparent"), Some(traceparent(span).as_str()));
    assert_eq!(got.header("tracestate"), None);
    assert!(span.parent_span_id.is_empty(), "a root");
}

/// A stdio MCP server that writes every line it gets, as it got it, to the file it is given;
/// `getChannel` reads a channel through the sidecar, `locked` answers a JSON-RPC error.
const MCP_SERVER: &str = r#"
import json, os, sys, urllib.request
log = open(sys.argv[1], "ab")
for line in sys.stdin.buffer:
    log.write(line); log.flush()
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    r = {"content": [{"type": "text", "text": "ok"}]}
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
             "serverInfo": {"name": "s", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "getChannel", "inputSchema": {"type": "object"}}]}
    elif m["params"].get("name") == "locked":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"],
                          "error": {"code": -32001, "message": "the channel is locked"}}), flush=True)
        continue
    elif m["params"].get("name") == "getChannel":
        urllib.request.urlopen(os.environ["BASE"] + "/api/v1/channels/7").read()
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;

/// The agent's own span, as an instrumented client puts it in `params._meta`.
const AGENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Under `wrap` over stdio: every request and notification the relay passes is a span named
/// for its method (`initialize`, `tools/list`, `notifications/initialized`); a JSON-RPC
/// error's message is its span's status; `gen_ai.tool.name` is on `tools/call` spans only,
/// never empty; and the server gets the call with `params._meta.traceparent` naming
/// driftwatch's `tools/call` span, the rest of the line byte for byte as the client sent it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_wrap_every_request_is_a_span_and_the_server_is_told_driftwatchs() {
    let api = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let collector = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let log = std::env::temp_dir().join(format!("driftwatch-conv-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let call = format!(
        "{{\"jsonrpc\":\"2.0\", \"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\
         \"getChannel\",\"_meta\":{{ \"progressToken\" : 1.0e1,\"traceparent\":\"{AGENT}\"}},\
         \"arguments\":{{\"id\":\"caf\\u00e9\"}}}}}}"
    );
    let messages = [
        json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "c", "version": "1"}}})
        .to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list"}).to_string(),
        call.clone(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "locked", "arguments": {}}})
        .to_string(),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {}}).to_string(),
    ];
    let mut wrap = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["wrap", "--spec"])
        .arg(example("channels.openapi.yaml"))
        .args(["--upstream", &format!("http://{}", api.addr)])
        .args([
            "--admin-listen",
            &free_addr().to_string(),
            "--env",
            "BASE={url}",
        ])
        .args(["--", "python3", "-c", MCP_SERVER])
        .arg(&log)
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://{}", collector.addr),
        )
        .env("DRIFTWATCH_TELEMETRY_EXPORT_INTERVAL_MS", "20")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (mut stdin, stdout) = (wrap.stdin.take().unwrap(), wrap.stdout.take().unwrap());
    let sent = messages.clone();
    let answered = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout).lines();
        for m in &sent {
            writeln!(stdin, "{m}").unwrap();
            if m.contains("\"id\"") {
                lines.next().unwrap().unwrap();
            }
        }
        stdin
    });
    let stdin = tokio::time::timeout(Duration::from_secs(60), answered)
        .await
        .expect("wrap answered every request")
        .unwrap();
    let spans = eventually("every request's span and the API request's", || async {
        let (spans, _) = exported(&collector);
        let methods = spans.iter().filter(|s| has(s, "mcp.method.name")).count();
        (methods >= 6 && spans.iter().any(|s| s.kind == CLIENT)).then_some(spans)
    })
    .await;
    drop(stdin);
    let _ = wrap.kill();
    let _ = wrap.wait();
    let mut wrong = Vec::new();
    let method = |name: &str| (spans.iter()).find(|s| text(s, "mcp.method.name") == Some(name));
    for (name, id) in [("initialize", Some("init")), ("tools/list", Some("l"))] {
        match method(name) {
            Some(s)
                if s.name == name && s.kind == SERVER && text(s, "jsonrpc.request.id") == id =>
            {
                if text(s, "mcp.protocol.version") != Some("2025-06-18") {
                    wrong.push(format!("{name}: no mcp.protocol.version"));
                }
            }
            other => wrong.push(format!("{name}: {other:#?}")),
        }
    }
    match method("notifications/initialized") {
        Some(s) if !has(s, "jsonrpc.request.id") => {}
        other => wrong.push(format!("the notification: {other:#?}")),
    }
    let called = |tool: &str| {
        (spans.iter()).find(|s| s.name == format!("tools/call {tool}") && s.kind == SERVER)
    };
    match called("locked") {
        Some(s)
            if status(s) == (Status::Error as i32, "the channel is locked")
                && text(s, "error.type") == Some("-32001")
                && text(s, "rpc.response.status_code") == Some("-32001") => {}
        other => wrong.push(format!("the JSON-RPC error: {other:#?}")),
    }
    match (spans.iter()).find(|s| s.name == "tools/call") {
        Some(s) if !has(s, "gen_ai.tool.name") && s.kind == SERVER => {}
        other => wrong.push(format!("the call without a name: {other:#?}")),
    }
    for s in spans
        .iter()
        .filter(|s| s.kind == CLIENT || !has(s, "mcp.method.name"))
    {
        if has(s, "gen_ai.tool.name") {
            wrong.push(format!("{}: gen_ai.tool.name on a request span", s.name));
        }
    }
    let Some(get_channel) = called("getChannel") else {
        panic!("no tools/call getChannel span: {spans:#?}");
    };
    if hex(&get_channel.parent_span_id) != "00f067aa0ba902b7" {
        wrong.push("the call is not the agent's span's child".into());
    }
    let request = spans.iter().find(|s| s.kind == CLIENT).unwrap();
    if request.parent_span_id != get_channel.span_id
        || text(request, "driftwatch.tool") != Some("getChannel")
    {
        wrong.push(format!("the API request: {request:#?}"));
    }
    let got = std::fs::read_to_string(&log).unwrap();
    let relayed = got.lines().find(|l| l.contains("getChannel")).unwrap_or("");
    let expected = call.replace(AGENT, &traceparent(get_channel));
    if relayed != expected {
        wrong.push(format!("the server got\n{relayed}\nnot\n{expected}"));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
