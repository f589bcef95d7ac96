//! Reloading the spec while serving: the new revision is read and compiled off the request
//! path, diffed against the one in force, and swapped in whole. A revision that fails to load
//! never takes over: the old one stays, the failure is counted and logged with file, pointer
//! and reason, and `/readyz` stays ready. Triggers: a change to the spec file (polled), SIGHUP,
//! and `POST /spec/reload` on the admin listener.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::source::Source;
use super::{Revision, Sidecar};
use crate::diff::{Class, diff};

/// Load the spec file again and put it in force if it changed. Returns the revision in force.
pub async fn reload(s: &Arc<Sidecar>, trigger: &str) -> Result<Arc<Revision>, String> {
    // One reload at a time: two triggers at once must not race each other's swap.
    let mut etag = s.reloading.lock().await;
    let old = s.revision();
    let source = match (&s.config.spec.path, &s.config.spec.url) {
        (Some(path), _) => Ok(Source::File(path.clone())),
        (None, Some(url)) => match super::fetch(&s.client, &s.config, url, etag.as_deref()).await {
            Ok(None) => return Ok(old), // 304: the spec in force is the current one
            Ok(Some((source, tag))) => {
                *etag = tag;
                Ok(source)
            }
            Err(e) => Err(e),
        },
        (None, None) => {
            return Err(
                "the spec is embedded (no spec.path or spec.url): nothing to reload".into(),
            );
        }
    };
    let config = s.config.clone();
    let loaded = match source {
        Ok(source) => {
            tokio::task::spawn_blocking(move || Revision::compile(&source.read()?, &config))
                .await
                .map_err(|e| format!("the reload task failed: {e}"))
                .and_then(|r| r.map_err(|e| e.to_string()))
        }
        Err(e) => Err(e),
    };
    let mut next = match loaded {
        Ok(next) => next,
        Err(reason) => {
            s.metrics.spec_loaded(false);
            tracing::error!(trigger, in_force = %old.spec.revision, "spec reload failed, the revision in force stays: {reason}");
            return Err(reason);
        }
    };
    s.metrics.spec_loaded(true);
    next.log_warnings();
    if next.spec.revision == old.spec.revision {
        tracing::info!(trigger, revision = %old.spec.revision, "spec reloaded: unchanged");
        return Ok(old);
    }
    next.changes = diff(&old.contract, &next.contract);
    next.previous = Some(old.spec.revision.clone());
    let count = |c: Class| next.changes.iter().filter(|x| x.class == c).count();
    let (breaking, hazard, info) = (
        count(Class::Breaking),
        count(Class::Hazard),
        count(Class::Info),
    );
    tracing::info!(trigger, from = %old.spec.revision, to = %next.spec.revision, breaking, hazard, info, "spec reloaded");
    for c in &next.changes {
        tracing::info!(class = %c.class, kind = c.kind, operation = %c.operation, location = c.location,
            field = %c.field, from = ?c.from, to = ?c.to, "spec change");
    }
    s.metrics.spec(
        &next.spec.revision,
        &next.spec.openapi,
        next.spec.operations,
    );
    s.metrics.spec_changes(breaking, hazard, info);
    s.metrics.prepare(&next.contract);
    s.swap(next);
    Ok(s.revision())
}

/// Poll the spec file's length and modification time (or the spec URL) every
/// `spec.watch_interval_ms` and reload on a change. Polling, not inotify: Kubernetes updates a mounted ConfigMap by swapping a
/// symlinked directory, which a watch on the file itself never sees; `metadata` follows the link.
pub async fn watch(s: Arc<Sidecar>) {
    let interval = s.config.spec.watch_interval_ms;
    if interval == 0 {
        return;
    }
    let Some(path) = s.config.spec.path.clone() else {
        if s.config.spec.url.is_none() {
            return; // embedded: nothing to watch
        }
        // A URL: ask every interval; an unchanged spec answers 304.
        loop {
            tokio::time::sleep(Duration::from_millis(interval)).await;
            let _ = reload(&s, "poll").await;
        }
    };
    let stamp = |path: &std::path::Path| -> Option<(u64, SystemTime)> {
        let m = std::fs::metadata(path).ok()?;
        Some((m.len(), m.modified().ok()?))
    };
    let mut seen = stamp(&path);
    loop {
        tokio::time::sleep(Duration::from_millis(interval)).await;
        let now = stamp(&path);
        if now != seen && now.is_some() {
            seen = now;
            let _ = reload(&s, "file changed").await;
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
            let _ = reload(&s, "SIGHUP").await;
        }
    }
}
