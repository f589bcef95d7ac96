//! `driftwatch wrap` around real MCP servers nobody here wrote, driven by the official Python
//! SDK (scripts/mcp-session.py): Notion's npm server (by its `BASE_URL`) and the Go
//! github-mcp-server from a PyPI wheel (through the forward proxy, its proxy variables and CA
//! set by wrap). Calls are made one at a time and two at once; the API mock answers a request
//! only once its partner has arrived, so the two calls of a pair are both in flight when the
//! second request comes, whatever order the server sends them in.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::mcp::{PYTHON_SDK, Sdk, python};
use super::sidecar::{admin_get, sample, scrape};
use super::upstream::{self, Responder, Upstream};
use super::util::eventually_within;

/// Seconds the live catalog check of a real server's catalog against GitHub's or Notion's spec
/// is given: ~1 s a run in a debug build on an idle core, several runs as the learned map grows,
/// and CI runs the tests with both cores busy (10 s was once not enough there).
const LIVE_CHECK: u64 = 60;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Notion's server: two calls at once told apart by their values; two that differ in nothing
/// a request shows (ambiguous, never a guess); one refused in enforce mode (the spec Notion
/// ships says `children` items are strings).
pub(super) fn pairs_and_a_refusal() -> [Value; 3] {
    [
        json!({"together": [["API-retrieve-a-page", {"page_id": "pair-a"}],
                            ["API-get-block-children", {"block_id": "pair-b"}]]}),
        json!({"together": [["API-retrieve-a-page", {"page_id": "pair-same"}],
                            ["API-retrieve-a-block", {"block_id": "pair-same"}]]}),
        json!({"call": ["API-post-page", {"parent": {"page_id": "p-0"},
            "properties": {"title": [{"text": {"content": "Drift"}}]},
            "children": [{"object": "block", "type": "paragraph", "paragraph": {"rich_text": []}}]}]}),
    ]
}

/// `wrap`'s arguments for Notion's server in enforce mode on `spec` against `api`, then
/// `extra`.
pub(super) fn enforcing(spec: &Path, api: SocketAddr, extra: &[&str]) -> Vec<String> {
    let spec = spec.display().to_string();
    let upstream = format!("http://{api}");
    let args = [
        "--mode",
        "enforce",
        "--spec",
        &spec,
        "--upstream",
        &upstream,
    ];
    let base_url = ["--env", "BASE_URL={url}"];
    (args.iter().chain(&base_url).chain(extra))
        .map(|a| a.to_string())
        .collect()
}

/// `driftwatch wrap` (admin on `admin`) fronting at `front` Notion's server (its package at
/// `notion`) speaking streamable HTTP on `server`, its API `api`; not yet started.
pub(super) fn notion_behind_the_front(
    notion: &Path,
    api: SocketAddr,
    (admin, front, server): (SocketAddr, SocketAddr, SocketAddr),
) -> Command {
    let mut dw = Command::new(env!("CARGO_BIN_EXE_driftwatch"));
    dw.args(["wrap", "--admin-listen", &admin.to_string(), "--spec"])
        .arg(notion.join("scripts/notion-openapi.json"))
        .args([
            "--upstream",
            &format!("http://{api}"),
            "--env",
            "BASE_URL={url}",
        ])
        .args(["--mcp-upstream", &format!("http://{server}/mcp")])
        .args(["--mcp-listen", &front.to_string(), "--", "node"])
        .arg(notion.join("bin/cli.mjs"))
        .args(["--transport", "http", "--port", &server.port().to_string()])
        .arg("--unsafe-disable-auth")
        .env("NOTION_TOKEN", "ntn_placeholder");
    dw
}

/// Notion's package directory and the Go server's binary, installed when missing.
pub(super) fn servers() -> (PathBuf, PathBuf) {
    let out = Command::new("bash")
        .arg(root().join("scripts/wrap-servers"))
        .output()
        .expect("scripts/wrap-servers");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines().map(|l| root().join(l));
    (lines.next().unwrap(), lines.next().unwrap())
}

/// An API mock answering with a body no schema declares in full (every request gets an event).
/// A request whose target holds `pair-` (the values of calls made together) is answered once
/// its partner has arrived, or after 5 s.
pub(super) fn pairing_api(tls: Option<tokio_rustls::TlsAcceptor>) -> Upstream {
    let arrived = Arc::new((Mutex::new(0usize), Condvar::new()));
    let responder: Responder = Arc::new(move |r| {
        const BODY: &str = r#"{"object":"user","id":"u","driftwatch_probe":1}"#;
        if !r.target.contains("pair-") {
            return (200, BODY.into());
        }
        let (count, paired) = &*arrived;
        let mut n = count.lock().unwrap();
        *n += 1;
        paired.notify_all();
        let five = Duration::from_secs(5);
        drop(paired.wait_timeout_while(n, five, |n| *n % 2 == 1).unwrap());
        (200, BODY.into())
    });
    let (tx, rx) = std::sync::mpsc::channel();
    // Its own runtime: the responder blocks a thread while it waits for the partner.
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let _ = tx.send(upstream::start(responder, Duration::ZERO, tls).await);
            std::future::pending::<()>().await
        });
    });
    rx.recv().unwrap()
}

fn free_port() -> SocketAddr {
    super::util::free_addr()
}

/// Wait (bounded) until `addr` accepts connections.
pub(super) async fn listening(addr: SocketAddr, what: &str) {
    super::util::eventually(what, || async {
        tokio::net::TcpStream::connect(addr).await.ok().map(drop)
    })
    .await;
}

/// A session of the SDK against `driftwatch wrap ARGS -- SERVER...`, open until `release`.
pub(super) struct Session {
    child: Child,
    out: PathBuf,
    hold: PathBuf,
    /// The SDK's stderr, which holds wrap's and the server's: a file, never a pipe, so nothing
    /// blocks on a full pipe and a failed wait can show it without waiting for the session.
    stderr: PathBuf,
    pub admin: SocketAddr,
}

/// Seconds a session is given to write its events: the SDK, wrap (its spec compiled by a
/// debug build: GitHub's takes ~4 s on an idle core) and the server start, then each call.
const SESSION_EVENTS: u64 = 60;

impl Session {
    /// The SDK starting `driftwatch wrap --admin-listen A WRAP -- SERVER` as its stdio server.
    fn start(name: &str, plan: Value, wrap: &[String], server: &[String]) -> Session {
        Session::start_with(name, plan, wrap, server, PYTHON_SDK, &[])
    }

    /// [`Session::start`] with `sdk`'s client, run with `env` besides this process's.
    pub(super) fn start_with(
        name: &str,
        plan: Value,
        wrap: &[String],
        server: &[String],
        sdk: Sdk,
        env: &[(&str, String)],
    ) -> Session {
        let admin = free_port();
        let mut target: Vec<String> = vec![env!("CARGO_BIN_EXE_driftwatch").into(), "wrap".into()];
        target.extend(["--admin-listen".into(), admin.to_string()]);
        target.extend(wrap.iter().cloned());
        target.push("--".into());
        target.extend(server.iter().cloned());
        Session::open_with(name, plan, admin, &target, sdk, env)
    }

    /// The SDK speaking to `target` (a command, or a streamable HTTP endpoint), whose
    /// driftwatch answers on `admin`.
    fn open(name: &str, plan: Value, admin: SocketAddr, target: &[String]) -> Session {
        Session::open_with(name, plan, admin, target, PYTHON_SDK, &[])
    }

    /// [`Session::open`] with `sdk`'s client, run with `env` besides this process's.
    pub(super) fn open_with(
        name: &str,
        plan: Value,
        admin: SocketAddr,
        target: &[String],
        sdk: Sdk,
        env: &[(&str, String)],
    ) -> Session {
        let dir = std::env::temp_dir().join(format!(
            "driftwatch-wrap-session-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let hold = dir.join("release");
        let mut plan = plan.as_array().unwrap().clone();
        plan.push(json!({"hold": hold}));
        let plan_path = dir.join("plan.json");
        std::fs::write(&plan_path, Value::from(plan).to_string()).unwrap();
        let stderr = dir.join("stderr.log");
        let mut command = Command::new(python(sdk));
        let child = without_github_flags(&mut command)
            .arg(root().join("scripts/mcp-session.py"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args([&plan_path, &dir.join("out.json")])
            .arg("--")
            .args(target)
            .env("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_placeholder")
            .env("NOTION_TOKEN", "ntn_placeholder")
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Session {
            child,
            out: dir.join("out.json"),
            hold,
            stderr,
            admin,
        }
    }

    /// The events, once `n` of them carry findings.
    pub(super) async fn events(&mut self, n: usize) -> Vec<Value> {
        let deadline = std::time::Instant::now() + Duration::from_secs(SESSION_EVENTS);
        let mut events = Vec::new();
        while std::time::Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                panic!("the session ended early:\n{}", self.stderr_text());
            }
            // An admin port that accepts and never answers is asked again, not waited on.
            let asked = tokio::time::timeout(Duration::from_secs(5), findings(self.admin)).await;
            events = asked.ok().flatten().unwrap_or_default();
            if events.iter().filter(|e| e["action"] != "catalog").count() >= n {
                return events;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!(
            "waited {SESSION_EVENTS} s for {n} events: {events:#?}\nthe session's stderr:\n{}",
            self.stderr_text()
        );
    }

    /// The SDK's stderr so far (wrap's and the server's with it), its last 16 KiB.
    fn stderr_text(&self) -> String {
        let text = std::fs::read(&self.stderr).unwrap_or_default();
        String::from_utf8_lossy(&text[text.len().saturating_sub(16 << 10)..]).into_owned()
    }

    /// Let the session end; the SDK's output.
    pub(super) fn release(mut self) -> Value {
        std::fs::write(&self.hold, "").unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(SESSION_EVENTS);
        while matches!(self.child.try_wait(), Ok(None)) {
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("released, the session did not end:\n{}", self.stderr_text());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        serde_json::from_slice(&std::fs::read(&self.out).unwrap_or_default())
            .unwrap_or_else(|_| panic!("the SDK's session failed:\n{}", self.stderr_text()))
    }
}

impl Drop for Session {
    /// A test that failed leaves no client behind (its stdio server ends with its stdin).
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `command` without the machine's `GITHUB_*` variables: github-mcp-server reads each as a
/// flag (`GITHUB_HOST` sends it to another host, `GITHUB_TOOLSETS` changes its tools).
pub(super) fn without_github_flags(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("GITHUB_") {
            command.env_remove(name);
        }
    }
    command
}

/// The events `/findings` on `admin` lists, if it answers.
async fn findings(admin: SocketAddr) -> Option<Vec<Value>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(admin).await.ok()?;
    let ask = b"GET /findings HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n";
    stream.write_all(ask).await.ok()?;
    let mut got = Vec::new();
    stream.read_to_end(&mut got).await.ok()?;
    let start = got.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let found: Value = serde_json::from_slice(&got[start..]).ok()?;
    found["events"].as_array().cloned()
}

/// Each request event's (operation, tool, attribution, candidates).
fn attributed(events: &[Value]) -> Vec<(String, String, String, Vec<String>)> {
    let text = |v: &Value| v.as_str().unwrap_or("null").to_string();
    let mut out: Vec<_> = events
        .iter()
        .filter(|e| e["action"] != "catalog")
        .map(|e| {
            let candidates = e["tool_candidates"].as_array().cloned().unwrap_or_default();
            (
                text(&e["operation"]),
                text(&e["tool"]),
                text(&e["tool_attribution"]),
                candidates.iter().map(text).collect(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notions_server_under_wrap_names_the_tool_of_every_finding_and_learns_its_map() {
    let (notion, _) = servers();
    let spec = notion.join("scripts/notion-openapi.json");
    let api = pairing_api(None);
    let mut plan = json!([
        // One at a time: each the only call in flight.
        {"call": ["API-get-self", {}]},
        {"call": ["API-retrieve-a-page", {"page_id": "p-0"}]},
        {"call": ["API-get-block-children", {"block_id": "b-0"}]},
        {"call": ["API-retrieve-a-block", {"block_id": "b-1"}]},
    ]);
    plan.as_array_mut().unwrap().extend(pairs_and_a_refusal());
    let wrap = enforcing(&spec, api.addr, &[]);
    let server = [
        "node".into(),
        notion.join("bin/cli.mjs").display().to_string(),
    ];
    let mut session = Session::start("notion", plan, &wrap, &server);
    let events = session.events(9).await;
    let metrics = scrape(session.admin).await;
    let map = String::from_utf8(admin_get(session.admin, "/tools/map").await.body).unwrap();
    // The live check runs after the map changes, off the runtime: wait until it has caught up
    // with every tool the map learned.
    let mapped = toml::from_str::<toml::Value>(&map).unwrap()["tools"]
        .as_table()
        .unwrap()
        .len();
    let check: Value = eventually_within(
        "the live check to cover the learned map",
        LIVE_CHECK,
        || async {
            let check: Value = admin_get(session.admin, "/tools/check").await.json();
            let by_map = check["tools"]
                .as_array()?
                .iter()
                .filter(|t| t["by"] == "map")
                .count();
            (by_map == mapped).then_some(check)
        },
    )
    .await;
    let out = session.release();

    // Every request event names its tool, or says ambiguous listing the right one.
    let found = attributed(&events);
    println!("{found:#?}");
    assert_eq!(found.len(), 9, "eight requests sent, one refused");
    for (operation, tool, by, candidates) in &found {
        let right = format!("API-{operation}");
        match by.as_str() {
            "ambiguous" => assert!(
                tool == "(ambiguous)" && candidates.contains(&right),
                "{found:?}"
            ),
            _ => assert_eq!(tool, &right, "{found:?}"),
        }
    }
    let by = |how: &str| found.iter().filter(|f| f.2 == how).count();
    assert!(
        by("arguments") >= 1,
        "a pair told apart by its values: {found:?}"
    );
    let same_id = found
        .iter()
        .filter(|f| f.2 == "ambiguous" && f.3 == ["API-retrieve-a-block", "API-retrieve-a-page"])
        .count();
    assert!(same_id >= 1, "the pair that differs in nothing: {found:?}");
    let series = |by: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| {
                l.starts_with("driftwatch_tool_requests_total{")
                    && l.contains(&format!("attribution=\"{by}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert_eq!(
        series("arguments") + series("ambiguous") + series("only_call") + series("only_tool"),
        9.0,
        "{metrics}"
    );
    assert!(
        sample(
            &metrics,
            "driftwatch_tool_findings_total{tool=\"API-post-page\",kind=\"body_type_mismatch\",severity=\"error\"}"
        ) == 1.0,
        "{metrics}"
    );

    // The refused call's result says which tool and which finding refused it.
    let refused = &out["results"][6]["text"];
    let refused: Value = serde_json::from_str(refused.as_str().unwrap()).unwrap();
    assert_eq!(refused["tool"], "API-post-page");
    assert_eq!(refused["findings"][0]["kind"], "body_type_mismatch");

    // The learned map is the one read off Notion's source (tools are `API-` + operationId).
    let learned: toml::Value = toml::from_str(&map).unwrap();
    let by_hand: toml::Value = toml::from_str(
        &std::fs::read_to_string(root().join("tests/data/wrap/notion-tools.toml")).unwrap(),
    )
    .unwrap();
    assert_eq!(learned, by_hand, "{map}");

    // The live check is `driftwatch tools` on the catalog served and the learned map.
    let dir = std::env::temp_dir().join(format!(
        "driftwatch-wrap-session-notion-{}",
        std::process::id()
    ));
    std::fs::write(dir.join("tools.json"), out["tools"].to_string()).unwrap();
    std::fs::write(dir.join("map.toml"), &map).unwrap();
    let offline = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["tools", "--format", "json", "--spec"])
        .arg(&spec)
        .arg("--tools")
        .arg(dir.join("tools.json"))
        .arg("--map")
        .arg(dir.join("map.toml"))
        .output()
        .unwrap();
    let offline: Value = serde_json::from_slice(&offline.stdout).unwrap();
    assert_eq!(check, offline);
    let tools = out["tools"]["tools"].as_array().unwrap().len();
    println!(
        "notion under wrap: {tools} tools listed, {} request events, learned:\n{map}",
        found.len()
    );
}

/// The hand-written map of the calls the GitHub test makes, from github-mcp-server's source.
fn github_by_hand() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(root().join("tests/data/wrap/github-tools.toml")).unwrap();
    let map: toml::Value = toml::from_str(&text).unwrap();
    map["tools"]
        .as_table()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

/// `wrap --config` for the Go server through the forward proxy to `api` as GitHub, with
/// `api_extra` added to its `[[api]]` table.
fn go_config(
    name: &str,
    pki: &super::transport::Pki,
    api: &Upstream,
    api_extra: &str,
) -> [String; 2] {
    let dir = std::env::temp_dir().join(format!("driftwatch-wrap-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let spec = super::util::shared_spec("github/api.github.com.json.gz");
    let config = format!(
        "[proxy]\nkind = \"forward\"\n[forward]\nca_dir = {ca:?}\n[upstream_tls]\nca_file = {pem:?}\n\
         [[api]]\nname = \"github\"\nspec = {spec:?}\nhosts = [\"api.github.com\"]\nupstream = \"https://127.0.0.1:{port}\"\n{api_extra}",
        ca = dir.join("ca").display().to_string(),
        pem = pki.ca_pem.display().to_string(),
        spec = spec.display().to_string(),
        port = api.addr.port(),
    );
    std::fs::write(dir.join("driftwatch.toml"), config).unwrap();
    [
        "--config".to_string(),
        dir.join("driftwatch.toml").display().to_string(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_server_from_pypi_under_wrap_goes_through_the_forward_proxy_with_its_tools_named() {
    let (_, go) = servers();
    let pki = super::transport::pki_for("wrap-go", &["localhost", "127.0.0.1"]);
    let api = pairing_api(Some(pki.acceptor.clone()));
    let wrap = go_config("go", &pki, &api, "");
    let plan = json!([
        {"call": ["get_me", {}]},
        {"call": ["get_issue", {"owner": "octo-org", "repo": "hello-world", "issue_number": 42}]},
        {"together": [["get_issue", {"owner": "pair-one", "repo": "r", "issue_number": 1}],
                      ["get_pull_request", {"owner": "pair-two", "repo": "r", "pullNumber": 2}]]},
    ]);
    let server = [go.display().to_string(), "stdio".into()];
    let mut session = Session::start("go", plan, &wrap, &server);
    let events = session.events(4).await;
    let map = String::from_utf8(admin_get(session.admin, "/tools/map").await.body).unwrap();
    // Real drift in the server's catalog, found live: its get_issue declares `issue_number` a
    // number where GitHub's spec says integer.
    let defect =
        "driftwatch_catalog_defects{tool=\"get_issue\",kind=\"type_mismatch\",severity=\"error\"}";
    eventually_within("the live check's defect", LIVE_CHECK, || async {
        (sample(&scrape(session.admin).await, defect) == 1.0).then_some(())
    })
    .await;
    // /tools/check ranks by harm: a summary per tool and the defects, worst first.
    let check: Value = admin_get(session.admin, "/tools/check").await.json();
    let rank = |s: &Value| {
        ["critical", "error", "warning", "info"]
            .iter()
            .position(|r| s == r)
    };
    let ranks: Vec<usize> = (check["defects"].as_array().unwrap().iter())
        .map(|d| rank(&d["severity"]).unwrap())
        .collect();
    assert!(ranks.is_sorted(), "{ranks:?}");
    let summary = check["summary"].as_array().unwrap();
    assert!(
        (summary.iter()).any(|s| s["tool"] == "get_issue" && s["worst"] == "error"),
        "{summary:?}"
    );
    let worst: Vec<usize> = summary.iter().map(|s| rank(&s["worst"]).unwrap()).collect();
    assert!(worst.is_sorted(), "{worst:?}");
    let out = session.release();
    let found = attributed(&events);
    println!("{found:#?}");
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(found.iter().any(|f| f.2 == "arguments"), "{found:?}");
    let by_hand = github_by_hand();
    for (operation, tool, by, candidates) in &found {
        let right = by_hand
            .iter()
            .find(|(_, op)| *op == operation)
            .map(|(t, _)| t)
            .unwrap();
        match by.as_str() {
            "ambiguous" => assert!(candidates.contains(right), "{found:?}"),
            _ => assert_eq!(tool, right, "{found:?}"),
        }
    }
    let learned: toml::Value = toml::from_str(&map).unwrap();
    let learned: BTreeMap<String, String> = learned["tools"]
        .as_table()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    assert_eq!(learned, by_hand, "{map}");
    drop(out);
}

/// A call whose request driftwatch refuses, through a server that passes on only the status
/// (github-mcp-server formats go-github's error, which reads a `message` our problem body does
/// not have): the result the SDK gets keeps the server's text and gains the refusal's detail
/// and fields (its answer is a JSON-RPC error, so there the message gains them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_calls_result_says_why_when_the_server_drops_the_body() {
    let (_, go) = servers();
    let pki = super::transport::pki_for("wrap-refusal", &["localhost", "127.0.0.1"]);
    let api = pairing_api(Some(pki.acceptor.clone()));
    let wrap = go_config("refusal", &pki, &api, "mode = \"enforce\"\n");
    let plan = json!([
        {"call": ["update_issue", {"owner": "octo-org", "repo": "hello-world", "issue_number": 42, "state": "reopened"}]},
        {"call": ["get_me", {}]},
    ]);
    let server = [go.display().to_string(), "stdio".into()];
    let mut session = Session::start("refusal", plan, &wrap, &server);
    session.events(1).await;
    let out = session.release();
    // github-mcp-server answers a failed API call with a JSON-RPC error (the SDK raises it).
    let refused = &out["results"][0];
    println!("the refused call's answer: {refused}");
    let text = refused["error"].as_str().unwrap();
    let (server_said, ours) = text.split_once("driftwatch refused").unwrap();
    assert!(
        server_said.contains(": 422"),
        "the server's own text is kept: {text}"
    );
    assert!(
        !server_said.contains("does not match"),
        "the server dropped the detail: {text}"
    );
    assert!(ours.contains("(422 Unprocessable Entity)"), "{text}");
    assert!(ours.contains("/state"), "the field is named: {text}");
    // get_me fails on the mock's string id: the server's own error, which nothing refused.
    let other = &out["results"][1];
    let other_text = other.to_string();
    assert!(
        other_text.contains("failed to get user") && !other_text.contains("driftwatch refused"),
        "an answer driftwatch refused nothing of passes as the server gave it: {other}"
    );
    let puts: Vec<_> = api
        .recorded()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert!(puts.is_empty(), "the refused request never reached the API");
}

/// `driftwatch wrap` with `wrap_args`, fronting scripts/status-only-mcp.py (the official SDK's
/// streamable HTTP, SSE answers) whose one tool renames channel 7 of the demo API `api`
/// through a stale schema; the SDK client's result of that call.
async fn rename_through_the_front(name: &str, api: SocketAddr, wrap_args: &[&str]) -> Value {
    let (admin, front, server) = (free_port(), free_port(), free_port());
    let mut dw = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["wrap", "--admin-listen", &admin.to_string(), "--spec"])
        .arg(super::util::example("channels.openapi.yaml"))
        .args(["--upstream", &format!("http://{api}")])
        .args(wrap_args)
        .args(["--mcp-upstream", &format!("http://{server}/mcp")])
        .args(["--mcp-listen", &front.to_string(), "--"])
        .arg(python(PYTHON_SDK))
        .arg(root().join("scripts/status-only-mcp.py"))
        .args([&server.port().to_string(), "{url}"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    listening(server, "the server's HTTP port").await;
    let plan = json!([{"call": ["rename_channel", {"channel_id": 7, "name": "Retro TV HD"}]}]);
    let mut session = Session::open(name, plan, admin, &[format!("http://{front}/mcp")]);
    session.events(1).await;
    let out = session.release();
    let _ = Command::new("kill")
        .args(["-TERM", &dw.id().to_string()])
        .status();
    let _ = dw.wait();
    out["results"][0].clone()
}

/// Over the front's SSE: a refused call's result, which the server cut to "status code
/// 409", says why; in repair mode the same call succeeds and the list it omitted is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_sse_a_refused_call_says_why_and_a_repaired_one_lands() {
    let api = super::silent_clears::demo_api().await;
    let refused = rename_through_the_front("sse-refused", api, &["--mode", "enforce"]).await;
    println!("refused: {refused}");
    assert_eq!(refused["is_error"], true);
    let text = refused["text"].as_str().unwrap();
    assert!(
        text.contains("Request failed with status code 409 driftwatch refused"),
        "the server's text is kept, and ours follows it: {text}"
    );
    assert!(
        text.contains("driftwatch refused the API request this tool call made (409 Conflict)"),
        "{text}"
    );
    assert!(
        text.contains("[silent_clear_risk /graphicsElementIds]"),
        "{text}"
    );

    let config =
        std::env::temp_dir().join(format!("driftwatch-sse-repair-{}.toml", std::process::id()));
    std::fs::write(
        &config,
        "[proxy]\nmode = \"enforce\"\n[enforce.kinds]\nsilent_clear_risk = \"repair\"\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let repaired = rename_through_the_front("sse-repaired", api, &["--config", &config]).await;
    assert_eq!(repaired["is_error"], false, "{repaired}");
    assert_eq!(repaired["text"], "renamed channel 7 to Retro TV HD");
    let get = super::silent_clears::get("/api/v1/channels/7", "Bearer a", "g");
    let now = super::sidecar::raw(api, &get).await.json();
    assert_eq!(
        (&now["name"], &now["graphicsElementIds"]),
        (&json!("Retro TV HD"), &json!([3, 7]))
    );
}

/// Notion's server speaking streamable HTTP (its `--transport http`), run by wrap beside the
/// MCP front its clients reach: the same attribution as over stdio, and the catalog its SSE
/// or JSON answers carry is checked live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_mcp_server_behind_the_front_has_its_calls_attributed_and_catalog_checked() {
    let (notion, _) = servers();
    let api = pairing_api(None);
    let (admin, front, server) = (free_port(), free_port(), free_port());
    let mut dw = notion_behind_the_front(&notion, api.addr, (admin, front, server))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    listening(server, "the Notion server's HTTP port").await;
    let plan = json!([
        {"call": ["API-retrieve-a-page", {"page_id": "p-0"}]},
        {"together": [["API-retrieve-a-page", {"page_id": "pair-a"}],
                      ["API-get-block-children", {"block_id": "pair-b"}]]},
    ]);
    let url = format!("http://{front}/mcp");
    let mut session = Session::open("http", plan, admin, &[url]);
    let events = session.events(3).await;
    let check = admin_get(admin, "/tools/check").await;
    let out = session.release();
    // SIGTERM: wrap stops the server it started, then drains and exits.
    let term = Command::new("kill")
        .args(["-TERM", &dw.id().to_string()])
        .status();
    assert!(term.unwrap().success());
    let mut said = String::new();
    use std::io::Read;
    dw.stdout.take().unwrap().read_to_string(&mut said).unwrap();
    assert!(dw.wait().unwrap().success());
    super::util::eventually("the server stopped with wrap", || async {
        tokio::net::TcpStream::connect(server).await.err().map(drop)
    })
    .await;
    assert_eq!(said, "", "nothing of wrap's or the server's on stdout");
    let found = attributed(&events);
    println!("{found:#?}");
    for (operation, tool, by, candidates) in &found {
        let right = format!("API-{operation}");
        match by.as_str() {
            "ambiguous" => assert!(candidates.contains(&right), "{found:?}"),
            _ => assert_eq!(tool, &right, "{found:?}"),
        }
    }
    assert!(found.iter().any(|f| f.2 == "arguments"), "{found:?}");
    assert_eq!(
        check.status, 200,
        "the catalog was read off the HTTP answers"
    );
    let report: Value = check.json();
    let listed = out["tools"]["tools"].as_array().unwrap().len();
    let checked =
        report["tools"].as_array().unwrap().len() + report["defects"].as_array().unwrap().len();
    assert!(listed == 24 && checked >= 2, "{listed} listed: {report}");
}
