//! The answers driftwatch gives itself, as RFC 9457 `application/problem+json`: a refused request
//! in enforce mode (422, or 409 for a write that would erase data), an unreachable upstream (502,
//! 504), a broken client body (400). MCP servers hand the body to the model as it is, and many
//! keep only its first 1,000 characters: the `detail` comes first and leads with what to do, the
//! fields to include come next, and the findings, the longest part, come last.

use crate::mcp::calls::Attribution;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Map, Value, json};

use crate::finding::Finding;

/// Bytes of a `detail`: the instruction (at most `NAMES_MAX` of field names and about 110 bytes
/// around them) and a reason after it, such as a failed read's error. With the members that
/// follow it before `findings` (the title, status, type and a short `include_fields`, about 200
/// bytes), it leaves room to spare in the first 1,000 characters of the body.
const DETAIL_MAX: usize = 400;

/// Bytes of field names an instruction quotes; past it, it names the first and points to
/// `include_fields` for the rest.
const NAMES_MAX: usize = 160;

/// Characters of the text a refused call's answer gains under `wrap`: what many MCP servers and
/// clients keep of an error.
pub const SAID_MAX: usize = 1_000;

/// Bytes kept in `said` for the count of findings that did not fit (" [and 99999 more]").
const MORE_MAX: usize = 20;

/// The members a problem's body opens with, in this order; `findings` comes after the rest.
const FIRST: [&str; 5] = ["detail", "title", "status", "type", "include_fields"];

pub fn response(
    status: StatusCode,
    title: &str,
    detail: &str,
    request_id: &str,
    extra: Option<(&str, Value)>,
) -> Response<Bytes> {
    let mut body = json!({
        "detail": shorten(detail, DETAIL_MAX),
        "title": title,
        "status": status.as_u16(),
        "type": format!("urn:driftwatch:problem:{}", status.as_u16()),
        "request_id": request_id,
    });
    if let (Some((key, value)), Some(map)) = (extra, body.as_object_mut()) {
        map.insert(key.into(), value);
    }
    let mut response = Response::new(ordered(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

/// 422 for a request refused in enforce mode: the first blocking finding's message as the
/// detail (one sentence an agent can act on), and every blocking finding in `findings`.
pub fn blocked(findings: &[&Finding], request_id: &str) -> Response<Bytes> {
    let first = findings
        .first()
        .map(|f| f.message.as_str())
        .unwrap_or("the request does not match the API's spec");
    let more = match findings.len() {
        0 | 1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    let detail = shorten(first, DETAIL_MAX - more.len()) + &more;
    let list: Vec<Value> = findings
        .iter()
        .map(|f| {
            json!({"kind": f.kind, "severity": f.severity, "location": f.location, "field": f.field,
                   "expected": f.expected, "suggestion": f.suggestion, "message": f.message})
        })
        .collect();
    response(
        StatusCode::UNPROCESSABLE_ENTITY,
        "Request refused: it does not match the API's OpenAPI spec",
        &detail,
        request_id,
        Some(("findings", Value::Array(list))),
    )
}

/// 409 for a write that would erase data: the fields the agent must send back, with their
/// current values.
pub fn silent_clear(blocked: Response<Bytes>, findings: &[&Finding]) -> Response<Bytes> {
    let fields: Vec<&str> = findings
        .iter()
        .filter(|f| f.kind == crate::finding::Kind::SilentClearRisk)
        .map(|f| f.field.trim_start_matches('/'))
        .collect();
    let n = fields.len();
    let detail = format!(
        "{} This write replaces the whole resource, so it would erase {}: the body leaves {} out, and {} a value.",
        include(&fields, true),
        them(n),
        them(n),
        pick(n, "it holds", "they hold"),
    );
    let title = "Request refused: it would silently erase data";
    conflict(blocked, title, &detail, &fields, None)
}

/// 409 for a write set to `repair` that could not be completed: the fields it would erase,
/// and why driftwatch could not fill them from a fresh read.
pub fn unrepaired(blocked: Response<Bytes>, fields: &[String], why: &str) -> Response<Bytes> {
    let n = fields.len();
    let detail = format!(
        "{} This write replaces the whole resource and would erase {}; driftwatch could not fill {} from a fresh read: {why}.",
        include(fields, true),
        them(n),
        them(n),
    );
    let title = "Request refused: it would erase data and could not be repaired";
    let why = ("repair_refused", Value::String(why.into()));
    conflict(blocked, title, &detail, fields, Some(why))
}

/// 409 for a replace write that omits `fields` where driftwatch could not read the resource to
/// see whether they hold values: `why` is what became of the read ("the read was answered 503").
pub fn unread(blocked: Response<Bytes>, fields: &[String], why: &str) -> Response<Bytes> {
    let n = fields.len();
    let detail = format!(
        "{} This write replaces the whole resource and leaves {} out; driftwatch could not read the resource to check whether {} a value: {why}.",
        include(fields, false),
        them(n),
        pick(n, "it holds", "they hold"),
    );
    let title = "Request refused: driftwatch could not check that it erases nothing";
    let why = ("read_refused", Value::String(why.into()));
    conflict(blocked, title, &detail, fields, Some(why))
}

/// What to do, first in a 409's detail: include the fields with their current values, then
/// retry. A list past `NAMES_MAX` is named by its first fields and the count of the rest.
fn include(fields: &[impl AsRef<str>], read_again: bool) -> String {
    let mut names = String::new();
    let mut named = 0;
    for f in fields {
        let next = format!("`{}`", f.as_ref());
        if named > 0 && names.len() + 2 + next.len() > NAMES_MAX {
            break;
        }
        if named > 0 {
            names.push_str(", ");
        }
        names.push_str(&next);
        named += 1;
    }
    if named < fields.len() {
        let rest = fields.len() - named;
        names.push_str(&format!(" and {rest} more (all in `include_fields`)"));
    }
    let n = fields.len();
    let values = pick(n, "its current value", "their current values");
    let again = match read_again {
        true => format!(" (read the resource again if you do not have {})", them(n)),
        false => String::new(),
    };
    format!("Include {names} with {values}{again}, then retry.")
}

/// `blocked` made the 409 of a write that would erase data: its title and detail, the fields
/// to include, and one more member where given.
fn conflict(
    mut blocked: Response<Bytes>,
    title: &str,
    detail: &str,
    fields: &[impl AsRef<str>],
    extra: Option<(&str, Value)>,
) -> Response<Bytes> {
    let Ok(mut body) = serde_json::from_slice::<Value>(blocked.body()) else {
        return blocked;
    };
    body["detail"] = Value::String(shorten(detail, DETAIL_MAX));
    body["status"] = Value::from(409);
    body["type"] = Value::String("urn:driftwatch:problem:409".into());
    body["title"] = Value::String(title.into());
    body["include_fields"] = fields.iter().map(|f| f.as_ref()).collect();
    if let Some((key, value)) = extra {
        body[key] = value;
    }
    *blocked.body_mut() = ordered(body);
    *blocked.status_mut() = StatusCode::CONFLICT;
    blocked
}

/// The body as bytes, its members in the order an agent that reads only the start needs them:
/// `FIRST`, then the rest as they were, then `findings`.
fn ordered(body: Value) -> Bytes {
    let Value::Object(mut rest) = body else {
        return Bytes::from(body.to_string());
    };
    let mut out = Map::new();
    for key in FIRST {
        if let Some(value) = rest.shift_remove(key) {
            out.insert(key.into(), value);
        }
    }
    let findings = rest.shift_remove("findings");
    out.extend(rest);
    if let Some(findings) = findings {
        out.insert("findings".into(), findings);
    }
    Bytes::from(Value::Object(out).to_string())
}

fn them(n: usize) -> &'static str {
    pick(n, "it", "them")
}

fn pick(n: usize, one: &'static str, more: &'static str) -> &'static str {
    if n == 1 { one } else { more }
}

/// A refusal names the tool call it refused: the agent's MCP result then says which tool and
/// which finding, whatever the server makes of the answer.
pub fn with_tool(mut refused: Response<Bytes>, tool: &Attribution) -> Response<Bytes> {
    let Ok(mut body) = serde_json::from_slice::<Value>(refused.body()) else {
        return refused;
    };
    body["tool"] = Value::from(tool.label());
    if !tool.candidates.is_empty() {
        body["tool_candidates"] = tool.candidates.iter().map(|c| c.as_ref()).collect();
    }
    *refused.body_mut() = ordered(body);
    refused
}

/// What a refusal says to the agent when its MCP server passes on only the status, within
/// `SAID_MAX`: who refused and the status, the detail (what to do, then why), and each
/// finding's kind and field as long as they fit.
pub fn said(refused: &Response<Bytes>) -> String {
    let body: Value = serde_json::from_slice(refused.body()).unwrap_or_default();
    let status = refused.status();
    let detail = body["detail"].as_str().unwrap_or_default();
    let head = format!(
        "driftwatch refused the API request this tool call made ({} {}): ",
        status.as_u16(),
        status.canonical_reason().unwrap_or_default()
    );
    let mut text = head.clone() + &shorten(detail, SAID_MAX - head.len() - MORE_MAX);
    let findings = body["findings"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let tags: Vec<String> = findings
        .iter()
        .filter_map(|f| {
            Some(format!(
                " [{} {}]",
                f["kind"].as_str()?,
                f["field"].as_str()?
            ))
        })
        .collect();
    for (i, tag) in tags.iter().enumerate() {
        let room = match i + 1 == tags.len() {
            true => SAID_MAX,
            false => SAID_MAX - MORE_MAX,
        };
        if text.len() + tag.len() > room {
            text.push_str(&format!(" [and {} more]", tags.len() - i));
            break;
        }
        text.push_str(tag);
    }
    text
}

/// What a repaired write's tool call is told when the API answered 412 to the `If-Match` of
/// driftwatch's read: what to do, then why (`mcp.explain_refusals`).
pub fn changed_since_read() -> &'static str {
    "Read the resource again, then retry this change: it changed since driftwatch read it to \
     complete this write (another client wrote it between the read and the write), so the API \
     answered 412 Precondition Failed and wrote nothing."
}

/// `text` within `max` bytes, cut at the last whitespace that fits and ended with "...", so
/// that a field name or a word is never half there. A single run past half the bound with no
/// whitespace in it (a token, an encoded value) is no word an agent reads: it is cut where the
/// bound falls.
fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let room = max.saturating_sub(3);
    let end = text.floor_char_boundary(room);
    let cut = match text[..end].rfind(char::is_whitespace) {
        _ if text[end..].starts_with(char::is_whitespace) => end,
        Some(space) if space >= room / 2 => space,
        _ => end,
    };
    format!("{}...", text[..cut].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Kind, Location};

    fn body(r: &Response<Bytes>) -> (&str, Value) {
        let text = std::str::from_utf8(r.body()).unwrap();
        (text, serde_json::from_str(text).unwrap())
    }

    /// Where `member` opens in the body's text.
    fn at(text: &str, member: &str) -> usize {
        let key = format!("\"{member}\":");
        text.find(&key)
            .unwrap_or_else(|| panic!("no {member}: {text}"))
    }

    /// A cut never falls inside a word: what is left before "..." is a run of whole words of
    /// `whole`, and the text is within `max`.
    fn cut_between_words(cut: &str, whole: &str, max: usize) {
        assert!(cut.len() <= max, "{} > {max}: {cut}", cut.len());
        let kept = cut.strip_suffix("...").unwrap_or(cut);
        assert!(
            whole.starts_with(kept),
            "{kept:?} is not the start of the text"
        );
        let next = &whole[kept.len()..];
        assert!(
            next.is_empty() || next.starts_with(char::is_whitespace),
            "cut inside a word: ...{:?} | {:?}",
            &kept[kept.len().saturating_sub(20)..],
            &next[..next.len().min(20)]
        );
    }

    fn omitted(field: &str) -> Finding {
        Finding::new(Kind::SilentClearRisk, Location::Body, format!("/{field}"))
            .message(format!("PUT would erase `{field}`: the body omits it"))
    }

    #[test]
    fn detail_comes_first_and_stays_short() {
        let long = "the body field is not what the spec declares, ".repeat(12);
        let f = Finding::new(Kind::UnknownQueryParam, Location::Query, "customer_id")
            .message(long.clone());
        let g = Finding::new(Kind::ParamTypeMismatch, Location::Query, "limit").message("limit");
        let r = blocked(&[&f, &g], "rid");
        assert_eq!(r.status(), 422);
        let (text, v) = body(&r);
        assert!(text.starts_with("{\"detail\":\""), "{text}");
        let detail = v["detail"].as_str().unwrap();
        assert!(detail.ends_with("... (and 1 more)"), "{detail}");
        let first = detail.strip_suffix(" (and 1 more)").unwrap();
        cut_between_words(first, &long, DETAIL_MAX);
        assert!(detail.len() <= DETAIL_MAX, "{}", detail.len());
        assert_eq!(v["findings"].as_array().unwrap().len(), 2);
        assert!(at(text, "request_id") < at(text, "findings"), "{text}");
    }

    #[test]
    fn a_silent_clear_says_what_to_include_first_and_lists_the_fields_before_the_findings() {
        let f = omitted("graphicsElementIds");
        let r = silent_clear(blocked(&[&f], "rid"), &[&f]);
        assert_eq!(r.status(), 409);
        let (text, v) = body(&r);
        assert_eq!(
            v["detail"],
            "Include `graphicsElementIds` with its current value (read the resource again if you do not have it), then retry. This write replaces the whole resource, so it would erase it: the body leaves it out, and it holds a value."
        );
        let order: Vec<usize> = ["detail", "title", "status", "type", "include_fields"]
            .iter()
            .chain(["request_id", "findings"].iter())
            .map(|m| at(text, m))
            .collect();
        assert!(order.is_sorted(), "members out of order: {text}");
        assert_eq!(v["include_fields"], json!(["graphicsElementIds"]));
    }

    #[test]
    fn a_long_field_list_keeps_the_instruction_whole_and_first() {
        let names: Vec<String> = (0..40)
            .map(|i| format!("someRatherLongFieldName{i}"))
            .collect();
        let findings: Vec<Finding> = names.iter().map(|n| omitted(n)).collect();
        let refs: Vec<&Finding> = findings.iter().collect();
        let r = silent_clear(blocked(&refs, "rid"), &refs);
        let (text, v) = body(&r);
        let detail = v["detail"].as_str().unwrap();
        assert!(detail.len() <= DETAIL_MAX, "{detail}");
        assert!(
            detail.starts_with("Include `someRatherLongFieldName0`, `someRatherLongFieldName1`"),
            "{detail}"
        );
        let instruction = " more (all in `include_fields`) with their current values (read the resource again if you do not have them), then retry.";
        assert!(detail.contains(instruction), "{detail}");
        assert!(
            detail.contains("This write replaces the whole resource"),
            "{detail}"
        );
        assert_eq!(v["include_fields"].as_array().unwrap().len(), 40);
        assert!(at(text, "include_fields") < at(text, "findings"), "{text}");
        assert!(
            at(text, "include_fields") < 1_000,
            "the fields begin within what a server keeps"
        );

        let why = "the read of the resource failed: ".to_string()
            + &"connection reset by peer while the body was read ".repeat(10);
        let r = unrepaired(blocked(&refs, "rid"), &names, &why);
        let (text, v) = body(&r);
        let detail = v["detail"].as_str().unwrap();
        assert!(detail.starts_with("Include `"), "{detail}");
        assert!(detail.contains(instruction), "{detail}");
        let whole = format!(
            "{} This write replaces the whole resource and would erase them; driftwatch could not fill them from a fresh read: {why}.",
            include(&names, true)
        );
        cut_between_words(detail, &whole, DETAIL_MAX);
        assert_eq!(v["repair_refused"], why.as_str());
        assert!(at(text, "include_fields") < at(text, "findings"), "{text}");
        assert!(at(text, "repair_refused") < at(text, "findings"), "{text}");
    }

    #[test]
    fn a_write_whose_resource_could_not_be_read_is_refused_saying_what_to_include() {
        let (a, b) = (omitted("graphicsElementIds"), omitted("remark"));
        let fields = ["graphicsElementIds".to_string(), "remark".to_string()];
        let r = unread(
            blocked(&[&a, &b], "rid"),
            &fields,
            "the read was answered 503",
        );
        assert_eq!(r.status(), 409);
        let (text, v) = body(&r);
        assert_eq!(
            v["title"],
            "Request refused: driftwatch could not check that it erases nothing"
        );
        assert_eq!(
            v["detail"],
            "Include `graphicsElementIds`, `remark` with their current values, then retry. This write replaces the whole resource and leaves them out; driftwatch could not read the resource to check whether they hold a value: the read was answered 503."
        );
        assert_eq!(v["read_refused"], "the read was answered 503");
        assert_eq!(v["include_fields"], json!(["graphicsElementIds", "remark"]));
        assert_eq!(v["type"], "urn:driftwatch:problem:409");
        assert!(
            at(text, "include_fields") < at(text, "read_refused"),
            "{text}"
        );
        assert!(at(text, "read_refused") < at(text, "findings"), "{text}");
    }

    #[test]
    fn what_a_refused_call_is_told_fits_in_1000_characters_instruction_first() {
        let names: Vec<String> = (0..60)
            .map(|i| format!("someRatherLongFieldName{i}"))
            .collect();
        let findings: Vec<Finding> = names.iter().map(|n| omitted(n)).collect();
        let refs: Vec<&Finding> = findings.iter().collect();
        let tool = Attribution::header("update_channel");
        let r = with_tool(silent_clear(blocked(&refs, "rid"), &refs), &tool);
        let (text, _) = body(&r);
        assert!(
            at(text, "tool") < at(text, "findings"),
            "findings stay last: {text}"
        );
        let said = said(&r);
        assert!(said.chars().count() <= SAID_MAX, "{}: {said}", said.len());
        assert!(
            said.starts_with("driftwatch refused the API request this tool call made (409 Conflict): Include `someRatherLongFieldName0`"),
            "{said}"
        );
        assert!(said.contains("then retry."), "{said}");
        assert!(
            said.contains(" [silent_clear_risk /someRatherLongFieldName0]"),
            "{said}"
        );
        assert!(
            said.ends_with(" more]"),
            "the findings left out are counted: {said}"
        );

        let one = omitted("graphicsElementIds");
        let said = super::said(&silent_clear(blocked(&[&one], "rid"), &[&one]));
        assert_eq!(
            said,
            "driftwatch refused the API request this tool call made (409 Conflict): Include `graphicsElementIds` with its current value (read the resource again if you do not have it), then retry. This write replaces the whole resource, so it would erase it: the body leaves it out, and it holds a value. [silent_clear_risk /graphicsElementIds]"
        );
        assert!(changed_since_read().starts_with("Read the resource again, then retry"));
        assert!(changed_since_read().len() <= SAID_MAX);
    }

    #[test]
    fn a_cut_falls_between_words_and_a_run_without_spaces_is_cut_at_the_bound() {
        for text in [
            "include `graphicsElementIds` with its current value".repeat(20),
            "éé ".repeat(200),
            "a b".repeat(200),
        ] {
            for max in [10, 37, 100, 300] {
                cut_between_words(&shorten(&text, max), &text, max);
            }
        }
        assert_eq!(shorten("short", 300), "short");
        let token = "x".repeat(400);
        assert_eq!(shorten(&token, 300), format!("{}...", "x".repeat(297)));
    }
}
