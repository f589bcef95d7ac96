//! Rotel (PyPI `rotel`, a Rust OpenTelemetry collector nobody here wrote) as the collector
//! driftwatch exports to (issue 65): it must accept every export, decode every span (its debug
//! log prints each one), and pass on what the official `opentelemetry-proto` messages read as
//! exactly what driftwatch sent straight to them. The same requests go through two sidecars:
//! one exporting to the receiver directly, one to Rotel, which exports to a second receiver.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::mcp::{Sdk, python};
use super::sidecar::{config, raw, sample, scrape, start};
use super::traces::Receiver;
use super::util::{eventually, free_addr};
use super::wrap::listening;

const ROTEL: Sdk = Sdk {
    venv: "target/tools/rotel",
    package: "rotel==0.0.1a15",
    module: "rotel",
    script: "",
};

/// The agent's span, which each request names as its parent.
const AGENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// What the API is asked: a read, a list with a parameter the spec lacks (a finding, an event
/// on the span), a write.
const REQUESTS: [&str; 3] = [
    "GET /api/v1/channels/7 HTTP/1.1\r\nhost: a\r\ntraceparent: {AGENT}\r\nconnection: close\r\n\r\n",
    "GET /api/v1/playouts?customer_id=3 HTTP/1.1\r\nhost: a\r\ntraceparent: {AGENT}\r\nconnection: close\r\n\r\n",
    "PUT /api/v1/channels/7 HTTP/1.1\r\nhost: a\r\ntraceparent: {AGENT}\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
];

/// Rotel's agent, receiving OTLP/HTTP on `port` and exporting to `to`, its decoded spans
/// printed to `log`.
struct Rotel {
    child: Child,
    log: PathBuf,
}

impl Rotel {
    async fn start(to: &str) -> (Rotel, String) {
        let python = python(ROTEL);
        let find =
            "import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))";
        let agent = Command::new(python).args(["-c", find]).output().unwrap();
        let agent = String::from_utf8(agent.stdout).unwrap();
        let (http, grpc) = (free_addr(), free_addr());
        let log = std::env::temp_dir().join(format!("driftwatch-rotel-{}.log", std::process::id()));
        let child = Command::new(agent.trim())
            .arg("start")
            .args(["--otlp-http-endpoint", &http.to_string()])
            .args(["--otlp-grpc-endpoint", &grpc.to_string()])
            .args(["--exporter", "otlp", "--otlp-exporter-protocol", "http"])
            .args(["--otlp-exporter-endpoint", to])
            .args(["--debug-log", "traces", "--debug-log-verbosity", "detailed"])
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        listening(http, "Rotel's OTLP/HTTP receiver").await;
        (Rotel { child, log }, format!("http://{http}"))
    }

    /// Its log, without the colours it writes even to a file.
    fn log(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut plain = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find('\x1b') {
            plain.push_str(&rest[..at]);
            rest = &rest[at..];
            rest = rest.find('m').map_or("", |end| &rest[end + 1..]);
        }
        plain + rest
    }

    /// Each span Rotel decoded, as its debug log prints it: (id, name).
    fn decoded(&self) -> Vec<(String, String)> {
        let text = self.log();
        let field = |line: &str, key: &str| {
            let (k, v) = line.split_once(" : ")?;
            (k.trim() == key).then(|| v.trim().to_string())
        };
        let mut spans = Vec::new();
        let mut id = None;
        for line in text.lines() {
            if let Some(v) = field(line, "ID") {
                id = Some(v);
            } else if let (Some(name), Some(id)) = (field(line, "Name"), id.take()) {
                spans.push((id, name));
            }
        }
        spans
    }
}

impl Drop for Rotel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The requests through a sidecar exporting to `endpoint`; its counts of spans exported and
/// failed once the three are out.
async fn through(endpoint: &str, api: &str) -> (f64, f64) {
    let running = start(config(api, |c| {
        c.telemetry.endpoint = Some(endpoint.to_string());
        c.telemetry.export_interval_ms = 10;
    }))
    .await;
    for request in REQUESTS {
        let request = request.replace("{AGENT}", AGENT);
        assert_eq!(raw(running.addr, request.as_bytes()).await.status, 200);
    }
    let count = |m: &str, o: &str| {
        sample(
            m,
            &format!("driftwatch_trace_spans_total{{outcome=\"{o}\"}}"),
        )
    };
    let metrics = eventually("the spans exported or failed", || async {
        let m = scrape(running.admin).await;
        (count(&m, "exported") + count(&m, "failed") >= 3.0).then_some(m)
    })
    .await;
    running.stop().await;
    (count(&metrics, "exported"), count(&metrics, "failed"))
}

/// A span as both sides must agree on it: not its own id, the request's id or the export's
/// headers, which differ between the two sidecars.
fn comparable(span: &Value) -> Value {
    let mut span = span.clone();
    let object = span.as_object_mut().unwrap();
    for key in ["span_id", "headers"] {
        object.remove(key);
    }
    object["attributes"]
        .as_object_mut()
        .unwrap()
        .remove("driftwatch.request_id");
    span
}

fn sorted(spans: &[Value]) -> Vec<Value> {
    let mut spans: Vec<Value> = spans.iter().map(comparable).collect();
    spans.sort_by_key(|s| s["name"].to_string() + &s["attributes"].to_string());
    spans
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotel_accepts_decodes_and_passes_on_every_span_as_sent() {
    let api = super::upstream::start(super::upstream::ok(), Duration::ZERO, None).await;
    let api = format!("http://{}", api.addr);
    let direct = Receiver::start("direct", 0.0).await;
    let behind = Receiver::start("behind-rotel", 0.0).await;
    let (rotel, endpoint) = Rotel::start(&behind.base()).await;

    assert_eq!(through(&direct.base(), &api).await, (3.0, 0.0));
    assert_eq!(
        through(&endpoint, &api).await,
        (3.0, 0.0),
        "Rotel took each"
    );
    let sent = direct.until("3 spans straight", |s| s.len() >= 3).await;
    let passed = behind
        .until("3 spans through Rotel", |s| s.len() >= 3)
        .await;
    assert_eq!(sorted(&passed), sorted(&sent));
    for span in &passed {
        assert_eq!(span["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(span["parent_span_id"], "00f067aa0ba902b7");
    }
    let decoded = rotel.decoded();
    let mut got: Vec<(String, String)> = (passed.iter())
        .map(|s| {
            (
                s["span_id"].as_str().unwrap().into(),
                s["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    got.sort();
    let mut logged = decoded.clone();
    logged.sort();
    assert_eq!(
        logged, got,
        "Rotel's own decoding: each span, its id and name"
    );
    let log = rotel.log();
    assert!(!log.contains(" ERROR "), "{log}");
}
