//! The forward proxy probed as an attacker or an unlucky operator would (issue 49): another
//! spelling of an intercepted host is the same host, audited; a `CONNECT` whose port is none
//! or that comes over HTTP/2 is refused, never read as 443; a TLS handshake inside a tunnel has
//! a deadline.

use std::sync::Arc;
use std::time::Duration;

use driftwatch::config::ApiConfig;
use driftwatch::policy::Mode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::forward_proxy::{Api, api, forward_config};
use super::sidecar::{Running, sample, scrape, start};

/// A forward proxy in enforce mode whose one API serves the mock's own address
/// (`127.0.0.1:PORT`), so that any spelling of that address reaches the mock if tunneled.
async fn enforcing_on_loopback(api: &Api) -> Running {
    let port = api.up.addr.port();
    start(forward_config(api, |c| {
        c.proxy.mode = Mode::Enforce;
        c.api = vec![ApiConfig {
            name: "channels".into(),
            hosts: vec![format!("127.0.0.1:{port}")],
            upstream: Some(format!("https://127.0.0.1:{port}")),
            ..c.api[0].clone()
        }];
    }))
    .await
}

/// `CONNECT target` on a new connection: the status line's code, and the stream after it.
async fn connect(proxy: std::net::SocketAddr, target: &str) -> (u16, TcpStream) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let head = format!("CONNECT {target} HTTP/1.1\r\nhost: {target}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).await.unwrap();
        assert!(n > 0, "closed before the CONNECT's answer: {got:?}");
        got.push(byte[0]);
    }
    let status = String::from_utf8_lossy(&got[9..12]).parse().unwrap();
    (status, stream)
}

/// A TLS client trusting both driftwatch's CA and the mock's, so that a tunnel reaching the
/// mock unaudited would succeed as well as an intercepted connection.
fn trusting_both(api: &Api) -> tokio_rustls::TlsConnector {
    let files = [api.ca_dir.join("ca.pem"), api.pki.ca_pem.clone()];
    tokio_rustls::TlsConnector::from(Arc::new(super::transport::trusting(&files)))
}

/// Through a `CONNECT` to `target`, TLS to 127.0.0.1, then a drifted GET: its status.
async fn drifted_get_through(api: &Api, proxy: std::net::SocketAddr, target: &str) -> u16 {
    let (status, stream) = connect(proxy, target).await;
    assert_eq!(status, 200, "CONNECT {target}");
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = trusting_both(api).connect(name, stream).await.unwrap();
    let request = "GET /api/v1/playouts?pageSize=abc HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n";
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer[9..12]).parse().unwrap()
}

/// Issue 49, defect 4: `127.1`, `2130706433`, `0x7f.0.0.1`, `[::ffff:127.0.0.1]`,
/// `127.000.000.001` and a trailing dot were tunneled to the API unaudited, and a request
/// enforce refuses got 200. Each is now intercepted and refused like `127.0.0.1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_an_intercepted_host_is_audited() {
    let api = api("spellings").await;
    let forward = enforcing_on_loopback(&api).await;
    let port = api.up.addr.port();
    for host in [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f.0.0.1",
        "127.000.000.001",
        "127.0.0.1.",
        "[::ffff:127.0.0.1]",
    ] {
        let status = drifted_get_through(&api, forward.addr, &format!("{host}:{port}")).await;
        assert_eq!(
            status, 422,
            "{host} is the intercepted host: enforce refuses"
        );
    }
    assert!(api.up.recorded().is_empty(), "nothing reached the API");
    let metrics = scrape(forward.admin).await;
    assert!(!metrics.contains("outcome=\"tunneled\"} 1"), "{metrics}");
    forward.stop().await;
}

/// Issue 49, defect 13: `:99999`, `:65536`, `:-1` were read as 443; an HTTP/2 `CONNECT` was
/// answered 200 and relayed nothing. Each is a 400 now, counted, and nothing is dialed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_to_no_port_or_over_http2_is_refused() {
    let api = api("ports").await;
    let forward = start(forward_config(&api, |_| {})).await;
    for target in [
        "api.test:99999",
        "api.test:65536",
        "api.test:-1",
        "api.test:0",
    ] {
        let (status, _) = connect(forward.addr, target).await;
        assert_eq!(status, 400, "{target}");
    }
    let h2 = h2_connect(forward.addr, "api.test:443").await;
    assert_eq!(h2, 400, "an HTTP/2 CONNECT");
    let metrics = scrape(forward.admin).await;
    assert_eq!(
        sample(
            &metrics,
            "driftwatch_client_errors_total{reason=\"connect_target\"}"
        ),
        5.0,
        "{metrics}"
    );
    assert!(api.up.recorded().is_empty());
    forward.stop().await;
}

/// A `CONNECT` over HTTP/2 (prior knowledge, cleartext): the answer's status.
async fn h2_connect(proxy: std::net::SocketAddr, authority: &str) -> u16 {
    let stream = TcpStream::connect(proxy).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let request = http::Request::connect(authority)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), sender.send_request(request))
        .await
        .expect("an answer")
        .unwrap();
    answer.status().as_u16()
}

/// Issue 49, defect 11: a ClientHello trickled a byte at a time inside an intercepted
/// `CONNECT` held its place for hours (each byte kept the connection from going idle). The
/// handshake now has the head's deadline (`proxy.header_read_timeout_ms`), counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_client_hello_inside_a_connect_is_cut_at_the_head_deadline() {
    let api = api("trickle").await;
    let forward = start(forward_config(&api, |c| {
        c.proxy.header_read_timeout_ms = 1_000;
        c.proxy.idle_timeout_ms = 60_000;
    }))
    .await;
    let (status, mut stream) = connect(forward.addr, "api.test:443").await;
    assert_eq!(status, 200);
    // A TLS handshake record announcing 16 KiB, then one byte of it every 100 ms.
    stream
        .write_all(&[0x16, 0x03, 0x01, 0x40, 0x00])
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut closed = false;
    while started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if stream.write_all(&[0]).await.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 64];
        if let Ok(Ok(0)) =
            tokio::time::timeout(Duration::from_millis(1), stream.read(&mut buf)).await
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "still open after 20 s of a trickled ClientHello");
    let metrics = scrape(forward.admin).await;
    assert_eq!(
        sample(
            &metrics,
            "driftwatch_limit_hits_total{limit=\"tls_handshake\",listener=\"proxy\"}"
        ),
        1.0,
        "{metrics}"
    );
    forward.stop().await;
}

/// `driftwatch serve --check` of a forward proxy whose CA directory is `ca_dir`: its exit
/// code and what it wrote to stderr.
fn check_with_ca(ca_dir: &std::path::Path) -> (i32, String) {
    let config = ca_dir.with_extension("toml");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nkind = \"forward\"\n[forward]\nca_dir = {:?}\n[[api]]\nname = \"channels\"\nspec = {:?}\nhosts = [\"api.test:443\"]\nupstream = \"https://127.0.0.1:9\"\n",
            ca_dir.display().to_string(),
            super::util::example("channels.openapi.yaml").display().to_string()
        ),
    )
    .unwrap();
    serve_check(&config)
}

/// `driftwatch serve --check --config CONFIG`: its exit code and what it wrote.
fn serve_check(config: &std::path::Path) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["serve", "--check", "--config"])
        .arg(config)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    (out.status.code().unwrap_or(-1), said)
}

/// A fresh CA directory for one case.
fn ca_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "driftwatch-hostile-ca-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn openssl(args: &[&str], dir: &std::path::Path) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 49, defect 12 and the `--check` that wrote: a certificate that is not a CA, or has
/// expired, passed `serve --check` and then failed every intercepted call; the keys
/// `openssl genrsa` and `openssl ecparam -genkey` write (`BEGIN RSA PRIVATE KEY`, `BEGIN EC
/// PRIVATE KEY`) were refused; a huge `ca.pem` was read whole; and `--check` made a CA in an
/// empty directory. Now each is checked, the traditional keys are read, and `--check` writes
/// nothing.
#[test]
fn serve_check_reads_the_operators_ca_as_openssl_makes_it_and_refuses_an_unusable_one() {
    let subject = ["-subj", "/O=Example Ops/CN=Example Egress CA"];
    let ca_ext = ["-addext", "basicConstraints=critical,CA:TRUE"];
    for (name, genkey) in [
        (
            "traditional-rsa",
            &["genrsa", "-traditional", "-out", "ca.key", "2048"][..],
        ),
        (
            "traditional-ec",
            &[
                "ecparam",
                "-genkey",
                "-name",
                "prime256v1",
                "-noout",
                "-out",
                "ca.key",
            ][..],
        ),
    ] {
        let dir = ca_dir(name);
        std::fs::create_dir_all(&dir).unwrap();
        openssl(genkey, &dir);
        let key = std::fs::read_to_string(dir.join("ca.key")).unwrap();
        assert!(
            key.starts_with("-----BEGIN RSA PRIVATE KEY")
                || key.starts_with("-----BEGIN EC PRIVATE KEY"),
            "{name}: openssl wrote the traditional form"
        );
        let mut req = vec![
            "req", "-x509", "-new", "-key", "ca.key", "-days", "2", "-out", "ca.pem",
        ];
        req.extend(subject);
        req.extend(ca_ext);
        openssl(&req, &dir);
        let (code, said) = check_with_ca(&dir);
        assert_eq!(code, 0, "{name}: {said}");
        assert!(!said.contains("PRIVATE"), "{name}: {said}");
    }

    let not_a_ca = ca_dir("not-a-ca");
    std::fs::create_dir_all(&not_a_ca).unwrap();
    let mut req = vec![
        "req",
        "-x509",
        "-nodes",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
    ];
    req.extend(subject);
    openssl(&req, &not_a_ca);
    let (code, said) = check_with_ca(&not_a_ca);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("is not a CA certificate"), "{said}");

    let expired = ca_dir("expired");
    std::fs::create_dir_all(&expired).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(30);
    params.not_after = time::OffsetDateTime::now_utc() - time::Duration::days(1);
    std::fs::write(
        expired.join("ca.pem"),
        params.self_signed(&key).unwrap().pem(),
    )
    .unwrap();
    std::fs::write(expired.join("ca.key"), key.serialize_pem()).unwrap();
    let (code, said) = check_with_ca(&expired);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("expired at"), "{said}");

    let huge = ca_dir("huge");
    std::fs::create_dir_all(&huge).unwrap();
    std::fs::write(huge.join("ca.pem"), vec![b'A'; 3 << 20]).unwrap();
    std::fs::write(huge.join("ca.key"), key.serialize_pem()).unwrap();
    let (code, said) = check_with_ca(&huge);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("is larger than 1048576 bytes"), "{said}");

    let empty = ca_dir("empty");
    let (code, said) = check_with_ca(&empty);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("none yet: made on first start"), "{said}");
    assert!(!empty.exists(), "--check wrote {}", empty.display());
}

/// Issue 49's tunnel policy: `unknown_hosts = "tunnel"` reached any host and port, the
/// sidecar's own admin port and loopback included. A tunnel to a loopback, link-local or
/// unspecified address, or to driftwatch's own listener, is now a 403 unless
/// `forward.tunnel_allow` names it; CONNECT and absolute-form alike, however the host is
/// spelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_to_loopback_or_the_sidecars_own_ports_is_denied_unless_allowed() {
    let api = api("policy").await;
    let forward = start(forward_config(&api, |_| {})).await;
    let admin = forward.admin;
    for target in [
        format!("127.0.0.1:{}", admin.port()),
        format!("localhost:{}", admin.port()),
        format!("127.1:{}", admin.port()),
        "[::1]:6379".to_string(),
        "169.254.169.254:80".to_string(),
        "0.0.0.0:22".to_string(),
    ] {
        let (status, _) = connect(forward.addr, &target).await;
        assert_eq!(status, 403, "CONNECT {target}");
    }
    let absolute = format!(
        "GET http://127.0.0.1:{}/spec HTTP/1.1\r\nhost: 127.0.0.1:{}\r\n\r\n",
        admin.port(),
        admin.port()
    );
    let answer = super::sidecar::raw(forward.addr, absolute.as_bytes()).await;
    assert_eq!(answer.status, 403, "absolute-form to the admin port");
    assert!(
        String::from_utf8_lossy(&answer.body).contains("forward.tunnel_allow"),
        "the answer says how to allow it"
    );
    let metrics = scrape(admin).await;
    let refused = format!(
        "driftwatch_tunnels_total{{host=\"127.0.0.1:{}\",outcome=\"refused\"}}",
        admin.port()
    );
    assert_eq!(sample(&metrics, &refused), 3.0, "{metrics}");
    forward.stop().await;

    let allowing = start(forward_config(&api, |c| {
        c.forward.tunnel_allow = vec![admin.to_string()]
    }))
    .await;
    let (status, _) = connect(allowing.addr, &format!("127.0.0.1:{}", admin.port())).await;
    assert_eq!(
        status, 502,
        "allowed, dialed: the stopped sidecar's port refuses"
    );
    allowing.stop().await;
}

/// An `[[api]]` error named no file ("set by the default"); it names the config file now.
#[test]
fn an_api_tables_error_names_the_config_file() {
    let dir = ca_dir("api-origin");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("bad.toml");
    std::fs::write(
        &config,
        "[proxy]\nkind = \"forward\"\n[[api]]\nname = \"x\"\nspec = \"s.yaml\"\nhosts = [\"a b\"]\n",
    )
    .unwrap();
    let (code, said) = serve_check(&config);
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("api.hosts"), "{said}");
    assert!(said.contains(&config.display().to_string()), "{said}");
    assert!(!said.contains("set by the default"), "{said}");
}

/// Issue 51, item 5: plain HTTP inside a `CONNECT` to an intercepted host died (TLS was always
/// attempted). The first byte tells TLS from HTTP now, and a plain request is audited like any.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_inside_an_intercepted_connect_is_audited() {
    let api = api("plain").await;
    let forward = start(forward_config(&api, |_| {})).await;
    let (status, mut stream) = connect(forward.addr, "api.test:80").await;
    assert_eq!(status, 200);
    let request = "GET /api/v1/playouts?pageSize=abc&customer_id=7 HTTP/1.1\r\nhost: api.test\r\nconnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("an answer")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).to_string();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("unknown_query_param:customer_id"),
        "{answer}"
    );
    let got = api.up.recorded();
    assert_eq!(got.len(), 1, "sent on to the API");
    assert_eq!(
        got[0].header("x-forwarded-proto"),
        Some("http"),
        "the client spoke plain HTTP"
    );
    forward.stop().await;
}
