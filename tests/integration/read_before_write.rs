//! No silent clear gets through, whatever the memory has seen (issue 63): against the demo's
//! Channels API, which really clears what a PUT omits, a sidecar that never saw the channel
//! (a restart) reads it just before the stale write and decides on that read; a list read
//! teaches the memory each item; a read that is not the resource refuses the write.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use driftwatch::config::Config;
use driftwatch::finding::Kind;
use driftwatch::policy::{Action, Mode};
use serde_json::{Value, json};

use super::sidecar::{config, raw, sample, scrape, start};
use super::silent_clears::{demo_api, get, kinds_of, pair, put, stale_body};
use super::upstream::{self, Recorded};
use super::util::eventually;

/// The channel as the agent read it before the sidecar started: never through driftwatch.
fn read_elsewhere(id: u64) -> Value {
    let seed = match id {
        9 => driftwatch::demo::api::seed_9(),
        _ => driftwatch::demo::api::seed(),
    };
    Value::Object(seed)
}

/// The event of request `rid`, once recorded.
async fn event_of(dw: &super::sidecar::Running, rid: &str) -> Value {
    eventually(&format!("the event of {rid}"), || async {
        let events = super::sidecar::admin_get(dw.admin, "/findings")
            .await
            .json();
        let found = (events["events"].as_array()?.iter()).find(|e| e["request_id"] == rid)?;
        Some(found.clone())
    })
    .await
}

fn enforce(c: &mut Config) {
    c.proxy.mode = Mode::Enforce;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_enforce_reads_the_channel_and_refuses_the_stale_put() {
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), enforce)).await;
    let stale = stale_body(&read_elsewhere(7));
    let resp = raw(
        dw.addr,
        &put("/api/v1/channels/7", "Bearer alice", "p1", &stale),
    )
    .await;
    assert_eq!(resp.status, 409, "{}", String::from_utf8_lossy(&resp.body));
    let problem = resp.json();
    assert_eq!(problem["include_fields"], json!(["graphicsElementIds"]));
    let event = event_of(&dw, "p1").await;
    let read = &event["read_before_write"];
    assert_eq!(read["outcome"], "held", "{event}");
    let read_id = read["request_id"].as_str().unwrap();
    let risk = (event["findings"].as_array().unwrap().iter())
        .find(|f| f["kind"] == "silent_clear_risk")
        .unwrap_or_else(|| panic!("no risk in {event}"));
    assert_eq!(risk["field"], "/graphicsElementIds");
    assert_eq!(risk["severity"], "critical");
    assert_eq!(risk["action"], "block");
    assert_eq!(risk["evidence"]["read_request_id"], read_id);
    assert_eq!(risk["evidence"]["read_before_write"], true);
    let after = raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g2"))
        .await
        .json();
    assert_eq!(
        after["graphicsElementIds"],
        json!([3, 7]),
        "the API kept the list"
    );
    assert_eq!(after["name"], "Retro TV", "and nothing was written");
    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(
            &m,
            "driftwatch_reads_before_write_total{operation=\"updateChannel\",outcome=\"held\"}"
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_repair_alone_fills_the_field_from_its_read() {
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), |c| {
        enforce(c);
        c.enforce
            .kinds
            .insert(Kind::SilentClearRisk, Action::Repair);
    }))
    .await;
    let stale = stale_body(&read_elsewhere(7));
    let resp = raw(
        dw.addr,
        &put("/api/v1/channels/7", "Bearer alice", "p1", &stale),
    )
    .await;
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    assert_eq!(
        resp.header("driftwatch-repaired"),
        Some("graphicsElementIds")
    );
    let written = resp.json();
    assert_eq!(
        (&written["name"], &written["graphicsElementIds"]),
        (&json!("Retro TV HD"), &json!([3, 7])),
        "the rename landed and the list was kept"
    );
    let event = event_of(&dw, "p1").await;
    let read_id = event["read_before_write"]["request_id"].as_str().unwrap();
    assert_eq!(
        event["repair"]["read_request_id"], read_id,
        "the repair completed from the one read: {event}"
    );
    assert_eq!(event["repair"]["if_match"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_agent_sends_empty_clears_as_asked_and_a_missing_channel_is_not_read_as_held() {
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), enforce)).await;
    let mut body = stale_body(&read_elsewhere(7));
    body["graphicsElementIds"] = json!([]);
    let resp = raw(
        dw.addr,
        &put("/api/v1/channels/7", "Bearer alice", "p1", &body),
    )
    .await;
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    let after = raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g1"))
        .await
        .json();
    assert_eq!(after["graphicsElementIds"], json!([]), "cleared as asked");
    // A channel the API does not have: its read answers 404, nothing can be erased, and the
    // write goes on to the API (which answers as it does).
    let stale = stale_body(&read_elsewhere(7));
    let resp = raw(
        dw.addr,
        &put("/api/v1/channels/42", "Bearer alice", "p2", &stale),
    )
    .await;
    assert_eq!(resp.status, 404, "the API's own answer");
    let event = event_of(&dw, "p2").await;
    assert_eq!(event["read_before_write"]["outcome"], "absent", "{event}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_adds_no_request_unless_asked() {
    let up = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let stale = stale_body(&read_elsewhere(7));
    for (read, gets) in [(None, 0), (Some(true), 1)] {
        let dw = start(config(&format!("http://{}", up.addr), |c| {
            c.enforce.read_before_write = read;
        }))
        .await;
        let before = up.recorded().len();
        let resp = raw(
            dw.addr,
            &put("/api/v1/channels/7", "Bearer alice", "p1", &stale),
        )
        .await;
        assert_eq!(resp.status, 200);
        let sent: Vec<String> = up.recorded()[before..]
            .iter()
            .map(|r| r.method.clone())
            .collect();
        let expected: Vec<&str> = (0..gets).map(|_| "GET").chain(["PUT"]).collect();
        assert_eq!(sent, expected, "read_before_write = {read:?}");
        dw.stop().await;
    }
}

/// An API whose GET answers `body` for any channel, and records what it is sent.
async fn api_reading(body: Value) -> upstream::Upstream {
    let body = Arc::new(Mutex::new(body));
    let responder = Arc::new(move |r: &Recorded| -> (u16, String) {
        match r.method.as_str() {
            "GET" => (200, body.lock().unwrap().to_string()),
            _ => (200, "{}".into()),
        }
    });
    upstream::start(responder, Duration::ZERO, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_is_not_the_resource_refuses_the_write_with_its_reason() {
    let envelope = json!({"data": read_elsewhere(7)});
    let mut other = read_elsewhere(7);
    other["id"] = json!(8);
    let cases = [
        (envelope, Action::Block, "it shows none of the fields"),
        (other.clone(), Action::Block, "another resource"),
        (other, Action::Repair, "another resource"),
    ];
    for (answer, action, reason) in cases {
        let up = api_reading(answer).await;
        let dw = start(config(&format!("http://{}", up.addr), |c| {
            enforce(c);
            c.enforce.kinds.insert(Kind::SilentClearRisk, action);
        }))
        .await;
        let stale = stale_body(&read_elsewhere(7));
        let resp = raw(
            dw.addr,
            &put("/api/v1/channels/7", "Bearer alice", "p1", &stale),
        )
        .await;
        assert_eq!(
            resp.status,
            409,
            "{action:?}: {}",
            String::from_utf8_lossy(&resp.body)
        );
        let problem = resp.json();
        let why_key = match action {
            Action::Repair => "repair_refused",
            _ => "read_refused",
        };
        let why = problem[why_key].as_str().unwrap_or_default();
        assert!(why.contains(reason), "{action:?}: {problem}");
        assert!(
            problem["include_fields"]
                .as_array()
                .unwrap()
                .contains(&json!("graphicsElementIds"))
        );
        let puts = up.recorded().iter().filter(|r| r.method == "PUT").count();
        assert_eq!(puts, 0, "no refused write reached the API");
        let event = event_of(&dw, "p1").await;
        assert_eq!(event["read_before_write"]["outcome"], "unusable", "{event}");
        dw.stop().await;
    }
}

/// Alice lists the channels (request `l1`); once both are remembered, she PUTs channel 9 back
/// through the stale tool (request `p1`).
async fn list_then_stale_put(dw: &super::sidecar::Running) -> super::sidecar::RawResponse {
    let list = raw(dw.addr, &get("/api/v1/channels", "Bearer alice", "l1")).await;
    assert_eq!(list.status, 200);
    let nine = (list.json().as_array().unwrap().iter())
        .find(|c| c["id"] == 9)
        .cloned()
        .unwrap();
    eventually("both listed channels remembered", || async {
        (sample(&scrape(dw.admin).await, "driftwatch_memory_entries") >= 2.0).then_some(())
    })
    .await;
    let stale = stale_body(&nine);
    raw(
        dw.addr,
        &put("/api/v1/channels/9", "Bearer alice", "p1", &stale),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_list_read_observe_reports_the_risk_and_confirms_the_clear() {
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), |_| {})).await;
    let resp = list_then_stale_put(&dw).await;
    assert_eq!(resp.status, 200, "observe forwards it");
    let found = kinds_of(dw.admin, "p1", Some("silent_clear")).await;
    assert!(
        found.contains(&pair("silent_clear_risk", "/graphicsElementIds")),
        "{found:?}"
    );
    assert!(
        found.contains(&pair("silent_clear", "/graphicsElementIds")),
        "{found:?}"
    );
    let risk = eventually("the risk's event", || async {
        let events = super::sidecar::admin_get(dw.admin, "/findings")
            .await
            .json();
        let mine = events["events"]
            .as_array()?
            .iter()
            .filter(|e| e["request_id"] == "p1");
        mine.flat_map(|e| e["findings"].as_array().unwrap().iter())
            .find(|f| f["kind"] == "silent_clear_risk")
            .cloned()
    })
    .await;
    assert_eq!(
        risk["evidence"]["read_request_id"], "l1",
        "the list was the evidence"
    );
    let events = super::sidecar::admin_get(dw.admin, "/findings")
        .await
        .json();
    let read = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e.get("read_before_write").is_some());
    assert!(!read, "observe made no read: {events}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_list_read_enforce_refuses_without_a_read_of_its_own() {
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), enforce)).await;
    let resp = list_then_stale_put(&dw).await;
    assert_eq!(resp.status, 409);
    let event = event_of(&dw, "p1").await;
    assert!(
        event.get("read_before_write").is_none(),
        "the list decided: {event}"
    );
    let after = raw(dw.addr, &get("/api/v1/channels/9", "Bearer alice", "g1"))
        .await
        .json();
    assert_eq!(after["graphicsElementIds"], json!([2]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_fails_closed_when_its_read_no_longer_shows_a_field_the_memory_saw_held() {
    let body = Arc::new(Mutex::new(read_elsewhere(7)));
    let answer = body.clone();
    let responder = Arc::new(move |r: &Recorded| -> (u16, String) {
        match r.method.as_str() {
            "GET" => (200, answer.lock().unwrap().to_string()),
            _ => (200, "{}".into()),
        }
    });
    let up = upstream::start(responder, Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        enforce(c);
        c.enforce
            .kinds
            .insert(Kind::SilentClearRisk, Action::Repair);
    }))
    .await;
    let read = raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g1"))
        .await
        .json();
    eventually("the GET remembered", || async {
        (sample(&scrape(dw.admin).await, "driftwatch_memory_entries") >= 1.0).then_some(())
    })
    .await;
    // The API now answers the channel without the list (another representation, a proxy's
    // cache, a trimmed view): the repair must not take that as "nothing to lose".
    body.lock()
        .unwrap()
        .as_object_mut()
        .unwrap()
        .shift_remove("graphicsElementIds");
    let resp = raw(
        dw.addr,
        &put(
            "/api/v1/channels/7",
            "Bearer alice",
            "p1",
            &stale_body(&read),
        ),
    )
    .await;
    assert_eq!(resp.status, 409, "{}", String::from_utf8_lossy(&resp.body));
    let why = resp.json()["repair_refused"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        why.contains("the read does not show `graphicsElementIds`, which the read g1"),
        "{why}"
    );
    assert_eq!(
        up.recorded().iter().filter(|r| r.method == "PUT").count(),
        0
    );
}
