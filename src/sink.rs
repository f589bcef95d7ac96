//! Where findings go once the proxy has them: Prometheus metrics (a registry injected by the
//! caller, never global), JSON-line audit events for incident responders, and a ring of recent
//! findings served at `/findings`. Sinks never block or fail a request.

mod events;
mod labels;
mod metrics;
mod process;
mod recent;
mod tools;
mod tunnels;

pub use events::{
    Event, EventError, EventFinding, EventLog, EventOutput, SECRET_HEADERS, ToolFields,
};
pub use metrics::{ApiLabel, LimitHits, Metrics, NO_OPERATION, Outcome, encode};
pub use recent::{Recent, RecentQuery};
pub use tools::ToolMetrics;
pub use tunnels::{Tunnel, Tunnels};
