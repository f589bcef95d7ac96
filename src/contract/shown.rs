//! What an answer shows of a resource at its top level: the properties of an operation's first
//! 2xx JSON schema (refs and `allOf` followed), which of them the API computes (`readOnly`) and
//! which every answer carries (`required`). The compile reads it for each operation, and the
//! views (`views.rs`) to tell whether a list's items or a write's answer are the resource.

use serde_json::Value;

/// The top-level properties of a 2xx JSON response's object schema (refs and `allOf`
/// followed): what a view of the resource shows.
#[derive(Default)]
pub(super) struct Shown {
    pub names: Vec<String>,
    /// Those the spec marks `readOnly`: fields the API computes.
    pub read_only: Vec<String>,
    /// Those the schema (or every `allOf` member) requires.
    pub required: Vec<String>,
}

/// What the first 2xx JSON response's object schema shows.
pub(super) fn response_fields(doc: &Value, op: &Value) -> Option<Shown> {
    Some(shown_by(doc, answer_schema(doc, op)?))
}

/// The schema of an operation's first 2xx JSON answer, its `$ref`s followed.
pub(super) fn answer_schema<'d>(doc: &'d Value, op: &'d Value) -> Option<&'d Value> {
    let responses = op.get("responses")?.as_object()?;
    let (_, response) = responses.iter().find(|(code, _)| code.starts_with('2'))?;
    let content = super::resolve::deref(doc, response)
        .get("content")?
        .as_object()?;
    let (_, media) = content.iter().find(|(m, _)| is_json(m))?;
    Some(super::resolve::deref(doc, media.get("schema")?))
}

/// What an object schema shows at its top level, its `$ref`s and `allOf` followed.
pub(super) fn shown_by(doc: &Value, schema: &Value) -> Shown {
    let mut shown = Shown::default();
    object_names(doc, schema, &mut shown, 0, true);
    shown
}

/// `schema`'s properties into `shown`; `all`: the schema holds for every body (the top, or an
/// `allOf` member), so what it requires is required.
fn object_names(doc: &Value, schema: &Value, shown: &mut Shown, depth: usize, all: bool) {
    let schema = super::resolve::deref(doc, schema);
    if depth > 8 {
        return;
    }
    for (name, prop) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if !shown.names.contains(name) {
            shown.names.push(name.clone());
        }
        if super::schemas::flag(doc, prop, "readOnly") && !shown.read_only.contains(name) {
            shown.read_only.push(name.clone());
        }
    }
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if all && !shown.required.iter().any(|r| r == name) {
            shown.required.push(name.to_string());
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for branch in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            object_names(doc, branch, shown, depth + 1, all && key == "allOf");
        }
    }
}

/// JSON media types: `application/json`, `text/json`, and any `+json` suffix
/// (`application/json-patch+json`, `application/*+json`, `application/merge-patch+json`).
pub(crate) fn is_json(media_type: &str) -> bool {
    let essence = media_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || essence == "text/json" || essence.ends_with("+json")
}
