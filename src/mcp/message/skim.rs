//! What is read of a message passed on unread (past the MCP message bounds): the ids of the
//! answers it holds, found as its bytes pass, in a few hundred bytes whatever its size. Without
//! them a call answered past the bound stayed in flight until `CALL_TTL`, and every lone call
//! after it was `ambiguous` (issue 64, r01). The whole message is walked, not its head: the
//! TypeScript SDK writes the id after the result (`{"result": ..., "jsonrpc": "2.0", "id": 7}`).

use serde_json::Value;

/// Bytes of a member's key kept to tell `id` and `method`, escapes and all (`"\u0069d"`).
const MAX_KEY_BYTES: usize = 64;
/// Bytes of an id read; a longer one is not found (its call is let go at `CALL_TTL`).
pub const MAX_ID_BYTES: usize = 1024;
/// Answers a batch may end; past it the batch is not read.
const MAX_ANSWERS: usize = 64;

/// Where a message's member is, at the message's own level.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    Key,
    Colon,
    Value,
}

/// Which member a value belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Member {
    Id,
    Method,
    Other,
}

/// A walk over one message's bytes, fed as they pass.
pub struct Skim {
    /// Objects and arrays open.
    depth: usize,
    /// The depth of a message's members: 1 for a message, 2 in a batch; 0 before the start.
    level: usize,
    string: bool,
    escaped: bool,
    at: At,
    member: Member,
    /// The key, then (for `id`) the value, as they came, within their bounds.
    raw: Vec<u8>,
    /// The key or the id went past its bound.
    long: bool,
    /// This message's id as it came, and whether it has a method (the server's own request).
    id: Option<Vec<u8>>,
    method: bool,
    answers: Vec<Value>,
    /// The top-level value ended.
    ended: bool,
    /// What came is not a JSON-RPC message (or an id past its bound): nothing is trusted.
    lost: bool,
}

impl Default for Skim {
    fn default() -> Skim {
        Skim {
            depth: 0,
            level: 0,
            string: false,
            escaped: false,
            at: At::Key,
            member: Member::Other,
            raw: Vec::new(),
            long: false,
            id: None,
            method: false,
            answers: Vec::new(),
            ended: false,
            lost: false,
        }
    }
}

impl Skim {
    /// Read `bytes`, the message's next ones.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while let Some((&b, rest)) = bytes.split_first() {
            if self.lost {
                return;
            }
            if self.string && !self.keeping() {
                // The bulk of a large message: skip to the next quote or backslash.
                let skip = bytes.iter().position(|&c| c == b'"' || c == b'\\');
                let skip = skip.unwrap_or(bytes.len());
                if skip > 0 && !self.escaped {
                    bytes = &bytes[skip..];
                    continue;
                }
            }
            self.byte(b);
            bytes = rest;
        }
    }

    /// The ids of the answers the message held (`null` ids left out); `None` when it could not
    /// be read for them: not JSON-RPC, cut short, or an id past `MAX_ID_BYTES`.
    pub fn answered(self) -> Option<Vec<Value>> {
        (self.ended && !self.lost).then_some(self.answers)
    }

    /// Whether the bytes now are a key or an id, kept.
    fn keeping(&self) -> bool {
        self.depth == self.level && self.at == At::Key
            || self.member == Member::Id && self.at == At::Value
    }

    fn keep(&mut self, b: u8) {
        let bound = match self.at {
            At::Key => MAX_KEY_BYTES,
            _ => MAX_ID_BYTES,
        };
        match self.raw.len() < bound {
            true => self.raw.push(b),
            false => self.long = true,
        }
    }

    fn byte(&mut self, b: u8) {
        let keeping = self.keeping();
        if self.string {
            if keeping {
                self.keep(b);
            }
            match (std::mem::take(&mut self.escaped), b) {
                (false, b'\\') => self.escaped = true,
                (false, b'"') => {
                    self.string = false;
                    if self.depth == self.level && self.at == At::Key {
                        self.key_read();
                    }
                }
                _ => {}
            }
            return;
        }
        if b.is_ascii_whitespace() {
            return;
        }
        if self.depth < self.level || self.level == 0 {
            return self.between(b);
        }
        if self.depth > self.level {
            if keeping {
                self.keep(b);
            }
            match b {
                b'"' => self.string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => self.depth -= 1,
                _ => {}
            }
            return;
        }
        self.member_byte(b, keeping);
    }

    /// A byte at a message's own level.
    fn member_byte(&mut self, b: u8, keeping: bool) {
        match (self.at, b) {
            (At::Key, b'"') => {
                self.raw.clear();
                self.keep(b);
                self.string = true;
            }
            (At::Colon, b':') => {
                self.at = At::Value;
                self.raw.clear();
            }
            (At::Value, b',') => {
                self.member_read();
                self.at = At::Key;
            }
            (At::Value | At::Key, b'}') => {
                if self.at == At::Value {
                    self.member_read();
                }
                self.message_read();
            }
            (At::Value, _) => {
                if keeping {
                    self.keep(b);
                }
                match b {
                    b'"' => self.string = true,
                    b'{' | b'[' => self.depth += 1,
                    b']' => self.lost = true,
                    _ => {}
                }
            }
            _ => self.lost = true,
        }
    }

    /// A byte outside any message: before it, between a batch's messages, after the end.
    fn between(&mut self, b: u8) {
        match (self.level, self.depth, b) {
            (_, _, _) if self.ended => self.lost = true,
            (0, 0, b'{') => (self.level, self.depth) = (1, 1),
            (0, 0, b'[') => (self.level, self.depth) = (2, 1),
            (2, 1, b'{') => self.depth = 2,
            (2, 1, b',') => {}
            (2, 1, b']') => (self.depth, self.ended) = (0, true),
            _ => self.lost = true,
        }
        if self.depth == self.level {
            (self.at, self.id, self.method) = (At::Key, None, false);
        }
    }

    fn key_read(&mut self) {
        let key = serde_json::from_slice::<String>(&self.raw).ok();
        self.member = match (std::mem::take(&mut self.long), key.as_deref()) {
            (false, Some("id")) => Member::Id,
            (false, Some("method")) => Member::Method,
            _ => Member::Other,
        };
        self.at = At::Colon;
    }

    fn member_read(&mut self) {
        match self.member {
            Member::Id if std::mem::take(&mut self.long) => self.lost = true,
            Member::Id => self.id = Some(std::mem::take(&mut self.raw)),
            Member::Method => self.method = true,
            Member::Other => {}
        }
        self.member = Member::Other;
    }

    /// A message's closing brace: an answer (an id, no method) is noted.
    fn message_read(&mut self) {
        self.depth -= 1;
        if self.level == 1 {
            self.ended = true;
        }
        let id = (self.id.take()).and_then(|raw| serde_json::from_slice::<Value>(&raw).ok());
        match id {
            Some(Value::Null) | None => {}
            Some(_) if self.method => {}
            Some(_) if self.answers.len() >= MAX_ANSWERS => self.lost = true,
            Some(id) => self.answers.push(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn skim(bytes: &[u8], chunk: usize) -> Option<Vec<Value>> {
        let mut skim = Skim::default();
        bytes.chunks(chunk).for_each(|c| skim.feed(c));
        skim.answered()
    }

    #[test]
    fn an_answers_id_is_found_wherever_it_is_and_however_the_bytes_come() {
        let big = "x\\\"}{".repeat(1000);
        let answers = [
            (
                format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"t":"{big}"}}}}"#),
                json!(7),
            ),
            (
                format!(
                    r#"{{"result":{{"content":[{{"text":"{big}","id":1}}]}},"jsonrpc":"2.0","id":"a\"b"}}"#
                ),
                json!("a\"b"),
            ),
            (
                format!(" {{ \"\\u0069d\" : 3.0 , \"error\" : {{\"message\":\"{big}\"}} }}\r\n"),
                json!(3.0),
            ),
        ];
        for (message, id) in answers {
            for chunk in [1, 7, 4096, message.len()] {
                assert_eq!(
                    skim(message.as_bytes(), chunk),
                    Some(vec![id.clone()]),
                    "{chunk}: {message:.80}"
                );
            }
        }
        let batch = r#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"method":"ping"},{"id":null,"error":{}},{"id":[3],"result":1}]"#;
        assert_eq!(skim(batch.as_bytes(), 5), Some(vec![json!(1), json!([3])]));
        // The server's own request or notification ends no call.
        let request = r#"{"method":"sampling/createMessage","params":{"x":"y"},"id":9}"#;
        assert_eq!(skim(request.as_bytes(), 3), Some(vec![]));
    }

    #[test]
    fn what_is_not_a_whole_message_finds_nothing() {
        let long_id = format!(r#"{{"id":"{}","result":{{}}}}"#, "i".repeat(MAX_ID_BYTES));
        let many = format!(
            "[{}]",
            vec![r#"{"id":1,"result":0}"#; MAX_ANSWERS + 1].join(",")
        );
        for bad in [
            r#"{"id":1,"result":{"a":"b"}"#, // cut short
            r#"{"id":1,"result":{}} {"id":2}"#,
            r#"{"id":1,"result":{}]"#,
            "\u{0}\u{1}{\"id\":1}",
            r#"[1,{"id":1,"result":{}}]"#,
            "",
            &long_id,
            &many,
        ] {
            assert_eq!(skim(bad.as_bytes(), 2), None, "{bad:.80}");
        }
        let mut random = Skim::default();
        let mut x: u32 = 1;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            random.feed(&x.to_le_bytes());
        }
        assert_eq!(random.answered(), None);
    }
}
