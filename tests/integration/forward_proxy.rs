//! The forward proxy (`proxy.kind = "forward"`), over real sockets with curl: a `CONNECT` to a
//! host an API serves is intercepted with a leaf from driftwatch's CA and audited exactly as the
//! reverse proxy audits the same request; an absolute-form request too; a host no API serves is
//! tunneled byte for byte (or refused) and counted; an API whose certificate does not verify is
//! a 502 that forwards nothing; the CA's key shows in no answer, scrape or event.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use driftwatch::config::{ApiConfig, Config, ProxyKind, UnknownHosts};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::sidecar::{Running, config, sample, scrape, start};
use super::transport::{Pki, pki_for};
use super::upstream::{self, Upstream, ok};
use super::util::example;

/// The query the reverse and the forward proxy both audit: a renamed parameter and a type.
const DRIFTED: &str = "/api/v1/playouts?pageSize=abc&customer_id=7";

/// A TLS mock of the Channels API, the PKI that signed it, and a fresh CA directory.
pub struct Api {
    pub up: Upstream,
    pub pki: Pki,
    pub ca_dir: PathBuf,
}

pub async fn api(name: &str) -> Api {
    let pki = pki_for(&format!("fwd-{name}"), &["localhost", "127.0.0.1"]);
    let up = upstream::start(ok(), Duration::ZERO, Some(pki.acceptor.clone())).await;
    let ca_dir =
        std::env::temp_dir().join(format!("driftwatch-fwd-ca-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&ca_dir);
    Api { up, pki, ca_dir }
}

/// A forward proxy whose one API, the Channels spec, serves `api.test` (443 and 80) and sends
/// its requests to the mock; `edit` changes the rest.
pub fn forward_config(api: &Api, edit: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::default();
    c.proxy.kind = ProxyKind::Forward;
    c.proxy.report_header = true;
    c.forward.ca_dir = api.ca_dir.clone();
    c.upstream_tls.ca_file = Some(api.pki.ca_pem.clone());
    c.events.output = "none".into();
    c.api = vec![ApiConfig {
        name: "channels".into(),
        spec: example("channels.openapi.yaml").display().to_string(),
        hosts: vec!["api.test:443".into(), "api.test:80".into()],
        upstream: Some(format!("https://127.0.0.1:{}", api.up.addr.port())),
        ..ApiConfig::default()
    }];
    edit(&mut c);
    c
}

/// A reverse proxy in front of `api`'s mock (its TLS trusted) and the forward proxy of
/// [`forward_config`], both adding the `driftwatch-findings` header: the same request through
/// each must find the same.
pub async fn reverse_and_forward(api: &Api) -> (Running, Running) {
    let upstream_url = format!("https://localhost:{}", api.up.addr.port());
    let reverse = start(config(&upstream_url, |c| {
        c.upstream_tls.ca_file = Some(api.pki.ca_pem.clone());
        c.proxy.report_header = true;
    }))
    .await;
    (reverse, start(forward_config(api, |_| {})).await)
}

/// curl's status line and `driftwatch-findings` header, for `args`.
fn curl(args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .args(["-s", "-o", "/dev/null", "-D", "-", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl");
    let head = String::from_utf8_lossy(&out.stdout).to_string();
    let responses = head.split("\r\n\r\n").filter(|r| !r.trim().is_empty());
    // A CONNECT's own `200 Connection established` comes first; the API's answer last.
    let last = responses.last().unwrap_or_default();
    let status = last
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let findings = last
        .lines()
        .find_map(|l| l.strip_prefix("driftwatch-findings: "))
        .unwrap_or_default();
    (status, findings.to_string())
}

/// The HTTP version curl spoke for `args` (`2`, `1.1`).
fn curl_version(args: &[&str]) -> String {
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version}",
            "--max-time",
            "20",
        ])
        .args(args)
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn ca_pem(dir: &Path) -> String {
    dir.join("ca.pem").display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_through_connect_and_absolute_form_gets_what_the_reverse_proxy_finds() {
    let api = api("curl").await;
    let (reverse, forward) = reverse_and_forward(&api).await;
    let (status, expected) = curl(&[&format!("http://{}{DRIFTED}", reverse.addr)]);
    assert_eq!(status, 200);
    assert!(
        expected.contains("unknown_query_param:customer_id"),
        "{expected}"
    );
    assert!(
        expected.contains("param_type_mismatch:pageSize"),
        "{expected}"
    );

    let proxy = format!("http://{}", forward.addr);
    let ca = ca_pem(&api.ca_dir);
    let tunneled = curl(&[
        "-x",
        &proxy,
        "--cacert",
        &ca,
        &format!("https://api.test{DRIFTED}"),
    ]);
    assert_eq!(tunneled, (200, expected.clone()), "CONNECT, intercepted");
    let h1 = curl(&[
        "--http1.1",
        "-x",
        &proxy,
        "--cacert",
        &ca,
        &format!("https://api.test{DRIFTED}"),
    ]);
    assert_eq!(h1, (200, expected.clone()), "CONNECT, HTTP/1.1 inside");
    let absolute = curl(&["-x", &proxy, &format!("http://api.test{DRIFTED}")]);
    assert_eq!(absolute, (200, expected.clone()), "absolute-form");
    let https = "https://api.test/api/v1/channels/7";
    let h2 = curl_version(&["-x", &proxy, "--cacert", &ca, https]);
    assert_eq!(h2, "2", "the leaf offers h2, and curl takes it");
    let h1 = curl_version(&["--http1.1", "-x", &proxy, "--cacert", &ca, https]);
    assert_eq!(h1, "1.1");

    let got = api.up.recorded();
    assert_eq!(got.len(), 6, "each request reached the API once");
    for r in &got[1..4] {
        assert_eq!(r.target, DRIFTED, "origin-form upstream");
        assert_eq!(
            r.header("host"),
            Some(format!("127.0.0.1:{}", api.up.addr.port()).as_str())
        );
    }
    let m = scrape(forward.admin).await;
    let requests = "driftwatch_requests_total{operation=\"listPlayouts\",outcome=\"forwarded\",code=\"200\",api=\"channels\"}";
    assert_eq!(sample(&m, requests), 3.0, "{m}");
    assert!(!m.contains("PRIVATE KEY"));
    stop_all([reverse, forward]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_no_api_serves_is_tunneled_byte_for_byte_and_counted_or_refused() {
    let api = api("tunnel").await;
    let echo = echo_server().await;
    // The echo server is on loopback, which a tunnel reaches only when allowed (issue 49).
    let allow =
        |c: &mut driftwatch::config::Config| c.forward.tunnel_allow = vec![echo.to_string()];
    let forward = start(forward_config(&api, allow)).await;
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let back = through_connect(forward.addr, echo, &payload).await;
    assert_eq!(back.0, 200);
    assert!(back.1 == payload, "the tunnel's bytes came back changed");
    let m = scrape(forward.admin).await;
    let series = format!(
        "driftwatch_tunnels_total{{host=\"127.0.0.1:{}\",outcome=\"tunneled\"}}",
        echo.port()
    );
    assert_eq!(sample(&m, &series), 1.0, "{m}");
    assert!(api.up.recorded().is_empty(), "nothing went to the API");

    let refusing = start(forward_config(&api, |c| {
        c.forward.unknown_hosts = UnknownHosts::Refuse
    }))
    .await;
    let refused = through_connect(refusing.addr, echo, b"never sent").await;
    assert_eq!(refused.0, 403);
    let m = scrape(refusing.admin).await;
    let series = series.replace("tunneled", "refused");
    assert_eq!(sample(&m, &series), 1.0, "{m}");
    stop_all([forward, refusing]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_whose_certificate_does_not_verify_is_a_502_and_nothing_is_forwarded() {
    let api = api("untrusted").await;
    let forward = start(forward_config(&api, |c| c.upstream_tls.ca_file = None)).await;
    let out = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "20",
            "-x",
            &format!("http://{}", forward.addr),
        ])
        .args(["--cacert", &ca_pem(&api.ca_dir), "-w", "\n%{http_code}"])
        .arg(format!("https://api.test{DRIFTED}"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.ends_with("\n502"), "{text}");
    assert!(
        text.contains("invalid peer certificate: UnknownIssuer"),
        "{text}"
    );
    assert!(api.up.recorded().is_empty(), "nothing reached the API");
    forward.stop().await;
}

/// `CONNECT` to `to`, then `payload` through the tunnel; the status and the bytes that came
/// back (all of them, for a 200).
async fn through_connect(
    proxy: std::net::SocketAddr,
    to: std::net::SocketAddr,
    payload: &[u8],
) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let head = format!("CONNECT {to} HTTP/1.1\r\nhost: {to}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before the CONNECT's answer");
        got.extend_from_slice(&buf[..n]);
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let status: u16 = String::from_utf8_lossy(&got[9..12]).parse().unwrap();
    if status != 200 {
        return (status, Vec::new());
    }
    let mut back = got[end..].to_vec();
    let (mut read, mut write) = stream.into_split();
    let payload = payload.to_vec();
    let len = payload.len();
    let writer = tokio::spawn(async move { write.write_all(&payload).await.unwrap() });
    while back.len() < len {
        let n = read.read(&mut buf).await.unwrap();
        assert!(n > 0, "the tunnel closed early");
        back.extend_from_slice(&buf[..n]);
    }
    writer.await.unwrap();
    (status, back)
}

/// A server that sends back every byte it gets.
async fn echo_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = stream.into_split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

async fn stop_all<const N: usize>(running: [Running; N]) {
    for r in running {
        r.stop().await;
    }
}

/// Every sink an operator or a client can read, after a forward proxy intercepted, tunneled
/// and answered: `driftwatch ca`'s output, `serve --check`'s, the debug log, the event file,
/// and every admin answer. None holds the CA's key, or any line of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ca_key_appears_in_no_output_log_event_or_answer() {
    use super::deploy::{log_of, ready};
    use super::sidecar::admin_get;
    let api = api("secret").await;
    let echo = echo_server().await;
    let bin = env!("CARGO_BIN_EXE_driftwatch");
    let ca = std::process::Command::new(bin)
        .args(["ca", "--ca-dir", api.ca_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(ca.status.success());
    let key = std::fs::read_to_string(api.ca_dir.join("ca.key")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(api.ca_dir.join("ca.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let cert = std::fs::read_to_string(api.ca_dir.join("ca.pem")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&ca.stdout),
        cert,
        "stdout is the certificate"
    );
    let events = api.ca_dir.with_extension("events.jsonl");
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (listen, admin) = (free(), free());
    let env = [
        ("DRIFTWATCH_PROXY_KIND", "forward".to_string()),
        (
            "DRIFTWATCH_FORWARD_CA_DIR",
            api.ca_dir.display().to_string(),
        ),
        (
            "DRIFTWATCH_UPSTREAM_TLS_CA_FILE",
            api.pki.ca_pem.display().to_string(),
        ),
        ("DRIFTWATCH_EVENTS_OUTPUT", events.display().to_string()),
        ("DRIFTWATCH_PROXY_REPORT_HEADER", "true".to_string()),
        ("DRIFTWATCH_FORWARD_TUNNEL_ALLOW", format!("[\"{echo}\"]")),
        ("RUST_LOG", "debug".to_string()),
    ];
    let args = [
        "serve",
        "--spec",
        &example("channels.openapi.yaml").display().to_string(),
        "--upstream",
        &format!("https://127.0.0.1:{}", api.up.addr.port()),
        "--listen",
        &listen.to_string(),
        "--admin-listen",
        &admin.to_string(),
    ]
    .map(String::from);
    let check = std::process::Command::new(bin)
        .args(&args)
        .arg("--check")
        .envs(env.clone())
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let child = tokio::process::Command::new(bin)
        .args(&args)
        .envs(env)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    ready(admin).await;
    let proxy = format!("http://{listen}");
    let ca_file = ca_pem(&api.ca_dir);
    let host = format!("127.0.0.1:{}", api.up.addr.port());
    let (status, findings) = curl(&[
        "-x",
        &proxy,
        "--cacert",
        &ca_file,
        &format!("https://{host}{DRIFTED}"),
    ]);
    assert_eq!(status, 200);
    assert!(findings.contains("customer_id"), "{findings}");
    assert_eq!(through_connect(listen, echo, b"ping").await.1, b"ping");
    let mut seen = vec![
        String::from_utf8_lossy(&ca.stdout).to_string(),
        String::from_utf8_lossy(&ca.stderr).to_string(),
        String::from_utf8_lossy(&check.stdout).to_string(),
        String::from_utf8_lossy(&check.stderr).to_string(),
    ];
    for path in [
        "/metrics",
        "/findings",
        "/spec",
        "/spec/diff",
        "/readyz",
        "/healthz",
    ] {
        seen.push(String::from_utf8_lossy(&admin_get(admin, path).await.body).to_string());
    }
    seen.push(log_of(child).await);
    seen.push(std::fs::read_to_string(&events).unwrap());
    assert!(
        seen[2].contains("forward   intercepts 127.0.0.1:"),
        "{}",
        seen[2]
    );
    assert!(
        seen[11].contains("customer_id"),
        "the event file holds the findings"
    );
    // The secret scalar of a PKCS#8 P-256 key is in its first two lines of base64; the last
    // holds the public key, which the certificate carries too.
    let key_lines: Vec<&str> = key
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .take(2)
        .collect();
    assert_eq!(key_lines.len(), 2);
    for (i, text) in seen.iter().enumerate() {
        assert!(!text.contains("PRIVATE KEY"), "sink {i}: {text}");
        for line in &key_lines {
            assert!(!text.contains(line), "sink {i} holds a line of the CA key");
        }
    }
}

/// An operator's own CA, made with openssl as operators make one (a subject of C, O and CN;
/// a SHA-1 subject key identifier), EC and RSA: put in `forward.ca_dir`, it signs the leaves,
/// and curl (OpenSSL, which finds the issuer by that identifier) trusts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_the_operator_made_with_openssl_signs_leaves_curl_trusts() {
    for (kind, key) in [
        (
            "ec",
            ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
        ),
        (
            "rsa",
            ["-newkey", "rsa:2048", "-pkeyopt", "rsa_keygen_bits:2048"],
        ),
    ] {
        let api = api(&format!("operator-{kind}")).await;
        std::fs::create_dir_all(&api.ca_dir).unwrap();
        let made = Command::new("openssl")
            .args(["req", "-x509", "-nodes", "-days", "2"])
            .args(key)
            .arg("-keyout")
            .arg(api.ca_dir.join("ca.key"))
            .arg("-out")
            .arg(api.ca_dir.join("ca.pem"))
            .args(["-subj", "/C=NL/O=Example Ops/CN=Example Egress CA"])
            .args([
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ])
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        let forward = start(forward_config(&api, |_| {})).await;
        let proxy = format!("http://{}", forward.addr);
        let (status, findings) = curl(&[
            "-x",
            &proxy,
            "--cacert",
            &ca_pem(&api.ca_dir),
            &format!("https://api.test{DRIFTED}"),
        ]);
        assert_eq!(status, 200, "{kind}: curl trusts the leaf");
        assert!(findings.contains("customer_id"), "{kind}: {findings}");
        forward.stop().await;
    }
}

/// A plain-HTTP absolute-form request (`GET http://host/...`, what clients send for an http://
/// URL through a proxy) for a host no API serves is passed on to that host, origin-form and
/// unaudited, and counted; under `unknown_hosts = "refuse"` it is a 403 and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absolute_form_request_for_a_host_no_api_serves_is_passed_on_or_refused() {
    let api = api("pass").await;
    let other = upstream::start(ok(), Duration::ZERO, None).await;
    let url = format!("http://{}/anything?customer_id=7", other.addr);
    let forward = start(forward_config(&api, |c| {
        c.forward.tunnel_allow = vec![other.addr.to_string()]
    }))
    .await;
    let (status, findings) = curl(&["-x", &format!("http://{}", forward.addr), &url]);
    assert_eq!(
        (status, findings.as_str()),
        (200, ""),
        "passed on, unaudited"
    );
    let got = other.recorded();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].target, "/anything?customer_id=7",
        "origin-form at the host"
    );
    assert!(
        got[0].header("proxy-connection").is_none(),
        "hop-by-hop headers dropped"
    );
    let m = scrape(forward.admin).await;
    let series = format!(
        "driftwatch_tunnels_total{{host=\"{}\",outcome=\"tunneled\"}}",
        other.addr
    );
    assert_eq!(sample(&m, &series), 1.0, "{m}");
    forward.stop().await;

    let refusing = start(forward_config(&api, |c| {
        c.forward.unknown_hosts = UnknownHosts::Refuse
    }))
    .await;
    let (status, _) = curl(&["-x", &format!("http://{}", refusing.addr), &url]);
    assert_eq!(status, 403);
    assert_eq!(other.recorded().len(), 1, "nothing more reached the host");
    refusing.stop().await;
}
