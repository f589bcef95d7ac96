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
/// (by place: 0 for a message that is not a batch); `None` when nothing changed.
pub fn with_spans(bytes: &[u8], spans: &[(usize, SpanContext)]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let messages: Vec<&RawValue> = match serde_json::from_str::<Vec<&RawValue>>(text) {
        Ok(batch) => batch,
        Err(_) => vec![serde_json::from_str::<&RawValue>(text).ok()?],
    };
    let mut edits = Vec::new();
    for (at, span) in spans {
        if let Some(message) = messages.get(*at) {
            edit(text, message, span, &mut edits);
        }
    }
    if edits.is_empty() {
        return None;
    }
    // From the end, so that each edit's place still holds.
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = bytes.to_vec();
    for (start, end, with) in edits {
        out.splice(start..end, with.into_bytes());
    }
    (out != bytes).then_some(out)
}

/// Bytes `start..end` of the message become the text.
type Edit = (usize, usize, String);

type Members<'a> = HashMap<String, &'a RawValue>;

fn object(raw: &RawValue) -> Option<Members<'_>> {
    serde_json::from_str(raw.get()).ok()
}

/// Where `raw` starts in `text`, of which it is a part.
fn offset(text: &str, raw: &RawValue) -> usize {
    raw.get().as_ptr() as usize - text.as_ptr() as usize
}

/// The edits that make one message's `params._meta` name `span`.
fn edit(text: &str, message: &RawValue, span: &SpanContext, edits: &mut Vec<Edit>) {
    let Some(top) = object(message) else { return };
    let parent = traceparent(span);
    let Some(params) = top.get("params") else {
        let at = offset(text, message) + 1;
        let added = format!(r#""params":{{"_meta":{{"traceparent":{parent}}}}},"#);
        return edits.push((at, at, added));
    };
    let Some(members) = object(params) else {
        return;
    };
    let Some(meta) = members.get("_meta") else {
        let at = offset(text, params) + 1;
        let comma = if members.is_empty() { "" } else { "," };
        let added = format!(r#""_meta":{{"traceparent":{parent}}}{comma}"#);
        return edits.push((at, at, added));
    };
    let Some(keys) = object(meta) else { return };
    match keys.get("traceparent") {
        Some(old) => {
            let start = offset(text, old);
            edits.push((start, start + old.get().len(), parent));
        }
        None => {
            let at = offset(text, meta) + 1;
            let comma = if keys.is_empty() { "" } else { "," };
            edits.push((at, at, format!(r#""traceparent":{parent}{comma}"#)));
        }
    }
    if let Some(old) = keys.get("tracestate") {
        trace_state(text, old, span, edits);
    }
}

/// `tracestate` as driftwatch's span has it: unchanged when the same, else its value, or the
/// member taken out when the span has none.
fn trace_state(text: &str, old: &RawValue, span: &SpanContext, edits: &mut Vec<Edit>) {
    let start = offset(text, old);
    let end = start + old.get().len();
    let was: Option<String> = serde_json::from_str(old.get()).ok();
    match span.trace_state.as_deref() {
        Some(state) if was.as_deref() == Some(state) => {}
        Some(state) => edits.push((start, end, serde_json::Value::from(state).to_string())),
        None => edits.extend(member(text.as_bytes(), (start, end))),
    }
}

/// The whole member whose value is `start..end` (its key, and one comma beside it).
fn member(bytes: &[u8], (start, end): (usize, usize)) -> Option<Edit> {
    let skip_back = |mut i: usize| {
        while i > 0 && bytes[i - 1].is_ascii_whitespace() {
            i -= 1;
        }
        i
    };
    let colon = skip_back(start);
    let key_end = skip_back(colon.checked_sub(1)?);
    // The key reads `tracestate`: no quote inside it.
    let key_start = bytes[..key_end.checked_sub(1)?]
        .iter()
        .rposition(|&b| b == b'"')?;
    let mut after = end;
    while after < bytes.len() && bytes[after].is_ascii_whitespace() {
        after += 1;
    }
    if bytes.get(after) == Some(&b',') {
        return Some((key_start, after + 1, String::new()));
    }
    let before = skip_back(key_start);
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
