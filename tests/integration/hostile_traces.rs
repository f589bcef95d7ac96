//! Traces against hostile peers and an unlucky operator (issue 64), read by a collector that
//! decodes each export with the official OTLP messages (`opentelemetry-proto`): whatever a peer
//! sets in a span (a request id, a tool, a method, a JSON-RPC id, a protocol version) reaches
//! the collector cut to 256 bytes at a character's boundary, the span marked
//! `driftwatch.truncated`; the export queue holds bytes, not only spans, and what it drops is
//! counted; and an export endpoint that is the sidecar's own listener is refused at start and
//! by `serve --check`, naming the key.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;

use super::sidecar::{config, raw, sample, scrape, start};
use super::upstream::{self, Upstream};
use super::util::{eventually, example, free_addr};

/// The bound on a value a peer sets, as on a metric label's.
const BOUND: usize = 256;

/// Every span the collector was sent, and the bytes of each export.
pub fn exported(collector: &Upstream) -> (Vec<Span>, Vec<usize>) {
    let bodies: Vec<Vec<u8>> = (collector.recorded().into_iter())
        .filter(|r| r.method == "POST" && r.target == "/v1/traces")
        .map(|r| r.body)
        .collect();
    let spans = (bodies.iter())
        .flat_map(|b| {
            ExportTraceServiceRequest::decode(b.as_slice())
                .unwrap()
                .resource_spans
        })
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect();
    (spans, bodies.iter().map(Vec::len).collect())
}

pub fn text<'s>(span: &'s Span, key: &str) -> Option<&'s str> {
    span.attributes.iter().find(|a| a.key == key).and_then(|a| {
        match a.value.as_ref()?.value.as_ref()? {
            Any::StringValue(s) => Some(s.as_str()),
            _ => None,
        }
    })
}

/// The first 40 bytes of `text`, for a message.
fn short(text: &str) -> &str {
    &text[..text.floor_char_boundary(40)]
}

fn truncated(span: &Span) -> bool {
    let marked = span
        .attributes
        .iter()
        .find(|a| a.key == "driftwatch.truncated");
    matches!(
        marked.and_then(|a| a.value.as_ref()?.value.as_ref()),
        Some(Any::BoolValue(true))
    )
}

/// `got` is `sent` cut to the bound at a character's boundary: the longest prefix of at most
/// 256 bytes that ends where a character does.
fn cut_from(got: Option<&str>, sent: &str) -> Result<(), String> {
    let got = got.ok_or("absent")?;
    let expected = &sent[..sent.floor_char_boundary(BOUND)];
    match got == expected {
        true => Ok(()),
        false => Err(format!("{} bytes, {:?}...", got.len(), short(got))),
    }
}

/// Nothing in a span is longer than the bound: its name, each attribute's text, each event's,
/// its status. Every breach, listed.
fn nothing_past_the_bound(span: &Span, wrong: &mut Vec<String>) {
    let name = short(&span.name);
    if span.name.len() > BOUND {
        wrong.push(format!("{name}: its name is {} bytes", span.name.len()));
    }
    let attributes = (span.attributes.iter()).chain(span.events.iter().flat_map(|e| &e.attributes));
    for a in attributes {
        if let Some(Any::StringValue(s)) = a.value.as_ref().and_then(|v| v.value.as_ref())
            && s.len() > BOUND
        {
            wrong.push(format!("{name}: {} is {} bytes", a.key, s.len()));
        }
    }
    if let Some(status) = &span.status
        && status.message.len() > BOUND
    {
        wrong.push(format!("{name}: status {} bytes", status.message.len()));
    }
}

/// Through the reverse proxy: a 60 KB `x-request-id` and `x-mcp-tool` and a 1 KB method, each
/// in the request's span cut to 256 bytes, the span marked; the export a few KB, not the
/// 240 KB a span it was (issue 64: +384 MB over 1,500 requests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peers_request_id_tool_and_method_reach_the_span_cut_and_marked() {
    let api = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let collector = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let running = start(config(&format!("http://{}", api.addr), |c| {
        c.telemetry.endpoint = Some(format!("http://{}", collector.addr));
        c.telemetry.export_interval_ms = 10;
    }))
    .await;
    let id = format!("id-{}", "r".repeat(60_000));
    let tool = format!("tool-{}", "t".repeat(60_000));
    let method = "M".repeat(1_000);
    let request = |method: &str| {
        format!(
            "{method} /api/v1/channels/7 HTTP/1.1\r\nhost: a\r\nx-request-id: {id}\r\n\
             x-mcp-tool: {tool}\r\nconnection: close\r\n\r\n"
        )
    };
    assert_eq!(
        raw(running.addr, request("GET").as_bytes()).await.status,
        200
    );
    raw(running.addr, request(&method).as_bytes()).await;
    let (spans, bodies) = eventually("both requests' spans exported", || async {
        let (spans, bodies) = exported(&collector);
        (spans.len() >= 2).then_some((spans, bodies))
    })
    .await;
    let mut wrong = Vec::new();
    for span in &spans {
        nothing_past_the_bound(span, &mut wrong);
        for (key, sent) in [("driftwatch.request_id", &id), ("driftwatch.tool", &tool)] {
            if let Err(e) = cut_from(text(span, key), sent) {
                wrong.push(format!("{}: {key}: {e}", short(&span.name)));
            }
        }
        if !truncated(span) {
            wrong.push(format!("{}: not marked", short(&span.name)));
        }
    }
    let odd = (spans.iter())
        .find(|s| s.name.starts_with("MMM"))
        .expect("the 1 KB method's");
    if let Err(e) = cut_from(Some(&odd.name), &method) {
        wrong.push(format!("the span's name: {e}"));
    }
    if let Err(e) = cut_from(text(odd, "http.request.method"), &method) {
        wrong.push(format!("http.request.method: {e}"));
    }
    let sent: usize = bodies.iter().sum();
    if sent > 16 << 10 {
        wrong.push(format!("{sent} bytes exported for two spans"));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A stdio MCP server that answers every request at once (`initialize`, `tools/list`, and a
/// `tools/call` with a text).
pub const SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    r = {"content": [{"type": "text", "text": "ok"}]}
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
             "serverInfo": {"name": "s", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "getChannel", "inputSchema": {"type": "object"}}]}
    # As it came: escaped, an id of 3 MB of `€` would be 6 MB, past the relay's bound.
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}, ensure_ascii=False),
          flush=True)
"#;

/// Under `wrap`: an `initialize` with a 3 MB `protocolVersion` and three calls with 3 MB ids,
/// of characters of two and three bytes, so that 256 falls inside one. Each call's span holds
/// both cut at a boundary and is marked; the exports are a few KB (issue 64: one export of 6 to
/// 9 MB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_wrap_a_calls_long_id_and_protocol_version_reach_its_span_cut_and_marked() {
    let collector = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let version = format!("v{}", "é".repeat(1_500_000));
    let ids: Vec<String> = (0..3)
        .map(|i| format!("{i}-{}", "€".repeat(1_000_000)))
        .collect();
    let (endpoint, admin) = (format!("http://{}", collector.addr), free_addr());
    let messages = {
        let mut m = vec![
            json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "c", "version": "1"}}}),
        ];
        m.push(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m.extend(ids.iter().map(|id| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "getChannel", "arguments": {"id": "7"}}})
        }));
        m
    };
    let mut wrap = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["wrap", "--spec"])
        .arg(example("channels.openapi.yaml"))
        .args(["--upstream", "http://127.0.0.1:9", "--admin-listen"])
        .arg(admin.to_string())
        .args(["--", "python3", "-c", SERVER])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("DRIFTWATCH_TELEMETRY_EXPORT_INTERVAL_MS", "50")
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (mut stdin, stdout) = (wrap.stdin.take().unwrap(), wrap.stdout.take().unwrap());
    // Four answers (the initialize and three calls), read off the runtime's workers.
    let answered = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout).lines();
        for m in &messages {
            writeln!(stdin, "{m}").unwrap();
            if m.get("id").is_some() {
                lines.next().unwrap().unwrap();
            }
        }
        stdin
    });
    let stdin = tokio::time::timeout(Duration::from_secs(60), answered)
        .await
        .expect("wrap answered the calls")
        .unwrap();
    let (spans, bodies) = eventually("the three calls' spans exported", || async {
        let (spans, bodies) = exported(&collector);
        let calls = spans
            .iter()
            .filter(|s| text(s, "mcp.method.name") == Some("tools/call"));
        (calls.count() >= 3).then_some((spans, bodies))
    })
    .await;
    drop(stdin);
    let _ = wrap.kill();
    let _ = wrap.wait();
    let mut wrong = Vec::new();
    let calls: Vec<&Span> = (spans.iter())
        .filter(|s| text(s, "mcp.method.name") == Some("tools/call"))
        .collect();
    for (span, id) in calls.iter().zip(&ids) {
        nothing_past_the_bound(span, &mut wrong);
        let got = text(span, "jsonrpc.request.id").unwrap();
        let sent = (ids.iter())
            .find(|i| i.starts_with(&got[..2]))
            .unwrap_or(id);
        if let Err(e) = cut_from(Some(got), sent) {
            wrong.push(format!("jsonrpc.request.id: {e}"));
        }
        if let Err(e) = cut_from(text(span, "mcp.protocol.version"), &version) {
            wrong.push(format!("mcp.protocol.version: {e}"));
        }
        if !truncated(span) {
            wrong.push(format!("{}: not marked", short(&span.name)));
        }
    }
    let sent: usize = bodies.iter().sum();
    if sent > 16 << 10 {
        wrong.push(format!("{sent} bytes exported for three call spans"));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A span at its largest is findings: a hundred events, each with a field of 256 bytes. With
/// the collector not answering, the queue fills by its bytes long before its 2,048 spans, and
/// what it drops is counted (issue 64: 1,888 MB, nothing counted as dropped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_collector_silent_the_queue_is_bounded_in_bytes_and_counts_its_drops() {
    let api = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let silent = upstream::start(upstream::ok(), Duration::from_secs(3600), None).await;
    let running = start(config(&format!("http://{}", api.addr), |c| {
        c.telemetry.endpoint = Some(format!("http://{}", silent.addr));
        c.telemetry.export_timeout_ms = 600_000;
    }))
    .await;
    let fields: serde_json::Map<String, serde_json::Value> = (0..100)
        .map(|i| (format!("{i:03}{}", "f".repeat(400)), json!(i)))
        .collect();
    let body = serde_json::to_string(&fields).unwrap();
    let put = format!(
        "PUT /api/v1/channels/7 HTTP/1.1\r\nhost: a\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    for _ in 0..600 {
        raw(running.addr, put.as_bytes()).await;
    }
    let dropped = sample(
        &scrape(running.admin).await,
        "driftwatch_trace_spans_total{outcome=\"dropped\"}",
    );
    assert!(
        dropped > 0.0,
        "600 spans of about 50 KB each queued whole, none dropped"
    );
}

/// `driftwatch serve` with `args`, `env` set.
fn serve(args: &[&str], env: &[(&str, String)]) -> std::process::Output {
    let mut serve = Command::new(env!("CARGO_BIN_EXE_driftwatch"));
    serve
        .arg("serve")
        .arg("--spec")
        .arg(example("channels.openapi.yaml"))
        .args(["--upstream", "http://127.0.0.1:9"])
        .args(args)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    for (name, value) in env {
        serve.env(name, value);
    }
    let mut child = serve
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Refused, it exits at once; were it to serve, the test must not wait for ever.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// An export endpoint that is the sidecar's own proxy or admin listener would send every
/// batch through the proxy to the API (issue 64: `POST /v1/traces` upstream, 44 extra requests
/// per 3,000). It is refused at start and by `serve --check`, naming the key and what set it;
/// a listener on 0.0.0.0 or [::] is the same as an endpoint on 127.0.0.1 or localhost there.
/// A collector elsewhere passes, and `--check` names it.
#[test]
fn an_export_endpoint_at_the_sidecars_own_listener_is_refused_at_start_and_by_check() {
    let (proxy, admin) = (free_addr(), free_addr());
    let listen = |ip: &str, at: SocketAddr| format!("{ip}:{}", at.port());
    let cases = [
        (
            "0.0.0.0",
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{}", proxy.port()),
            ),
            ["telemetry.endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "proxy"],
        ),
        (
            "[::]",
            (
                "DRIFTWATCH_TELEMETRY_TRACES_ENDPOINT",
                format!("http://localhost:{}/v1/traces", admin.port()),
            ),
            [
                "telemetry.traces_endpoint",
                "DRIFTWATCH_TELEMETRY_TRACES_ENDPOINT",
                "admin",
            ],
        ),
        (
            "127.0.0.1",
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                format!("http://[::ffff:127.0.0.1]:{}/v1/traces", proxy.port()),
            ),
            [
                "telemetry.traces_endpoint",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "proxy",
            ],
        ),
    ];
    let mut wrong = Vec::new();
    for (ip, (var, url), words) in &cases {
        let (p, a) = (listen(ip, proxy), listen(ip, admin));
        for check in [true, false] {
            let mut args = vec!["--listen", &p, "--admin-listen", &a];
            if check {
                args.push("--check");
            }
            let out = serve(&args, &[(var, url.clone())]);
            let said = String::from_utf8_lossy(&out.stderr);
            if out.status.code() != Some(2) || words.iter().any(|w| !said.contains(w)) {
                wrong.push(format!(
                    "{ip} {var}={url} check={check}: {:?} {said}",
                    out.status
                ));
            }
        }
    }
    let elsewhere = (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "http://127.0.0.1:4318".to_string(),
    );
    let (p, a) = (listen("0.0.0.0", proxy), listen("0.0.0.0", admin));
    let out = serve(
        &["--listen", &p, "--admin-listen", &a, "--check"],
        &[elsewhere],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !said.contains("traces    http://127.0.0.1:4318/v1/traces") {
        wrong.push(format!("a collector elsewhere: {:?} {said}", out.status));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
