//! The trace context a request carries to the MCP server in `params._meta` (SEP-414), made
//! driftwatch's own span's as the message passes, so that an instrumented server's spans nest
//! under driftwatch's span of the request rather than beside it. Only the bytes of
//! `traceparent`, and of `tracestate` where driftwatch's differs (cut, or left out with a
//! parent that could not be read), change: the rest of the message passes byte for byte, its
//! spacing, key order and escapes as the client wrote them. Where there is no `_meta` or no
//! `params`, one is added at the start of its object.

use std::collections::HashMap;

use serde_json::value::RawValue;

use crate::telemetry::SpanContext;

/// The message with `params._meta` naming `span` in each of its requests that `spans` lists
/// (by place: 0 for a message that is not a batch); `None` when nothing changed, or when the
/// message is not one an edit can be sure of (a key twice in an object it edits), and never
/// text that does not read as JSON: then the message passes as it came.
pub fn with_spans(bytes: &[u8], spans: &[(usize, SpanContext)]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let messages: Vec<&RawValue> = match serde_json::from_str::<Vec<&RawValue>>(text) {
        Ok(batch) => batch,
        Err(_) => vec![serde_json::from_str::<&RawValue>(text).ok()?],
    };
    let mut edits = Vec::new();
    for (at, span) in spans {
        if let Some(message) = messages.get(*at) {
            edits.extend(edit(text, message, span));
        }
    }
    if edits.is_empty() {
        return None;
    }
    // From the end, so that each edit's place still holds: one message's edits never overlap
    // (`meta_edits`), and messages do not.
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = bytes.to_vec();
    for (start, end, with) in edits {
        out.splice(start..end, with.into_bytes());
    }
    let json = serde_json::from_slice::<serde::de::IgnoredAny>(&out).is_ok();
    (json && out != bytes).then_some(out)
}

/// Bytes `start..end` of the message become the text.
type Edit = (usize, usize, String);

type Members<'a> = HashMap<String, &'a RawValue>;

/// An object's members; `None` for what is not an object, or one that has a key twice (which
/// of the two a server reads is its own choice: editing one could leave it the other).
fn object(raw: &RawValue) -> Option<Members<'_>> {
    let entries: Entries<'_> = serde_json::from_str(raw.get()).ok()?;
    let count = entries.0.len();
    let members: Members<'_> = entries.0.into_iter().collect();
    (members.len() == count).then_some(members)
}

/// An object's members in order, a key twice kept twice.
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Entries<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// Where `raw` starts in `text`, of which it is a part.
fn offset(text: &str, raw: &RawValue) -> usize {
    raw.get().as_ptr() as usize - text.as_ptr() as usize
}

/// The edits that make one message's `params._meta` name `span`: where there is no `params`
/// or no `_meta`, one added at the start of its object.
fn edit(text: &str, message: &RawValue, span: &SpanContext) -> Vec<Edit> {
    let Some(top) = object(message) else {
        return Vec::new();
    };
    let parent = traceparent(span);
    let Some(params) = top.get("params") else {
        let at = offset(text, message) + 1;
        let added = format!(r#""params":{{"_meta":{{"traceparent":{parent}}}}},"#);
        return vec![(at, at, added)];
    };
    let Some(members) = object(params) else {
        return Vec::new();
    };
    let Some(meta) = members.get("_meta") else {
        let at = offset(text, params) + 1;
        let comma = if members.is_empty() { "" } else { "," };
        let added = format!(r#""_meta":{{"traceparent":{parent}}}{comma}"#);
        return vec![(at, at, added)];
    };
    object(meta).map_or_else(Vec::new, |keys| meta_edits(text, meta, &keys, span, parent))
}

/// `_meta`'s edits, which never overlap: the `traceparent` value replaced and the `tracestate`
/// made the span's; without a `traceparent`, the `tracestate` member becomes both (one edit),
/// or, without either, the `traceparent` is added at the start.
fn meta_edits(
    text: &str,
    meta: &RawValue,
    keys: &Members<'_>,
    span: &SpanContext,
    parent: String,
) -> Vec<Edit> {
    let place = |raw: &RawValue| (offset(text, raw), offset(text, raw) + raw.get().len());
    let state = keys.get("tracestate").map(|raw| place(raw));
    match (keys.get("traceparent"), state) {
        (Some(old), state) => {
            let (start, end) = place(old);
            let mut edits = vec![(start, end, parent)];
            edits.extend(state.and_then(|state| trace_state(text, state, span)));
            edits
        }
        (None, Some((start, end))) => {
            let Some(key) = key_start(text.as_bytes(), start) else {
                return Vec::new();
            };
            let mut with = format!(r#""traceparent":{parent}"#);
            if let Some(state) = span.trace_state.as_deref() {
                with.push_str(&format!(
                    r#","tracestate":{}"#,
                    serde_json::Value::from(state)
                ));
            }
            vec![(key, end, with)]
        }
        (None, None) => {
            let at = offset(text, meta) + 1;
            let comma = if keys.is_empty() { "" } else { "," };
            vec![(at, at, format!(r#""traceparent":{parent}{comma}"#))]
        }
    }
}

/// `tracestate` as driftwatch's span has it: unchanged when the same, else its value, or the
/// member taken out when the span has none.
fn trace_state(text: &str, (start, end): (usize, usize), span: &SpanContext) -> Option<Edit> {
    let was: Option<String> = serde_json::from_str(&text[start..end]).ok();
    match span.trace_state.as_deref() {
        Some(state) if was.as_deref() == Some(state) => None,
        Some(state) => Some((start, end, serde_json::Value::from(state).to_string())),
        None => member(text.as_bytes(), (start, end)),
    }
}

/// `i`, moved back over the JSON whitespace before it.
fn skip_back(bytes: &[u8], mut i: usize) -> usize {
    while i > 0 && bytes[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    i
}

/// Where the key of the member whose value starts at `start` starts (its opening quote).
fn key_start(bytes: &[u8], start: usize) -> Option<usize> {
    let colon = skip_back(bytes, start);
    let key_end = skip_back(bytes, colon.checked_sub(1)?);
    // The key reads `tracestate`: no quote inside it.
    bytes[..key_end.checked_sub(1)?]
        .iter()
        .rposition(|&b| b == b'"')
}

/// The whole member whose value is `start..end` (its key, and one comma beside it).
fn member(bytes: &[u8], (start, end): (usize, usize)) -> Option<Edit> {
    let key_start = key_start(bytes, start)?;
    let mut after = end;
    while after < bytes.len() && bytes[after].is_ascii_whitespace() {
        after += 1;
    }
    if bytes.get(after) == Some(&b',') {
        return Some((key_start, after + 1, String::new()));
    }
    let before = skip_back(bytes, key_start);
    (bytes.get(before.checked_sub(1)?) == Some(&b',')).then(|| (before - 1, end, String::new()))
}

/// `"00-{trace}-{span}-{flags}"`, as JSON text.
fn traceparent(span: &SpanContext) -> String {
    let flags = if span.sampled { "01" } else { "00" };
    format!(
        r#""00-{}-{}-{flags}""#,
        span.trace_id_hex(),
        span.span_id_hex()
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const OURS: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn ours(state: Option<&str>) -> SpanContext {
        SpanContext {
            trace_id: 0x0af7651916cd43dd8448eb211c80319c_u128.to_be_bytes(),
            span_id: 0xb7ad6b7169203331_u64.to_be_bytes(),
            sampled: true,
            remote: false,
            trace_state: state.map(Arc::from),
        }
    }

    fn with(message: &str, state: Option<&str>) -> String {
        let out = with_spans(message.as_bytes(), &[(0, ours(state))]).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The client's spacing, key order, escapes and numbers pass as they came: the message
    /// out is the message in with the one value swapped.
    #[test]
    fn only_the_traceparents_value_changes() {
        let theirs = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let message = format!(
            "{{ \"id\" : 1.50e1, \"method\":\"tools/call\",\"params\" : {{\"name\":\"caf\\u00e9\",\
             \"_meta\" : {{ \"progressToken\":7 , \"traceparent\" :  \"{theirs}\",\
             \"tracestate\":\"a=1\"}}, \"arguments\":{{\"z\":[1, 2,3],\"a\":\"€\"}}}},\
             \"jsonrpc\":\"2.0\"}}\r\n"
        );
        assert_eq!(with(&message, Some("a=1")), message.replace(theirs, OURS));
    }

    #[test]
    fn a_message_without_one_gains_it_at_the_start_of_its_object() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                format!(
                    r#"{{"params":{{"_meta":{{"traceparent":"{OURS}"}}}},"jsonrpc":"2.0","id":1,"method":"ping"}}"#
                ),
            ),
            (
                r#"{"id":1,"params":{}}"#,
                format!(r#"{{"id":1,"params":{{"_meta":{{"traceparent":"{OURS}"}}}}}}"#),
            ),
            (
                r#"{"id":1,"params":{"name":"t"}}"#,
                format!(r#"{{"id":1,"params":{{"_meta":{{"traceparent":"{OURS}"}},"name":"t"}}}}"#),
            ),
            (
                r#"{"id":1,"params":{"_meta":{"k":1}}}"#,
                format!(r#"{{"id":1,"params":{{"_meta":{{"traceparent":"{OURS}","k":1}}}}}}"#),
            ),
        ];
        for (message, expected) in cases {
            assert_eq!(with(message, None), expected, "{message}");
        }
    }

    /// A `tracestate` the span does not carry (its parent could not be read) goes with the
    /// parent it came with, comma and all; one driftwatch cut is written as cut.
    #[test]
    fn a_tracestate_goes_or_changes_with_the_span() {
        let bad =
            r#"{"id":1,"params":{"_meta":{"traceparent":"junk", "tracestate" : "a=1","k":2}}}"#;
        let expected =
            format!(r#"{{"id":1,"params":{{"_meta":{{"traceparent":"{OURS}", "k":2}}}}}}"#);
        assert_eq!(with(bad, None), expected);
        let last = r#"{"id":1,"params":{"_meta":{"traceparent":"junk","tracestate":"a=1"}}}"#;
        let expected = format!(r#"{{"id":1,"params":{{"_meta":{{"traceparent":"{OURS}"}}}}}}"#);
        assert_eq!(with(last, None), expected);
        let spaced = r#"{"id":1,"params":{"_meta":{"traceparent":"x","tracestate":" a=1 "}}}"#;
        let expected = format!(
            r#"{{"id":1,"params":{{"_meta":{{"traceparent":"{OURS}","tracestate":"a=1"}}}}}}"#
        );
        assert_eq!(with(spaced, Some("a=1")), expected);
    }

    /// A `tracestate` without a `traceparent` becomes both in one edit, first or alone
    /// (the two edits at one place wrote `{"_meta":{af76...` before); a key twice, in an object
    /// the edit touches, leaves the message as it came.
    #[test]
    fn a_tracestate_alone_becomes_both_and_a_key_twice_is_left_alone() {
        let first = r#"{"id":1,"params":{"_meta":{"tracestate":"a=1","k":1}}}"#;
        let expected =
            format!(r#"{{"id":1,"params":{{"_meta":{{"traceparent":"{OURS}","k":1}}}}}}"#);
        assert_eq!(with(first, None), expected);
        let alone = r#"{"id":1,"params":{"_meta":{ "tracestate" : "a=1" }}}"#;
        let expected = format!(
            r#"{{"id":1,"params":{{"_meta":{{ "traceparent":"{OURS}","tracestate":"b=2" }}}}}}"#
        );
        assert_eq!(with(alone, Some("b=2")), expected);
        for twice in [
            r#"{"id":1,"params":{"_meta":{"traceparent":"x","traceparent":"y"}}}"#,
            r#"{"id":1,"params":{"_meta":{},"_meta":{"traceparent":"y"}}}"#,
            r#"{"id":1,"params":{},"params":{}}"#,
        ] {
            assert_eq!(
                with_spans(twice.as_bytes(), &[(0, ours(None))]),
                None,
                "{twice}"
            );
        }
    }

    #[test]
    fn in_a_batch_each_request_named_gets_its_own_and_the_rest_pass() {
        let batch = r#"[{"id":1,"params":{}}, {"method":"notifications/initialized"}]"#;
        let out = with_spans(batch.as_bytes(), &[(0, ours(None))]).unwrap();
        let expected = format!(
            r#"[{{"id":1,"params":{{"_meta":{{"traceparent":"{OURS}"}}}}}}, {{"method":"notifications/initialized"}}]"#
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        assert!(with_spans(br#"{"id":1,"params":[1]}"#, &[(0, ours(None))]).is_none());
    }
}
