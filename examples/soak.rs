//! Soak: the realistic mix through the release binary for a while, with faults injected, on
//! loopback only, checking that no valid request was lost or altered and that RSS stays flat.
//!
//! The upstream is in this process: it answers as the Channels spec declares and records a
//! digest of every request it receives (method, target, body, and the headers the client set)
//! by its `x-request-id`, so each request the client sent is compared with what arrived.
//! Faults, one every `FAULT_EVERY`, in turn: the upstream restarts (its listener closed for a
//! second), the upstream resets one connection mid-answer, the spec file changes and is
//! reloaded (two revisions alternating, every third broken), 50 slowloris connections, and an
//! oversized (2 MiB) body, which streams through unaudited and must arrive intact.
//! A request that failed while an upstream fault was open counts as `during_upstream_fault`,
//! not lost: the sidecar answered 502 for an upstream that was not there, as it must.
//!
//! With `--mcp-redis` the sidecar shares its memory through a `redis-server` of its own (killed
//! and started again as a fifth fault), and `driftwatch mcp` runs beside it on the same store:
//! two MCP clients open a session, call two tools, and delete it, over and over, and every
//! 50th round one also sends a 3.6 MB message of empty arrays, which must be refused (413).
//! Each process's RSS, descriptors and threads are sampled at every fault and their slopes
//! printed.
//!
//! With `--wrap-forward`, `driftwatch wrap` runs too, in forward mode with its MCP front, around
//! an MCP server of the soak's own that answers each tool call by calling the API through a
//! `CONNECT` tunnel (`parts/soak_wrap.rs`): two clients call tools over and over, each API
//! request is compared with what the upstream received, and wrap's RSS, descriptors and
//! threads are sampled like the others'.
//!
//! With `--traces`, the sidecar exports its spans (`OTEL_EXPORTER_OTLP_ENDPOINT`) to an
//! OTLP/HTTP collector in this process that answers for 20 s, then stalls for 20 s, in turn
//! (it takes the batch and never answers, reading it or not, until the phase ends, then drops
//! the connection), and counts the spans of the batches it answered. Every request carries
//! what a peer can set at far past its bound: a 60 KB `x-request-id` and `x-mcp-tool`, unique
//! by a counter prefix, and a `traceparent` with a 5,759-byte `tracestate` (32 members, W3C's
//! most, every other one past 128 bytes), all compared upstream with what was sent. The
//! collector decodes every span with the official OTLP messages: no text past 256 bytes, each
//! span marked `driftwatch.truncated`, its request id and tool the first 256 bytes of what was
//! sent, its tracestate within 512 bytes (W3C's floor, the sidecar's bound). At the end it
//! answers again until the sidecar's queue is empty, and the sidecar's
//! `driftwatch_trace_spans_total` is held against it: `exported` must be what the collector
//! received, and exported + dropped + failed the spans made (a span a request:
//! `driftwatch_requests_total`). `wrap` (`parts/soak_wrap.rs`) is started without a collector.
//!
//! Usage: cargo run --release --example soak -- SECONDS [path/to/driftwatch] [--mcp-redis]
//! [--wrap-forward] [--traces]
//! Exit 0 when lost and altered are 0 (and, with `--mcp-redis`, no MCP round failed outside a
//! store fault; with `--traces`, every span accounted for and none past the bound) and each
//! process's end RSS is within 20 MiB of its RSS after warm-up.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span as OtlpSpan;
use prost::Message;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[path = "parts/soak_wrap.rs"]
mod soak_wrap;

const FAULT_EVERY: Duration = Duration::from_secs(20);
const CLIENTS: usize = 8;

/// Digests of the requests the upstream received, by request id.
type Seen = Arc<Mutex<HashMap<String, String>>>;

#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    ok: AtomicU64,
    lost: AtomicU64,
    altered: AtomicU64,
    during_upstream_fault: AtomicU64,
    oversized: AtomicU64,
}

/// The digest of a request: `headers` are its `x-mcp-tool`, `traceparent` and `tracestate`.
fn digest(method: &str, target: &str, headers: [&str; 3], body: &[u8]) -> String {
    let mut h = Sha256::new();
    let [tool, parent, state] = headers.map(str::as_bytes);
    for part in [
        method.as_bytes(),
        target.as_bytes(),
        tool,
        parent,
        state,
        body,
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    format!("{:x}", h.finalize())
}

fn channel() -> String {
    include_str!("channel.json").trim_ascii_end().to_string()
}

/// A request the upstream received: its id (empty unless one of the soak's own clients':
/// the MCP gateway's ids are its own) and its digest.
fn received(parts: &http::request::Parts, body: &[u8]) -> (String, String) {
    let header = |n: &str| {
        let value = parts.headers.get(n).and_then(|v| v.to_str().ok());
        value.unwrap_or("").to_string()
    };
    let id = header("x-request-id");
    let id = if id.starts_with("soak-") {
        id
    } else {
        String::new()
    };
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let sent = ["x-mcp-tool", "traceparent", "tracestate"].map(header);
    let sent = sent.each_ref().map(|s| s.as_str());
    (id, digest(parts.method.as_str(), target, sent, body))
}

/// The upstream: records each request's digest, answers 200 with JSON. `reset` makes the next
/// request's connection close without an answer.
async fn upstream(listener: TcpListener, seen: Seen, reset: Arc<AtomicBool>, up: Arc<AtomicBool>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        if !up.load(Ordering::SeqCst) {
            return; // the listener is being closed for a restart
        }
        let (seen, reset) = (seen.clone(), reset.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let (seen, reset) = (seen.clone(), reset.clone());
                async move {
                    let (parts, body) = req.into_parts();
                    let body = body
                        .collect()
                        .await
                        .map_err(std::io::Error::other)?
                        .to_bytes();
                    let (id, d) = received(&parts, &body);
                    seen.lock().unwrap().insert(id, d);
                    if reset.swap(false, Ordering::SeqCst) {
                        // An error from the service: hyper closes the connection unanswered.
                        return Err(std::io::Error::other("injected reset"));
                    }
                    let answer = if parts.uri.path().starts_with("/api/v1/playouts") {
                        r#"{"pageSize":25,"items":[]}"#.to_string()
                    } else {
                        channel()
                    };
                    Ok::<_, std::io::Error>(
                        Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from(answer)))
                            .unwrap(),
                    )
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Open descriptors and threads of `pid`.
fn fds_threads(pid: u32) -> (u64, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    (fds, threads)
}

/// Samples of one process: (seconds since start, RSS KiB, descriptors, threads).
#[derive(Default)]
struct Samples(Vec<(f64, u64, u64, u64)>);

impl Samples {
    fn take(&mut self, pid: u32, at: f64) {
        let (fds, threads) = fds_threads(pid);
        self.0.push((at, rss_kib(pid), fds, threads));
    }

    /// Least-squares slope of `value` per hour.
    fn slope(&self, value: impl Fn(&(f64, u64, u64, u64)) -> f64) -> f64 {
        let n = self.0.len() as f64;
        if n < 2.0 {
            return 0.0;
        }
        let (mx, my) = self
            .0
            .iter()
            .fold((0.0, 0.0), |(x, y), s| (x + s.0 / n, y + value(s) / n));
        let (num, den) = self.0.iter().fold((0.0, 0.0), |(a, b), s| {
            (a + (s.0 - mx) * (value(s) - my), b + (s.0 - mx).powi(2))
        });
        if den == 0.0 { 0.0 } else { num / den * 3600.0 }
    }

    fn report(&self, name: &str) -> bool {
        let (Some(first), Some(last)) = (self.0.first(), self.0.last()) else {
            return true;
        };
        let max = self.0.iter().map(|s| s.1).max().unwrap_or(0);
        println!(
            "{name}: rss after warm-up {} MiB, max {} MiB, end {} MiB, slope {:.1} MiB/h; fds {} -> {} (slope {:.1}/h); threads {} -> {} (slope {:.1}/h)",
            first.1 / 1024,
            max / 1024,
            last.1 / 1024,
            self.slope(|s| s.1 as f64) / 1024.0,
            first.2,
            last.2,
            self.slope(|s| s.2 as f64),
            first.3,
            last.3,
            self.slope(|s| s.3 as f64),
        );
        let step = (self.0.len() / 12).max(1);
        let trace: Vec<String> = self
            .0
            .iter()
            .step_by(step)
            .map(|s| format!("{:.0}s:{}", s.0, s.1 / 1024))
            .collect();
        println!("{name}: rss MiB over time {}", trace.join(" "));
        last.1 <= first.1 + 20 * 1024
    }
}

/// A `redis-server` on `port`, no persistence.
fn redis_server(port: u16) -> std::process::Child {
    std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server")
}

/// One MCP round: a session, two tool calls, its end. `Ok(())` when each answered as it must.
async fn mcp_round(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    url: &str,
    hostile: bool,
) -> Result<(), String> {
    let post = |body: String, session: Option<String>| {
        let mut r = Request::post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r.body(Full::new(Bytes::from(body))).unwrap()
    };
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}}"#;
    let answer = client
        .request(post(init.into(), None))
        .await
        .map_err(|e| e.to_string())?;
    let session = answer
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(String::from)
        .ok_or_else(|| format!("initialize: {}", answer.status()))?;
    let _ = answer.into_body().collect().await;
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let answer = client
        .request(post(initialized.into(), Some(session.clone())))
        .await
        .map_err(|e| e.to_string())?;
    let _ = answer.into_body().collect().await;
    let calls = [
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"getChannel","arguments":{"id":7}}}"#,
            "Retro",
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"listPlayouts","arguments":{"pageSize":10}}}"#,
            "pageSize",
        ),
    ];
    for (call, expect) in calls {
        let answer = client
            .request(post(call.into(), Some(session.clone())))
            .await
            .map_err(|e| e.to_string())?;
        let body = answer
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let text = String::from_utf8_lossy(&body);
        if !text.contains(expect) || text.contains("\"isError\":true") {
            return Err(format!("tools/call: {}", &text[..text.len().min(300)]));
        }
    }
    if hostile {
        let arrays = vec!["[]"; 1_200_000].join(",");
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"getChannel","arguments":{{"id":[{arrays}]}}}}}}"#
        );
        let answer = client
            .request(post(body, Some(session.clone())))
            .await
            .map_err(|e| e.to_string())?;
        if answer.status() != 413 {
            return Err(format!(
                "a 3.6 MB message of empty arrays: {}",
                answer.status()
            ));
        }
    }
    let delete = Request::delete(url)
        .header("mcp-session-id", session)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let answer = client.request(delete).await.map_err(|e| e.to_string())?;
    let _ = answer.into_body().collect().await;
    Ok(())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// With `--traces`: how long the collector answers, then how long it stalls, in turn.
const PHASE: Duration = Duration::from_secs(20);
/// The bytes of a peer's request id and tool with `--traces`: far past the bound.
const PEER_TEXT: usize = 60_000;
/// The bound on any text a span records (a metric label's).
const BOUND: usize = 256;
/// The bound on a span's `tracestate`: W3C's floor for what a platform passes on.
const STATE_BOUND: usize = 512;

/// The long parts of what a peer sets with `--traces`, made once.
struct Filler {
    text: String,
    /// 32 members (W3C's most), of 254 and 104 bytes in turn: 5,759 bytes. Cut to the bound,
    /// the long go first (W3C: those past 128 characters), then members from the end.
    state: String,
}

impl Filler {
    fn new() -> Filler {
        let members: Vec<String> = (0..32)
            .map(|i| format!("k{i:02}={}", "v".repeat(if i % 2 == 0 { 250 } else { 100 })))
            .collect();
        Filler {
            text: "x".repeat(PEER_TEXT),
            state: members.join(","),
        }
    }
}

/// What a client sets in a request that its span records, and the upstream compares.
struct Peer {
    id: String,
    tool: String,
    /// `traceparent` and `tracestate`: empty without `--traces`.
    parent: String,
    state: String,
}

impl Peer {
    /// Request `n` of client `w`; with `filler`, its id and tool unique by their first bytes
    /// (`soak-W-N-`, `tool-W-N-`), then `PEER_TEXT` bytes, and a sampled trace of its own.
    fn new(w: usize, n: u64, filler: Option<&Filler>) -> Peer {
        let Some(f) = filler else {
            return Peer {
                id: format!("soak-{w}-{n}"),
                tool: format!("tool-{}", n % 3),
                parent: String::new(),
                state: String::new(),
            };
        };
        let trace = ((w as u128) << 64) | u128::from(n);
        Peer {
            id: format!("soak-{w}-{n}-{}", f.text),
            tool: format!("tool-{w}-{n}-{}", f.text),
            parent: format!("00-{trace:032x}-{n:016x}-01"),
            state: f.state.clone(),
        }
    }

    fn trace_context(&self, request: http::request::Builder) -> http::request::Builder {
        match self.parent.is_empty() {
            true => request,
            false => {
                (request.header("traceparent", &self.parent)).header("tracestate", &self.state)
            }
        }
    }
}

/// The collector's tally. Only the spans of batches it answered are `received`.
#[derive(Default)]
struct Tally {
    received: AtomicU64,
    answered: AtomicU64,
    /// Batches taken during a stall and never answered.
    held: AtomicU64,
    stalls: AtomicU64,
    undecodable: AtomicU64,
    /// Texts past `BOUND`: a span's name, status, any attribute's or event's.
    over_bound: AtomicU64,
    /// Spans without `driftwatch.truncated = true` (each request's id and tool were cut).
    unmarked: AtomicU64,
    /// Request ids and tools that are not the first `BOUND` bytes of what was sent.
    not_cut: AtomicU64,
    /// The longest `tracestate` a span carried, the spans past `STATE_BOUND`, and the spans
    /// with none (every request sent one).
    state_bytes: AtomicU64,
    state_over: AtomicU64,
    stateless: AtomicU64,
    /// The first few spans that broke a rule, said.
    breaches: Mutex<Vec<String>>,
}

/// An OTLP/HTTP collector on loopback that answers for a `PHASE`, then stalls for one.
struct Collector {
    addr: SocketAddr,
    tally: Arc<Tally>,
    /// Even: answering; odd: stalling (and reading the batch first when 3 mod 4).
    phase: Arc<watch::Sender<u64>>,
    turns: JoinHandle<()>,
}

impl Collector {
    async fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tally = Arc::<Tally>::default();
        let phase = Arc::new(watch::channel(0u64).0);
        tokio::spawn(collect_all(listener, tally.clone(), phase.subscribe()));
        let (turner, stalls) = (phase.clone(), tally.clone());
        let turns = tokio::spawn(async move {
            loop {
                tokio::time::sleep(PHASE).await;
                turner.send_modify(|p| *p += 1);
                if *turner.borrow() % 2 == 1 {
                    stalls.stalls.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Collector {
            addr,
            tally,
            phase,
            turns,
        }
    }
}

async fn collect_all(listener: TcpListener, tally: Arc<Tally>, phase: watch::Receiver<u64>) {
    while let Ok((stream, _)) = listener.accept().await {
        let (tally, phase) = (tally.clone(), phase.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req| collect(req, tally.clone(), phase.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// One export: while stalling, held unanswered until the phase ends, then its connection
/// dropped; else read, its spans counted and checked, and answered 200.
async fn collect(
    req: Request<Incoming>,
    tally: Arc<Tally>,
    mut phase: watch::Receiver<u64>,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let now = *phase.borrow_and_update();
    if now % 2 == 1 {
        tally.held.fetch_add(1, Ordering::Relaxed);
        let hold = async {
            if now % 4 == 3 {
                let _ = req.into_body().collect().await;
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            _ = phase.changed() => {}
            _ = hold => {}
        }
        return Err(std::io::Error::other(
            "the stall is over: dropped unanswered",
        ));
    }
    let answer = |status: u16| {
        Response::builder()
            .status(status)
            .header("content-type", "application/x-protobuf")
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    if req.method() != "POST" || req.uri().path() != "/v1/traces" {
        return Ok(answer(404));
    }
    let body = (req.into_body().collect().await)
        .map_err(std::io::Error::other)?
        .to_bytes();
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        tally.undecodable.fetch_add(1, Ordering::Relaxed);
        return Ok(answer(400));
    };
    let spans = (request.resource_spans.iter())
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans);
    let mut n = 0;
    for span in spans {
        n += 1;
        check_span(span, &tally);
    }
    tally.answered.fetch_add(1, Ordering::Relaxed);
    tally.received.fetch_add(n, Ordering::Relaxed);
    Ok(answer(200))
}

/// Every text a span records, by what it is: its name, status, each attribute's and event's.
fn texts(span: &OtlpSpan) -> Vec<(&str, &str)> {
    let mut out = vec![("name", span.name.as_str())];
    out.extend(span.status.as_ref().map(|s| ("status", s.message.as_str())));
    out.extend(
        span.events
            .iter()
            .map(|e| ("an event's name", e.name.as_str())),
    );
    let attributes = (span.attributes.iter())
        .chain(span.events.iter().flat_map(|e| &e.attributes))
        .chain(span.links.iter().flat_map(|l| &l.attributes));
    for a in attributes {
        if let Some(Any::StringValue(s)) = a.value.as_ref().and_then(|v| v.value.as_ref()) {
            out.push((a.key.as_str(), s.as_str()));
        }
    }
    out
}

/// `text` is the first `BOUND` bytes of a peer's `head-W-N-xxx…` (`Peer::new`).
fn cut_from_sent(text: &str, head: &str) -> bool {
    let rest = text.trim_end_matches('x');
    text.len() == BOUND
        && text.starts_with(head)
        && rest.ends_with('-')
        && rest.matches('-').count() == 3
}

fn check_span(span: &OtlpSpan, tally: &Tally) {
    let mut wrong = Vec::new();
    for (what, text) in texts(span) {
        if text.len() > BOUND {
            tally.over_bound.fetch_add(1, Ordering::Relaxed);
            wrong.push(format!("{what} is {} bytes", text.len()));
        }
    }
    let value = |key: &str| {
        let a = span.attributes.iter().find(|a| a.key == key)?;
        a.value.as_ref()?.value.clone()
    };
    if value("driftwatch.truncated") != Some(Any::BoolValue(true)) {
        tally.unmarked.fetch_add(1, Ordering::Relaxed);
        wrong.push("not marked driftwatch.truncated".into());
    }
    // The tool: `driftwatch.tool` since the HTTP client conventions (issue 65), before them
    // `gen_ai.tool.name`.
    let tool = value("driftwatch.tool").or_else(|| value("gen_ai.tool.name"));
    for (key, got, head) in [
        (
            "driftwatch.request_id",
            value("driftwatch.request_id"),
            "soak-",
        ),
        ("the tool", tool, "tool-"),
    ] {
        match got {
            Some(Any::StringValue(s)) if cut_from_sent(&s, head) => {}
            Some(Any::StringValue(s)) => {
                tally.not_cut.fetch_add(1, Ordering::Relaxed);
                let start = &s[..s.floor_char_boundary(20)];
                wrong.push(format!("{key} is {} bytes, {start:?}...", s.len()));
            }
            other => {
                tally.not_cut.fetch_add(1, Ordering::Relaxed);
                wrong.push(format!("{key} is {other:?}"));
            }
        }
    }
    let state = span.trace_state.len();
    (tally.state_bytes).fetch_max(state as u64, Ordering::Relaxed);
    if state > STATE_BOUND {
        tally.state_over.fetch_add(1, Ordering::Relaxed);
        wrong.push(format!("its tracestate is {state} bytes"));
    }
    if state == 0 {
        tally.stateless.fetch_add(1, Ordering::Relaxed);
    }
    let mut breaches = tally.breaches.lock().unwrap();
    if !wrong.is_empty() && breaches.len() < 5 {
        let name = &span.name[..span.name.floor_char_boundary(40)];
        breaches.push(format!("{name}: {}", wrong.join("; ")));
    }
}

/// The sidecar's span counts from its admin `/metrics`, and the spans made: one a request.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct SpanCounts {
    exported: u64,
    dropped: u64,
    failed: u64,
    requests: u64,
}

impl SpanCounts {
    async fn scrape(client: &Client<HttpConnector, Full<Bytes>>, admin: u16) -> Option<SpanCounts> {
        let uri = format!("http://127.0.0.1:{admin}/metrics").parse().unwrap();
        let answer = client.get(uri).await.ok()?;
        let body = answer.into_body().collect().await.ok()?.to_bytes();
        let text = String::from_utf8_lossy(&body);
        let sum = |prefix: &str| {
            (text.lines())
                .filter(|l| l.starts_with(prefix))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>() as u64
        };
        let outcome = |o: &str| sum(&format!("driftwatch_trace_spans_total{{outcome=\"{o}\"}}"));
        Some(SpanCounts {
            exported: outcome("exported"),
            dropped: outcome("dropped"),
            failed: outcome("failed"),
            requests: sum("driftwatch_requests_total{"),
        })
    }

    fn counted(&self) -> u64 {
        self.exported + self.dropped + self.failed
    }
}

impl Collector {
    /// Once the clients stop: the collector answers from now on, and the sidecar's queue
    /// empties (a batch the last stall held fails at `export_timeout_ms`, 10 s). Until every
    /// span made is counted and `exported` is what the collector received, for 2 s; or until
    /// nothing has moved for 15 s.
    async fn settle(&self, client: &Client<HttpConnector, Full<Bytes>>, admin: u16) -> SpanCounts {
        self.turns.abort();
        self.phase.send_modify(|p| *p += *p % 2);
        let (mut last, mut since) = (SpanCounts::default(), Instant::now());
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = SpanCounts::scrape(client, admin).await.unwrap_or(last);
            let received = self.tally.received.load(Ordering::Relaxed);
            let whole = now.counted() == now.requests && received == now.exported;
            if now != last {
                (last, since) = (now, Instant::now());
            }
            let still = since.elapsed();
            if (whole && still >= Duration::from_secs(2)) || still >= Duration::from_secs(15) {
                return now;
            }
        }
    }

    /// The figures; whether every span is accounted for and none broke the bound.
    fn report(&self, spans: SpanCounts) -> bool {
        let t = &self.tally;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let received = get(&t.received);
        println!(
            "traces: spans exported {}, dropped {}, failed {} (together {}; spans made, a request each, {}); the collector received {received} in {} batches it answered, held {} batches unanswered over {} stalls of {} s, {} undecodable",
            spans.exported,
            spans.dropped,
            spans.failed,
            spans.counted(),
            spans.requests,
            get(&t.answered),
            get(&t.held),
            get(&t.stalls),
            PHASE.as_secs(),
            get(&t.undecodable),
        );
        let (over, unmarked, not_cut) = (get(&t.over_bound), get(&t.unmarked), get(&t.not_cut));
        let state_over = get(&t.state_over);
        println!(
            "traces: of {received} spans decoded, texts past {BOUND} bytes {over}, spans not marked truncated {unmarked}, request ids or tools not the first {BOUND} bytes of what was sent {not_cut}; tracestates past {STATE_BOUND} bytes {state_over}, the longest {} bytes, spans without one {}",
            get(&t.state_bytes),
            get(&t.stateless),
        );
        for breach in t.breaches.lock().unwrap().iter() {
            println!("traces: {breach}");
        }
        received == spans.exported
            && spans.counted() == spans.requests
            && over + unmarked + not_cut + state_over + get(&t.undecodable) == 0
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(60);
    let with_mcp = args.iter().any(|a| a == "--mcp-redis");
    let with_wrap = args.iter().any(|a| a == "--wrap-forward");
    let with_traces = args.iter().any(|a| a == "--traces");
    let binary = args
        .get(2)
        .filter(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or("target/release/driftwatch".into());
    let dir = std::env::temp_dir().join(format!("driftwatch-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec_a = std::fs::read_to_string("examples/channels.openapi.yaml").unwrap();
    let spec_b = spec_a.replacen(
        "paths:\n",
        "paths:\n  /api/v1/health:\n    get:\n      operationId: health\n      responses: { \"200\": { description: ok } }\n",
        1,
    );
    let spec = dir.join("channels.yaml");
    std::fs::write(&spec, &spec_a).unwrap();

    let seen: Seen = Arc::default();
    let reset = Arc::new(AtomicBool::new(false));
    let up_port = free_port();
    let up_addr: SocketAddr = ([127, 0, 0, 1], up_port).into();
    let up_flag = Arc::new(AtomicBool::new(true));
    let mut up_task = tokio::spawn(upstream(
        TcpListener::bind(up_addr).await.unwrap(),
        seen.clone(),
        reset.clone(),
        up_flag.clone(),
    ));

    let redis_port = free_port();
    let mut redis = with_mcp.then(|| redis_server(redis_port));
    let key = dir.join("hash.key");
    std::fs::write(&key, "a secret the soak's processes share").unwrap();
    let with_store = |c: &mut std::process::Command| {
        if with_mcp {
            c.env("DRIFTWATCH_MEMORY_BACKEND", "redis")
                .env(
                    "DRIFTWATCH_MEMORY_REDIS_URL",
                    format!("redis://127.0.0.1:{redis_port}"),
                )
                .env("DRIFTWATCH_MEMORY_HASH_KEY_FILE", &key);
        }
    };
    let (port, admin) = (free_port(), free_port());
    let collector = match with_traces {
        true => Some(Collector::start().await),
        false => None,
    };
    let mut command = std::process::Command::new(&binary);
    if let Some(c) = &collector {
        command.env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{}", c.addr));
    }
    command
        .args(["serve", "--spec"])
        .arg(&spec)
        .args(["--upstream", &format!("http://{up_addr}")])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .env("DRIFTWATCH_EVENTS_OUTPUT", "none")
        .env("DRIFTWATCH_SPEC_WATCH_INTERVAL_MS", "500")
        .env("RUST_LOG", "error");
    with_store(&mut command);
    let mut child = command.spawn().expect("start driftwatch");
    let pid = child.id();
    let (mcp_port, mcp_admin) = (free_port(), free_port());
    let mut mcp_child = with_mcp.then(|| {
        let mut command = std::process::Command::new(&binary);
        command
            .args(["mcp", "--all", "--spec"])
            .arg(&spec)
            .args(["--upstream", &format!("http://{up_addr}")])
            .args(["--listen", &format!("127.0.0.1:{mcp_port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{mcp_admin}")])
            .env("DRIFTWATCH_EVENTS_OUTPUT", "none")
            .env("DRIFTWATCH_SPEC_WATCH_INTERVAL_MS", "500")
            .env("RUST_LOG", "error");
        with_store(&mut command);
        command.spawn().expect("start driftwatch mcp")
    });
    let base = format!("http://127.0.0.1:{port}");
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    for admin in [admin, mcp_admin] {
        for _ in 0..100 {
            if client
                .get(format!("http://127.0.0.1:{admin}/readyz").parse().unwrap())
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !with_mcp {
            break;
        }
    }
    let wrapped = match with_wrap {
        true => Some(soak_wrap::start(&binary, &dir, &spec, up_addr, free_port).await),
        false => None,
    };
    if let Some(w) = &wrapped {
        for _ in 0..200 {
            let ready = format!("http://{}/readyz", w.admin).parse().unwrap();
            if client.get(ready).await.is_ok_and(|r| r.status() == 200) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let store_fault = Arc::new(AtomicBool::new(false));
    let fault_open = Arc::new(AtomicBool::new(false));
    let mcp_counts = Arc::new((AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)));
    let mut mcp_workers = Vec::new();
    for _ in 0..(if with_mcp { 2 } else { 0 }) {
        let (client, counts) = (client.clone(), mcp_counts.clone());
        let (store_fault, fault_open) = (store_fault.clone(), fault_open.clone());
        let url = format!("http://127.0.0.1:{mcp_port}/mcp");
        let deadline = Instant::now() + Duration::from_secs(seconds);
        mcp_workers.push(tokio::spawn(async move {
            let mut round = 0u64;
            while Instant::now() < deadline {
                round += 1;
                // The upstream's injected reset closes whichever request comes next, the
                // gateway's own among them.
                let faulty =
                    || store_fault.load(Ordering::SeqCst) || fault_open.load(Ordering::SeqCst);
                let during = faulty();
                match mcp_round(&client, &url, round.is_multiple_of(50)).await {
                    Ok(()) => counts.0.fetch_add(1, Ordering::Relaxed),
                    Err(_) if during || faulty() => counts.2.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        eprintln!("mcp round {round}: {e}");
                        counts.1.fetch_add(1, Ordering::Relaxed)
                    }
                };
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }

    // ok, failed, failed during an upstream fault, altered
    let wrap_counts = Arc::new([const { AtomicU64::new(0) }; 4]);
    let wrapped = wrapped.map(Arc::new);
    let rounds = Arc::new(AtomicU64::new(0));
    for _ in 0..(if with_wrap { 2 } else { 0 }) {
        let (client, counts, seen, fault_open) = (
            client.clone(),
            wrap_counts.clone(),
            seen.clone(),
            fault_open.clone(),
        );
        let (wrapped, rounds) = (wrapped.clone().expect("wrap"), rounds.clone());
        let deadline = Instant::now() + Duration::from_secs(seconds);
        mcp_workers.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let n = rounds.fetch_add(1, Ordering::Relaxed) + 1;
                let during = fault_open.load(Ordering::SeqCst);
                let at = match soak_wrap::round(&client, &wrapped, n).await {
                    Ok(target) => {
                        let want = digest("GET", target, ["", "", ""], b"");
                        let got = seen.lock().unwrap().remove(&format!("soak-wrap-{n}"));
                        match got.as_deref() == Some(want.as_str()) {
                            true => 0,
                            false => 3,
                        }
                    }
                    Err(_) if during || fault_open.load(Ordering::SeqCst) => 2,
                    Err(e) => {
                        eprintln!("wrap round {n}: {e}");
                        1
                    }
                };
                counts[at].fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }

    let counts = Arc::new(Counts::default());
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let filler = with_traces.then(|| Arc::new(Filler::new()));
    let put_body = channel();
    let mut workers = Vec::new();
    for w in 0..CLIENTS {
        let (client, counts, seen, fault_open) = (
            client.clone(),
            counts.clone(),
            seen.clone(),
            fault_open.clone(),
        );
        let (base, put_body, filler) = (base.clone(), put_body.clone(), filler.clone());
        workers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                let peer = Peer::new(w, n, filler.as_deref());
                let big = n.is_multiple_of(500);
                let (method, target, body) = match n % 4 {
                    0 if big => ("PUT", "/api/v1/channels/7".to_string(), format!("{put_body}{}", " ".repeat(2 << 20))),
                    0 => ("PUT", "/api/v1/channels/7".into(), put_body.clone()),
                    1 => ("GET", "/api/v1/channels/7".into(), String::new()),
                    2 => ("GET", format!("/api/v1/playouts?query=news&pageNum={n}&pageSize=25&sort=name&channelIds=1,2,3"), String::new()),
                    _ => ("GET", "/api/v1/playouts?pageSize=10".into(), String::new()),
                };
                let request = Request::builder()
                    .method(method)
                    .uri(format!("{base}{target}"))
                    .header("x-request-id", &peer.id)
                    .header("x-mcp-tool", &peer.tool)
                    .header("content-type", "application/json");
                let request = peer
                    .trace_context(request)
                    .body(Full::new(Bytes::from(body.clone())))
                    .unwrap();
                counts.sent.fetch_add(1, Ordering::Relaxed);
                if big {
                    counts.oversized.fetch_add(1, Ordering::Relaxed);
                }
                let during = fault_open.load(Ordering::SeqCst);
                let answer = client.request(request).await;
                let ok = match answer {
                    Ok(r) => {
                        let status = r.status();
                        let _ = r.into_body().collect().await;
                        status.is_success()
                    }
                    Err(_) => false,
                };
                if !ok {
                    let counter = if during || fault_open.load(Ordering::SeqCst) {
                        &counts.during_upstream_fault
                    } else {
                        &counts.lost
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                counts.ok.fetch_add(1, Ordering::Relaxed);
                let sent = [peer.tool.as_str(), &peer.parent, &peer.state];
                let want = digest(method, &target, sent, body.as_bytes());
                if seen.lock().unwrap().remove(&peer.id).as_deref() != Some(want.as_str()) {
                    counts.altered.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }));
    }

    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(10.min(seconds / 4))).await;
    let rss_start = rss_kib(pid);
    let mut rss_max = rss_start;
    let (mut serve_samples, mut mcp_samples) = (Samples::default(), Samples::default());
    let mut wrap_samples = Samples::default();
    let wrap_pid = wrapped.as_ref().map(|w| w.child.id());
    let sample_all =
        |serve: &mut Samples, mcp: &mut Samples, mcp_child: &Option<std::process::Child>| {
            let at = started.elapsed().as_secs_f64();
            serve.take(pid, at);
            if let Some(child) = mcp_child {
                mcp.take(child.id(), at);
            }
        };
    sample_all(&mut serve_samples, &mut mcp_samples, &mcp_child);
    if let Some(wrap) = wrap_pid {
        wrap_samples.take(wrap, started.elapsed().as_secs_f64());
    }
    let mut faults: HashMap<&str, u64> = HashMap::new();
    let mut turn = 0u64;
    while Instant::now() + FAULT_EVERY < deadline {
        tokio::time::sleep(FAULT_EVERY).await;
        rss_max = rss_max.max(rss_kib(pid));
        sample_all(&mut serve_samples, &mut mcp_samples, &mcp_child);
        if let Some(wrap) = wrap_pid {
            wrap_samples.take(wrap, started.elapsed().as_secs_f64());
        }
        turn += 1;
        let kinds: &[&str] = if with_mcp {
            &[
                "upstream_restart",
                "upstream_reset",
                "spec_reload",
                "slowloris",
                "store_restart",
            ]
        } else {
            &[
                "upstream_restart",
                "upstream_reset",
                "spec_reload",
                "slowloris",
            ]
        };
        let kind = kinds[(turn % kinds.len() as u64) as usize];
        match kind {
            "upstream_restart" => {
                fault_open.store(true, Ordering::SeqCst);
                up_flag.store(false, Ordering::SeqCst);
                up_task.abort();
                let _ = TcpStream::connect(up_addr).await;
                tokio::time::sleep(Duration::from_secs(1)).await;
                up_flag.store(true, Ordering::SeqCst);
                let listener = loop {
                    match TcpListener::bind(up_addr).await {
                        Ok(l) => break l,
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                };
                up_task = tokio::spawn(upstream(
                    listener,
                    seen.clone(),
                    reset.clone(),
                    up_flag.clone(),
                ));
                tokio::time::sleep(Duration::from_millis(500)).await;
                fault_open.store(false, Ordering::SeqCst);
            }
            "upstream_reset" => {
                fault_open.store(true, Ordering::SeqCst);
                reset.store(true, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(500)).await;
                fault_open.store(false, Ordering::SeqCst);
            }
            "spec_reload" => {
                let next = match turn % 3 {
                    0 => "paths: [broken\n".to_string(),
                    _ if turn.is_multiple_of(2) => spec_b.clone(),
                    _ => spec_a.clone(),
                };
                std::fs::write(&spec, next).unwrap();
            }
            "store_restart" => {
                store_fault.store(true, Ordering::SeqCst);
                if let Some(mut r) = redis.take() {
                    let _ = r.kill();
                    let _ = r.wait();
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
                redis = Some(redis_server(redis_port));
                tokio::time::sleep(Duration::from_secs(2)).await;
                store_fault.store(false, Ordering::SeqCst);
            }
            _ => {
                let mut held = Vec::new();
                for _ in 0..50 {
                    if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)).await {
                        let _ = s
                            .write_all(b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n")
                            .await;
                        held.push(s);
                    }
                }
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(40)).await;
                    drop(held);
                });
            }
        }
        *faults.entry(kind).or_default() += 1;
    }
    for w in workers.into_iter().chain(mcp_workers) {
        let _ = w.await;
    }
    // With `--traces` the end is sampled once the export queue has emptied: a stall fills it
    // (2,048 spans, 16 MiB at most), and the run may end in one.
    let rss_stopped = rss_kib(pid);
    let spans = match &collector {
        Some(collector) => Some(collector.settle(&client, admin).await),
        None => None,
    };
    sample_all(&mut serve_samples, &mut mcp_samples, &mcp_child);
    if let Some(wrap) = wrap_pid {
        wrap_samples.take(wrap, started.elapsed().as_secs_f64());
    }
    let rss_end = rss_kib(pid);
    let c = &counts;
    println!(
        "soak: {} s, {CLIENTS} clients, release binary {binary}",
        started.elapsed().as_secs()
    );
    println!(
        "requests: sent {} (of them 2 MiB bodies {}), ok {}, lost {}, altered {}, failed during upstream faults {}",
        c.sent.load(Ordering::Relaxed),
        c.oversized.load(Ordering::Relaxed),
        c.ok.load(Ordering::Relaxed),
        c.lost.load(Ordering::Relaxed),
        c.altered.load(Ordering::Relaxed),
        c.during_upstream_fault.load(Ordering::Relaxed),
    );
    let mut kinds: Vec<_> = faults.iter().collect();
    kinds.sort();
    println!("faults: {kinds:?}");
    println!(
        "rss: after warm-up {} MiB, max {} MiB, end {} MiB (when the clients stopped {} MiB)",
        rss_start / 1024,
        rss_max.max(rss_end).max(rss_stopped) / 1024,
        rss_end / 1024,
        rss_stopped / 1024,
    );
    let mut flat = serve_samples.report("serve");
    let traces_clean = match (&collector, spans) {
        (Some(collector), Some(spans)) => collector.report(spans),
        _ => true,
    };
    let mut mcp_clean = true;
    if let Some(mut mcp) = mcp_child.take() {
        let (ok, failed, during) = (&mcp_counts.0, &mcp_counts.1, &mcp_counts.2);
        println!(
            "mcp rounds (a session, two tool calls, its end): ok {}, failed {}, failed during store or upstream faults {}",
            ok.load(Ordering::Relaxed),
            failed.load(Ordering::Relaxed),
            during.load(Ordering::Relaxed)
        );
        flat &= mcp_samples.report("mcp");
        mcp_clean = failed.load(Ordering::Relaxed) == 0;
        let _ = mcp.kill();
    }
    let mut wrap_clean = true;
    if let Some(wrapped) = wrapped.and_then(Arc::into_inner) {
        let [ok, failed, during, altered] = &*wrap_counts;
        println!(
            "wrap rounds (a tool call, a CONNECT, TLS, the API request; every 25th a denied tunnel): ok {}, failed {}, failed during upstream faults {}, altered {}",
            ok.load(Ordering::Relaxed),
            failed.load(Ordering::Relaxed),
            during.load(Ordering::Relaxed),
            altered.load(Ordering::Relaxed),
        );
        flat &= wrap_samples.report("wrap");
        wrap_clean = failed.load(Ordering::Relaxed) == 0 && altered.load(Ordering::Relaxed) == 0;
        let mut child = wrapped.child;
        let _ = child.kill();
    }
    if let Some(mut r) = redis.take() {
        let _ = r.kill();
    }
    let _ = child.kill();
    let _ = std::fs::remove_dir_all(&dir);
    let flat = flat && rss_end <= rss_start + 20 * 1024;
    let clean = c.lost.load(Ordering::Relaxed) == 0
        && c.altered.load(Ordering::Relaxed) == 0
        && mcp_clean
        && wrap_clean
        && traces_clean;
    std::process::exit(if clean && flat { 0 } else { 1 });
}
