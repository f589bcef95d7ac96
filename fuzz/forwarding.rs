//! The forwarding invariant, in process: a request observe mode forwards reaches the upstream
//! as the README says ("What reaches the API"), and one it refuses is one the README says it
//! refuses. A real sidecar on loopback in front of a raw recording upstream (it reads the bytes
//! off the wire, so framing, case and trailers are seen as sent).
//!
//! Input: bytes that pick a method, a target, headers (names and values from the input, case
//! kept), a body and its framing (`Content-Length`, or chunked with the input's chunk sizes and
//! optional trailers). The request is always valid HTTP/1.1, so hyper reads it.

use std::net::SocketAddr;
use std::sync::{Arc, LazyLock, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the upstream read off the wire for one request.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub head: Vec<(String, String)>,
    pub method: String,
    pub target: String,
    pub body: Vec<u8>,
    pub trailers: Vec<(String, String)>,
}

pub struct Rig {
    pub runtime: tokio::runtime::Runtime,
    pub proxy: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

pub static RIG: LazyLock<Rig> = LazyLock::new(|| {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let proxy = runtime.block_on(async {
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = upstream.local_addr().unwrap();
        tokio::spawn(record(upstream, seen.clone()));
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut config = driftwatch::config::Config::default();
        config.spec.path = Some(root.join("examples/channels.openapi.yaml"));
        config.proxy.upstream = Some(format!("http://{up}"));
        config.events.output = "none".into();
        let settings = driftwatch::settings::Settings::from_config(&config).unwrap();
        let sidecar = driftwatch::cli::serve::build(settings, None).await.unwrap();
        let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = proxy.local_addr().unwrap();
        tokio::spawn(driftwatch::cli::serve::serve(
            proxy,
            admin,
            Arc::new(sidecar),
            std::future::pending(),
        ));
        addr
    });
    Rig { runtime, proxy, seen }
});

/// The raw upstream: one request per connection, recorded, answered `200` and closed.
async fn record(listener: TcpListener, seen: Arc<Mutex<Vec<Seen>>>) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            if let Some(request) = read(&mut stream, &mut buf).await {
                seen.lock().unwrap().push(request);
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                .await;
        });
    }
}

async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 16384];
    matches!(stream.read(&mut chunk).await, Ok(n) if n > 0 && { buf.extend_from_slice(&chunk[..n]); true })
}

async fn line(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
            let text = String::from_utf8_lossy(&buf[..i]).into_owned();
            buf.drain(..i + 2);
            return Some(text);
        }
        if !fill(stream, buf).await {
            return None;
        }
    }
}

async fn read(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Seen> {
    let mut seen = Seen::default();
    let start = line(stream, buf).await?;
    let mut parts = start.split(' ');
    seen.method = parts.next()?.to_string();
    seen.target = parts.next()?.to_string();
    loop {
        let l = line(stream, buf).await?;
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        seen.head.push((k.to_string(), v.trim().to_string()));
    }
    let get = |name: &str| {
        seen.head
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    if get("transfer-encoding").is_some() {
        loop {
            let size = usize::from_str_radix(line(stream, buf).await?.split(';').next()?.trim(), 16).ok()?;
            if size == 0 {
                loop {
                    let l = line(stream, buf).await?;
                    if l.is_empty() {
                        return Some(seen);
                    }
                    let (k, v) = l.split_once(':')?;
                    seen.trailers.push((k.to_ascii_lowercase(), v.trim().to_string()));
                }
            }
            while buf.len() < size + 2 {
                if !fill(stream, buf).await {
                    return None;
                }
            }
            seen.body.extend_from_slice(&buf[..size]);
            buf.drain(..size + 2);
        }
    }
    let len: usize = get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    while buf.len() < len {
        if !fill(stream, buf).await {
            return None;
        }
    }
    seen.body = buf.drain(..len).collect();
    Some(seen)
}

/// Headers driftwatch may drop, change or add (README, "What reaches the API").
fn changed(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "connection" | "keep-alive" | "te" | "transfer-encoding" | "upgrade" | "host"
            | "content-length" | "x-forwarded-for" | "x-forwarded-proto" | "x-forwarded-host"
            | "x-request-id"
    ) || n.starts_with("proxy-")
}

/// Build a valid request from `data`, send it, and check what arrived.
pub fn check(data: &[u8]) {
    let mut bytes = data.iter().copied();
    let mut next = || bytes.next().unwrap_or(0);
    let method = ["GET", "PUT", "POST", "PATCH", "DELETE"][next() as usize % 5];
    let token = |b: u8| b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"[b as usize % 63] as char;
    let target = format!("/api/v1/channels/{}?q={}", next() % 100, next());
    let mut headers: Vec<(String, String)> = Vec::new();
    for _ in 0..next() % 6 {
        let name: String = std::iter::once('X').chain((0..1 + next() % 8).map(|_| token(next()))).collect();
        let value: String = (0..next() % 16).map(|_| token(next())).collect();
        headers.push((name, value));
    }
    let body: Vec<u8> = (0..next() as usize * 3).map(|_| next()).collect();
    let chunked = next() % 2 == 1;
    let trailer = chunked && next() % 2 == 1;
    let mut request = format!("{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n").into_bytes();
    for (k, v) in &headers {
        request.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    if chunked {
        if trailer {
            request.extend_from_slice(b"Trailer: x-sum\r\n");
        }
        request.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        let mut rest = &body[..];
        while !rest.is_empty() {
            let size = (1 + next() as usize).min(rest.len());
            request.extend_from_slice(format!("{size:x}\r\n").as_bytes());
            request.extend_from_slice(&rest[..size]);
            request.extend_from_slice(b"\r\n");
            rest = &rest[size..];
        }
        request.extend_from_slice(b"0\r\n");
        if trailer {
            request.extend_from_slice(b"x-sum: 1\r\n");
        }
        request.extend_from_slice(b"\r\n");
    } else {
        request.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        request.extend_from_slice(&body);
    }
    let rig = &*RIG;
    rig.seen.lock().unwrap().clear();
    let answer = rig.runtime.block_on(async {
        let mut stream = TcpStream::connect(rig.proxy).await.unwrap();
        stream.write_all(&request).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        answer
    });
    assert!(answer.starts_with(b"HTTP/1.1 200"), "not forwarded: {}", String::from_utf8_lossy(&answer));
    let seen = rig.seen.lock().unwrap().pop().expect("the upstream saw it");
    assert_eq!((seen.method.as_str(), seen.target.as_str()), (method, target.as_str()));
    assert_eq!(seen.body, body, "the body arrives as sent");
    let kept: Vec<&(String, String)> = seen.head.iter().filter(|(k, _)| !changed(k) && !k.eq_ignore_ascii_case("trailer")).collect();
    let sent: Vec<&(String, String)> = headers.iter().filter(|(k, _)| !changed(k)).collect();
    let mut sorted_sent = sent.clone();
    sorted_sent.sort_by_key(|(k, _)| k.to_ascii_lowercase());
    let mut sorted_kept = kept.clone();
    sorted_kept.sort_by_key(|(k, _)| k.to_ascii_lowercase());
    assert_eq!(sorted_kept, sorted_sent, "headers arrive as sent, case kept");
    if trailer {
        assert_eq!(seen.trailers, [("x-sum".to_string(), "1".to_string())]);
    }
}
