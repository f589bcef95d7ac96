//! What observe mode forwards is what the client sent, or a refusal (issue 14, defect 7):
//! what the proxy would have to reinterpret (a transfer coding it does not forward as sent,
//! `CONNECT`, HTTP/1.1 without exactly one `Host`) is refused with 400 and counted; trailers,
//! header-name case, the HTTP version and the request id reach the upstream. Each was seen
//! red first (forwarded reinterpreted, or dropped).

use std::time::Duration;

use super::sidecar::{config, raw, sample, scrape, start};
use super::upstream::{self, ok};

async fn sidecar() -> (super::upstream::Upstream, super::sidecar::Running) {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |_| {})).await;
    (up, dw)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_would_be_reinterpreted_is_refused_with_400_and_counted() {
    let (up, dw) = sidecar().await;
    let refused: [(&str, &[u8]); 5] = [
        (
            "transfer_encoding",
            b"PUT /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        ),
        ("connect", b"CONNECT evil.example:443 HTTP/1.1\r\nhost: evil.example:443\r\n\r\n"),
        ("host", b"GET /api/v1/channels/7 HTTP/1.1\r\n\r\n"),
        ("host", b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n"),
        (
            "transfer_encoding",
            b"PUT /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        ),
    ];
    for (reason, request) in refused {
        let answer = raw(dw.addr, request).await;
        let text = String::from_utf8_lossy(request);
        assert_eq!(answer.status, 400, "{reason}: {text}");
        assert_eq!(
            answer.header("content-type"),
            Some("application/problem+json"),
            "{text}"
        );
    }
    assert!(
        up.recorded().is_empty(),
        "nothing reached the upstream: {:?}",
        up.recorded()
    );
    let m = scrape(dw.admin).await;
    let count = |reason: &str| {
        sample(
            &m,
            &format!("driftwatch_client_errors_total{{reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(
        (count("transfer_encoding"), count("connect"), count("host")),
        (2.0, 1.0, 2.0)
    );
    // HTTP/1.0 needs no Host.
    let answer = raw(dw.addr, b"GET /api/v1/channels/7 HTTP/1.0\r\n\r\n").await;
    assert_eq!(answer.status, 200);
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailers_header_case_version_and_request_id_reach_the_upstream() {
    let (up, dw) = sidecar().await;
    let chunked = b"PUT /api/v1/channels/7 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Custom-Header: 1\r\nTrailer: X-Checksum\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Checksum: abc\r\n\r\n";
    assert_eq!(raw(dw.addr, chunked).await.status, 200);
    let http10 = b"GET /api/v1/channels/7 HTTP/1.0\r\nhost: x\r\n\r\n";
    assert_eq!(raw(dw.addr, http10).await.status, 200);
    let named = b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\nx-request-id: rid-1\r\nconnection: x-request-id\r\n\r\n";
    assert_eq!(raw(dw.addr, named).await.status, 200);
    // A GET's chunked body (the forwarding fuzz target's first find: hyper dropped it).
    let get_chunked = b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\nTrailer: x-sum\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx-sum: 1\r\n\r\n";
    assert_eq!(raw(dw.addr, get_chunked).await.status, 200);
    let seen = up.recorded();
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[3].body, b"abc", "the GET's body arrives");
    assert_eq!(seen[3].trailers, [("x-sum".to_string(), "1".to_string())]);
    assert_eq!(
        seen[0].trailers,
        [("x-checksum".to_string(), "abc".to_string())]
    );
    assert!(
        seen[0].names_as_sent.iter().any(|n| n == "X-Custom-Header"),
        "{:?}",
        seen[0].names_as_sent
    );
    assert_eq!(seen[1].version, 0, "HTTP/1.0 goes up as HTTP/1.0");
    assert_eq!(seen[2].header("x-request-id"), Some("rid-1"));
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_header_case_not_kept_names_go_up_in_lowercase() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.proxy.preserve_header_case = false;
    }))
    .await;
    let request = b"GET /api/v1/channels/7 HTTP/1.1\r\nHost: x\r\nX-Custom-Header: 1\r\n\r\n";
    assert_eq!(raw(dw.addr, request).await.status, 200);
    let seen = up.recorded();
    let names = &seen[0].names_as_sent;
    assert!(names.iter().any(|n| n == "x-custom-header"), "{names:?}");
    assert!(!names.iter().any(|n| n == "X-Custom-Header"), "{names:?}");
    assert_eq!(seen[0].header("x-custom-header"), Some("1"));
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_trailers_reach_a_client_that_accepts_them() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let seen = asked.clone();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 8192];
        let n = stream.read(&mut buf).await.unwrap();
        *seen.lock().unwrap() = String::from_utf8_lossy(&buf[..n]).to_lowercase();
        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntrailer: X-Sum\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Sum: 9\r\n\r\n";
        stream.write_all(answer.as_bytes()).await.unwrap();
        let _ = stream.read(&mut buf).await;
    });
    let dw = start(config(&format!("http://{addr}"), |_| {})).await;
    let answer = exchanged(
        dw.addr,
        b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\nte: trailers\r\nconnection: close\r\n\r\n",
    )
    .await;
    let answer = String::from_utf8_lossy(&answer);
    // hyper writes trailer names in lowercase (the README says so).
    assert!(answer.ends_with("0\r\nx-sum: 9\r\n\r\n"), "{answer}");
    assert!(
        asked.lock().unwrap().contains("te: trailers"),
        "the upstream was told"
    );
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_order_is_kept_except_that_repeated_names_travel_together() {
    let (up, dw) = sidecar().await;
    let request = b"GET /api/v1/channels/7 HTTP/1.1\r\nHost: x\r\nX-B: 1\r\nX-A: 1\r\nX-C: 1\r\nX-A: 2\r\nX-Request-Id: r\r\n\r\n";
    assert_eq!(raw(dw.addr, request).await.status, 200);
    let seen = &up.recorded()[0];
    let ours: Vec<(&str, &str)> = seen
        .names_as_sent
        .iter()
        .zip(&seen.headers)
        .filter(|(n, _)| n.starts_with("X-"))
        .map(|(n, (_, v))| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        ours,
        [
            ("X-B", "1"),
            ("X-A", "1"),
            ("X-A", "2"),
            ("X-C", "1"),
            ("X-Request-Id", "r")
        ]
    );
    dw.stop().await;
}

/// What the sidecar at `addr` sends back to `request`, to the end of the connection (5 s at most).
async fn exchanged(addr: std::net::SocketAddr, request: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    client.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    answer
}

/// An upstream that answers every request on every connection with `answer`.
async fn canned_upstream(answer: Vec<u8>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let mut buf = Vec::new();
                while super::upstream::read_request(&mut stream, &mut buf)
                    .await
                    .is_some()
                {
                    if stream.write_all(&answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A chunked body's bytes.
fn dechunked(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&body[..line_end]).unwrap(), 16).unwrap();
        body = &body[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

/// Issue 34, defects 9 and 10: an upstream answer with both `Content-Length` and chunked is
/// read by its chunks (RFC 9112 §6.3), and the stale length is not passed on (the client got
/// "hel" of "hello", then lost its next pipelined request); a transfer coding under chunked
/// (`gzip, chunked`) reaches the client as a content coding instead of being dropped (the
/// client got gzip bytes it had no way to know were gzip). Both seen red first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_is_framed_by_its_chunks_and_keeps_its_codings() {
    use std::io::Write;
    let both = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    let up = canned_upstream(both.to_vec()).await;
    let dw = start(config(&format!("http://{up}"), |_| {})).await;
    let pipelined = b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\nGET /api/v1/channels/8 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    let answer = String::from_utf8_lossy(&exchanged(dw.addr, pipelined).await).to_lowercase();
    assert_eq!(
        answer.matches("http/1.1 200 ok").count(),
        2,
        "both answered: {answer}"
    );
    assert_eq!(answer.matches("hello").count(), 2, "whole: {answer}");
    assert!(!answer.contains("content-length: 3"), "{answer}");
    dw.stop().await;

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(br#"{"id":7}"#).unwrap();
    let gz = gz.finish().unwrap();
    let mut coded = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: gzip, chunked\r\n\r\n{:x}\r\n",
        gz.len()
    )
    .into_bytes();
    coded.extend_from_slice(&gz);
    coded.extend_from_slice(b"\r\n0\r\n\r\n");
    let up = canned_upstream(coded).await;
    let dw = start(config(&format!("http://{up}"), |_| {})).await;
    let answer = exchanged(
        dw.addr,
        b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    let head_end = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&answer[..head_end]).to_lowercase();
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let body = if head.contains("transfer-encoding: chunked") {
        dechunked(&answer[head_end..])
    } else {
        answer[head_end..].to_vec()
    };
    let mut plain = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut plain)
        .unwrap();
    assert_eq!(plain, r#"{"id":7}"#);
    dw.stop().await;
}
