//! What export is told to do, typed (`settings` checks `[telemetry]` into it). Header values
//! are credentials: `Debug` shows their names only, and `Display` (the start log, `serve
//! --check`) says where and how spans go without them.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Uri};

#[derive(Clone)]
pub struct Export {
    /// Where spans are POSTed (`…/v1/traces`).
    pub endpoint: Uri,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub service_name: String,
    pub resource: Vec<(String, String)>,
    pub sampler: Sampler,
    pub propagation: Propagation,
    pub compression: Compression,
    /// The collector's TLS, its roots and client certificate read and checked at start.
    pub tls: Arc<rustls::ClientConfig>,
    /// The CA file trusted for the collector besides webpki's roots, to say so.
    pub ca_file: Option<PathBuf>,
    pub queue_size: usize,
    pub batch_size: usize,
    pub interval: Duration,
    pub timeout: Duration,
}

/// A span's share of the queue's bytes: a request span is about 450 bytes, one with a dozen
/// findings about 3 KB; the byte bound binds when peers make spans larger than that.
const SPAN_BYTES: usize = 8 << 10;

/// The queue's bytes at least, whatever `queue_size`: room for a span at its largest (128
/// events and 128 links, each value within 256 bytes; its links' `tracestate`s the most).
const MIN_QUEUE_BYTES: usize = 4 << 20;

impl Export {
    /// The bytes the export queue holds at most: 8 KiB a span of `queue_size`, 4 MiB at least
    /// (16 MiB by default).
    pub fn queue_bytes(&self) -> usize {
        (self.queue_size.saturating_mul(SPAN_BYTES)).max(MIN_QUEUE_BYTES)
    }
}

impl fmt::Debug for Export {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Export")
            .field("endpoint", &self.endpoint)
            .field("headers", &headers)
            .field("service_name", &self.service_name)
            .field("sampler", &self.sampler)
            .field("propagation", &self.propagation)
            .field("compression", &self.compression)
            .field("ca_file", &self.ca_file)
            .finish_non_exhaustive()
    }
}

/// Where spans go and how, for a person: the endpoint without its query (a token may sit
/// there), the sampler, the propagation, the compression and the CA. Never a header.
impl fmt::Display for Export {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = &self.endpoint;
        let at = e.authority().map(|a| a.as_str()).unwrap_or_default();
        write!(
            f,
            "{}://{at}{}, sampler {}, propagation {}, compression {}",
            e.scheme_str().unwrap_or("http"),
            e.path(),
            self.sampler,
            self.propagation.as_str(),
            self.compression.as_str(),
        )?;
        if let Some(ca) = &self.ca_file {
            write!(f, ", CA {}", ca.display())?;
        }
        Ok(())
    }
}

/// How an export's body is sent (`OTEL_EXPORTER_OTLP_COMPRESSION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    /// gzip, said in `Content-Encoding`.
    Gzip,
}

impl Compression {
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
        }
    }
}

/// Which traces are kept, as `OTEL_TRACES_SAMPLER` names them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampler {
    AlwaysOn,
    AlwaysOff,
    Ratio(f64),
    /// The parent's decision when there is a parent; this one's for a root.
    ParentBased(Root),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Root {
    AlwaysOn,
    AlwaysOff,
    Ratio(f64),
}

/// As `OTEL_TRACES_SAMPLER` names it, with its ratio.
impl fmt::Display for Sampler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (prefix, root) = match *self {
            Sampler::AlwaysOn => ("", Root::AlwaysOn),
            Sampler::AlwaysOff => ("", Root::AlwaysOff),
            Sampler::Ratio(r) => ("", Root::Ratio(r)),
            Sampler::ParentBased(root) => ("parentbased_", root),
        };
        match root {
            Root::AlwaysOn => write!(f, "{prefix}always_on"),
            Root::AlwaysOff => write!(f, "{prefix}always_off"),
            Root::Ratio(r) => write!(f, "{prefix}traceidratio {r}"),
        }
    }
}

/// Whether the request driftwatch forwards carries its span's `traceparent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Replacing the client's own.
    Always,
    /// Only when the client sent none: the API's spans join the trace of the tool call.
    WhenAbsent,
    /// The request goes as the client sent it.
    Never,
}

impl Propagation {
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Always => "always",
            Propagation::WhenAbsent => "when_absent",
            Propagation::Never => "never",
        }
    }
}
