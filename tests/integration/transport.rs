//! Transports: an HTTP/2 client in front of an HTTP/1.1 upstream, TLS to an upstream signed by
//! a test CA (trusted with `upstream_tls.ca_file`, refused without), TLS on the listener, and a
//! SIGTERM that drains the requests in flight on every serving thread before the process exits 0.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::deploy::{ready, serve};
use super::sidecar::{config, raw, sample, scrape, start};
use super::upstream::{self, ok};
use super::util::eventually;

pub struct Pki {
    pub ca_pem: std::path::PathBuf,
    pub cert_pem: std::path::PathBuf,
    pub key_pem: std::path::PathBuf,
    pub acceptor: tokio_rustls::TlsAcceptor,
}

/// A TLS client config trusting the CA certificates in `files` (PEM) alone.
pub fn trusting(files: &[std::path::PathBuf]) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for file in files {
        for cert in driftwatch::proxy::read_certs(file).unwrap() {
            roots.add(cert).unwrap();
        }
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// A test CA and a `localhost` server certificate it signed, written to a temp dir.
pub fn pki(name: &str) -> Pki {
    pki_for(name, &["localhost"])
}

/// A test CA and a server certificate it signed for `names` (a name or an IP address each).
pub fn pki_for(name: &str, names: &[&str]) -> Pki {
    let dir = std::env::temp_dir().join(format!("driftwatch-tls-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "driftwatch test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cert = CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let ca_pem = dir.join("ca.pem");
    let cert_pem = dir.join("server.pem");
    let key_pem = dir.join("server.key");
    std::fs::write(&ca_pem, ca.pem()).unwrap();
    std::fs::write(&cert_pem, cert.pem()).unwrap();
    std::fs::write(&key_pem, key.serialize_pem()).unwrap();
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, der)
    .unwrap();
    Pki {
        ca_pem,
        cert_pem,
        key_pem,
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_reaches_an_http1_upstream() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |_| {})).await;
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let body = r#"{"url":"https://cdn.test/logo.png"}"#;
    let req = http::Request::put(format!("http://{}/api/v1/channels/7/logo?v=1", dw.addr))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.into_body().collect().await.unwrap().to_bytes(),
        "{\"ok\":true}"
    );
    let got = up.recorded();
    assert_eq!(
        (
            got[0].version,
            got[0].method.as_str(),
            got[0].target.as_str()
        ),
        (1, "PUT", "/api/v1/channels/7/logo?v=1")
    );
    assert_eq!(got[0].body, body.as_bytes());
    assert_eq!(
        got[0].header("x-forwarded-host"),
        Some(dw.addr.to_string().as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_upstream_signed_by_a_trusted_test_ca_works_and_by_an_unknown_one_fails() {
    let pki = pki("upstream");
    let up = upstream::start(ok(), Duration::ZERO, Some(pki.acceptor.clone())).await;
    let url = format!("https://localhost:{}", up.addr.port());
    let trusted = start(config(&url, |c| {
        c.upstream_tls.ca_file = Some(pki.ca_pem.clone())
    }))
    .await;
    let resp = raw(
        trusted.addr,
        b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await;
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    assert_eq!(up.recorded().len(), 1);
    assert_eq!(
        up.recorded()[0].header("host"),
        Some(format!("localhost:{}", up.addr.port()).as_str())
    );

    let untrusted = start(config(&url, |_| {})).await;
    let resp = raw(
        untrusted.addr,
        b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await;
    assert_eq!(resp.status, 502);
    let detail = resp.json()["detail"].as_str().unwrap().to_string();
    assert!(
        detail.ends_with("tls error: invalid peer certificate: UnknownIssuer"),
        "{detail}"
    );
    assert_eq!(
        up.recorded().len(),
        1,
        "nothing reached the upstream without a trusted certificate"
    );
    let m = scrape(untrusted.admin).await;
    assert_eq!(
        sample(&m, "driftwatch_upstream_errors_total{cause=\"tls\"}"),
        1.0,
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_serves_tls() {
    let pki = pki("listener");
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.proxy.tls_cert = Some(pki.cert_pem.clone());
        c.proxy.tls_key = Some(pki.key_pem.clone());
    }))
    .await;
    let tls = trusting(std::slice::from_ref(&pki.ca_pem));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let uri = format!(
        "https://localhost:{}/api/v1/playouts?pageSize=5",
        dw.addr.port()
    );
    let resp = client
        .request(http::Request::get(uri).body(Full::default()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(up.recorded()[0].header("x-forwarded-proto"), Some("https"));
}

/// `proxy.workers = 3`: three serving threads share the listening socket. A SIGTERM while
/// twelve requests are in flight, on twelve connections spread over the threads, lets every one
/// of them finish before the process exits 0.
#[test]
fn sigterm_drains_the_requests_in_flight_on_every_serving_thread_then_exits_0() {
    const IN_FLIGHT: usize = 12;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let up = upstream::start(ok(), Duration::from_millis(800), None).await;
        let (mut child, addr, admin) = serve(up.addr, &[("DRIFTWATCH_PROXY_WORKERS", "3")]);
        let pid = child.id().unwrap();
        ready(admin).await;
        // The process's own thread serves too; the kernel cuts thread names to 15 bytes. Ready
        // can be said before the other threads have started (seen in CI on a loaded machine).
        eventually("two serving threads besides the main one", || async {
            (threads_named(pid, "driftwatch-serv") == 2).then_some(())
        })
        .await;
        let in_flight: Vec<_> = (0..IN_FLIGHT)
            .map(|_| {
                tokio::spawn(async move {
                    raw(addr, b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n").await
                })
            })
            .collect();
        // The upstream holds each request 800 ms; signal while all are in flight.
        eventually("the upstream to hold every request", || async {
            (up.recorded().len() == IN_FLIGHT).then_some(())
        })
        .await;
        let kill = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        for request in in_flight {
            let resp = request.await.unwrap();
            assert_eq!(
                resp.status, 200,
                "an in-flight request completed during the drain"
            );
        }
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("exited after draining")
            .unwrap();
        assert_eq!(status.code(), Some(0));
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "the listener is closed"
        );
    });
}

/// How many of process `pid`'s threads have this name.
fn threads_named(pid: u32, name: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

/// The image sets `DRIFTWATCH_PROXY_LISTEN=0.0.0.0:8080` and `DRIFTWATCH_SPEC_PATH`: the flags
/// an operator passes must win over them (flags > env > file), on the real binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_beat_the_images_environment_on_the_real_binary() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let port = |l: std::net::TcpListener| l.local_addr().unwrap().port();
    let free = || port(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let (by_flag, by_env, admin) = (free(), free(), free());
    let spec = super::util::example("channels.openapi.yaml");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["serve", "--spec", spec.to_str().unwrap()])
        .args(["--upstream", &format!("http://{}", up.addr)])
        .args(["--listen", &format!("127.0.0.1:{by_flag}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .env("DRIFTWATCH_PROXY_LISTEN", format!("127.0.0.1:{by_env}"))
        .env("DRIFTWATCH_SPEC_PATH", "/nonexistent/openapi.yaml")
        .env("DRIFTWATCH_EVENTS_OUTPUT", "none")
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let admin: std::net::SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    ready(admin).await;
    let flag_addr: std::net::SocketAddr = format!("127.0.0.1:{by_flag}").parse().unwrap();
    let resp = raw(
        flag_addr,
        b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await;
    assert_eq!(resp.status, 200, "--listen is where it serves");
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", by_env))
            .await
            .is_err(),
        "nothing listens where the environment asked"
    );
    let spec_source = super::sidecar::admin_get(admin, "/spec").await.json()["source"].clone();
    assert_eq!(
        spec_source,
        spec.to_str().unwrap(),
        "--spec beats DRIFTWATCH_SPEC_PATH"
    );
    let _ = child.kill().await;
}

/// An invalid value stops the start with exit 2, naming its key and where it was set.
#[test]
fn an_invalid_header_name_in_the_config_stops_the_start_naming_the_key() {
    let dir = std::env::temp_dir().join(format!("driftwatch-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("driftwatch.toml");
    std::fs::write(&file, "[events]\ntool_header = \"x mcp tool\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["serve", "--config", file.to_str().unwrap()])
        .args(["--upstream", "http://127.0.0.1:9", "--spec", "unused.yaml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!(
            "driftwatch: events.tool_header (set by {} line 2): `x mcp tool` is not a valid header name",
            file.display()
        )
    );
}

/// CPU time (user + system, in clock ticks) a process has used so far.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Out of file descriptors (idle clients hold them all), the accept loop backs off instead of
/// spinning: bounded CPU, a bounded log, the failures counted, and service again once the
/// clients go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_the_accept_loop_backs_off_and_recovers() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let port = |l: std::net::TcpListener| l.local_addr().unwrap().port();
    let free = || port(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let (listen, admin) = (free(), free());
    let spec = super::util::example("channels.openapi.yaml");
    let command = format!(
        "ulimit -n 64; exec {} serve --spec {} --upstream http://{} --listen 127.0.0.1:{listen} --admin-listen 127.0.0.1:{admin}",
        env!("CARGO_BIN_EXE_driftwatch"),
        spec.display(),
        up.addr
    );
    let mut child = tokio::process::Command::new("bash")
        .args(["-c", &command])
        .env("DRIFTWATCH_EVENTS_OUTPUT", "none")
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    // Read the log as it comes, so a flood of it cannot block the process on a full pipe.
    let mut stderr = child.stderr.take().unwrap();
    let log = tokio::spawn(async move {
        let mut text = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut stderr, &mut text).await;
        String::from_utf8_lossy(&text).into_owned()
    });
    let admin: std::net::SocketAddr = format!("127.0.0.1:{admin}").parse().unwrap();
    ready(admin).await;
    let proxy: std::net::SocketAddr = format!("127.0.0.1:{listen}").parse().unwrap();
    let mut idle = Vec::new();
    for _ in 0..100 {
        idle.push(tokio::net::TcpStream::connect(proxy).await.unwrap());
    }
    // Out of descriptors now: measure two seconds of it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let spent = cpu_ticks(pid) - before;
    drop(idle);
    let resp = eventually("service once the idle clients are gone", || async {
        let resp = tokio::time::timeout(
            Duration::from_secs(1),
            raw(proxy, b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n"),
        )
        .await
        .ok()?;
        Some(resp)
    })
    .await;
    assert_eq!(resp.status, 200);
    let failures = sample(
        &scrape(admin).await,
        "driftwatch_limit_hits_total{limit=\"open_files\",listener=\"proxy\"}",
    );
    let _ = child.kill().await;
    let log = log.await.unwrap();
    let lines = log.lines().filter(|l| l.contains("accept")).count();
    assert!(
        spent < 40,
        "the accept loop spent {spent} ticks of CPU in 2 s (100 a second is a spinning core)"
    );
    assert!(lines <= 4, "{lines} log lines about accept:\n{log}");
    assert!(failures >= 1.0, "the failures are counted: {failures}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_connections_are_reused_and_one_the_api_closed_loses_no_request() {
    use std::sync::atomic::Ordering;
    const GET: &[u8] = b"GET /api/v1/playouts HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n";

    // Kept alive: 30 requests, one after another, go up on one connection.
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.proxy.workers = 1
    }))
    .await;
    for _ in 0..30 {
        assert_eq!(raw(dw.addr, GET).await.status, 200);
    }
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        1,
        "one connection, reused"
    );
    dw.stop().await;

    // The API closes a connection idle for 30 ms; each request comes 100 ms after the last,
    // so the connection kept for it is always closed by then: none is lost, each goes on a
    // new connection.
    let idle = Duration::from_millis(30);
    let up = upstream::start_closing_idle(ok(), Duration::ZERO, idle).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.proxy.workers = 1
    }))
    .await;
    for i in 0..10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let status = raw(dw.addr, GET).await.status;
        assert_eq!(
            status, 200,
            "request {i}, after the API closed the last connection"
        );
    }
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        10,
        "a new connection for each"
    );
    dw.stop().await;

    // After a burst of 6 at once (6 connections), 10 requests one at a time all go on one
    // connection, the most recent: the other five fall idle and can time out, instead of
    // being kept alive in turn.
    let up = upstream::start(ok(), Duration::from_millis(50), None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.proxy.workers = 1
    }))
    .await;
    let addr = dw.addr;
    let burst: Vec<_> = (0..6)
        .map(|_| tokio::spawn(async move { raw(addr, GET).await.status }))
        .collect();
    for request in burst {
        assert_eq!(request.await.unwrap(), 200);
    }
    assert_eq!(
        up.accepted.load(Ordering::SeqCst),
        6,
        "the burst's connections"
    );
    let before = up.recorded().len();
    for _ in 0..10 {
        assert_eq!(raw(dw.addr, GET).await.status, 200);
    }
    let served: Vec<usize> = up.recorded()[before..]
        .iter()
        .map(|r| r.connection)
        .collect();
    assert_eq!(served.len(), 10);
    assert!(served.iter().all(|c| *c == served[0]), "{served:?}");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 6, "no new connection");
    dw.stop().await;
}

/// An API that answers each request after `delay`, keeping connections alive, and counts the
/// connections open at once: (now, most).
async fn counting_api(
    delay: Duration,
) -> (
    std::net::SocketAddr,
    Arc<(
        std::sync::atomic::AtomicUsize,
        std::sync::atomic::AtomicUsize,
    )>,
) {
    use std::sync::atomic::Ordering;
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let open = Arc::new((
        std::sync::atomic::AtomicUsize::new(0),
        std::sync::atomic::AtomicUsize::new(0),
    ));
    let counts = open.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let counts = counts.clone();
            let now = counts.0.fetch_add(1, Ordering::SeqCst) + 1;
            counts.1.fetch_max(now, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while upstream::read_request(&mut stream, &mut buf)
                    .await
                    .is_some()
                {
                    tokio::time::sleep(delay).await;
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                    if stream.write_all(answer).await.is_err() {
                        break;
                    }
                }
                counts.0.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (addr, open)
}

/// Issue 34, defect 12: HTTP/2 streams count against the bounds. 5 connections of 200
/// streams each to a slow API opened a socket upstream per stream, past
/// `proxy.max_connections`; now at most that many are open at once (the other streams wait
/// their turn) and every stream is answered. Seen red first (1,000 open at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_streams_count_against_the_bound_on_upstream_connections() {
    let (api, open) = counting_api(Duration::from_millis(100)).await;
    let dw = start(config(&format!("http://{api}"), |c| {
        c.proxy.max_connections = 20;
    }))
    .await;
    let mut sent = Vec::new();
    for _ in 0..5 {
        // A client of its own: one HTTP/2 connection each.
        let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build_http();
        for _ in 0..200 {
            let req = http::Request::get(format!("http://{}/api/v1/channels/7", dw.addr))
                .body(Full::new(Bytes::new()))
                .unwrap();
            let client = client.clone();
            sent.push(tokio::spawn(async move {
                client.request(req).await.map(|r| r.status())
            }));
        }
    }
    for answer in sent {
        assert_eq!(answer.await.unwrap().unwrap(), 200);
    }
    let most = open.1.load(std::sync::atomic::Ordering::SeqCst);
    assert!(most <= 20, "{most} connections open upstream at once");
    dw.stop().await;
}
