//! `driftwatch wrap` where an operator runs it (issue 49): a server started through `sh -c`
//! (as `npx` does) is stopped whole on SIGTERM; a read-only `ca_dir` and a second wrapped
//! server beside the first both start.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::util::{example, free_addr};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("driftwatch-hwrap-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `driftwatch wrap ARGS -- COMMAND`, its stdio piped (the client's side kept open), its
/// stderr dropped.
fn wrap(args: &[&str], command: &[&str]) -> Command {
    let mut wrap = Command::new(env!("CARGO_BIN_EXE_driftwatch"));
    wrap.arg("wrap")
        .args(args)
        .arg("--")
        .args(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    wrap
}

/// `wrap`'s arguments for the Channels spec, its API nowhere.
fn channels() -> [String; 4] {
    let spec = example("channels.openapi.yaml").display().to_string();
    [
        "--spec".into(),
        spec,
        "--upstream".into(),
        "http://127.0.0.1:9".into(),
    ]
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "waited 20 s for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: u32) -> bool {
    // A zombie has exited: only a running process counts.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

fn pid_in(file: &Path) -> Option<u32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// Issue 49, defect 8: a server started through `sh -c` survived wrap's SIGTERM; over stdio
/// wrap kept running until the client closed stdin (41 s). Now the server's whole process
/// group gets SIGTERM, and wrap exits at once with the client's stdin still open.
#[test]
fn sigterm_stops_a_server_started_through_a_shell_and_wrap_exits() {
    let dir = scratch("sigterm");
    let pid_file = dir.join("server.pid");
    // `sleep` is the grandchild, holding the relayed stdout open, as `npx`'s node does.
    let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
    let admin = free_addr().to_string();
    let [a, b, c, d] = channels();
    let args = [a.as_str(), &b, &c, &d, "--admin-listen", &admin];
    let mut child = wrap(&args, &["sh", "-c", &script]).spawn().unwrap();
    wait_for("the server to start", || pid_in(&pid_file).is_some());
    let server = pid_in(&pid_file).unwrap();
    assert!(alive(server));
    let stopped = Instant::now();
    let wrap_pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(wrap_pid, rustix::process::Signal::TERM).unwrap();
    wait_for("wrap to exit", || child.try_wait().unwrap().is_some());
    assert!(
        stopped.elapsed() < Duration::from_secs(10),
        "wrap took {:?} with the client's stdin open",
        stopped.elapsed()
    );
    wait_for("the grandchild to be gone", || !alive(server));
    drop(child.stdin.take());
}

fn stop(mut child: std::process::Child) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    wait_for("wrap to exit", || child.try_wait().unwrap().is_some());
}

/// Issue 49, defect 9: wrap wrote `bundle.pem` into `ca_dir`, so a read-only one (the Secret
/// mount the docs recommend) stopped it (`Permission denied`). The bundle now goes to a
/// directory of wrap's own, removed when it ends; `ca_dir` is only read.
#[test]
fn wrap_only_reads_the_ca_directory() {
    let dir = scratch("ro-ca");
    let ca_dir = dir.join("ca");
    let made = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["ca", "--ca-dir"])
        .arg(&ca_dir)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let config = dir.join("forward.toml");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nkind = \"forward\"\n[forward]\nca_dir = {:?}\n[[api]]\nname = \"channels\"\nspec = {:?}\nhosts = [\"api.test:443\"]\nupstream = \"https://127.0.0.1:9\"\n",
            ca_dir.display().to_string(),
            example("channels.openapi.yaml").display().to_string()
        ),
    )
    .unwrap();
    let told = dir.join("told");
    let script = format!(
        "echo \"$SSL_CERT_FILE\" > {}; exec sleep 300",
        told.display()
    );
    let (config, admin) = (config.display().to_string(), free_addr().to_string());
    let args = ["--config", config.as_str(), "--admin-listen", &admin];
    let wrap = wrap(&args, &["sh", "-c", &script]);
    let child = { wrap }.spawn().unwrap();
    wait_for("the server to be told its trust", || {
        std::fs::read_to_string(&told).is_ok_and(|t| t.ends_with('\n'))
    });
    let bundle = PathBuf::from(std::fs::read_to_string(&told).unwrap().trim());
    assert!(!bundle.starts_with(&ca_dir), "{}", bundle.display());
    let ca = std::fs::read_to_string(ca_dir.join("ca.pem")).unwrap();
    assert!(std::fs::read_to_string(&bundle).unwrap().starts_with(&ca));
    let mut written: Vec<String> = std::fs::read_dir(&ca_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["ca.key", "ca.pem"], "wrap wrote into ca_dir");
    stop(child);
    assert!(!bundle.exists(), "the bundle outlived wrap");
}

/// Issue 49, defect 9: a second wrapped server in the same client config could not start
/// (`cannot listen on 127.0.0.1:9090`). Without `--admin-listen`, the second takes a free
/// port and says so.
#[test]
fn two_wrapped_servers_with_the_default_admin_port_both_start() {
    let dir = scratch("two");
    let started: Vec<_> = (0..2)
        .map(|i| {
            let marker = dir.join(format!("started-{i}"));
            let script = format!("echo up > {}; exec sleep 300", marker.display());
            let [a, b, c, d] = channels();
            let mut wrap = wrap(&[a.as_str(), &b, &c, &d], &["sh", "-c", &script]);
            let child = wrap.spawn().unwrap();
            wait_for("a wrapped server to start", || marker.exists());
            child
        })
        .collect();
    for mut child in started {
        assert!(child.try_wait().unwrap().is_none(), "a wrap exited");
        stop(child);
    }
}

/// A mock MCP server over streamable HTTP: `tools/list` gets a one-tool catalog (a huge one
/// for the id `big-list`), the id `big` a 6 KB answer, anything else an empty result.
fn mcp_responder() -> super::upstream::Responder {
    std::sync::Arc::new(|r| {
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
        let id = body["id"].clone();
        let tool = |name: String| serde_json::json!({"name": name, "description": "d", "inputSchema": {"type": "object"}});
        let result = match (body["method"].as_str(), id.as_str()) {
            (Some("tools/list"), Some("big-list")) => {
                serde_json::json!({"tools": (0..200).map(|i| tool(format!("tool_{i}"))).collect::<Vec<_>>()})
            }
            (Some("tools/list"), _) => serde_json::json!({"tools": [tool("listPlayouts".into())]}),
            (_, Some("big")) => serde_json::json!({"pad": "x".repeat(6000)}),
            _ => serde_json::json!({}),
        };
        (
            200,
            serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
        )
    })
}

/// One POST to the front on a new connection: its status and body.
async fn post(front: std::net::SocketAddr, session: &str, body: &str) -> (u16, Vec<u8>) {
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-session-id: {session}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = super::sidecar::raw(front, head.as_bytes()).await;
    (answer.status, answer.body)
}

/// Issue 49, defects 3 and 7, behind the MCP front (`--mcp-upstream`): a stalled request body
/// was never cut (200 of them held 1 GB past 90 s); an answer past `mcp.max_message_bytes`
/// became a 502 with `id: null`; a `tools/list` answer past it left `/tools/check` saying
/// "not listed yet" for ever; and 1,024 made-up session ids stopped the live check for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_front_cuts_a_stalled_body_passes_a_large_answer_on_and_outlives_made_up_sessions()
{
    let server = super::upstream::start(mcp_responder(), Duration::ZERO, None).await;
    let dir = scratch("front");
    let config = dir.join("front.toml");
    std::fs::write(
        &config,
        format!(
            "[spec]\npath = {:?}\n[proxy]\nupstream = \"http://127.0.0.1:9\"\nbody_stall_timeout_ms = 1000\n[mcp]\nmax_message_bytes = 4096\n",
            example("channels.openapi.yaml").display().to_string()
        ),
    )
    .unwrap();
    let (admin, front) = (free_addr(), free_addr());
    let mut wrap = tokio::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"));
    wrap.args(["wrap", "--config"])
        .arg(&config)
        .args(["--admin-listen", &admin.to_string()])
        .args(["--mcp-upstream", &format!("http://{}/mcp", server.addr)])
        .args(["--mcp-listen", &front.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let _wrap = wrap.spawn().unwrap();
    super::deploy::ready(admin).await;
    super::util::eventually("the front to listen", || async {
        tokio::net::TcpStream::connect(front).await.ok().map(|_| ())
    })
    .await;

    // The calls let go without an answer are counted, each reason at zero from the start.
    let metrics = super::sidecar::scrape(admin).await;
    for reason in ["bound", "expired"] {
        let series = format!("driftwatch_tool_calls_untracked_total{{reason=\"{reason}\"}} 0");
        assert!(metrics.contains(&series), "{metrics}");
    }

    // Past the bound, passed on unread and whole.
    let (status, body) = post(
        front,
        "s",
        r#"{"jsonrpc":"2.0","id":"big","method":"ping"}"#,
    )
    .await;
    assert_eq!(status, 200);
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (
            answer["id"].as_str(),
            answer["result"]["pad"].as_str().map(str::len)
        ),
        (Some("big"), Some(6000))
    );

    // A catalog past the bound: /tools/check says so.
    let list = |id: &str| format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"tools/list"}}"#);
    assert_eq!(post(front, "s", &list("big-list")).await.0, 200);
    let check = super::sidecar::admin_get(admin, "/tools/check").await;
    let said = String::from_utf8_lossy(&check.body).into_owned();
    assert!(said.contains("past mcp.max_message_bytes"), "{said}");

    // 1,100 made-up sessions, then a real one's catalog is still checked.
    for i in 0..1_100 {
        let ping = format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#);
        post(front, &format!("made-up-{i}"), &ping).await;
    }
    assert_eq!(post(front, "real", &list("list")).await.0, 200);
    super::util::eventually("the live check of the real session's catalog", || async {
        let check = super::sidecar::admin_get(admin, "/tools/check").await;
        (check.status == 200).then_some(())
    })
    .await;

    // A body announced whole, then stalled: 408 within the stall bound, not held.
    let mut stream = tokio::net::TcpStream::connect(front).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let head = "POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 4000\r\n\r\n{\"jsonrpc\":";
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut answer = vec![0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(15), stream.read(&mut answer))
        .await
        .expect("an answer to a stalled body")
        .unwrap();
    assert!(
        String::from_utf8_lossy(&answer[..n]).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&answer[..n])
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Issue 50: `{url}` was filled in `--env` values only; a server that takes its API's URL as
/// an argument (`--api-url {url}`) got the braces. It is filled in the arguments too.
#[test]
fn url_is_filled_in_the_servers_arguments() {
    let dir = scratch("url-arg");
    let told = dir.join("told");
    let script = format!("echo \"$0\" > {}; exec sleep 300", told.display());
    let [a, b, c, d] = channels();
    let child = wrap(
        &[a.as_str(), &b, &c, &d],
        &["sh", "-c", &script, "{url}/api"],
    )
    .spawn()
    .unwrap();
    wait_for("the server to say its argument", || {
        std::fs::read_to_string(&told).is_ok_and(|t| t.ends_with('\n'))
    });
    let said = std::fs::read_to_string(&told).unwrap();
    assert!(
        said.starts_with("http://127.0.0.1:") && said.trim_end().ends_with("/api"),
        "{said}"
    );
    stop(child);
}
