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
//! Usage: cargo run --release --example soak -- SECONDS [path/to/driftwatch] [--mcp-redis]
//! [--wrap-forward]
//! Exit 0 when lost and altered are 0 (and, with `--mcp-redis`, no MCP round failed outside a
//! store fault) and each process's end RSS is within 20 MiB of its RSS after warm-up.

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
use hyper_util::rt::{TokioExecutor, TokioIo};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

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

fn digest(method: &str, target: &str, tool: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    for part in [method.as_bytes(), target.as_bytes(), tool.as_bytes(), body] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    format!("{:x}", h.finalize())
}

fn channel() -> String {
    include_str!("channel.json").trim_ascii_end().to_string()
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
                    let header = |n: &str| {
                        parts
                            .headers
                            .get(n)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("")
                            .to_string()
                    };
                    let id = header("x-request-id");
                    // Only the soak's own clients' requests are compared (the MCP gateway's
                    // ids are its own).
                    let id = if id.starts_with("soak-") {
                        id
                    } else {
                        String::new()
                    };
                    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
                    let d = digest(parts.method.as_str(), target, &header("x-mcp-tool"), &body);
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

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(60);
    let with_mcp = args.iter().any(|a| a == "--mcp-redis");
    let with_wrap = args.iter().any(|a| a == "--wrap-forward");
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
    let mut command = std::process::Command::new(&binary);
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
                        let want = digest("GET", target, "", b"");
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
    let put_body = channel();
    let mut workers = Vec::new();
    for w in 0..CLIENTS {
        let (client, counts, seen, fault_open) = (
            client.clone(),
            counts.clone(),
            seen.clone(),
            fault_open.clone(),
        );
        let (base, put_body) = (base.clone(), put_body.clone());
        workers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                n += 1;
                let id = format!("soak-{w}-{n}");
                let big = n.is_multiple_of(500);
                let (method, target, body) = match n % 4 {
                    0 if big => ("PUT", "/api/v1/channels/7".to_string(), format!("{put_body}{}", " ".repeat(2 << 20))),
                    0 => ("PUT", "/api/v1/channels/7".into(), put_body.clone()),
                    1 => ("GET", "/api/v1/channels/7".into(), String::new()),
                    2 => ("GET", format!("/api/v1/playouts?query=news&pageNum={n}&pageSize=25&sort=name&channelIds=1,2,3"), String::new()),
                    _ => ("GET", "/api/v1/playouts?pageSize=10".into(), String::new()),
                };
                let tool = format!("tool-{}", n % 3);
                let request = Request::builder()
                    .method(method)
                    .uri(format!("{base}{target}"))
                    .header("x-request-id", &id)
                    .header("x-mcp-tool", &tool)
                    .header("content-type", "application/json")
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
                let want = digest(method, &target, &tool, body.as_bytes());
                if seen.lock().unwrap().remove(&id).as_deref() != Some(want.as_str()) {
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
        "rss: after warm-up {} MiB, max {} MiB, end {} MiB",
        rss_start / 1024,
        rss_max.max(rss_end) / 1024,
        rss_end / 1024
    );
    let mut flat = serve_samples.report("serve");
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
        && wrap_clean;
    std::process::exit(if clean && flat { 0 } else { 1 });
}
