//! Which answers show a remembered resource besides its own GET, found once at load: a
//! collection GET whose items are the item GET's representation (`GET /channels` beside
//! `GET /channels/{id}`), each item remembered as if read alone; and a write whose answer is
//! the resource as it now is. An agent often finds what to edit by a list, and a sidecar that
//! learned nothing from it could not tell an omission from an erasure.

use serde_json::Value;

use super::operation::{Operation, WriteSemantics};
use super::resolve::deref;
use super::router::normalize_template;

/// A collection GET's items, each a view of its item GET's resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListOf {
    /// The item GET (its place in the contract's operations).
    pub item: usize,
    /// Where the items are: the answer itself (`None`), or the member of the answer's object
    /// that holds them (`items`, `data`).
    pub at: Option<String>,
    /// The item's member that holds the value of the item GET's last path parameter: the
    /// parameter's own name where the item has one, else `id`.
    pub id_field: String,
}

/// Link every collection GET to its item GET, and mark the writes whose answer is their
/// resource. `operations` are linked already (their `resource` and `remembers` set).
pub(super) fn link(doc: &Value, operations: &mut [Operation], reads: &[Option<usize>]) {
    let answer = |op: &Operation| answer_schema(doc, op);
    let mut lists = Vec::new();
    for (i, item) in operations.iter().enumerate() {
        if !(item.remembers && item.method == "GET") {
            continue;
        }
        let Some(shown) = answer(item) else { continue };
        let Some(collection) = collection_of(item) else {
            continue;
        };
        let list = operations.iter().position(|op| {
            op.method == "GET"
                && op.resource.is_none()
                && normalize_template(&op.template) == collection
        });
        let Some(list) = list else { continue };
        let Some(listed) = answer(&operations[list]) else {
            continue;
        };
        let last = item.path_params.last().map(String::as_str);
        if let Some((at, id_field)) = items_of(doc, listed, shown, last) {
            lists.push((list, i, at, id_field));
        }
    }
    for (list, item, at, id_field) in lists {
        operations[list].resource = operations[item].resource.clone();
        operations[list].lists = Some(ListOf { item, at, id_field });
    }
    for w in 0..operations.len() {
        let Some(read) = reads[w] else { continue };
        let write = &operations[w];
        let same_resource = write.write == WriteSemantics::Replace
            || normalize_template(&write.template)
                == normalize_template(&operations[read].template);
        if write.method == "GET" || write.write == WriteSemantics::None || !same_resource {
            continue;
        }
        let (Some(answered), Some(shown)) = (answer(write), answer(&operations[read])) else {
            continue;
        };
        if operations[read].resource.is_some() && same_schema(answered, shown) {
            operations[w].answers_resource = true;
            if operations[w].resource.is_none() {
                operations[w].resource = operations[read].resource.clone();
            }
        }
    }
}

/// The normalized template of the collection an item GET's resource belongs to: its own
/// without the last segment, where that segment is its last path parameter alone.
fn collection_of(item: &Operation) -> Option<String> {
    let route = item.template.split(['?', '#']).next()?;
    let route = route.strip_suffix('/').unwrap_or(route);
    let (collection, last) = route.rsplit_once('/')?;
    let name = last.strip_prefix('{')?.strip_suffix('}')?;
    if collection.is_empty() || item.path_params.last().map(String::as_str) != Some(name) {
        return None;
    }
    Some(normalize_template(collection))
}

/// The schema of an operation's first 2xx JSON answer, its `$ref`s followed.
fn answer_schema<'d>(doc: &'d Value, op: &Operation) -> Option<&'d Value> {
    super::shown::answer_schema(doc, doc.pointer(&op.pointer)?)
}

/// Where a list answer's items are and which member carries their id, when its items are
/// views of `shown` (the item GET's schema): the same schema, or an object whose properties
/// are some of its (a summary of the resource). `last`: the item GET's last path parameter.
fn items_of<'d>(
    doc: &'d Value,
    listed: &'d Value,
    shown: &'d Value,
    last: Option<&str>,
) -> Option<(Option<String>, String)> {
    let array_items = |schema: &'d Value| schema.get("items").map(|items| deref(doc, items));
    let (at, items) = match array_items(listed) {
        Some(items) => (None, items),
        None => {
            let properties = listed.get("properties")?.as_object()?;
            properties.iter().find_map(|(name, schema)| {
                let items = array_items(deref(doc, schema))?;
                is_view(doc, items, shown).then(|| (Some(name.clone()), items))
            })?
        }
    };
    if !is_view(doc, items, shown) {
        return None;
    }
    let names = super::shown::shown_by(doc, items).names;
    let has = |name: &str| names.iter().any(|n| n == name);
    let id_field = match last {
        Some(name) if has(name) => name,
        _ if has("id") => "id",
        _ => return None,
    };
    Some((at, id_field.to_string()))
}

/// `items` shows the resource `shown` shows: the same schema, or some of its properties.
fn is_view(doc: &Value, items: &Value, shown: &Value) -> bool {
    if same_schema(items, shown) {
        return true;
    }
    let (some, all) = (
        super::shown::shown_by(doc, items).names,
        super::shown::shown_by(doc, shown).names,
    );
    !some.is_empty() && some.iter().all(|name| all.contains(name))
}

/// The same schema: one component reached twice, or two equal ones.
fn same_schema(a: &Value, b: &Value) -> bool {
    std::ptr::eq(a, b) || a == b
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::contract::{Contract, ContractOptions};
    use crate::spec::Spec;

    fn answer(schema: serde_json::Value) -> serde_json::Value {
        json!({"200": {"description": "ok", "content": {"application/json": {"schema": schema}}}})
    }

    /// Channels listed whole, hooks in a page envelope, tags as a summary; a list of another
    /// resource; writes that answer the resource or something else.
    fn contract() -> Contract {
        let item = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
        let doc = json!({"openapi": "3.1.0",
            "components": {"schemas": {
                "Channel": {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "ids": {"type": "array"}}},
                "Hook": {"type": "object", "properties": {"hook_id": {"type": "integer"}, "url": {"type": "string"}}},
                "Tag": {"type": "object", "properties": {"id": {"type": "string"}, "label": {"type": "string"}, "color": {"type": "string"}}},
                "Other": {"type": "object", "properties": {"id": {"type": "string"}, "size": {"type": "integer"}}}}},
            "paths": {
                "/channels": {"get": {"operationId": "listChannels", "responses": answer(json!({"type": "array", "items": item("Channel")}))}},
                "/channels/{id}": {
                    "get": {"operationId": "getChannel", "responses": answer(item("Channel"))},
                    "put": {"operationId": "putChannel", "x-driftwatch-write": "replace", "responses": answer(item("Channel"))}},
                "/p/{project}/hooks": {"get": {"operationId": "listHooks", "responses": answer(json!({"type": "object", "properties": {"next": {"type": "string"}, "items": {"type": "array", "items": item("Hook")}}}))}},
                "/p/{project}/hooks/{hook_id}": {
                    "get": {"operationId": "getHook", "responses": answer(item("Hook"))},
                    "put": {"operationId": "putHook", "x-driftwatch-write": "replace", "responses": answer(json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}))},
                    "patch": {"operationId": "patchHook", "responses": answer(item("Hook"))}},
                "/tags": {"get": {"operationId": "listTags", "responses": answer(json!({"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}, "label": {"type": "string"}}}}))}},
                "/tags/{tag}": {
                    "get": {"operationId": "getTag", "responses": answer(item("Tag"))},
                    "put": {"operationId": "putTag", "x-driftwatch-write": "replace", "responses": {"204": {"description": "done"}}}},
                "/others": {"get": {"operationId": "listOthers", "responses": answer(json!({"type": "array", "items": item("Other")}))}},
                "/others/{id}": {
                    "get": {"operationId": "getOther", "responses": answer(item("Tag"))},
                    "put": {"operationId": "putOther", "x-driftwatch-write": "replace", "responses": {"204": {"description": "done"}}}}}});
        let spec = Spec::from_document(std::path::Path::new("v.json"), doc).unwrap();
        Contract::compile(&spec, &ContractOptions::default()).unwrap()
    }

    #[test]
    fn a_list_of_the_item_gets_resource_is_linked_with_where_its_items_and_ids_are() {
        let c = contract();
        let linked = |id: &str| {
            let op = c.operation(id).unwrap();
            op.lists.as_ref().map(|l| {
                let item = &c.operation_at(l.item).unwrap().id;
                (
                    item.clone(),
                    l.at.clone(),
                    l.id_field.clone(),
                    op.resource.clone(),
                )
            })
        };
        assert_eq!(
            linked("listChannels"),
            Some((
                "getChannel".into(),
                None,
                "id".into(),
                Some("getChannel".into())
            ))
        );
        assert_eq!(
            linked("listHooks"),
            Some((
                "getHook".into(),
                Some("items".into()),
                "hook_id".into(),
                Some("getHook".into())
            ))
        );
        // A summary (some of the tag's fields, its id among them) is a view too.
        assert_eq!(linked("listTags").map(|l| l.2), Some("id".into()));
        // Items of another schema than the item GET's are not its resource.
        assert_eq!(linked("listOthers"), None);
    }

    #[test]
    fn a_write_that_answers_the_resource_is_marked_and_others_are_not() {
        let c = contract();
        let answers = |id: &str| c.operation(id).unwrap().answers_resource;
        assert!(answers("putChannel"));
        assert!(
            answers("patchHook"),
            "a merge write's answer is the resource too"
        );
        assert_eq!(
            c.operation("patchHook").unwrap().resource.as_deref(),
            Some("getHook")
        );
        assert!(!answers("putHook"), "`{{ok}}` is not the hook");
        assert!(!answers("putTag"), "204: no answer");
    }
}
