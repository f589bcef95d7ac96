//! The response audit in the running sidecar, over real sockets: each response kind from an
//! upstream answer and its clean twin, the answer reaching the client untouched, response
//! findings never blocking, sampling, and the stale-spec story (the API returns a field that
//! neither the spec's GET nor its PUT declares).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use driftwatch::config::Config;
use driftwatch::policy::Mode;
use serde_json::Value;
use tokio::net::TcpListener;

use super::responses::{Answer, response_twins, stored_channel};
use super::sidecar::{admin_get, config, raw, sample, scrape, start};
use super::upstream::{self, TypedResponder};
use super::util::eventually;

fn request(method: &str, target: &str, rid: &str) -> Vec<u8> {
    format!("{method} {target} HTTP/1.1\r\nhost: x\r\nx-request-id: {rid}\r\nx-mcp-tool: get_channel\r\n\r\n")
        .into_bytes()
}

/// Events written to a file by a sidecar that was stopped (so every late audit finished).
fn events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn events_file(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("driftwatch-{name}-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// An upstream that answers the request whose id is `bad-*` with `bad` and any other with `good`.
async fn twin_upstream(bad: Answer, good: Answer) -> SocketAddr {
    let responder: TypedResponder = Arc::new(move |r| {
        let a = if r
            .header("x-request-id")
            .is_some_and(|id| id.starts_with("bad"))
        {
            &bad
        } else {
            &good
        };
        (a.status, a.content_type, a.body.clone())
    });
    upstream::start_typed(responder, Duration::ZERO, None)
        .await
        .addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_kind_is_reported_live_and_its_twin_is_not() {
    let mut problems = Vec::new();
    for (i, twin) in response_twins().into_iter().enumerate() {
        let up = twin_upstream(twin.bad.clone(), twin.good.clone()).await;
        let log = events_file(&format!("twin-{i}"));
        let path = log.display().to_string();
        // Enforce mode: response findings still never block.
        let dw = start(config(&format!("http://{up}"), |c| {
            c.events.output = path;
            c.proxy.mode = Mode::Enforce;
        }))
        .await;
        let bad = raw(dw.addr, &request(twin.method, twin.target, "bad-1")).await;
        let good = raw(dw.addr, &request(twin.method, twin.target, "good-1")).await;
        dw.stop().await;
        if (bad.status, bad.body.as_slice()) != (twin.bad.status, twin.bad.body.as_bytes()) {
            problems.push(format!(
                "{}: the client did not get the upstream's answer: {bad:?}",
                twin.kind
            ));
        }
        assert_eq!(good.status, twin.good.status);
        let found: Vec<Value> = events(&log)
            .into_iter()
            .filter(|e| e["request_id"] == "bad-1")
            .flat_map(|e| e["findings"].as_array().unwrap().clone())
            .collect();
        if !found.iter().any(|f| {
            f["kind"] == twin.kind.as_str()
                && f["field"] == twin.field
                && f["blame"] == "server"
                && f["action"] == "log"
        }) {
            problems.push(format!(
                "{}: no event for `{}`: {found:?}",
                twin.kind, twin.field
            ));
        }
        let clean: Vec<Value> = events(&log)
            .into_iter()
            .filter(|e| e["request_id"] == "good-1")
            .collect();
        if !clean.is_empty() {
            problems.push(format!("twin of {} must be clean: {clean:?}", twin.kind));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The Channels spec as if regenerated before the API grew `graphicsElementIds`.
fn stale_spec() -> std::path::PathBuf {
    let text =
        driftwatch::demo::stale_spec().expect("the example spec declares graphicsElementIds");
    let path = std::env::temp_dir().join(format!("driftwatch-stale-{}.yaml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

fn stale_config(api: SocketAddr, edit: impl FnOnce(&mut Config)) -> Config {
    config(&format!("http://{api}"), |c| {
        c.spec.path = Some(stale_spec());
        edit(c);
    })
}

async fn demo_api() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(driftwatch::demo::api::serve(listener));
    addr
}

/// Wait until `series` reaches `value` on `/metrics` (late audits run after the response).
async fn until_sample(admin: SocketAddr, series: &str, value: f64) -> String {
    eventually(&format!("{series} to reach {value}"), || async {
        let text = scrape(admin).await;
        (sample(&text, series) >= value).then_some(text)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_spec_raises_replace_will_drop_field_once_naming_both_operations() {
    let api = demo_api().await;
    let dw = start(stale_config(api, |_| {})).await;
    for i in 0..3 {
        let resp = raw(
            dw.addr,
            &request("GET", "/api/v1/channels/7", &format!("g{i}")),
        )
        .await;
        assert_eq!(resp.status, 200);
        assert!(
            resp.json().get("graphicsElementIds").is_some(),
            "the API returns it"
        );
    }
    let undeclared = "driftwatch_findings_total{kind=\"undeclared_response_field\",operation=\"getChannel\",severity=\"warning\",blame=\"server\"}";
    let text = until_sample(dw.admin, undeclared, 3.0).await;
    let hazard = "driftwatch_findings_total{kind=\"replace_will_drop_field\",operation=\"updateChannel\",severity=\"critical\",blame=\"server\"}";
    assert_eq!(
        sample(&text, hazard),
        1.0,
        "once per operation and field, not per response:\n{text}"
    );
    let recent = admin_get(dw.admin, "/findings?kind=replace_will_drop_field")
        .await
        .json();
    let events = recent["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{recent}");
    let f = events[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "replace_will_drop_field")
        .unwrap();
    assert_eq!(
        (
            &f["operation"],
            &f["related_operation"],
            &f["field"],
            &f["blame"]
        ),
        (
            &"updateChannel".into(),
            &"getChannel".into(),
            &"/graphicsElementIds".into(),
            &"server".into()
        )
    );
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains("GET /api/v1/channels/{id} returns `graphicsElementIds`")
            && message.contains("PUT /api/v1/channels/{id} does not declare"),
        "{message}"
    );
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_bounds_body_audits_but_every_status_is_checked() {
    let up = twin_upstream(
        Answer {
            status: 500,
            content_type: "application/json",
            body: "{}".into(),
        },
        Answer {
            status: 200,
            content_type: "application/json",
            body: {
                let mut c = stored_channel();
                c["legacyFlag"] = true.into();
                c.to_string()
            },
        },
    )
    .await;
    let dw = start(config(&format!("http://{up}"), |c| {
        c.audit.response_sample_rate = 0.0
    }))
    .await;
    raw(dw.addr, &request("GET", "/api/v1/channels/7", "good-1")).await;
    raw(dw.addr, &request("GET", "/api/v1/channels/7", "bad-1")).await;
    let status = "driftwatch_findings_total{kind=\"undeclared_status\",operation=\"getChannel\",severity=\"warning\",blame=\"server\"}";
    let text = until_sample(dw.admin, status, 1.0).await;
    assert!(
        !text.contains("kind=\"undeclared_response_field\""),
        "rate 0.0 reads no body:\n{text}"
    );
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_body_over_the_limit_is_not_read_and_is_counted() {
    let mut big = stored_channel();
    big["legacyFlag"] = "x".repeat(4096).into();
    let up = twin_upstream(
        Answer {
            status: 200,
            content_type: "application/json",
            body: big.to_string(),
        },
        Answer {
            status: 200,
            content_type: "application/json",
            body: big.to_string(),
        },
    )
    .await;
    let dw = start(config(&format!("http://{up}"), |c| {
        c.audit.max_response_body = 1024
    }))
    .await;
    let resp = raw(dw.addr, &request("GET", "/api/v1/channels/7", "g1")).await;
    assert_eq!(
        resp.body.len(),
        big.to_string().len(),
        "the client gets it whole"
    );
    let text = until_sample(
        dw.admin,
        "driftwatch_unaudited_total{reason=\"response_too_large\"}",
        1.0,
    )
    .await;
    assert!(
        !text.contains("kind=\"undeclared_response_field\""),
        "{text}"
    );
    dw.stop().await;
}

/// Two operations that share an `operationId` (invalid, and found in real specs): each answer
/// is audited against the operation its request was routed to, not the first with that id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_is_audited_against_its_own_operation_when_two_share_an_id() {
    let object = |name: &str, ty: &str| {
        serde_json::json!({"description": "ok", "content": {"application/json": {"schema":
            {"type": "object", "properties": {name: {"type": ty}}}}}})
    };
    let spec = serde_json::json!({"openapi": "3.1.0", "info": {"title": "dup", "version": "1"},
        "paths": {
            "/a": {"get": {"operationId": "getThing", "responses": {"200": object("a", "integer")}}},
            "/b": {"get": {"operationId": "getThing", "responses": {"201": object("b", "string")}}}}});
    let path = std::env::temp_dir().join(format!("driftwatch-dup-{}.json", std::process::id()));
    std::fs::write(&path, spec.to_string()).unwrap();
    // `/b` answers 201 as declared, and 200 (undeclared there) to the request `bad-b`.
    let responder: TypedResponder = Arc::new(|r| match r.target.as_str() {
        "/a" => (200, "application/json", r#"{"a":1}"#.into()),
        _ if r.header("x-request-id") == Some("bad-b") => {
            (200, "application/json", r#"{"b":"x"}"#.into())
        }
        _ => (201, "application/json", r#"{"b":"x"}"#.into()),
    });
    let up = upstream::start_typed(responder, Duration::ZERO, None).await;
    let log = events_file("dup-id");
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(path.clone());
        c.events.output = log.display().to_string();
    }))
    .await;
    for (target, rid, status) in [
        ("/b", "good-b", 201),
        ("/a", "good-a", 200),
        ("/b", "bad-b", 200),
    ] {
        assert_eq!(
            raw(dw.addr, &request("GET", target, rid)).await.status,
            status
        );
    }
    dw.stop().await;
    let found: Vec<(String, String)> = events(&log)
        .iter()
        .flat_map(|e| {
            let rid = e["request_id"].as_str().unwrap().to_string();
            let kinds = e["findings"].as_array().unwrap().iter();
            kinds.map(move |f| (rid.clone(), f["kind"].as_str().unwrap().to_string()))
        })
        .collect();
    assert_eq!(
        found,
        [("bad-b".to_string(), "undeclared_status".to_string())]
    );
}
