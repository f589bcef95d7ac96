//! The live sidecar: a reverse proxy between an MCP server and its API that audits every
//! request with the core and forwards it byte for byte (observe), or refuses it with a
//! problem+json answer (enforce). Plumbing only: every decision about drift is the core's.

mod body;
mod forward;
mod headers;
mod late;
mod problem;
mod reload;
mod revision;
mod server;
mod source;
mod tee;
mod upstream;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use prometheus_client::registry::Registry;

pub use reload::reload;
pub use revision::{Revision, SpecInfo};
pub use server::run;
pub use source::{Source, fetch};
pub use upstream::{Upstream, client, read_certs, read_key};

use crate::config::Config;
use crate::policy::Policy;
use crate::sink::{EventLog, Metrics, Recent};

/// Everything a request needs, shared by all connections.
pub struct Sidecar {
    /// The spec in force; a reload swaps it whole (see [`Sidecar::revision`]).
    current: arc_swap::ArcSwap<Revision>,
    pub policy: Policy,
    pub config: Config,
    pub upstream: Upstream,
    pub client: upstream::UpstreamClient,
    pub registry: Registry,
    pub metrics: Metrics,
    pub events: EventLog,
    pub recent: Recent,
    /// The last GET of each resource, for silent-clear detection.
    pub memory: crate::memory::Memory,
    /// `replace_will_drop_field` reported so far: each write and field once.
    pub reported: crate::audit::ReportedOnce,
    /// Held while a reload runs, so that two never race; holds the spec URL's last `ETag`.
    reloading: tokio::sync::Mutex<Option<String>>,
    /// Response audits still running after their response went out; shutdown waits for them.
    pub late: late::LateTasks,
    /// Set once the listener is serving; `/readyz` reports it.
    pub ready: AtomicBool,
}

impl Sidecar {
    /// Assemble the sidecar from a validated config and a compiled contract. The registry is
    /// the caller's (tests pass a fresh one); metrics are registered in it here.
    pub fn new(
        config: Config,
        revision: Revision,
        mut registry: Registry,
    ) -> anyhow::Result<Sidecar> {
        let upstream_url =
            config.proxy.upstream.as_deref().ok_or_else(|| {
                anyhow::anyhow!("no upstream: pass --upstream or set proxy.upstream")
            })?;
        let upstream = Upstream::parse(upstream_url)?;
        let client = upstream::client(&config)?;
        let metrics = Metrics::new(&mut registry, config.audit.unknown_param_labels);
        let spec = &revision.spec;
        metrics.spec(&spec.revision, &spec.openapi, spec.operations);
        metrics.spec_loaded(true);
        metrics.spec_changes(0, 0, 0);
        metrics.prepare(&revision.contract);
        let events = EventLog::open(&config.events.output)
            .map_err(|e| anyhow::anyhow!("events.output `{}`: {e}", config.events.output))?;
        Ok(Sidecar {
            policy: Policy::new(config.proxy.mode, &config.enforce),
            recent: Recent::new(config.admin.recent_findings),
            memory: crate::memory::Memory::new(
                config.memory.max_entries,
                std::time::Duration::from_secs(config.memory.ttl_secs),
            ),
            reported: Default::default(),
            late: Default::default(),
            reloading: Default::default(),
            current: arc_swap::ArcSwap::from_pointee(revision),
            upstream,
            client,
            registry,
            metrics,
            events,
            config,
            ready: AtomicBool::new(false),
        })
    }

    /// The `ETag` of the spec fetched from `spec.url` at start, so that the first poll is
    /// already conditional.
    pub fn with_etag(mut self, tag: Option<String>) -> Sidecar {
        self.reloading = tokio::sync::Mutex::new(tag);
        self
    }

    /// The spec in force. A request takes it once and keeps it to its end.
    pub fn revision(&self) -> Arc<Revision> {
        self.current.load_full()
    }

    /// Put `next` in force; requests already running keep the revision they started with.
    pub fn swap(&self, next: Revision) {
        self.current.store(Arc::new(next));
    }
}
