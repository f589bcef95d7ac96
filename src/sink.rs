//! Where findings go once the proxy has them: Prometheus metrics (a registry injected by the
//! caller, never global), JSON-line audit events for incident responders, and a ring of recent
//! findings served at `/findings`. Sinks never block or fail a request.

mod events;
mod incidents;
mod labels;
mod metrics;
mod process;
mod recent;
mod store;
mod tools;
mod tunnels;

pub use events::{
    Event, EventError, EventFinding, EventLog, EventOutput, ReadNote, Repair, SECRET_HEADERS,
    ToolFields, TraceIds,
};
pub use incidents::Incidents;
pub use metrics::{
    ApiLabel, Exemplar, LimitHits, Metrics, NO_OPERATION, Outcome, encode, encode_openmetrics,
    exemplar,
};
pub use recent::{Recent, RecentQuery};
pub use store::{Fallbacks, StoreMetrics};
pub use tools::ToolMetrics;
pub use tunnels::{Tunnel, Tunnels};

/// Every sink of one sidecar (made, its metrics registered, in one place: `proxy::sinks`): the
/// request metrics, the per-tool and per-host counts, the shared store's metrics when there is
/// a store, the event log and the recent ring.
pub struct Sinks {
    pub metrics: Metrics,
    pub tools: std::sync::Arc<ToolMetrics>,
    pub tunnels: Tunnels,
    /// Taken by the store when it starts.
    pub store: Option<StoreMetrics>,
    pub events: EventLog,
    pub recent: std::sync::Arc<Recent>,
    /// Silent clears as incidents, at `/incidents`.
    pub incidents: std::sync::Arc<Incidents>,
}
