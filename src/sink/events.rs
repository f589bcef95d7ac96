//! Audit events: one JSON line per request that had findings, for the incident responder who
//! has to trace a silent clear back to its request, operation, field and tool. Written by a
//! thread of its own behind a bounded queue: a slow disk drops events (counted), never
//! requests. Events carry names and types only; values only with `log_values = true`, and
//! secret headers never.

use std::io::Write;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use crate::finding::Finding;
use crate::mcp::calls::Attribution;

#[derive(Debug, Serialize)]
pub struct Event {
    #[serde(rename = "timestamp", serialize_with = "crate::finding::rfc3339")]
    pub at: SystemTime,
    /// The `[[api]]` the request was for; absent for the one API of `[spec]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    pub request_id: String,
    pub traceparent: Option<String>,
    /// driftwatch's span of the request, when traces are exported and it was sampled.
    #[serde(flatten)]
    pub trace: TraceIds,
    /// The tool call behind the request: `tool` (its name, or `(ambiguous)`), how it was found
    /// (`tool_attribution`), and for an ambiguous one the `tool_candidates`.
    #[serde(flatten)]
    pub tool: ToolFields,
    pub operation: Option<String>,
    pub method: String,
    pub path_template: Option<String>,
    /// The request path without its query string (query values stay out of the log).
    pub path: String,
    /// The upstream's status, or the one driftwatch answered with.
    pub status: Option<u16>,
    /// `forwarded`, `blocked`, `client_error` or `upstream_error` (`observed` for an event
    /// raised after the response).
    pub action: &'static str,
    /// Why driftwatch answered for the upstream, when it did: whose fault and what happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<EventError>,
    pub mode: &'static str,
    pub spec_revision: String,
    pub findings: Vec<EventFinding>,
    /// Findings not listed because the event reached `events.max_event_bytes`.
    #[serde(skip_serializing_if = "is_zero")]
    pub findings_left_out: usize,
    /// `action = "catalog"`: what the live catalog check found wrong with the tool.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub catalog_defects: Vec<crate::catalog::Defect>,
    /// A replace write whose omitted fields were to be filled from a fresh read (`repair`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<Repair>,
    /// driftwatch's read of the resource before a replace write the memory had no view of
    /// (`enforce.read_before_write`): what was decided on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_before_write: Option<ReadNote>,
    /// Query, body and non-secret headers, only with `log_values = true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<Value>,
}

/// The trace and span an event's request was recorded under: one step from an alert to its
/// trace.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TraceIds {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
}

impl TraceIds {
    /// A sampled span's ids (an unsampled one is in no backend to look up).
    pub fn of(cx: &crate::telemetry::SpanContext) -> TraceIds {
        if !cx.sampled {
            return TraceIds::default();
        }
        TraceIds {
            trace_id: Some(cx.trace_id_hex()),
            span_id: Some(cx.span_id_hex()),
        }
    }
}

/// What a repair did: names only, never the values it filled.
#[derive(Debug, Clone, Serialize)]
pub struct Repair {
    /// The fields filled from the read (their names in the write), or that would have been.
    pub fields: Vec<String>,
    /// The request id of driftwatch's read of the resource, when one was sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_request_id: Option<String>,
    /// The write was sent with `If-Match` set to the read's `ETag`.
    pub if_match: bool,
    /// Why the write was refused instead, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// driftwatch's read of a replace write's resource, made before the write because the memory
/// had no view of it.
#[derive(Debug, Clone, Serialize)]
pub struct ReadNote {
    /// The read's own request id (the API's logs show it).
    pub request_id: String,
    /// `held` (an omitted field held a value: at risk), `nothing_held`, `absent` (404 or 410:
    /// nothing to erase), or `unusable` (it failed or was not the resource: `reason`).
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Repair {
    /// Whether `f` is the omission of one of its fields.
    pub fn names(&self, f: &Finding) -> bool {
        let field = f.field.trim_start_matches('/');
        crate::policy::Action::repairs(f.kind) && self.fields.iter().any(|n| n == field)
    }
}

/// An event's tool: the `tool` key kept where it was (the name, or `(ambiguous)`), and beside it
/// how it was found and, when ambiguous, the tools of the calls that fit.
#[derive(Debug, Default, Serialize)]
pub struct ToolFields {
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_attribution: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_candidates: Vec<String>,
}

/// Candidates an event lists, each cut to `HEADER_MAX`.
const CANDIDATES_MAX: usize = 16;

impl ToolFields {
    pub fn of(tool: Option<&Attribution>) -> ToolFields {
        let Some(a) = tool else {
            return ToolFields::default();
        };
        ToolFields {
            tool: Some(a.label().to_string()),
            tool_attribution: Some(a.by.as_str()),
            tool_candidates: a
                .candidates
                .iter()
                .take(CANDIDATES_MAX)
                .map(|c| crate::finding::shorten(c, HEADER_MAX))
                .collect(),
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Bytes of the text a peer chooses that an event carries: the path, and the tool, request id
/// and traceparent headers (hyper bounds a request head, not one header).
const PATH_MAX: usize = 1024;
const HEADER_MAX: usize = 256;

impl Event {
    /// Bytes of the event's JSON line, counted without writing it.
    pub fn weight(&self) -> usize {
        json_len(self)
    }

    /// Cut the event to `max` bytes of JSON: the text a peer chose to `PATH_MAX` and
    /// `HEADER_MAX`, then if still over, the logged values go first, then findings from the last,
    /// counted in `findings_left_out`. Gives the bytes of the event as cut, and whether the
    /// bound cut values or findings. What is left (the event's head) is bounded, so a bound of
    /// a few KiB always holds it.
    pub fn fit(&mut self, max: usize) -> (usize, bool) {
        let peer = [&mut self.request_id, &mut self.path];
        for (text, bound) in peer.into_iter().zip([HEADER_MAX, PATH_MAX]) {
            if text.len() > bound {
                *text = crate::finding::shorten(text, bound);
            }
        }
        for text in [&mut self.tool.tool, &mut self.traceparent]
            .into_iter()
            .flatten()
        {
            if text.len() > HEADER_MAX {
                *text = crate::finding::shorten(text, HEADER_MAX);
            }
        }
        let whole = self.weight();
        if whole <= max {
            return (whole, false);
        }
        self.values = None;
        let mut weight = self.weight();
        // `"findings_left_out":N,` at most.
        let said = 44;
        while weight + said > max && !self.findings.is_empty() {
            let last = self.findings.pop().expect("not empty");
            weight -= json_len(&last) + usize::from(!self.findings.is_empty());
            self.findings_left_out += 1;
        }
        (self.weight(), true)
    }
}

/// Bytes of `value` as JSON.
fn json_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[derive(Debug, Serialize)]
pub struct EventError {
    /// `client` or `upstream`.
    pub fault: &'static str,
    pub detail: String,
}

#[derive(Debug, Serialize)]
pub struct EventFinding {
    #[serde(flatten)]
    pub finding: Finding,
    /// `block`, `log` or `repaired`: what was done about this finding.
    pub action: &'static str,
}

/// Headers never logged whatever the configuration says.
pub const SECRET_HEADERS: [&str; 4] = [
    "authorization",
    "cookie",
    "set-cookie",
    "proxy-authorization",
];

pub struct EventLog {
    tx: Mutex<Option<SyncSender<Arc<Event>>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

const QUEUE: usize = 8192;

/// Where events go: `events.output` is `stdout`, `none`, or a file path to append to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventOutput {
    Stdout,
    Discard,
    File(std::path::PathBuf),
}

impl std::fmt::Display for EventOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EventOutput::Stdout => write!(f, "stdout"),
            EventOutput::Discard => write!(f, "none"),
            EventOutput::File(path) => write!(f, "{}", path.display()),
        }
    }
}

impl EventOutput {
    pub fn parse(output: &str) -> EventOutput {
        match output {
            "none" => EventOutput::Discard,
            "stdout" => EventOutput::Stdout,
            path => EventOutput::File(path.into()),
        }
    }
}

impl EventLog {
    pub fn open(output: &EventOutput) -> std::io::Result<EventLog> {
        let sink: Option<Box<dyn Write + Send>> = match output {
            EventOutput::Discard => None,
            EventOutput::Stdout => Some(Box::new(std::io::stdout())),
            EventOutput::File(path) => Some(Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            )),
        };
        let Some(sink) = sink else {
            return Ok(EventLog {
                tx: Mutex::new(None),
                writer: Mutex::new(None),
            });
        };
        let (tx, rx) = sync_channel(QUEUE);
        let writer = std::thread::Builder::new()
            .name("driftwatch-events".into())
            .spawn(move || write_loop(rx, sink))?;
        Ok(EventLog {
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Queue an event; `false` when it had to be dropped (queue full).
    pub fn log(&self, event: Arc<Event>) -> bool {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        match tx.as_ref().map(|tx| tx.try_send(event)) {
            None | Some(Ok(())) => true,
            Some(Err(TrySendError::Full(_))) | Some(Err(TrySendError::Disconnected(_))) => false,
        }
    }

    /// Flush what is queued and stop the writer (at shutdown).
    pub fn close(&self) {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(writer) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = writer.join();
        }
    }
}

fn write_loop(rx: Receiver<Arc<Event>>, mut sink: Box<dyn Write + Send>) {
    let mut line = Vec::with_capacity(1024);
    while let Ok(event) = rx.recv() {
        for event in std::iter::once(event).chain(rx.try_iter()) {
            line.clear();
            if serde_json::to_writer(&mut line, &*event).is_ok() {
                line.push(b'\n');
                let _ = sink.write_all(&line);
            }
        }
        let _ = sink.flush();
    }
}
