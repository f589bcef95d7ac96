//! Spans leave off the request path: a span that ends is put in a bounded queue without waiting
//! (full: it is dropped and counted), and a thread of its own sends them in batches, each export
//! within its timeout (failed or late: the batch is dropped and counted). A collector that is
//! down or slow costs a request nothing, and encoding a batch never holds a serving thread.
//! The queue is woken once a batch is full, or by the interval, not once per span: a wake per
//! span cost a fifth of the audited throughput. Written here rather than taken from the SDK's
//! `BatchSpanProcessor`, which ran its exporter under a blocking executor, where hyper's client
//! has no reactor, and did not say what it dropped (and the spans are driftwatch's own now,
//! `span`). Each batch is encoded here (`encode`) and POSTed once; a collector that refuses it
//! or does not answer loses it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderName, HeaderValue, Request, Uri};

use super::client::Hyper;
use super::encode::{self, Header};

use prometheus_client::metrics::counter::Counter;
use tokio::sync::{Notify, oneshot, watch};

/// The counters of `driftwatch_trace_spans_total`, by outcome.
#[derive(Clone, Debug, Default)]
pub struct SpanCounts {
    pub exported: Counter,
    pub dropped: Counter,
    pub failed: Counter,
}

/// Where and how a batch goes: OTLP/HTTP, protobuf.
pub struct Exporter {
    pub client: Hyper,
    pub endpoint: Uri,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub header: Header,
}

impl Exporter {
    async fn export(&self, spans: &[Vec<u8>]) -> Result<(), String> {
        let body = Bytes::from(encode::request(&self.header, spans));
        let mut request =
            Request::post(&self.endpoint).header(CONTENT_TYPE, "application/x-protobuf");
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let request = request.body(body).map_err(|e| e.to_string())?;
        let answer = self.client.send(request).await.map_err(|e| e.to_string())?;
        match answer.status() {
            s if s.is_success() => Ok(()),
            s => Err(format!("the collector answered {s}")),
        }
    }
}

/// How the batches are made and sent.
pub struct Batches {
    pub queue: usize,
    pub size: usize,
    pub interval: Duration,
    pub timeout: Duration,
}

#[derive(Debug)]
struct Shared {
    spans: Mutex<Vec<Vec<u8>>>,
    /// A batch is full.
    full: Notify,
    queue: usize,
    size: usize,
    dropped: Counter,
}

impl Shared {
    /// At most one batch off the front of the queue.
    fn take(&self) -> Vec<Vec<u8>> {
        let mut spans = self.spans.lock().unwrap_or_else(|e| e.into_inner());
        if spans.is_empty() {
            return Vec::new();
        }
        if spans.len() <= self.size {
            return std::mem::replace(&mut *spans, Vec::with_capacity(self.size));
        }
        let rest = spans.split_off(self.size);
        std::mem::replace(&mut *spans, rest)
    }
}

/// Where each sampled span goes when it ends.
#[derive(Clone, Debug)]
pub struct Queue(Arc<Shared>);

impl Queue {
    /// Queue `span` for export, or drop and count it when the queue is full.
    pub fn push(&self, span: Vec<u8>) {
        let mut spans = self.0.spans.lock().unwrap_or_else(|e| e.into_inner());
        if spans.len() >= self.0.queue {
            drop(spans);
            self.0.dropped.inc();
            return;
        }
        spans.push(span);
        if spans.len() == self.0.size {
            drop(spans);
            self.0.full.notify_one();
        }
    }

    /// What is queued now, taken off the queue.
    #[cfg(test)]
    pub fn take(&self) -> Vec<Vec<u8>> {
        self.0.take()
    }
}

/// The queue, and the thread (`driftwatch-traces`, a runtime of its own) that empties it into
/// `exporter` until `stop` turns true; then it sends what is left, once, and says so on the
/// receiver.
pub fn start(
    exporter: Exporter,
    batches: Batches,
    counts: SpanCounts,
    stop: watch::Receiver<bool>,
) -> std::io::Result<(Queue, oneshot::Receiver<()>)> {
    let shared = Arc::new(Shared {
        spans: Mutex::new(Vec::new()),
        full: Notify::new(),
        queue: batches.queue,
        size: batches.size,
        dropped: counts.dropped.clone(),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (done, finished) = oneshot::channel();
    let queue = shared.clone();
    std::thread::Builder::new()
        .name("driftwatch-traces".into())
        .spawn(move || {
            runtime.block_on(run(exporter, &shared, &batches, &counts, stop));
            let _ = done.send(());
        })?;
    Ok((Queue(queue), finished))
}

async fn run(
    exporter: Exporter,
    shared: &Shared,
    batches: &Batches,
    counts: &SpanCounts,
    mut stop: watch::Receiver<bool>,
) {
    let mut failing = false;
    loop {
        let stopping = *stop.borrow();
        if !stopping {
            tokio::select! {
                _ = tokio::time::sleep(batches.interval) => {}
                _ = shared.full.notified() => {}
                _ = stop.changed() => {}
            }
        }
        // Whole batches while there are; a part batch waits for the next turn, unless stopping.
        loop {
            let batch = shared.take();
            let whole = batch.len() == batches.size;
            if batch.is_empty() {
                break;
            }
            failing = send(&exporter, batch, batches, counts, failing).await;
            if !whole && !stopping {
                break;
            }
        }
        if stopping {
            return;
        }
    }
}

/// Export one batch; whether it failed. The log says when export starts failing and when it
/// works again, once each (the counters say how much was lost).
async fn send(
    exporter: &Exporter,
    spans: Vec<Vec<u8>>,
    batches: &Batches,
    counts: &SpanCounts,
    failing: bool,
) -> bool {
    let n = spans.len() as u64;
    let why = match tokio::time::timeout(batches.timeout, exporter.export(&spans)).await {
        Ok(Ok(())) => {
            counts.exported.inc_by(n);
            if failing {
                tracing::info!("trace export works again");
            }
            return false;
        }
        Ok(Err(e)) => e,
        Err(_) => format!("no answer within {:?}", batches.timeout),
    };
    counts.failed.inc_by(n);
    if !failing {
        tracing::warn!(
            "trace export failing, spans dropped (driftwatch_trace_spans_total{{outcome=\"failed\"}}): {why}"
        );
    }
    true
}
