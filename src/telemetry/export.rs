//! Spans leave off the request path: a span that ends is handed to a bounded queue without
//! waiting (full: it is dropped and counted), and one task sends them in batches, each export
//! within its timeout (failed or late: the batch is dropped and counted). A collector that is
//! down or slow costs a request nothing. Written here rather than taken from the SDK's
//! `BatchSpanProcessor`: that one runs its exporter on a thread of its own with a blocking
//! executor, where hyper's client has no reactor, and it does not say what it dropped.

use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};

use prometheus_client::metrics::counter::Counter;

/// The counters of `driftwatch_trace_spans_total`, by outcome.
#[derive(Clone, Debug, Default)]
pub struct SpanCounts {
    pub exported: Counter,
    pub dropped: Counter,
    pub failed: Counter,
}

/// The processor the tracer hands each ended span to.
#[derive(Debug)]
pub struct Queue {
    spans: mpsc::Sender<SpanData>,
    dropped: Counter,
}

impl SpanProcessor for Queue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if span.span_context.is_sampled() && self.spans.try_send(span).is_err() {
            self.dropped.inc();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// How the batches are made and sent.
pub struct Batches {
    pub size: usize,
    pub interval: Duration,
    pub timeout: Duration,
}

/// The queue, and the task that empties it into `exporter` until `stop` turns true; then it
/// sends what is left, once.
pub fn start<E: SpanExporter + 'static>(
    exporter: E,
    queue_size: usize,
    batches: Batches,
    counts: SpanCounts,
    stop: watch::Receiver<bool>,
) -> (Queue, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(queue_size);
    let queue = Queue {
        spans: tx,
        dropped: counts.dropped.clone(),
    };
    let task = tokio::spawn(run(exporter, rx, batches, counts, stop));
    (queue, task)
}

async fn run<E: SpanExporter>(
    exporter: E,
    mut rx: mpsc::Receiver<SpanData>,
    batches: Batches,
    counts: SpanCounts,
    mut stop: watch::Receiver<bool>,
) {
    let mut batch = Vec::with_capacity(batches.size);
    while !*stop.borrow() {
        tokio::select! {
            n = rx.recv_many(&mut batch, batches.size) => if n == 0 { break },
            _ = stop.changed() => break,
        }
        let due = Instant::now() + batches.interval;
        while batch.len() < batches.size {
            let room = batches.size - batch.len();
            tokio::select! {
                n = rx.recv_many(&mut batch, room) => if n == 0 { break },
                _ = sleep_until(due) => break,
                _ = stop.changed() => break,
            }
        }
        send(&exporter, &mut batch, &batches, &counts).await;
    }
    // Stopping: what is queued goes out once, in batches.
    while !batch.is_empty() || !rx.is_empty() {
        while batch.len() < batches.size {
            let Ok(span) = rx.try_recv() else { break };
            batch.push(span);
        }
        send(&exporter, &mut batch, &batches, &counts).await;
    }
}

async fn send<E: SpanExporter>(
    exporter: &E,
    batch: &mut Vec<SpanData>,
    batches: &Batches,
    counts: &SpanCounts,
) {
    if batch.is_empty() {
        return;
    }
    let spans = std::mem::take(batch);
    let n = spans.len() as u64;
    match tokio::time::timeout(batches.timeout, exporter.export(spans)).await {
        Ok(Ok(())) => {
            counts.exported.inc_by(n);
        }
        Ok(Err(e)) => {
            counts.failed.inc_by(n);
            tracing::debug!(spans = n, "trace export failed: {e}");
        }
        Err(_) => {
            counts.failed.inc_by(n);
            tracing::debug!(
                spans = n,
                "trace export took longer than {:?}",
                batches.timeout
            );
        }
    }
}
