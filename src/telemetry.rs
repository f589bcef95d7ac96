//! OpenTelemetry traces out of both hops (issue 53): a span per request through the proxy and,
//! under `wrap`, a span per `tools/call` that each API request it caused is a child of. The
//! MCP server in between need do nothing: driftwatch sees the call and the request, and joins
//! them. Off unless `[telemetry]` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) names a collector; then
//! spans go out over OTLP/HTTP (protobuf) in batches off the request path (`export`), and the
//! request driftwatch forwards carries its span as `traceparent` (`telemetry.propagation`).
//!
//! Spans carry no values: a finding's kind, severity, blame and field, never what was sent.
//!
//! No OpenTelemetry crate is linked: the spans (`record`, `span`), the samplers, trace context
//! (`context`) and OTLP's protobuf (`encode`) are written here, each small and fixed by a
//! specification, because recording with the SDK and exporting with `opentelemetry-otlp` cost
//! about 7 µs of CPU a request (3.3 recording, 3.9 encoding and sending), a sixth of an
//! audited one (docs/benchmarks.md). The tests hold each against the official crates (the SDK's propagator and ratio sampler, the OTLP
//! messages and their conversion of the SDK's spans).

mod client;
pub mod context;
mod encode;
mod export;
mod record;
mod settings;
mod span;

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

pub use client::tls;
pub use export::SpanCounts;
pub use record::{Attribute, SpanContext, SpanKind, Value, attr};
pub use settings::{Compression, Export, Propagation, Root, Sampler};
pub use span::{Attributes, MAX_TEXT, Span, Start, TRUNCATED};

use export::Queue;
use span::{MAX_LINKS, Recording};

/// The sampler and the export thread behind it.
pub struct Telemetry {
    sampler: Sampler,
    queue: Queue,
    pub propagation: Propagation,
    stop: watch::Sender<bool>,
    /// Told when the export thread has sent what was left.
    finished: Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
}

/// Why export could not start: a fault of the system, not in the config (which `settings`
/// checked, the collector's TLS files read).
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("the export thread could not start: {0}")]
    Thread(#[from] std::io::Error),
}

impl Telemetry {
    /// Start exporting to `export.endpoint`, from a thread of its own.
    pub fn start(export: &Export, counts: SpanCounts) -> Result<Telemetry, TelemetryError> {
        let exporter = export::Exporter {
            client: client::Hyper::new(export.timeout, &export.tls),
            endpoint: export.endpoint.clone(),
            headers: export.headers.clone(),
            compression: export.compression,
            header: encode::Header::new(
                &resource(export),
                ("driftwatch", env!("CARGO_PKG_VERSION")),
            ),
        };
        let (stop, stopped) = watch::channel(false);
        let batches = export::Batches {
            queue: export.queue_size,
            queue_bytes: export.queue_bytes(),
            size: export.batch_size,
            interval: export.interval,
            timeout: export.timeout,
        };
        let (queue, finished) = export::start(exporter, batches, counts, stopped)?;
        Ok(Telemetry {
            sampler: export.sampler,
            queue,
            propagation: export.propagation,
            stop,
            finished: Mutex::new(Some(finished)),
        })
    }

    /// Start a span as `start` says, under `parent` (a root without one). Its trace is the
    /// parent's; whether it is sampled, the sampler's say.
    pub fn span(&self, start: Start<'_>, parent: Option<&SpanContext>) -> Span {
        let trace_id = match parent {
            Some(p) => p.trace_id,
            None => nonzero(|| fastrand::u128(..).to_be_bytes()),
        };
        let context = SpanContext {
            trace_id,
            span_id: nonzero(|| fastrand::u64(..).to_be_bytes()),
            sampled: sampled(self.sampler, parent, &trace_id),
            remote: false,
            trace_state: parent.and_then(|p| p.trace_state.clone()),
        };
        if !context.sampled {
            return Span::new(context, None);
        }
        let mut message = Vec::with_capacity(MESSAGE_CAPACITY);
        let time = start.time.unwrap_or_else(SystemTime::now);
        let (name, truncated) = span::bounded_name(start.name);
        let kept = start.links.len().min(MAX_LINKS);
        let dropped = u32::try_from(start.links.len() - kept).unwrap_or(u32::MAX);
        let links = (&start.links[..kept], dropped);
        encode::start(
            &mut message,
            &context,
            parent,
            (name, start.kind, time),
            links,
        );
        let recording = Recording {
            message,
            events: 0,
            dropped_events: 0,
            error: None,
            truncated,
            queue: self.queue.clone(),
        };
        Span::new(context, Some(Box::new(recording)))
    }

    /// Spans kept in a queue that no thread empties, for tests and the fuzz target
    /// (`otlp_encode`): `drain` gives what an export would POST of them, to decode with the
    /// official messages.
    #[doc(hidden)]
    pub fn detached(sampler: Sampler) -> Telemetry {
        let unbounded = export::Batches {
            queue: usize::MAX,
            queue_bytes: usize::MAX,
            size: usize::MAX,
            interval: Duration::MAX,
            timeout: Duration::MAX,
        };
        Telemetry {
            sampler,
            queue: Queue::new(&unbounded, Default::default()),
            propagation: Propagation::Never,
            stop: watch::channel(false).0,
            finished: Mutex::new(None),
        }
    }

    /// The spans ended so far, taken off the queue, as the `ExportTraceServiceRequest` an
    /// export would send with `resource`.
    #[doc(hidden)]
    pub fn drain(&self, resource: &[(String, String)]) -> Vec<u8> {
        let header = encode::Header::new(resource, ("driftwatch", env!("CARGO_PKG_VERSION")));
        encode::request(&header, &self.queue.take_all())
    }

    /// Send what is queued, within `within`; spans ended later are not sent.
    pub async fn finish(&self, within: Duration) {
        let _ = self.stop.send(true);
        let finished = self
            .finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(finished) = finished {
            let _ = tokio::time::timeout(within, finished).await;
        }
    }
}

/// Room for a request span's message (about 450 bytes with its attributes, more with
/// findings), so that it is written without a reallocation.
const MESSAGE_CAPACITY: usize = 1024;

/// Random ids, never all zero (which W3C reads as none).
fn nonzero<const N: usize>(random: impl Fn() -> [u8; N]) -> [u8; N] {
    loop {
        let id = random();
        if id != [0; N] {
            return id;
        }
    }
}

/// The sampler's decision, as the SDK's samplers of the same names make it: a ratio keeps a
/// trace when the low 63 bits of its id fall under it, so every service with the same ratio
/// keeps the same traces; parent-based follows the parent's flag, and the root rule without one.
fn sampled(sampler: Sampler, parent: Option<&SpanContext>, trace_id: &[u8; 16]) -> bool {
    let ratio = |r: f64| {
        if r >= 1.0 {
            return true;
        }
        let bound = (r.max(0.0) * (1u64 << 63) as f64) as u64;
        let low = u64::from_be_bytes(trace_id[8..].try_into().unwrap_or_default());
        (low >> 1) < bound
    };
    match sampler {
        Sampler::AlwaysOn => true,
        Sampler::AlwaysOff => false,
        Sampler::Ratio(r) => ratio(r),
        Sampler::ParentBased(root) => match (parent, root) {
            (Some(p), _) => p.sampled,
            (None, Root::AlwaysOn) => true,
            (None, Root::AlwaysOff) => false,
            (None, Root::Ratio(r)) => ratio(r),
        },
    }
}

/// The resource's attributes: `resource_attributes`, then `service.name` and `service.version`,
/// which win over the same keys there.
fn resource(export: &Export) -> Vec<(String, String)> {
    let own = ["service.name", "service.version"];
    let given = (export.resource.iter()).filter(|(k, _)| !own.contains(&k.as_str()));
    given
        .cloned()
        .chain([
            ("service.name".to_owned(), export.service_name.clone()),
            (
                "service.version".to_owned(),
                env!("CARGO_PKG_VERSION").to_owned(),
            ),
        ])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(sampled: bool) -> SpanContext {
        SpanContext {
            trace_id: [7; 16],
            span_id: [8; 8],
            sampled,
            remote: true,
            trace_state: Some("k=v".into()),
        }
    }

    /// Trace ids whose low 63 bits are `n`.
    fn trace(n: u64) -> [u8; 16] {
        let mut id = [1; 16];
        id[8..].copy_from_slice(&(n << 1).to_be_bytes());
        id
    }

    #[test]
    fn the_samplers_decide_as_their_names_say() {
        let on = Some(&parent(true));
        let off = Some(&parent(false));
        let half = 1u64 << 62;
        assert!(sampled(Sampler::AlwaysOn, off, &trace(0)));
        assert!(!sampled(Sampler::AlwaysOff, on, &trace(0)));
        assert!(sampled(Sampler::Ratio(0.5), None, &trace(half - 1)));
        assert!(!sampled(Sampler::Ratio(0.5), None, &trace(half)));
        assert!(!sampled(Sampler::Ratio(0.0), None, &trace(0)));
        assert!(sampled(Sampler::Ratio(1.0), None, &trace(u64::MAX >> 1)));
        let parent_based = Sampler::ParentBased(Root::AlwaysOff);
        assert!(sampled(parent_based, on, &trace(0)));
        assert!(!sampled(parent_based, off, &trace(0)));
        assert!(!sampled(parent_based, None, &trace(0)));
        let ratio = Sampler::ParentBased(Root::Ratio(0.5));
        assert!(sampled(ratio, None, &trace(half - 1)) && !sampled(ratio, None, &trace(half)));
    }

    /// A ratio keeps the traces the SDK's sampler of the same ratio keeps, so that driftwatch
    /// and the services beside it keep the same traces.
    #[test]
    fn a_ratio_keeps_what_the_sdks_sampler_keeps() {
        use opentelemetry::trace::{SpanKind, TraceId};
        use opentelemetry_sdk::trace::{Sampler as Sdk, SamplingDecision, ShouldSample};
        for ratio in [0.0, 0.1, 0.5, 0.9] {
            for _ in 0..2000 {
                let id = fastrand::u128(..).to_be_bytes();
                let theirs = Sdk::TraceIdRatioBased(ratio).should_sample(
                    None,
                    TraceId::from_bytes(id),
                    "",
                    &SpanKind::Client,
                    &[],
                    &[],
                );
                let keep = theirs.decision == SamplingDecision::RecordAndSample;
                assert_eq!(sampled(Sampler::Ratio(ratio), None, &id), keep);
            }
        }
    }

    #[tokio::test]
    async fn a_span_joins_its_parents_trace_and_records_only_when_sampled() {
        let export = Export {
            endpoint: "http://127.0.0.1:9/v1/traces".parse().unwrap(),
            headers: Vec::new(),
            service_name: "t".into(),
            resource: Vec::new(),
            sampler: Sampler::ParentBased(Root::AlwaysOn),
            propagation: Propagation::WhenAbsent,
            compression: Compression::None,
            tls: tls(None, None).unwrap(),
            ca_file: None,
            queue_size: 8,
            batch_size: 8,
            interval: Duration::from_secs(60),
            timeout: Duration::from_millis(100),
        };
        let t = Telemetry::start(&export, SpanCounts::default()).unwrap();
        let start = || Start {
            name: ("GET", "/x"),
            kind: SpanKind::Client,
            time: None,
            links: Vec::new(),
        };
        let mut child = t.span(start(), Some(&parent(true)));
        child.set("k", 1_i64);
        let cx = child.context().clone();
        assert_eq!(cx.trace_id, [7; 16]);
        assert_ne!(cx.span_id, [8; 8]);
        assert_eq!(cx.trace_state.as_deref(), Some("k=v"));
        assert!(cx.sampled && !cx.remote);
        child.end();
        let dropped = t.span(start(), Some(&parent(false)));
        assert!(!dropped.context().sampled);
        dropped.end();
        let root = t.span(start(), None);
        assert_ne!(root.context().trace_id, [7; 16]);
        root.end();
        use opentelemetry_proto::tonic::trace::v1::Span as Wire;
        use prost::Message;
        let queued: Vec<Wire> = (t.queue.take_all().iter())
            .map(|s| Wire::decode(s.as_slice()).unwrap())
            .collect();
        assert_eq!(queued.len(), 2, "the sampled child and the root");
        assert_eq!(queued[0].parent_span_id, [8; 8]);
        assert_eq!(queued[0].flags, 0x301, "sampled, its parent remote");
        assert_eq!(queued[0].attributes.len(), 1);
        assert_eq!(queued[0].attributes[0].key, "k");
        assert!(queued[0].end_time_unix_nano >= queued[0].start_time_unix_nano);
        assert!(queued[1].parent_span_id.is_empty());
    }
}
