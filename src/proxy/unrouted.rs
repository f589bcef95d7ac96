//! Watching for traffic that routes nowhere. When most requests match no operation, the cause
//! is rarely the agent: a wrong base path or another version of the API than the spec's
//! (GitLab's v4 traffic against its v3 spec) makes every request `unknown_operation`, and the
//! audit says nothing useful. Requests are counted in windows of [`WINDOW`]; when at least half
//! of a window routed nowhere, one warning names the base path in force and the templates the
//! last such path came nearest to (log, `/readyz`, `driftwatch_unrouted_share`), and another
//! says when traffic routes again.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::contract::Contract;

/// The base path in force and where it comes from: `spec.base_path`, the spec's servers, or
/// none.
pub fn base_text(configured: Option<&str>, contract: &Contract) -> String {
    let bases = contract.base_paths();
    match (configured, bases.is_empty()) {
        (Some(base), _) => format!("{base} (spec.base_path)"),
        (None, true) => "none: request paths are routed as sent".to_string(),
        (None, false) => format!("{} (the spec's servers)", bases.join(", ")),
    }
}

/// Requests per window.
pub const WINDOW: u64 = 100;
/// The share is reported every this many requests of a window, so that a sidecar where most
/// requests route nowhere says so from its 20th request, not its 100th.
pub const EARLY: u64 = 20;

#[derive(Default)]
pub struct Unrouted {
    seen: AtomicU64,
    nowhere: AtomicU64,
    /// The last path that routed nowhere (kept to name its nearest templates, never shown).
    last: Mutex<String>,
    /// The warning in force, for `/readyz`.
    warning: Mutex<Option<String>>,
}

/// What a window found so far: the share of it that routed nowhere, and whether it closed.
pub struct Closed {
    pub share: f64,
    /// The window's end: only then is the warning settled.
    pub closed: bool,
}

impl Unrouted {
    /// Count one audited request. Returns the window's share so far every [`EARLY`] requests,
    /// and the window it closed, if it closed one.
    pub fn record(&self, routed: bool, path: &str) -> Option<Closed> {
        if !routed {
            self.nowhere.fetch_add(1, Ordering::Relaxed);
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            last.clear();
            // At a character boundary: a path's bytes past ASCII are the peer's to choose.
            last.push_str(&path[..path.floor_char_boundary(2048)]);
        }
        let seen = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        if seen < WINDOW {
            let nowhere = self.nowhere.load(Ordering::Relaxed).min(seen);
            return seen.is_multiple_of(EARLY).then(|| Closed {
                share: nowhere as f64 / seen as f64,
                closed: false,
            });
        }
        self.seen.store(0, Ordering::Relaxed);
        let nowhere = self.nowhere.swap(0, Ordering::Relaxed).min(WINDOW);
        Some(Closed {
            share: nowhere as f64 / WINDOW as f64,
            closed: true,
        })
    }

    /// Settle the warning after a closed window: set it (and log it once) when at least half
    /// routed nowhere, clear it (and say so) when traffic routes again.
    pub fn settle(&self, closed: &Closed, contract: &Contract, base: &str) {
        if !closed.closed {
            return;
        }
        let mut warning = self.warning.lock().unwrap_or_else(|e| e.into_inner());
        match (closed.share >= 0.5, warning.is_some()) {
            (true, false) => {
                let last = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let nearest = contract.nearest_templates(&last, 3);
                let nearest = match nearest.is_empty() {
                    true => "none near".to_string(),
                    false => nearest.join(", "),
                };
                let shape = contract.path_shape(&last);
                let text = format!(
                    "{:.0}% of the last {WINDOW} requests route to no operation: check the base \
                     path ({base}) and the spec's version; the last, {shape}, comes nearest to {nearest}",
                    closed.share * 100.0
                );
                tracing::warn!("{text}");
                *warning = Some(text);
            }
            (false, true) => {
                tracing::info!(
                    "requests route to the spec's operations again ({:.0}% of the last {WINDOW} \
                     routed nowhere)",
                    closed.share * 100.0
                );
                *warning = None;
            }
            _ => {}
        }
    }

    /// The warning in force, for `/readyz`.
    pub fn warning(&self) -> Option<String> {
        self.warning
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_path_is_kept_cut_at_a_character_boundary() {
        let unrouted = Unrouted::default();
        let path = format!("/{}é{}", "a".repeat(2046), "b".repeat(100));
        assert!(unrouted.record(false, &path).is_none());
        let last = unrouted.last.lock().unwrap();
        assert_eq!(last.len(), 2047);
        assert!(path.starts_with(last.as_str()));
    }

    /// Issue 50: the share read 0 until a window's 100th request, even when 91 % routed
    /// nowhere; it is reported every 20 requests now, and the warning waits for the window.
    #[test]
    fn the_share_is_reported_from_the_20th_request_and_the_window_closes_at_100() {
        let unrouted = Unrouted::default();
        let mut reported = Vec::new();
        for n in 1..=WINDOW {
            if let Some(c) = unrouted.record(n % 10 == 0, "/v2/x") {
                reported.push((n, c.share, c.closed));
            }
        }
        assert_eq!(
            reported,
            [
                (20, 0.9, false),
                (40, 0.9, false),
                (60, 0.9, false),
                (80, 0.9, false),
                (100, 0.9, true)
            ]
        );
    }
}
