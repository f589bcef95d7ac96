//! Every way out of the request path, driven once each through one sidecar in enforce mode:
//! each request is counted exactly once in `driftwatch_requests_total`, with the status the
//! client received; each blocked kind once per request; and response work cut short by the
//! client or the upstream is counted under its own `unaudited` reason.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::kinds::channel_without;
use super::responses::stored_channel;
use super::sidecar::{config, scrape, start};
use super::upstream::read_request;
use super::util::eventually;

/// An upstream with one behaviour per channel id: 7 answers the channel, 8 breaks off its
/// body, 9 answers too late, 10 streams a long body slowly; everything else answers `{}`.
async fn upstream() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(answer(stream));
        }
    });
    (addr, task)
}

async fn answer(mut stream: TcpStream) {
    let mut buf = Vec::new();
    let Some(req) = read_request(&mut stream, &mut buf).await else {
        return;
    };
    let head = |len: usize| {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n"
        )
    };
    let body = match (req.method.as_str(), req.target.as_str()) {
        ("GET", "/api/v1/channels/7") => stored_channel().to_string(),
        ("GET", "/api/v1/channels/8") => {
            let _ = stream.write_all(head(1000).as_bytes()).await;
            // Time for the client to read the head before the connection is cut: a reset
            // discards what the client has not read yet.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let _ = stream.write_all(b"{\"id\":8,").await;
            return; // the connection closes 8 bytes into a 1,000-byte body
        }
        ("GET", "/api/v1/channels/9") => {
            tokio::time::sleep(Duration::from_secs(2)).await;
            "{}".into()
        }
        ("GET", "/api/v1/channels/10") => {
            let _ = stream.write_all(head(1 << 20).as_bytes()).await;
            for _ in 0..200 {
                if stream.write_all(&[b' '; 4096]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            return;
        }
        _ => "{}".into(),
    };
    let _ = stream.write_all(head(body.len()).as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
}

/// Send `request` and read the status line; `hang_up` drops the connection right after it.
async fn status(
    addr: SocketAddr,
    request: &[u8],
    half_close: bool,
    hang_up: bool,
) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    if half_close {
        stream.shutdown().await.unwrap();
    }
    let mut seen = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).await.unwrap_or(0);
        seen.extend_from_slice(&chunk[..n]);
        let head_done = seen.windows(4).any(|w| w == b"\r\n\r\n");
        if n == 0 || (hang_up && head_done) {
            break;
        }
        let text = String::from_utf8_lossy(&seen);
        let len = text.lines().find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
        });
        if let (true, Some(len)) = (head_done, len) {
            let at = seen.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            if seen.len() - at >= len {
                break;
            }
        }
    }
    let code = String::from_utf8_lossy(&seen[..12.min(seen.len())])
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = match seen.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(at) => seen[at + 4..].to_vec(),
        None => Vec::new(),
    };
    (code, body)
}

fn get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer a\r\n\r\n").into_bytes()
}

fn put(body: &str) -> Vec<u8> {
    format!("PUT /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer a\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// Every `driftwatch_requests_total` series as `(outcome, code)` → count, and the
/// `unaudited` and `blocked` series by their label.
fn counted(scrape: &str, family: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in scrape.lines().filter(|l| l.starts_with(family)) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let labels: Vec<&str> = series
            .split(['{', '}', ','])
            .filter(|p| p.contains('='))
            .filter(|p| label.split('+').any(|l| p.starts_with(&format!("{l}="))))
            .collect();
        *out.entry(labels.join(",")).or_default() += value.parse::<f64>().unwrap();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_exit_counts_its_request_once_with_the_status_sent() {
    let (api, api_task) = upstream().await;
    let dw = start(config(&format!("http://{api}"), |c| {
        c.proxy.mode = driftwatch::policy::Mode::Enforce;
        c.proxy.request_timeout_ms = 300;
        c.audit.max_body = 2048;
    }))
    .await;
    let stale = channel_without("graphicsElementIds").to_string();
    let mut extra = stored_channel();
    extra["shiny"] = json!(true);
    let mut sent = Vec::new();
    // clean, and it arms the memory for the 409 below
    sent.push((
        "clean",
        status(dw.addr, &get("/api/v1/channels/7"), false, false)
            .await
            .0,
    ));
    eventually("the GET remembered", || async {
        (super::sidecar::sample(&scrape(dw.admin).await, "driftwatch_memory_entries") >= 1.0)
            .then_some(())
    })
    .await;
    // drifted, forwarded: an undeclared body field is a warning, which never blocks
    sent.push((
        "drifted",
        status(dw.addr, &put(&extra.to_string()), false, false)
            .await
            .0,
    ));
    // blocked 422, with kinds interleaved (type, schema, type)
    let mut mixed = stored_channel();
    mixed["number"] = json!(7);
    mixed["streamingMode"] = json!("Bogus");
    mixed["isEnabled"] = json!("yes");
    let (code, refused) = status(dw.addr, &put(&mixed.to_string()), false, false).await;
    sent.push(("blocked 422", code));
    let refused: Value = serde_json::from_slice(&refused).unwrap();
    let kinds = super::util::strings(&refused["findings"], "kind");
    assert_eq!(
        kinds,
        [
            "body_type_mismatch",
            "body_schema_violation",
            "body_type_mismatch"
        ],
        "one kind twice, apart"
    );
    // blocked 409: the write would erase graphicsElementIds
    sent.push((
        "blocked 409",
        status(dw.addr, &put(&stale), false, false).await.0,
    ));
    // body unreadable: the client promises 100 bytes, sends 1 and closes its side
    let cut = b"PUT /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{";
    sent.push(("unreadable", status(dw.addr, cut, true, false).await.0));
    // body too large for the audit: forwarded unaudited
    let mut big = stored_channel();
    big["name"] = json!("x".repeat(4000));
    sent.push((
        "too large",
        status(dw.addr, &put(&big.to_string()), false, false)
            .await
            .0,
    ));
    // upstream breaks off mid-body; client hangs up mid-body
    sent.push((
        "upstream reset",
        status(dw.addr, &get("/api/v1/channels/8"), false, false)
            .await
            .0,
    ));
    sent.push((
        "client gone",
        status(dw.addr, &get("/api/v1/channels/10"), false, true)
            .await
            .0,
    ));
    sent.push((
        "timeout",
        status(dw.addr, &get("/api/v1/channels/9"), false, false)
            .await
            .0,
    ));
    api_task.abort();
    eventually("the upstream port to close", || async {
        TcpStream::connect(api).await.is_err().then_some(())
    })
    .await;
    sent.push((
        "refused",
        status(dw.addr, &get("/api/v1/channels/7"), false, false)
            .await
            .0,
    ));

    let codes: Vec<(&str, u16)> = sent.clone();
    assert_eq!(
        codes,
        [
            ("clean", 200),
            ("drifted", 200),
            ("blocked 422", 422),
            ("blocked 409", 409),
            ("unreadable", 400),
            ("too large", 200),
            ("upstream reset", 200),
            ("client gone", 200),
            ("timeout", 504),
            ("refused", 502)
        ]
    );
    let m = eventually("the cut responses counted", || async {
        let m = scrape(dw.admin).await;
        let unaudited = counted(&m, "driftwatch_unaudited_total", "reason");
        let both = unaudited.contains_key("reason=\"response_client_gone\"")
            && unaudited.contains_key("reason=\"response_upstream_failed\"");
        let checked = super::sidecar::sample(&m, "driftwatch_responses_checked_total");
        (both && checked >= 5.0).then_some(m)
    })
    .await;
    let requests = counted(&m, "driftwatch_requests_total", "outcome+code");
    let expected: BTreeMap<String, f64> = [
        ("outcome=\"forwarded\",code=\"200\"", 5.0),
        ("outcome=\"blocked\",code=\"422\"", 1.0),
        ("outcome=\"blocked\",code=\"409\"", 1.0),
        ("outcome=\"client_error\",code=\"400\"", 1.0),
        ("outcome=\"upstream_error\",code=\"504\"", 1.0),
        ("outcome=\"upstream_error\",code=\"502\"", 1.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(
        requests, expected,
        "one count per request, with the status sent"
    );
    assert_eq!(requests.values().sum::<f64>(), sent.len() as f64);
    let blocked = counted(&m, "driftwatch_blocked_total", "kind");
    assert_eq!(
        blocked,
        [
            ("kind=\"body_schema_violation\"", 1.0),
            ("kind=\"body_type_mismatch\"", 1.0),
            ("kind=\"silent_clear_risk\"", 1.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        "each blocked kind once per request"
    );
    // The five forwarded answers of a routed request each had their response work done,
    // complete or cut short.
    assert_eq!(
        super::sidecar::sample(&m, "driftwatch_responses_checked_total"),
        5.0
    );
    let unaudited = counted(&m, "driftwatch_unaudited_total", "reason");
    assert_eq!(unaudited.get("reason=\"body_too_large\""), Some(&1.0));
    assert_eq!(unaudited.get("reason=\"response_client_gone\""), Some(&1.0));
    assert_eq!(
        unaudited.get("reason=\"response_upstream_failed\""),
        Some(&1.0)
    );
    // Each answer driftwatch gave for the upstream has an event saying whose fault it was,
    // with the status sent.
    let events = super::sidecar::admin_get(dw.admin, "/findings")
        .await
        .json();
    let mut faults: Vec<(String, u64, String)> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e["error"].is_null())
        .map(|e| {
            let action = e["action"].as_str().unwrap().to_string();
            (
                action,
                e["status"].as_u64().unwrap(),
                e["error"]["fault"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    faults.sort();
    assert_eq!(
        faults,
        [
            ("client_error".to_string(), 400, "client".to_string()),
            ("upstream_error".to_string(), 502, "upstream".to_string()),
            ("upstream_error".to_string(), 504, "upstream".to_string()),
        ]
    );
    dw.stop().await;
}
