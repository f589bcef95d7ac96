//! Values stay private unless `events.log_values` (issue 14, defect 6): a token in a path is
//! not written to events, `/findings`, the 422 detail, logs or `check` output; the value hash
//! of the silent-clear evidence is keyed, so a reader of the events cannot confirm a guess.
//! Seen red first: the token was in all four.

use std::process::Command;
use std::time::Duration;

use super::sidecar::{admin_get, config, raw, start};
use super::upstream::{self, ok};
use super::util::example;

const TOKEN: &str = "tok9Secret4242";

/// Requests that carry the token in their path: a wrong type for a declared path parameter,
/// and a route the spec does not have.
fn requests() -> [String; 2] {
    [
        format!(
            "PUT /api/v1/channels/{TOKEN} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{{}}"
        ),
        format!("GET /api/v1/{TOKEN}/things HTTP/1.1\r\nhost: x\r\n\r\n"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_a_path_is_not_written_anywhere() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let events = std::env::temp_dir().join(format!("dw-privacy-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&events);
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.proxy.mode = driftwatch::policy::Mode::Enforce;
        c.events.output = events.display().to_string();
    }))
    .await;
    let [bad_type, unknown] = requests();
    let refused = raw(dw.addr, bad_type.as_bytes()).await;
    assert_eq!(refused.status, 422);
    let detail = String::from_utf8_lossy(&refused.body).to_string();
    assert!(!detail.contains(TOKEN), "422: {detail}");
    raw(dw.addr, unknown.as_bytes()).await;
    let recent = String::from_utf8_lossy(&admin_get(dw.admin, "/findings").await.body).to_string();
    assert!(recent.contains("unknown_operation"), "{recent}");
    assert!(!recent.contains(TOKEN), "/findings: {recent}");
    dw.stop().await;
    let written = std::fs::read_to_string(&events).unwrap();
    assert_eq!(written.lines().count(), 2, "{written}");
    assert!(!written.contains(TOKEN), "events: {written}");
    let _ = std::fs::remove_file(&events);
}

#[test]
fn check_output_does_not_carry_path_values() {
    let dir = std::env::temp_dir().join(format!("dw-privacy-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let traffic = dir.join("t.jsonl");
    std::fs::write(
        &traffic,
        format!(
            "{{\"method\":\"PUT\",\"url\":\"/api/v1/channels/{TOKEN}\",\"headers\":{{\"content-type\":\"application/json\"}},\"body\":{{}}}}\n{{\"method\":\"GET\",\"url\":\"/api/v1/{TOKEN}/things\"}}\n"
        ),
    )
    .unwrap();
    for format in ["json", "text"] {
        let out = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .args(["check", "--spec"])
            .arg(example("channels.openapi.yaml"))
            .arg("--traffic")
            .arg(&traffic)
            .args(["--format", format])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("unknown_operation"), "{text}");
        assert!(!text.contains(TOKEN), "{format}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

const PASSWORD: &str = "pw7Secret2424";

const GET: &[u8] = b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";

/// Issue 34, defect 11: a URL's credentials are never shown and never sent as `Host`. With
/// `--upstream http://u:PASSWORD@host` the password was in every 502 body, the log and `serve
/// --check`, and the API received it in `Host`; a `spec.url` password was in the start log,
/// `--check` and `/spec`. Now the API gets `Host: host` and the credentials as
/// `Authorization: Basic` (a request with its own Authorization keeps it), the spec's server
/// gets them the same way, and nothing shows the password. Seen red first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_a_url_are_never_shown_nor_sent_as_host() {
    let spec = std::fs::read_to_string(example("channels.openapi.yaml")).unwrap();
    let spec_server = upstream::start_typed(
        std::sync::Arc::new(move |_: &upstream::Recorded| (200, "application/yaml", spec.clone())),
        Duration::ZERO,
        None,
    )
    .await;
    let api = upstream::start(ok(), Duration::ZERO, None).await;
    let spec_url = format!("http://reader:{PASSWORD}@{}/openapi.yaml", spec_server.addr);
    let run = |upstream: String, args: &[&str]| {
        let (listen, admin) = (super::util::free_addr(), super::util::free_addr());
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .args([
                "serve",
                "--upstream",
                &upstream,
                "--listen",
                &listen.to_string(),
            ])
            .args(["--admin-listen", &admin.to_string()])
            .args(args)
            .env("DRIFTWATCH_SPEC_URL", &spec_url)
            .env("RUST_LOG", "debug")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        (child, listen, admin)
    };
    let (check, _, _) = run(format!("http://u:{PASSWORD}@{}", api.addr), &["--check"]);
    let checked = check.wait_with_output().await.unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert_eq!(checked.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!("upstream  http://{}", api.addr)),
        "{text}"
    );
    assert!(!text.contains(PASSWORD), "serve --check: {text}");

    let (served, listen, admin) = run(format!("http://u:{PASSWORD}@{}", api.addr), &[]);
    ready(admin).await;
    assert_eq!(raw(listen, GET).await.status, 200);
    let own = raw(listen, b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\nauthorization: Bearer mine\r\nconnection: close\r\n\r\n").await;
    assert_eq!(own.status, 200);
    let recorded = api.recorded();
    assert_eq!(
        recorded[0].header("host"),
        Some(api.addr.to_string().as_str())
    );
    // base64 of "u:pw7Secret2424"
    assert_eq!(
        recorded[0].header("authorization"),
        Some("Basic dTpwdzdTZWNyZXQyNDI0")
    );
    assert_eq!(recorded[1].header("authorization"), Some("Bearer mine"));
    assert_eq!(
        spec_server.recorded()[0].header("authorization"),
        Some("Basic cmVhZGVyOnB3N1NlY3JldDI0MjQ=")
    );
    let shown = admin_get(admin, "/spec").await;
    let shown = String::from_utf8_lossy(&shown.body).into_owned();
    assert!(
        shown.contains(&spec_server.addr.to_string()) && !shown.contains(PASSWORD),
        "/spec: {shown}"
    );

    // The API unreachable: the 502 names the host, not the password.
    let (unreachable, listen, admin) = run(format!("http://u:{PASSWORD}@127.0.0.1:9"), &[]);
    ready(admin).await;
    let bad = raw(listen, GET).await;
    assert_eq!(bad.status, 502);
    let body = String::from_utf8_lossy(&bad.body).into_owned();
    assert!(
        body.contains("127.0.0.1:9") && !body.contains(PASSWORD),
        "502: {body}"
    );
    for mut child in [served, unreachable] {
        let _ = child.kill().await;
        let out = child.wait_with_output().await.unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            log.contains("127.0.0.1") && !log.contains(PASSWORD),
            "log: {log}"
        );
    }
}

async fn ready(admin: std::net::SocketAddr) {
    super::util::eventually("the sidecar to be ready", || async {
        tokio::net::TcpStream::connect(admin).await.ok()?;
        (admin_get(admin, "/readyz").await.status == 200).then_some(())
    })
    .await;
}
