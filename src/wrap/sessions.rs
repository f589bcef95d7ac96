//! The MCP sessions the front follows, for the `tools/list` answers each awaits. A session id
//! the server gave (a successful answer naming it, as the answer to `initialize` does) is kept
//! apart from ids a client merely sends, and past each kind's bound the least recently used
//! of that kind is let go: made-up ids push out only each other. Before (issue 64, r07) one
//! table of 1,024 held both, and made-up ids sent between a real `tools/list` and its answer
//! pushed the real session out with the list it awaited: the live check was blind in one run
//! of two.

use std::num::NonZeroUsize;

use lru::LruCache;

use crate::mcp::message::Limits;
use crate::mcp::relay::Session;

/// Sessions followed of each kind; past it the least recently used of that kind is let go
/// (its calls are still followed, and a list it awaited is asked again by the client's next
/// `tools/list`).
pub const MAX_SESSIONS: usize = 1024;

pub struct Sessions {
    /// Requests without a session id: a server without sessions, and each `initialize`.
    sessionless: Session,
    /// Ids the server gave.
    proven: LruCache<u64, Session>,
    /// Ids only a client has sent so far.
    unproven: LruCache<u64, Session>,
    limits: Limits,
    /// A refused call's answer says why (`mcp.explain_refusals`).
    explain: bool,
}

impl Sessions {
    pub fn new(limits: Limits, explain: bool) -> Sessions {
        let bound = NonZeroUsize::new(MAX_SESSIONS).expect("not zero");
        Sessions {
            sessionless: Session::new(0, limits, explain).over_http(),
            proven: LruCache::new(bound),
            unproven: LruCache::new(bound),
            limits,
            explain,
        }
    }

    /// The session `key` (0: none), followed from now on if it was not.
    pub fn get(&mut self, key: u64) -> &mut Session {
        if key == 0 {
            return &mut self.sessionless;
        }
        if self.proven.contains(&key) {
            return self.proven.get_mut(&key).expect("just seen");
        }
        let (limits, explain) = (self.limits, self.explain);
        self.unproven
            .get_or_insert_mut(key, || Session::new(key, limits, explain).over_http())
    }

    /// The server answered naming `key` as its session: it is one of the server's.
    pub fn prove(&mut self, key: u64) {
        if key == 0 || self.proven.get(&key).is_some() {
            return;
        }
        let session = (self.unproven.pop(&key))
            .unwrap_or_else(|| Session::new(key, self.limits, self.explain).over_http());
        self.proven.put(key, session);
    }

    /// The session ended (the client's `DELETE`).
    pub fn end(&mut self, key: u64) {
        self.proven.pop(&key);
        self.unproven.pop(&key);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mcp::calls::Calls;

    const LIMITS: Limits = Limits {
        depth: 64,
        values: 10_000,
        bytes: 1 << 20,
    };

    /// Issue 64, r07: a real session's `tools/list` was in flight when more made-up session
    /// ids than the table holds arrived; its answer then found no list awaited.
    #[test]
    fn made_up_ids_push_out_only_each_other() {
        let (calls, mut sessions) = (Calls::default(), Sessions::new(LIMITS, true));
        let list = br#"{"jsonrpc":"2.0","id":"list","method":"tools/list"}"#;
        let answer = br#"{"jsonrpc":"2.0","id":"list","result":{"tools":[]}}"#;
        sessions.prove(7);
        sessions.get(7).from_client(&calls, list);
        sessions.get(0).from_client(&calls, list);
        for made_up in 100..100 + 2 * MAX_SESSIONS as u64 {
            let ping = json!({"jsonrpc": "2.0", "id": made_up, "method": "ping"});
            sessions
                .get(made_up)
                .from_client(&calls, ping.to_string().as_bytes());
        }
        for key in [7, 0] {
            let listed = sessions.get(key).from_server(&calls, answer).listed;
            assert_eq!(listed, Some(json!({"tools": []})), "session {key}");
        }
        assert_eq!(sessions.unproven.len(), MAX_SESSIONS);
        // A made-up id the server answers for becomes the server's, and an ended one goes.
        sessions.prove(100 + 2 * MAX_SESSIONS as u64 - 1);
        assert_eq!(
            (sessions.proven.len(), sessions.unproven.len()),
            (2, MAX_SESSIONS - 1)
        );
        sessions.end(7);
        assert_eq!(sessions.proven.len(), 1);
    }
}
