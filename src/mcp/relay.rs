//! What the MCP relay reads of the messages it passes on unchanged: a `tools/call` going to the
//! server begins a call, its answer (or `notifications/cancelled`) ends it, and the answer to
//! a `tools/list` is the catalog the server serves. Each message is held to the MCP message
//! bounds before it is parsed; one that is not is passed on unread, skimmed only for the ids
//! of the answers it holds (`message::Skim`), which end their calls all the same. Pure: the
//! stdio relay and the HTTP front feed it bytes.
//!
//! The one change made to what passes: the answer to a call whose API request driftwatch
//! refused, when the server's result does not carry the refusal (most MCP servers pass on only
//! "Request failed with status code 409"), gains one text item saying what was refused and
//! why, and is marked `isError`; the agent can then act on it instead of retrying the same
//! call. Off with `mcp.explain_refusals = false`.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use super::call_span::{CallTrace, TOOLS_CALL};
use super::calls::Calls;
use super::message::{Limits, Refused, Skim, check};
use super::trace_meta;
use crate::telemetry::{MAX_TEXT, Propagation, SpanContext, context};

/// `tools/list` requests awaiting their answer, per session; past it one is not followed.
const MAX_LISTS: usize = 64;

/// One MCP session's reading: which of its requests were `tools/list`.
pub struct Session {
    pub id: u64,
    lists: HashSet<String>,
    limits: Limits,
    /// A refused call's answer says why (`mcp.explain_refusals`).
    explain: bool,
    /// What each call's span says of the session (its transport and protocol version).
    trace: CallTrace,
}

/// What a message from the server was, for the relay.
#[derive(Debug, Default)]
pub struct Answered {
    /// The result of a `tools/list` it answers.
    pub listed: Option<Value>,
    /// The message to pass on instead, where a refused call's answer now says why.
    pub rewritten: Option<Vec<u8>>,
    /// It was past a bound other than its bytes (depth, values) and may have answered a
    /// `tools/list`, whose catalog then goes unchecked.
    pub unread_list: Option<Refused>,
}

/// Every problem driftwatch answers with is typed under this: a result carrying it passed
/// the refusal on.
const PROBLEM_TYPE: &str = "urn:driftwatch:problem";

impl Session {
    pub fn new(id: u64, limits: Limits, explain: bool) -> Session {
        Session {
            id,
            lists: HashSet::new(),
            limits,
            explain,
            trace: CallTrace {
                transport: "pipe",
                ..CallTrace::default()
            },
        }
    }

    /// The session's calls come over HTTP (the front).
    pub fn over_http(mut self) -> Session {
        self.trace.transport = "tcp";
        self
    }

    /// A message from the client (one JSON-RPC message or a batch): each request and
    /// notification gets its span (traced), and the message to pass on instead comes back
    /// when a request's `params._meta` now names driftwatch's span (`telemetry.propagation`
    /// other than `never`: its `traceparent` replaced, or added where there was none).
    pub fn from_client(&mut self, calls: &Calls, bytes: &[u8]) -> Option<Vec<u8>> {
        let spans: Vec<(usize, SpanContext)> = (self.messages(bytes).iter().enumerate())
            .filter_map(|(at, m)| Some((at, self.client_message(calls, m)?)))
            .collect();
        let inject = match calls.propagation()? {
            Propagation::Always | Propagation::WhenAbsent => !spans.is_empty(),
            Propagation::Never => false,
        };
        inject
            .then(|| trace_meta::with_spans(bytes, &spans))
            .flatten()
    }

    /// One message from the client, read: the span of a request, whose context comes back.
    fn client_message(&mut self, calls: &Calls, m: &Value) -> Option<SpanContext> {
        let method = m.get("method").and_then(Value::as_str)?;
        let id = m.get("id").filter(|id| !id.is_null());
        let params = m.get("params");
        if method == "initialize" {
            let version = params.and_then(|p| p.get("protocolVersion"));
            // Cut once here, not per span: every message of the session carries it.
            let version = version.and_then(Value::as_str);
            self.trace.protocol = version.map(|v| Arc::from(&v[..v.floor_char_boundary(MAX_TEXT)]));
        }
        let trace = CallTrace {
            parent: (calls.traced_calls())
                .then(|| context::from_meta(params.and_then(|p| p.get("_meta"))))
                .flatten(),
            ..self.trace.clone()
        };
        match (method, id) {
            (TOOLS_CALL, Some(id)) => {
                let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
                let arguments = params.and_then(|p| p.get("arguments"));
                let name = name.unwrap_or_default();
                return calls.begin_traced(self.id, id, name, arguments, &trace);
            }
            ("tools/list", Some(id)) if self.lists.len() < MAX_LISTS => {
                if let Some(key) = super::message::small_id(id) {
                    self.lists.insert(key);
                }
            }
            ("notifications/cancelled", None) => {
                if let Some(id) = params.and_then(|p| p.get("requestId")) {
                    calls.end(self.id, id);
                }
            }
            _ => {}
        }
        match id {
            Some(id) => calls.begin_request((self.id, id), method, &trace),
            None => {
                calls.notified(method, &trace);
                None
            }
        }
    }

    /// A message from the server: the end of the calls it answers, the catalog of a
    /// `tools/list` answer, and a refused call's answer made to say why.
    pub fn from_server(&mut self, calls: &Calls, bytes: &[u8]) -> Answered {
        let mut answered = Answered::default();
        let (mut messages, batch) = match self.parsed(bytes) {
            Ok(parsed) => parsed,
            // Past the byte bound a relay never holds a message whole: it skims it as it
            // passes, and tells `unread`.
            Err(Some(refused @ (Refused::Depth(_) | Refused::Values(_)))) => {
                let mut skim = Skim::default();
                skim.feed(bytes);
                answered.unread_list = self.unread(calls, skim.answered()).then_some(refused);
                return answered;
            }
            Err(_) => return answered,
        };
        let mut changed = false;
        for m in &mut messages {
            if m.get("method").is_some() {
                continue; // the server's own request or notification
            }
            let Some(id) = m.get("id") else { continue };
            let refusal = calls.answered(self.id, id, Some(m));
            if self.lists.remove(&id.to_string())
                && let Some(result) = m.get("result")
            {
                answered.listed = Some(result.clone());
            }
            if let Some(said) = refusal.filter(|_| self.explain) {
                changed |= explain(m, &said);
            }
        }
        if changed {
            let whole = if batch {
                Value::Array(messages)
            } else {
                messages.swap_remove(0)
            };
            let mut out = whole.to_string().into_bytes();
            // The message's own ending (a stdio line's newline) is kept.
            let text_end = bytes.iter().rposition(|b| !b.is_ascii_whitespace());
            out.extend_from_slice(&bytes[text_end.map_or(0, |i| i + 1)..]);
            answered.rewritten = Some(out);
        }
        answered
    }

    /// A message from the server went by unread (past the bounds), `answered` the ids its
    /// skim found (`None`: it could not be read for them). The calls it answers end, as a
    /// read answer ends them; whether it may have been a `tools/list` answer comes back: one
    /// whose id was found, or, with no ids found, any list awaiting its answer.
    pub fn unread(&mut self, calls: &Calls, answered: Option<Vec<Value>>) -> bool {
        let Some(ids) = answered else {
            return !self.lists.is_empty();
        };
        let mut listed = false;
        for id in ids {
            calls.end(self.id, &id);
            listed |= self.lists.remove(&id.to_string());
        }
        listed
    }

    fn messages(&self, bytes: &[u8]) -> Vec<Value> {
        self.parsed(bytes).map(|(m, _)| m).unwrap_or_default()
    }

    /// The messages within the bounds, and whether they came as a batch; else the bound it
    /// was past (`None`: not JSON-RPC).
    fn parsed(&self, bytes: &[u8]) -> Result<(Vec<Value>, bool), Option<Refused>> {
        match check(bytes, self.limits) {
            Err(Refused::Syntax(_)) => return Err(None),
            Err(refused) => return Err(Some(refused)),
            Ok(()) => {}
        }
        match serde_json::from_slice(bytes) {
            Ok(Value::Array(batch)) => Ok((batch, true)),
            Ok(one @ Value::Object(_)) => Ok((vec![one], false)),
            _ => Err(None),
        }
    }
}

/// An answer that does not carry driftwatch's refusal (no `urn:driftwatch:problem` anywhere in
/// it) gains it: a tool result keeps its content and gains one text item, `isError` set; a
/// JSON-RPC error (what some servers make of a failed API call) keeps its code and has the
/// refusal added to its message.
fn explain(message: &mut Value, said: &str) -> bool {
    if message.to_string().contains(PROBLEM_TYPE) {
        return false;
    }
    if let Some(error) = message.get_mut("error").and_then(Value::as_object_mut) {
        let text = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let text = match text.is_empty() {
            true => said.to_string(),
            false => format!("{text}; {said}"),
        };
        error.insert("message".into(), Value::String(text));
        return true;
    }
    let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) else {
        return false;
    };
    let item = serde_json::json!({"type": "text", "text": said});
    match result.get_mut("content").and_then(Value::as_array_mut) {
        Some(content) => content.push(item),
        None => {
            result.insert("content".into(), Value::Array(vec![item]));
        }
    }
    result.insert("isError".into(), Value::Bool(true));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::calls::By;

    const LIMITS: Limits = Limits {
        depth: 64,
        values: 10_000,
        bytes: 1 << 20,
    };

    #[test]
    fn a_call_is_in_flight_from_its_request_to_its_answer_and_a_list_answer_is_given_back() {
        let calls = Calls::default();
        let mut s = Session::new(1, LIMITS, true);
        s.from_client(&calls, br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_me","arguments":{}}}"#);
        assert_eq!(calls.in_flight(), 1);
        // A notification from the server ends nothing.
        let notified = s.from_server(
            &calls,
            br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
        );
        assert!(notified.listed.is_none() && notified.rewritten.is_none());
        assert_eq!(calls.in_flight(), 1);
        let answered = s.from_server(
            &calls,
            br#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#,
        );
        assert!(answered.listed.is_none() && answered.rewritten.is_none());
        assert_eq!(calls.in_flight(), 0);

        s.from_client(
            &calls,
            br#"[{"jsonrpc":"2.0","id":"l","method":"tools/list"}]"#,
        );
        let listed = s.from_server(
            &calls,
            br#"{"jsonrpc":"2.0","id":"l","result":{"tools":[{"name":"a"}]}}"#,
        );
        assert_eq!(listed.listed.unwrap()["tools"][0]["name"], "a");
    }

    #[test]
    fn a_refused_calls_answer_says_why_unless_it_already_does() {
        let calls = Calls::default();
        let mut s = Session::new(1, LIMITS, true);
        let call = |id: u32| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t"}}}}"#
            )
        };
        let refuse = |id: u32| calls.refused(&(1, id.to_string()), "driftwatch refused it: why");
        s.from_client(&calls, call(1).as_bytes());
        refuse(1);
        let server = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"Request failed with status code 409\"}]}}\r\n";
        let out = s.from_server(&calls, server.as_bytes()).rewritten.unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.ends_with("}\r\n"),
            "the line's ending is kept: {text:?}"
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["result"]["isError"], true);
        assert_eq!(
            v["result"]["content"][0]["text"],
            "Request failed with status code 409"
        );
        assert_eq!(
            v["result"]["content"][1]["text"],
            "driftwatch refused it: why"
        );
        // A result that passed the problem on, and an unrefused call, pass unchanged.
        s.from_client(&calls, call(2).as_bytes());
        refuse(2);
        let carried = r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"{\"type\":\"urn:driftwatch:problem:409\"}"}]}}"#;
        assert!(
            s.from_server(&calls, carried.as_bytes())
                .rewritten
                .is_none()
        );
        s.from_client(&calls, call(3).as_bytes());
        let clean = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#;
        assert!(s.from_server(&calls, clean.as_bytes()).rewritten.is_none());
        // A JSON-RPC error keeps its code and says why in its message.
        s.from_client(&calls, call(5).as_bytes());
        refuse(5);
        let error =
            r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"failed: 422  []"}}"#;
        let out = s.from_server(&calls, error.as_bytes()).rewritten.unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["error"]["code"], -32603);
        assert_eq!(
            v["error"]["message"],
            "failed: 422  []; driftwatch refused it: why"
        );
        // Turned off, a refused call's answer passes unchanged.
        let mut quiet = Session::new(1, LIMITS, false);
        quiet.from_client(&calls, call(4).as_bytes());
        refuse(4);
        let answer = r#"{"jsonrpc":"2.0","id":4,"result":{"content":[]}}"#;
        assert!(
            quiet
                .from_server(&calls, answer.as_bytes())
                .rewritten
                .is_none()
        );
    }

    /// Issue 64, r01: an answer past the bounds went by unread and its call stayed in flight,
    /// so every lone call after it was `ambiguous` until it expired.
    #[test]
    fn an_answer_passed_on_unread_ends_the_calls_it_answers() {
        let calls = Calls::default();
        let mut s = Session::new(1, LIMITS, true);
        let call = |id: u32| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t"}}}}"#
            )
        };
        s.from_client(&calls, call(1).as_bytes());
        s.from_client(
            &calls,
            br#"{"jsonrpc":"2.0","id":"l","method":"tools/list"}"#,
        );
        // Past the byte bound the relay skims it as it passes.
        assert!(!s.unread(&calls, Some(vec![1.into()])), "not the list's");
        s.from_client(&calls, call(2).as_bytes());
        let a = calls.attribute(Default::default).unwrap();
        assert_eq!((a.label(), a.by), ("t", By::OnlyCall));
        // No id found: nothing ends, and the list awaiting may have been it.
        assert!(s.unread(&calls, None));
        assert_eq!(calls.in_flight(), 1);
        assert!(s.unread(&calls, Some(vec!["l".into()])), "the list's");
        assert!(!s.unread(&calls, None), "no list awaits");
        // Past the values bound, held whole: skimmed here.
        let wide = format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":[{}]}}"#,
            ["0"; 10_000].join(",")
        );
        let answered = s.from_server(&calls, wide.as_bytes());
        assert_eq!(calls.in_flight(), 0);
        assert!(answered.unread_list.is_none() && answered.listed.is_none());
        s.from_client(
            &calls,
            br#"{"jsonrpc":"2.0","id":"l2","method":"tools/list"}"#,
        );
        let wide = wide.replace(r#""id":2"#, r#""id":"l2""#);
        let answered = s.from_server(&calls, wide.as_bytes());
        assert_eq!(answered.unread_list, Some(Refused::Values(10_000)));
    }

    #[test]
    fn a_cancelled_call_ends_and_a_message_past_the_bounds_is_not_read() {
        let calls = Calls::default();
        let mut s = Session::new(1, LIMITS, true);
        s.from_client(
            &calls,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
        );
        s.from_client(
            &calls,
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        );
        assert_eq!(calls.in_flight(), 0);
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        s.from_client(&calls, deep.as_bytes());
        s.from_client(&calls, b"not json");
        assert_eq!(calls.in_flight(), 0);
    }
}
