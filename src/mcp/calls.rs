//! Which tool call caused an API request. `driftwatch wrap` sees both hops: the agent's
//! `tools/call` on the MCP side and the server's API requests on the other. A request is tied
//! to the call that caused it: exactly when one call is in flight; with several, by the call's
//! argument values found in the request (path parameter values, query values, body values):
//! the one call holding a value found there that no other call in flight holds; and when that
//! cannot tell, the answer says ambiguous and lists the candidates. Never a guess: a wrong name
//! would send an incident responder to the wrong tool. So a call unanswered for `CALL_TTL` is
//! let go, a reused JSON-RPC id keeps both calls (its answer ends both), and while calls go
//! untracked past `MAX_IN_FLIGHT` the calls in flight are known to be incomplete and every
//! request is ambiguous rather than named after a stale call.
//!
//! What each tool reached is kept as a learned map, in the `tools --map` format, so the
//! catalog check needs no hand-written map. Pure (no sockets): the relay feeds it messages,
//! the proxy asks it about requests.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::call_span::{self, CallTrace, TOOLS_CALL};
use super::requests::{self, Requests};
use crate::telemetry::{Propagation, Span, SpanContext, Telemetry};

/// Calls tracked at once; past it a call is not tracked (its requests are then ambiguous or
/// unattributed, never wrongly named). An agent makes a handful at a time.
const MAX_IN_FLIGHT: usize = 1024;
/// A call unanswered this long is let go: its server or client has given up on it (the
/// official SDKs time a request out after 60 s), and kept, it would take later requests'
/// blame.
pub const CALL_TTL: Duration = Duration::from_secs(300);
/// Argument values kept per call, and bytes of each (longer ones are not compared).
const MAX_VALUES: usize = 256;
const MAX_VALUE_BYTES: usize = 1024;
/// Characters a value needs to tell one call from another (the bindings' rule too).
const MIN_TELLING_CHARS: usize = 3;
/// Tools, and operations per tool, the learned map holds.
const MAX_TOOLS: usize = 1024;
const MAX_OPERATIONS: usize = 64;
/// A tool name is kept to this many bytes (cut at a character's edge): the specification
/// allows 128 characters, and 256 calls of 4 MB names held 1.1 GB.
const MAX_TOOL_NAME_BYTES: usize = 256;
/// Tools an ambiguous attribution lists.
const MAX_CANDIDATES: usize = 16;

/// How a request's tool was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// The request named it in the configured tool header.
    Header,
    /// One call was in flight.
    OnlyCall,
    /// Every call in flight was of this tool.
    OnlyTool,
    /// Of the calls in flight, this one's argument values are in the request most.
    Arguments,
    /// Several calls fit as well: `candidates` lists their tools.
    Ambiguous,
}

impl By {
    pub fn as_str(self) -> &'static str {
        match self {
            By::Header => "header",
            By::OnlyCall => "only_call",
            By::OnlyTool => "only_tool",
            By::Arguments => "arguments",
            By::Ambiguous => "ambiguous",
        }
    }
}

/// The tool a request is attributed to.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribution {
    /// The tool's name; `None` when ambiguous.
    pub tool: Option<Arc<str>>,
    pub by: By,
    /// For an ambiguous request: the tools of the calls that fit, sorted.
    pub candidates: Vec<Arc<str>>,
    /// The arguments of the one call it was tied to (one call in flight, or told by its
    /// values): what the server did with them is learned from the request.
    pub arguments: Option<Arc<[(String, Value)]>>,
    /// That one call (its session and JSON-RPC id), to which a refusal of the request is told.
    pub call: Option<CallKey>,
    /// The span of the call the request is a child of (traced, and one call's tool known).
    pub parent: Option<SpanContext>,
    /// For an ambiguous request: the spans of the calls that fit, which its span links to.
    pub links: Vec<SpanContext>,
}

/// A call in flight: its MCP session and its JSON-RPC id as JSON text.
pub type CallKey = (u64, String);

/// Bytes of a refusal's text kept for a call's answer.
const MAX_REFUSAL_BYTES: usize = 2048;

impl Attribution {
    pub fn header(name: &str) -> Attribution {
        Attribution {
            tool: Some(name.into()),
            by: By::Header,
            candidates: Vec::new(),
            arguments: None,
            call: None,
            parent: None,
            links: Vec::new(),
        }
    }

    /// What an event's `tool` says: the name, or `(ambiguous)` (the candidates beside it).
    pub fn label(&self) -> &str {
        self.tool.as_deref().unwrap_or(AMBIGUOUS)
    }

    /// Whether the tool is known (not ambiguous): then the map learns from it.
    pub fn known(&self) -> Option<&str> {
        self.tool.as_deref()
    }
}

/// A request the calls `fit` fit as well as each other: their tools listed, their spans linked.
fn ambiguous(fit: &[&Call]) -> Attribution {
    Attribution {
        tool: None,
        by: By::Ambiguous,
        candidates: (fit.iter().map(|c| c.tool.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .take(MAX_CANDIDATES)
            .collect(),
        arguments: None,
        call: None,
        parent: None,
        links: (fit.iter().filter_map(|c| c.span_context()))
            .take(MAX_CANDIDATES)
            .collect(),
    }
}

/// An event's `tool` for a request several calls fit.
pub const AMBIGUOUS: &str = "(ambiguous)";

/// One `tools/call` in flight.
struct Call {
    tool: Arc<str>,
    /// Its scalar argument values as text, distinct.
    values: Vec<String>,
    /// Its arguments by name (groups' members included), bounded as `values` is.
    arguments: Arc<[(String, Value)]>,
    began: Instant,
    key: CallKey,
    /// What driftwatch refused of a request it made, for its answer to say.
    refusal: Option<Arc<str>>,
    /// Its span, when traces are exported; it ends with the answer, or when let go.
    span: Option<Span>,
}

impl Call {
    fn span_context(&self) -> Option<SpanContext> {
        Some(self.span.as_ref()?.context().clone())
    }
}

#[derive(Default)]
struct State {
    /// By (session, JSON-RPC id as JSON text): a client that reuses an id in flight has two
    /// calls under it, and its answer, which cannot say which, ends both.
    in_flight: HashMap<CallKey, Vec<Call>>,
    /// Per tool, the operations it reached: (the sidecar's API, its index; operationId).
    learned: BTreeMap<String, BTreeSet<(usize, String)>>,
    /// Per tool, what its server does with each argument.
    bindings: BTreeMap<String, crate::mcp::bindings::Learned>,
    /// Until then, a call may be in flight untracked: no request is named by what is.
    incomplete_until: Option<Instant>,
}

impl State {
    /// Let go of every call older than `CALL_TTL`; how many.
    fn expire(&mut self, now: Instant) -> u64 {
        let before = self.held();
        self.in_flight.retain(|_, calls| {
            calls.retain(|c| now.duration_since(c.began) < CALL_TTL);
            !calls.is_empty()
        });
        if self.incomplete_until.is_some_and(|until| now >= until) {
            self.incomplete_until = None;
        }
        (before - self.held()) as u64
    }

    /// Calls in flight, all ids together.
    fn held(&self) -> usize {
        self.in_flight.values().map(Vec::len).sum()
    }
}

/// Calls let go without their answer, as `driftwatch_tool_calls_untracked_total{reason}`
/// counts them: `bound`, begun while `MAX_IN_FLIGHT` were in flight; `expired`, unanswered
/// after `CALL_TTL`. Counters the sink registers, or fresh ones nobody reads.
#[derive(Clone, Default)]
pub struct Untracked {
    pub bound: prometheus_client::metrics::counter::Counter,
    pub expired: prometheus_client::metrics::counter::Counter,
}

/// The calls in flight for one MCP server, and the map learned from them.
#[derive(Default)]
pub struct Calls {
    state: Mutex<State>,
    untracked: Untracked,
    /// Woken when the learned map gains an entry: the live catalog check runs again.
    pub learned_changed: tokio::sync::Notify,
    /// Each call's span is started here, when traces are exported.
    telemetry: Option<Arc<Telemetry>>,
    /// The other requests in flight, each with its span (traced only).
    requests: Requests,
}

impl Calls {
    /// Calls whose losses go to `untracked`.
    pub fn counted(untracked: Untracked) -> Calls {
        Calls {
            untracked,
            ..Calls::default()
        }
    }

    /// The same calls, each with a span when `telemetry` is there.
    pub fn traced(mut self, telemetry: Option<Arc<Telemetry>>) -> Calls {
        self.telemetry = telemetry;
        self
    }

    /// Whether each call gets a span.
    pub fn traced_calls(&self) -> bool {
        self.telemetry.is_some()
    }

    /// Whether a request's `params._meta` is to name driftwatch's span (`None`: not traced).
    pub fn propagation(&self) -> Option<Propagation> {
        self.telemetry.as_ref().map(|t| t.propagation)
    }

    /// A request other than `tools/call` went to the server: its span (traced), under the
    /// client's; its context.
    pub fn begin_request(
        &self,
        (session, id): (u64, &Value),
        method: &str,
        trace: &CallTrace,
    ) -> Option<SpanContext> {
        let t = self.telemetry.as_deref()?;
        self.requests.begin(t, (session, id), method, trace)
    }

    /// A notification went to the server: a span of its own (traced), ended at once.
    pub fn notified(&self, method: &str, trace: &CallTrace) {
        if let Some(t) = self.telemetry.as_deref() {
            requests::notified(t, method, trace);
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A `tools/call` went to the server.
    pub fn begin(&self, session: u64, id: &Value, tool: &str, arguments: Option<&Value>) {
        self.begin_traced(session, id, tool, arguments, &CallTrace::default());
    }

    /// [`Calls::begin`], its span (when traced) under the client's and carrying `trace`; the
    /// span's context (`None`: untraced, or past the bound).
    pub fn begin_traced(
        &self,
        session: u64,
        id: &Value,
        tool: &str,
        arguments: Option<&Value>,
        trace: &CallTrace,
    ) -> Option<SpanContext> {
        let mut values = Vec::new();
        if let Some(arguments) = arguments {
            scalars(arguments, &mut values);
        }
        let arguments: Arc<[(String, Value)]> = arguments
            .map(|a| crate::mcp::bindings::flatten(a, MAX_VALUES))
            .unwrap_or_default()
            .into_iter()
            .filter(|(_, v)| v.to_string().len() <= MAX_VALUE_BYTES)
            .collect();
        values.sort();
        values.dedup();
        let now = Instant::now();
        let mut state = self.state();
        self.untracked.expired.inc_by(state.expire(now));
        if state.held() >= MAX_IN_FLIGHT {
            self.untracked.bound.inc();
            state.incomplete_until = Some(now + CALL_TTL);
            return None;
        }
        let key = (session, id.to_string());
        let tool = &tool[..tool.floor_char_boundary(MAX_TOOL_NAME_BYTES)];
        let call = Call {
            span: (self.telemetry.as_deref())
                .map(|t| call_span::start(t, (TOOLS_CALL, Some(tool)), Some(id), trace)),
            tool: tool.into(),
            values,
            arguments,
            began: now,
            key: key.clone(),
            refusal: None,
        };
        let cx = call.span_context();
        state.in_flight.entry(key).or_default().push(call);
        cx
    }

    /// The call's answer (or its cancellation) went back: its later requests are not its own.
    /// What driftwatch refused of its requests comes back, for the answer to say.
    pub fn end(&self, session: u64, id: &Value) -> Option<Arc<str>> {
        self.answered(session, id, None)
    }

    /// [`Calls::end`] by its answer (a JSON-RPC response), which the call's span then says.
    pub fn answered(&self, session: u64, id: &Value, answer: Option<&Value>) -> Option<Arc<str>> {
        let key = (session, id.to_string());
        self.requests.answered(&key, answer);
        let calls = self.state().in_flight.remove(&key)?;
        let mut refusal = None;
        for call in calls {
            refusal = refusal.or(call.refusal);
            if let Some(span) = call.span {
                call_span::end(span, answer);
            }
        }
        refusal
    }

    /// driftwatch refused a request of the call `key`: `said` is what its answer should say.
    pub fn refused(&self, key: &CallKey, said: &str) {
        let said: Arc<str> = said[..said.floor_char_boundary(MAX_REFUSAL_BYTES)].into();
        if let Some(calls) = self.state().in_flight.get_mut(key) {
            calls
                .iter_mut()
                .for_each(|c| c.refusal = Some(said.clone()));
        }
    }

    /// A session ended: its calls will never be answered.
    pub fn end_session(&self, session: u64) {
        self.requests.end_session(session);
        self.state().in_flight.retain(|(s, _), _| *s != session);
    }

    pub fn in_flight(&self) -> usize {
        self.state().held()
    }

    /// The call that caused a request, by what is in flight now; `None` when nothing is.
    /// `values` are computed only when several calls are in flight.
    pub fn attribute(&self, values: impl FnOnce() -> RequestValues) -> Option<Attribution> {
        let mut state = self.state();
        self.untracked.expired.inc_by(state.expire(Instant::now()));
        let calls: Vec<&Call> = state.in_flight.values().flatten().collect();
        let named = |call: &Call, by, arguments: bool| Attribution {
            tool: Some(call.tool.clone()),
            by,
            candidates: Vec::new(),
            arguments: arguments.then(|| call.arguments.clone()),
            call: arguments.then(|| call.key.clone()),
            parent: call.span_context(),
            links: Vec::new(),
        };
        if state.incomplete_until.is_some() {
            // A call past the bound may be the cause: what is tracked cannot name it.
            return Some(ambiguous(&calls));
        }
        match calls.as_slice() {
            [] => return None,
            [only] => return Some(named(only, By::OnlyCall, true)),
            _ => {}
        }
        if calls.iter().all(|c| c.tool == calls[0].tool) {
            // Which of the tool's calls it was is not known: nothing is learned of arguments,
            // and its span is the oldest call's.
            let oldest = calls.iter().min_by_key(|c| c.began).unwrap_or(&calls[0]);
            return Some(named(oldest, By::OnlyTool, false));
        }
        let values = values();
        let matched: Vec<Vec<&String>> = calls
            .iter()
            .map(|c| c.values.iter().filter(|v| values.0.contains(*v)).collect())
            .collect();
        // A value found in the request that this call holds and no other call does, long
        // enough to tell (`1` or `ab` are found in many a request by chance: a page, a flag).
        let telling = |i: usize| {
            matched[i].iter().any(|v| {
                v.chars().count() >= MIN_TELLING_CHARS
                    && (0..calls.len())
                        .filter(|j| *j != i)
                        .all(|j| !calls[j].values.contains(v))
            })
        };
        let told: Vec<usize> = (0..calls.len()).filter(|i| telling(*i)).collect();
        let told_tools: BTreeSet<&Arc<str>> = told.iter().map(|i| &calls[*i].tool).collect();
        if told_tools.len() == 1 {
            // The call itself is known only when one call was told apart.
            return Some(named(calls[told[0]], By::Arguments, told.len() == 1));
        }
        let best = matched.iter().map(Vec::len).max().unwrap_or(0);
        let fit: Vec<&Call> = (0..calls.len())
            .filter(|i| matched[*i].len() == best)
            .map(|i| calls[i])
            .collect();
        Some(ambiguous(&fit))
    }

    /// The tool reached `operation` of the sidecar's API `api` (its index); `true` when the
    /// map did not know it yet.
    pub fn learn(&self, api: usize, tool: &str, operation: &str) -> bool {
        let tool = &tool[..tool.floor_char_boundary(MAX_TOOL_NAME_BYTES)];
        let mut state = self.state();
        if !state.learned.contains_key(tool) && state.learned.len() >= MAX_TOOLS {
            return false;
        }
        let reached = state.learned.entry(tool.to_string()).or_default();
        let new = reached.len() < MAX_OPERATIONS && reached.insert((api, operation.to_string()));
        drop(state);
        if new {
            self.learned_changed.notify_one();
        }
        new
    }

    /// Each tool that reached an operation of API `api` so far, with those operations.
    pub fn learned(&self, api: usize) -> BTreeMap<String, BTreeSet<String>> {
        let state = self.state();
        let of_api = |ops: &BTreeSet<(usize, String)>| -> BTreeSet<String> {
            ops.iter()
                .filter(|(a, _)| *a == api)
                .map(|(_, op)| op.clone())
                .collect()
        };
        (state.learned.iter())
            .map(|(tool, ops)| (tool.clone(), of_api(ops)))
            .filter(|(_, ops)| !ops.is_empty())
            .collect()
    }

    /// What the tool's server did with the arguments of a call tied to a request; `true` when
    /// the tool's bindings grew (the live catalog check runs again).
    pub fn learn_bindings(
        &self,
        tool: &str,
        found: Vec<(String, crate::mcp::bindings::Bound)>,
    ) -> bool {
        if found.is_empty() {
            return false;
        }
        let tool = &tool[..tool.floor_char_boundary(MAX_TOOL_NAME_BYTES)];
        let mut state = self.state();
        if !state.learned.contains_key(tool) {
            return false;
        }
        let grew = state
            .bindings
            .entry(tool.to_string())
            .or_default()
            .take(found);
        drop(state);
        if grew {
            self.learned_changed.notify_one();
        }
        grew
    }

    /// Each tool's learned bindings.
    pub fn bindings(&self) -> BTreeMap<String, crate::mcp::bindings::Learned> {
        self.state().bindings.clone()
    }

    pub fn untracked(&self) -> u64 {
        self.untracked.bound.get()
    }

    /// Calls let go unanswered after [`CALL_TTL`] so far.
    pub fn expired(&self) -> u64 {
        self.untracked.expired.get()
    }
}

/// The learned map as a `tools --map` file: a tool that reached one operation maps to it, one
/// that reached several is composite (`operations`); what its server was seen doing with its
/// arguments is its `bind`, `rename`, `nests` and `joins`.
pub fn map_toml(
    learned: &BTreeMap<String, BTreeSet<String>>,
    bindings: &BTreeMap<String, crate::mcp::bindings::Learned>,
) -> String {
    let mut out = String::from(
        "# Learned by driftwatch from the server's own traffic: the operations each tool called,\n# and what its server does with each argument.\n[tools]\n",
    );
    let quote = |s: &str| Value::String(s.to_string()).to_string();
    let table = |map: &BTreeMap<String, String>| {
        let pairs: Vec<String> = map
            .iter()
            .map(|(k, v)| format!("{} = {}", quote(k), quote(v)))
            .collect();
        format!("{{ {} }}", pairs.join(", "))
    };
    for (tool, operations) in learned {
        let ops: Vec<String> = operations.iter().map(|o| quote(o)).collect();
        let mut parts = vec![match ops.as_slice() {
            [one] => format!("operation = {one}"),
            _ => format!("operations = [{}]", ops.join(", ")),
        }];
        let bound = bindings.get(tool).filter(|b| !b.is_empty());
        if let Some(b) = bound {
            for (key, map) in [
                ("bind", &b.bind),
                ("rename", &b.rename),
                ("nests", &b.nests),
            ] {
                if !map.is_empty() {
                    parts.push(format!("{key} = {}", table(map)));
                }
            }
            for (key, list) in [
                ("joins", &b.joins),
                ("supplied", &b.supplied),
                ("headers", &b.headers),
            ] {
                if !list.is_empty() {
                    let items: Vec<String> = list.iter().map(|j| quote(j)).collect();
                    parts.push(format!("{key} = [{}]", items.join(", ")));
                }
            }
        }
        let entry = match (ops.as_slice(), bound) {
            ([one], None) => one.clone(),
            _ => format!("{{ {} }}", parts.join(", ")),
        };
        out.push_str(&format!("{} = {entry}\n", quote(tool)));
    }
    out
}

/// The values a request carries, as text: path parameter values and query values
/// percent-decoded, body scalars. Bounded by the request, which the proxy already bounds.
#[derive(Debug, Default)]
pub struct RequestValues(HashSet<String>);

impl RequestValues {
    /// `template` is the routed operation's path template: the path's literal segments (and
    /// a base path before them) are the API's words, not a call's values, and a call whose
    /// arguments repeat them must not win the request.
    pub fn of(path_and_query: &str, template: Option<&str>, body: Option<&[u8]>) -> RequestValues {
        let mut set = HashSet::new();
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        set.extend(path_values(path, template).into_iter().map(decode));
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let value = pair.split_once('=').map_or("", |(_, v)| v);
            set.insert(decode(&value.replace('+', " ")));
        }
        if let Some(body) = body.and_then(|b| serde_json::from_slice::<Value>(b).ok()) {
            let mut values = Vec::new();
            scalars(&body, &mut values);
            set.extend(values);
        }
        set.remove("");
        RequestValues(set)
    }
}

/// The path's segments that fill the template's parameters: its last segments where they line
/// up with the template, else every segment that is none of the template's literal ones.
fn path_values<'a>(path: &'a str, template: Option<&str>) -> Vec<&'a str> {
    let mut segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let Some(template) = template else {
        return segments;
    };
    let shape: Vec<&str> = template.split('/').filter(|s| !s.is_empty()).collect();
    let is_param = |t: &&str| t.contains('{');
    if let Some(tail) = segments.get(segments.len().saturating_sub(shape.len())..)
        && tail.len() == shape.len()
        && tail.iter().zip(&shape).all(|(s, t)| is_param(t) || s == t)
    {
        let filled = tail.iter().zip(&shape).filter(|(_, t)| is_param(t));
        return filled.map(|(s, _)| *s).collect();
    }
    segments.retain(|s| !shape.contains(s));
    segments
}

/// Strings and numbers anywhere in `value`, as text (not booleans or null: they tell nothing
/// apart). At most `MAX_VALUES`.
fn scalars(value: &Value, out: &mut Vec<String>) {
    if out.len() >= MAX_VALUES {
        return;
    }
    match value {
        Value::String(s) if !s.is_empty() && s.len() <= MAX_VALUE_BYTES => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|v| scalars(v, out)),
        Value::Object(fields) => fields.values().for_each(|v| scalars(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn values(target: &str, body: Option<Value>) -> RequestValues {
        let body = body.map(|b| b.to_string().into_bytes());
        RequestValues::of(target, None, body.as_deref())
    }

    #[test]
    fn one_call_in_flight_is_the_cause_and_none_is_nothing() {
        let calls = Calls::default();
        assert_eq!(calls.attribute(RequestValues::default), None);
        calls.begin(1, &json!(7), "get_page", Some(&json!({"page_id": "a"})));
        let a = calls
            .attribute(|| unreachable!("one call needs no values"))
            .unwrap();
        assert_eq!((a.label(), a.by), ("get_page", By::OnlyCall));
        calls.end(1, &json!(7));
        assert_eq!(calls.attribute(RequestValues::default), None);
    }

    #[test]
    fn overlapping_calls_are_told_apart_by_their_values_or_said_ambiguous() {
        let calls = Calls::default();
        calls.begin(1, &json!(1), "get_page", Some(&json!({"page_id": "p-1"})));
        calls.begin(
            1,
            &json!(2),
            "get_block",
            Some(&json!({"block_id": "b-2", "n": 10})),
        );
        let page = calls.attribute(|| values("/v1/pages/p-1", None)).unwrap();
        assert_eq!((page.label(), page.by), ("get_page", By::Arguments));
        let block = calls
            .attribute(|| values("/v1/blocks/b-2/children?page_size=10", None))
            .unwrap();
        assert_eq!((block.label(), block.by), ("get_block", By::Arguments));
        // Neither call's values: ambiguous, both named.
        let neither = calls.attribute(|| values("/v1/users/me", None)).unwrap();
        assert_eq!((neither.tool.as_deref(), neither.by), (None, By::Ambiguous));
        assert_eq!(
            neither.candidates,
            [Arc::from("get_block"), Arc::from("get_page")]
        );
        assert_eq!(neither.label(), AMBIGUOUS);
    }

    #[test]
    fn calls_whose_values_are_the_same_are_ambiguous_never_a_guess() {
        let calls = Calls::default();
        calls.begin(1, &json!("a"), "get_page", Some(&json!({"id": "x"})));
        calls.begin(2, &json!("a"), "get_block", Some(&json!({"id": "x"})));
        let a = calls
            .attribute(|| values("/v1/things", Some(json!({"id": "x"}))))
            .unwrap();
        assert_eq!(a.by, By::Ambiguous);
        assert_eq!(a.candidates.len(), 2);
        // Two calls of one tool: the tool is known even if the call is not.
        calls.end(2, &json!("a"));
        calls.begin(2, &json!("b"), "get_page", Some(&json!({"id": "y"})));
        let a = calls.attribute(|| values("/v1/x", None)).unwrap();
        assert_eq!((a.label(), a.by), ("get_page", By::OnlyTool));
        calls.end_session(2);
        assert_eq!(calls.in_flight(), 1);
    }

    #[test]
    fn body_and_query_values_count_and_booleans_do_not() {
        let calls = Calls::default();
        calls.begin(
            1,
            &json!(1),
            "search",
            Some(&json!({"query": "drift in", "archived": true})),
        );
        calls.begin(
            1,
            &json!(2),
            "create",
            Some(&json!({"title": "Trip notes", "archived": true, "page": 1})),
        );
        let search = calls.attribute(|| values("/v1/search?q=drift+in&archived=true", None));
        assert_eq!(search.unwrap().label(), "search");
        let create = calls.attribute(|| {
            values(
                "/v1/pages",
                Some(json!({"properties": {"title": ["Trip notes"]}})),
            )
        });
        assert_eq!(create.unwrap().label(), "create");
        // A value too short to tell (a `page=1` the server adds) ties the request to no call.
        let paged = calls
            .attribute(|| values("/v1/search?page=1", None))
            .unwrap();
        assert_eq!(paged.label(), crate::mcp::calls::AMBIGUOUS);
        assert!(paged.arguments.is_none());
    }

    #[test]
    fn each_api_has_its_own_learned_map() {
        let calls = Calls::default();
        assert!(calls.learn(0, "list_issues", "issues/list"));
        assert!(calls.learn(1, "list_issues", "listIssues"));
        assert!(calls.learn(1, "get_board", "getBoard"));
        let names = |api| -> Vec<(String, Vec<String>)> {
            (calls.learned(api).into_iter())
                .map(|(tool, ops)| (tool, ops.into_iter().collect()))
                .collect()
        };
        assert_eq!(
            names(0),
            [("list_issues".into(), vec!["issues/list".into()])]
        );
        assert_eq!(
            names(1),
            [
                ("get_board".into(), vec!["getBoard".into()]),
                ("list_issues".into(), vec!["listIssues".into()])
            ]
        );
        assert!(calls.learned(2).is_empty());
    }

    #[test]
    fn the_learned_map_is_a_tools_map_and_composite_tools_list_every_operation() {
        let calls = Calls::default();
        assert!(calls.learn(0, "get-user", "get-user"));
        assert!(!calls.learn(0, "get-user", "get-user"));
        calls.learn(0, "create_or_update_file", "repos/get-content");
        calls.learn(
            0,
            "create_or_update_file",
            "repos/create-or-update-file-contents",
        );
        let text = map_toml(&calls.learned(0), &calls.bindings());
        let map: crate::catalog::Mapping = toml::from_str(&text).unwrap();
        assert_eq!(map.tools["get-user"].operation.as_deref(), Some("get-user"));
        assert_eq!(
            map.tools["create_or_update_file"].operations,
            ["repos/create-or-update-file-contents", "repos/get-content"]
        );
    }

    /// Issue 50: a request tied to one call teaches where its arguments went; the learned map
    /// says it in the `tools --map` vocabulary. A request only the tool is known for (two of
    /// its calls in flight) teaches nothing of arguments.
    #[test]
    fn a_call_tied_to_its_request_teaches_the_maps_bindings() {
        use crate::mcp::bindings::{Seen, learn};
        let calls = Calls::default();
        let args = json!({"repo": "widgets", "strategy": "squash", "title": "Fix login"});
        calls.begin(1, &json!(1), "merge_pull", Some(&args));
        let seen = || {
            Seen::of(
                "/repositories/{repo_slug}/merge",
                "/repositories/widgets/merge",
                Some(br#"{"merge_strategy": "squash", "title": "Fix login"}"#),
            )
        };
        let attribution = calls.attribute(|| values("/", None)).unwrap();
        let arguments = attribution.arguments.expect("one call in flight");
        calls.learn(0, "merge_pull", "merge");
        assert!(calls.learn_bindings("merge_pull", learn(&arguments, &seen())));
        let text = map_toml(&calls.learned(0), &calls.bindings());
        let map: crate::catalog::Mapping = toml::from_str(&text).unwrap();
        let entry = &map.tools["merge_pull"];
        assert_eq!(entry.operation.as_deref(), Some("merge"));
        assert_eq!(entry.bind["repo"], "repo_slug");
        assert_eq!(entry.rename["strategy"], "merge_strategy");
        assert!(
            !entry.rename.contains_key("title"),
            "sent under its own name: {text}"
        );
        // Two calls of the tool: which one made the request is not known.
        calls.begin(1, &json!(2), "merge_pull", Some(&json!({"repo": "other"})));
        assert_eq!(
            calls.attribute(|| values("/", None)).unwrap().arguments,
            None
        );
    }

    #[test]
    fn past_the_bound_a_call_is_not_tracked_and_no_request_is_named_until_the_calls_expire() {
        let calls = Calls::default();
        for i in 0..MAX_IN_FLIGHT {
            calls.begin(1, &json!(i), "decoy_tool", None);
        }
        // Issue 49, defect 1: a lone call past the bound; its request was named after the
        // stale calls (`only_tool`) and the map learned `decoy_tool`.
        calls.begin(2, &json!(1), "update_channel", None);
        assert_eq!((calls.in_flight(), calls.untracked()), (MAX_IN_FLIGHT, 1));
        let a = calls.attribute(RequestValues::default).unwrap();
        assert_eq!((a.tool.as_deref(), a.by), (None, By::Ambiguous));
        assert!(a.candidates.len() <= MAX_CANDIDATES);
        // CALL_TTL later the stale calls are let go, and a lone call is named again.
        let mut state = calls.state();
        for call in state.in_flight.values_mut().flatten() {
            call.began -= CALL_TTL;
        }
        state.incomplete_until = Some(Instant::now());
        drop(state);
        calls.begin(3, &json!(1), "update_channel", None);
        let a = calls.attribute(RequestValues::default).unwrap();
        assert_eq!((a.label(), a.by), ("update_channel", By::OnlyCall));
        assert_eq!(
            (calls.in_flight(), calls.expired()),
            (1, MAX_IN_FLIGHT as u64)
        );
    }

    /// Issue 49, defect 6: a call whose arguments repeat another call's request values won
    /// `arguments` (the destructive PUT named `get_channel`); and a reused JSON-RPC id
    /// replaced the call in flight, which then took the blame as `only_call`.
    #[test]
    fn arguments_that_repeat_another_calls_values_or_the_apis_words_do_not_win() {
        let calls = Calls::default();
        calls.begin(
            1,
            &json!(1),
            "update_channel",
            Some(&json!({"id": "7", "name": "News"})),
        );
        calls.begin(
            1,
            &json!(2),
            "get_channel",
            Some(&json!({"id": "7", "also": "News", "and": ["api", "v1", "channels"]})),
        );
        let template = Some("/channels/{id}");
        let body = json!({"name": "News"}).to_string();
        let put = calls
            .attribute(|| RequestValues::of("/api/v1/channels/7", template, Some(body.as_bytes())))
            .unwrap();
        assert_eq!(put.by, By::Ambiguous, "{put:?}");
        // A value only one call holds still tells them apart.
        let body = json!({"name": "Sport"}).to_string();
        calls.begin(
            1,
            &json!(3),
            "rename",
            Some(&json!({"id": "7", "name": "Sport"})),
        );
        let rename = calls
            .attribute(|| RequestValues::of("/api/v1/channels/7", template, Some(body.as_bytes())))
            .unwrap();
        assert_eq!((rename.label(), rename.by), ("rename", By::Arguments));

        let calls = Calls::default();
        calls.begin(1, &json!(5), "get_channel", None);
        calls.begin(1, &json!(5), "update_channel", None);
        assert_eq!(calls.in_flight(), 2, "the reused id keeps both calls");
        let a = calls.attribute(RequestValues::default).unwrap();
        assert_eq!(a.by, By::Ambiguous);
        calls.end(1, &json!(5));
        assert_eq!(
            calls.attribute(RequestValues::default),
            None,
            "its answer ends both"
        );
    }

    #[test]
    fn path_values_are_the_templates_parameters() {
        let of = |path, template| {
            let mut v: Vec<String> = RequestValues::of(path, template, None)
                .0
                .into_iter()
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            of(
                "/api/v1/channels/7/items/x%2Fy",
                Some("/channels/{id}/items/{item}")
            ),
            ["7", "x/y"]
        );
        assert_eq!(of("/v1/channels/7", None), ["7", "channels", "v1"]);
        // A parameter spanning segments: every segment but the literal ones.
        assert_eq!(
            of(
                "/repos/o/r/contents/a/b.md",
                Some("/repos/{owner}/{repo}/contents/{path}")
            ),
            ["a", "b.md", "o", "r"]
        );
    }
}
