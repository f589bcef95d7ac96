//! Where findings go once the proxy has them: Prometheus metrics (a registry injected by the
//! caller, never global), JSON-line audit events for incident responders, and a ring of recent
//! findings served at `/findings`. Sinks never block or fail a request.

mod events;
mod labels;
mod metrics;
mod process;
mod recent;
mod store;
mod tools;
mod tunnels;

pub use events::{
    Event, EventError, EventFinding, EventLog, EventOutput, SECRET_HEADERS, ToolFields,
};
pub use metrics::{ApiLabel, LimitHits, Metrics, NO_OPERATION, Outcome, encode};
pub use recent::{Recent, RecentQuery};
pub use store::{Fallbacks, StoreMetrics};
pub use tools::ToolMetrics;
pub use tunnels::{Tunnel, Tunnels};

/// Every sink of one sidecar, its metrics registered in one place: the request metrics, the
/// per-tool and per-host counts, the shared store's metrics when there is a store, the event
/// log and the recent ring.
pub struct Sinks {
    pub metrics: Metrics,
    pub tools: std::sync::Arc<ToolMetrics>,
    pub tunnels: Tunnels,
    /// Taken by the store when it starts.
    pub store: Option<StoreMetrics>,
    pub events: EventLog,
    pub recent: std::sync::Arc<Recent>,
}

impl Sinks {
    /// Register every metric in `registry` and open the event log.
    pub fn new(
        settings: &crate::settings::Settings,
        registry: &mut prometheus_client::registry::Registry,
    ) -> std::io::Result<Sinks> {
        Ok(Sinks {
            metrics: Metrics::new(registry, settings.audit.unknown_param_labels),
            tools: std::sync::Arc::new(ToolMetrics::new(registry)),
            tunnels: Tunnels::new(registry, settings.forward.host_labels),
            store: (settings.memory.shared.as_ref()).map(|_| StoreMetrics::register(registry)),
            events: EventLog::open(&settings.events.output)?,
            recent: std::sync::Arc::new(Recent::new(
                settings.admin.recent_findings,
                settings.admin.recent_bytes,
            )),
        })
    }
}
