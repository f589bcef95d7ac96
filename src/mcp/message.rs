//! What an MCP message may hold before it is parsed into values. rmcp parses a JSON-RPC
//! message into `serde_json` values (and again into its own types) before any session check:
//! a 3.6 MB body of empty arrays took 965 MB and 2 s of CPU that way. This pass walks the
//! bytes once with serde_json's own tokenizer, keeping nothing (a string is borrowed or lands
//! in one reused scratch buffer), and refuses a message nested deeper than, or holding more
//! values than, the bounds: its cost is its bytes, whatever their shape.

mod skim;

pub use skim::Skim;

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Why a message was not handed on: the sender's to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not JSON (JSON-RPC's parse error, -32700).
    #[error("not JSON: {0}")]
    Syntax(String),
    #[error("nested deeper than {0} levels (mcp.max_message_depth)")]
    Depth(usize),
    #[error("more than {0} JSON values (mcp.max_message_values)")]
    Values(usize),
    #[error("larger than {0} bytes (mcp.max_message_bytes)")]
    Bytes(usize),
}

impl Refused {
    /// The JSON-RPC error code: -32700 for what is not JSON, -32600 for what is too large.
    pub fn code(&self) -> i32 {
        match self {
            Refused::Syntax(_) => -32700,
            _ => -32600,
        }
    }

    /// The JSON-RPC error object, with a null id (the message was never read for one).
    pub fn json_rpc(&self) -> String {
        json_rpc_error(
            self.code(),
            &format!("driftwatch refused the message: {self}"),
        )
    }
}

/// A JSON-RPC id as a key to hold (its JSON text): a string or a number of at most
/// `MAX_TEXT` bytes as text, else `None`. A string id is measured before it is written out, so
/// a 4 MiB id costs no copy.
pub fn small_id(id: &serde_json::Value) -> Option<String> {
    use crate::telemetry::MAX_TEXT;
    let fits = match id {
        serde_json::Value::String(s) => s.len() <= MAX_TEXT,
        serde_json::Value::Number(_) => true,
        _ => false,
    };
    let key = fits.then(|| id.to_string())?;
    (key.len() <= MAX_TEXT).then_some(key)
}

/// A JSON-RPC error answering a message whose id is not known (`"id": null`).
pub fn json_rpc_error(code: i32, message: &str) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
        .to_string()
}

/// The bounds a message is held to.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub depth: usize,
    pub values: usize,
    pub bytes: usize,
}

/// `Ok` when `bytes` is one JSON text within `limits`.
pub fn check(bytes: &[u8], limits: Limits) -> Result<(), Refused> {
    if bytes.len() > limits.bytes {
        return Err(Refused::Bytes(limits.bytes));
    }
    let walk = Walk {
        limits,
        values: Cell::new(0),
        refused: Cell::new(None),
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let walked = Level {
        walk: &walk,
        depth: 0,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    match (walked, walk.refused.take()) {
        (_, Some(refused)) => Err(refused),
        (Err(e), None) => Err(Refused::Syntax(e.to_string())),
        (Ok(()), None) => Ok(()),
    }
}

struct Walk {
    limits: Limits,
    values: Cell<usize>,
    /// Set when a bound, not the syntax, stopped the walk.
    refused: Cell<Option<Refused>>,
}

impl Walk {
    fn count<E: serde::de::Error>(&self) -> Result<(), E> {
        let n = self.values.get() + 1;
        self.values.set(n);
        if n > self.limits.values {
            return Err(self.refuse(Refused::Values(self.limits.values)));
        }
        Ok(())
    }

    fn refuse<E: serde::de::Error>(&self, refused: Refused) -> E {
        let error = E::custom(&refused);
        self.refused.set(Some(refused));
        error
    }
}

/// One value at `depth`.
#[derive(Clone, Copy)]
struct Level<'w> {
    walk: &'w Walk,
    depth: usize,
}

impl Level<'_> {
    fn inside<E: serde::de::Error>(self) -> Result<Self, E> {
        let depth = self.depth + 1;
        if depth > self.walk.limits.depth {
            return Err(self.walk.refuse(Refused::Depth(self.walk.limits.depth)));
        }
        Ok(Level { depth, ..self })
    }
}

impl<'de> DeserializeSeed<'de> for Level<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Level<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.walk.count()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.walk.count()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.walk.count()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.walk.count()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.walk.count()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.walk.count()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.walk.count()?;
        let item = self.inside()?;
        while seq.next_element_seed(item)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.walk.count()?;
        let value = self.inside()?;
        while map.next_key::<IgnoredAny>()?.is_some() {
            // A key is a value the parse keeps too.
            self.walk.count()?;
            map.next_value_seed(value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        depth: 8,
        values: 100,
        bytes: 4096,
    };

    #[test]
    fn a_message_within_the_bounds_passes_and_one_past_any_is_refused() {
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,2.5,"s\n",true,null]}}}"#;
        assert_eq!(check(call, LIMITS), Ok(()));
        let deep = format!("{}{}", "[".repeat(9), "]".repeat(9));
        assert_eq!(check(deep.as_bytes(), LIMITS), Err(Refused::Depth(8)));
        let eight = format!("{}{}", "[".repeat(8), "]".repeat(8));
        assert_eq!(check(eight.as_bytes(), LIMITS), Ok(()));
        let wide = format!("[{}]", vec!["[]"; 100].join(","));
        assert_eq!(check(wide.as_bytes(), LIMITS), Err(Refused::Values(100)));
        let keys = format!(
            "{{{}}}",
            (0..50)
                .map(|i| format!("\"k{i}\":0"))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert_eq!(
            check(keys.as_bytes(), LIMITS),
            Err(Refused::Values(100)),
            "keys count"
        );
        assert_eq!(check(&[b' '; 4097], LIMITS), Err(Refused::Bytes(4096)));
        for bad in [&b"{"[..], b"[1,]", b"{} {}", b"", b"\"\\x\""] {
            assert!(
                matches!(check(bad, LIMITS), Err(Refused::Syntax(_))),
                "{bad:?}"
            );
        }
        let error: serde_json::Value = serde_json::from_str(&Refused::Depth(8).json_rpc()).unwrap();
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (serde_json::Value::Null, (-32600).into())
        );
    }

    #[test]
    fn an_id_is_held_by_its_text_only_when_small() {
        use serde_json::json;
        assert_eq!(small_id(&json!(7)).as_deref(), Some("7"));
        assert_eq!(small_id(&json!("a")).as_deref(), Some("\"a\""));
        let big = "x".repeat(crate::telemetry::MAX_TEXT + 1);
        assert_eq!(small_id(&json!(big)), None);
        // Within the bound as a string, past it as JSON text (two quotes): not held either.
        let edge = "x".repeat(crate::telemetry::MAX_TEXT - 1);
        assert_eq!(small_id(&json!(edge)), None);
        assert_eq!(small_id(&json!({"id": 1})), None);
        assert_eq!(small_id(&json!(null)), None);
    }
}
