//! OpenTelemetry traces out of both hops (issue 53): a span per request through the proxy and,
//! under `wrap`, a span per `tools/call` that each API request it caused is a child of. The
//! MCP server in between need do nothing: driftwatch sees the call and the request, and joins
//! them. Off unless `[telemetry]` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) names a collector; then
//! spans go out over OTLP/HTTP (protobuf) in batches off the request path (`export`), and the
//! request driftwatch forwards carries its span as `traceparent` (`telemetry.propagation`).
//!
//! Spans carry no values: a finding's kind, severity, blame and field, never what was sent.

mod client;
pub mod context;
mod encode;
mod export;
mod settings;

use std::sync::Mutex;
use std::time::Duration;

use opentelemetry::trace::TracerProvider;
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{Sampler as SdkSampler, SdkTracer, SdkTracerProvider};
use tokio::sync::watch;

pub use opentelemetry::trace::{Link, SpanBuilder, SpanContext, SpanKind, Status};
pub use opentelemetry_sdk::trace::Span;

pub use export::SpanCounts;
pub use settings::{Export, Propagation, Root, Sampler};

/// The tracer and the export task behind it.
pub struct Telemetry {
    tracer: SdkTracer,
    /// Kept so the tracer's provider lives as long as driftwatch does.
    _provider: SdkTracerProvider,
    pub propagation: Propagation,
    stop: watch::Sender<bool>,
    /// Told when the export thread has sent what was left.
    finished: Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
}

/// Why export could not start: a fault in driftwatch's build, not in the config (which
/// `settings` checked).
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("the OTLP exporter's TLS could not be set up: {0}")]
    Tls(#[from] rustls::Error),
    #[error("the export thread could not start: {0}")]
    Thread(#[from] std::io::Error),
}

impl Telemetry {
    /// Start exporting to `export.endpoint`, from a thread of its own.
    pub fn start(export: &Export, counts: SpanCounts) -> Result<Telemetry, TelemetryError> {
        const VERSION: &str = env!("CARGO_PKG_VERSION");
        let exporter = export::Exporter {
            client: client::Hyper::new(export.timeout)?,
            endpoint: export.endpoint.clone(),
            headers: export.headers.clone(),
            header: encode::Header::new(&resource(export), ("driftwatch", VERSION)),
        };
        let (stop, stopped) = watch::channel(false);
        let batches = export::Batches {
            queue: export.queue_size,
            size: export.batch_size,
            interval: export.interval,
            timeout: export.timeout,
        };
        let (queue, finished) = export::start(exporter, batches, counts, stopped)?;
        let provider = SdkTracerProvider::builder()
            .with_span_processor(queue)
            .with_sampler(sampler(export.sampler))
            .build();
        let scope = InstrumentationScope::builder("driftwatch")
            .with_version(VERSION)
            .build();
        Ok(Telemetry {
            tracer: provider.tracer_with_scope(scope),
            _provider: provider,
            propagation: export.propagation,
            stop,
            finished: Mutex::new(Some(finished)),
        })
    }

    /// Start a span as `builder` says, under `parent` (a root without one).
    pub fn span(&self, builder: SpanBuilder, parent: Option<&Context>) -> Span {
        let root = Context::new();
        builder.start_with_context(&self.tracer, parent.unwrap_or(&root))
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

/// The resource's attributes: `resource_attributes`, then `service.name` and `service.version`,
/// which win over the same keys there.
fn resource(export: &Export) -> Vec<KeyValue> {
    let own = ["service.name", "service.version"];
    let given = (export.resource.iter())
        .filter(|(k, _)| !own.contains(&k.as_str()))
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()));
    given
        .chain([
            KeyValue::new("service.name", export.service_name.clone()),
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        ])
        .collect()
}

fn sampler(sampler: Sampler) -> SdkSampler {
    let root = |root| match root {
        Root::AlwaysOn => SdkSampler::AlwaysOn,
        Root::AlwaysOff => SdkSampler::AlwaysOff,
        Root::Ratio(r) => SdkSampler::TraceIdRatioBased(r),
    };
    match sampler {
        Sampler::AlwaysOn => SdkSampler::AlwaysOn,
        Sampler::AlwaysOff => SdkSampler::AlwaysOff,
        Sampler::Ratio(r) => SdkSampler::TraceIdRatioBased(r),
        Sampler::ParentBased(r) => SdkSampler::ParentBased(Box::new(root(r))),
    }
}
