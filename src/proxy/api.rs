//! One API the sidecar serves: its settings, the spec revision in force (a reload swaps it
//! whole, and a request keeps the one it started with), and what is kept per API: the
//! `replace_will_drop_field` findings reported once, the reload in progress, the share of
//! requests that route nowhere. `route` picks an API per request (by `CONNECT` host, by
//! prefix or `Host`); everything after that reads it from here.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::reload::Reloading;
use super::unrouted::Unrouted;
use crate::revision::Revision;
use crate::settings::{ApiSettings, HostPort, Upstream};
use crate::sink::ApiLabel;

pub struct Api {
    /// Its place among the sidecar's APIs: the index of its upstream connections in a
    /// serving thread's pools.
    pub index: usize,
    pub settings: ApiSettings,
    /// The `api` label of its metrics, and the name its events carry.
    pub label: ApiLabel,
    /// Where its requests go: one upstream, or one per host (`ApiSettings::per_host`).
    pub upstreams: Vec<Upstream>,
    /// Each of its `hosts`, with the index of its upstream.
    hosts: Vec<(HostPort, usize)>,
    current: arc_swap::ArcSwap<Revision>,
    /// `replace_will_drop_field` reported so far: each write and field once.
    pub(super) reported: crate::audit::ReportedOnce,
    /// Held while a reload runs, so that two never race; holds the spec URL's last `ETag`.
    pub(super) reloading: tokio::sync::Mutex<Reloading>,
    /// Reloads started so far, counted under `reloading`'s lock and read before it: a reload
    /// asked for notes it first, to know whether one started after it asked.
    pub(super) reloads_started: AtomicU64,
    /// Whether most recent requests route nowhere (a wrong base path or spec version).
    pub unrouted: Arc<Unrouted>,
    /// Per upstream, what every request span of the API says alike (`trace`), encoded once.
    pub span_attributes: Vec<crate::telemetry::Attributes>,
}

impl Api {
    pub(super) fn new(
        index: usize,
        settings: ApiSettings,
        revision: Revision,
        etag: Option<String>,
    ) -> Result<Api, crate::config::ConfigError> {
        let upstreams = match settings.per_host.is_empty() {
            true => vec![settings.upstream()?.clone()],
            false => settings.per_host.clone(),
        };
        // `per_host` holds one upstream per host, in the order of `hosts`.
        let hosts = (settings.hosts.iter().enumerate())
            .map(|(i, host)| (host.clone(), i.min(upstreams.len() - 1)))
            .collect();
        Ok(Api {
            span_attributes: (upstreams.iter())
                .map(|u| super::trace::api_attributes(&settings, u))
                .collect(),
            hosts,
            index,
            label: ApiLabel::new(settings.name.as_deref()),
            settings,
            upstreams,
            current: arc_swap::ArcSwap::from_pointee(revision),
            reported: Default::default(),
            reloading: tokio::sync::Mutex::new(Reloading::new(etag)),
            reloads_started: Default::default(),
            unrouted: Default::default(),
        })
    }

    /// The spec in force. A request takes it once and keeps it to its end.
    pub fn revision(&self) -> Arc<Revision> {
        self.current.load_full()
    }

    /// Put `next` in force; requests already running keep the revision they started with.
    pub(super) fn swap(&self, next: Revision) {
        self.current.store(Arc::new(next));
    }

    /// Its name as logs and answers show it (`default` for the unnamed API).
    pub fn name(&self) -> &str {
        self.settings.name.as_deref().unwrap_or("default")
    }

    /// The upstream of the first of its hosts `matches`, if any: with `hosts` and no
    /// `upstream`, each host has an upstream of its own; else every host goes to the one.
    pub(super) fn upstream_of(&self, matches: impl Fn(&HostPort) -> bool) -> Option<usize> {
        self.hosts
            .iter()
            .find(|(host, _)| matches(host))
            .map(|(_, upstream)| *upstream)
    }
}
