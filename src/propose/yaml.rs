//! The proposal as the YAML an operator reads: each action with a comment above it, made of
//! fixed words and numbers only, and its evidence in `x-driftwatch-evidence`. Every string is
//! written double-quoted with YAML's escapes (every line break: LF, CR, NEL, LS, PS; every
//! control character; quotes), every value in flow style: nothing from traffic can end a
//! comment, a scalar or a line. Written here, not by `yaml_serde`, because that one writes a
//! string unquoted, single-quoted with a raw LS in it, or as a literal block as it sees fit.

use serde_json::{Value, json};

use super::Action;

/// The proposal's text, read back as `overlay apply` reads it before it is given out: what an
/// operator applies is what was meant, or there is no proposal.
pub fn written(actions: &[Action], source: &str, events: usize) -> Result<String, Unreadable> {
    let text = render(actions, source, events);
    let read: Value = yaml_serde::from_str(&text).map_err(|e| Unreadable(e.to_string()))?;
    match read == document(actions, source, events) {
        true => Ok(text),
        false => Err(Unreadable("it reads as other actions".into())),
    }
}

/// The text written does not read back as the actions (a bug in `render`).
#[derive(Debug, thiserror::Error)]
#[error("driftwatch's proposal does not read back as its actions ({0}): nothing is written")]
pub struct Unreadable(String);

/// The overlay the actions make: what `render`'s text reads back as.
pub fn document(actions: &[Action], source: &str, events: usize) -> Value {
    let actions: Vec<Value> = (actions.iter())
        .map(|a| json!({"target": a.target, "update": a.update, "x-driftwatch-evidence": a.evidence}))
        .collect();
    json!({
        "x-driftwatch-source": {"events": events, "from": source},
        "overlay": "1.0.0",
        "info": {"title": "What the API answered and its spec does not say", "version": "1"},
        "actions": actions,
    })
}

/// The Overlay document, each action's evidence summed up in a comment above it. The source
/// comes first, on a line of its own, so that two proposals from the same events differ in
/// that line only.
pub fn render(actions: &[Action], source: &str, events: usize) -> String {
    let mut out = String::from("x-driftwatch-source: ");
    flow(&mut out, &json!({"events": events, "from": source}));
    out.push_str(
        "\n# Proposed by `driftwatch overlay propose` from the events above.\n\
         # Nothing here is applied until this file is named in spec.overlays (or --overlay).\n\
         # Review each action: an API that ignores a parameter answers 2xx too. Every name, path,\n\
         # time and request id below came from traffic: each is a quoted value, none a comment.\n\
         overlay: \"1.0.0\"\n\
         info: {\"title\": \"What the API answered and its spec does not say\", \"version\": \"1\"}\n\
         actions:\n",
    );
    for a in actions {
        out.push_str("  # ");
        out.extend(a.comment.chars().map(fixed));
        out.push_str("\n  - target: ");
        flow(&mut out, &Value::String(a.target.clone()));
        out.push_str("\n    update: ");
        flow(&mut out, &a.update);
        out.push_str("\n    x-driftwatch-evidence: ");
        flow(&mut out, &a.evidence);
        out.push('\n');
    }
    out
}

/// A comment's character: printable ASCII (all driftwatch writes there); anything else, which
/// would be a bug, is `?`, never a line break.
fn fixed(c: char) -> char {
    match c {
        ' '..='~' => c,
        _ => '?',
    }
}

/// `v` in YAML's flow style: JSON's shape, every string double-quoted with YAML's escapes.
fn flow(out: &mut String, v: &Value) {
    match v {
        Value::String(s) => quoted(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "" } else { ", " });
                flow(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, value)) in map.iter().enumerate() {
                out.push_str(if i == 0 { "" } else { ", " });
                quoted(out, key);
                out.push_str(": ");
                flow(out, value);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A YAML double-quoted scalar: `"` and `\` escaped, LF, CR and tab by name, and every other
/// character YAML would read as a line break or refuses as unprintable (C0 and C1 controls,
/// DEL, NEL, LS, PS, the BOM, U+FFFE and U+FFFF) as `\uXXXX`.
fn quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control()
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_string_reads_back_as_written_whatever_it_holds() {
        let mut strings: Vec<String> = [
            "a\rb",
            "a\u{85}b",
            "a\u{2028}b",
            "a\u{2029}b",
            "a\nb",
            "a\r\nb",
            "\"",
            "'",
            "\\",
            "# c",
            "a: b",
            "---",
            "...",
            "- x",
            "\t",
            "\u{0}",
            "\u{7f}\u{80}\u{9f}",
            "\u{feff}",
            "\u{fffe}\u{ffff}",
            "é\u{10ffff}",
            " lead",
            "trail ",
            "{[,]}",
            "&a *a !t |>",
            "",
        ]
        .map(String::from)
        .into();
        strings.push((0..0x100u32).filter_map(char::from_u32).collect());
        let mut wrong = Vec::new();
        for s in &strings {
            let v = json!({s: [s, {"k": s}], "n": [1, -2.5, true, null]});
            let mut text = String::from("v: ");
            flow(&mut text, &v);
            match yaml_serde::from_str::<Value>(&text) {
                Ok(back) if back["v"] == v && !text.contains('\n') => {}
                read => wrong.push(format!("{s:?} written {text:?}, read {read:?}")),
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn a_comment_is_one_line_of_printable_ascii_whatever_it_was_given() {
        let action = Action {
            comment: "n\r- target: $\u{2028}x".into(),
            target: "$.paths".into(),
            update: json!({}),
            evidence: json!({}),
        };
        let text = render(&[action], "s", 1);
        assert!(text.contains("  # n?- target: $?x\n"), "{text}");
    }
}
