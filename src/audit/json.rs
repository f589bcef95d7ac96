//! The one JSON parse of every body the audit reads (a request's, a response's, the one the
//! silent-clear memory remembers): serde_json's own `Value`, the same value and the same
//! errors, built with less work. Two costs of `serde_json::from_slice::<Value>` are avoidable:
//! it checks each string's UTF-8 on its own (`from_utf8` was 5 % of a response audit), and it
//! grows each object's map from empty, rehashing as it goes (6 %). Here the body's UTF-8 is
//! checked once, and an object's members are gathered first, so that its map is allocated at
//! its size. Text that is not UTF-8 goes to `serde_json::from_slice`, so its error is the one
//! serde_json gives.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// `body` parsed as `serde_json::from_slice::<Value>` would parse it.
pub fn parse(body: &[u8]) -> Result<Value, serde_json::Error> {
    let Ok(text) = std::str::from_utf8(body) else {
        return serde_json::from_slice(body);
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Build.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Builds a `Value` node by node, as serde_json's own visitor does, but for the map's size.
#[derive(Clone, Copy)]
struct Build;

impl<'de> DeserializeSeed<'de> for Build {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Number(i.into()))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(Value::Number(u.into()))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(Number::from_f64(f).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Build)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        // Room for a typical resource's members, so that gathering them reallocates once at
        // most (from empty it did four times for a 30-member channel).
        let mut members: Vec<(String, Value)> = Vec::with_capacity(16);
        while let Some(key) = access.next_key::<String>()? {
            members.push((key, access.next_value_seed(Build)?));
        }
        // Allocated at its size; a key written twice keeps its first place and its last
        // value, as serde_json's own map does.
        let mut map = Map::with_capacity(members.len());
        map.extend(members);
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same value as serde_json's, member order included, and the same error text.
    fn same(text: &[u8]) {
        let ours = parse(text).map_err(|e| e.to_string());
        let theirs = serde_json::from_slice::<Value>(text).map_err(|e| e.to_string());
        assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(text));
        if let (Ok(Value::Object(a)), Ok(Value::Object(b))) = (&ours, &theirs) {
            assert!(a.keys().eq(b.keys()), "member order");
        }
    }

    #[test]
    fn values_and_errors_are_serde_jsons() {
        let cases: [&[u8]; 20] = [
            br#"{"b": 1, "a": [1, -2, 3.5, 1e3, 18446744073709551615, -9223372036854775808], "c": {"d": null, "e": true}}"#,
            br#"{"a": 1, "b": 2, "a": 3}"#,
            br#""caf\u00e9 \ud83d\ude00 \n""#,
            "\"é and 日本\"".as_bytes(),
            b"[]",
            b"{}",
            b"  7  ",
            b"1e400",
            b"-0",
            b"0.1",
            b"[1, 2",
            b"{\"a\" 1}",
            b"{\"a\": 1} x",
            b"",
            b"nul",
            b"\"\xff\"",
            b"{\"\xc3\x28\": 1}",
            b"\"\\ud800\"",
            b"[1,]",
            b"{\"a\":1,}",
        ];
        for case in cases {
            same(case);
        }
        same(&[b'['; 200]);
        let deep = format!("{}1{}", "[".repeat(127), "]".repeat(127));
        same(deep.as_bytes());
    }
}
