//! Every listener bounded the one way (issue 34, defects 1, 2, 3 and 7): `driftwatch mcp` runs
//! all three (its MCP endpoint, the admin port and its in-process proxy), and each is driven
//! through each bound from real sockets: a silent peer, an idle keep-alive, a connection past
//! the maximum, and the process out of file descriptors. The MCP endpoint also holds a message
//! to its bounds before rmcp parses it, and its sessions to `mcp.max_sessions`. Each was seen
//! red first: the MCP and admin ports kept 2,000 slow connections, and spun a core at EMFILE.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::sidecar::{sample, scrape};
use super::timeouts::closed_after;
use super::upstream::{self, ok};
use super::util::{eventually, example, free_addr};

/// `driftwatch mcp` in a process of its own, under `ulimit -n files`, with `config` added to
/// the config file.
struct Mcp {
    child: tokio::process::Child,
    mcp: SocketAddr,
    admin: SocketAddr,
}

impl Mcp {
    async fn start(name: &str, config: &str, files: u32) -> Mcp {
        let up = upstream::start(ok(), Duration::ZERO, None).await;
        let dir = std::env::temp_dir().join(format!(
            "driftwatch-listeners-{name}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (mcp, admin) = (free_addr(), free_addr());
        let file = dir.join("driftwatch.toml");
        std::fs::write(&file, config).unwrap();
        let command = format!(
            "ulimit -n {files}; exec {} mcp --all --spec {} --upstream http://{} --listen {mcp} --admin-listen {admin} --config {}",
            env!("CARGO_BIN_EXE_driftwatch"),
            example("channels.openapi.yaml").display(),
            up.addr,
            file.display()
        );
        std::mem::forget(up); // serves for the rest of the test binary's life
        let child = tokio::process::Command::new("bash")
            .args(["-c", &command])
            .env("DRIFTWATCH_EVENTS_OUTPUT", "none")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log(&dir)).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let started = Mcp { child, mcp, admin };
        eventually("driftwatch mcp to be ready", || async {
            let answer = get(started.admin, "/readyz").await?;
            answer.starts_with("HTTP/1.1 200").then_some(())
        })
        .await;
        started
    }

    fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    /// Peak resident memory so far, in MB.
    fn peak_mb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            / 1024
    }
}

fn log(dir: &Path) -> PathBuf {
    dir.join("mcp.log")
}

/// One request on a connection of its own, the answer whole; `None` if it could not be had.
async fn exchange(addr: SocketAddr, request: &[u8]) -> Option<String> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    stream.write_all(request).await.ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&answer).into_owned())
}

async fn get(addr: SocketAddr, path: &str) -> Option<String> {
    let request = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    exchange(addr, request.as_bytes()).await
}

/// A POST of `body` to the MCP endpoint, with a session id when given.
fn post(body: &str, session: Option<&str>) -> Vec<u8> {
    let session = session
        .map(|s| format!("mcp-session-id: {s}\r\n"))
        .unwrap_or_default();
    format!(
        "POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n{session}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

const BOUNDED: &str = "
[admin]
max_connections = 4
header_read_timeout_ms = 600
idle_timeout_ms = 300
[mcp]
max_connections = 4
header_read_timeout_ms = 600
idle_timeout_ms = 300
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listener_closes_the_silent_the_idle_and_those_past_its_maximum() {
    let dw = Mcp::start("bounds", BOUNDED, 1024).await;
    let healthz =
        "GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n".to_string();
    let initialize = String::from_utf8(post(INITIALIZE, None)).unwrap();
    for (listener, addr, closing) in [("admin", dw.admin, healthz), ("mcp", dw.mcp, initialize)] {
        let request = closing.replace("connection: close\r\n", "");
        // Connected and silent: closed at the header-read bound.
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let waited = closed_after(&mut silent).await;
        assert!(
            waited < Duration::from_secs(3),
            "{listener}: silent for {waited:?}"
        );
        // A trickled head: closed too.
        let mut slow = TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n")
            .await
            .unwrap();
        let started = Instant::now();
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if slow.write_all(b"x").await.is_err() {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{listener}: a trickled head was read for 5 s"
        );
        // One request, then idle on a keep-alive connection.
        let mut idle = TcpStream::connect(addr).await.unwrap();
        idle.write_all(request.as_bytes()).await.unwrap();
        let mut buf = [0u8; 4096];
        assert!(
            idle.read(&mut buf).await.unwrap() > 0,
            "{listener}: the answer comes"
        );
        assert!(
            closed_after(&mut idle).await < Duration::from_secs(3),
            "{listener}: idle"
        );
        // Past the maximum: closed at once, and service resumes once the others go.
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(TcpStream::connect(addr).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut shed = TcpStream::connect(addr).await.unwrap();
        assert!(
            closed_after(&mut shed).await < Duration::from_millis(250),
            "{listener}: shed at once"
        );
        drop(held);
        let answer = eventually(&format!("{listener} to serve again"), || async {
            exchange(addr, closing.as_bytes())
                .await
                .filter(|a| !a.is_empty())
        })
        .await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{listener}: {answer}");
    }
    let m = scrape(dw.admin).await;
    for listener in ["admin", "mcp"] {
        for limit in ["header_read", "idle", "connections"] {
            let series =
                format!("driftwatch_limit_hits_total{{limit=\"{limit}\",listener=\"{listener}\"}}");
            assert!(sample(&m, &series) >= 1.0, "{series} in\n{m}");
        }
        let series = format!(
            "driftwatch_limit_hits_total{{limit=\"open_files\",listener=\"{listener}\"}} 0"
        );
        assert!(m.contains(&series), "{series}");
    }
    assert!(m.contains("driftwatch_limit_hits_total{limit=\"open_files\",listener=\"proxy\"} 0"));
}

/// Out of file descriptors (idle MCP clients hold them all, one slow scrape pending on the
/// admin port), no accept loop spins: bounded CPU, a bounded log, the failures counted by
/// listener, and all three listeners serve again once the clients go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_no_listener_spins_and_all_three_recover() {
    let config = "[mcp]\nmax_connections = 10000\nheader_read_timeout_ms = 60000\n[admin]\nheader_read_timeout_ms = 60000\n";
    let dw = Mcp::start("emfile", config, 96).await;
    let pid = dw.pid();
    let mut held = Vec::new();
    for _ in 0..120 {
        held.push(TcpStream::connect(dw.mcp).await.unwrap());
    }
    let mut slow_scrape = TcpStream::connect(dw.admin).await.unwrap();
    slow_scrape
        .write_all(b"GET /metrics HTTP/1.1\r\n")
        .await
        .unwrap();
    for _ in 0..20 {
        held.push(TcpStream::connect(dw.admin).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = super::transport::cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let spent = super::transport::cpu_ticks(pid) - before;
    assert!(
        spent < 40,
        "{spent} ticks of CPU in 2 s (100 a second is a spinning core)"
    );
    drop(held);
    drop(slow_scrape);
    let answer = eventually("the admin port once the clients are gone", || async {
        get(dw.admin, "/healthz").await.filter(|a| !a.is_empty())
    })
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The MCP endpoint, and through it the proxy in the same process, to the API.
    let answer = eventually("a tool call once the clients are gone", || async {
        let session = exchange(dw.mcp, &post(INITIALIZE, None)).await?;
        let id = session.lines().find_map(|l| l.strip_prefix("mcp-session-id: "))?.trim().to_string();
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        exchange(dw.mcp, &post(initialized, Some(&id))).await?;
        let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"getChannel","arguments":{"id":7}}}"#;
        exchange(dw.mcp, &post(call, Some(&id))).await.filter(|a| a.contains("\"result\""))
    })
    .await;
    assert!(!answer.contains("\"isError\":true"), "{answer}");
    let m = scrape(dw.admin).await;
    let failures = sample(
        &m,
        "driftwatch_limit_hits_total{limit=\"open_files\",listener=\"mcp\"}",
    );
    assert!(
        failures >= 1.0,
        "the MCP listener's failures are counted: {m}"
    );
}

/// A message is held to its bounds before rmcp parses it: 3.6 MB of empty arrays (which rmcp
/// parsed into 965 MB) is refused at once as a JSON-RPC error; so is a message nested too
/// deep, and one that is not JSON (-32700, not HTTP 415 text). Sessions past
/// `mcp.max_sessions` are refused until one is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_message_is_bounded_before_it_is_parsed_and_sessions_are_capped() {
    let dw = Mcp::start("messages", "[mcp]\nmax_sessions = 3\n", 1024).await;
    let arrays = vec!["[]"; 1_200_000].join(",");
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"getChannel","arguments":{{"id":[{arrays}]}}}}}}"#
    );
    assert!(body.len() > 3_500_000);
    let started = Instant::now();
    let answer = exchange(dw.mcp, &post(&body, Some("any"))).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.contains("\"code\":-32600") && answer.contains("mcp.max_message_values"),
        "{answer}"
    );
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    let answer = exchange(dw.mcp, &post(&deep, None)).await.unwrap();
    assert!(answer.contains("mcp.max_message_depth"), "{answer}");
    let answer = exchange(dw.mcp, &post("{\"jsonrpc\":", None))
        .await
        .unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 400") && answer.contains("\"code\":-32700"),
        "{answer}"
    );
    let peak = dw.peak_mb();
    assert!(peak < 200, "peak RSS {peak} MB");

    let mut sessions = Vec::new();
    for _ in 0..3 {
        let answer = exchange(dw.mcp, &post(INITIALIZE, None)).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let id = answer
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: "))
            .unwrap()
            .trim()
            .to_string();
        sessions.push(id);
    }
    let answer = exchange(dw.mcp, &post(INITIALIZE, None)).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 503") && answer.contains("mcp.max_sessions"),
        "{answer}"
    );
    // A call in an open session still goes through.
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let answer = exchange(dw.mcp, &post(list, Some(&sessions[0])))
        .await
        .unwrap();
    assert!(!answer.starts_with("HTTP/1.1 503"), "{answer}");
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nhost: localhost\r\nmcp-session-id: {}\r\nconnection: close\r\n\r\n",
        sessions[0]
    );
    let answer = exchange(dw.mcp, delete.as_bytes()).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 2"), "{answer}");
    let answer = eventually("a place once a session is deleted", || async {
        exchange(dw.mcp, &post(INITIALIZE, None))
            .await
            .filter(|a| a.starts_with("HTTP/1.1 200"))
    })
    .await;
    assert!(answer.contains("mcp-session-id"));
}

/// Over `--stdio` a line past `mcp.max_message_bytes` is skipped as it arrives and answered
/// with a JSON-RPC error, and the next line is served (a 14.5 MB line took 3.86 GB before).
#[test]
fn over_stdio_a_line_past_the_bound_is_answered_and_the_next_is_served() {
    use std::io::{BufRead, BufReader, Write};
    let dir =
        std::env::temp_dir().join(format!("driftwatch-listeners-stdio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("driftwatch.toml");
    std::fs::write(&config, "[mcp]\nmax_message_bytes = 65536\n").unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["mcp", "--stdio", "--all", "--spec"])
        .arg(example("channels.openapi.yaml"))
        .args([
            "--upstream",
            "http://127.0.0.1:9",
            "--admin-listen",
            &free_addr().to_string(),
        ])
        .arg("--config")
        .arg(&config)
        .env("DRIFTWATCH_PROXY_LISTEN", free_addr().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    stdout.read_line(&mut line).unwrap();
    assert!(
        line.contains("\"id\":1") && line.contains("result"),
        "{line}"
    );
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(10 << 20)
    );
    writeln!(stdin, "{long}").unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":3,"method":"ping"}}"#).unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(
        line.contains("-32600") && line.contains("mcp.max_message_bytes"),
        "{line}"
    );
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(
        line.contains("\"id\":3") && line.contains("result"),
        "{line}"
    );
    let _ = child.kill();
    let _ = child.wait();
}
