//! A pod's `OTEL_*` environment, set for every container (issue 65), on the real binary: a
//! hostile one (empty values, upper case, a sampler and exporter driftwatch does not know,
//! `grpc`) stops neither `serve` nor `wrap`; `OTEL_SDK_DISABLED` sends nothing; gzip reaches
//! the collector as gzip, and what it unzips to decodes with the official OTLP messages
//! (`opentelemetry-proto`); a collector behind a private CA is trusted only with
//! `OTEL_EXPORTER_OTLP_CERTIFICATE`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use serde_json::json;

use super::deploy::{log_of, ready, serve};
use super::sidecar::{raw, sample, scrape};
use super::upstream::{self, Upstream};
use super::util::{eventually, example, free_addr};

/// What a pod may set for all its containers, none of it meant for driftwatch alone.
const HOSTILE: [(&str, &str); 9] = [
    ("OTEL_TRACES_SAMPLER", "ParentBased_AlwaysMaybe"),
    ("OTEL_TRACES_SAMPLER_ARG", "half"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "GRPC"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
    ("OTEL_SERVICE_NAME", ""),
    ("OTEL_PROPAGATORS", "B3,Jaeger"),
    ("OTEL_TRACES_EXPORTER", "Zipkin"),
    ("OTEL_EXPORTER_OTLP_HEADERS", "bad header=s3cret"),
];

const GET: &[u8] = b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n";

/// The POSTs of exports the collector got.
fn exports(collector: &Upstream) -> Vec<super::upstream::Recorded> {
    (collector.recorded().into_iter())
        .filter(|r| r.method == "POST" && r.target == "/v1/traces")
        .collect()
}

fn header<'r>(r: &'r super::upstream::Recorded, name: &str) -> Option<&'r str> {
    (r.headers.iter()).find_map(|(n, v)| (n == name).then_some(v.as_str()))
}

/// The series of `driftwatch_trace_spans_total` for `outcome`.
async fn spans(admin: SocketAddr, outcome: &str) -> f64 {
    let series = format!("driftwatch_trace_spans_total{{outcome=\"{outcome}\"}}");
    sample(&scrape(admin).await, &series)
}

/// `serve` starts and answers under the hostile environment; its log says each value left out
/// (naming the variable, never the header's value) and that traces are off, and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_pod_environment_does_not_stop_serve() {
    let api = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let (child, proxy, admin) = serve(api.addr, &HOSTILE);
    ready(admin).await;
    assert_eq!(raw(proxy, GET).await.status, 200);
    let log = log_of(child).await;
    let mut wrong = Vec::new();
    for var in [
        "OTEL_TRACES_SAMPLER",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_PROPAGATORS",
        "OTEL_TRACES_EXPORTER",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ] {
        if !log.contains(var) {
            wrong.push(format!("{var} not said"));
        }
    }
    if log.contains("s3cret") || !log.contains("traces off") || !log.contains("grpc") {
        wrong.push("the header's value said, or traces off not said with grpc".into());
    }
    assert!(wrong.is_empty(), "{wrong:#?}\n{log}");
}

/// With `OTEL_SDK_DISABLED=true` nothing reaches the collector; beside it a sidecar with the
/// same settings but not disabled exports, so the wait was long enough to see one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otel_sdk_disabled_sends_nothing_to_the_collector() {
    let api = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let (silent, control) = (
        upstream::start(upstream::ok(), Duration::ZERO, None).await,
        upstream::start(upstream::ok(), Duration::ZERO, None).await,
    );
    let at = |c: &Upstream| format!("http://{}", c.addr);
    let (silent_at, control_at) = (at(&silent), at(&control));
    let fast = ("DRIFTWATCH_TELEMETRY_EXPORT_INTERVAL_MS", "20");
    let (off, off_proxy, off_admin) = serve(
        api.addr,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &silent_at),
            ("OTEL_SDK_DISABLED", "TRUE"),
            fast,
        ],
    );
    let (on, on_proxy, on_admin) = serve(
        api.addr,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &control_at), fast],
    );
    ready(off_admin).await;
    ready(on_admin).await;
    for _ in 0..5 {
        assert_eq!(raw(off_proxy, GET).await.status, 200);
        assert_eq!(raw(on_proxy, GET).await.status, 200);
    }
    eventually("the control's spans exported", || async {
        (spans(on_admin, "exported").await >= 5.0).then_some(())
    })
    .await;
    assert_eq!(spans(off_admin, "exported").await, 0.0);
    assert!(exports(&silent).is_empty(), "disabled, yet exported");
    let log = log_of(off).await;
    assert!(log.contains("OTEL_SDK_DISABLED"), "{log}");
    drop(on);
}

/// `OTEL_EXPORTER_OTLP_COMPRESSION=gzip`: each export says `Content-Encoding: gzip`, and its
/// body unzips to an `ExportTraceServiceRequest` holding the request's span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_reaches_the_collector_as_gzip_and_decodes_with_the_official_messages() {
    let api = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let collector = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let endpoint = format!("http://{}", collector.addr);
    let (child, proxy, admin) = serve(
        api.addr,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "GZIP"),
            ("OTEL_SERVICE_NAME", "pod-sidecar"),
            ("DRIFTWATCH_TELEMETRY_EXPORT_INTERVAL_MS", "20"),
        ],
    );
    ready(admin).await;
    assert_eq!(raw(proxy, GET).await.status, 200);
    let posted = eventually("an export", || async {
        let got = exports(&collector);
        (!got.is_empty()).then_some(got)
    })
    .await;
    let mut names = Vec::new();
    for export in &posted {
        assert_eq!(header(export, "content-encoding"), Some("gzip"));
        let mut body = Vec::new();
        flate2::read::GzDecoder::new(export.body.as_slice())
            .read_to_end(&mut body)
            .expect("the body gunzips");
        let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        for spans in request.resource_spans {
            let resource = spans.resource.unwrap_or_default();
            let service = (resource.attributes.iter()).find(|a| a.key == "service.name");
            assert!(
                format!("{service:?}").contains("pod-sidecar"),
                "{service:?}"
            );
            let all = spans.scope_spans.into_iter().flat_map(|s| s.spans);
            names.extend(all.map(|s| s.name));
        }
    }
    assert!(names.iter().any(|n| n.starts_with("GET")), "{names:?}");
    drop(child);
}

/// A collector whose certificate a private CA signed: without the CA every span fails (counted),
/// and nothing is received; with `OTEL_EXPORTER_OTLP_CERTIFICATE` naming it, the spans arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_behind_a_private_ca_is_trusted_with_otel_exporter_otlp_certificate() {
    let api = upstream::start(upstream::ok(), Duration::ZERO, None).await;
    let pki = super::transport::pki("otel-collector");
    let collector = upstream::start(upstream::ok(), Duration::ZERO, Some(pki.acceptor)).await;
    let endpoint = format!("https://localhost:{}", collector.addr.port());
    let ca = pki.ca_pem.to_str().unwrap();
    let base = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("DRIFTWATCH_TELEMETRY_EXPORT_INTERVAL_MS", "20"),
    ];
    let (untrusted, proxy, admin) = serve(api.addr, &base);
    ready(admin).await;
    assert_eq!(raw(proxy, GET).await.status, 200);
    eventually("the span's export failed", || async {
        (spans(admin, "failed").await >= 1.0).then_some(())
    })
    .await;
    assert!(exports(&collector).is_empty());
    drop(untrusted);
    let trusting = [base[0], base[1], ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)];
    let (child, proxy, admin) = serve(api.addr, &trusting);
    ready(admin).await;
    assert_eq!(raw(proxy, GET).await.status, 200);
    eventually("the span exported", || async {
        (spans(admin, "exported").await >= 1.0).then_some(())
    })
    .await;
    assert!(!exports(&collector).is_empty());
    assert_eq!(spans(admin, "failed").await, 0.0);
    let log = log_of(child).await;
    assert!(log.contains(&format!("CA {ca}")), "{log}");
}

/// Under `wrap`, the hostile environment stops neither the sidecar nor the MCP server: its
/// `initialize` is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_pod_environment_does_not_stop_wrap_or_its_server() {
    let admin = free_addr().to_string();
    let mut wrap = Command::new(env!("CARGO_BIN_EXE_driftwatch"));
    wrap.args(["wrap", "--spec"])
        .arg(example("channels.openapi.yaml"))
        .args(["--upstream", "http://127.0.0.1:9", "--admin-listen", &admin])
        .args(["--", "python3", "-c", super::hostile_traces::SERVER])
        .envs(HOSTILE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut wrap = wrap.spawn().unwrap();
    let (mut stdin, stdout) = (wrap.stdin.take().unwrap(), wrap.stdout.take().unwrap());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "c", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    let answer = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    });
    let answer = tokio::time::timeout(Duration::from_secs(30), answer)
        .await
        .expect("wrap answered")
        .unwrap();
    drop(stdin);
    let _ = wrap.kill();
    let _ = wrap.wait();
    let answer: serde_json::Value = serde_json::from_str(&answer)
        .unwrap_or_else(|e| panic!("not the server's answer ({e}): {answer:?}"));
    assert_eq!(answer["result"]["serverInfo"]["name"], "s", "{answer}");
}
