//! Silent-clear detection end to end: a real driftwatch in front of the demo's Channels API
//! (which really clears what a PUT omits), or of a scripted upstream where a case needs one.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use driftwatch::policy::Mode;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::sidecar::{admin_get, config, raw, sample, scrape, start};
use super::upstream::{self, Recorded};
use super::util::eventually;

pub async fn demo_api() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(driftwatch::demo::api::serve(listener));
    addr
}

pub fn get(path: &str, auth: &str, rid: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nhost: x\r\nauthorization: {auth}\r\nx-request-id: {rid}\r\n\r\n"
    )
    .into_bytes()
}

pub fn put(path: &str, auth: &str, rid: &str, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!("PUT {path} HTTP/1.1\r\nhost: x\r\nauthorization: {auth}\r\nx-request-id: {rid}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// What the agent's stale tool sends back: the channel it read, without id, uniqueId and
/// graphicsElementIds, renamed.
pub fn stale_body(read: &Value) -> Value {
    let mut body = read.clone();
    let map = body.as_object_mut().unwrap();
    for key in ["id", "uniqueId", "graphicsElementIds"] {
        map.shift_remove(key);
    }
    map.insert("name".into(), json!("Retro TV HD"));
    body
}

/// Wait (bounded) until the memory holds `n` resources: GET responses are read after their
/// last byte went to the client, off the response path.
async fn armed(admin: SocketAddr, n: f64) {
    eventually(&format!("the memory to hold {n} resources"), || async {
        (sample(&scrape(admin).await, "driftwatch_memory_entries") >= n).then_some(())
    })
    .await;
}

/// Wait until `n` responses have had their late work done (audit, memory).
async fn responses_checked(admin: SocketAddr, n: f64) {
    eventually(&format!("{n} responses checked"), || async {
        (sample(&scrape(admin).await, "driftwatch_responses_checked_total") >= n).then_some(())
    })
    .await;
}

/// The kinds of the findings recorded for request `rid` (all its events), waiting (bounded) for
/// `until` to appear when given.
pub async fn kinds_of(admin: SocketAddr, rid: &str, until: Option<&str>) -> Vec<(String, String)> {
    eventually(&format!("`{until:?}` for {rid}"), || async {
        let events = admin_get(admin, "/findings").await.json();
        let mut found: Vec<(String, String)> = Vec::new();
        for e in events["events"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .filter(|e| e["request_id"] == rid)
        {
            for f in e["findings"].as_array().unwrap() {
                found.push((
                    f["kind"].as_str().unwrap().into(),
                    f["field"].as_str().unwrap().into(),
                ));
            }
        }
        until
            .is_none_or(|k| found.iter().any(|(kind, _)| kind == k))
            .then_some(found)
    })
    .await
}

/// An API whose PUT answers 204 and whose next GET shows what the PUT left (the list emptied
/// when it was omitted): only the next GET can confirm the clear.
pub async fn api_answering_204() -> SocketAddr {
    let state = Arc::new(Mutex::new(Value::Object(driftwatch::demo::api::seed())));
    let responder = Arc::new(move |r: &Recorded| -> (u16, String) {
        let mut s = state.lock().unwrap();
        if r.method == "PUT" {
            let sent: Value = serde_json::from_slice(&r.body).unwrap();
            s["graphicsElementIds"] = sent.get("graphicsElementIds").cloned().unwrap_or(json!([]));
            return (204, String::new());
        }
        (200, s.to_string())
    });
    upstream::start(responder, Duration::ZERO, None).await.addr
}

/// Alice GETs channel 7 (request `g1`); once driftwatch remembers it, `put_auth` PUTs it back
/// through the stale tool (request `p1`).
async fn read_then_stale_put(
    dw: &super::sidecar::Running,
    put_auth: &str,
) -> (Value, super::sidecar::RawResponse) {
    let read = raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g1"))
        .await
        .json();
    armed(dw.admin, 1.0).await;
    let resp = raw(
        dw.addr,
        &put("/api/v1/channels/7", put_auth, "p1", &stale_body(&read)),
    )
    .await;
    (read, resp)
}

pub fn pair(kind: &str, field: &str) -> (String, String) {
    (kind.into(), field.into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_that_drops_a_held_field_is_at_risk_then_confirmed_by_its_own_response() {
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), |_| {})).await;
    let (read, resp) = read_then_stale_put(&dw, "Bearer alice").await;
    assert_eq!(read["graphicsElementIds"], json!([3, 7]));
    assert_eq!(resp.status, 200, "observe mode forwards it");
    let found = kinds_of(dw.admin, "p1", Some("silent_clear")).await;
    assert_eq!(
        found,
        [
            pair("silent_clear_risk", "/graphicsElementIds"),
            pair("silent_clear", "/graphicsElementIds")
        ]
    );
    let events = admin_get(dw.admin, "/findings?kind=silent_clear")
        .await
        .json();
    let clear = &events["events"][0]["findings"][0];
    assert_eq!(clear["evidence"]["read_request_id"], "g1");
    assert_eq!(clear["evidence"]["write_request_id"], "p1");
    assert_eq!(clear["evidence"]["value_hash"].as_str().unwrap().len(), 16);
    let m = scrape(dw.admin).await;
    let stage = |s: &str| {
        sample(
            &m,
            &format!(
                "driftwatch_silent_clears_total{{operation=\"updateChannel\",field=\"graphicsElementIds\",stage=\"{s}\"}}"
            ),
        )
    };
    assert_eq!(
        (stage("at_risk"), stage("confirmed"), stage("omitted")),
        (1.0, 1.0, 0.0)
    );
    assert_eq!(
        sample(
            &m,
            "driftwatch_findings_total{kind=\"silent_clear_risk\",operation=\"updateChannel\",severity=\"critical\",blame=\"client\"}"
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_get_confirms_when_the_write_response_does_not_show_it() {
    let up = api_answering_204().await;
    let dw = start(config(&format!("http://{up}"), |_| {})).await;
    read_then_stale_put(&dw, "Bearer alice").await;
    assert_eq!(
        kinds_of(dw.admin, "p1", Some("silent_clear_risk")).await,
        [pair("silent_clear_risk", "/graphicsElementIds")]
    );
    raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g2")).await;
    assert_eq!(
        kinds_of(dw.admin, "g2", Some("silent_clear")).await,
        [pair("silent_clear", "/graphicsElementIds")]
    );
    let events = admin_get(dw.admin, "/findings?kind=silent_clear")
        .await
        .json();
    assert_eq!(
        events["events"][0]["findings"][0]["evidence"]["write_request_id"],
        "p1"
    );
    assert_eq!(
        events["events"][0]["findings"][0]["evidence"]["read_request_id"],
        "g1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_that_includes_the_field_is_clean_and_an_empty_list_is_only_omitted() {
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), |_| {})).await;
    let read = raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g1"))
        .await
        .json();
    armed(dw.admin, 1.0).await;
    let mut full = stale_body(&read);
    full["graphicsElementIds"] = json!([3, 7]);
    assert_eq!(
        raw(
            dw.addr,
            &put("/api/v1/channels/7", "Bearer alice", "p1", &full)
        )
        .await
        .status,
        200
    );
    // Now clear the list on purpose, read it back, and omit it: nothing to lose.
    full["graphicsElementIds"] = json!([]);
    raw(
        dw.addr,
        &put("/api/v1/channels/7", "Bearer alice", "p2", &full),
    )
    .await;
    let read = raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g2"))
        .await
        .json();
    assert_eq!(read["graphicsElementIds"], json!([]));
    // g1, p1, p2 and g2 are done: the memory now holds g2's empty list.
    responses_checked(dw.admin, 4.0).await;
    raw(
        dw.addr,
        &put(
            "/api/v1/channels/7",
            "Bearer alice",
            "p3",
            &stale_body(&read),
        ),
    )
    .await;
    assert_eq!(kinds_of(dw.admin, "p1", None).await, []);
    assert_eq!(
        kinds_of(dw.admin, "p3", Some("omitted_on_replace")).await,
        [pair("omitted_on_replace", "/graphicsElementIds")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_get_does_not_arm_the_memory() {
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), |_| {})).await;
    read_then_stale_put(&dw, "Bearer bob").await;
    assert_eq!(
        kinds_of(dw.admin, "p1", Some("omitted_on_replace")).await,
        [pair("omitted_on_replace", "/graphicsElementIds")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_refuses_the_erasing_put_with_409_and_the_api_keeps_the_list() {
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), |c| {
        c.proxy.mode = Mode::Enforce
    }))
    .await;
    let (read, resp) = read_then_stale_put(&dw, "Bearer alice").await;
    assert_eq!(resp.status, 409);
    let problem = resp.json();
    assert_eq!(
        problem["detail"],
        "Include `graphicsElementIds` with its current value (read the resource again if you do not have it), then retry. This write replaces the whole resource, so it would erase it: the body leaves it out, and it holds a value."
    );
    assert_eq!(problem["include_fields"], json!(["graphicsElementIds"]));
    let after = raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g2"))
        .await
        .json();
    assert_eq!(after["graphicsElementIds"], json!([3, 7]));
    // Without a prior GET through driftwatch (a restart): enforce reads the channel just before
    // the write and refuses it on that read (issue 63; `read_before_write.rs` has the rest).
    let fresh = demo_api().await;
    let dw2 = start(config(&format!("http://{fresh}"), |c| {
        c.proxy.mode = Mode::Enforce
    }))
    .await;
    let stale = stale_body(&read);
    let resp = raw(
        dw2.addr,
        &put("/api/v1/channels/7", "Bearer alice", "p1", &stale),
    )
    .await;
    assert_eq!(resp.status, 409);
    // Told not to read, it has no evidence: the omission alone (a warning) is not blocked.
    let dw3 = start(config(&format!("http://{fresh}"), |c| {
        c.proxy.mode = Mode::Enforce;
        c.enforce.read_before_write = Some(false);
    }))
    .await;
    let resp = raw(
        dw3.addr,
        &put("/api/v1/channels/7", "Bearer alice", "p1", &stale),
    )
    .await;
    assert_eq!(resp.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_response_is_remembered_while_the_client_gets_the_bytes_as_sent() {
    use std::io::Write;
    let channel = json!({"id": 7, "name": "Retro TV", "graphicsElementIds": [3, 7]}).to_string();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(channel.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    // A raw upstream that answers with a gzip'd body.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sent = gz.clone();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = Vec::new();
            if upstream::read_request(&mut stream, &mut buf)
                .await
                .is_some()
            {
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\n\r\n",
                    sent.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(&sent).await;
            }
        }
    });
    let dw = start(config(&format!("http://{addr}"), |_| {})).await;
    let resp = raw(
        dw.addr,
        b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\naccept-encoding: gzip\r\n\r\n",
    )
    .await;
    assert_eq!(resp.header("content-encoding"), Some("gzip"));
    assert_eq!(
        resp.body, gz,
        "the client gets the compressed bytes unchanged"
    );
    armed(dw.admin, 1.0).await;
}

/// An API whose PUT keeps what it is not sent (it merges, or computes the field) and answers
/// with the whole resource, as Bitbucket's pull-request PUT does with `id`, `links`,
/// `created_on`.
pub async fn api_that_keeps_omitted_fields() -> SocketAddr {
    let state = Arc::new(Mutex::new(Value::Object(driftwatch::demo::api::seed())));
    let responder = Arc::new(move |r: &Recorded| -> (u16, String) {
        let mut s = state.lock().unwrap();
        if r.method == "PUT" {
            let sent: Value = serde_json::from_slice(&r.body).unwrap();
            for (k, v) in sent.as_object().unwrap() {
                s[k] = v.clone();
            }
        }
        (200, s.to_string())
    });
    upstream::start(responder, Duration::ZERO, None).await.addr
}

/// Issue 50: the write's own answer decides its risk. Shown still holding its value, the field
/// was not at risk: no critical finding, and the operation learns that the field survives
/// omission, so the next stale write is not even `omitted_on_replace` for it; `/spec` says the
/// write now reads as a merge, and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_whose_own_answer_shows_the_field_kept_is_no_risk_and_is_learned() {
    let up = api_that_keeps_omitted_fields().await;
    let dw = start(config(&format!("http://{up}"), |_| {})).await;
    let (_, resp) = read_then_stale_put(&dw, "Bearer alice").await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.json()["graphicsElementIds"], json!([3, 7]));
    responses_checked(dw.admin, 2.0).await;
    let found = kinds_of(dw.admin, "p1", None).await;
    assert!(
        !found
            .iter()
            .any(|(kind, _)| kind.starts_with("silent_clear")),
        "{found:?}"
    );
    let m = scrape(dw.admin).await;
    let critical = "driftwatch_findings_total{kind=\"silent_clear_risk\",operation=\"updateChannel\",severity=\"critical\",blame=\"client\"}";
    assert_eq!(sample(&m, critical), 0.0);
    let spec = admin_get(dw.admin, "/spec").await.json();
    let learned = &spec["learned_writes"][0];
    assert_eq!(
        (
            &learned["operation"],
            &learned["reads_as"],
            &learned["kept"]
        ),
        (
            &json!("updateChannel"),
            &json!("merge"),
            &json!(["graphicsElementIds"])
        ),
        "{spec}"
    );
    // The next stale write: the field is known to survive, so nothing is said of it.
    let read = raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g2"))
        .await
        .json();
    armed(dw.admin, 1.0).await;
    raw(
        dw.addr,
        &put(
            "/api/v1/channels/7",
            "Bearer alice",
            "p2",
            &stale_body(&read),
        ),
    )
    .await;
    responses_checked(dw.admin, 4.0).await;
    let found = kinds_of(dw.admin, "p2", None).await;
    assert!(
        !found
            .iter()
            .any(|(_, field)| field == "/graphicsElementIds"),
        "{found:?}"
    );
}
