//! Reloading the spec in a running sidecar: on request, on a file change and on SIGHUP; a
//! broken revision never takes over; a request in flight finishes on the revision it started
//! with; `/spec/diff` and the metrics say what changed.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::sidecar::{admin_get, config, raw, sample, scrape, start};
use super::upstream::{self, ok};
use super::util::{eventually, example};

/// A private copy of the Channels spec that the test rewrites.
fn spec_copy(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "driftwatch-reload-{name}-{}.yaml",
        std::process::id()
    ));
    std::fs::copy(example("channels.openapi.yaml"), &path).unwrap();
    path
}

/// The spec with `pageSize` renamed `page_size` (the agent's name becomes the right one).
fn renamed(path: &PathBuf) {
    let text = std::fs::read_to_string(example("channels.openapi.yaml")).unwrap();
    let cut = "        - name: pageSize\n";
    assert!(text.contains(cut));
    std::fs::write(path, text.replace(cut, "        - name: page_size\n")).unwrap();
}

async fn post_reload(admin: std::net::SocketAddr) -> (u16, Value) {
    let resp = raw(
        admin,
        b"POST /spec/reload HTTP/1.1\r\nhost: admin\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    )
    .await;
    (resp.status, resp.json())
}

/// Wait until `/spec` names a revision other than `first`; that revision.
async fn new_revision(admin: std::net::SocketAddr, first: &Value) -> Value {
    eventually("a new revision", || async {
        let now = admin_get(admin, "/spec").await.json()["revision"].clone();
        (now != *first).then_some(now)
    })
    .await
}

const STALE_QUERY: &[u8] = b"GET /api/v1/playouts?page_size=2 HTTP/1.1\r\nhost: x\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_swaps_the_spec_diffs_it_and_a_broken_one_never_takes_over() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let spec = spec_copy("post");
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(spec.clone());
        c.spec.watch_interval_ms = 0;
        c.audit.response_sample_rate = 0.0;
    }))
    .await;
    let first = admin_get(dw.admin, "/spec").await.json()["revision"].clone();
    let unknown = "driftwatch_findings_total{kind=\"unknown_query_param\",operation=\"listPlayouts\",severity=\"error\",blame=\"client\"}";
    raw(dw.addr, STALE_QUERY).await;
    assert_eq!(sample(&scrape(dw.admin).await, unknown), 1.0);

    // The spec now names the parameter as the agent does.
    renamed(&spec);
    let (status, body) = post_reload(dw.admin).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["previous"], first);
    let second = admin_get(dw.admin, "/spec").await.json()["revision"].clone();
    assert_ne!(second, first);
    assert_eq!(body["revision"], second);
    raw(dw.addr, STALE_QUERY).await;
    let text = scrape(dw.admin).await;
    assert_eq!(
        sample(&text, unknown),
        1.0,
        "the new revision accepts page_size"
    );
    assert_eq!(
        sample(&text, "driftwatch_spec_changes{class=\"hazard\"}"),
        1.0,
        "{text}"
    );
    let diff = admin_get(dw.admin, "/spec/diff").await.json();
    assert_eq!((&diff["from"], &diff["to"]), (&first, &second));
    assert_eq!(diff["changes"][0]["kind"], "param_renamed", "{diff}");
    assert_eq!(diff["changes"][0]["from"], "pageSize");

    // A broken revision: the old one stays in force, the failure is counted, readiness holds.
    std::fs::write(&spec, "openapi: 3.1.0\npaths: [not, a, map\n").unwrap();
    let (status, body) = post_reload(dw.admin).await;
    assert_eq!(status, 422, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains(&spec.display().to_string()),
        "names the file: {error}"
    );
    assert_eq!(body["revision"], second);
    assert_eq!(
        admin_get(dw.admin, "/spec").await.json()["revision"],
        second
    );
    assert_eq!(admin_get(dw.admin, "/readyz").await.status, 200);
    raw(dw.addr, STALE_QUERY).await;
    let text = scrape(dw.admin).await;
    assert_eq!(
        sample(&text, unknown),
        1.0,
        "still audited with the second revision"
    );
    assert_eq!(
        sample(&text, "driftwatch_spec_reloads_total{result=\"error\"}"),
        1.0
    );
    assert_eq!(
        sample(&text, "driftwatch_spec_reloads_total{result=\"success\"}"),
        2.0
    );
    assert!(
        text.contains(&format!(
            "driftwatch_spec_info{{revision={second},openapi=\"3.1.0\"}} 1"
        )),
        "{text}"
    );
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_finishes_on_the_revision_it_started_with() {
    // The upstream holds each request for 400 ms; the reload lands in between.
    let up = upstream::start(ok(), Duration::from_millis(400), None).await;
    let spec = spec_copy("inflight");
    let log = std::env::temp_dir().join(format!(
        "driftwatch-reload-events-{}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&log);
    let path = log.display().to_string();
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(spec.clone());
        c.spec.watch_interval_ms = 0;
        c.events.output = path;
        c.audit.response_sample_rate = 0.0;
    }))
    .await;
    let first = admin_get(dw.admin, "/spec").await.json()["revision"].clone();
    let addr = dw.addr;
    let in_flight = tokio::spawn(async move { raw(addr, STALE_QUERY).await });
    // Wait until the upstream has the request, then reload under it.
    eventually("the upstream to hold the request", || async {
        (!up.recorded().is_empty()).then_some(())
    })
    .await;
    renamed(&spec);
    assert_eq!(post_reload(dw.admin).await.0, 200);
    assert_eq!(in_flight.await.unwrap().status, 200);
    dw.stop().await;
    let events: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0]["spec_revision"], first,
        "audited and recorded on the old revision"
    );
    assert_eq!(events[0]["findings"][0]["kind"], "unknown_query_param");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_spec_file_is_reloaded_without_being_asked() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let spec = spec_copy("watch");
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(spec.clone());
        c.spec.watch_interval_ms = 20;
    }))
    .await;
    let first = admin_get(dw.admin, "/spec").await.json()["revision"].clone();
    renamed(&spec);
    let now = new_revision(dw.admin, &first).await;
    assert_ne!(now, first, "the watcher reloaded the changed file");
    assert_eq!(
        admin_get(dw.admin, "/spec/diff").await.json()["changes"][0]["kind"],
        "param_renamed"
    );
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_spec_of_the_running_binary() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let spec = spec_copy("sighup");
    let port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (proxy, admin) = (port(), port());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["serve", "--spec", spec.to_str().unwrap()])
        .args(["--upstream", &format!("http://{}", up.addr)])
        .args([
            "--listen",
            &proxy.to_string(),
            "--admin-listen",
            &admin.to_string(),
        ])
        .env("DRIFTWATCH_EVENTS_OUTPUT", "none")
        .env("DRIFTWATCH_SPEC_WATCH_INTERVAL_MS", "0")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let revision = || async move {
        match tokio::net::TcpStream::connect(admin).await {
            Ok(_) => Some(admin_get(admin, "/spec").await.json()["revision"].clone()),
            Err(_) => None,
        }
    };
    let first = eventually("driftwatch to serve", revision).await;
    renamed(&spec);
    let pid = child.id().unwrap().to_string();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(hup.success());
    let now = eventually("SIGHUP to reload", || async {
        revision().await.filter(|now| *now != first)
    })
    .await;
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    assert_ne!(now, first, "SIGHUP reloaded the changed spec");
}

/// The spec as the API would serve it: JSON, at a URL, with an ETag per version.
fn served(version: u8) -> String {
    let path = spec_copy(&format!("served-{version}"));
    if version == 2 {
        renamed(&path);
    }
    let spec = driftwatch::spec::Spec::load(&path).unwrap();
    serde_json::to_string(&*spec.doc).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_url_is_polled_with_if_none_match_and_reloaded_when_it_changes() {
    let version = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(1));
    let (v1, v2) = (served(1), served(2));
    let current = version.clone();
    // The content type carries the ETag header line: the recording upstream writes it as is.
    let responder: upstream::TypedResponder = std::sync::Arc::new(move |r| {
        let (tag, typed, body) = match current.load(std::sync::atomic::Ordering::SeqCst) {
            1 => ("\"v1\"", "application/json\r\netag: \"v1\"", &v1),
            _ => ("\"v2\"", "application/json\r\netag: \"v2\"", &v2),
        };
        if r.header("if-none-match") == Some(tag) {
            (304, typed, String::new())
        } else {
            (200, typed, body.clone())
        }
    });
    let api = upstream::start_typed(responder, Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", api.addr), |c| {
        c.spec.path = None;
        c.spec.url = Some(format!("http://{}/openapi.json", api.addr));
        c.spec.watch_interval_ms = 20;
    }))
    .await;
    let first = admin_get(dw.admin, "/spec").await.json()["revision"].clone();
    // Unchanged: conditional requests answered 304, nothing reloaded.
    eventually("four polls of the spec URL", || async {
        (api.recorded().len() >= 4).then_some(())
    })
    .await;
    let asked: Vec<Option<String>> = api
        .recorded()
        .iter()
        .map(|r| r.header("if-none-match").map(String::from))
        .collect();
    assert_eq!(asked[0], None, "the first fetch is unconditional");
    assert!(
        asked[1..].iter().all(|t| t.as_deref() == Some("\"v1\"")),
        "{asked:?}"
    );
    let text = scrape(dw.admin).await;
    assert_eq!(
        sample(&text, "driftwatch_spec_reloads_total{result=\"success\"}"),
        1.0
    );
    // The API publishes a new revision.
    version.store(2, std::sync::atomic::Ordering::SeqCst);
    let now = new_revision(dw.admin, &first).await;
    assert_ne!(now, first, "the new revision was fetched and put in force");
    assert_eq!(
        admin_get(dw.admin, "/spec/diff").await.json()["changes"][0]["kind"],
        "param_renamed"
    );
    dw.stop().await;
}

/// Reloads asked for at once are coalesced: 30 `POST /spec/reload` of GitHub's spec (about
/// 200 ms to compile) each waited for the one before and compiled it again, 30 times over.
/// Now those asked for while one runs take the outcome of the next: every one is answered
/// with the revision in force, and the spec is compiled a few times at most.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_asked_for_at_once_are_coalesced() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let spec = std::env::temp_dir().join(format!(
        "driftwatch-coalesce-{}.json.gz",
        std::process::id()
    ));
    std::fs::copy(
        super::util::shared_spec("github/api.github.com.json.gz"),
        &spec,
    )
    .unwrap();
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(spec.clone());
        c.spec.watch_interval_ms = 0;
    }))
    .await;
    let loads = "driftwatch_spec_reloads_total{result=\"success\"}";
    let before = sample(&scrape(dw.admin).await, loads);
    let asked: Vec<_> = (0..30)
        .map(|_| tokio::spawn(post_reload(dw.admin)))
        .collect();
    let mut revisions = std::collections::BTreeSet::new();
    for answer in asked {
        let (status, body) = answer.await.unwrap();
        assert_eq!(status, 200, "{body}");
        revisions.insert(body["revision"].to_string());
    }
    assert_eq!(revisions.len(), 1, "{revisions:?}");
    let ran = sample(&scrape(dw.admin).await, loads) - before;
    assert!((1.0..=3.0).contains(&ran), "{ran} reloads ran for 30 asked");
    dw.stop().await;
}

/// A change to the spec file after it was read but before the watcher's first turn (the
/// sidecar already answers by then) is a change: the watcher's baseline is the file as it was
/// read, not as the watcher first finds it. (A CI run lost this race once.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_before_the_watcher_first_looks_is_still_reloaded() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let spec = spec_copy("early");
    let settings =
        driftwatch::settings::Settings::from_config(&config(&format!("http://{}", up.addr), |c| {
            c.spec.path = Some(spec.clone());
            c.spec.watch_interval_ms = 20;
        }))
        .unwrap();
    let sidecar = driftwatch::start::build(settings, None, driftwatch::proxy::ToolSource::Header)
        .await
        .unwrap();
    let first = serde_json::json!(sidecar.revision().spec.revision);
    // Longer, so the stamp differs even within the file system's time granularity.
    renamed(&spec);
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin_addr = admin.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(driftwatch::start::serve(
        proxy,
        admin,
        std::sync::Arc::new(sidecar),
        async move {
            let _ = stopped.await;
        },
    ));
    let now = new_revision(admin_addr, &first).await;
    assert_ne!(now, first);
    let _ = stop.send(());
    served.await.unwrap().unwrap();
}

/// A spec split over files (`$ref: common.yaml#/Pet`) is the files it bundles: an edit to
/// `common.yaml` alone is a new revision, which the watcher reloads and requests are audited
/// against, and a reload asked for while no file changed keeps the revision in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_to_a_file_the_spec_refs_is_a_new_revision_and_reloaded() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dir = std::env::temp_dir().join(format!("driftwatch-reload-refs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (spec, common) = (dir.join("spec.yaml"), dir.join("common.yaml"));
    std::fs::write(&spec, "openapi: 3.0.3\ninfo: {title: pets, version: '1'}\npaths:\n  /pets/{id}:\n    put:\n      operationId: putPet\n      parameters: [{name: id, in: path, required: true, schema: {type: string}}]\n      requestBody:\n        content:\n          application/json:\n            schema: {$ref: 'common.yaml#/Pet'}\n      responses: {'200': {description: ok}}\n").unwrap();
    std::fs::write(
        &common,
        "Pet:\n  type: object\n  properties:\n    age: {type: string}\n",
    )
    .unwrap();
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(spec.clone());
        c.spec.watch_interval_ms = 20;
        c.audit.response_sample_rate = 0.0;
    }))
    .await;
    let listed = admin_get(dw.admin, "/spec").await.json();
    assert_eq!(listed["bundled"], serde_json::json!([common]), "{listed}");
    let first = listed["revision"].clone();
    let (status, body) = post_reload(dw.admin).await;
    assert_eq!(
        (status, &body["revision"]),
        (200, &first),
        "nothing changed: {body}"
    );

    let put = b"PUT /pets/1 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n{\"age\":30}";
    let wrong_type = "driftwatch_findings_total{kind=\"body_type_mismatch\",operation=\"putPet\",severity=\"error\",blame=\"client\"}";
    raw(dw.addr, put).await;
    assert_eq!(sample(&scrape(dw.admin).await, wrong_type), 1.0);

    // Only the file the spec refs changes: `age` becomes an integer.
    let retyped = "Pet:\n  type: object\n  properties:\n    age: {type: integer}\n";
    edited_and_reloaded(dw.admin, &first, &common, retyped).await;
    raw(dw.addr, put).await;
    assert_eq!(
        sample(&scrape(dw.admin).await, wrong_type),
        1.0,
        "the new revision takes an integer age"
    );
    dw.stop().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A spec fetched from a URL that bundles a local file (`spec.ref_root`) may change in that
/// file alone, while the URL answers 304: it is then fetched whole, and the edit reloaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetched_spec_that_bundles_a_local_file_is_reloaded_when_that_file_changes() {
    let dir = std::env::temp_dir().join(format!("driftwatch-url-refs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let common = dir.join("common.yaml");
    std::fs::write(
        &common,
        "Pet: {type: object, properties: {age: {type: string}}}\n",
    )
    .unwrap();
    let body = serde_json::json!({
        "openapi": "3.0.3", "info": {"title": "pets", "version": "1"},
        "paths": {"/pets": {"put": {"operationId": "putPet",
            "requestBody": {"content": {"application/json": {"schema":
                {"$ref": format!("{}#/Pet", common.display())}}}},
            "responses": {"200": {"description": "ok"}}}}}
    })
    .to_string();
    let responder: upstream::TypedResponder = std::sync::Arc::new(move |r| {
        let typed = "application/json\r\netag: \"v1\"";
        match r.header("if-none-match") {
            Some(_) => (304, typed, String::new()),
            None => (200, typed, body.clone()),
        }
    });
    let api = upstream::start_typed(responder, Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", api.addr), |c| {
        c.spec.path = None;
        c.spec.url = Some(format!("http://{}/openapi.json", api.addr));
        c.spec.ref_root = Some(dir.clone());
        c.spec.watch_interval_ms = 20;
    }))
    .await;
    let first = admin_get(dw.admin, "/spec").await.json()["revision"].clone();
    let retyped = "Pet: {type: object, properties: {age: {type: integer}}}\n";
    edited_and_reloaded(dw.admin, &first, &common, retyped).await;
    dw.stop().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Write `text` (which retypes `age`) to `file`, a file the spec bundles, and wait for the
/// revision after `first`, whose diff says so.
async fn edited_and_reloaded(
    admin: std::net::SocketAddr,
    first: &Value,
    file: &std::path::Path,
    text: &str,
) {
    std::fs::write(file, text).unwrap();
    let now = new_revision(admin, first).await;
    assert_ne!(now, *first);
    let diff = admin_get(admin, "/spec/diff").await.json();
    assert_eq!(
        diff["changes"][0]["kind"], "body_property_retyped",
        "{diff}"
    );
}
