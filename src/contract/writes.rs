//! Each write's semantics, and why. The method alone never makes a replace: real APIs use PUT
//! for file writes, merges and branch updates (GitHub's `PUT .../contents/{path}`), where
//! what the body leaves out erases nothing. A PUT is a replace where the spec shows its body is
//! its resource's representation; the config and `x-driftwatch-write` say otherwise by name.
//! The rule was measured on every PUT of the APIs.guru directory and of `../shared/specs/`
//! (docs/findings.md, "Write semantics").

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

use super::operation::{BodyShape, Operation, WriteSemantics};
use super::router::split_route;

mod verbs;

/// Why a write has its semantics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteReason {
    /// `[spec.write]` in the config, under this key (an id, a label or a pattern).
    Config(String),
    /// `x-driftwatch-write` on the operation in the spec.
    Extension,
    /// Not a PUT: PATCH merges, POST creates, the others write nothing.
    Method,
    /// Its JSON body declares no writable object field: nothing it leaves out can be cleared.
    NoObjectBody,
    /// The GET of its resource declares no object representation (GitHub's merge GET answers
    /// 204): the body cannot be a state of it.
    ReadShowsNothing { read: String },
    /// `shared` of its `of` body fields are fields of its GET's representation: at least half.
    ReadRepresentation {
        read: String,
        shared: usize,
        of: usize,
    },
    /// Fewer than half of its body fields are fields of its GET's representation.
    NotReadRepresentation {
        read: String,
        shared: usize,
        of: usize,
    },
    /// No GET shows its resource and its path ends in an action (`reset-password`, `lock`,
    /// `:cancel`): the body is the action's parameters (Keycloak's reset-password answers 204).
    ActionPath { segment: String },
    /// No GET shows its resource; its own answer carries at least half of its body fields.
    AnswerEchoes { shared: usize, of: usize },
    /// No GET shows its resource; its own answer is something else.
    AnswerDiffers { shared: usize, of: usize },
    /// The spec shows nothing either way (no GET, no object in its answer): PUT's default.
    Default,
}

impl WriteReason {
    /// A short stable name, for counting and tables.
    pub fn as_str(&self) -> &'static str {
        match self {
            WriteReason::Config(_) => "config",
            WriteReason::Extension => "extension",
            WriteReason::Method => "method",
            WriteReason::NoObjectBody => "no_object_body",
            WriteReason::ReadShowsNothing { .. } => "read_shows_nothing",
            WriteReason::ReadRepresentation { .. } => "read_representation",
            WriteReason::NotReadRepresentation { .. } => "not_read_representation",
            WriteReason::ActionPath { .. } => "action_path",
            WriteReason::AnswerEchoes { .. } => "answer_echoes",
            WriteReason::AnswerDiffers { .. } => "answer_differs",
            WriteReason::Default => "default",
        }
    }
}

impl fmt::Display for WriteReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteReason::Config(key) => write!(f, "[spec.write] \"{key}\""),
            WriteReason::Extension => write!(f, "x-driftwatch-write in the spec"),
            WriteReason::Method => write!(f, "the method's (PATCH merges, POST creates)"),
            WriteReason::NoObjectBody => {
                write!(
                    f,
                    "its body has no object field: nothing left out is cleared"
                )
            }
            WriteReason::ReadShowsNothing { read } => {
                write!(
                    f,
                    "its GET `{read}` shows no object: the body is no state of it"
                )
            }
            WriteReason::ReadRepresentation { read, shared, of } => write!(
                f,
                "its body is the representation its GET `{read}` returns ({shared} of {of} fields)"
            ),
            WriteReason::NotReadRepresentation { read, shared, of } => write!(
                f,
                "its body is not what its GET `{read}` returns ({shared} of {of} fields)"
            ),
            WriteReason::ActionPath { segment } => write!(
                f,
                "no GET shows it; its path ends in the action `{segment}`"
            ),
            WriteReason::AnswerEchoes { shared, of } => write!(
                f,
                "no GET shows it; its answer carries its body ({shared} of {of} fields)"
            ),
            WriteReason::AnswerDiffers { shared, of } => write!(
                f,
                "no GET shows it; its answer is something else ({shared} of {of} fields)"
            ),
            WriteReason::Default => write!(
                f,
                "the spec shows nothing either way (no GET, no object answer): PUT's default"
            ),
        }
    }
}

/// The semantics the config or the spec's extension name for an operation, over what the
/// spec shows. Config keys: its id, `"PUT /path/{id}"`, or a pattern of that label where `*`
/// stands for any text (`"PUT /repos/*/contents/*"`).
pub(super) fn named(
    overrides: &HashMap<String, WriteSemantics>,
    op: &Value,
    id: &str,
    label: &str,
) -> Option<(WriteSemantics, WriteReason)> {
    let config = overrides
        .get_key_value(id)
        .or_else(|| overrides.get_key_value(label))
        .or_else(|| {
            let mut patterns: Vec<_> = overrides
                .iter()
                .filter(|(key, _)| key.contains('*') && glob(key, label))
                .collect();
            // The longest pattern is the most specific; ties by name, so the choice is stable.
            patterns.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
            patterns.first().copied()
        });
    if let Some((key, write)) = config {
        return Some((*write, WriteReason::Config(key.clone())));
    }
    op.get("x-driftwatch-write")
        .and_then(Value::as_str)
        .and_then(WriteSemantics::parse)
        .map(|write| (write, WriteReason::Extension))
}

/// `text` matches `pattern`, where each `*` stands for any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (n, part) in parts.iter().enumerate() {
        if n + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// Settle the semantics of every PUT the config and the extension left to the spec, from its
/// body, the GET of its resource (`reads[i]`), its path and its own answer.
pub(super) fn infer(operations: &mut [Operation], reads: &[Option<usize>]) {
    for i in 0..operations.len() {
        if operations[i].method != "PUT" || operations[i].write_reason != WriteReason::Method {
            continue;
        }
        let body = body_fields(&operations[i]);
        let reason = match reads[i] {
            _ if body.is_empty() => WriteReason::NoObjectBody,
            Some(read) => by_read(&body, &operations[read]),
            None => without_read(&body, &operations[i]),
        };
        operations[i].write = match reason {
            WriteReason::ReadRepresentation { .. }
            | WriteReason::AnswerEchoes { .. }
            | WriteReason::Default => WriteSemantics::Replace,
            _ => WriteSemantics::Action,
        };
        operations[i].write_reason = reason;
    }
}

/// A PUT whose resource `get` shows: a replace where its body is what the GET returns.
fn by_read(body: &[&str], get: &Operation) -> WriteReason {
    let read = get.id.clone();
    match &get.response_fields {
        None => WriteReason::ReadShowsNothing { read },
        Some(fields) => {
            let (shared, of) = overlap(body, fields);
            match shared * 2 >= of {
                true => WriteReason::ReadRepresentation { read, shared, of },
                false => WriteReason::NotReadRepresentation { read, shared, of },
            }
        }
    }
}

/// A PUT no GET shows: an action where its path ends in one, else by its own answer, else a
/// replace by default. An answer of no object is no sign of an action: ErsatzTV's
/// `/api/ffmpeg/profiles/update` answers none and writes every field.
fn without_read(body: &[&str], put: &Operation) -> WriteReason {
    if let Some(segment) = verbs::action_segment(split_route(&put.template).0) {
        return WriteReason::ActionPath {
            segment: segment.to_string(),
        };
    }
    match &put.response_fields {
        None => WriteReason::Default,
        Some(fields) => {
            let (shared, of) = overlap(body, fields);
            match shared * 2 >= of {
                true => WriteReason::AnswerEchoes { shared, of },
                false => WriteReason::AnswerDiffers { shared, of },
            }
        }
    }
}

/// How many of `body`'s fields `shown` has, and of how many.
fn overlap(body: &[&str], shown: &[String]) -> (usize, usize) {
    let shared = body
        .iter()
        .filter(|f| shown.iter().any(|s| s == *f))
        .count();
    (shared, body.len())
}

/// The writable top-level fields of the JSON body: an object's, or every object branch's of a
/// `oneOf`/`anyOf`.
fn body_fields(op: &Operation) -> Vec<&str> {
    fn collect<'o>(shape: &'o BodyShape, out: &mut Vec<&'o str>) {
        match shape {
            BodyShape::Object { properties, .. } => {
                for p in properties.iter().filter(|p| !p.read_only) {
                    if !out.contains(&p.name.as_str()) {
                        out.push(&p.name);
                    }
                }
            }
            BodyShape::Variants(branches) => {
                for (_, branch) in branches {
                    collect(branch, out);
                }
            }
            BodyShape::Array(_) | BodyShape::Opaque => {}
        }
    }
    let mut out = Vec::new();
    if let Some(media) = op
        .body
        .as_ref()
        .and_then(|b| b.media.iter().find(|m| m.json))
    {
        collect(&media.shape, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::contract::Contract;
    use crate::spec::Spec;

    /// The reading of each PUT of a spec whose paths are `puts` (each a PUT with a credential
    /// body answering 204), and a GET on `/users/{id}/lock` that shows the body's fields.
    fn readings(puts: &[&str]) -> Vec<(String, &'static str, String)> {
        let body = json!({"content": {"application/json": {"schema": {"type": "object",
            "properties": {"type": {"type": "string"}, "value": {"type": "string"},
            "temporary": {"type": "boolean"}}}}}});
        let put = json!({"requestBody": body, "responses": {"204": {"description": "done"}}});
        let mut paths = serde_json::Map::new();
        for path in puts {
            paths.insert(path.to_string(), json!({"put": put}));
        }
        paths["/users/{id}/lock"]["get"] = json!({"responses": {"200": {"description": "ok",
            "content": {"application/json": {"schema": body["content"]["application/json"]["schema"]}}}}});
        paths.insert(
            "/users/{id}/enable".into(),
            json!({"put": {"responses": {"204": {"description": "done"}}}}),
        );
        let doc = json!({"openapi": "3.1.0", "paths": paths});
        let spec = Spec::from_document(std::path::Path::new("w.json"), doc).unwrap();
        let contract = Contract::compile(&spec, &Default::default()).unwrap();
        let ops = contract.operations().iter().filter(|op| op.method == "PUT");
        ops.map(|op| {
            let why = op.write_reason.to_string();
            (op.template.clone(), op.write.as_str(), why)
        })
        .collect()
    }

    /// Issue 66: a PUT no GET shows whose path ends in an action is an action (Keycloak's
    /// reset-password, a Google `:cancel`, camelCase); the near twins stay as they were: an
    /// `update` and a parameter last are PUT's default replace, a GET still decides, and a
    /// body with no object field is read so first.
    #[test]
    fn a_put_no_get_shows_whose_path_ends_in_an_action_is_an_action() {
        let mut got = readings(&[
            "/users/{id}/reset-password",
            "/v1/{name}:cancel",
            "/users/{id}/resetPassword",
            "/api/ffmpeg/profiles/update",
            "/jobs/{cancel}",
            "/users/{id}/lock",
        ]);
        got.sort();
        let action =
            |segment: &str| format!("no GET shows it; its path ends in the action `{segment}`");
        let default = WriteReason::Default.to_string();
        let want = [
            ("/api/ffmpeg/profiles/update", "replace", default.clone()),
            ("/jobs/{cancel}", "replace", default),
            ("/users/{id}/enable", "action", WriteReason::NoObjectBody.to_string()),
            ("/users/{id}/lock", "replace", "its body is the representation its GET `GET /users/{id}/lock` returns (3 of 3 fields)".into()),
            ("/users/{id}/reset-password", "action", action("reset-password")),
            ("/users/{id}/resetPassword", "action", action("resetPassword")),
            ("/v1/{name}:cancel", "action", action("cancel")),
        ];
        let want: Vec<_> = want
            .into_iter()
            .map(|(t, w, r)| (t.to_string(), w, r))
            .collect();
        assert_eq!(got, want);
        let reason = WriteReason::ActionPath {
            segment: "lock".into(),
        };
        assert_eq!(reason.as_str(), "action_path");
    }

    #[test]
    fn patterns_match_any_text_where_a_star_stands() {
        assert!(glob(
            "PUT /repos/*/contents/*",
            "PUT /repos/{owner}/{repo}/contents/{path}"
        ));
        assert!(glob("PUT *", "PUT /a"));
        assert!(glob("*/merge", "PUT /r/{n}/merge"));
        assert!(!glob(
            "PUT /repos/*/contents/*",
            "PUT /repos/{o}/{r}/pulls/{n}"
        ));
        assert!(!glob("PUT /a*", "PATCH /a"));
        assert!(!glob("*/merge", "PUT /r/{n}/merge-async"));
    }
}
