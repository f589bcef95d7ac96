//! `driftwatch mcp` against an MCP client nobody here wrote: the official Python SDK (PyPI
//! `mcp`, in a venv under target/tools/, installed on first use), over streamable HTTP, in
//! front of the demo's Channels API (which really clears what a PUT omits).

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use super::util::{example, free_addr};

/// A client nobody here wrote: its venv under target/tools/, its package, the module that
/// says it is installed, and our script that drives it step by step (none for a tool run by
/// its own command).
#[derive(Clone, Copy)]
pub struct Sdk {
    pub venv: &'static str,
    pub package: &'static str,
    pub module: &'static str,
    pub script: &'static str,
}

/// The official Python SDK.
pub const PYTHON_SDK: Sdk = Sdk {
    venv: "target/tools/mcp-client",
    package: "mcp==2.3.0",
    module: "mcp.client.streamable_http",
    script: "scripts/mcp-client.py",
};

/// The official Python SDK with the OpenTelemetry SDK and its OTLP/HTTP exporter beside it
/// (scripts/mcp-session.py traces its calls with them), and the receiver's messages.
pub const TRACED_SDK: Sdk = Sdk {
    venv: "target/tools/mcp-traced",
    package: "mcp==2.3.0 opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2 opentelemetry-proto==1.45.2",
    module: "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    script: "scripts/mcp-session.py",
};

/// FastMCP's client.
const FASTMCP: Sdk = Sdk {
    venv: "target/tools/fastmcp-client",
    package: "fastmcp==4.1.6",
    module: "fastmcp",
    script: "scripts/mcp-client-fastmcp.py",
};

/// The venv's python with the client installed, made when missing. One test at a time makes
/// a venv: on a fresh clone the trace tests, run together, each found it missing, and two
/// `python3 -m venv` on one directory made one fail.
pub fn python(sdk: Sdk) -> PathBuf {
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(sdk.venv);
    let python = venv.join("bin/python");
    let has_sdk = |python: &Path| {
        Command::new(python)
            .args(["-c", &format!("import {}", sdk.module)])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !has_sdk(&python) {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 -m venv");
        assert!(made.success());
        let pip = Command::new(venv.join("bin/pip"))
            .args(["install", "-q"])
            .args(sdk.package.split_whitespace())
            .status()
            .expect("pip");
        assert!(pip.success(), "pip install {}", sdk.package);
    }
    python
}

struct Gateway {
    child: Child,
    url: String,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `driftwatch mcp` on `spec`, exposing `enabled` (every operation for `None`), in front of
/// `api`.
fn gateway(
    dir: &Path,
    spec: &Path,
    api: SocketAddr,
    enabled: Option<&[&str]>,
    mode: &str,
) -> Gateway {
    gateway_with(dir, spec, api, enabled, mode, &[])
}

/// [`gateway`] with more arguments.
fn gateway_with(
    dir: &Path,
    spec: &Path,
    api: SocketAddr,
    enabled: Option<&[&str]>,
    mode: &str,
    more: &[&str],
) -> Gateway {
    let exposure = match enabled {
        Some(names) => {
            let enable = dir.join("enabled.txt");
            std::fs::write(&enable, names.join("\n")).unwrap();
            vec!["--enable".to_string(), enable.display().to_string()]
        }
        None => vec!["--all".to_string()],
    };
    let config = dir.join("driftwatch.toml");
    std::fs::write(&config, "[spec]\nwatch_interval_ms = 200\n").unwrap();
    let (listen, admin) = (free_addr(), free_addr());
    let child = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .arg("mcp")
        .args(["--spec", spec.to_str().unwrap()])
        .args(["--upstream", &format!("http://{api}")])
        .args(&exposure)
        .args(["--listen", &listen.to_string()])
        .args(["--admin-listen", &admin.to_string()])
        .args(["--mode", mode])
        .args(["--config", config.to_str().unwrap()])
        .args(more)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("gateway.log")).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(listen).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "driftwatch mcp did not listen"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Gateway {
        child,
        url: format!("http://{listen}/mcp"),
    }
}

/// The Python client running `steps`, one JSON line read back per step; `on_said` runs when
/// the client says something.
fn client(url: &str, steps: &Value, on_said: impl FnMut(&str)) -> Vec<Value> {
    client_and_stderr(PYTHON_SDK, url, steps, on_said).0
}

/// As [`client`], with what the client (and a server it started) wrote to stderr.
fn client_and_stderr(
    sdk: Sdk,
    url: &str,
    steps: &Value,
    mut on_said: impl FnMut(&str),
) -> (Vec<Value>, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(sdk.script);
    let mut child = Command::new(python(sdk))
        .arg(script)
        .arg(url)
        .arg(steps.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut answers = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let answer: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(said) = answer["said"].as_str() {
            on_said(said);
        }
        answers.push(answer);
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (answers, stderr)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("driftwatch-mcp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn property_names(tool: &Value) -> Vec<String> {
    let mut names: Vec<String> = tool["inputSchema"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    names.sort();
    names
}

#[test]
fn the_python_sdk_lists_calls_is_refused_in_enforce_and_hears_the_spec_change() {
    the_story(PYTHON_SDK, "enforce-sdk");
}

#[test]
fn fastmcp_lists_calls_is_refused_in_enforce_and_hears_the_spec_change() {
    the_story(FASTMCP, "enforce-fastmcp");
}

/// List, read, a stale update refused in enforce mode, the whole update, a missing argument,
/// then the spec changes under the gateway.
fn the_story(sdk: Sdk, name: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let api = runtime.block_on(super::silent_clears::demo_api());
    let dir = temp_dir(name);
    let spec = dir.join("openapi.yaml");
    let original = std::fs::read_to_string(example("channels.openapi.yaml")).unwrap();
    std::fs::write(&spec, &original).unwrap();
    let enabled = ["getChannel", "updateChannel"];
    let gw = gateway(&dir, &spec, api, Some(&enabled), "enforce");

    let channel = json!(driftwatch::demo::api::seed());
    let mut whole = channel.as_object().unwrap().clone();
    whole.remove("uniqueId");
    whole.insert("name".into(), json!("Retro TV HD"));
    let mut stale = whole.clone();
    stale.remove("graphicsElementIds");
    let steps = json!([
        {"list": true},
        {"call": "getChannel", "args": {"id": 7}},
        {"call": "updateChannel", "args": stale},
        {"call": "updateChannel", "args": whole},
        {"call": "getChannel", "args": {"id": 7}},
        {"call": "getChannel", "args": {}},
        {"say": "edit the spec"},
        {"wait_list_changed": 20},
        {"list": true},
    ]);
    // A new revision: the replace body gains `epgRegion`, and a new operation appears that is
    // not enabled.
    let edited = original
        .replace(
            "        epgTimeShiftMinutes: { type: integer, minimum: -720, maximum: 720 }\n",
            "        epgTimeShiftMinutes: { type: integer, minimum: -720, maximum: 720 }\n        epgRegion: { type: string }\n",
        )
        .replace(
            "paths:\n",
            "paths:\n  /api/v1/regions:\n    get:\n      operationId: listRegions\n      responses:\n        \"200\": { description: ok }\n",
        );
    assert_ne!(edited, original);
    let (answers, _) = client_and_stderr(sdk, &gw.url, &steps, |_| {
        let mut file = std::fs::File::create(&spec).unwrap();
        file.write_all(edited.as_bytes()).unwrap();
    });
    assert_eq!(answers.len(), 9, "{answers:#?}");

    // tools/list: the two enabled tools, their arguments straight from the spec.
    let tools = answers[0]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["getChannel", "updateChannel"]);
    assert_eq!(property_names(&tools[0]), ["id"]);
    assert_eq!(tools[0]["description"], "GET /api/v1/channels/{id}");
    let replace = tools[1]["description"].as_str().unwrap();
    assert!(
        replace.contains("Replaces the whole resource: send every field"),
        "{replace}"
    );
    assert_eq!(tools[0]["inputSchema"]["required"], json!(["id"]));
    let update = property_names(&tools[1]);
    assert_eq!(
        update.len(),
        32,
        "id and the 31 writable fields: {update:?}"
    );
    assert!(update.contains(&"graphicsElementIds".to_string()));
    assert!(!update.contains(&"uniqueId".to_string()), "read-only");

    // getChannel: the API's JSON as structured content.
    assert_eq!(answers[1]["isError"], false);
    assert_eq!(
        answers[1]["structured"]["graphicsElementIds"],
        json!([3, 7])
    );
    // The stale update is refused before it reaches the API, as an error result.
    assert_eq!(answers[2]["isError"], true, "{}", answers[2]);
    let refusal = answers[2]["text"].as_str().unwrap();
    assert!(
        refusal.starts_with("HTTP 409") && refusal.contains("graphicsElementIds"),
        "{refusal}"
    );
    // The whole body goes through, and the API kept the list.
    assert_eq!(answers[3]["isError"], false, "{}", answers[3]);
    assert_eq!(answers[4]["structured"]["name"], "Retro TV HD");
    assert_eq!(
        answers[4]["structured"]["graphicsElementIds"],
        json!([3, 7])
    );
    // The model's mistake is said back, not sent.
    assert_eq!(answers[5]["isError"], true);
    assert_eq!(
        answers[5]["text"],
        "missing argument `id`: the path needs it"
    );

    // The spec changed: the client heard it, and the new list has the new field but not the
    // operation nobody enabled.
    assert_eq!(answers[7], json!({"list_changed": true}));
    let tools = answers[8]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["getChannel", "updateChannel"]);
    assert!(property_names(&tools[1]).contains(&"epgRegion".to_string()));
    // The operator is told what the new revision offers that nobody enabled.
    let log = std::fs::read_to_string(dir.join("gateway.log")).unwrap();
    let unexposed: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains("not exposed"))
        })
        .collect();
    assert_eq!(unexposed.len(), 1, "{log}");
    assert_eq!(unexposed[0]["operation"], "listRegions");
}

/// Every shared spec served with `--all`: the tools a real client lists pass `driftwatch
/// tools` against the same spec, one per operation.
#[test]
fn every_real_spec_served_whole_lists_tools_that_check_clean() {
    let dir = temp_dir("all");
    let nowhere: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut total = 0;
    for (rel, operations) in super::real_specs::SPECS {
        let spec = super::util::shared_spec(rel);
        let gw = gateway(&dir, &spec, nowhere, None, "observe");
        let answers = client(&gw.url, &json!([{"list": true}]), |_| {});
        let listed = dir.join("tools.json");
        std::fs::write(&listed, answers[0].to_string()).unwrap();
        let count = answers[0]["tools"].as_array().unwrap().len();
        assert_eq!(count, *operations, "{rel}");
        let out = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .args(["tools", "--spec", spec.to_str().unwrap()])
            .args(["--tools", listed.to_str().unwrap(), "--format", "json"])
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{rel}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(out.status.code(), Some(0), "{rel}: {:#}", report["defects"]);
        assert_eq!(
            report["tools"].as_array().unwrap().len(),
            *operations,
            "{rel}"
        );
        total += count;
    }
    assert_eq!(total, 3371);
}

/// `--stdio`: the Python SDK starts driftwatch itself and speaks over its stdin and stdout;
/// the audit events, which go to stdout under `serve`, must not break the stream.
#[test]
fn over_stdio_a_client_that_starts_driftwatch_lists_and_calls() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let api = runtime.block_on(super::silent_clears::demo_api());
    let admin = free_addr();
    let command = json!([
        env!("CARGO_BIN_EXE_driftwatch"),
        "mcp",
        "--stdio",
        "--all",
        "--spec",
        example("channels.openapi.yaml"),
        "--upstream",
        format!("http://{api}"),
        "--admin-listen",
        admin.to_string(),
    ]);
    let mut stale = driftwatch::demo::api::seed();
    stale.remove("graphicsElementIds");
    stale.remove("uniqueId");
    let steps = json!([
        {"list": true},
        {"call": "getChannel", "args": {"id": 7}},
        {"call": "updateChannel", "args": stale},
        {"call": "getChannel", "args": {"id": 7}},
    ]);
    let (answers, stderr) =
        client_and_stderr(PYTHON_SDK, &format!("stdio:{command}"), &steps, |_| {});
    assert_eq!(answers[0]["tools"].as_array().unwrap().len(), 10);
    assert_eq!(
        answers[1]["structured"]["graphicsElementIds"],
        json!([3, 7])
    );
    // Observe mode: the stale update goes through (with findings), and the API cleared the list.
    assert_eq!(answers[2]["isError"], false, "{}", answers[2]);
    assert_eq!(answers[3]["structured"]["graphicsElementIds"], json!([]));
    // The audit's event for it went to stderr, naming the tool that made the request.
    let event = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["method"] == "PUT")
        .unwrap_or_else(|| panic!("no event for the PUT on stderr:\n{stderr}"));
    assert_eq!(event["tool"], "updateChannel", "{event}");
    let kinds = super::util::strings(&event["findings"], "kind");
    assert!(kinds.contains(&"silent_clear_risk"), "{kinds:?}");
}

/// `--client-config`: Claude Desktop's entry is a command a real client can start (the Python
/// SDK starts it here and lists the tools); Cursor's and VS Code's point at `--listen`.
#[test]
fn the_client_config_snippets_reach_the_gateway_they_describe() {
    let admin = free_addr().to_string();
    let snippet = |kind: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["mcp", "--spec", "examples/channels.openapi.yaml", "--all"])
            .args([
                "--upstream",
                "http://127.0.0.1:9",
                "--listen",
                "127.0.0.1:8123",
            ])
            .args(["--admin-listen", &admin, "--client-config", kind])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let claude: Value = serde_json::from_str(&snippet("claude")).unwrap();
    let entry = &claude["mcpServers"]["driftwatch"];
    let mut argv = vec![entry["command"].clone()];
    argv.extend(entry["args"].as_array().unwrap().iter().cloned());
    assert!(
        argv.contains(&json!("--stdio")) && argv[4].as_str().unwrap().starts_with('/'),
        "{argv:?}"
    );
    let answers = client(
        &format!("stdio:{}", Value::Array(argv)),
        &json!([{"list": true}]),
        |_| {},
    );
    assert_eq!(answers[0]["tools"].as_array().unwrap().len(), 10);
    let url = "http://127.0.0.1:8123/mcp";
    let cursor: Value = serde_json::from_str(&snippet("cursor")).unwrap();
    assert_eq!(cursor["mcpServers"]["driftwatch"]["url"], url);
    let vscode: Value = serde_json::from_str(&snippet("vscode")).unwrap();
    assert_eq!(
        vscode["servers"]["driftwatch"],
        json!({"type": "http", "url": url})
    );
    assert!(snippet("inspector").contains(url));
}

/// `--header`: the operator's credential reaches the API on every call, from a file, and the
/// model cannot pass one (it is no tool argument); an inline value is refused at start.
/// Issue 69: a gateway whose `--header`s give no credential its served operations' security
/// accepts says so at start, naming how many and the first; the bearer token given, only the
/// Basic-only export is left.
#[test]
fn a_gateway_started_without_the_credential_its_operations_need_says_so() {
    let dir = temp_dir("uncredentialed");
    let nowhere: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let spec = example("notes.openapi.yaml");
    let token = dir.join("token");
    std::fs::write(&token, "Bearer s3cret\n").unwrap();
    let header = format!("Authorization=file:{}", token.display());
    let said = |more: &[&str]| {
        let gw = gateway_with(&dir, &spec, nowhere, None, "observe", more);
        drop(gw);
        let log = std::fs::read_to_string(dir.join("gateway.log")).unwrap();
        let line = log.lines().find(|l| l.contains("no --header gives"));
        line.map(|l| serde_json::from_str::<Value>(l).unwrap())
    };
    let bare = said(&[]).expect("said without a header");
    assert_eq!(
        (&bare["operations"], &bare["first"]),
        (&json!(4), &json!("listNotes"))
    );
    let bearer = said(&["--header", &header]).expect("said for the export");
    assert_eq!(
        (&bearer["operations"], &bearer["first"]),
        (&json!(1), &json!("exportNotes"))
    );
    assert!(
        !std::fs::read_to_string(dir.join("gateway.log"))
            .unwrap()
            .contains("s3cret")
    );
    let enabled = ["getStatus"];
    let public = gateway_with(&dir, &spec, nowhere, Some(&enabled), "observe", &[]);
    drop(public);
    let log = std::fs::read_to_string(dir.join("gateway.log")).unwrap();
    assert!(!log.contains("no --header gives"), "{log}");
}

#[test]
fn credentials_come_from_a_file_the_operator_names_never_from_the_model() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let up = runtime.block_on(super::upstream::start(
        super::upstream::ok(),
        std::time::Duration::ZERO,
        None,
    ));
    let dir = temp_dir("credentials");
    let token = dir.join("token");
    std::fs::write(&token, "Bearer s3cret\n").unwrap();
    let header = format!("Authorization=file:{}", token.display());
    let spec = example("channels.openapi.yaml");
    let gw = gateway_with(
        &dir,
        &spec,
        up.addr,
        None,
        "observe",
        &["--header", &header],
    );
    let answers = client(
        &gw.url,
        &json!([{"list": true}, {"call": "getChannel", "args": {"id": 7}}]),
        |_| {},
    );
    let tools = answers[0]["tools"].as_array().unwrap();
    assert!(
        tools.iter().all(|t| !property_names(t)
            .iter()
            .any(|p| p.eq_ignore_ascii_case("authorization"))),
        "no tool takes a credential"
    );
    assert_eq!(answers[1]["isError"], false, "{}", answers[1]);
    let sent = up.recorded();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("authorization"), Some("Bearer s3cret"));
    let log = std::fs::read_to_string(dir.join("gateway.log")).unwrap();
    assert!(
        !log.contains("s3cret"),
        "the credential is never logged:\n{log}"
    );
    drop(gw);

    let refused = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["mcp", "--all", "--spec", spec.to_str().unwrap()])
        .args([
            "--upstream",
            "http://127.0.0.1:9",
            "--header",
            "Authorization=Bearer x",
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("never inline"), "{said}");
}

/// The status line of an MCP `initialize` POSTed to `url`'s address with `Host: host`.
fn initialize_status(url: &str, host: &str) -> String {
    use std::io::Read;
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).unwrap();
    let text = String::from_utf8_lossy(&head[..n]).into_owned();
    text.lines().next().unwrap_or_default().to_string()
}

/// Against DNS rebinding: a `Host` that is not loopback's, nor one the operator allowed, is
/// refused before any MCP work.
#[test]
fn only_loopback_and_the_allowed_hosts_reach_the_endpoint() {
    let dir = temp_dir("hosts");
    let spec = example("channels.openapi.yaml");
    let nowhere: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let more = ["--allowed-host", "driftwatch-mcp"];
    let gw = gateway_with(&dir, &spec, nowhere, None, "observe", &more);
    assert_eq!(
        initialize_status(&gw.url, "evil.example"),
        "HTTP/1.1 403 Forbidden"
    );
    assert_eq!(
        initialize_status(&gw.url, "driftwatch-mcp:8070"),
        "HTTP/1.1 200 OK"
    );
    assert_eq!(initialize_status(&gw.url, "localhost"), "HTTP/1.1 200 OK");
}
