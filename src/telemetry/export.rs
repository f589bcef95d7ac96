//! Spans leave off the request path: a span that ends is put in a bounded queue without waiting
//! (full, in spans or in bytes: it is dropped and counted), and a thread of its own sends them
//! in batches, each export within its timeout (failed or late: the batch is dropped and
//! counted). The bytes are bounded because a span's are not all alike: 300 spans of 3 MB,
//! queued for a collector that did not answer, were 1.9 GB (issue 64). A collector that is
//! down or slow costs a request nothing, and encoding a batch never holds a serving thread.
//! The queue is woken once a batch is full, or by the interval, not once per span: a wake per
//! span cost a fifth of the audited throughput. Written here rather than taken from the SDK's
//! `BatchSpanProcessor`, which ran its exporter under a blocking executor, where hyper's client
//! has no reactor, and did not say what it dropped (and the spans are driftwatch's own now,
//! `span`). Each batch is encoded here (`encode`), gzipped if `telemetry.compression` says so,
//! and POSTed once; a collector that refuses it or does not answer loses it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Request, Uri};

use super::client::Hyper;
use super::encode::{self, Header};
use super::settings::Compression;

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
    pub compression: Compression,
}

impl Exporter {
    async fn export(&self, spans: &[Vec<u8>]) -> Result<(), String> {
        let body = encode::request(&self.header, spans);
        let mut request =
            Request::post(&self.endpoint).header(CONTENT_TYPE, "application/x-protobuf");
        let body = match self.compression {
            Compression::None => Bytes::from(body),
            Compression::Gzip => {
                request = request.header(CONTENT_ENCODING, "gzip");
                Bytes::from(gzip(&body).map_err(|e| e.to_string())?)
            }
        };
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

/// `body` gzipped, at the default level: a batch is encoded off the request path, and spans
/// (names, ids, attribute keys that repeat) shrink several times.
fn gzip(body: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::default(),
    );
    gz.write_all(body)?;
    gz.finish()
}

/// The bytes of one batch at most (but a span larger alone goes alone): a collector refuses
/// bigger requests (gRPC's default limit is 4 MiB, and a collector behind one forwards them).
pub const BATCH_BYTES: usize = 4 << 20;

/// How the batches are made and sent.
pub struct Batches {
    /// Spans waiting at most.
    pub queue: usize,
    /// Their bytes at most (`Export::queue_bytes`), as much as their buffers hold.
    pub queue_bytes: usize,
    pub size: usize,
    pub interval: Duration,
    pub timeout: Duration,
}

#[derive(Debug)]
struct Shared {
    queued: Mutex<Queued>,
    /// A batch is full.
    full: Notify,
    queue: usize,
    queue_bytes: usize,
    size: usize,
    dropped: Counter,
}

/// The spans waiting, and the bytes their buffers hold.
#[derive(Debug, Default)]
struct Queued {
    spans: Vec<Vec<u8>>,
    bytes: usize,
}

impl Shared {
    /// At most one batch off the front of the queue (`size` spans, `BATCH_BYTES`), and whether
    /// more wait behind it.
    fn take(&self) -> (Vec<Vec<u8>>, bool) {
        let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        let (mut n, mut bytes) = (0, 0);
        for span in queued.spans.iter().take(self.size) {
            if n > 0 && bytes + span.len() > BATCH_BYTES {
                break;
            }
            (n, bytes) = (n + 1, bytes + span.len());
        }
        let batch = match n == queued.spans.len() {
            true => std::mem::take(&mut queued.spans),
            false => {
                let rest = queued.spans.split_off(n);
                std::mem::replace(&mut queued.spans, rest)
            }
        };
        queued.bytes -= batch.iter().map(Vec::capacity).sum::<usize>();
        (batch, !queued.spans.is_empty())
    }
}

/// Where each sampled span goes when it ends.
#[derive(Clone, Debug)]
pub struct Queue(Arc<Shared>);

impl Queue {
    /// A queue of `batches.queue` spans and `batches.queue_bytes` at most, what it drops
    /// counted in `dropped`.
    pub fn new(batches: &Batches, dropped: Counter) -> Queue {
        Queue(Arc::new(Shared {
            queued: Mutex::default(),
            full: Notify::new(),
            queue: batches.queue,
            queue_bytes: batches.queue_bytes,
            size: batches.size,
            dropped,
        }))
    }

    /// Queue `span` for export, or drop and count it when the queue is full, in spans or in
    /// bytes.
    pub fn push(&self, span: Vec<u8>) {
        let shared = &self.0;
        let mut queued = shared.queued.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = queued.bytes + span.capacity();
        if queued.spans.len() >= shared.queue || bytes > shared.queue_bytes {
            drop(queued);
            shared.dropped.inc();
            return;
        }
        let filled = queued.spans.len() + 1 == shared.size
            || (queued.bytes < BATCH_BYTES && bytes >= BATCH_BYTES);
        queued.spans.push(span);
        queued.bytes = bytes;
        if filled {
            drop(queued);
            shared.full.notify_one();
        }
    }

    /// Everything queued, taken off the queue.
    pub fn take_all(&self) -> Vec<Vec<u8>> {
        let mut queued = self.0.queued.lock().unwrap_or_else(|e| e.into_inner());
        queued.bytes = 0;
        std::mem::take(&mut queued.spans)
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
    let queue = Queue::new(&batches, counts.dropped.clone());
    let shared = queue.0.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (done, finished) = oneshot::channel();
    std::thread::Builder::new()
        .name("driftwatch-traces".into())
        .spawn(move || {
            runtime.block_on(run(exporter, &shared, &batches, &counts, stop));
            let _ = done.send(());
        })?;
    Ok((queue, finished))
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
        // Batches while more wait behind them, the last (part or whole) too; stopping, until
        // none is left.
        loop {
            let (batch, more) = shared.take();
            if batch.is_empty() {
                break;
            }
            failing = send(&exporter, batch, batches, counts, failing).await;
            if !more && !stopping {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(spans: usize, bytes: usize, size: usize) -> (Queue, Counter) {
        let dropped = Counter::default();
        let batches = Batches {
            queue: spans,
            queue_bytes: bytes,
            size,
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
        };
        (Queue::new(&batches, dropped.clone()), dropped)
    }

    /// A span of `n` bytes, its buffer no larger.
    fn span(n: usize) -> Vec<u8> {
        let mut s = vec![7; n];
        s.shrink_to_fit();
        s
    }

    /// Full in bytes before it is full in spans, the queue drops what comes and counts it;
    /// taking a batch makes room again.
    #[test]
    fn the_queue_is_bounded_in_bytes_as_well_as_spans_and_counts_what_it_drops() {
        let (q, dropped) = queue(2048, 1 << 20, 512);
        for _ in 0..10 {
            q.push(span(200 << 10));
        }
        assert_eq!(dropped.get(), 5, "five of 200 KB fill 1 MiB");
        assert_eq!(q.0.take().0.len(), 5);
        q.push(span(200 << 10));
        assert_eq!(dropped.get(), 5, "room again");
        let (q, dropped) = queue(3, 1 << 20, 512);
        for _ in 0..5 {
            q.push(span(10));
        }
        assert_eq!(dropped.get(), 2, "and in spans");
    }

    /// A batch is `size` spans or `BATCH_BYTES` at most, whichever comes first, and says
    /// whether more wait; a span larger than a batch goes alone.
    #[test]
    fn a_batch_is_bounded_in_bytes_and_a_span_larger_goes_alone() {
        let (q, _) = queue(2048, 64 << 20, 3);
        for n in [
            BATCH_BYTES / 2,
            BATCH_BYTES / 2,
            1,
            BATCH_BYTES + 1,
            10,
            10,
            10,
            10,
        ] {
            q.push(span(n));
        }
        let mut batches = Vec::new();
        loop {
            let (batch, more) = q.0.take();
            batches.push((batch.iter().map(Vec::len).collect::<Vec<_>>(), more));
            if !more {
                break;
            }
        }
        let half = BATCH_BYTES / 2;
        assert_eq!(
            batches,
            [
                (vec![half, half], true),
                (vec![1], true),
                (vec![BATCH_BYTES + 1], true),
                (vec![10, 10, 10], true),
                (vec![10], false),
            ]
        );
        assert_eq!(q.0.queued.lock().unwrap().bytes, 0);
    }
}
