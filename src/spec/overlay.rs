//! OpenAPI Overlays (1.0 and 1.1): the operator's completions of a vendor's spec, kept in
//! files of their own so that each release of the spec does not undo them. Each overlay is
//! applied in order to the document as read, before its `$ref`s are bundled, as the Overlay
//! tools (Speakeasy, Redocly, `oas-patch`) apply it; the document the contract compiles is the
//! completed one. An overlay is part of the revision: its bytes are hashed with the spec's, and
//! its file is stamped, so an edit to it reloads as an edit to the spec does.
//!
//! The actions are `roas-overlay`'s (RFC 9535 JSONPath, the Overlay merge rules). What is ours:
//! a malformed overlay is refused naming the file, the action's index and the reason; an action
//! whose target matches nothing is a load warning naming the overlay, the action and the
//! target, since a target that no longer matches usually means the vendor's spec moved.

use std::path::Path;

use roas_overlay::apply::Apply;
use roas_overlay::v1_1::Overlay;
use roas_overlay::validation::Validate;
use serde_json::Value;

use super::files::SpecFile;
use super::notes::{Note, NoteKind};
use super::{SpecError, read};

/// An overlay applied: its file as stamped before it was read, its bytes' hash, and a warning
/// for each action that matched nothing.
pub(crate) struct Applied {
    pub file: SpecFile,
    pub hash: String,
    pub notes: Vec<Note>,
}

/// Apply the overlay in the file at `path` to `doc`, read within `max` bytes. On an error the
/// document is as it was.
pub(crate) fn apply(doc: &mut Value, path: &Path, max: u64) -> Result<Applied, SpecError> {
    let file = SpecFile::before_reading(path);
    let (bytes, name) = read::read_bytes(path, max)?;
    let (value, hash, _) = read::parse_whole(path, &bytes, &name)?;
    let overlay = parse(path, value)?;
    let report = overlay
        .apply(doc, Default::default())
        .map_err(|e| SpecError::at(path, &format!("/actions/{}", e.action_index), e.to_string()))?;
    let name = path.display();
    let notes = (report.actions.iter())
        .filter(|a| a.matched == 0)
        .map(|a| Note {
            pointer: format!("{name}#/actions/{}", a.index),
            kind: NoteKind::OverlayTarget,
            detail: format!(
                "overlay {name}: actions[{}] ({}) targets `{}`, which matches nothing in the \
                 document: it changed nothing (has the spec moved?)",
                a.index, a.operation, a.target
            ),
        })
        .collect();
    Ok(Applied { file, hash, notes })
}

/// The overlay document, as 1.1 (a 1.0 one is read as 1.0, then carried over: 1.1 only adds).
fn parse(path: &Path, value: Value) -> Result<Overlay, SpecError> {
    let version = match value.get("overlay") {
        Some(Value::String(v)) => v.clone(),
        Some(_) => {
            return Err(SpecError::at(
                path,
                "/overlay",
                "`overlay` must be a string such as \"1.1.0\"",
            ));
        }
        None => {
            return Err(SpecError::at(
                path,
                "",
                "no `overlay` key: this is not an OpenAPI Overlay document",
            ));
        }
    };
    check_actions(path, &value)?;
    let overlay: Overlay = if version.starts_with("1.0.") {
        let old: roas_overlay::v1_0::Overlay =
            serde_json::from_value(value).map_err(|e| SpecError::at(path, "", e.to_string()))?;
        old.into()
    } else if version.starts_with("1.1.") {
        serde_json::from_value(value).map_err(|e| SpecError::at(path, "", e.to_string()))?
    } else {
        return Err(SpecError::at(
            path,
            "/overlay",
            format!("Overlay {version} is not supported (1.0.x and 1.1.x are)"),
        ));
    };
    if let Err(e) = overlay.validate(Default::default()) {
        let first = e.errors.first();
        let pointer = first.map(|f| pointer(&f.path)).unwrap_or_default();
        let reason = first.map(|f| f.message.clone()).unwrap_or_default();
        return Err(SpecError::at(path, &pointer, reason));
    }
    Ok(overlay)
}

/// Each action read alone, so that one in the wrong shape is named by its index.
fn check_actions(path: &Path, value: &Value) -> Result<(), SpecError> {
    let Some(actions) = value.get("actions") else {
        return Err(SpecError::at(
            path,
            "",
            "no `actions`: an overlay lists what it changes",
        ));
    };
    let Some(actions) = actions.as_array() else {
        return Err(SpecError::at(path, "/actions", "`actions` must be a list"));
    };
    for (i, action) in actions.iter().enumerate() {
        if let Err(e) = serde_json::from_value::<roas_overlay::v1_1::Action>(action.clone()) {
            return Err(SpecError::at(path, &format!("/actions/{i}"), e.to_string()));
        }
    }
    Ok(())
}

/// `#.actions[3].target` as the JSON pointer `/actions/3/target`.
fn pointer(path: &str) -> String {
    let path = path.trim_start_matches('#');
    let mut out = String::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, index) = match part.split_once('[') {
            Some((name, rest)) => (name, Some(rest.trim_end_matches(']'))),
            None => (part, None),
        };
        out.push('/');
        out.push_str(name);
        if let Some(i) = index {
            out.push('/');
            out.push_str(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::spec::{LoadOptions, Spec, file_revision_now};

    const SPEC: &str = "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /pets:\n    get:\n      responses: {'200': {description: ok}}\n";
    const PAGING: &str = "overlay: 1.1.0\ninfo: {title: paging, version: '1'}\nactions:\n  - target: $.paths.*.get\n    update: {parameters: [{name: page, in: query}]}\n  - target: $.paths['/gone']\n    remove: true\n";

    #[test]
    fn an_overlay_is_part_of_the_revision_and_an_edit_to_it_is_a_new_one() {
        let dir = std::env::temp_dir().join(format!("driftwatch-overlay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (spec, overlay) = (dir.join("spec.yaml"), dir.join("paging.yaml"));
        std::fs::write(&spec, SPEC).unwrap();
        std::fs::write(&overlay, PAGING).unwrap();
        let plain = Spec::load(&spec).unwrap();
        let options = LoadOptions {
            overlays: vec![overlay.clone()],
            ..LoadOptions::default()
        };
        let completed = Spec::load_with(&spec, &options).unwrap();
        assert_eq!(
            completed.doc["paths"]["/pets"]["get"]["parameters"][0]["name"],
            "page"
        );
        assert_ne!(completed.revision, plain.revision, "the overlay counts");
        assert_eq!(completed.files.overlays.len(), 1);
        assert_eq!(completed.files.stamps_when_read().len(), 2, "it is watched");
        let note = &completed.notes[0];
        assert_eq!(note.pointer, format!("{}#/actions/1", overlay.display()));
        assert!(
            note.detail.contains("(remove) targets `$.paths['/gone']`"),
            "{}",
            note.detail
        );

        let max = options.max_bytes;
        let now = || file_revision_now(&spec, &completed.files, max);
        assert_eq!(now().as_ref(), Some(&completed.revision), "nothing changed");
        std::fs::write(&overlay, PAGING.replace("page,", "pagelen,")).unwrap();
        assert_ne!(
            now().as_ref(),
            Some(&completed.revision),
            "the overlay changed"
        );
        assert_eq!(
            Spec::load_with(&spec, &options).unwrap().revision,
            now().unwrap()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
