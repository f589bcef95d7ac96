//! The live sidecar: a reverse proxy between an MCP server and its API that audits every
//! request with the core and forwards it (observe), or refuses it with a problem+json answer
//! (enforce). Plumbing only: every decision about drift is the core's. A request goes through
//! the stages of `forward` and is recorded once, at `record`.

mod accept;
mod api;
mod before_write;
mod body;
pub mod ca;
mod check;
mod connection;
mod error;
mod front;
mod headers;
mod incident;
mod lanes;
mod late;
mod late_span;
mod outgoing;
mod pool;
mod problem;
mod record;
mod reload;
mod repair;
mod requests;
mod resource;
mod route;
mod sniff;
mod source;
mod stages;
mod stall;
mod stream;
mod tunnel;
pub use stall::{BodyError, Stalling};
mod store;
mod tee;
mod tool;
mod trace;
pub mod unrouted;
mod upstream;
mod vet;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use prometheus_client::registry::Registry;

pub use accept::run;
pub use api::Api;
pub use error::{Fault, ProxyError, StartError};
pub use source::{Source, fetch};
pub use store::Health as StoreHealth;
pub use upstream::{client, read_certs, read_key};

use crate::mcp::calls::Calls;
use crate::revision::Revision;
use crate::settings::Settings;
use crate::sink::{Event, Metrics, Sinks};

/// Everything a request needs, shared by all connections. Built once from validated settings;
/// the admin listener sees it only through [`crate::revision::Revisions`] and the shared sinks.
pub struct Sidecar {
    /// The APIs served, each with its spec in force (see [`Api::revision`]); never empty.
    pub apis: Vec<Arc<Api>>,
    pub settings: Settings,
    /// What fetches the spec from `spec.url`; requests go upstream through each serving
    /// thread's `pool::Pool`.
    client: Arc<upstream::UpstreamClient>,
    pub registry: Arc<Registry>,
    /// Metrics, events and the recent ring, registered in `registry` at start.
    pub sinks: Sinks,
    /// The last GET of each resource, for silent-clear detection.
    pub memory: crate::memory::Memory,
    /// The values of each resource's last read, for incidents (`incidents.keep_values`).
    pub vault: Option<crate::memory::vault::Vault>,
    /// The store replicas share the memory through (`memory.backend = "redis"`), if any.
    store: Option<store::Store>,
    /// Response work (audit, memory) done off the async workers after the response went out.
    late: late::LateTasks,
    /// Set once the listener is serving; `/readyz` reports it.
    pub ready: Arc<AtomicBool>,
    /// Requests in flight, each holding one from its start to its response's last byte:
    /// `proxy.max_connections` of them. An HTTP/1.1 connection holds at most one, so only the
    /// streams of HTTP/2 connections ever wait here; without it, 5 connections of 200 streams
    /// to a slow API opened 1,000 upstream sockets.
    pub(crate) requests: Arc<tokio::sync::Semaphore>,
    /// The CA a forward proxy signs intercepted hosts' leaves with (`proxy.kind = "forward"`);
    /// each connection's front holds it.
    ca: Option<Arc<ca::Ca>>,
    /// The MCP server's calls in flight (`driftwatch wrap`): each request's tool is asked of
    /// them. `None` elsewhere: the tool comes from `events.tool_header` only.
    calls: Option<Arc<Calls>>,
    /// The tracer, when `[telemetry]` names a collector.
    pub telemetry: Option<Arc<crate::telemetry::Telemetry>>,
}

/// Where a request's tool comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolSource {
    /// The request names it in `events.tool_header`, or nothing does.
    Header,
    /// Also the MCP server's calls in flight, which `driftwatch wrap` follows.
    Calls,
}

/// Each API with its revision in force, its metrics' series made.
fn apis(
    settings: &Settings,
    revisions: Vec<(Revision, Option<String>)>,
    metrics: &Metrics,
) -> Result<Vec<Arc<Api>>, StartError> {
    let mut apis = Vec::with_capacity(revisions.len());
    for (index, ((revision, etag), api)) in revisions.into_iter().zip(&settings.apis).enumerate() {
        let api = Api::new(index, api.clone(), revision, etag)?;
        let spec = &api.revision().spec;
        metrics.spec(&api.label, &spec.revision, &spec.openapi, spec.operations);
        metrics.spec_loaded(&api.label, true);
        metrics.spec_changes(&api.label, 0, 0, 0);
        metrics.prepare(&api.label, &api.revision().contract);
        metrics.unrouted_share(&api.label, 0.0);
        apis.push(Arc::new(api));
    }
    Ok(apis)
}

/// Every sink, each metric registered in `registry` here, and the event log opened.
fn sinks(settings: &Settings, registry: &mut Registry) -> std::io::Result<Sinks> {
    Ok(Sinks {
        metrics: Metrics::new(registry, settings.audit.unknown_param_labels),
        tools: Arc::new(crate::sink::ToolMetrics::new(registry)),
        tunnels: crate::sink::Tunnels::new(registry, settings.forward.host_labels),
        store: (settings.memory.shared.as_ref())
            .map(|_| crate::sink::StoreMetrics::register(registry)),
        events: crate::sink::EventLog::open(&settings.events.output)?,
        recent: Arc::new(crate::sink::Recent::new(
            settings.admin.recent_findings,
            settings.admin.recent_bytes,
        )),
        incidents: Arc::new(crate::sink::Incidents::new(
            settings.incidents.max,
            settings.incidents.max_bytes,
            settings.memory.ttl,
        )),
    })
}

/// The CA a forward proxy signs its leaves with (opened, or made in `forward.ca_dir`); none
/// for a reverse proxy.
fn forward_ca(settings: &Settings) -> Result<Option<Arc<ca::Ca>>, StartError> {
    Ok(match settings.proxy.kind {
        crate::config::ProxyKind::Forward => {
            Some(Arc::new(ca::Ca::open(&settings.forward.ca_dir)?))
        }
        crate::config::ProxyKind::Reverse => None,
    })
}

impl Sidecar {
    /// Run each spec's whole-document checks (a blocking call: the load leaves them to after
    /// ready), then say its warnings: the log, `driftwatch_spec_warnings`.
    pub fn check_specs(&self) {
        for api in &self.apis {
            let rev = api.revision();
            rev.contract.check();
            rev.log_warnings();
            self.sinks.metrics.spec_warnings(&api.label, &rev.contract);
        }
    }

    /// The counter a stalled body increments (`limit_hits{limit="body_stall"}`), for bodies
    /// read outside the request path (wrap's MCP front).
    pub fn body_stalls(&self) -> prometheus_client::metrics::counter::Counter {
        self.sinks.metrics.body_stalls()
    }

    /// The listeners' handle on `driftwatch_limit_hits_total`.
    pub fn limit_hits(&self) -> crate::sink::LimitHits {
        self.sinks.metrics.limit_hits()
    }

    /// Assemble the sidecar from validated settings and each API's compiled spec (with the
    /// `ETag` of one fetched from a URL, so that the first poll is already conditional), in
    /// the order of `settings.apis`. The registry is the caller's (tests pass a fresh one);
    /// metrics are registered in it here.
    pub fn new(
        settings: Settings,
        revisions: Vec<(Revision, Option<String>)>,
        mut registry: Registry,
        tools: ToolSource,
    ) -> Result<Sidecar, StartError> {
        let client = upstream::client(&settings)?;
        let mut sinks = sinks(&settings, &mut registry).map_err(|source| StartError::Events {
            output: settings.events.output.clone(),
            source,
        })?;
        let apis = apis(&settings, revisions, &sinks.metrics)?;
        let store = match (&settings.memory.shared, sinks.store.take()) {
            (Some(shared), Some(metrics)) => Some(
                store::Store::start(shared, &settings.memory, metrics).map_err(|e| {
                    StartError::Store {
                        url: shared.shown.clone(),
                        reason: e.to_string(),
                    }
                })?,
            ),
            _ => None,
        };
        let telemetry = match &settings.telemetry.export {
            Some(export) => Some(Arc::new(crate::telemetry::Telemetry::start(
                export,
                sinks.metrics.span_counts(),
            )?)),
            None => None,
        };
        let calls = (tools == ToolSource::Calls)
            .then(|| Arc::new(Calls::counted(sinks.tools.untracked()).traced(telemetry.clone())));
        Ok(Sidecar {
            memory: crate::memory::Memory::new(
                settings.memory.max_entries,
                settings.memory.ttl,
                settings.memory.hash_key,
            ),
            vault: (settings.incidents.keep_values).then(|| {
                let bytes = settings.incidents.max_value_bytes;
                crate::memory::vault::Vault::new(bytes, settings.memory.ttl)
            }),
            store,
            late: late::LateTasks::new(),
            apis,
            client: Arc::new(client),
            registry: Arc::new(registry),
            sinks,
            requests: Arc::new(tokio::sync::Semaphore::new(settings.proxy.max_connections)),
            ca: forward_ca(&settings)?,
            settings,
            ready: Arc::new(AtomicBool::new(false)),
            calls,
            telemetry,
        })
    }

    /// The MCP server's calls in flight, under `driftwatch wrap`.
    pub fn calls(&self) -> Option<&Arc<Calls>> {
        self.calls.as_ref()
    }

    /// The shared memory store's health, for `/readyz`; `None` with the local backend.
    pub fn store_health(&self) -> Option<Arc<StoreHealth>> {
        self.store.as_ref().map(|s| s.health.clone())
    }

    /// The first API's spec in force: the one API of the commands that serve one (`mcp`,
    /// `demo`). A request takes its API's once and keeps it to its end.
    pub fn revision(&self) -> Arc<Revision> {
        self.apis[0].revision()
    }

    /// A request path as events and logs write it: with its values only under
    /// `events.log_values`, else its shape in `contract` (`/api/v1/channels/*`).
    fn path_text(&self, contract: &crate::contract::Contract, path: &str) -> String {
        path_text(self.settings.events.log_values, contract, path)
    }

    /// Cut an event to its bound, then write it and keep it for `/findings`.
    pub fn publish(&self, mut event: Event) {
        let (weight, cut) = event.fit(self.settings.events.max_event_bytes);
        if cut {
            self.sinks.metrics.limit_hit("event_bytes");
        }
        let event = Arc::new(event);
        if !self.sinks.events.log(event.clone()) {
            self.sinks.metrics.event_dropped();
        }
        self.sinks.recent.push(event, weight);
    }
}

/// A request path as events and spans show it: whole with `events.log_values`, else its values
/// as `*` (the contract's `path_shape`).
fn path_text(log_values: bool, contract: &crate::contract::Contract, path: &str) -> String {
    match log_values {
        true => path.to_string(),
        false => contract.path_shape(path),
    }
}
