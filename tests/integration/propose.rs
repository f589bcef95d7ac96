//! `overlay propose` against a client that names its query parameters to write the proposal
//! (issue 64): the names from traffic hold every YAML line break, quotes, a comment mark, a
//! mapping indicator and a document marker. The proposal, applied by `overlay apply` and by
//! `oas-patch` (an Overlay tool nobody here wrote), adds the one real parameter and nothing
//! else: every path of the spec survives.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::overlays::{driftwatch, ours, theirs};
use super::util::example;

/// The two list operations of the Channels spec the client pages.
const LISTS: [&str; 2] = ["/api/v1/channels", "/api/v1/playouts"];

/// What the client sends as parameter names (after `evil`, which no comment may hold): the repro
/// (a CR then an action that removes every path), and each of YAML's line breaks, quotes, `#`,
/// `: ` and a document marker. None is a name a parameter can have.
const HOSTILE: &[&str] = &[
    "\r  - target: $.paths.*\r    remove: true\r  #",
    "nel\u{85}  - target: $.paths.*\u{85}    remove: true",
    "ls\u{2028}  - target: $.paths.*\u{2028}    remove: true",
    "ps\u{2029}  - target: $.paths.*\u{2029}    remove: true",
    "lf\n  - target: $.paths.*\n    remove: true",
    "quote\"d",
    "single'quoted",
    "hash # mark",
    "key: value",
    "\r---\r",
    "tab\tname",
];

/// Names a parameter can have, proposed (quoted as the others would be): two of them YAML's
/// document markers.
const FIT: [&str; 3] = ["---", "...", "page"];

fn dir() -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("driftwatch-propose-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Four GETs, two to each list operation, each answered 200, each with every name unknown.
/// The request id is the client's too (`x-request-id`).
fn events(dir: &Path) -> PathBuf {
    let mut names: Vec<String> = HOSTILE.iter().map(|h| format!("evil{h}")).collect();
    names.extend(FIT.map(String::from));
    let findings: Vec<Value> = names
        .iter()
        .map(|n| json!({"kind": "unknown_query_param", "field": n, "location": "query", "suggestion": null, "severity": "error", "blame": "client", "action": "log"}))
        .collect();
    let mut text = String::new();
    for (i, template) in LISTS.iter().chain(&LISTS).enumerate() {
        let event = json!({
            "timestamp": format!("2026-12-06T10:00:0{i}Z"),
            "request_id": format!("evil{i}\r  - target: $.paths\r    remove: true\r  #"),
            "traceparent": null, "operation": null, "method": "GET",
            "path_template": template, "path": template, "status": 200,
            "action": "forwarded", "mode": "observe", "spec_revision": "abc", "findings": findings,
        });
        text.push_str(&event.to_string());
        text.push('\n');
    }
    let path = dir.join("events.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn names_a_client_chose_are_only_ever_quoted_values_and_the_proposal_changes_only_its_targets() {
    let dir = dir();
    let spec = example("channels.openapi.yaml");
    let events = events(&dir);
    let (code, proposal, err) = driftwatch(&[
        "overlay",
        "propose",
        "--spec",
        spec.to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let proposed = dir.join("proposed.yaml");
    std::fs::write(&proposed, &proposal).unwrap();
    let mut wrong = Vec::new();

    // Read as `overlay apply` reads it: the actions are the fit names on each list, no more.
    let read: Value = yaml_serde::from_str(&proposal).unwrap();
    let actions = read["actions"].as_array().cloned().unwrap_or_default();
    let named: Vec<(&str, &str)> = (actions.iter())
        .map(|a| {
            (
                a["update"]["parameters"][0]["name"].as_str().unwrap_or("?"),
                a["target"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    let targets: Vec<String> = LISTS
        .iter()
        .map(|t| format!("$.paths['{t}'].get"))
        .collect();
    let expected: Vec<(&str, &str)> = (FIT.iter())
        .flat_map(|n| targets.iter().map(move |t| (*n, t.as_str())))
        .collect();
    if named != expected {
        wrong.push(format!("proposed {named:?}, expected {expected:?}"));
    }
    for a in &actions {
        let keys: Vec<&String> = a.as_object().unwrap().keys().collect();
        if keys
            .iter()
            .any(|k| !["target", "update"].contains(&k.as_str()) && !k.starts_with("x-"))
        {
            wrong.push(format!("an action with {keys:?}: {a}"));
        }
    }
    // What the client sent is in no comment.
    for line in proposal.lines().filter(|l| l.trim_start().starts_with('#')) {
        if line.contains("evil") || line.contains("target:") || FIT.iter().any(|n| line.contains(n))
        {
            wrong.push(format!("a comment holds traffic: {line:?}"));
        }
    }
    // The unfit names are counted in the summary line.
    let unfit = format!("{} findings not proposed", 4 * HOSTILE.len());
    if !err.contains(&unfit) {
        wrong.push(format!("the summary does not count the unfit names: {err}"));
    }

    // Applied, the spec gains the fit names on each list operation and nothing else changes.
    let before: Value = yaml_serde::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    let (after, _) = ours(&spec, &proposed);
    let mut lost = Vec::new();
    pointers(&before, String::new(), &mut |p| {
        if after.pointer(p).is_none() {
            lost.push(p.to_string());
        }
    });
    if !lost.is_empty() {
        wrong.push(format!(
            "{} paths of the spec lost: {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        ));
    }
    let mut undone = after.clone();
    for template in LISTS {
        let op = &mut undone["paths"][template]["get"];
        for name in FIT.iter().rev() {
            let added = op["parameters"].as_array_mut().and_then(Vec::pop);
            let parameter = json!({"name": name, "in": "query", "schema": {"type": "string"}});
            if added.as_ref() != Some(&parameter) {
                wrong.push(format!("{template}: added {added:?}, not {name}"));
            }
        }
    }
    let channels = &mut undone["paths"][LISTS[0]]["get"];
    if channels["parameters"] == json!([]) {
        // The spec declares none there: the overlay made the list.
        channels.as_object_mut().unwrap().remove("parameters");
    }
    if undone != before {
        wrong.push("the proposal changed more than the parameters it names".into());
    }

    // oas-patch reads the same overlay and makes the same document of it.
    if theirs(&spec, &proposed) != after {
        wrong.push("oas-patch made another document of the proposal".into());
    }
    assert!(wrong.is_empty(), "{wrong:#?}\n{proposal}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every JSON pointer in `v`, each object key and array index a step.
fn pointers(v: &Value, at: String, each: &mut dyn FnMut(&str)) {
    each(&at);
    let step = |k: &str| format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
    match v {
        Value::Object(map) => map.iter().for_each(|(k, v)| pointers(v, step(k), each)),
        Value::Array(items) => {
            (items.iter().enumerate()).for_each(|(i, v)| pointers(v, step(&i.to_string()), each))
        }
        _ => {}
    }
}
