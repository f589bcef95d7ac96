//! Work on a response after its last byte went to the client, so no response waits on it:
//! the response audit (status, media type, and the sampled body), remembering a GET for
//! silent-clear memory, and confirming a silent clear a write left pending. Response findings
//! are recorded, never acted on: the answer has already gone. Decoding, parsing and validating
//! a large or compressed copy is CPU work that would stall other connections: it runs on a few
//! threads of its own, fed by a queue bounded in copies and in bytes; a full queue is counted
//! (`unaudited{reason="response_queue_full"}`), never waited on. A small plain copy costs less
//! to read than to hand over, and is read in a task on the runtime.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::sync::Notify;

use super::Sidecar;
use super::headers::{RequestId, value_text};
use crate::audit::audit_response;
use crate::encoding::{Undecoded, decode};
use crate::finding::Finding;
use crate::memory::{Key, Pending, Snapshot};
use crate::response::ResponseView;
use crate::silent::{AtRisk, Tracker};
use crate::sink::{Event, EventFinding};

/// How a response body ended, with the copy when there is one to read.
#[derive(Debug)]
pub enum Copied {
    /// Every byte, within the limit.
    Whole(Vec<u8>),
    /// Complete, but larger than the limit: not kept.
    TooLarge,
    /// The upstream's body failed before its end.
    UpstreamFailed,
    /// The client went away before the last byte.
    ClientGone,
    /// No copy was asked for (only the status and media type are checked).
    NotWanted,
}

/// Copies waiting for a worker at most; past it, response work is dropped and counted.
const QUEUE: usize = 1024;

/// Bytes of copies waiting for a worker at most: without it, 1,024 copies of
/// `audit.max_response_body` (1 MiB by default) could wait at once. The queue counts as full
/// as soon as either bound is reached, and as `n` copies deep when its bytes are that share of
/// this budget, so sampling starts as early on bytes as on copies.
const QUEUE_BYTES: usize = 64 << 20;

/// Past this [`depth`] of the queue, the workers are behind: a body's audit is sampled, drawn
/// less often the deeper the queue (none at `QUEUE`), and counted
/// (`unaudited{reason="response_sampled"}`); the memory's work is never sampled.
const SAMPLE_FROM: usize = QUEUE / 16;

/// Uncompressed copies up to this size are read on the runtime; larger or compressed ones (a
/// decompression may expand to `audit.max_response_body`) go to the workers.
const IN_PLACE: usize = 64 * 1024;

type Job = (Late, Copied);

/// The response workers, and the work in flight so that shutdown waits for it: a drained
/// connection has handed its last copy over, but the audit of that copy may still be running.
pub struct LateTasks {
    queue: SyncSender<Job>,
    in_flight: Arc<InFlight>,
}

/// Response work queued or running, shared with the workers; shutdown waits until it is none.
#[derive(Default)]
struct InFlight {
    pending: AtomicUsize,
    /// Copies in the queue, not yet taken by a worker.
    queued: AtomicUsize,
    /// Their bytes.
    queued_bytes: AtomicUsize,
    idle: Notify,
}

impl InFlight {
    fn enqueued(&self, len: usize) {
        self.queued.fetch_add(1, Ordering::Relaxed);
        self.queued_bytes.fetch_add(len, Ordering::Relaxed);
    }

    fn dequeued(&self, len: usize) {
        self.queued.fetch_sub(1, Ordering::Relaxed);
        self.queued_bytes.fetch_sub(len, Ordering::Relaxed);
    }

    fn done(&self) {
        if self.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }
}

impl LateTasks {
    /// One worker per core: the work is CPU-bound and never blocks on I/O.
    pub fn new() -> LateTasks {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (tx, rx) = sync_channel::<Job>(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let in_flight = Arc::new(InFlight::default());
        for n in 0..threads {
            let (rx, in_flight) = (rx.clone(), in_flight.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("driftwatch-late-{n}"))
                .spawn(move || {
                    yield_to_serving();
                    work(&rx, &in_flight)
                });
            if let Err(e) = spawned {
                tracing::error!("cannot start a response worker: {e}");
            }
        }
        LateTasks {
            queue: tx,
            in_flight,
        }
    }

    /// Run `late` with its copy: a small, uncompressed copy as a task on the runtime (reading
    /// it costs about what the request audit costs, less than a hand-off to a thread); a large
    /// or compressed one, or one whose schema must be compiled first and that the memory does
    /// not keep, on the response workers: queued, sampled when they are behind, and counted and
    /// dropped when the queue is full.
    pub(super) fn spawn(mut late: Late, copy: Copied) {
        let s = late.s.clone();
        let tasks = &s.late;
        tasks.in_flight.pending.fetch_add(1, Ordering::SeqCst);
        let heavy = match &copy {
            Copied::Whole(bytes) => {
                bytes.len() > IN_PLACE || late.encoding.is_some() || late.compiles()
            }
            _ => false,
        };
        let runtime = tokio::runtime::Handle::try_current();
        if let (false, Ok(runtime)) = (heavy, runtime) {
            let done = s.clone();
            runtime.spawn(async move {
                late.run(copy);
                done.late.in_flight.done();
            });
            return;
        }
        let len = copied_len(&copy);
        let depth = depth(
            tasks.in_flight.queued.load(Ordering::Relaxed),
            tasks.in_flight.queued_bytes.load(Ordering::Relaxed) + len,
        );
        if late.audit_body && !admitted(depth, fastrand::usize(SAMPLE_FROM..QUEUE)) {
            s.sinks.metrics.unaudited("response_sampled");
            late.audit_body = false;
            if late.remember.is_none() {
                // The status and media type are still audited; they cost nothing to read.
                late.run(Copied::NotWanted);
                tasks.in_flight.done();
                return;
            }
        }
        let refused = match depth < QUEUE {
            true => {
                tasks.in_flight.enqueued(len);
                match tasks.queue.try_send((late, copy)) {
                    Ok(()) => return,
                    Err(TrySendError::Full((late, _)) | TrySendError::Disconnected((late, _))) => {
                        tasks.in_flight.dequeued(len);
                        late
                    }
                }
            }
            false => late,
        };
        s.sinks.metrics.unaudited("response_queue_full");
        refused.give_up();
        tasks.in_flight.done();
    }

    /// Resolve once no late work is queued or running.
    pub async fn idle(&self) {
        loop {
            let notified = self.in_flight.idle.notified();
            if self.in_flight.pending.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// How deep the queue is, in copies, counting its bytes as their share of [`QUEUE_BYTES`]
/// in copies of [`QUEUE`]: the fuller of the two bounds. An empty queue takes any one copy
/// (`audit.max_response_body` may be set above the budget).
fn depth(queued: usize, bytes: usize) -> usize {
    if queued == 0 {
        return 0;
    }
    let by_bytes = (bytes as u128 * QUEUE as u128 / QUEUE_BYTES as u128) as usize;
    queued.max(by_bytes)
}

fn copied_len(copy: &Copied) -> usize {
    match copy {
        Copied::Whole(bytes) => bytes.len(),
        _ => 0,
    }
}

/// Whether a body's audit is kept at the queue's [`depth`], for a `draw` uniform over
/// `SAMPLE_FROM..QUEUE`: always while the workers keep up, then less often the deeper the
/// queue, never once it is full.
fn admitted(depth: usize, draw: usize) -> bool {
    depth <= SAMPLE_FROM || draw >= depth
}

/// The workers run at a lower priority than the serving threads (nice 10, Linux): when both
/// want the CPU, the answers go first and the audits fall behind, to be sampled, rather than
/// the other way round. Where the priority cannot be set, they run as they are.
fn yield_to_serving() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10) {
        tracing::debug!("the response workers keep their priority: {e}");
    }
}

/// A worker: take jobs until the sidecar is gone (the queue's sender dropped).
fn work(rx: &Mutex<Receiver<Job>>, in_flight: &InFlight) {
    loop {
        let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok((late, copy)) = job else { return };
        in_flight.dequeued(copied_len(&copy));
        late.run(copy);
        in_flight.done();
    }
}

/// The request's side of an event raised after the response: header values and the URI share
/// the request's buffers (a clone is a reference count), text is made only for an event.
#[derive(Clone)]
pub(super) struct LateMeta {
    pub tool: Option<Arc<crate::mcp::calls::Attribution>>,
    pub traceparent: Option<http::HeaderValue>,
    /// The request's span, which events raised after the response name too.
    pub trace: Option<crate::telemetry::SpanContext>,
    /// Where the exit leaves the span for the response work to add its findings to and end
    /// (`trace::end`); when nothing is left there, the last holder's drop ends it.
    pub span: Option<super::late_span::Slot>,
    pub uri: http::Uri,
}

/// A resource's silent-clear state, carried from the request to its response.
pub(super) struct Remember {
    pub key: Key,
    pub at_risk: AtRisk,
}

pub(super) struct Late {
    pub s: Arc<Sidecar>,
    /// The API the request was for.
    pub api: Arc<super::Api>,
    /// The spec revision the request was audited with.
    pub rev: Arc<super::Revision>,
    /// The routed operation's place in `rev`'s contract (its id may not be unique).
    pub op: usize,
    pub request_id: RequestId,
    pub meta: LateMeta,
    pub status: u16,
    /// `Content-Type` and `Content-Encoding` of the response.
    pub content_type: Option<http::HeaderValue>,
    pub encoding: Option<http::HeaderValue>,
    /// Whether this response's body is audited (the sample drew it).
    pub audit_body: bool,
    pub remember: Option<Remember>,
    /// The write's `silent_clear_risk` findings, for its answer to decide (see
    /// [`crate::silent::Tracker::after_response`]).
    pub deferred: Vec<Finding>,
    /// What the write's fields at risk held (`incidents.keep_values`).
    pub kept: Option<super::incident::KeptWrite>,
}

impl<'a> super::incident::Recorded<'a> {
    /// The request a response's work records: its id, answer, tool, trace and path.
    fn of(
        op: &'a crate::contract::Operation,
        id: &'a str,
        status: u16,
        meta: &'a LateMeta,
    ) -> Self {
        super::incident::Recorded {
            op,
            id,
            status,
            tool: meta.tool.as_deref(),
            trace: meta.trace.as_ref(),
            path: meta.uri.path(),
        }
    }
}

impl Late {
    /// Whether the body must be copied for this work (otherwise only the status is audited).
    pub fn wants_body(&self) -> bool {
        self.audit_body || self.remember.is_some()
    }

    /// Its work when no worker can take it: a write's deferred risks are still recorded,
    /// undecided, without reading the answer.
    fn give_up(mut self) {
        if !self.deferred.is_empty() {
            self.audit_body = false;
            self.remember = None;
            self.run(Copied::NotWanted);
        }
    }

    /// Its audit may compile the response's schema first (see
    /// [`crate::contract::Contract::response_compiles`]), and nothing else waits on it: a GET
    /// the memory keeps is read at once, in place, so that a write right after it (a scripted
    /// client's GET, edit, PUT) is compared with it, however long the compile.
    fn compiles(&self) -> bool {
        let contract = &self.rev.contract;
        self.audit_body
            && self.remember.is_none()
            && contract
                .operation_at(self.op)
                .is_some_and(|op| contract.response_compiles(op, self.status))
    }

    /// Run with the body copy, however the body ended: without one, the status and media
    /// type are still audited and a write's pending clear is still armed.
    pub fn run(mut self, copy: Copied) {
        let s = &self.s;
        let rev = self.rev.clone();
        let Some(op) = rev.contract.operation_at(self.op) else {
            return;
        };
        let decoded = self.decoded(copy);
        // Parsed once, for the audit and the memory alike.
        let json = decoded
            .as_deref()
            .and_then(|bytes| crate::json::parse(bytes).ok());
        let mut findings = Vec::new();
        if s.settings.audit.enabled {
            let headers = ContentType(as_text(&self.content_type));
            let view = ResponseView {
                status: self.status,
                headers: &headers,
                body: decoded.as_deref().filter(|_| self.audit_body),
                parsed: json.as_ref().map(crate::json::Doc::root),
            };
            findings = audit_response(&rev.contract, op, &view);
            self.api.reported.retain_new(&mut findings);
        }
        let mut risks = std::mem::take(&mut self.deferred);
        if let Some(remember) = self.remember.take() {
            let body = json.as_ref().map(crate::json::Doc::root);
            let (confirmed, survived) = self.memory(op, &rev, remember, body.as_ref());
            crate::silent::withdraw(&mut risks, &survived);
            findings.extend(confirmed);
        }
        // A write's risks that stand are an event of their own, first, as they would have been
        // with its request; what its answer showed comes after.
        let path = || s.path_text(&rev.contract, self.meta.uri.path());
        for (findings, kept) in [(risks, self.kept.take()), (findings, None)] {
            if !findings.is_empty() {
                let (meta, at) = ((self.meta.clone(), path()), (&*self.api, op));
                let (id, revision) = (self.request_id.clone(), &rev);
                record(s, at, revision, id, meta, (self.status, findings), kept);
            }
        }
        s.sinks.metrics.response_checked();
    }

    /// The memory's part: remember a GET, confirm a clear left pending, and mirror both in the
    /// store replicas share. Returns the `silent_clear`s confirmed here, and the at-risk fields
    /// the write's answer showed surviving.
    fn memory(
        &self,
        op: &crate::contract::Operation,
        rev: &Arc<super::Revision>,
        remember: Remember,
        json: Option<&crate::json::Node>,
    ) -> (Vec<Finding>, Vec<String>) {
        let s = &self.s;
        let tracker = Tracker {
            memory: &s.memory,
            field_maps: &s.settings.memory.field_map,
            api: self.api.label.name().unwrap_or_default(),
            tool: (self.meta.tool.as_deref()).and_then(crate::mcp::calls::Attribution::known),
        };
        // The values first, then the snapshot that names their read: a write that finds the
        // snapshot finds its values too (a scripted GET then PUT is that quick).
        let resource = op.remembers || op.answers_resource;
        if let (true, true, Some(body)) = (resource, (200..300).contains(&self.status), json) {
            let read = (self.request_id.as_str(), self.meta.tool.as_deref());
            super::incident::keep_read(s, &remember.key, read, *body);
        }
        let outcome = tracker.after_response(
            op,
            &remember.key,
            self.request_id.as_str(),
            SystemTime::now(),
            self.status,
            json,
            remember.at_risk,
        );
        let mut confirmed = outcome.confirmed;
        if let (Some(list), Some(body)) = (&op.lists, json) {
            confirmed.extend(self.listed(&tracker, rev, list, &remember.key, *body));
        }
        if let Some(write) = &outcome.took {
            self.survived(op, rev, write, &confirmed);
        }
        if let Some(store) = &s.store {
            if let Some(lesson) = outcome.lesson {
                store.learn(lesson);
            }
            let done = (outcome.remembered, outcome.took, outcome.left);
            self.share(store, rev, remember.key, done);
        }
        s.sinks.metrics.memory(s.memory.len(), s.memory.evictions());
        (confirmed, outcome.survived)
    }

    /// A write's pending clear this read took without confirming any field: the fields held,
    /// and its incident says so.
    fn survived(
        &self,
        op: &crate::contract::Operation,
        rev: &super::Revision,
        write: &str,
        confirmed: &[Finding],
    ) {
        let of_write = |f: &Finding| {
            (f.evidence.as_deref()).is_some_and(|e| e.write_request_id.as_deref() == Some(write))
        };
        if confirmed.iter().any(of_write) {
            return;
        }
        let recorded =
            super::incident::Recorded::of(op, self.request_id.as_str(), self.status, &self.meta);
        let at = (&*self.api, &*rev.contract, rev.spec.revision.as_str());
        super::incident::survived(&self.s, at, &recorded, write);
    }

    /// A list answer's items, each remembered as if read alone, and shared with the store
    /// replicas share; the `silent_clear`s they confirm.
    fn listed(
        &self,
        tracker: &Tracker<'_>,
        rev: &Arc<super::Revision>,
        list: &crate::contract::ListOf,
        key: &Key,
        body: crate::json::Node<'_>,
    ) -> Vec<Finding> {
        let Some(item_op) = rev.contract.operation_at(list.item) else {
            return Vec::new();
        };
        let seen = crate::memory::Seen {
            request_id: self.request_id.as_str(),
            tool: tracker.tool,
            at: SystemTime::now(),
            partial: true,
        };
        let listed = tracker.after_list(list, item_op, key, seen, body);
        if listed.skipped > 0 && listed.remembered.len() >= crate::silent::MAX_LIST_ITEMS {
            self.s.sinks.metrics.limit_hit("list_items");
        }
        if let Some(store) = &self.s.store {
            for (key, snapshot) in listed.remembered {
                store.remember(&key, snapshot, None, Box::new(|_, _| {}));
            }
        }
        listed.confirmed
    }

    /// What the response work did to the memory, mirrored in the store replicas share: the
    /// snapshot a GET took (a pending clear another replica left comes back to this GET's
    /// context), the write's pending clear (forgotten here once the store holds it).
    fn share(
        &self,
        store: &super::store::Store,
        rev: &Arc<super::Revision>,
        key: Key,
        (remembered, took, left): (Option<Arc<Snapshot>>, Option<String>, Option<Pending>),
    ) {
        if let Some(snapshot) = remembered {
            let heard = Heard {
                s: self.s.clone(),
                api: self.api.clone(),
                rev: rev.clone(),
                op: self.op,
                request_id: self.request_id.clone(),
                meta: self.meta.clone(),
                status: self.status,
            };
            let then = Box::new(move |pending: Pending, snapshot: &Snapshot| {
                heard.confirm(&pending, snapshot)
            });
            store.remember(&key, snapshot, took, then);
        }
        if let Some(pending) = left {
            let s = self.s.clone();
            let (write, held) = (pending.write_request_id.clone(), key.clone());
            let then = Box::new(move || s.memory.hand_over_pending(&held, &write));
            store.leave(&key, pending, then);
        }
    }

    /// The decoded body, or `None` with the reason it is not read counted.
    fn decoded(&self, copy: Copied) -> Option<Vec<u8>> {
        let limit = self.s.settings.audit.max_response_body;
        let reason = match copy {
            Copied::NotWanted => return None,
            Copied::Whole(bytes) => match decode(as_text(&self.encoding), bytes, limit) {
                Ok(decoded) => return Some(decoded),
                Err(Undecoded::TooLarge) => "response_too_large",
                Err(Undecoded::Undecodable) => "response_undecodable",
            },
            Copied::TooLarge => "response_too_large",
            Copied::UpstreamFailed => "response_upstream_failed",
            Copied::ClientGone => "response_client_gone",
        };
        self.s.sinks.metrics.unaudited(reason);
        None
    }
}

/// A GET's context, for a clear another replica left that this GET confirms.
struct Heard {
    s: Arc<Sidecar>,
    api: Arc<super::Api>,
    rev: Arc<super::Revision>,
    op: usize,
    request_id: RequestId,
    meta: LateMeta,
    status: u16,
}

impl Heard {
    fn confirm(self, pending: &Pending, snapshot: &Snapshot) {
        let Some(op) = self.rev.contract.operation_at(self.op) else {
            return;
        };
        let findings = crate::silent::confirm_from(pending, snapshot, op);
        if findings.is_empty() {
            return;
        }
        let path = self.s.path_text(&self.rev.contract, self.meta.uri.path());
        let meta = (self.meta, path);
        let at = (&*self.api, op);
        let done = (self.status, findings);
        record(&self.s, at, &self.rev, self.request_id, meta, done, None);
    }
}

/// Count the findings, tell a silent clear's incident, and write one event for them.
fn record(
    s: &Sidecar,
    (api, op): (&super::Api, &crate::contract::Operation),
    rev: &super::Revision,
    request_id: RequestId,
    (meta, path): (LateMeta, String),
    (status, findings): (u16, Vec<Finding>),
    kept: Option<super::incident::KeptWrite>,
) {
    let revision = rev.spec.revision.clone();
    let at = (api, &*rev.contract, revision.as_str());
    let recorded = super::incident::Recorded::of(op, request_id.as_str(), status, &meta);
    super::incident::tell(s, at, &recorded, &findings, kept);
    let trace = meta.trace.as_ref().filter(|t| t.sampled);
    let exemplar = crate::sink::exemplar(trace.map(|t| t.trace_id_hex()), request_id.as_str());
    for f in &findings {
        let operation = f.operation.as_deref().unwrap_or(&op.id);
        s.sinks
            .metrics
            .finding(&api.label, operation, f, Some(&exemplar));
    }
    s.sinks.tools.findings(meta.tool.as_deref(), &findings);
    super::late_span::after_response(meta.span.as_ref(), &findings);
    let event = Event {
        api: api.settings.name.clone(),
        at: SystemTime::now(),
        request_id: request_id.as_str().to_owned(),
        traceparent: value_text(meta.traceparent.as_ref()),
        trace: (meta.trace.as_ref()).map_or_else(Default::default, crate::sink::TraceIds::of),
        tool: crate::sink::ToolFields::of(meta.tool.as_deref()),
        operation: Some(op.id.clone()),
        method: op.method.clone(),
        path_template: Some(op.template.clone()),
        path,
        status: Some(status),
        action: "observed",
        error: None,
        mode: api.settings.policy.mode.as_str(),
        spec_revision: revision,
        findings: findings
            .into_iter()
            .map(|finding| EventFinding {
                finding,
                action: "log",
            })
            .collect(),
        findings_left_out: 0,
        catalog_defects: Vec::new(),
        repair: None,
        read_before_write: None,
        values: None,
    };
    s.publish(event);
}

fn as_text(value: &Option<http::HeaderValue>) -> Option<&str> {
    value.as_ref().and_then(|v| v.to_str().ok())
}

/// The one response header the audit reads, without building a header list.
struct ContentType<'a>(Option<&'a str>);

impl crate::request::Headers for ContentType<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.filter(|_| name == "content-type")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The share of audits kept, over every draw, at the queue's `depth`.
    fn kept(depth: usize) -> f64 {
        let draws = SAMPLE_FROM..QUEUE;
        let n = draws.len();
        draws.filter(|&d| admitted(depth, d)).count() as f64 / n as f64
    }

    #[test]
    fn audits_are_kept_while_the_workers_keep_up_then_drawn_less_often_the_longer_the_queue() {
        assert_eq!(kept(0), 1.0);
        assert_eq!(kept(SAMPLE_FROM), 1.0);
        let half = (SAMPLE_FROM + QUEUE) / 2;
        assert!((kept(half) - 0.5).abs() < 0.01, "{}", kept(half));
        assert!(kept(half) > kept(half + 100), "fewer as the queue grows");
        assert_eq!(kept(QUEUE), 0.0, "none once it is full");
    }

    #[test]
    fn the_queue_is_as_deep_as_the_fuller_of_its_two_bounds() {
        const MIB: usize = 1 << 20;
        // 10 small copies: as deep as their count.
        assert_eq!(depth(10, 10 * 1024), 10);
        // 10 copies of 1 MiB with one more: 11/64 of the byte budget, deeper than 10 copies.
        assert_eq!(depth(10, 11 * MIB), 11 * QUEUE / 64);
        // At the byte budget the queue is full, however few copies it holds.
        assert_eq!(depth(3, QUEUE_BYTES), QUEUE);
        assert!(depth(3, QUEUE_BYTES + 1) >= QUEUE);
        // An empty queue takes one copy of any size.
        assert_eq!(depth(0, 10 * QUEUE_BYTES), 0);
    }
}
