//! One overlay action applied to the document in place, bounded. The JSONPath, the merge and
//! the removal are `roas-overlay`'s (`common::apply`), taken in the order its Overlay 1.1 apply
//! takes them, with two differences. What the action may add is counted before anything
//! changes, against what the overlays of one load may add in all ([`Growth`]): one action
//! merges into every node its target matches, so twenty that each double the document make a
//! few kilobytes of overlay take all the memory there is. And the document is not copied first
//! (`roas-overlay` applies an overlay to a copy, so that a failed one leaves the document as it
//! was; a load that fails drops it anyway, and a copy per action was 50 ms of GitHub's spec).

use roas_overlay::apply::ApplyErrorKind;
use roas_overlay::common::apply::{compile_path, locate, merge_json, remove_at};
use roas_overlay::v1_1::Action;
use serde_json::Value;

/// What the overlays of one load may add to the document: `spec.max_bytes`, the operator's
/// bound on what a spec may cost, counted as the memory the added values take ([`weight`]),
/// since memory is what a fan-out takes (counted as JSON text, the same bytes would hold 25
/// times as many small values). Each action is counted before it is applied, from the nodes
/// its target matches in the document as it then is and the value it merges into each, and a
/// merge adds at most that value to a node: the count is never less than what is added. A
/// `remove` frees nothing of it.
pub(crate) struct Growth {
    pub max: u64,
    pub added: u64,
}

/// Why an action was not applied.
pub(crate) enum Failed {
    /// As `roas-overlay` says it.
    Refused(ApplyErrorKind),
    /// It may add `each` bytes to each of `targets` nodes, more than [`Growth`] has room for.
    Overgrown { targets: usize, each: u64 },
}

/// A value's place in a map: its hash, key and value (104 bytes with serde_json's
/// `preserve_order`), counted twice for the spare room of a map or list that grows.
const SLOT: u64 = 2 * (size_of::<u64>() + size_of::<String>() + size_of::<Value>()) as u64;

impl Growth {
    pub fn new(max: u64) -> Growth {
        Growth { max, added: 0 }
    }

    /// Count `value` merged into `targets` nodes, if there is room for it.
    fn take(&mut self, targets: usize, value: &Value) -> Result<(), Failed> {
        let room = self.max.saturating_sub(self.added);
        let each = weight(value, room / targets as u64 + 1);
        let adds = each.saturating_mul(targets as u64);
        if adds > room {
            return Err(Failed::Overgrown { targets, each });
        }
        self.added += adds;
        Ok(())
    }
}

/// Apply `action` to `doc`: the number of nodes it changed (0: its target matched nothing).
pub(crate) fn act(doc: &mut Value, action: &Action, growth: &mut Growth) -> Result<usize, Failed> {
    let refused = Failed::Refused;
    let remove = action.is_remove();
    if !remove && action.update.is_none() && action.copy.is_none() {
        return Ok(0);
    }
    if !remove && action.update.is_some() && action.copy.is_some() {
        return Err(refused(ApplyErrorKind::ConflictingMergeSources));
    }
    let path =
        compile_path(&action.target).map_err(|e| refused(ApplyErrorKind::InvalidJsonPath(e)))?;
    let targets = locate(doc, &path);
    if targets.is_empty() {
        return Ok(0);
    }
    // Every target an object or a list, seen before anything changes.
    let primitive = |at: &String| {
        doc.pointer(at)
            .is_some_and(|v| !v.is_object() && !v.is_array())
    };
    if targets.iter().any(primitive) {
        return Err(refused(ApplyErrorKind::PrimitiveActionTarget));
    }
    if remove {
        // Last first, so that removing one of a list's items leaves the others' places.
        let mut removed = 0;
        for at in targets.iter().rev() {
            removed += usize::from(remove_at(doc, at));
        }
        return Ok(removed);
    }
    let copied = match (&action.update, &action.copy) {
        (Some(update), _) => {
            growth.take(targets.len(), update)?;
            None
        }
        (None, Some(from)) => {
            let source = copy_source(doc, from)?;
            growth.take(targets.len(), source)?;
            Some(source.clone())
        }
        (None, None) => return Ok(0),
    };
    let Some(merged) = copied.as_ref().or(action.update.as_ref()) else {
        return Ok(0);
    };
    for at in &targets {
        match doc.pointer_mut(at) {
            Some(Value::Array(items)) => match merged {
                Value::Array(more) => items.extend(more.iter().cloned()),
                one => items.push(one.clone()),
            },
            Some(node @ Value::Object(_)) => merge_json(node, merged),
            _ => {}
        }
    }
    Ok(targets.len())
}

/// The one node a 1.1 `copy` names.
fn copy_source<'d>(doc: &'d Value, from: &str) -> Result<&'d Value, Failed> {
    let refused = Failed::Refused;
    let path = compile_path(from).map_err(|e| refused(ApplyErrorKind::InvalidJsonPath(e)))?;
    let found = locate(doc, &path);
    match found.as_slice() {
        [one] => doc
            .pointer(one)
            .ok_or_else(|| refused(ApplyErrorKind::CopySourceNotFound(from.into()))),
        [] => Err(refused(ApplyErrorKind::CopySourceNotFound(from.into()))),
        _ => Err(refused(ApplyErrorKind::CopySourceMultiple(from.into()))),
    }
}

/// What `value` takes in memory, at most, once merged in: a [`SLOT`] for each value in it and
/// the bytes of its strings and keys; counted no further than past `cap`.
fn weight(value: &Value, cap: u64) -> u64 {
    let mut total = 0u64;
    let mut left = vec![value];
    while let Some(v) = left.pop() {
        total += SLOT;
        match v {
            Value::String(s) => total += s.len() as u64,
            Value::Array(items) => left.extend(items),
            Value::Object(map) => {
                for (key, v) in map {
                    total += key.len() as u64;
                    left.push(v);
                }
            }
            _ => {}
        }
        if total > cap {
            break;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_slot_is_what_a_member_of_a_map_takes_twice() {
        assert_eq!(
            SLOT,
            2 * 104,
            "serde_json's Value has changed size: say so above"
        );
        let value = json!({"name": "page", "in": ["query"]});
        assert_eq!(weight(&value, u64::MAX), 4 * SLOT + 4 + 4 + 2 + 5);
    }

    /// What `act` makes of each kind of action is what `roas-overlay`'s own apply makes of it,
    /// on the same document: the same document, or the same refusal.
    #[test]
    fn each_action_does_what_roas_overlay_does() {
        use roas_overlay::apply::Apply;
        use roas_overlay::v1_1::Overlay;
        let doc = json!({
            "info": {"title": "t", "tags": ["a"]},
            "paths": {"/a": {"get": {"parameters": [{"name": "sort"}, {"name": "page"}]}},
                      "/b": {"get": {"parameters": [{"name": "sort"}]}, "put": {}}},
            "components": {"schemas": {"A": {"type": "object"}, "B": {"type": "string"}}}
        });
        let actions = [
            json!({"target": "$.paths.*.get", "update": {"parameters": [{"name": "n"}], "x": 1}}),
            json!({"target": "$.info.tags", "update": ["b", "c"]}),
            json!({"target": "$.info.tags", "update": {"one": true}}),
            json!({"target": "$.paths.*.get.parameters[?@.name == 'sort']", "remove": true}),
            json!({"target": "$.paths.*.get.parameters[*]", "remove": true}),
            json!({"target": "$.components.schemas.B", "copy": "$.components.schemas.A"}),
            json!({"target": "$.paths['/b'].put", "copy": "$.paths['/a'].get"}),
            json!({"target": "$.nothing", "update": {"a": 1}}),
            json!({"target": "$.info.title", "update": {"a": 1}}),
            json!({"target": "$.info", "copy": "$.paths.*"}),
            json!({"target": "$.info", "copy": "$.none"}),
            json!({"target": "$.info", "update": {"a": 1}, "copy": "$.info"}),
            json!({"target": "$[", "update": {}}),
        ];
        let mut wrong = Vec::new();
        for action in actions {
            let overlay = json!({"overlay": "1.1.0", "info": {"title": "t", "version": "1"},
                "actions": [action.clone()]});
            let overlay: Overlay = serde_json::from_value(overlay).unwrap();
            let mut theirs = doc.clone();
            let theirs = match overlay.apply(&mut theirs, Default::default()) {
                Ok(report) => Ok((theirs, report.actions[0].matched)),
                Err(e) => Err(e.kind.to_string()),
            };
            let mut ours = doc.clone();
            let mut growth = Growth::new(1 << 20);
            let ours = match act(&mut ours, &overlay.actions[0], &mut growth) {
                Ok(matched) => Ok((ours, matched)),
                Err(Failed::Refused(kind)) => Err(kind.to_string()),
                Err(Failed::Overgrown { .. }) => Err("overgrown".into()),
            };
            if ours != theirs {
                wrong.push(format!(
                    "{action}: ours {ours:?}, roas-overlay's {theirs:?}"
                ));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }
}
