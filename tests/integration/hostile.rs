//! What one hostile peer can make driftwatch hold, bounded (issue 14): each case reproduced the
//! defect first (seen red), then passes with its bound.

use driftwatch::audit::audit;
use driftwatch::contract::{Contract, ContractOptions};
use driftwatch::finding::Kind;
use driftwatch::request::RequestView;
use driftwatch::spec::Spec;
use serde_json::{Map, Value, json};

use super::kinds::channel;
use super::sidecar::{admin_get, config, raw, sample, scrape, start};
use super::upstream::{self, ok};
use super::util::{eventually, example};

fn channels(max_findings: usize) -> Contract {
    let spec = Spec::load(&example("channels.openapi.yaml")).unwrap();
    let options = ContractOptions {
        max_findings,
        ..Default::default()
    };
    Contract::compile(&spec, &options).unwrap()
}

/// The channel with `n` keys no schema declares (about 20 bytes each).
fn flooded(n: usize) -> String {
    let mut body: Map<String, Value> = channel().as_object().unwrap().clone();
    body.insert("graphicsElementIds".into(), json!([3, 7]));
    for i in 0..n {
        body.insert(format!("undeclared_{i}"), json!(1));
    }
    Value::Object(body).to_string()
}

#[test]
fn a_flood_of_undeclared_keys_or_unknown_query_keys_lists_the_bound_then_says_so() {
    let contract = channels(100);
    let headers: Vec<(String, String)> = vec![("content-type".into(), "application/json".into())];
    let body = flooded(60_000);
    let put = RequestView::new("PUT", "/api/v1/channels/7", &headers, Some(body.as_bytes()));
    let a = audit(&contract, &put);
    assert_eq!(
        a.findings.len(),
        101,
        "the bound, then one that says the rest are left out"
    );
    assert!(a.truncated);
    let last = a.findings.last().unwrap();
    assert_eq!(
        (last.kind, last.observed.as_deref()),
        (Kind::Unaudited, Some("findings left out"))
    );
    assert!(
        a.findings[..100]
            .iter()
            .all(|f| f.kind == Kind::UndeclaredBodyField)
    );

    let query: Vec<String> = (0..60_000).map(|i| format!("k{i}=1")).collect();
    let target = format!("/api/v1/playouts?{}", query.join("&"));
    let get = RequestView::new("GET", &target, &headers, None);
    let a = audit(&contract, &get);
    assert_eq!(a.findings.len(), 101);
    assert!(a.truncated);

    // Under the bound nothing is left out.
    let body = flooded(3);
    let put = RequestView::new("PUT", "/api/v1/channels/7", &headers, Some(body.as_bytes()));
    let a = audit(&contract, &put);
    assert_eq!((a.findings.len(), a.truncated), (3, false));
}

#[test]
fn a_contract_compiled_with_the_default_options_is_bounded_too() {
    // A library user who sets nothing gets the sidecar's bound (it was no bound at all).
    let spec = Spec::load(&example("channels.openapi.yaml")).unwrap();
    let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
    let headers: Vec<(String, String)> = vec![("content-type".into(), "application/json".into())];
    let body = flooded(1_000);
    let put = RequestView::new("PUT", "/api/v1/channels/7", &headers, Some(body.as_bytes()));
    let a = audit(&contract, &put);
    assert_eq!(
        (a.findings.len(), a.truncated),
        (driftwatch::contract::DEFAULT_MAX_FINDINGS + 1, true)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_sidecar_one_flooded_put_makes_a_bounded_event_and_is_counted() {
    let up = upstream::start(ok(), std::time::Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.audit.max_findings = 50;
    }))
    .await;
    let body = flooded(40_000); // 0.8 MB: within audit.max_body
    let request = format!(
        "PUT /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(
        raw(dw.addr, request.as_bytes()).await.status,
        200,
        "observe mode forwards it"
    );
    let events = admin_get(dw.admin, "/findings").await;
    assert!(
        events.body.len() < 64 * 1024,
        "/findings holds {} bytes",
        events.body.len()
    );
    let events = events.json();
    let request_event = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "forwarded")
        .expect("the request's event");
    let findings = request_event["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 51);
    let m = eventually("the limit counted", || async {
        let m = scrape(dw.admin).await;
        let hits = sample(
            &m,
            "driftwatch_limit_hits_total{limit=\"findings_per_request\"}",
        );
        (hits == 1.0).then_some(m)
    })
    .await;
    assert_eq!(
        sample(
            &m,
            "driftwatch_findings_total{kind=\"undeclared_body_field\",operation=\"updateChannel\",severity=\"warning\",blame=\"client\"}"
        ),
        50.0
    );
    dw.stop().await;
}

#[test]
fn a_huge_key_name_is_cut_in_the_finding_that_names_it() {
    let contract = channels(100);
    let headers: Vec<(String, String)> = vec![("content-type".into(), "application/json".into())];
    let mut body: Map<String, Value> = channel().as_object().unwrap().clone();
    body.insert("graphicsElementIds".into(), json!([3, 7]));
    body.insert("k".repeat(100_000), json!(1));
    let body = Value::Object(body).to_string();
    let put = RequestView::new("PUT", "/api/v1/channels/7", &headers, Some(body.as_bytes()));
    let a = audit(&contract, &put);
    let f = a
        .findings
        .iter()
        .find(|f| f.kind == Kind::UndeclaredBodyField)
        .expect("the undeclared key is reported");
    assert!(
        f.field.len() <= 256 && f.field.starts_with("/kkk"),
        "field of {} bytes",
        f.field.len()
    );
    assert!(
        f.message.len() <= 1024,
        "message of {} bytes",
        f.message.len()
    );
}

/// A PUT with `extra` undeclared keys of `key_len` bytes each.
fn put_with(extra: usize, key_len: usize) -> Vec<u8> {
    let mut body: Map<String, Value> = channel().as_object().unwrap().clone();
    body.insert("graphicsElementIds".into(), json!([3, 7]));
    let stem = "k".repeat(key_len);
    for i in 0..extra {
        body.insert(format!("{stem}{i}"), json!(1));
    }
    let body = Value::Object(body).to_string();
    format!(
        "PUT /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_findings_ring_keeps_findings_not_events_and_a_bounded_number_of_bytes() {
    let up = upstream::start(ok(), std::time::Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.admin.recent_findings = 100;
        c.admin.recent_bytes = 256 * 1024;
        c.events.log_values = true;
    }))
    .await;
    // 20 requests of 50 findings: the ring keeps the newest 100 findings (2 events).
    for _ in 0..20 {
        assert_eq!(raw(dw.addr, &put_with(50, 8)).await.status, 200);
    }
    let events = admin_get(dw.admin, "/findings").await.json();
    let kept: usize = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["findings"].as_array().unwrap().len())
        .sum();
    assert!((51..=100).contains(&kept), "the ring keeps {kept} findings");
    // Values logged, 20 requests of 200 KB each: the ring keeps at most its bytes.
    for _ in 0..20 {
        assert_eq!(raw(dw.addr, &put_with(1, 200_000)).await.status, 200);
    }
    let events = admin_get(dw.admin, "/findings").await;
    assert!(
        events.body.len() <= 300 * 1024,
        "/findings holds {} bytes",
        events.body.len()
    );
    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(&m, "driftwatch_limit_hits_total{limit=\"event_bytes\"}"),
        0.0,
        "the ring's bound did it, not the event's"
    );
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_event_is_cut_to_its_bound_values_first() {
    let up = upstream::start(ok(), std::time::Duration::ZERO, None).await;
    let events_file = std::env::temp_dir().join(format!("dw-events-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&events_file);
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.events.log_values = true;
        c.events.output = events_file.display().to_string();
        c.events.max_event_bytes = 16 * 1024;
    }))
    .await;
    // 300 KB of logged values and 100 findings with 200-byte keys: past 16 KiB.
    assert_eq!(raw(dw.addr, &put_with(1000, 200)).await.status, 200);
    let line = eventually("the event is written", || async {
        let text = std::fs::read_to_string(&events_file).unwrap_or_default();
        text.lines().next().map(str::to_string)
    })
    .await;
    assert!(line.len() <= 16 * 1024, "an event of {} bytes", line.len());
    let event: Value = serde_json::from_str(&line).unwrap();
    assert!(event.get("values").is_none(), "values go first");
    assert!(event["findings_left_out"].as_u64().unwrap() > 0);
    assert_eq!(event["operation"], "updateChannel");
    dw.stop().await;
    let _ = std::fs::remove_file(&events_file);
}
