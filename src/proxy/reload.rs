//! Reloading the spec while serving: the new revision is read and compiled off the request
//! path, diffed against the one in force, and swapped in whole. A revision that fails to load
//! never takes over: the old one stays, the failure is counted and logged with file, pointer
//! and reason, and `/readyz` stays ready. Triggers: a change to the spec file (polled), SIGHUP,
//! and `POST /spec/reload` on the admin listener.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::source::Source;
use super::{Api, Sidecar};
use crate::diff::{Class, diff};
use crate::revision::{ReloadError, Reloaded, Revision, Revisions};
use crate::settings::SpecSource;

impl Revisions for Sidecar {
    fn all(&self) -> Vec<(Option<String>, Arc<Revision>)> {
        let each = |api: &Arc<Api>| (api.settings.name.clone(), api.revision());
        self.apis.iter().map(each).collect()
    }

    fn reload<'a>(
        &'a self,
        trigger: &'static str,
        only: Option<&'a str>,
    ) -> Pin<Box<dyn Future<Output = Reloaded> + Send + 'a>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for api in self
                .apis
                .iter()
                .filter(|a| only.is_none_or(|n| a.name() == n))
            {
                out.push((api.settings.name.clone(), reload(self, api, trigger).await));
            }
            out
        })
    }
}

/// What reloads share: one runs at a time, and those asked for while it ran take the outcome
/// of the next one to start, instead of each compiling the spec again.
#[derive(Default)]
pub struct Reloading {
    /// The spec URL's last `ETag`.
    etag: Option<String>,
    /// The outcome of the last one: the revision in force, or why it failed.
    last: Option<Result<Arc<Revision>, String>>,
}

impl Reloading {
    pub fn new(etag: Option<String>) -> Reloading {
        Reloading {
            etag,
            ..Reloading::default()
        }
    }
}

/// Load the spec again and put it in force if it changed. Returns the revision in force.
/// Reloads asked for while one runs are coalesced: each waits for the running one (which may
/// have read the spec before it changed), then all take the outcome of the next, which one
/// of them runs. Fifty `POST /spec/reload` at once compile the spec twice, not fifty times.
pub async fn reload(s: &Sidecar, api: &Api, trigger: &str) -> Result<Arc<Revision>, ReloadError> {
    use std::sync::atomic::Ordering::SeqCst;
    let asked = api.reloads_started.load(SeqCst);
    // One reload at a time: two triggers at once must not race each other's swap.
    let mut state = api.reloading.lock().await;
    if api.reloads_started.load(SeqCst) > asked {
        // One started after this was asked for, and has ended: its outcome is this one's.
        return match &state.last {
            Some(Ok(rev)) => Ok(rev.clone()),
            Some(Err(why)) => Err(ReloadError::Shared(why.clone())),
            None => Ok(api.revision()),
        };
    }
    // Counted under the lock, and read before it by those who ask.
    api.reloads_started.fetch_add(1, SeqCst);
    let outcome = reload_now(s, api, trigger, &mut state.etag).await;
    state.last = Some(match &outcome {
        Ok(rev) => Ok(rev.clone()),
        Err(e) => Err(e.to_string()),
    });
    outcome
}

async fn reload_now(
    s: &Sidecar,
    api: &Api,
    trigger: &str,
    etag: &mut Option<String>,
) -> Result<Arc<Revision>, ReloadError> {
    let old = api.revision();
    let name = api.name();
    // A fetched spec that bundles local files (`spec.ref_root`) or takes overlays may change
    // in them alone, which a 304 would hide: its body is fetched whole, and the files' hashes
    // decide.
    if old.files.has_others() {
        *etag = None;
    }
    let loaded = match read(s, api, etag).await {
        Ok(None) => return Ok(old), // 304: the spec in force is the current one
        Ok(Some(source)) => compile(api, source, &old).await,
        Err(e) => Err(e),
    };
    let mut next = match loaded {
        Ok(Some(next)) => next,
        Ok(None) => {
            s.sinks.metrics.spec_loaded(&api.label, true);
            // No file it was read from changed: nothing was compiled.
            tracing::info!(trigger, api = name, revision = %old.spec.revision, "spec reloaded: unchanged");
            return Ok(old);
        }
        Err(reason) => {
            s.sinks.metrics.spec_loaded(&api.label, false);
            if reason.too_large() {
                s.sinks.metrics.limit_hit("spec_bytes");
            }
            tracing::error!(trigger, api = name, in_force = %old.spec.revision, "spec reload failed, the revision in force stays: {reason}");
            return Err(reason);
        }
    };
    s.sinks.metrics.spec_loaded(&api.label, true);
    next.log_warnings();
    if next.spec.revision == old.spec.revision {
        tracing::info!(trigger, api = name, revision = %old.spec.revision, "spec reloaded: unchanged");
        return Ok(old);
    }
    next.changes = diff(&old.contract, &next.contract);
    next.previous = Some(old.spec.revision.clone());
    report_changes(s, api, trigger, &old, &next);
    let spec = &next.spec;
    s.sinks
        .metrics
        .spec(&api.label, &spec.revision, &spec.openapi, spec.operations);
    s.sinks.metrics.prepare(&api.label, &next.contract);
    s.sinks.metrics.spec_warnings(&api.label, &next.contract);
    api.swap(next);
    Ok(api.revision())
}

/// The document to load: the file, or the URL's body (`None`: unchanged, a 304).
async fn read(
    s: &Sidecar,
    api: &Api,
    etag: &mut Option<String>,
) -> Result<Option<Source>, ReloadError> {
    match &api.settings.spec.source {
        SpecSource::File(path) => Ok(Some(Source::File(path.clone()))),
        SpecSource::Documents(docs) => Ok(Some(Source::Documents(docs.clone()))),
        SpecSource::Url(url) => {
            let timeout = s.settings.proxy.request_timeout;
            let max = api.settings.spec.load.max_bytes;
            match super::fetch(&s.client, timeout, url, etag.as_deref(), max).await? {
                None => Ok(None),
                Some((source, tag)) => {
                    *etag = tag;
                    Ok(Some(source))
                }
            }
        }
        SpecSource::Embedded => Err(ReloadError::Embedded),
    }
}

/// Read, compile and check off the runtime's workers (a large spec takes CPU), so that the
/// revision swapped in has nothing left to do before its requests but their validators.
/// `None`: the files `old` was read from hash as they did, so there is nothing to compile (a
/// ConfigMap update swaps every file's link, a SIGHUP goes to every sidecar: Microsoft Graph's
/// 19 MB would take seconds and its memory twice over to compile again).
async fn compile(
    api: &Api,
    source: Source,
    old: &Revision,
) -> Result<Option<Revision>, ReloadError> {
    let options = api.settings.spec.contract.clone();
    let load = api.settings.spec.load.clone();
    let (files, in_force) = (old.files.clone(), old.spec.revision.clone());
    let compiled = tokio::task::spawn_blocking(move || {
        if source.revision_now(&files, &load).as_ref() == Some(&in_force) {
            return Ok(None);
        }
        let revision = Revision::compile(&source.read(&load)?, &options)?;
        revision.contract.check();
        Ok::<_, ReloadError>(Some(revision))
    })
    .await;
    match compiled {
        Ok(result) => Ok(result?),
        Err(e) => Err(ReloadError::Task(e.to_string())),
    }
}

/// Log what changed, and count it by class.
fn report_changes(s: &Sidecar, api: &Api, trigger: &str, old: &Revision, next: &Revision) {
    let count = |c: Class| next.changes.iter().filter(|x| x.class == c).count();
    let (breaking, hazard, info) = (
        count(Class::Breaking),
        count(Class::Hazard),
        count(Class::Info),
    );
    let name = api.name();
    tracing::info!(trigger, api = name, from = %old.spec.revision, to = %next.spec.revision, breaking, hazard, info, "spec reloaded");
    s.sinks
        .metrics
        .spec_changes(&api.label, breaking, hazard, info);
    for c in &next.changes {
        tracing::info!(api = name, class = %c.class, kind = c.kind, operation = %c.operation, location = c.location,
            field = %c.field, from = c.from.as_deref(), to = c.to.as_deref(), "spec change");
    }
}

/// Poll each API's spec file's length and modification time (or its spec URL) every
/// `spec.watch_interval_ms` and reload that API on a change. Polling, not inotify: Kubernetes
/// updates a mounted ConfigMap by swapping a symlinked directory, which a watch on the file
/// itself never sees; `metadata` follows the link.
pub async fn watch(s: Arc<Sidecar>) {
    // Dropped (the task aborted at shutdown), the set aborts every watcher.
    let mut watching = tokio::task::JoinSet::new();
    for api in &s.apis {
        watching.spawn(watch_one(s.clone(), api.clone()));
    }
    while watching.join_next().await.is_some() {}
}

async fn watch_one(s: Arc<Sidecar>, api: Arc<Api>) {
    let Some(interval) = api.settings.spec.watch_interval else {
        return;
    };
    match &api.settings.spec.source {
        SpecSource::File(_) | SpecSource::Documents(_) => {}
        SpecSource::Embedded => return,
        // A URL: ask every interval; an unchanged spec answers 304.
        SpecSource::Url(_) => loop {
            tokio::time::sleep(interval).await;
            let _ = reload(&s, &api, "poll").await;
        },
    }
    // Each file's stamp from just before the revision in force read it, not from this task's
    // first turn: a change made in between (the sidecar was already answering) must not be
    // taken as the baseline. A revision swapped in by another trigger brings its own.
    let mut in_force = api.revision();
    let mut seen = in_force.files.stamps_when_read();
    loop {
        tokio::time::sleep(interval).await;
        let now = api.revision();
        if !Arc::ptr_eq(&now, &in_force) {
            seen = now.files.stamps_when_read();
            in_force = now;
        }
        let stamps = in_force.files.stamps_now();
        if stamps != seen && stamps.first().is_some_and(Option::is_some) {
            seen = stamps;
            let _ = reload(&s, &api, "file changed").await;
        }
    }
}

/// Reload on SIGHUP, the usual way to tell a daemon to re-read its files. The handler is
/// installed here, before serving starts (SIGHUP's default action ends the process); the
/// returned future waits for the signals.
pub fn on_sighup(s: Arc<Sidecar>) -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let hup = signal(SignalKind::hangup());
    async move {
        let Ok(mut hup) = hup else {
            return;
        };
        while hup.recv().await.is_some() {
            for api in &s.apis {
                let _ = reload(&s, api, "SIGHUP").await;
            }
        }
    }
}
