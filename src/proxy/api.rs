//! One API the sidecar serves: its settings, the spec revision in force (a reload swaps it
//! whole, and a request keeps the one it started with), and what is kept per API: the
//! `replace_will_drop_field` findings reported once, the reload in progress, the share of
//! requests that route nowhere. Listeners pick an API per request (by `CONNECT` host, by
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
        Ok(Api {
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

    /// Whether a forward proxy ends TLS for `host` for this API.
    pub fn serves(&self, host: &HostPort) -> bool {
        self.settings.hosts.contains(host)
    }

    /// Which of its upstreams a request sent to `host` goes to.
    pub fn upstream_for(&self, host: &HostPort) -> usize {
        match self.upstreams.len() {
            1 => 0,
            _ => self
                .settings
                .hosts
                .iter()
                .position(|h| h == host)
                .unwrap_or(0),
        }
    }
}

/// The API an origin-form request is for (reverse mode): the one whose prefix starts its path,
/// the longest when prefixes nest (`/api/billing` before `/api`; the prefix then taken off the
/// request's target), else the one whose `hosts` name its `Host` (by name; by name and port
/// when several APIs name that host), else the one selected by neither. `None`: no API
/// serves it.
pub(super) fn select<B>(apis: &[Arc<Api>], req: &mut http::Request<B>) -> Option<Arc<Api>> {
    if let [only] = apis
        && only.settings.prefix.is_none()
        && only.settings.hosts.is_empty()
    {
        return Some(only.clone());
    }
    let path = req.uri().path();
    let by_prefix = apis
        .iter()
        .filter_map(|api| {
            let prefix = api.settings.prefix.as_deref()?;
            let rest = path.strip_prefix(prefix)?;
            (rest.is_empty() || rest.starts_with('/')).then_some((prefix.len(), api))
        })
        .max_by_key(|(len, _)| *len);
    if let Some((len, api)) = by_prefix {
        strip(req, len);
        return Some(api.clone());
    }
    let host = req
        .headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().host())
        .and_then(|h| HostPort::parse(h, 80));
    host.and_then(|host| by_host(apis, &host))
        .or_else(|| {
            let unselected =
                |api: &&Arc<Api>| api.settings.prefix.is_none() && api.settings.hosts.is_empty();
            apis.iter().find(unselected)
        })
        .cloned()
}

/// The API whose `hosts` name `host`: by name, or by name and port when several APIs name it
/// (`svc.local:80` and `svc.local:8080` are two APIs; neither takes the other's requests).
fn by_host<'a>(apis: &'a [Arc<Api>], host: &HostPort) -> Option<&'a Arc<Api>> {
    let named = |api: &&Arc<Api>| api.settings.hosts.iter().any(|h| h.host == host.host);
    let mut by_name = apis.iter().filter(named);
    let first = by_name.next()?;
    match by_name.next() {
        None => Some(first),
        Some(_) => apis.iter().find(|api| api.settings.hosts.contains(host)),
    }
}

/// Take the first `len` bytes (a prefix) off the request's path, keeping its query.
fn strip<B>(req: &mut http::Request<B>, len: usize) {
    let Some(target) = req.uri().path_and_query().map(|p| p.as_str()) else {
        return;
    };
    let rest = &target[len..];
    let rest = match rest.starts_with('/') {
        true => rest.to_string(),
        false => format!("/{rest}"),
    };
    let mut parts = req.uri().clone().into_parts();
    parts.path_and_query = rest.parse().ok();
    if let Ok(uri) = http::Uri::from_parts(parts) {
        *req.uri_mut() = uri;
    }
}
