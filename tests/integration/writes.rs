//! Write semantics read from the spec, per operation: the shared specs' writes pinned, the
//! GitHub MCP server's action PUTs free of replace findings while a real replace still has
//! them, and the config's overrides by id, label and pattern.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use driftwatch::contract::{Contract, ContractOptions, WriteSemantics};
use serde_json::{Value, json};

use super::util::{contract, example, shared_spec};

/// (semantics, reason, PUTs).
type Classes = &'static [(&'static str, &'static str, usize)];

/// Per spec: (semantics, reason) of its PUTs, counted.
const PINNED: &[(&str, Classes)] = &[
    (
        "github/api.github.com.json.gz",
        &[
            ("action", "action_path", 2),
            ("action", "answer_differs", 2),
            ("action", "no_object_body", 36),
            ("action", "not_read_representation", 26),
            ("action", "read_shows_nothing", 11),
            ("replace", "answer_echoes", 5),
            ("replace", "default", 5),
            ("replace", "read_representation", 47),
        ],
    ),
    ("ersatztv/v1.json", &[("replace", "default", 2)]),
    ("ersatztv/scripted-schedule.json", &[]),
    (
        "readme/petstore-3.0.json",
        &[
            ("replace", "default", 1),
            ("replace", "read_representation", 1),
        ],
    ),
    (
        "scalar/galaxy.json",
        &[("replace", "read_representation", 1)],
    ),
];

fn classes(contract: &Contract) -> BTreeMap<(&'static str, &'static str), usize> {
    let mut out = BTreeMap::new();
    for op in contract.operations().iter().filter(|op| op.method == "PUT") {
        *out.entry((op.write.as_str(), op.write_reason.as_str()))
            .or_default() += 1;
    }
    out
}

#[test]
fn the_shared_specs_writes_are_pinned() {
    for (rel, pinned) in PINNED {
        let got = classes(&contract(&shared_spec(rel)));
        let want: BTreeMap<_, _> = pinned.iter().map(|(w, r, n)| ((*w, *r), *n)).collect();
        assert_eq!(got, want, "{rel}");
    }
    let github = contract(&shared_spec("github/api.github.com.json.gz"));
    let write = |id: &str| github.operation(id).unwrap().write;
    for action in [
        "repos/create-or-update-file-contents",
        "pulls/merge",
        "pulls/update-branch",
    ] {
        assert_eq!(write(action), WriteSemantics::Action, "{action}");
    }
    assert_eq!(
        write("actions/set-github-actions-permissions-repository"),
        WriteSemantics::Replace
    );
    // Issue 66: no GET shows them and their paths end in actions; the lock answers 204, which
    // alone read it as PUT's default replace.
    for action in ["issues/lock", "pulls/merge-async"] {
        let op = github.operation(action).unwrap();
        assert_eq!(op.write, WriteSemantics::Action, "{action}");
        assert_eq!(op.write_reason.as_str(), "action_path", "{action}");
    }
    // The two update PUTs of ErsatzTV write every field and have no GET: replaces (their paths
    // end in `update`, which names a write of the resource, not an action).
    let ersatz = contract(&shared_spec("ersatztv/v1.json"));
    assert!(
        ersatz
            .operations()
            .iter()
            .filter(|op| op.method == "PUT")
            .all(|op| op.write == WriteSemantics::Replace)
    );
    // The demo's channel and schedule PUTs: their bodies are their GETs' representations.
    let channels = contract(&example("channels.openapi.yaml"));
    for id in ["updateChannel", "updateSchedule"] {
        let op = channels.operation(id).unwrap();
        assert_eq!(op.write, WriteSemantics::Replace, "{id}");
        assert_eq!(op.write_reason.as_str(), "read_representation", "{id}");
    }
}

#[test]
fn the_config_names_a_write_by_id_label_or_pattern() {
    let spec = driftwatch::spec::Spec::load(&shared_spec("github/api.github.com.json.gz")).unwrap();
    let with = |key: &str, write| {
        let options = ContractOptions {
            write_overrides: [(key.to_string(), write)].into(),
            ..Default::default()
        };
        Contract::compile(&spec, &options).unwrap()
    };
    let id = "repos/create-or-update-file-contents";
    for key in [
        id,
        "PUT /repos/{owner}/{repo}/contents/{path}",
        "PUT /repos/*/contents/*",
    ] {
        let c = with(key, WriteSemantics::Replace);
        let op = c.operation(id).unwrap();
        assert_eq!(op.write, WriteSemantics::Replace, "{key}");
        assert_eq!(
            op.write_reason.to_string(),
            format!("[spec.write] \"{key}\"")
        );
    }
    // The near twin: a pattern that does not match leaves the spec's reading.
    let c = with("PUT /orgs/*", WriteSemantics::Replace);
    assert_eq!(c.operation(id).unwrap().write, WriteSemantics::Action);
}

/// The (kind, field) of each finding `driftwatch check` reports on `lines` of traffic. Each call
/// writes its own traffic file: tests run at once in one process.
fn check(spec: &std::path::Path, lines: &[Value]) -> Vec<(String, String)> {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!("driftwatch-writes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let traffic = dir.join(format!("traffic-{call}.jsonl"));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&traffic, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["check", "--spec"])
        .arg(spec)
        .arg("--traffic")
        .arg(&traffic)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["field"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The GitHub MCP server's `create_or_update_file` after a GET of the file: no `sha`, no
/// committer, and no replace finding; the near twin, a real replace of the same spec that
/// leaves out a field its GET showed, is still a silent-clear risk.
#[test]
fn an_action_put_has_no_replace_finding_and_a_real_replace_still_does() {
    let spec = shared_spec("github/api.github.com.json.gz");
    let json_body = json!({"content-type": "application/json"});
    let file = json!({"type": "file", "encoding": "base64", "size": 5, "name": "README.md",
        "path": "docs/README.md", "content": "aGVsbG8=", "sha": "3d21ec53a331a6f037a91c368710b99387d012c1",
        "url": "u", "git_url": null, "html_url": null, "download_url": null,
        "_links": {"git": null, "html": null, "self": "u"}});
    let action = check(
        &spec,
        &[
            json!({"method": "GET", "url": "/repos/o/r/contents/docs/README.md",
                   "response": {"status": 200, "body": file}}),
            json!({"method": "PUT", "url": "/repos/o/r/contents/docs/README.md",
                   "headers": json_body, "body": {"message": "m", "content": "aGk=", "branch": "main"},
                   "response": {"status": 200}}),
        ],
    );
    assert!(
        action.iter().all(|(kind, _)| !matches!(
            kind.as_str(),
            "omitted_on_replace" | "silent_clear_risk" | "silent_clear"
        )),
        "{action:?}"
    );
    let permissions = "/repos/o/r/actions/permissions";
    let replace = check(
        &spec,
        &[
            json!({"method": "GET", "url": permissions, "response": {"status": 200,
                   "body": {"enabled": true, "allowed_actions": "selected", "sha_pinning_required": true}}}),
            json!({"method": "PUT", "url": permissions, "headers": json_body,
                   "body": {"enabled": true, "sha_pinning_required": true}, "response": {"status": 204}}),
        ],
    );
    assert!(
        replace.contains(&(
            "silent_clear_risk".to_string(),
            "/allowed_actions".to_string()
        )),
        "{replace:?}"
    );
}

/// Issue 66: GitHub's issue lock, a PUT no GET shows that answers 204 (as Keycloak's
/// reset-password does), sent without its `lock_reason` as the API allows: read from its path
/// as the action it is, it has no `omitted_on_replace` (PUT's default replace had one).
#[test]
fn a_put_whose_path_ends_in_an_action_has_no_replace_finding() {
    let lock = json!({"method": "PUT", "url": "/repos/o/r/issues/7/lock",
        "headers": {"content-type": "application/json"}, "body": {}, "response": {"status": 204}});
    let found = check(&shared_spec("github/api.github.com.json.gz"), &[lock]);
    assert_eq!(found, []);
}

/// `check --writes` lists every write on stderr before the report, which stays JSON.
#[test]
fn check_lists_the_writes_and_why() {
    let out = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["check", "--writes", "--format", "json", "--spec"])
        .arg(shared_spec("ersatztv/v1.json"))
        .arg("--traffic")
        .arg(example("channels.traffic.jsonl"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "PUT /api/ffmpeg/profiles/update  replace: the spec shows nothing either way \
             (no GET, no object answer): PUT's default"
        ),
        "{err}"
    );
    serde_json::from_slice::<Value>(&out.stdout).expect("the report is still JSON");
}
