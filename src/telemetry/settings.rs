//! What export is told to do, typed (`settings` checks `[telemetry]` into it). Header values
//! are credentials: `Debug` shows their names only.

use std::fmt;
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
    pub queue_size: usize,
    pub batch_size: usize,
    pub interval: Duration,
    pub timeout: Duration,
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
            .finish_non_exhaustive()
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
