//! OpenAPI Overlays (1.0 and 1.1): the operator's completions of a vendor's spec, kept in
//! files of their own so that each release of the spec does not undo them. Each overlay is
//! applied in order to the document as read, before its `$ref`s are bundled, as the Overlay
//! tools (Speakeasy, Redocly, `oas-patch`) apply it; the document the contract compiles is the
//! completed one. An overlay is part of the revision: its bytes are hashed with the spec's, and
//! its file is stamped, so an edit to it reloads as an edit to the spec does.
//!
//! The actions are `roas-overlay`'s (RFC 9535 JSONPath, the Overlay merge rules), applied one
//! at a time within a bound on what they add (`spec/action.rs`). What is ours: a malformed
//! overlay is refused naming the file, the action's index and the reason; an action whose
//! target matches nothing is a load warning naming the overlay, the action and the target,
//! since a target that no longer matches usually means the vendor's spec moved; and an action
//! that would take what the overlays add past `spec.max_bytes` is refused, naming it.

use std::path::Path;

use roas_overlay::v1_1::Overlay;
use roas_overlay::validation::Validate;
use serde_json::Value;

use super::action::{Failed, Growth, act};
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

/// Apply the overlay in the file at `path` to `doc`, read within `max` bytes, each action in
/// turn once `growth` has room for what it may add. On an error the document is part
/// applied: the load that asked fails, and drops it.
pub(crate) fn apply(
    doc: &mut Value,
    path: &Path,
    max: u64,
    growth: &mut Growth,
) -> Result<Applied, SpecError> {
    let file = SpecFile::before_reading(path);
    let (bytes, name) = read::read_bytes(path, max)?;
    let (value, hash, _) = read::parse_whole(path, &bytes, &name)?;
    let overlay = parse(path, value)?;
    let name = path.display();
    let mut notes = Vec::new();
    for (index, action) in overlay.actions.iter().enumerate() {
        let matched = act(doc, action, growth).map_err(|failed| match failed {
            Failed::Refused(kind) => {
                let reason = format!("target `{}`: {kind}", action.target);
                SpecError::at(path, &format!("/actions/{index}"), reason)
            }
            Failed::Overgrown { targets, each } => SpecError::Overgrown {
                file: path.to_path_buf(),
                action: index,
                targets,
                each,
                added: growth.added,
                max: growth.max,
            },
        })?;
        if matched > 0 {
            continue;
        }
        let operation = match (action.is_remove(), &action.copy) {
            (true, _) => "remove",
            (false, Some(_)) => "copy",
            (false, None) => "update",
        };
        notes.push(Note {
            pointer: format!("{name}#/actions/{index}"),
            kind: NoteKind::OverlayTarget,
            detail: format!(
                "overlay {name}: actions[{index}] ({operation}) targets `{}`, which matches \
                 nothing in the document: it changed nothing (has the spec moved?)",
                action.target
            ),
        });
    }
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
    use crate::spec::{LoadOptions, Spec, SpecError, file_revision_now};

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

    /// Issue 64: each `copy` of the whole document into it doubles it. With room for a few
    /// doublings, the overlay is refused at the first action that would pass the bound, naming
    /// it, and what the earlier ones added is counted against it.
    #[test]
    fn what_the_overlays_add_is_bounded_at_the_action_that_passes_the_bound() {
        let dir = std::env::temp_dir().join(format!("driftwatch-growth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (spec, overlay) = (dir.join("spec.yaml"), dir.join("double.yaml"));
        std::fs::write(&spec, SPEC).unwrap();
        let mut text = String::from("overlay: 1.1.0\ninfo: {title: t, version: '1'}\nactions:\n");
        for k in 0..30 {
            let each = format!("  - target: $..[?@.*]\n    update: {{x-d{k}: {{e: {k}}}}}\n");
            text.push_str(&each);
        }
        std::fs::write(&overlay, text).unwrap();
        let options = LoadOptions {
            max_bytes: 1 << 20,
            overlays: vec![overlay.clone()],
            ..LoadOptions::default()
        };
        let e = Spec::load_with(&spec, &options).unwrap_err();
        let SpecError::Overgrown {
            action,
            added,
            targets,
            each,
            ..
        } = &e
        else {
            panic!("{e}");
        };
        assert!((5..30).contains(action), "{e}");
        assert!(
            *added > 0 && *added <= 1 << 20 && added + each * *targets as u64 > 1 << 20,
            "{e}"
        );
        let said = format!("{}: at /actions/{action}: ", overlay.display());
        assert!(e.to_string().starts_with(&said), "{e}");
        assert!(e.to_string().contains("spec.max_bytes"), "{e}");
        // The same overlay cut before that action loads: the bound refuses only what passes it.
        let text = std::fs::read_to_string(&overlay).unwrap();
        let kept: Vec<&str> = text.lines().take(3 + 2 * action).collect();
        std::fs::write(&overlay, kept.join("\n")).unwrap();
        assert!(Spec::load_with(&spec, &options).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
