//! OpenTelemetry traces (issue 53), read back by a receiver nobody here wrote the messages of
//! (scripts/otlp-receiver.py on PyPI's `opentelemetry-proto`), with the official Python MCP SDK
//! as the client and the OpenTelemetry SDK as its tracer provider, so that the `traceparent` in
//! `params._meta` is the SDK's own. The MCP server is Notion's (npm), which forwards no trace
//! context itself: driftwatch joins the two hops.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::mcp::{TRACED_SDK, python};
use super::sidecar::{config, raw, sample, scrape, start};
use super::util::{eventually, free_addr};
use super::wrap::{
    Session, enforcing, listening, notion_behind_the_front, pairing_api, pairs_and_a_refusal,
    servers,
};

/// The receiver, its spans written as JSON lines.
pub(super) struct Receiver {
    child: Child,
    out: PathBuf,
    addr: SocketAddr,
}

impl Receiver {
    /// Answering each export after `delay` seconds.
    pub(super) async fn start(name: &str, delay: f64) -> Receiver {
        let addr = free_addr();
        let out = std::env::temp_dir().join(format!(
            "driftwatch-otlp-{name}-{}.jsonl",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&out);
        let child = Command::new(python(TRACED_SDK))
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/otlp-receiver.py"))
            .args([
                addr.port().to_string(),
                out.display().to_string(),
                delay.to_string(),
            ])
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        listening(addr, "the OTLP receiver").await;
        Receiver { child, out, addr }
    }

    pub(super) fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The spans written so far: whole lines only (the receiver may be writing the last).
    fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        whole
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The spans, once `enough` says they are all there. Three processes export them on their
    /// own schedules (the agent's SDK, driftwatch's batches, the server), so the bound is
    /// generous (30 s; it ends as soon as they are there), and a wait that ends without them
    /// says which spans had come: that list showed a CI failure's cause, a request sent while
    /// a call was still in flight (see the stdio test).
    pub(super) async fn until(&self, what: &str, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(SPANS_WITHIN);
        loop {
            let spans = self.spans();
            if enough(&spans) {
                return spans;
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "waited {SPANS_WITHIN} s for {what}; had {}:\n{}",
                    spans.len(),
                    spans.iter().map(span_line).collect::<Vec<_>>().join("\n")
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long the spans of a test may take to arrive, at most (see [`Receiver::until`]).
const SPANS_WITHIN: u64 = 30;

/// One span in a line: whose, what, and where it hangs.
fn span_line(s: &Value) -> String {
    format!(
        "{} {:?} kind={} parent={:?} links={} tool={} attribution={}",
        s["service"],
        s["name"],
        s["kind"],
        s["parent_span_id"],
        s["links"].as_array().map_or(0, Vec::len),
        attr(s, "gen_ai.tool.name"),
        attr(s, "driftwatch.tool_attribution"),
    )
}

const SERVER: i64 = 2;
const CLIENT: i64 = 3;

fn attr<'v>(span: &'v Value, key: &str) -> &'v Value {
    &span["attributes"][key]
}

/// driftwatch's `tools/call` spans.
fn call_spans(spans: &[Value]) -> Vec<&Value> {
    (spans.iter())
        .filter(|s| s["service"] == "driftwatch" && attr(s, "mcp.method.name") == "tools/call")
        .collect()
}

/// driftwatch's spans of API requests: client spans, and the server spans of those it
/// answered itself (refused).
fn request_spans(spans: &[Value]) -> Vec<&Value> {
    (spans.iter())
        .filter(|s| s["service"] == "driftwatch" && attr(s, "driftwatch.request_id").is_string())
        .collect()
}

fn by_id<'v>(spans: &'v [Value], trace: &Value, id: &Value) -> Option<&'v Value> {
    spans
        .iter()
        .find(|s| &s["trace_id"] == trace && &s["span_id"] == id)
}

fn parent_of<'v>(spans: &'v [Value], span: &Value) -> Option<&'v Value> {
    by_id(spans, &span["trace_id"], &span["parent_span_id"])
}

fn traceparent(span: &Value) -> String {
    format!(
        "00-{}-{}-01",
        span["trace_id"].as_str().unwrap(),
        span["span_id"].as_str().unwrap()
    )
}

/// Every call span is the child of the agent's own span, and every request tied to a call is
/// the child of that call's span; the API got the request span as its `traceparent`.
fn assert_joined(spans: &[Value], api: &[super::upstream::Recorded], transport: &str) {
    let calls = call_spans(spans);
    assert!(!calls.is_empty(), "{spans:#?}");
    for call in &calls {
        let agent = parent_of(spans, call).unwrap_or_else(|| panic!("no parent: {call:#}"));
        assert_eq!(agent["service"], "agent", "{call:#}");
        assert_eq!(call["kind"], SERVER);
        assert_eq!(attr(call, "gen_ai.operation.name"), "execute_tool");
        assert_eq!(attr(call, "network.transport"), transport);
        let tool = attr(call, "gen_ai.tool.name").as_str().unwrap();
        assert_eq!(call["name"], format!("tools/call {tool}"));
        assert!(attr(call, "jsonrpc.request.id").is_string(), "{call:#}");
    }
    let tied = ["only_call", "only_tool", "arguments"];
    for request in request_spans(spans) {
        // A request names its call by its parent, not as a tool call of its own.
        assert!(attr(request, "gen_ai.tool.name").is_null(), "{request:#}");
        // What every request span of the API carries alike, encoded once per API.
        assert_eq!(attr(request, "server.address"), "127.0.0.1", "{request:#}");
        assert!(
            attr(request, "server.port").as_i64().is_some(),
            "{request:#}"
        );
        assert!(attr(request, "driftwatch.mode").is_string(), "{request:#}");
        assert!(
            attr(request, "http.request.method").is_string(),
            "{request:#}"
        );
        let by = attr(request, "driftwatch.tool_attribution")
            .as_str()
            .unwrap_or("");
        if tied.contains(&by) {
            let call = parent_of(spans, request).unwrap_or_else(|| panic!("{request:#}"));
            assert_eq!(attr(call, "mcp.method.name"), "tools/call", "{request:#}");
            assert_eq!(
                attr(call, "gen_ai.tool.name"),
                attr(request, "driftwatch.tool"),
                "{request:#}"
            );
        }
        if attr(request, "driftwatch.action") == "forwarded" {
            assert_eq!(request["kind"], CLIENT, "{request:#}");
            let sent = traceparent(request);
            assert!(
                api.iter().any(|r| r.header("traceparent") == Some(&sent)),
                "the API got {sent}: {request:#}"
            );
        }
    }
}

/// Under `wrap` over stdio: one trace from the agent's call to the API's answer for a call
/// alone and for two together; an ambiguous request links both candidates; a refused one says
/// so with its findings as events; a request made with no call in flight is a root of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_one_trace_holds_the_agents_call_driftwatchs_call_and_the_api_request() {
    let receiver = Receiver::start("stdio", 0.0).await;
    let (notion, _) = servers();
    let spec = notion.join("scripts/notion-openapi.json");
    let api = pairing_api(None);
    let proxy = free_addr();
    let mut plan = json!([{"call": ["API-retrieve-a-page", {"page_id": "p-0"}]}]);
    plan.as_array_mut().unwrap().extend(pairs_and_a_refusal());
    let proxy_arg = proxy.to_string();
    let wrap = enforcing(&spec, api.addr, &["--listen", &proxy_arg]);
    let server = [
        "node".into(),
        notion.join("bin/cli.mjs").display().to_string(),
    ];
    let env = [
        ("MCP_SESSION_OTLP", format!("{}/v1/traces", receiver.base())),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base()),
        ("DRIFTWATCH_TELEMETRY_EXPORT_INTERVAL_MS", "100".into()),
    ];
    let mut session = Session::start_with("traced", plan, &wrap, &server, TRACED_SDK, &env);
    let events = session.events(6).await;
    // The server's own request, no call in flight: the session holds, and every call is
    // answered once the agent has its last answer (its span ends then; the relay lets a call
    // go before it passes its answer on). The events alone do not say so: the refused call's
    // is written before the server answers it, and a CI run sent this request in between.
    receiver
        .until("the agent's span of its last call", |s| {
            s.iter().any(|s| {
                s["service"] == "agent" && s["name"] == "MCP send tools/call API-post-page"
            })
        })
        .await;
    let own = b"GET /v1/users/me HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n";
    assert_eq!(raw(proxy, own).await.status, 200);
    let spans = receiver
        .until(
            "six calls and seven requests traced, the server's own among them",
            |s| {
                // The server's own request ended last: wait for its span, not only for a count
                // the others can reach first (a CI run read the spans before its batch came).
                let root = |r: &&Value| {
                    r["parent_span_id"] == "" && r["links"].as_array().is_some_and(Vec::is_empty)
                };
                call_spans(s).len() >= 6
                    && request_spans(s).len() >= 7
                    && request_spans(s).iter().any(root)
                    && s.iter().filter(|s| s["service"] == "agent").count() >= 6
            },
        )
        .await;
    let out = session.release();
    assert_eq!(out["results"].as_array().unwrap().len(), 4, "{out}");
    let recorded = api.recorded();
    assert_joined(&spans, &recorded, "pipe");

    let requests = request_spans(&spans);
    let attributed = |by: &str| -> Vec<&&Value> {
        (requests.iter())
            .filter(|r| attr(r, "driftwatch.tool_attribution") == by)
            .collect()
    };
    // The pair told apart by its values: each request under its own call.
    let told = attributed("arguments");
    assert!(!told.is_empty(), "{requests:#?}");
    let parents: std::collections::BTreeSet<&str> = (told.iter())
        .map(|r| parent_of(&spans, r).unwrap()["span_id"].as_str().unwrap())
        .collect();
    assert_eq!(parents.len(), told.len(), "each request under its own call");

    // The pair that differs in nothing a request shows: linked to both calls, a child of none.
    let same: Vec<&Value> = (call_spans(&spans).into_iter())
        .filter(|c| {
            let t = attr(c, "gen_ai.tool.name");
            t == "API-retrieve-a-block"
                || (t == "API-retrieve-a-page"
                    && spans.iter().any(|s| {
                        attr(s, "driftwatch.tool_attribution") == "ambiguous"
                            && s["links"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .any(|l| l["span_id"] == c["span_id"])
                    }))
        })
        .collect();
    let ambiguous = attributed("ambiguous");
    assert!(!ambiguous.is_empty(), "{requests:#?}");
    for request in &ambiguous {
        assert_eq!(request["parent_span_id"], "", "{request:#}");
        let links: Vec<&Value> = (request["links"].as_array().unwrap().iter())
            .map(|l| &l["span_id"])
            .collect();
        assert_eq!(links.len(), 2, "{request:#}");
        for call in &same {
            assert!(links.contains(&&call["span_id"]), "{request:#}\n{call:#}");
        }
    }

    // The refused request: an error naming the finding, each finding an event without values.
    let refused = (requests.iter())
        .find(|r| attr(r, "driftwatch.action") == "blocked")
        .expect("the refused post-page");
    assert_eq!(refused["status"]["code"], 2, "{refused:#}");
    assert_eq!(
        refused["kind"], SERVER,
        "never sent to the API: {refused:#}"
    );
    assert!(
        (refused["status"]["message"].as_str().unwrap()).starts_with("refused by driftwatch: "),
        "{refused:#}"
    );
    let events_named = |name: &str| {
        (refused["events"].as_array().unwrap().iter())
            .filter(|e| e["name"] == name)
            .count()
    };
    assert_eq!(events_named("driftwatch.refused"), 1, "{refused:#}");
    let found: Vec<&Value> = (refused["events"].as_array().unwrap().iter())
        .filter(|e| e["name"] != "driftwatch.refused")
        .collect();
    assert!(!found.is_empty());
    for event in found {
        assert_eq!(event["name"], "driftwatch.finding");
        assert!(event["attributes"]["driftwatch.finding.kind"].is_string());
        assert!(!event.to_string().contains("Drift\""), "no value: {event}");
    }
    // The answer's own drift (a field the spec does not declare), found after the last byte.
    let answered = (requests.iter())
        .filter(|r| attr(r, "driftwatch.response_findings").as_i64() > Some(0))
        .count();
    assert!(answered >= 6, "{requests:#?}");

    // The server's own request: a root, which the API got as its parent.
    let own = (requests.iter())
        .find(|r| r["parent_span_id"] == "" && r["links"].as_array().unwrap().is_empty())
        .expect("a root span for the request made with no call in flight");
    assert!(
        attr(own, "driftwatch.tool_attribution").is_null(),
        "{own:#}"
    );

    // Every event names its request's span: from the page to the trace in one step.
    for event in events.iter().filter(|e| e["action"] != "catalog") {
        let span = by_id(&spans, &event["trace_id"], &event["span_id"])
            .unwrap_or_else(|| panic!("the event's span was exported: {event:#}"));
        assert_eq!(attr(span, "driftwatch.request_id"), &event["request_id"]);
    }
}

/// The same join behind wrap's HTTP front, Notion's server speaking streamable HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_the_http_front_the_call_and_its_request_join_the_agents_trace() {
    let receiver = Receiver::start("front", 0.0).await;
    let (notion, _) = servers();
    let api = pairing_api(None);
    let (admin, front, server) = (free_addr(), free_addr(), free_addr());
    let mut dw = notion_behind_the_front(&notion, api.addr, (admin, front, server))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base())
        .env("DRIFTWATCH_TELEMETRY_EXPORT_INTERVAL_MS", "100")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    listening(server, "the Notion server's HTTP port").await;
    let plan = json!([{"call": ["API-retrieve-a-page", {"page_id": "p-0"}]}]);
    let env = [("MCP_SESSION_OTLP", format!("{}/v1/traces", receiver.base()))];
    let url = format!("http://{front}/mcp");
    let mut session = Session::open_with("front", plan, admin, &[url], TRACED_SDK, &env);
    session.events(1).await;
    let spans = receiver
        .until("the call and its request", |s| {
            !call_spans(s).is_empty()
                && !request_spans(s).is_empty()
                && s.iter().any(|s| s["service"] == "agent")
        })
        .await;
    session.release();
    let _ = Command::new("kill")
        .args(["-TERM", &dw.id().to_string()])
        .status();
    let _ = dw.wait();
    assert_joined(&spans, &api.recorded(), "tcp");
    let request = request_spans(&spans)[0];
    assert_eq!(attr(request, "driftwatch.tool_attribution"), "only_call");
}

/// A collector that is down, or slower than the export timeout, costs a request nothing:
/// every request is answered, and the spans that could not go are counted, dropped (the queue
/// was full) or failed (their export did not succeed in time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_collector_down_or_slow_every_request_is_answered_and_the_losses_counted() {
    let api = super::upstream::start(super::upstream::ok(), Duration::ZERO, None).await;
    let slow = Receiver::start("slow", 30.0).await;
    for endpoint in [format!("http://{}", free_addr()), slow.base()] {
        let running = start(config(&format!("http://{}", api.addr), |c| {
            c.telemetry.endpoint = Some(endpoint.clone());
            c.telemetry.queue_size = 4;
            c.telemetry.batch_size = 2;
            c.telemetry.export_interval_ms = 10;
            c.telemetry.export_timeout_ms = 300;
        }))
        .await;
        let get = b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n";
        for _ in 0..200 {
            assert_eq!(raw(running.addr, get).await.status, 200, "{endpoint}");
        }
        // Every span is lost, and every one counted: failed (its export did not succeed), or
        // dropped (the queue was full while an export waited on the slow one).
        let metrics = eventually("every span lost counted", || async {
            let m = scrape(running.admin).await;
            let lost = |o| {
                sample(
                    &m,
                    &format!("driftwatch_trace_spans_total{{outcome=\"{o}\"}}"),
                )
            };
            (lost("dropped") + lost("failed") == 200.0).then_some(m)
        })
        .await;
        let count = |o: &str| {
            sample(
                &metrics,
                &format!("driftwatch_trace_spans_total{{outcome=\"{o}\"}}"),
            )
        };
        assert_eq!(count("exported"), 0.0, "{endpoint}");
        assert!(count("failed") > 0.0, "{endpoint}");
        if endpoint == slow.base() {
            assert!(
                count("dropped") > 0.0,
                "the queue of 4 filled while an export waited"
            );
        }
    }
}

/// What the API gets as `traceparent`: with export off, what the client sent and nothing more;
/// `when_absent` adds driftwatch's span where the client sent none and keeps the client's;
/// `always` puts driftwatch's span, a child of the client's, in its place; `never` adds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forwarded_traceparent_is_kept_added_or_replaced_as_propagation_says() {
    const SENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let receiver = Receiver::start("propagation", 0.0).await;
    let api = super::upstream::start(super::upstream::ok(), Duration::ZERO, None).await;
    let bare = b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n".to_vec();
    let with = format!(
        "GET /api/v1/channels/8 HTTP/1.1\r\nhost: a\r\ntraceparent: {SENT}\r\nconnection: close\r\n\r\n"
    );
    let mut replaced = String::new();
    for propagation in [None, Some("when_absent"), Some("always"), Some("never")] {
        let running = start(config(&format!("http://{}", api.addr), |c| {
            if let Some(p) = propagation {
                c.telemetry.endpoint = Some(receiver.base());
                c.telemetry.propagation = p.into();
                c.telemetry.export_interval_ms = 10;
            }
        }))
        .await;
        let before = api.recorded().len();
        assert_eq!(raw(running.addr, &bare).await.status, 200);
        assert_eq!(raw(running.addr, with.as_bytes()).await.status, 200);
        let got = api.recorded();
        let bare_got = got[before].header("traceparent");
        let with_got = got[before + 1].header("traceparent").unwrap_or("");
        match propagation {
            None | Some("never") => {
                assert_eq!(bare_got, None, "{propagation:?}");
                assert_eq!(with_got, SENT, "{propagation:?}");
            }
            Some("when_absent") => {
                assert!(bare_got.is_some_and(|t| t.starts_with("00-") && t.ends_with("-01")));
                assert_eq!(with_got, SENT);
            }
            _ => {
                assert!(bare_got.is_some());
                assert!(with_got.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
                assert_ne!(with_got, SENT);
                replaced = with_got.to_owned();
            }
        }
    }
    // The span the API was told of is driftwatch's, a child of the client's.
    let id = replaced.split('-').nth(2).unwrap().to_owned();
    let spans = receiver
        .until("the replacing span exported", |s| {
            s.iter().any(|s| s["span_id"] == id.as_str())
        })
        .await;
    let span = spans.iter().find(|s| s["span_id"] == id.as_str()).unwrap();
    assert_eq!(span["parent_span_id"], "00f067aa0ba902b7", "{span:#}");
    assert_eq!(span["name"], "GET /api/v1/channels/{id}");
}

/// Issue 63: driftwatch's read before a write is a span of its own, the child of the write's
/// span, and the write's span names it; the API got the read's span as its `traceparent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_before_a_write_is_a_span_under_the_writes() {
    let receiver = Receiver::start("read-before-write", 0.0).await;
    let api = super::silent_clears::demo_api().await;
    let running = start(config(&format!("http://{api}"), |c| {
        c.proxy.mode = driftwatch::policy::Mode::Enforce;
        c.telemetry.endpoint = Some(receiver.base());
        c.telemetry.export_interval_ms = 10;
    }))
    .await;
    let seed = Value::Object(driftwatch::demo::api::seed());
    let stale = super::silent_clears::stale_body(&seed);
    let put = super::silent_clears::put("/api/v1/channels/7", "Bearer a", "p1", &stale);
    assert_eq!(raw(running.addr, &put).await.status, 409);
    let spans = receiver
        .until("the write's and the read's spans", |s| {
            request_spans(s).len() >= 2
        })
        .await;
    let write = (request_spans(&spans).into_iter())
        .find(|s| attr(s, "driftwatch.request_id") == "p1")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    let read_id = attr(write, "driftwatch.read_before_write.request_id");
    assert_eq!(attr(write, "driftwatch.read_before_write.outcome"), "held");
    let read = (request_spans(&spans).into_iter())
        .find(|s| attr(s, "driftwatch.request_id") == read_id)
        .unwrap_or_else(|| panic!("no span for the read {read_id}: {spans:#?}"));
    assert_eq!(read["name"], "GET /api/v1/channels/{id}");
    assert_eq!(parent_of(&spans, read), Some(write), "{read:#}");
    assert_eq!(attr(read, "driftwatch.read_for"), "p1");
    assert_eq!(attr(read, "http.response.status_code"), 200);
}
