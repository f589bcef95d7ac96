//! The spans of the MCP requests other than `tools/call` (`initialize`, `tools/list`, `ping`,
//! ...) from their request to their answer, so that a trace shows every exchange the relay
//! passed, as the MCP conventions ask. A `tools/call`'s span is its call's (`calls`), which
//! attribution needs; these need only their ids. Bounded as calls are: at most `MAX_HELD` at
//! once over every session (a request past it gets no span) and each let go after
//! `TTL` unanswered, so a client that never reads its answers holds no more; an id that is not
//! a string or a number, or longer than 256 bytes, is not held.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value;

use super::call_span::{self, CallTrace};
use crate::telemetry::{Span, SpanContext, Telemetry};

/// Requests held at once, over every session: what `calls` holds of calls.
const MAX_HELD: usize = 1024;

/// A request unanswered this long is let go, as a call is (`calls::CALL_TTL`).
const TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// A request in flight: its MCP session and its JSON-RPC id as JSON text (`calls::CallKey`).
type Key = (u64, String);

/// Requests awaiting their answer, each with its span.
#[derive(Default)]
pub(super) struct Requests(Mutex<HashMap<Key, (Instant, Span)>>);

impl Requests {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Key, (Instant, Span)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A request of `method` went to the server: its span starts, under the client's; its
    /// context comes back (`None` past the bound).
    pub fn begin(
        &self,
        t: &Telemetry,
        (session, id): (u64, &Value),
        method: &str,
        trace: &CallTrace,
    ) -> Option<SpanContext> {
        // A JSON-RPC id is a string or a number: anything else, or one past the bound, is no
        // key to hold (a 4 MiB object id would be held whole until its TTL).
        let key = super::message::small_id(id)?;
        let now = Instant::now();
        let mut held = self.held();
        held.retain(|_, (began, _)| now.duration_since(*began) < TTL);
        if held.len() >= MAX_HELD {
            return None;
        }
        let span = call_span::start(t, (method, None), Some(id), trace);
        let cx = span.context().clone();
        // A reused id ends the span it replaces, unanswered.
        held.insert((session, key), (now, span));
        Some(cx)
    }

    /// The request's answer went back (`None`: it went unread or was cancelled).
    pub fn answered(&self, key: &Key, answer: Option<&Value>) {
        let span = self.held().remove(key);
        if let Some((_, span)) = span {
            call_span::end(span, answer);
        }
    }

    /// A session ended: its requests will never be answered.
    pub fn end_session(&self, session: u64) {
        self.held().retain(|(s, _), _| *s != session);
    }
}

/// A notification's span: it has no answer, so it ends at once.
pub(super) fn notified(t: &Telemetry, method: &str, trace: &CallTrace) {
    call_span::start(t, (method, None), None, trace).end();
}
