//! Deployed as operators deploy it: the real binary, started the way a pod starts it.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

use super::sidecar::{admin_get, config, raw, start};
use super::upstream::{self, ok};
use super::util::{eventually, example};

/// `driftwatch serve` in front of `upstream` on free loopback ports, with `env` set; its
/// stderr is piped (read it with [`log_of`] once it has exited).
pub fn serve(upstream: SocketAddr, env: &[(&str, &str)]) -> (Child, SocketAddr, SocketAddr) {
    let free = || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (proxy, admin) = (free(), free());
    let child = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .arg("serve")
        .args(["--spec", example("channels.openapi.yaml").to_str().unwrap()])
        .args(["--upstream", &format!("http://{upstream}")])
        .args(["--listen", &proxy.to_string()])
        .args(["--admin-listen", &admin.to_string()])
        .env("DRIFTWATCH_EVENTS_OUTPUT", "none")
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    (child, proxy, admin)
}

/// Wait until the sidecar's `/readyz` answers 200.
pub async fn ready(admin: SocketAddr) {
    eventually("driftwatch to become ready", || async {
        let up = tokio::net::TcpStream::connect(admin).await.is_ok()
            && admin_get(admin, "/readyz").await.status == 200;
        up.then_some(())
    })
    .await;
}

/// Stop the process and return what it wrote to stderr.
pub async fn log_of(mut child: Child) -> String {
    let _ = child.start_kill();
    let mut text = String::new();
    let mut stderr = child.stderr.take().unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), stderr.read_to_string(&mut text)).await;
    let _ = child.wait().await;
    text
}

/// A Service named `driftwatch` in the namespace makes Kubernetes inject
/// `DRIFTWATCH_SERVICE_HOST` and `DRIFTWATCH_PORT_*`: the sidecar serves, and says once which
/// variables it left out. Its stderr is a pipe, as in a container: every line is a JSON
/// object with no colour codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_service_links_do_not_stop_the_sidecar() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let links = [
        ("DRIFTWATCH_SERVICE_HOST", "10.0.0.1"),
        ("DRIFTWATCH_SERVICE_PORT", "9090"),
        ("DRIFTWATCH_PORT", "tcp://10.0.0.1:9090"),
        ("DRIFTWATCH_PORT_9090_TCP", "tcp://10.0.0.1:9090"),
        ("DRIFTWATCH_PORT_9090_TCP_PROTO", "tcp"),
        ("DRIFTWATCH_PORT_9090_TCP_PORT", "9090"),
        ("DRIFTWATCH_PORT_9090_TCP_ADDR", "10.0.0.1"),
    ];
    let (child, proxy, admin) = serve(up.addr, &links);
    ready(admin).await;
    let resp = raw(proxy, b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert_eq!(resp.status, 200);
    let log = log_of(child).await;
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("service links"))
        .collect();
    assert_eq!(said.len(), 1, "said once:\n{log}");
    for (name, _) in links {
        assert!(said[0].contains(name), "{name} named in: {}", said[0]);
    }
}

/// `serve --check` loads config and spec, prints what would run and exits 0 without binding
/// (its listen port is held by the test); a broken spec exits 2 naming the file and the place.
#[test]
fn serve_check_prints_what_would_run_and_binds_nothing() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = held.local_addr().unwrap().to_string();
    let spec = example("channels.openapi.yaml");
    let check = |spec: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .args(["serve", "--check", "--upstream", "http://api.internal:8080"])
            .args(["--spec", spec.to_str().unwrap(), "--listen", &listen])
            .env("DRIFTWATCH_SERVICE_HOST", "10.0.0.1")
            .output()
            .unwrap()
    };
    let ok = check(&spec);
    let text = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    for line in [
        format!("listen    http://{listen} ("),
        "upstream  http://api.internal:8080".into(),
        "mode      observe, audit on".into(),
        "operations".into(),
        "base path none: request paths are routed as sent".into(),
        "skipped   0 parts of the spec at load".into(),
        "ignored   DRIFTWATCH_SERVICE_HOST".into(),
        // Each write with its semantics and why.
        "PUT /api/v1/channels/{id}  replace: its body is the representation its GET `getChannel` returns (30 of 30 fields)".into(),
        "PATCH /api/v1/channels/{id}  merge: the method's".into(),
    ] {
        assert!(text.contains(&line), "{line:?} in:\n{text}");
    }
    assert!(!text.contains("shared id"), "{text}");
    // A spec that gives two operations one operationId (invalid, found in real specs) is named,
    // with both operations: their findings and metrics share the id.
    let twins = std::env::temp_dir().join(format!("driftwatch-twins-{}.json", std::process::id()));
    let get = |id: &str| serde_json::json!({"get": {"operationId": id, "responses": {"200": {"description": "ok"}}}});
    let doc = serde_json::json!({"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
        "paths": {"/a": get("getThing"), "/b": get("getThing"), "/c": get("other")}});
    std::fs::write(&twins, doc.to_string()).unwrap();
    let shared = check(&twins);
    let text = String::from_utf8_lossy(&shared.stdout);
    assert_eq!(shared.status.code(), Some(0), "{text}");
    assert!(
        text.contains("shared id getThing: GET /a, GET /b (findings, metrics labels"),
        "{text}"
    );
    assert_eq!(text.matches("shared id").count(), 1, "{text}");
    let _ = std::fs::remove_file(&twins);
    let broken = std::env::temp_dir().join(format!("driftwatch-check-{}.yaml", std::process::id()));
    std::fs::write(&broken, "openapi: 3.1.0\npaths: [broken\n").unwrap();
    let failed = check(&broken);
    let said = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(2), "{said}");
    assert!(
        said.contains(broken.to_str().unwrap()),
        "names the file: {said}"
    );
    assert!(
        failed.stdout.is_empty(),
        "prints nothing as if it would run"
    );
}

/// `driftwatch health` exits 0 while the sidecar is ready (reading the admin address from
/// the environment, as in the image), 1 when nothing answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_exits_0_for_a_ready_sidecar_and_1_for_none() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let (child, _, admin) = serve(up.addr, &[]);
    ready(admin).await;
    let health = |env: &[(&str, String)], args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .arg("health")
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap()
    };
    let listen = [("DRIFTWATCH_ADMIN_LISTEN", admin.to_string())];
    assert_eq!(health(&listen, &[]).status.code(), Some(0));
    assert_eq!(
        health(&[], &["--live", "--admin", &admin.to_string()])
            .status
            .code(),
        Some(0)
    );
    drop(log_of(child).await);
    let gone = health(&listen, &[]);
    assert_eq!(gone.status.code(), Some(1));
    let said = String::from_utf8_lossy(&gone.stderr);
    assert!(said.contains(&format!("http://{admin}/readyz")), "{said}");
}

/// With `admin.token_file`, what shows traffic or the spec and the reload need the bearer
/// token (401 with a challenge without it, or with another); `/metrics` and the probes stay
/// open for Prometheus and the kubelet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_token_guards_findings_spec_and_reload_and_leaves_metrics_open() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let file = std::env::temp_dir().join(format!("driftwatch-token-{}", std::process::id()));
    std::fs::write(&file, "s3cret-admin-token-0123\n").unwrap();
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.admin.token_file = Some(file.clone())
    }))
    .await;
    let ask = |method: &str, path: &str, token: Option<&str>| {
        let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
        format!(
            "{method} {path} HTTP/1.1\r\nhost: admin\r\n{auth}content-length: 0\r\nconnection: close\r\n\r\n"
        )
    };
    for (method, path) in [
        ("GET", "/findings"),
        ("GET", "/coverage"),
        ("GET", "/spec"),
        ("GET", "/spec/diff"),
        ("POST", "/spec/reload"),
    ] {
        for token in [None, Some("s3cret-admin-token-0124")] {
            let r = raw(dw.admin, ask(method, path, token).as_bytes()).await;
            assert_eq!(r.status, 401, "{method} {path} with {token:?}");
            assert_eq!(
                r.header("www-authenticate"),
                Some("Bearer realm=\"driftwatch admin\"")
            );
        }
        let r = raw(
            dw.admin,
            ask(method, path, Some("s3cret-admin-token-0123")).as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "{method} {path} with the token");
    }
    // The scheme's name is case-insensitive (RFC 9110 section 11.1); a lowercase one was refused.
    let lower = ask("GET", "/spec", None).replace(
        "content-length",
        "authorization: bearer s3cret-admin-token-0123\r\ncontent-length",
    );
    assert_eq!(raw(dw.admin, lower.as_bytes()).await.status, 200);
    for path in ["/metrics", "/healthz", "/readyz"] {
        assert_eq!(
            admin_get(dw.admin, path).await.status,
            200,
            "{path} stays open"
        );
    }
    dw.stop().await;
}

/// A 502 is one log line with its cause and the request id the client got back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_logged_with_its_cause_and_request_id() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = closed.local_addr().unwrap();
    drop(closed);
    let (child, proxy, admin) = serve(refused, &[]);
    ready(admin).await;
    let resp = raw(proxy, b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert_eq!(resp.status, 502);
    let id = resp.header("x-request-id").unwrap().to_string();
    let log = log_of(child).await;
    let line: serde_json::Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["status"] == 502)
        .unwrap_or_else(|| panic!("no log line for the 502:\n{log}"));
    assert_eq!(line["level"], "WARN");
    assert_eq!(line["cause"], "connect");
    assert_eq!(line["fault"], "upstream");
    assert_eq!(line["request_id"], id.as_str());
}

/// Traffic sent under another version than the spec's (`/api/v2/...` where the spec has
/// `/api/v1/...`): after a window of it, `/readyz` (still 200) and the share metric say so,
/// naming the base path and the nearest template; the path's shape keeps `v2`. A window that
/// routes clears the warning (the near twin).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn most_traffic_routing_nowhere_is_said_once_with_the_nearest_templates() {
    let api = super::silent_clears::demo_api().await;
    let running = start(config(&format!("http://{api}"), |_| {})).await;
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    for _ in 0..driftwatch::proxy::unrouted::WINDOW {
        raw(running.addr, get("/api/v2/channels").as_bytes()).await;
    }
    let ready = admin_get(running.admin, "/readyz").await;
    let text = String::from_utf8_lossy(&ready.body).into_owned();
    assert_eq!(ready.status, 200, "{text}");
    assert!(
        text.contains("100% of the last 100 requests route to no operation"),
        "{text}"
    );
    assert!(
        text.contains("base path (none: request paths are routed as sent)"),
        "{text}"
    );
    assert!(
        text.contains("the last, /api/v2/channels, comes nearest to GET /api/v1/channels"),
        "{text}"
    );
    let metrics = super::sidecar::scrape(running.admin).await;
    assert_eq!(
        super::sidecar::sample(&metrics, "driftwatch_unrouted_share"),
        1.0
    );
    for _ in 0..driftwatch::proxy::unrouted::WINDOW {
        raw(running.addr, get("/api/v1/channels").as_bytes()).await;
    }
    let ready = admin_get(running.admin, "/readyz").await;
    assert_eq!(String::from_utf8_lossy(&ready.body), "ready\n");
    let metrics = super::sidecar::scrape(running.admin).await;
    assert_eq!(
        super::sidecar::sample(&metrics, "driftwatch_unrouted_share"),
        0.0
    );
}

/// Issue 50: `driftwatch_unrouted_share` read 0 until the 100th request even when 91 % routed
/// nowhere. From the 20th request of a window it says the share so far; the warning on
/// `/readyz` still waits for the whole window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unrouted_share_is_said_from_the_20th_request() {
    let api = super::silent_clears::demo_api().await;
    let running = start(config(&format!("http://{api}"), |_| {})).await;
    for n in 0..driftwatch::proxy::unrouted::EARLY {
        let path = if n % 10 == 0 {
            "/api/v1/channels"
        } else {
            "/api/v2/channels"
        };
        let get = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        raw(running.addr, get.as_bytes()).await;
    }
    let metrics = super::sidecar::scrape(running.admin).await;
    assert_eq!(
        super::sidecar::sample(&metrics, "driftwatch_unrouted_share"),
        0.9
    );
    let ready = admin_get(running.admin, "/readyz").await;
    assert_eq!(String::from_utf8_lossy(&ready.body), "ready\n");
}
