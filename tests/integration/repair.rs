//! Repair end to end: a replace write set to `repair` is completed from driftwatch's own fresh
//! read of the resource and sent guarded by `If-Match`, against APIs that hold state (the
//! demo's Channels API, and a store with versions standing in for GitHub's), or refused with
//! its reason where it cannot be.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use driftwatch::config::Config;
use driftwatch::finding::Kind;
use driftwatch::policy::{Action, Mode};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;

use super::sidecar::{admin_get, config, raw, sample, scrape, start};
use super::silent_clears::{demo_api, get, kinds_of, pair, put, stale_body};
use super::upstream::{self, Recorded};
use super::util::{eventually, shared_spec};

/// Enforce mode with `kind` set to `repair`.
fn repairing(c: &mut Config, kind: Kind) {
    c.proxy.mode = Mode::Enforce;
    c.enforce.kinds.insert(kind, Action::Repair);
}

/// Alice's PUT of channel 7 through `dw` (request `rid`).
async fn put_channel(
    dw: &super::sidecar::Running,
    rid: &str,
    body: &Value,
) -> super::sidecar::RawResponse {
    raw(
        dw.addr,
        &put("/api/v1/channels/7", "Bearer alice", rid, body),
    )
    .await
}

/// The event of request `rid`, once recorded.
async fn event_of(admin: SocketAddr, rid: &str) -> Value {
    eventually(&format!("the event of {rid}"), || async {
        let events = admin_get(admin, "/findings").await.json();
        let found = events["events"]
            .as_array()?
            .iter()
            .find(|e| e["request_id"] == rid)?;
        Some(found.clone())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stale_rename_lands_and_the_list_it_omitted_is_kept() {
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), |c| {
        repairing(c, Kind::SilentClearRisk)
    }))
    .await;
    let read = raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g1"))
        .await
        .json();
    eventually("the GET remembered", || async {
        (sample(&scrape(dw.admin).await, "driftwatch_memory_entries") >= 1.0).then_some(())
    })
    .await;
    let resp = put_channel(&dw, "p1", &stale_body(&read)).await;
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    assert_eq!(
        resp.header("driftwatch-repaired"),
        Some("graphicsElementIds")
    );
    let written = resp.json();
    assert_eq!(written["name"], "Retro TV HD", "the agent's edit landed");
    assert_eq!(
        written["graphicsElementIds"],
        json!([3, 7]),
        "and the list was kept"
    );
    let now = raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g2"))
        .await
        .json();
    assert_eq!(
        (&now["name"], &now["graphicsElementIds"]),
        (&json!("Retro TV HD"), &json!([3, 7]))
    );

    let event = event_of(dw.admin, "p1").await;
    let finding = &event["findings"][0];
    assert_eq!(
        (&finding["kind"], &finding["action"]),
        (&json!("silent_clear_risk"), &json!("repaired"))
    );
    assert_eq!(event["repair"]["fields"], json!(["graphicsElementIds"]));
    let read_id = event["repair"]["read_request_id"].as_str().unwrap();
    assert_eq!(
        read_id.len(),
        32,
        "driftwatch's read has an id of its own: {read_id}"
    );
    assert_eq!(
        event["repair"]["if_match"], true,
        "the demo API gives a strong ETag"
    );
    assert_eq!(
        kinds_of(dw.admin, "p1", None).await,
        [pair("silent_clear_risk", "/graphicsElementIds")]
    );
    assert!(
        !event.to_string().contains("[3,7]"),
        "names only, never values: {event}"
    );
    let m = scrape(dw.admin).await;
    let repairs = |outcome: &str| {
        sample(
            &m,
            &format!(
                "driftwatch_repairs_total{{operation=\"updateChannel\",field=\"graphicsElementIds\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!((repairs("repaired"), repairs("refused")), (1.0, 0.0));
    assert_eq!(
        sample(
            &m,
            "driftwatch_silent_clears_total{operation=\"updateChannel\",field=\"graphicsElementIds\",stage=\"confirmed\"}"
        ),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_agent_sends_clears_as_asked() {
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), |c| {
        repairing(c, Kind::OmittedOnReplace);
        repairing(c, Kind::SilentClearRisk);
    }))
    .await;
    let read = raw(dw.addr, &get("/api/v1/channels/7", "Bearer alice", "g1"))
        .await
        .json();
    let mut body = read.clone();
    body["graphicsElementIds"] = json!([]);
    body["logo"] = Value::Null;
    let resp = put_channel(&dw, "p1", &body).await;
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("driftwatch-repaired"),
        None,
        "nothing was omitted"
    );
    assert_eq!(
        resp.json()["graphicsElementIds"],
        json!([]),
        "the empty list the agent sent"
    );
}

/// A store of JSON resources by path, the way a real API with concurrency tokens keeps them:
/// each has a version, its `ETag`; a PUT replaces the whole resource (an omitted field takes
/// its default) and fails with 412 when its `If-Match` is not the current version. `meddle`
/// runs after a GET is answered: another client's change, made in between.
#[derive(Clone)]
struct Store {
    resources: Arc<Mutex<HashMap<String, Versioned>>>,
    defaults: Object,
    meddle: Arc<dyn Fn(&mut Object) -> bool + Send + Sync>,
    /// `METHOD path` and the `If-Match` sent, in order.
    requests: Arc<Mutex<Vec<Seen>>>,
}

type Object = Map<String, Value>;
type Versioned = (u64, Object);
type Seen = (String, Option<String>);

impl Store {
    /// The resource at `path` as it is now.
    fn now(&self, path: &str) -> Object {
        self.resources.lock().unwrap()[path].1.clone()
    }
}

impl Store {
    async fn serve(self) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let store = self.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| store.clone().answer(req));
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        addr
    }

    async fn answer(self, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        let (parts, body) = req.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        let path = parts.uri.path().to_string();
        let if_match = parts
            .headers
            .get("if-match")
            .map(|v| v.to_str().unwrap().to_string());
        self.requests
            .lock()
            .unwrap()
            .push((format!("{} {path}", parts.method), if_match.clone()));
        let mut resources = self.resources.lock().unwrap();
        let Some((version, current)) = resources.get_mut(&path) else {
            return Ok(reply(404, None, json!({"message": "Not Found"})));
        };
        if parts.method == "GET" {
            let answer = reply(200, Some(*version), Value::Object(current.clone()));
            if (self.meddle)(current) {
                *version += 1;
            }
            return Ok(answer);
        }
        if if_match.is_some_and(|tag| tag != format!("\"v{version}\"")) {
            return Ok(reply(412, None, json!({"message": "Precondition Failed"})));
        }
        let sent: Map<String, Value> = serde_json::from_slice(&body).unwrap();
        let mut next = self.defaults.clone();
        next.extend(sent);
        *current = next;
        *version += 1;
        Ok(reply(204, Some(*version), Value::Null))
    }
}

fn reply(status: u16, version: Option<u64>, body: Value) -> Response<Full<Bytes>> {
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let mut r = Response::new(Full::new(Bytes::from(text)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    if let Some(v) = version {
        r.headers_mut()
            .insert("etag", format!("\"v{v}\"").parse().unwrap());
    }
    r
}

const PERMISSIONS: &str = "/repos/octo/app/actions/permissions";

/// GitHub's Actions permissions of one repository, as its GET shows them; a PUT that leaves
/// out `allowed_actions` puts it back to `all`.
fn github_store(meddle: impl Fn(&mut Map<String, Value>) -> bool + Send + Sync + 'static) -> Store {
    let shown = json!({"enabled": true, "allowed_actions": "selected",
        "selected_actions_url": "https://api.github.com/repos/octo/app/actions/permissions/selected-actions",
        "sha_pinning_required": false});
    let defaults = json!({"enabled": true, "allowed_actions": "all",
        "selected_actions_url": "https://api.github.com/repos/octo/app/actions/permissions/selected-actions",
        "sha_pinning_required": false});
    Store {
        resources: Arc::new(Mutex::new(HashMap::from([(
            PERMISSIONS.to_string(),
            (1, shown.as_object().unwrap().clone()),
        )]))),
        defaults: defaults.as_object().unwrap().clone(),
        meddle: Arc::new(meddle),
        requests: Arc::default(),
    }
}

async fn github_sidecar(api: SocketAddr) -> super::sidecar::Running {
    start(config(&format!("http://{api}"), |c| {
        c.spec.path = Some(shared_spec("github/api.github.com.json.gz"));
        repairing(c, Kind::OmittedOnReplace);
    }))
    .await
}

fn github_put(rid: &str) -> Vec<u8> {
    put(
        PERMISSIONS,
        "Bearer ghp_placeholder",
        rid,
        &json!({"enabled": false}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn githubs_permissions_put_keeps_allowed_actions_it_left_out() {
    let store = github_store(|_| false);
    let dw = github_sidecar(store.clone().serve().await).await;
    let resp = raw(dw.addr, &github_put("p1")).await;
    assert_eq!(resp.status, 204, "{}", String::from_utf8_lossy(&resp.body));
    assert_eq!(
        resp.header("driftwatch-repaired"),
        Some("allowed_actions, sha_pinning_required")
    );
    let now = store.now(PERMISSIONS);
    assert_eq!(now["enabled"], false, "the agent's change applied");
    assert_eq!(
        now["allowed_actions"], "selected",
        "and what it left out kept"
    );
    let requests = store.requests.lock().unwrap().clone();
    assert_eq!(
        requests,
        [
            (format!("GET {PERMISSIONS}"), None),
            (format!("PUT {PERMISSIONS}"), Some("\"v1\"".to_string()))
        ],
        "one read, then the write guarded by the read's ETag"
    );
    let event = event_of(dw.admin, "p1").await;
    assert_eq!(
        event["repair"]["fields"],
        json!(["allowed_actions", "sha_pinning_required"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_between_the_read_and_the_write_is_not_overwritten() {
    // Another client sets `allowed_actions` to `local_only` just after driftwatch's read.
    let store = github_store(|r| {
        r.insert("allowed_actions".into(), json!("local_only"));
        true
    });
    let dw = github_sidecar(store.clone().serve().await).await;
    let resp = raw(dw.addr, &github_put("p1")).await;
    assert_eq!(resp.status, 412, "the API refused the stale write");
    assert_eq!(
        resp.header("driftwatch-repaired"),
        None,
        "nothing it filled was written"
    );
    let now = store.now(PERMISSIONS);
    assert_eq!(
        (&now["enabled"], &now["allowed_actions"]),
        (&json!(true), &json!("local_only"))
    );
    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(
            &m,
            "driftwatch_repairs_total{operation=\"actions/set-github-actions-permissions-repository\",field=\"allowed_actions\",outcome=\"precondition_failed\"}"
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_does_not_fit_or_fails_refuses_the_write_with_its_reason() {
    // The read shows the list expanded (objects where the write takes ids); then it fails.
    let failing = Arc::new(Mutex::new(false));
    let fails = failing.clone();
    let responder = Arc::new(move |r: &Recorded| -> (u16, String) {
        if r.method != "GET" {
            return (200, "{}".into());
        }
        if *fails.lock().unwrap() {
            return (503, "{}".into());
        }
        let mut channel = Value::Object(driftwatch::demo::api::seed());
        channel["graphicsElementIds"] = json!([{"id": 3}, {"id": 7}]);
        (200, channel.to_string())
    });
    let up = upstream::start(responder, Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        repairing(c, Kind::OmittedOnReplace);
        repairing(c, Kind::SilentClearRisk);
    }))
    .await;
    let mut body = Value::Object(driftwatch::demo::api::seed());
    body.as_object_mut()
        .unwrap()
        .shift_remove("graphicsElementIds");
    let resp = put_channel(&dw, "p1", &body).await;
    assert_eq!(resp.status, 409);
    let problem = resp.json();
    assert_eq!(problem["include_fields"], json!(["graphicsElementIds"]));
    let why = problem["repair_refused"].as_str().unwrap();
    assert!(
        why.starts_with("`graphicsElementIds` as the read shows it does not fit the write's body"),
        "{why}"
    );
    *failing.lock().unwrap() = true;
    let resp = put_channel(&dw, "p2", &body).await;
    assert_eq!(resp.status, 409);
    assert_eq!(
        resp.json()["repair_refused"],
        "the read of the resource was answered 503"
    );
    let puts = up.recorded().iter().filter(|r| r.method == "PUT").count();
    assert_eq!(puts, 0, "no refused write reached the API");
    let event = event_of(dw.admin, "p2").await;
    assert_eq!(event["action"], "blocked");
    // p1's read was remembered (issue 63): p2's omission is a `silent_clear_risk` on it,
    // repaired as omissions are here, and refused when the repair's read failed.
    let omitted = event["findings"].as_array().unwrap().iter();
    let omitted: Vec<_> = omitted
        .filter(|f| f["kind"] == "silent_clear_risk")
        .collect();
    assert_eq!(
        omitted[0]["action"], "block",
        "the finding set to repair blocked it: {event}"
    );
    assert_eq!(
        event["repair"]["refused"],
        "the read of the resource was answered 503"
    );
    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(
            &m,
            "driftwatch_repairs_total{operation=\"updateChannel\",field=\"graphicsElementIds\",outcome=\"refused\"}"
        ),
        2.0
    );
}

/// The same repair through the forward proxy: curl sends the PUT to `https://api.test` through
/// `HTTPS_PROXY`'s CONNECT, driftwatch intercepts it with its CA, reads channel 7 and sends the
/// completed write to the demo API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_forward_proxy_an_intercepted_put_is_repaired() {
    use driftwatch::config::{ApiConfig, ProxyKind};
    let api = demo_api().await;
    let ca_dir = std::env::temp_dir().join(format!("driftwatch-repair-fwd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&ca_dir);
    let mut c = Config::default();
    c.proxy.kind = ProxyKind::Forward;
    c.forward.ca_dir = ca_dir.clone();
    c.events.output = "none".into();
    c.api = vec![ApiConfig {
        name: "channels".into(),
        spec: super::util::example("channels.openapi.yaml")
            .display()
            .to_string(),
        hosts: vec!["api.test:443".into()],
        upstream: Some(format!("http://{api}")),
        ..ApiConfig::default()
    }];
    repairing(&mut c, Kind::OmittedOnReplace);
    let dw = start(c).await;
    let mut body = driftwatch::demo::api::seed();
    for field in ["id", "uniqueId", "graphicsElementIds"] {
        body.shift_remove(field);
    }
    body.insert("name".into(), json!("Retro TV HD"));
    let out = std::process::Command::new("curl")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .args(["-s", "-D", "-", "-o", "/dev/null", "-X", "PUT"])
        .args(["-H", "content-type: application/json", "--data-binary"])
        .arg(Value::Object(body).to_string())
        .args(["-x", &format!("http://{}", dw.addr), "--cacert"])
        .arg(ca_dir.join("ca.pem"))
        .arg("https://api.test/api/v1/channels/7")
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(
        head.starts_with("http/2 200") || head.starts_with("http/1.1 200"),
        "{head}"
    );
    assert!(
        head.contains("driftwatch-repaired: graphicselementids"),
        "{head}"
    );
    let now = raw(api, &get("/api/v1/channels/7", "Bearer alice", "g"))
        .await
        .json();
    assert_eq!(
        (&now["name"], &now["graphicsElementIds"]),
        (&json!("Retro TV HD"), &json!([3, 7]))
    );
}

/// What the read's answer holds is the API's, never trusted: an answer past
/// `audit.max_response_body`, one that never comes within `proxy.request_timeout_ms`, and one
/// nested past any parser's depth each refuse the write with the reason, and the sidecar goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_read_refuses_the_write_and_nothing_else() {
    let mut body = Value::Object(driftwatch::demo::api::seed());
    body.as_object_mut()
        .unwrap()
        .shift_remove("graphicsElementIds");
    let huge = format!("{{\"graphicsElementIds\":[{}1]}}", "1,".repeat(600_000));
    let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    let deep = format!("{{\"graphicsElementIds\":{}}}", nested(100_000));
    let cases: [(String, Duration, &str); 3] = [
        (
            huge,
            Duration::ZERO,
            "(audit.max_response_body is 1048576 bytes)",
        ),
        (
            "{}".into(),
            Duration::from_secs(3),
            "the read of the resource failed",
        ),
        (
            deep,
            Duration::ZERO,
            // Refused as it is read, before anything is filled from it.
            "its JSON could not be read (recursion limit exceeded",
        ),
    ];
    for (answer, delay, said) in cases {
        let responder = Arc::new(move |r: &Recorded| -> (u16, String) {
            match r.method.as_str() {
                "GET" => (200, answer.clone()),
                _ => (200, "{}".into()),
            }
        });
        let up = upstream::start(responder, delay, None).await;
        let dw = start(config(&format!("http://{}", up.addr), |c| {
            repairing(c, Kind::OmittedOnReplace);
            c.proxy.request_timeout_ms = 500;
        }))
        .await;
        let resp = put_channel(&dw, "p1", &body).await;
        assert_eq!(resp.status, 409, "{said}");
        let why = resp.json()["repair_refused"].as_str().unwrap().to_string();
        assert!(why.contains(said), "{said}: {why}");
        let puts = up.recorded().iter().filter(|r| r.method == "PUT").count();
        assert_eq!(puts, 0, "{said}: the write never went");
        let alive = admin_get(dw.admin, "/healthz").await;
        assert_eq!(alive.status, 200, "{said}: the sidecar goes on");
    }
}

/// Under `wrap`, the agent is told what a 412 after a repaired write means: the resource
/// changed since driftwatch read it, so read it again and retry. The relay's session is fed the
/// call and the server's answer as `wrap` feeds it (`ToolSource::Calls`: the request is the
/// call's); the event and the metric say `precondition_failed`, never `repaired`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_412_after_a_repaired_write_is_said_to_the_tool_call_and_not_called_repaired() {
    use driftwatch::mcp::message::Limits;
    use driftwatch::mcp::relay::Session;
    use driftwatch::proxy::ToolSource;
    let store = github_store(|r| {
        r.insert("allowed_actions".into(), json!("local_only"));
        true
    });
    let api = store.clone().serve().await;
    let c = config(&format!("http://{api}"), |c| {
        c.spec.path = Some(shared_spec("github/api.github.com.json.gz"));
        repairing(c, Kind::OmittedOnReplace);
    });
    let (dw, sidecar) = super::sidecar::start_with(c, ToolSource::Calls).await;
    let calls = sidecar.calls().unwrap().clone();
    let limits = Limits {
        depth: 64,
        values: 10_000,
        bytes: 1 << 20,
    };
    let mut session = Session::new(1, limits, true);
    session.from_client(
        &calls,
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"set_actions_permissions","arguments":{"owner":"octo","repo":"app","enabled":false}}}"#,
    );
    let resp = raw(dw.addr, &github_put("p1")).await;
    assert_eq!(resp.status, 412, "{}", String::from_utf8_lossy(&resp.body));
    assert_eq!(resp.header("driftwatch-repaired"), None);

    let server = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Request failed with status code 412"}],"isError":true}}"#;
    let out = session.from_server(&calls, server).rewritten;
    let out: Value = serde_json::from_slice(&out.expect("the answer gains a sentence")).unwrap();
    let content = &out["result"]["content"];
    assert_eq!(content[0]["text"], "Request failed with status code 412");
    let said = content[1]["text"].as_str().unwrap();
    assert!(
        said.starts_with("Read the resource again, then retry")
            && said.contains("changed since driftwatch read it")
            && said.contains("412 Precondition Failed"),
        "{said}"
    );

    // The request's event (its answer's `undeclared_status` is an event of its own).
    let event = eventually("the event of p1's repair", || async {
        let events = admin_get(dw.admin, "/findings").await.json();
        let found = events["events"]
            .as_array()?
            .iter()
            .find(|e| e["request_id"] == "p1" && e.get("repair").is_some())?;
        Some(found.clone())
    })
    .await;
    assert_eq!(event["status"], 412);
    assert_eq!(event["repair"]["if_match"], true, "{event}");
    // The omission's finding (`omitted_on_replace`, or `silent_clear_risk` where a read showed
    // the field held) was filled, but nothing filled was written.
    let actions: Vec<&str> = event["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["field"] == "/allowed_actions")
        .map(|f| f["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["precondition_failed"], "{event}");
    let m = scrape(dw.admin).await;
    let repairs = |outcome: &str| {
        sample(
            &m,
            &format!(
                "driftwatch_repairs_total{{operation=\"actions/set-github-actions-permissions-repository\",field=\"allowed_actions\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!(
        (repairs("precondition_failed"), repairs("repaired")),
        (1.0, 0.0)
    );
}
