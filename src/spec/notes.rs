//! What a document says ambiguously, found at load and handed to the contract as warnings:
//! a key written twice in one JSON object (the parser keeps the last, silently), and a `$ref`
//! chain that only leads back to itself (a schema with no content: nothing could be checked).

use std::collections::HashSet;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::push_token;

/// One ambiguity: where, which kind, and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// JSON pointer into the document.
    pub pointer: String,
    pub kind: NoteKind,
    pub detail: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteKind {
    DuplicateKey,
    CircularRef,
    /// An overlay's action whose target matched nothing (`pointer` names the overlay).
    OverlayTarget,
}

/// Pointers of the keys a JSON text writes twice in one object (a second parse, made only
/// for this: serde_json's `Value` keeps the last and says nothing).
pub(crate) fn duplicate_keys(bytes: &[u8]) -> Vec<Note> {
    let mut at = String::new();
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let walk = Walk {
        at: &mut at,
        found: &mut found,
    };
    let _ = walk.deserialize(&mut de);
    found
        .into_iter()
        .map(|pointer| Note {
            detail: format!("`{pointer}` is written twice in one object; the last one is used"),
            pointer,
            kind: NoteKind::DuplicateKey,
        })
        .collect()
}

struct Walk<'a> {
    at: &'a mut String,
    found: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Walk { at, found } = self;
        let mut i = 0usize;
        loop {
            let len = at.len();
            at.push('/');
            at.push_str(&i.to_string());
            let more = seq.next_element_seed(Walk {
                at: &mut *at,
                found: &mut *found,
            })?;
            at.truncate(len);
            if more.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Walk { at, found } = self;
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let len = at.len();
            push_token(at, &key);
            if !seen.insert(key) {
                found.push(at.clone());
            }
            map.next_value_seed(Walk {
                at: &mut *at,
                found: &mut *found,
            })?;
            at.truncate(len);
        }
        Ok(())
    }
}

/// `$ref` chains in `doc` (all local once bundled) that lead only back to themselves: each
/// said once, at the first pointer of its loop.
pub(crate) fn circular_refs(doc: &Value) -> Vec<Note> {
    let holders = super::local_refs(doc);
    // The reference-only nodes form chains (each has one target). A node is walked once:
    // a walk stops at a node walked before (its chain is known) or on its own path (a
    // cycle, said once), so a chain of any length costs its length.
    let mut walked: HashSet<String> = HashSet::new();
    let mut notes = Vec::new();
    for (at, target) in holders {
        if walked.contains(&at) {
            continue;
        }
        let mut path = vec![at.clone()];
        let mut on_path: HashSet<String> = HashSet::from([at.clone()]);
        let mut next = target;
        // Follow while the target is itself only a reference.
        while !walked.contains(&next)
            && let Some(Value::Object(map)) = doc.pointer(&next)
        {
            let Some(Value::String(r)) = map.get("$ref") else {
                break;
            };
            if !map.keys().all(|k| k == "$ref" || is_annotation(k)) {
                break; // a schema beside its reference has content of its own
            }
            if on_path.contains(&next) {
                notes.push(Note {
                    detail: format!(
                        "the $ref at `{at}` leads through {} reference(s) back to itself: the schema has no content, and nothing is checked there",
                        path.len()
                    ),
                    pointer: at.clone(),
                    kind: NoteKind::CircularRef,
                });
                break;
            }
            path.push(next.clone());
            on_path.insert(next.clone());
            let Some(target) = super::local_target(r) else {
                break;
            };
            next = target;
        }
        walked.extend(path);
    }
    notes
}

/// Keywords that describe a schema without checking anything.
fn is_annotation(key: &str) -> bool {
    matches!(
        key,
        "description"
            | "summary"
            | "title"
            | "nullable"
            | "deprecated"
            | "readOnly"
            | "writeOnly"
            | "example"
            | "examples"
            | "$comment"
    ) || key.starts_with("x-")
}
