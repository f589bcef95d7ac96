//! Issue 69: `missing_credentials` through the running sidecar, offline, and at start. The API
//! here is a real loopback server that answers 401 as the spec's security says it would (a
//! bearer token or an `X-API-Key` header on `/v1/notes`, Basic on `/v1/export`, nothing on
//! `/v1/status`), so each 401 is one the finding predicted.

use std::sync::Arc;
use std::time::Duration;

use driftwatch::config::Config;
use driftwatch::policy::Mode;
use serde_json::Value;

use super::sidecar::{Running, admin_get, config, raw, sample, scrape, start};
use super::upstream::{self, Recorded};
use super::util::{eventually, example, strings};

/// What the notes API accepts, as its spec says.
fn authorized(r: &Recorded) -> bool {
    let header = |name: &str| r.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let scheme = header("authorization").map(|v| v.split(' ').next().unwrap_or(""));
    match r.target.split('?').next().unwrap_or("") {
        "/v1/status" => true,
        "/v1/export" => scheme == Some("Basic"),
        _ => scheme == Some("Bearer") || header("x-api-key").is_some(),
    }
}

/// The notes API on loopback: 200 to what its spec's security accepts, else 401.
async fn notes_api() -> upstream::Upstream {
    let answer = |r: &Recorded| match authorized(r) {
        true => (200, "[]".to_string()),
        false => (401, "{\"error\":\"unauthorized\"}".to_string()),
    };
    upstream::start(Arc::new(answer), Duration::ZERO, None).await
}

/// A sidecar on the notes spec in front of `upstream`, as `edit` sets it.
async fn notes_sidecar(upstream: &str, edit: impl FnOnce(&mut Config)) -> Running {
    start(config(upstream, |c| {
        c.spec.path = Some(example("notes.openapi.yaml"));
        edit(c);
    }))
    .await
}

/// A request's id, target and headers, and the status the API answers it.
type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], u16);

fn get(target: &str, rid: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = format!("GET {target} HTTP/1.1\r\nhost: notes\r\nx-request-id: {rid}\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("connection: close\r\n\r\n");
    out.into_bytes()
}

/// The findings of the request event of `rid` (not its answer's: the 401's body is a media
/// type the spec does not declare), as `kind` strings, once it is written.
async fn kinds_of(admin: std::net::SocketAddr, rid: &str) -> Vec<String> {
    let event = eventually(&format!("the event of {rid}"), || async move {
        let recent = admin_get(admin, "/findings?limit=100").await.json();
        let events = recent["events"].as_array().cloned().unwrap_or_default();
        let client = |e: &Value| e["findings"][0]["blame"] == "client";
        events
            .into_iter()
            .find(|e| e["request_id"] == rid && client(e))
    })
    .await;
    let kinds = strings(&event["findings"], "kind");
    kinds.into_iter().map(String::from).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_credential_the_spec_accepts_is_told_and_its_401_tied_to_it() {
    let up = notes_api().await;
    let dw = notes_sidecar(&format!("http://{}", up.addr), |_| {}).await;
    let cases: [Case; 7] = [
        ("none", "/v1/notes", &[], 401),
        ("query", "/v1/notes?X-API-Key=k3y", &[], 401),
        (
            "basic",
            "/v1/notes",
            &[("Authorization", "Basic dTpw")],
            401,
        ),
        (
            "bearer",
            "/v1/notes",
            &[("Authorization", "Bearer t0k")],
            200,
        ),
        ("header", "/v1/notes", &[("X-API-Key", "k3y")], 200),
        ("public", "/v1/status", &[], 200),
        (
            "export",
            "/v1/export",
            &[("Authorization", "Basic dTpw")],
            200,
        ),
    ];
    for (rid, target, headers, status) in cases {
        let answer = raw(dw.addr, &get(target, rid, headers)).await;
        assert_eq!(answer.status, status, "{rid}: observe passes the answer");
    }
    for rid in ["none", "basic"] {
        let kinds = kinds_of(dw.admin, rid).await;
        assert_eq!(kinds, ["missing_credentials", "upstream_rejected"], "{rid}");
    }
    // The key in the query is also a query key the API does not read; the 401 is still tied
    // to the missing credential.
    let query = [
        "unknown_query_param",
        "missing_credentials",
        "upstream_rejected",
    ];
    assert_eq!(kinds_of(dw.admin, "query").await, query);
    let recent = admin_get(dw.admin, "/findings?kind=missing_credentials")
        .await
        .json();
    let events = recent["events"].as_array().unwrap();
    let said = |rid: &str| -> Value {
        let event = events.iter().find(|e| e["request_id"] == rid).unwrap();
        assert_eq!(event["findings"][0]["blame"], "client");
        event["findings"].clone()
    };
    assert_eq!(said("none")[0]["observed"], "no credential");
    assert_eq!(said("query")[1]["observed"], "x-api-key in the query");
    assert_eq!(said("basic")[0]["observed"], "Authorization: Basic");
    assert_eq!(
        said("none")[0]["expected"],
        "Authorization: Bearer, or header x-api-key"
    );
    for (rid, at) in [("none", 1), ("query", 2)] {
        let tied = said(rid)[at]["message"].as_str().unwrap().to_string();
        assert!(tied.contains("first: missing_credentials"), "{rid}: {tied}");
    }
    // Never a value: not the key sent in the query, not Basic's user and password.
    let text = recent.to_string();
    assert!(!text.contains("k3y") && !text.contains("dTpw"), "{text}");
    let m = scrape(dw.admin).await;
    let series = "driftwatch_findings_total{kind=\"missing_credentials\",operation=\"listNotes\",severity=\"error\",blame=\"client\"}";
    assert_eq!(sample(&m, series), 3.0);
    // The four that carried one, or needed none, raised nothing.
    assert_eq!(events.len(), 3, "{recent}");
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_refuses_the_request_the_api_would_refuse_and_a_urls_userinfo_is_a_credential() {
    let up = notes_api().await;
    let enforce = |c: &mut Config| c.proxy.mode = Mode::Enforce;
    let dw = notes_sidecar(&format!("http://u:p@{}", up.addr), enforce).await;
    let refused = raw(dw.addr, &get("/v1/notes", "bare", &[])).await;
    let problem = String::from_utf8_lossy(&refused.body).to_string();
    assert_eq!(refused.status, 422, "{problem}");
    assert!(problem.contains("missing_credentials"), "{problem}");
    // The upstream URL's `u:p@` is sent as Basic to a request without Authorization: carried.
    let export = raw(dw.addr, &get("/v1/export", "export", &[])).await;
    assert_eq!(export.status, 200, "{:?}", export.body);
    // With the check off (a gateway behind driftwatch adds the token), nothing is refused.
    let off = notes_sidecar(&format!("http://{}", up.addr), |c| {
        c.proxy.mode = Mode::Enforce;
        c.audit.credentials = false;
    })
    .await;
    let passed = raw(off.addr, &get("/v1/notes", "off", &[])).await;
    assert_eq!(passed.status, 401, "the API's own answer");
    let received = up.recorded();
    let targets: Vec<&str> = received.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(
        targets,
        ["/v1/export", "/v1/notes"],
        "the refused one never left"
    );
    dw.stop().await;
    off.stop().await;
}

/// `serve --check` and the start log say a plain `http://` upstream past loopback when the
/// spec takes credentials; a loopback upstream, or a spec without security, is not said.
#[test]
fn a_plain_http_upstream_for_a_spec_that_takes_credentials_is_said_by_serve_check() {
    let check = |spec: &str, upstream: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .args(["serve", "--check", "--upstream", upstream])
            .args(["--spec", example(spec).to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(out.status.code(), Some(0), "{text}");
        text
    };
    let plain = check("notes.openapi.yaml", "http://notes.internal:8080");
    assert!(
        plain.contains(
            "warning   the upstream http://notes.internal:8080 is plain HTTP and the spec's \
             operations take credentials"
        ),
        "{plain}"
    );
    for (spec, upstream) in [
        ("notes.openapi.yaml", "https://notes.internal"),
        ("notes.openapi.yaml", "http://127.0.0.1:8080"),
        ("notes.openapi.yaml", "http://localhost:8080"),
        ("channels.openapi.yaml", "http://api.internal:8080"),
    ] {
        let text = check(spec, upstream);
        assert!(!text.contains("plain HTTP"), "{spec} {upstream}: {text}");
    }
}

/// Offline: a recording that kept the request's headers is checked; one that did not (a JSON
/// line without `headers`, an access log) cannot say whether a credential was sent.
#[test]
fn check_tells_missing_credentials_only_where_the_recording_kept_the_headers() {
    let traffic =
        std::env::temp_dir().join(format!("driftwatch-creds-{}.jsonl", std::process::id()));
    let lines = [
        r#"{"method":"GET","url":"/v1/notes","headers":{"accept":"application/json"}}"#,
        r#"{"method":"GET","url":"/v1/notes?X-API-Key=k","headers":{}}"#,
        r#"{"method":"GET","url":"/v1/notes","headers":{"authorization":"Bearer t"}}"#,
        r#"{"method":"GET","url":"/v1/notes"}"#,
        r#"{"method":"GET","url":"/v1/status","headers":{}}"#,
    ];
    std::fs::write(&traffic, lines.join("\n")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["check", "--format", "json", "--fail-on", "never"])
        .args(["--spec", example("notes.openapi.yaml").to_str().unwrap()])
        .args(["--traffic", traffic.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&traffic);
    let _ = std::fs::remove_file(&traffic);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let found: Vec<(u64, &str, &str)> = (report["findings"].as_array().unwrap().iter())
        .filter(|f| f["kind"] != "unknown_query_param")
        .map(|f| {
            let observed = f["observed"].as_str().unwrap_or("");
            (
                f["exchange"].as_u64().unwrap(),
                f["kind"].as_str().unwrap(),
                observed,
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (0, "missing_credentials", "no credential"),
            (1, "missing_credentials", "x-api-key in the query")
        ]
    );
}
