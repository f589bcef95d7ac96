//! The live sidecar over real loopback sockets: a raw client, driftwatch, a recording upstream.

use std::time::Duration;

use driftwatch::policy::Mode;

use super::kinds::channel_without;
use super::sidecar::{admin_get, config, raw, sample, scrape, start};
use super::upstream::{self, Recorded, ok};

const HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "te",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
];

/// The headers the client sent, minus hop-by-hop ones (and those `Connection` names) and
/// `host`, lowercased, in order.
fn end_to_end(sent: &[(&str, &str)]) -> Vec<(String, String)> {
    let named: Vec<String> = sent
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(',').map(|n| n.trim().to_ascii_lowercase()))
        .collect();
    sent.iter()
        .filter(|(k, _)| {
            !HOP.contains(&k.to_ascii_lowercase().as_str())
                && !named.contains(&k.to_ascii_lowercase())
        })
        .filter(|(k, _)| !k.eq_ignore_ascii_case("host"))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
        .collect()
}

/// What the upstream got, minus the headers driftwatch adds (`host`, `x-forwarded-*`) and the
/// framing of its own hop (`transfer-encoding`, checked through `Recorded::chunked`).
fn received(r: &Recorded) -> Vec<(String, String)> {
    r.headers
        .iter()
        .filter(|(k, _)| k != "host" && k != "transfer-encoding" && !k.starts_with("x-forwarded-"))
        .cloned()
        .collect()
}

/// A JSON PUT with a `Content-Length`.
fn put_json(target: &str, body: &str) -> Vec<u8> {
    let len = body.len().to_string();
    request(
        "PUT",
        target,
        &[
            ("Host", "x"),
            ("Content-Type", "application/json"),
            ("Content-Length", &len),
        ],
        body.as_bytes(),
    )
}

fn request(method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\n").into_bytes();
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_forwards_clean_and_drifted_requests_byte_for_byte() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |_| {})).await;
    let drifted = channel_without("graphicsElementIds")
        .to_string()
        .replace("\"ffmpegProfileId\":1", "\"ffmpegProfileId\":\"1\"");
    let parts = ["{\"number\":\"7\",\"name\":\"Retro", " TV", "\"}"];
    let chunked_body: String = parts
        .iter()
        .map(|p| format!("{:x}\r\n{p}\r\n", p.len()))
        .collect::<String>()
        + "0\r\n\r\n";
    // (method, target, headers, wire body, body the upstream must see)
    type Case<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, Vec<u8>, Vec<u8>);
    let cases: Vec<Case> = vec![
        (
            "GET",
            "/api/v1/playouts?query=caf%C3%A9+bar&pageSize=30&x=%7e%2F&page_size=2",
            vec![
                ("Host", "mcp.local"),
                ("User-Agent", "mcp/1"),
                ("Accept", "application/json"),
                ("X-Request-Id", "req-1"),
                (
                    "traceparent",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                ),
                ("Authorization", "Bearer s3cret"),
                ("Connection", "keep-alive, X-Hop"),
                ("X-Hop", "drop-me"),
                ("Keep-Alive", "timeout=5"),
                ("X-Custom", "A  b"),
            ],
            vec![],
            vec![],
        ),
        (
            "PUT",
            "/api/v1/channels/7",
            vec![
                ("Host", "mcp.local"),
                ("Content-Type", "application/json"),
                ("Content-Length", "LEN"),
                ("X-Request-Id", "req-2"),
            ],
            drifted.clone().into_bytes(),
            drifted.clone().into_bytes(),
        ),
        (
            "PUT",
            "/api/v1/channels/8",
            vec![
                ("Host", "mcp.local"),
                ("Content-Type", "application/json"),
                ("Transfer-Encoding", "chunked"),
                ("X-Request-Id", "req-3"),
            ],
            chunked_body.into_bytes(),
            b"{\"number\":\"7\",\"name\":\"Retro TV\"}".to_vec(),
        ),
    ];
    for (method, target, headers, wire, _) in &cases {
        let len = wire.len().to_string();
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (*k, if *v == "LEN" { len.as_str() } else { *v }))
            .collect();
        let resp = raw(dw.addr, &request(method, target, &headers, wire)).await;
        assert_eq!(
            resp.status,
            200,
            "{method} {target}: {}",
            String::from_utf8_lossy(&resp.body)
        );
        assert_eq!(resp.header("x-upstream"), Some("yes"));
        assert_eq!(resp.body, b"{\"ok\":true}");
    }
    let got = up.recorded();
    assert_eq!(got.len(), cases.len());
    for ((method, target, headers, wire, body), r) in cases.iter().zip(&got) {
        let len = wire.len().to_string();
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (*k, if *v == "LEN" { len.as_str() } else { *v }))
            .collect();
        assert_eq!(
            (&r.method, &r.target),
            (&method.to_string(), &target.to_string())
        );
        assert_eq!(received(r), end_to_end(&headers), "{target}");
        assert_eq!(&r.body, body, "{target}");
        assert_eq!(r.header("host"), Some(up.addr.to_string().as_str()));
        assert_eq!(r.header("x-forwarded-for"), Some("127.0.0.1"));
        assert_eq!(r.header("x-forwarded-host"), Some("mcp.local"));
        assert_eq!(r.header("x-forwarded-proto"), Some("http"));
    }
    assert!(got[2].chunked, "a chunked request stays chunked");
    assert!(
        !got[0].chunked && got[0].header("content-length").is_none(),
        "a GET without a body gets none: {:?}",
        got[0].headers
    );
    assert!(!got[1].chunked);
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_is_added_when_missing_and_preserve_host_keeps_the_client_host() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.proxy.preserve_host = true;
        c.proxy.forwarded_headers = false;
    }))
    .await;
    let resp = raw(
        dw.addr,
        &request("GET", "/api/v1/channels/7", &[("Host", "mcp.local")], b""),
    )
    .await;
    let r = &up.recorded()[0];
    let id = r.header("x-request-id").expect("a request id is forwarded");
    assert_eq!(id.len(), 32);
    assert_eq!(
        resp.header("x-request-id"),
        Some(id),
        "and returned to the client"
    );
    assert_eq!(r.header("host"), Some("mcp.local"));
    assert!(
        r.headers
            .iter()
            .all(|(k, _)| !k.starts_with("x-forwarded-"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_refuses_with_problem_json_and_the_upstream_receives_nothing() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    // Decided on the request alone: this upstream's `{"ok":true}` is no channel, so a read
    // before the write would refuse the omitting PUT (read_before_write.rs tests that).
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.proxy.mode = Mode::Enforce;
        c.enforce.read_before_write = Some(false);
    }))
    .await;
    let resp = raw(
        dw.addr,
        &request(
            "GET",
            "/api/v1/playouts?page_size=5",
            &[("Host", "x"), ("X-Request-Id", "r-9")],
            b"",
        ),
    )
    .await;
    assert_eq!(resp.status, 422);
    assert_eq!(
        resp.header("content-type"),
        Some("application/problem+json")
    );
    assert!(resp.body.starts_with(b"{\"detail\":"), "detail first");
    let problem = resp.json();
    assert_eq!(
        problem["detail"],
        "query parameter `page_size` is not accepted by GET /api/v1/playouts (listPlayouts); did you mean `pageSize`?"
    );
    assert_eq!(problem["status"], 422);
    assert_eq!(problem["request_id"], "r-9");
    assert_eq!(
        resp.header("x-request-id"),
        Some("r-9"),
        "the client's id comes back"
    );
    assert_eq!(problem["findings"][0]["suggestion"], "pageSize");
    // A warning (omitted field) is logged, not blocked, by default; a clean request passes.
    let body = channel_without("graphicsElementIds").to_string();
    let put = raw(dw.addr, &put_json("/api/v1/channels/7", &body)).await;
    assert_eq!(put.status, 200);
    let clean = raw(
        dw.addr,
        &request("GET", "/api/v1/playouts?pageSize=5", &[("Host", "x")], b""),
    )
    .await;
    assert_eq!(clean.status, 200);
    let targets: Vec<String> = up.recorded().iter().map(|r| r.target.clone()).collect();
    assert_eq!(
        targets,
        ["/api/v1/channels/7", "/api/v1/playouts?pageSize=5"],
        "the refused request never reached the upstream"
    );
    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(
            &m,
            "driftwatch_blocked_total{operation=\"listPlayouts\",kind=\"unknown_query_param\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(
            &m,
            "driftwatch_requests_total{operation=\"listPlayouts\",outcome=\"blocked\",code=\"422\"}"
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_by_the_right_amounts() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |_| {})).await;
    let before = scrape(dw.admin).await;
    for _ in 0..3 {
        raw(
            dw.addr,
            &request(
                "GET",
                "/api/v1/playouts?page_size=5&pageNum=x",
                &[("Host", "x")],
                b"",
            ),
        )
        .await;
    }
    raw(
        dw.addr,
        &request("GET", "/api/v1/nowhere", &[("Host", "x")], b""),
    )
    .await;
    raw(
        dw.addr,
        &request("GET", "/api/v1/channels/7", &[("Host", "x")], b""),
    )
    .await;
    let after = scrape(dw.admin).await;
    let delta = |series: &str| sample(&after, series) - sample(&before, series);
    assert_eq!(
        delta(
            "driftwatch_findings_total{kind=\"unknown_query_param\",operation=\"listPlayouts\",severity=\"error\",blame=\"client\"}"
        ),
        3.0
    );
    assert_eq!(
        delta(
            "driftwatch_findings_total{kind=\"param_type_mismatch\",operation=\"listPlayouts\",severity=\"error\",blame=\"client\"}"
        ),
        3.0
    );
    assert_eq!(
        delta(
            "driftwatch_unknown_query_params_total{operation=\"listPlayouts\",param=\"page_size\"}"
        ),
        3.0
    );
    assert_eq!(
        delta(
            "driftwatch_findings_total{kind=\"unknown_operation\",operation=\"_unknown\",severity=\"error\",blame=\"client\"}"
        ),
        1.0
    );
    assert_eq!(
        delta(
            "driftwatch_requests_total{operation=\"listPlayouts\",outcome=\"forwarded\",code=\"200\"}"
        ),
        3.0
    );
    assert_eq!(
        delta(
            "driftwatch_requests_total{operation=\"getChannel\",outcome=\"forwarded\",code=\"200\"}"
        ),
        1.0
    );
    assert_eq!(delta("driftwatch_audit_duration_seconds_count"), 5.0);
    assert_eq!(sample(&after, "driftwatch_spec_operations"), 10.0);
    assert!(
        after.contains("driftwatch_spec_info{revision=\""),
        "{after}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_refuses_connections_gives_502_problem_json_and_is_counted() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let dw = start(config(&format!("http://{addr}"), |_| {})).await;
    let resp = raw(
        dw.addr,
        &request("GET", "/api/v1/channels/7", &[("Host", "x")], b""),
    )
    .await;
    assert_eq!(resp.status, 502);
    assert_eq!(
        resp.header("content-type"),
        Some("application/problem+json")
    );
    let detail = resp.json()["detail"].as_str().unwrap().to_string();
    assert!(
        detail.starts_with(&format!(
            "driftwatch could not reach the upstream {addr}: connect error"
        )),
        "{detail}"
    );
    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(&m, "driftwatch_upstream_errors_total{cause=\"connect\"}"),
        1.0
    );
    assert_eq!(
        sample(
            &m,
            "driftwatch_requests_total{operation=\"getChannel\",outcome=\"upstream_error\",code=\"502\"}"
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_streams_through_unaudited() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.audit.max_body = 64
    }))
    .await;
    let body = channel_without("graphicsElementIds")
        .to_string()
        .replace("\"ffmpegProfileId\":1", "\"ffmpegProfileId\":\"1\"");
    let resp = raw(dw.addr, &put_json("/api/v1/channels/7", &body)).await;
    assert_eq!(resp.status, 200);
    // Chunked and over the limit too.
    let chunked = format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len());
    raw(
        dw.addr,
        &request(
            "PUT",
            "/api/v1/channels/8",
            &[
                ("Host", "x"),
                ("Content-Type", "application/json"),
                ("Transfer-Encoding", "chunked"),
            ],
            chunked.as_bytes(),
        ),
    )
    .await;
    let got = up.recorded();
    assert_eq!(got[0].body, body.as_bytes());
    assert_eq!(got[1].body, body.as_bytes());
    assert!(got[1].chunked);
    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(&m, "driftwatch_unaudited_total{reason=\"body_too_large\"}"),
        2.0
    );
    assert_eq!(
        sample(
            &m,
            "driftwatch_findings_total{kind=\"body_type_mismatch\",operation=\"updateChannel\",severity=\"error\",blame=\"client\"}"
        ),
        0.0
    );
    assert_eq!(
        sample(
            &m,
            "driftwatch_findings_total{kind=\"unaudited\",operation=\"updateChannel\",severity=\"info\",blame=\"client\"}"
        ),
        2.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_rejected_links_a_4xx_to_the_drift_and_not_to_clean_requests() {
    let up = upstream::start(
        std::sync::Arc::new(|_: &Recorded| {
            (400, "{\"error\":\"unknown query parameter\"}".to_string())
        }),
        Duration::ZERO,
        None,
    )
    .await;
    let dw = start(config(&format!("http://{}", up.addr), |_| {})).await;
    let drifted = raw(
        dw.addr,
        &request("GET", "/api/v1/playouts?page_size=5", &[("Host", "x")], b""),
    )
    .await;
    assert_eq!(
        drifted.status, 400,
        "observe mode passes the API's answer through"
    );
    let clean = raw(
        dw.addr,
        &request("GET", "/api/v1/playouts?pageSize=5", &[("Host", "x")], b""),
    )
    .await;
    assert_eq!(clean.status, 400);
    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(
            &m,
            "driftwatch_findings_total{kind=\"upstream_rejected\",operation=\"listPlayouts\",severity=\"error\",blame=\"client\"}"
        ),
        1.0
    );
    let recent = admin_get(dw.admin, "/findings?kind=upstream_rejected")
        .await
        .json();
    let events = recent["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["status"], 400);
    let kinds = super::util::strings(&events[0]["findings"], "kind");
    assert_eq!(kinds, ["unknown_query_param", "upstream_rejected"]);
}
