//! What the traffic exercised of the spec, offline and live: `driftwatch check --coverage` (the
//! real binary) on a recorded session names the requests per operation, the parameters, body
//! properties and responses never exercised, and each tool's operations; the same session sent
//! through a real sidecar by hyper's client gives the same object at `/coverage`.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use super::sidecar::{admin_get, config, start};
use super::upstream::{self, Recorded};
use super::util::{eventually, example, strings};

/// One request of the session: method, target, tool, JSON body.
type Step = (&'static str, &'static str, &'static str, Option<Value>);

fn session() -> Vec<Step> {
    let schedule =
        json!({"name": "Weeknights", "padToNearestMinute": 30, "randomStartPoint": false});
    vec![
        (
            "GET",
            "/api/v1/playouts?query=news&pageSize=25",
            "list_playouts",
            None,
        ),
        ("GET", "/api/v1/playouts?pageNum=1", "list_playouts", None),
        (
            "GET",
            "/api/v1/playouts/3/items?showFiller=true",
            "get_playout_items",
            None,
        ),
        (
            "PUT",
            "/api/v1/schedules/2",
            "update_schedule",
            Some(schedule),
        ),
        ("GET", "/api/v1/schedules/2", "get_schedule", None),
        ("GET", "/api/v1/nowhere", "list_playouts", None),
    ]
}

/// What the API answers: the items of a playout are not found, a schedule's GET fails with a
/// status its operation does not declare, the rest is fine.
fn status(method: &str, target: &str) -> u16 {
    match (method, target) {
        (_, t) if t.contains("/items") || t.contains("/nowhere") => 404,
        ("GET", "/api/v1/schedules/2") => 500,
        _ => 200,
    }
}

/// The session as a JSON Lines recording, each request with the API's answer.
fn recording() -> String {
    let mut out = String::new();
    for (method, target, tool, body) in session() {
        let mut headers = json!({"x-mcp-tool": tool});
        if body.is_some() {
            headers["content-type"] = json!("application/json");
        }
        let mut line = json!({"method": method, "url": target, "headers": headers,
            "response": {"status": status(method, target), "body": {"ok": true}}});
        if let Some(body) = body {
            line["body"] = body;
        }
        out.push_str(&format!("{line}\n"));
    }
    out
}

/// `driftwatch check --coverage --format json` on the session: its `coverage` object.
fn checked() -> Value {
    let dir = std::env::temp_dir().join(format!("driftwatch-coverage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let traffic = dir.join("session.jsonl");
    std::fs::write(&traffic, recording()).unwrap();
    let spec = example("channels.openapi.yaml");
    let out = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args([
            "check",
            "--coverage",
            "--format",
            "json",
            "--fail-on",
            "never",
        ])
        .args([
            "--spec",
            spec.to_str().unwrap(),
            "--traffic",
            traffic.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["summary"]["exchanges"] == 6, "{doc}");
    doc["coverage"].clone()
}

fn operation<'v>(coverage: &'v Value, id: &str) -> &'v Value {
    let ops = coverage["operations"].as_array().unwrap();
    ops.iter()
        .find(|o| o["operation"] == id)
        .unwrap_or_else(|| panic!("{id} not among the requested: {coverage:#}"))
}

fn param_names(list: &Value) -> Vec<String> {
    (list.as_array().unwrap().iter())
        .map(|p| {
            format!(
                "{} {}",
                p["in"].as_str().unwrap(),
                p["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn check_coverage_names_requests_and_what_was_never_exercised() {
    let c = checked();
    let mut problems = Vec::new();
    let mut expect = |what: &str, got: Value, want: Value| {
        if got != want {
            problems.push(format!("{what}: {got} != {want}"));
        }
    };
    expect("requests", c["requests"].clone(), json!(5));
    expect("unrouted", c["unrouted"].clone(), json!(1));
    let requests: BTreeMap<String, u64> = (c["operations"].as_array().unwrap().iter())
        .map(|o| {
            (
                o["operation"].as_str().unwrap().into(),
                o["requests"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [
        ("getPlayoutItems", 1),
        ("getSchedule", 1),
        ("listPlayouts", 2),
        ("updateSchedule", 1),
    ];
    expect(
        "per operation",
        json!(requests),
        json!(BTreeMap::from(want)),
    );
    let list = operation(&c, "listPlayouts");
    let never = param_names(&list["parameters"]["never_seen"]);
    expect(
        "listPlayouts never sent",
        json!(never),
        json!(["query sort", "query channelIds"]),
    );
    let items = operation(&c, "getPlayoutItems");
    expect(
        "items' params never sent",
        json!(param_names(&items["parameters"]["never_seen"])),
        json!(["query start"]),
    );
    expect(
        "items' answers",
        items["responses"].clone(),
        json!({"seen": {"404": 1}, "never_seen": ["200"], "undeclared": []}),
    );
    let get = operation(&c, "getSchedule");
    expect(
        "getSchedule undeclared",
        get["responses"]["undeclared"].clone(),
        json!([500]),
    );
    let put = operation(&c, "updateSchedule");
    expect(
        "updateSchedule never seen",
        put["responses"]["never_seen"].clone(),
        json!(["400"]),
    );
    let body = &put["body_properties"];
    expect(
        "body sent",
        body["seen"].clone(),
        json!(["name", "randomStartPoint", "padToNearestMinute"]),
    );
    // `id` is readOnly: never expected in a request, so never listed as unsent.
    let unsent = [
        "keepMultiPartEpisodesTogether",
        "treatCollectionsAsShows",
        "shuffleScheduleItems",
        "fixedStartTimeBehavior",
    ];
    expect("body never sent", body["never_seen"].clone(), json!(unsent));
    let never: Vec<&str> = strings(&c["never_requested"], "operation");
    let want = [
        "listChannels",
        "createChannel",
        "getChannel",
        "updateChannel",
        "patchChannel",
        "setChannelLogo",
    ];
    expect("never requested", json!(never), json!(want));
    let tools: BTreeMap<&str, &Value> = (c["tools"].as_array().unwrap().iter())
        .map(|t| (t["tool"].as_str().unwrap(), &t["operations"]))
        .collect();
    let want = json!({"get_playout_items": ["getPlayoutItems"], "get_schedule": ["getSchedule"],
        "list_playouts": ["listPlayouts"], "update_schedule": ["updateSchedule"]});
    expect("tools", json!(tools), want);
    expect(
        "other tools",
        c["other_tools"].clone(),
        json!({"requests": 0, "operations": []}),
    );
    let totals = &c["totals"];
    expect(
        "operations",
        totals["operations"].clone(),
        json!({"declared": 10, "seen": 4}),
    );
    assert!(problems.is_empty(), "{}\n{c:#}", problems.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidecars_coverage_is_checks_on_the_same_traffic() {
    let offline = checked();
    let responder: upstream::Responder =
        std::sync::Arc::new(|r: &Recorded| (status(&r.method, &r.target), "{\"ok\":true}".into()));
    let api = upstream::start(responder, Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", api.addr), |_| {})).await;
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    for (method, target, tool, body) in session() {
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("http://{}{target}", dw.addr))
            .header("x-mcp-tool", tool);
        if body.is_some() {
            request = request.header("content-type", "application/json");
        }
        let body = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
        let response = client
            .request(request.body(Full::new(body)).unwrap())
            .await
            .unwrap();
        assert_eq!(
            response.status().as_u16(),
            status(method, target),
            "{method} {target}"
        );
        response.into_body().collect().await.unwrap();
    }
    let live = eventually("/coverage to hold the session's six requests", || async {
        let live = admin_get(dw.admin, "/coverage").await.json();
        let seen = live["requests"].as_u64().unwrap_or(0) + live["unrouted"].as_u64().unwrap_or(0);
        let answered: u64 = (live["operations"].as_array().into_iter().flatten())
            .flat_map(|o| o["responses"]["seen"].as_object().into_iter().flatten())
            .filter_map(|(_, n)| n.as_u64())
            .sum();
        (seen == 6 && answered == 4).then_some(live)
    })
    .await;
    assert_eq!(
        live, offline,
        "/coverage (left) differs from check --coverage (right)"
    );
    dw.stop().await;
}
