//! Repair of a replace write, the pure part: where the resource is read, and the write's body
//! completed from that read. A full-replace PUT that omits a field erases it (RFC 9110: PUT
//! replaces the whole state); where the operator chose `repair`, the sidecar reads the
//! resource just before the write and fills each omitted field with the value the read shows,
//! so the agent's edit lands and nothing it did not mean to touch is lost.
//!
//! The agent's bytes are kept as sent: the filled members are spliced in before the object's
//! closing brace, each value as the read wrote it. A field the body sends, even `null` or
//! empty, is the agent's and is never touched; a field the read does not show (or shows
//! `null`) holds nothing to lose and is not filled.

use std::collections::HashMap;

use serde_json::value::RawValue;

use crate::contract::{Contract, Operation, Route, normalize_template};

/// A body completed from a read.
#[derive(Debug, PartialEq, Eq)]
pub struct Filled {
    /// The write's body with the filled members added.
    pub body: Vec<u8>,
    /// The fields filled, by their names in the write, in the order asked.
    pub fields: Vec<String>,
}

/// Why a body could not be completed: the write is refused rather than sent half-repaired.
#[derive(Debug, PartialEq, Eq)]
pub enum Unfillable {
    /// The write's body is not a JSON object (the audit would have said so first).
    Body,
    /// The read's answer is not a JSON object: nothing in it can be matched to a field.
    Read(String),
}

impl std::fmt::Display for Unfillable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfillable::Body => write!(f, "the write's body is not a JSON object"),
            Unfillable::Read(why) => write!(f, "the read's answer is not a JSON object: {why}"),
        }
    }
}

/// `body` with each of `wanted` (write name, read name) the body omits filled from `read`'s
/// member of the read name.
pub fn fill(body: &[u8], read: &[u8], wanted: &[(&str, &str)]) -> Result<Filled, Unfillable> {
    let sent: HashMap<String, &RawValue> =
        serde_json::from_slice(body).map_err(|_| Unfillable::Body)?;
    let shown: HashMap<String, &RawValue> =
        serde_json::from_slice(read).map_err(|e| Unfillable::Read(e.to_string()))?;
    let end = body
        .iter()
        .rposition(|b| *b == b'}')
        .ok_or(Unfillable::Body)?;
    let mut out = body[..end].to_vec();
    let mut members = sent.len();
    let mut fields = Vec::new();
    for (write, read) in wanted {
        if sent.contains_key(*write) || fields.iter().any(|f| f == write) {
            continue;
        }
        let Some(value) = shown.get(*read).filter(|v| v.get() != "null") else {
            continue;
        };
        if members > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, write).expect("a string writes to a Vec");
        out.push(b':');
        out.extend_from_slice(value.get().as_bytes());
        members += 1;
        fields.push(write.to_string());
    }
    out.extend_from_slice(&body[end..]);
    Ok(Filled { body: out, fields })
}

/// Whether a read's answer is the resource its GET shows, and so something a write that omits
/// `omitted` (their names in the read) can be judged or completed by: a JSON object that shows
/// at least one property the GET's schema declares (an envelope `{"data": {...}}` shows none),
/// every omitted field the GET's schema says it always shows (`required`: one missing is
/// unknown, not empty), and, where it shows the GET's last path parameter by name, the value the
/// path names (`last`). Deeper schema faults are the response audit's to report; a required
/// field the write does not omit decides nothing here. `Err` says why it is not.
pub fn fits(
    read_op: &Operation,
    last: Option<&str>,
    body: crate::json::Node,
    omitted: &[&str],
) -> Result<(), String> {
    let object = body
        .as_object()
        .ok_or_else(|| "not a JSON object".to_string())?;
    let missing: Vec<&str> = (read_op.response_required.iter())
        .filter(|name| omitted.contains(&name.as_str()) && object.get(name).is_none())
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "it lacks `{}`, which {} ({}) always shows",
            missing.join("`, `"),
            read_op.label(),
            read_op.id
        ));
    }
    if let Some(declared) = &read_op.response_fields
        && !declared.iter().any(|name| object.get(name).is_some())
    {
        let shown: Vec<&str> = object.members().map(|(name, _)| name).take(5).collect();
        return Err(format!(
            "it shows none of the fields {} declares (it shows `{}`): an envelope or another shape",
            read_op.label(),
            shown.join("`, `")
        ));
    }
    let param = read_op.path_params.last();
    let shown_id = param
        .and_then(|p| object.get(p))
        .and_then(|v| match v.as_str() {
            Some(text) => Some(text.to_string()),
            None => v.as_number().map(|n| n.to_string()),
        });
    if let (Some(param), Some(shown), Some(last)) = (param, shown_id, last)
        && shown != last
    {
        return Err(format!(
            "it shows `{param}` {shown}, not the {last} the write's path names: another resource"
        ));
    }
    Ok(())
}

/// The path a GET of the write's resource is sent to: the write's own path where the two
/// share a template (`PUT` and `GET /channels/{id}`), else the read's template filled with the
/// write's path values (by name, else by place) under the same prefix. `None` when the write's
/// path does not end with its own template filled in (it was routed some other way).
pub fn read_path(
    contract: &Contract,
    write: &Operation,
    read: &Operation,
    path: &str,
) -> Option<String> {
    let (write_t, read_t) = (route_part(&write.template), route_part(&read.template));
    if normalize_template(write_t) == normalize_template(read_t) {
        return Some(path.to_string());
    }
    let Route::Found { path_values, .. } = contract.route(&write.method, path) else {
        return None;
    };
    let by_name = |name: &str| {
        let at = write.path_params.iter().position(|p| p == name);
        at.and_then(|i| path_values.get(i)).copied()
    };
    let written = fill_template(write_t, |name, _| by_name(name))?;
    let prefix = path.strip_suffix(written.as_str())?;
    let read_path = fill_template(read_t, |name, n| {
        by_name(name).or_else(|| path_values.get(n).copied())
    })?;
    Some(format!("{prefix}{read_path}"))
}

/// The part of a template that is routed (before a `?` or `#` of fixed keys).
fn route_part(template: &str) -> &str {
    template.split(['?', '#']).next().unwrap_or(template)
}

/// `template` with its `n`th parameter `{name}` replaced by `value(name, n)`.
fn fill_template<'v>(
    template: &str,
    value: impl Fn(&str, usize) -> Option<&'v str>,
) -> Option<String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    let mut n = 0;
    while let Some(open) = rest.find('{') {
        let close = open + rest[open..].find('}')?;
        out.push_str(&rest[..open]);
        out.push_str(value(&rest[open + 1..close], n)?);
        n += 1;
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ContractOptions;
    use crate::spec::Spec;
    use serde_json::json;

    fn filled(body: &str, read: &str, wanted: &[(&str, &str)]) -> (String, Vec<String>) {
        let f = fill(body.as_bytes(), read.as_bytes(), wanted).unwrap();
        (String::from_utf8(f.body).unwrap(), f.fields)
    }

    #[test]
    fn omitted_fields_are_spliced_in_and_the_agents_bytes_kept() {
        let read = r#"{"id": 7, "name": "old", "graphicsElementIds": [3, 7], "note": "x\"y"}"#;
        let (body, fields) = filled(
            "{ \"name\" : \"new\" }\n",
            read,
            &[
                ("graphicsElementIds", "graphicsElementIds"),
                ("remark", "note"),
            ],
        );
        assert_eq!(
            body,
            "{ \"name\" : \"new\" ,\"graphicsElementIds\":[3, 7],\"remark\":\"x\\\"y\"}\n"
        );
        assert_eq!(fields, ["graphicsElementIds", "remark"]);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["remark"], "x\"y");
    }

    #[test]
    fn what_the_agent_sends_is_never_touched_and_nothing_is_made_up() {
        let read = r#"{"ids": [3, 7], "note": "kept", "gone": null}"#;
        let wanted = [
            ("ids", "ids"),
            ("note", "note"),
            ("gone", "gone"),
            ("absent", "absent"),
        ];
        let (body, fields) = filled(r#"{"ids": null, "note": ""}"#, read, &wanted);
        assert_eq!(body, r#"{"ids": null, "note": ""}"#);
        assert!(fields.is_empty());
        let (body, fields) = filled("{}", read, &wanted);
        assert_eq!(body, r#"{"ids":[3, 7],"note":"kept"}"#);
        assert_eq!(fields, ["ids", "note"]);
    }

    #[test]
    fn a_body_or_read_that_is_no_object_is_refused() {
        assert_eq!(fill(b"[1]", b"{}", &[]), Err(Unfillable::Body));
        assert!(matches!(
            fill(b"{}", b"<html>", &[]),
            Err(Unfillable::Read(_))
        ));
    }

    #[test]
    fn the_read_path_is_the_writes_or_its_own_template_under_the_same_prefix() {
        let doc = json!({"openapi": "3.1.0", "servers": [{"url": "https://x/api"}], "paths": {
            "/channels/{id}": {"get": {"operationId": "getChannel", "responses": {"200": {"description": "ok"}}},
                               "put": {"operationId": "putChannel", "responses": {"200": {"description": "ok"}}}},
            "/orgs/{org}/teams/{team}/settings": {"put": {"operationId": "putSettings", "responses": {"200": {"description": "ok"}}}},
            "/teams/{team}/config": {"get": {"operationId": "getConfig", "responses": {"200": {"description": "ok"}}}}
        }});
        let spec = Spec::from_document(std::path::Path::new("t.json"), doc).unwrap();
        let c = Contract::compile(&spec, &ContractOptions::default()).unwrap();
        let op = |id| c.operation(id).unwrap();
        let path = read_path(
            &c,
            op("putChannel"),
            op("getChannel"),
            "/pre/api/channels/7",
        );
        assert_eq!(path.as_deref(), Some("/pre/api/channels/7"));
        let path = read_path(
            &c,
            op("putSettings"),
            op("getConfig"),
            "/api/orgs/o/teams/t%20x/settings",
        );
        assert_eq!(path.as_deref(), Some("/api/teams/t%20x/config"));
        assert_eq!(
            read_path(&c, op("putSettings"), op("getConfig"), "/nowhere"),
            None
        );
    }

    /// A read is the resource when it shows what its GET declares, every omitted field its GET
    /// always shows, and the path's id where it shows one.
    #[test]
    fn a_read_fits_when_it_is_the_resource_and_not_an_envelope_another_or_a_trimmed_one() {
        let doc = json!({"openapi": "3.1.0", "paths": {"/c/{id}": {"get": {"operationId": "getC",
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "object", "required": ["id", "name", "ids"],
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "ids": {"type": "array"}}}}}}}}}}});
        let spec = Spec::from_document(std::path::Path::new("f.json"), doc).unwrap();
        let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
        let get = contract.operation("getC").unwrap();
        let fits = |body: &str, omitted: &[&str]| {
            let doc = crate::json::parse(body.as_bytes()).unwrap();
            super::fits(get, Some("7"), doc.root(), omitted)
        };
        assert_eq!(
            fits(r#"{"id": 7, "name": "a", "ids": [1]}"#, &["ids"]),
            Ok(())
        );
        // A required field the write does not omit decides nothing: the API may leave it out.
        assert_eq!(fits(r#"{"id": 7, "ids": [1]}"#, &["ids"]), Ok(()));
        let why = |body: &str, omitted: &[&str]| fits(body, omitted).unwrap_err();
        assert!(why(r#"{"id": 7, "name": "a"}"#, &["ids"]).starts_with("it lacks `ids`"));
        assert!(why(r#"{"data": {"id": 7}}"#, &[]).contains("shows none of the fields"));
        assert!(why(r#"{"id": 8, "name": "a", "ids": []}"#, &["ids"]).contains("another resource"));
        assert!(why("[1]", &[]).contains("not a JSON object"));
    }
}
