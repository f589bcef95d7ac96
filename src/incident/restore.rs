//! What an erased field held, and the request that puts it back. Kept only where the operator
//! said so (`incidents.keep_values`): the values come from the last read of the resource, the
//! agent's edit from the write itself, so the restore undoes the clear and keeps the edit. A
//! replace API gets the write again with the lost fields set (PUT); where the spec has a PATCH
//! with a JSON body on the same path, only the lost fields go, in the media type it declares
//! (a merge patch's shape): nothing changed since the write is written over.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The values an incident holds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Kept {
    /// What each erased field held at the read, as the write names it.
    pub lost: Vec<Lost>,
    /// The request that puts them back; `None` where the write's body was not a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<Restore>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Lost {
    /// The field as the write names it.
    pub field: String,
    /// The field as the read named it, where the two models differ (`memory.field_map`): its
    /// value is the read model's, which the write may not take as it is, so it is left out of
    /// the restore, for the responder to write in the write's shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_field: Option<String>,
    pub value: Value,
}

/// A request, ready to send to the API (its credentials are the responder's to add).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Restore {
    pub method: String,
    pub path: String,
    pub content_type: String,
    pub body: Value,
}

impl Kept {
    /// The lost values and the request that restores them: `write` is the write's method,
    /// path and body as sent; `patch`, the JSON media type of a PATCH the spec has on the
    /// write's path.
    pub fn new(lost: Vec<Lost>, write: (&str, &str, Option<&Value>), patch: Option<&str>) -> Kept {
        let (method, path, body) = write;
        let restore = match patch {
            Some(media) => Some(Restore {
                method: "PATCH".into(),
                path: path.into(),
                content_type: media.into(),
                body: Value::Object(set(Map::new(), &lost)),
            }),
            None => body.and_then(Value::as_object).map(|sent| Restore {
                method: method.into(),
                path: path.into(),
                content_type: "application/json".into(),
                body: Value::Object(set(sent.clone(), &lost)),
            }),
        };
        Kept { lost, restore }
    }
}

fn set(mut body: Map<String, Value>, lost: &[Lost]) -> Map<String, Value> {
    for l in lost.iter().filter(|l| l.read_field.is_none()) {
        body.insert(l.field.clone(), l.value.clone());
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lost() -> Vec<Lost> {
        vec![Lost {
            field: "graphicsElementIds".into(),
            read_field: None,
            value: json!([3, 7]),
        }]
    }

    #[test]
    fn a_field_the_read_names_otherwise_is_kept_but_left_out_of_the_restore() {
        let mut lost = lost();
        lost.push(Lost {
            field: "logoId".into(),
            read_field: Some("logo".into()),
            value: json!({"id": 4, "url": "/l.png"}),
        });
        let kept = Kept::new(lost, ("PUT", "/c/7", Some(&json!({"name": "n"}))), None);
        let body = kept.restore.unwrap().body;
        assert_eq!(body, json!({"name": "n", "graphicsElementIds": [3, 7]}));
        assert_eq!(kept.lost.len(), 2);
    }

    #[test]
    fn a_replace_write_is_sent_again_with_the_lost_fields_set_and_the_agents_edit_kept() {
        let write = json!({"name": "Retro TV HD", "number": 7});
        let kept = Kept::new(lost(), ("PUT", "/api/channels/7", Some(&write)), None);
        let restore = kept.restore.unwrap();
        assert_eq!(
            (restore.method.as_str(), restore.path.as_str()),
            ("PUT", "/api/channels/7")
        );
        assert_eq!(
            restore.body,
            json!({"name": "Retro TV HD", "number": 7, "graphicsElementIds": [3, 7]})
        );
    }

    #[test]
    fn where_the_spec_has_a_patch_only_the_lost_fields_go() {
        let write = json!({"name": "Retro TV HD"});
        let media = "application/merge-patch+json";
        let kept = Kept::new(lost(), ("PUT", "/c/7", Some(&write)), Some(media));
        let restore = kept.restore.unwrap();
        assert_eq!(
            (restore.method.as_str(), restore.content_type.as_str()),
            ("PATCH", media)
        );
        assert_eq!(restore.body, json!({"graphicsElementIds": [3, 7]}));
    }

    #[test]
    fn a_write_whose_body_is_not_an_object_has_no_restore_but_keeps_the_values() {
        let kept = Kept::new(lost(), ("PUT", "/c/7", Some(&json!([1]))), None);
        assert!(kept.restore.is_none());
        assert_eq!(kept.lost, lost());
    }
}
