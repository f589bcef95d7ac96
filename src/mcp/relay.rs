//! What the MCP relay reads of the messages it passes on unchanged: a `tools/call` going to the
//! server begins a call, its answer (or `notifications/cancelled`) ends it, and the answer to
//! a `tools/list` is the catalog the server serves. Each message is held to the MCP message
//! bounds before it is parsed; one that is not is passed on unread. Pure: the stdio relay and
//! the HTTP front feed it bytes.

use std::collections::HashSet;

use serde_json::Value;

use super::calls::Calls;
use super::message::{Limits, check};

/// `tools/list` requests awaiting their answer, per session; past it one is not followed.
const MAX_LISTS: usize = 64;

/// One MCP session's reading: which of its requests were `tools/list`.
pub struct Session {
    pub id: u64,
    lists: HashSet<String>,
    limits: Limits,
}

impl Session {
    pub fn new(id: u64, limits: Limits) -> Session {
        Session {
            id,
            lists: HashSet::new(),
            limits,
        }
    }

    /// A message from the client (one JSON-RPC message or a batch).
    pub fn from_client(&mut self, calls: &Calls, bytes: &[u8]) {
        for m in self.messages(bytes) {
            let method = m.get("method").and_then(Value::as_str);
            let id = m.get("id").filter(|id| !id.is_null());
            let params = m.get("params");
            match (method, id) {
                (Some("tools/call"), Some(id)) => {
                    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
                    let arguments = params.and_then(|p| p.get("arguments"));
                    calls.begin(self.id, id, name.unwrap_or_default(), arguments);
                }
                (Some("tools/list"), Some(id)) if self.lists.len() < MAX_LISTS => {
                    self.lists.insert(id.to_string());
                }
                (Some("notifications/cancelled"), None) => {
                    if let Some(id) = params.and_then(|p| p.get("requestId")) {
                        calls.end(self.id, id);
                    }
                }
                _ => {}
            }
        }
    }

    /// A message from the server; gives back the result of a `tools/list` it answers.
    pub fn from_server(&mut self, calls: &Calls, bytes: &[u8]) -> Option<Value> {
        let mut listed = None;
        for mut m in self.messages(bytes) {
            if m.get("method").is_some() {
                continue; // the server's own request or notification
            }
            let Some(id) = m.get("id") else { continue };
            calls.end(self.id, id);
            if self.lists.remove(&id.to_string())
                && let Some(result) = m.get_mut("result")
            {
                listed = Some(result.take());
            }
        }
        listed
    }

    /// Whether a `tools/list` of this session awaits its answer: one past the bounds went by
    /// unread may have been it.
    pub fn awaits_list(&self) -> bool {
        !self.lists.is_empty()
    }

    fn messages(&self, bytes: &[u8]) -> Vec<Value> {
        if check(bytes, self.limits).is_err() {
            return Vec::new();
        }
        match serde_json::from_slice(bytes) {
            Ok(Value::Array(batch)) => batch,
            Ok(one @ Value::Object(_)) => vec![one],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        depth: 64,
        values: 10_000,
        bytes: 1 << 20,
    };

    #[test]
    fn a_call_is_in_flight_from_its_request_to_its_answer_and_a_list_answer_is_given_back() {
        let calls = Calls::default();
        let mut s = Session::new(1, LIMITS);
        s.from_client(&calls, br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_me","arguments":{}}}"#);
        assert_eq!(calls.in_flight(), 1);
        // A notification from the server ends nothing.
        assert_eq!(
            s.from_server(
                &calls,
                br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#
            ),
            None
        );
        assert_eq!(calls.in_flight(), 1);
        assert_eq!(
            s.from_server(
                &calls,
                br#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#
            ),
            None
        );
        assert_eq!(calls.in_flight(), 0);

        s.from_client(
            &calls,
            br#"[{"jsonrpc":"2.0","id":"l","method":"tools/list"}]"#,
        );
        let listed = s.from_server(
            &calls,
            br#"{"jsonrpc":"2.0","id":"l","result":{"tools":[{"name":"a"}]}}"#,
        );
        assert_eq!(listed.unwrap()["tools"][0]["name"], "a");
    }

    #[test]
    fn a_cancelled_call_ends_and_a_message_past_the_bounds_is_not_read() {
        let calls = Calls::default();
        let mut s = Session::new(1, LIMITS);
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
