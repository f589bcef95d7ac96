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
//! Usage: cargo run --release --example soak -- SECONDS [path/to/driftwatch]
//! Exit 0 when lost and altered are 0 and the end RSS is within 20 MiB of the RSS after warm-up.

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
    let binary = args
        .get(2)
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

    let (port, admin) = (free_port(), free_port());
    let mut child = std::process::Command::new(&binary)
        .args(["serve", "--spec"])
        .arg(&spec)
        .args(["--upstream", &format!("http://{up_addr}")])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .env("DRIFTWATCH_EVENTS_OUTPUT", "none")
        .env("DRIFTWATCH_SPEC_WATCH_INTERVAL_MS", "500")
        .env("RUST_LOG", "error")
        .spawn()
        .expect("start driftwatch");
    let pid = child.id();
    let base = format!("http://127.0.0.1:{port}");
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
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

    let counts = Arc::new(Counts::default());
    let fault_open = Arc::new(AtomicBool::new(false));
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
    let mut faults: HashMap<&str, u64> = HashMap::new();
    let mut turn = 0u64;
    while Instant::now() + FAULT_EVERY < deadline {
        tokio::time::sleep(FAULT_EVERY).await;
        rss_max = rss_max.max(rss_kib(pid));
        turn += 1;
        let kind = [
            "upstream_restart",
            "upstream_reset",
            "spec_reload",
            "slowloris",
        ][(turn % 4) as usize];
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
    for w in workers {
        let _ = w.await;
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
    let _ = child.kill();
    let _ = std::fs::remove_dir_all(&dir);
    let flat = rss_end <= rss_start + 20 * 1024;
    let clean = c.lost.load(Ordering::Relaxed) == 0 && c.altered.load(Ordering::Relaxed) == 0;
    std::process::exit(if clean && flat { 0 } else { 1 });
}
