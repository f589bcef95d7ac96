//! OpenAPI Overlays (issue 54): the operator's completions of a vendor's spec. What driftwatch
//! makes of an overlay is compared with an Overlay tool nobody here wrote (`oas-patch` from
//! PyPI); an overlay that declares an API's global paging parameters makes exactly those
//! findings go; an overlay edited while serving takes effect without a lost request.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::mcp::{Sdk, python};
use super::sidecar::{admin_get, config, raw, sample, scrape, start};
use super::upstream::{self, ok};
use super::util::{eventually, example};

const OAS_PATCH: Sdk = Sdk {
    venv: "target/tools/oas-patch",
    package: "oas-patch==0.6.0",
    module: "oas_patch",
    script: "",
};

/// A directory of this test's own.
fn dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("driftwatch-overlays-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `page` and `pagelen` on every GET: what a code-hosting API documents as global paging
/// parameters and declares on no operation.
const PAGING: &str = "overlay: 1.0.0
info: {title: Global paging parameters, version: 1.0.0}
actions:
  - target: $.paths.*.get
    description: page and pagelen are accepted on every list call
    update:
      parameters:
        - {name: page, in: query, schema: {type: integer, minimum: 1}}
        - {name: pagelen, in: query, schema: {type: integer, minimum: 1, maximum: 100}}
";

/// Overlays of every action kind, on the Channels spec: each as driftwatch applies it and as
/// `oas-patch` does must be the same document.
const OVERLAYS: &[(&str, &str)] = &[
    ("paging.yaml", PAGING),
    (
        "remove.yaml",
        "overlay: 1.0.0
info: {title: No sort, version: '1'}
actions:
  - target: $.paths.*.get.parameters[?@.name == 'sort']
    remove: true
  - target: $.paths['/api/v1/health']
    update: {description: not in this spec}
",
    ),
    (
        "fields.json",
        r#"{"overlay": "1.1.0", "info": {"title": "Computed fields", "version": "1"},
            "actions": [
              {"target": "$.components.schemas.*.properties", "update": {"etag": {"type": "string", "readOnly": true}}},
              {"target": "$.info", "update": {"x-completed-by": "fields.json", "title": "Channels, completed"}},
              {"target": "$.paths.*.*.responses", "update": {"429": {"description": "rate limited"}}}
            ]}"#,
    ),
];

pub(super) fn driftwatch(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(args)
        .output()
        .unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (
        out.status.code().unwrap_or(-1),
        text(out.stdout),
        text(out.stderr),
    )
}

/// The spec with the overlay applied by driftwatch (`overlay apply`), and what it said.
pub(super) fn ours(spec: &Path, overlay: &Path) -> (Value, String) {
    let (spec, overlay) = (spec.to_str().unwrap(), overlay.to_str().unwrap());
    let (code, out, err) = driftwatch(&["overlay", "apply", "--spec", spec, "--overlay", overlay]);
    assert_eq!(code, 0, "{err}");
    (serde_json::from_str(&out).unwrap(), err)
}

/// The spec with the overlay applied by `oas-patch` (PyPI), written beside the overlay.
pub(super) fn theirs(spec: &Path, overlay: &Path) -> Value {
    let out = overlay.with_extension("oas-patch.yaml");
    let applied = Command::new(python(OAS_PATCH).with_file_name("oas-patch"))
        .arg("overlay")
        .args([spec, overlay])
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(applied.status.success(), "{applied:?}");
    yaml_serde::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

#[test]
fn each_overlay_gives_the_document_oas_patch_gives() {
    let dir = dir("oas-patch");
    let spec = example("channels.openapi.yaml");
    let before: Value = yaml_serde::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    let mut changed = 0;
    for (name, text) in OVERLAYS {
        let overlay = dir.join(name);
        std::fs::write(&overlay, text).unwrap();
        let (ours, err) = ours(&spec, &overlay);
        assert_eq!(
            ours,
            theirs(&spec, &overlay),
            "{name}: driftwatch and oas-patch differ"
        );
        changed += usize::from(ours != before);
        // The action whose target matches nothing is said, naming the overlay and the target.
        let unmatched = text.contains("/api/v1/health");
        assert_eq!(err.contains("matches nothing"), unmatched, "{name}: {err}");
        if unmatched {
            let said = "remove.yaml: actions[1] (update) targets `$.paths['/api/v1/health']`";
            assert!(err.contains(said), "{err}");
        }
    }
    assert_eq!(
        changed,
        OVERLAYS.len(),
        "every overlay changed the document"
    );
}

#[test]
fn a_malformed_overlay_is_refused_naming_the_file_the_action_and_the_reason() {
    let dir = dir("malformed");
    let spec = example("channels.openapi.yaml");
    let cases = [
        (
            "overlay: 1.0.0\ninfo: {title: t, version: '1'}\nactions:\n  - target: $.info\n    update: {a: 1}\n  - target: '$.paths[?'\n    update: {a: 1}\n",
            "at /actions/1/target: invalid JSONPath",
        ),
        (
            "overlay: 1.0.0\ninfo: {title: t, version: '1'}\nactions:\n  - target: $.info\n    update: {a: 1}\n  - update: {a: 1}\n",
            "at /actions/1: missing field `target`",
        ),
        (
            "overlay: 2.0.0\ninfo: {title: t, version: '1'}\nactions: []\n",
            "at /overlay: Overlay 2.0.0 is not supported",
        ),
        ("openapi: 3.1.0\n", "not an OpenAPI Overlay document"),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let overlay = dir.join(format!("bad-{i}.yaml"));
        std::fs::write(&overlay, text).unwrap();
        let (code, _, err) = driftwatch(&[
            "serve",
            "--check",
            "--spec",
            spec.to_str().unwrap(),
            "--upstream",
            "http://127.0.0.1:9",
            "--overlay",
            overlay.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(&format!("{}: ", overlay.display())),
            "names the file: {err}"
        );
        assert!(err.contains(expected), "case {i}: {err}");
    }
}

/// The example session, and the same calls again as a client that pages every list call
/// (`page`, `pagelen`) sends them.
fn paging_session(dir: &Path) -> PathBuf {
    let example = std::fs::read_to_string(example("channels.traffic.jsonl")).unwrap();
    let mut out = example.clone();
    for line in example.lines() {
        let mut line: Value = serde_json::from_str(line).unwrap();
        if line["method"] == "GET" {
            let url = line["url"].as_str().unwrap().to_string();
            let sep = if url.contains('?') { '&' } else { '?' };
            line["url"] = format!("{url}{sep}page=2&pagelen=50").into();
        }
        out.push_str(&line.to_string());
        out.push('\n');
    }
    let path = dir.join("session.jsonl");
    std::fs::write(&path, out).unwrap();
    path
}

/// Each finding of `driftwatch check` as `kind field blame`, sorted.
fn findings(spec: &Path, traffic: &Path, overlay: Option<&Path>) -> Vec<String> {
    let mut args = vec!["check", "--spec", spec.to_str().unwrap()];
    args.extend(["--traffic", traffic.to_str().unwrap(), "--format", "jsonl"]);
    if let Some(o) = overlay {
        args.extend(["--overlay", o.to_str().unwrap()]);
    }
    let (code, out, err) = driftwatch(&args);
    assert!(code == 0 || code == 1, "{err}");
    let mut all: Vec<String> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|f| format!("{} {} {}", f["kind"], f["field"], f["blame"]))
        .collect();
    all.sort();
    all
}

#[test]
fn an_overlay_declaring_the_paging_parameters_makes_exactly_those_findings_go() {
    let dir = dir("paging");
    let spec = example("channels.openapi.yaml");
    let traffic = paging_session(&dir);
    let overlay = dir.join("paging.yaml");
    std::fs::write(&overlay, PAGING).unwrap();
    let before = findings(&spec, &traffic, None);
    let after = findings(&spec, &traffic, Some(&overlay));
    let paging = |f: &&String| f.contains("\"page\"") || f.contains("\"pagelen\"");
    let gone: Vec<&String> = before.iter().filter(paging).collect();
    assert!(
        gone.len() >= 6,
        "the session sends paging on every GET: {before:#?}"
    );
    assert!(
        gone.iter()
            .all(|f| f.starts_with("\"unknown_query_param\"")),
        "{gone:#?}"
    );
    let kept: Vec<String> = before.iter().filter(|f| !paging(f)).cloned().collect();
    assert_eq!(after, kept, "only the paging findings went");
    assert!(
        after.iter().any(|f| f.ends_with("\"client\"")),
        "the tool's own drift stays"
    );
    eprintln!(
        "paging overlay: {} findings before, {} after ({} paging findings gone)",
        before.len(),
        after.len(),
        gone.len()
    );
}

const PAGED: &[u8] = b"GET /api/v1/playouts?pageNum=0&page=2 HTTP/1.1\r\nhost: x\r\n\r\n";

fn unknown_page(scrape: &str) -> f64 {
    let series = "driftwatch_findings_total{kind=\"unknown_query_param\",operation=\"listPlayouts\",severity=\"error\",blame=\"client\"}";
    super::sidecar::sample(scrape, series)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlay_edited_while_serving_takes_effect_without_a_lost_request() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dir = dir("serving");
    let overlay = dir.join("paging.yaml");
    // At first the overlay declares only pagelen: `page` is still unknown.
    std::fs::write(&overlay, PAGING.replace("page, in", "ignored, in")).unwrap();
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(example("channels.openapi.yaml"));
        c.spec.overlays = vec![overlay.clone()];
        c.spec.watch_interval_ms = 20;
        c.audit.response_sample_rate = 0.0;
    }))
    .await;
    let listed = admin_get(dw.admin, "/spec").await.json();
    assert_eq!(listed["overlays"], serde_json::json!([overlay]), "{listed}");
    let first = listed["revision"].clone();
    assert_eq!(raw(dw.addr, PAGED).await.status, 200);
    assert_eq!(unknown_page(&scrape(dw.admin).await), 1.0);

    // Requests keep coming while the overlay is edited and reloaded.
    let addr = dw.addr;
    let load = tokio::spawn(async move {
        let mut statuses = Vec::new();
        for _ in 0..200 {
            statuses.push(raw(addr, PAGED).await.status);
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        statuses
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    std::fs::write(&overlay, PAGING).unwrap();
    let now = eventually("the edited overlay to be reloaded", || async {
        let now = admin_get(dw.admin, "/spec").await.json()["revision"].clone();
        (now != first).then_some(now)
    })
    .await;
    let statuses = load.await.unwrap();
    assert!(
        statuses.iter().all(|s| *s == 200),
        "no request lost: {statuses:?}"
    );
    let counted = unknown_page(&scrape(dw.admin).await);
    assert_eq!(raw(dw.addr, PAGED).await.status, 200);
    assert_eq!(
        unknown_page(&scrape(dw.admin).await),
        counted,
        "revision {now}: `page` is declared now"
    );
    dw.stop().await;
}

#[test]
fn diff_and_serve_check_say_what_an_overlay_changes_and_that_it_is_in_force() {
    let dir = dir("diff");
    let overlay = dir.join("paging.yaml");
    std::fs::write(&overlay, PAGING).unwrap();
    let spec = example("channels.openapi.yaml");
    let (spec, overlay) = (spec.to_str().unwrap(), overlay.to_str().unwrap());
    let (code, out, err) =
        driftwatch(&["diff", spec, spec, "--overlay", overlay, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let changes: Value = serde_json::from_str(&out).unwrap();
    let changes = changes["changes"].as_array().unwrap();
    let gets = ours(Path::new(spec), Path::new(overlay)).0;
    let gets = gets["paths"]
        .as_object()
        .unwrap()
        .values()
        .filter(|p| p.get("get").is_some())
        .count();
    assert_eq!(
        changes.len(),
        2 * gets,
        "page and pagelen on each GET: {changes:#?}"
    );
    assert!(
        changes
            .iter()
            .all(|c| c["kind"] == "param_added" && c["class"] == "info")
    );
    let (code, out, err) = driftwatch(&[
        "serve",
        "--check",
        "--spec",
        spec,
        "--upstream",
        "http://127.0.0.1:9",
        "--overlay",
        overlay,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("  overlay   {overlay}\n")), "{out}");
}

/// The session's lines as requests on the wire.
fn replayed(traffic: &Path) -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(traffic).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|line| {
            let body = match &line["body"] {
                Value::Null => String::new(),
                body => body.to_string(),
            };
            let mut head = format!(
                "{} {} HTTP/1.1\r\nhost: x\r\n",
                line["method"].as_str().unwrap(),
                line["url"].as_str().unwrap()
            );
            if !body.is_empty() {
                head.push_str(&format!(
                    "content-type: application/json\r\ncontent-length: {}\r\n",
                    body.len()
                ));
            }
            format!("{head}\r\n{body}").into_bytes()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlay_proposed_from_the_events_does_what_the_hand_written_one_does() {
    let dir = dir("propose");
    let spec = example("channels.openapi.yaml");
    let traffic = paging_session(&dir);
    // The API answers 2xx, but refuses `sort_by` (a parameter the client made up): 400.
    let up = upstream::start(
        std::sync::Arc::new(
            |r: &upstream::Recorded| match r.target.contains("sort_by=") {
                true => (400, "{\"error\":\"sort_by\"}".into()),
                false => (200, "{\"ok\":true}".into()),
            },
        ),
        Duration::ZERO,
        None,
    )
    .await;
    let events = dir.join("events.jsonl");
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.events.output = events.display().to_string();
    }))
    .await;
    let mut requests = replayed(&traffic);
    // A newer endpoint the spec lacks, and a parameter the API refuses, on several operations.
    for _ in 0..2 {
        requests.push(b"GET /api/v1/backups/policy HTTP/1.1\r\nhost: x\r\n\r\n".to_vec());
        requests.push(b"GET /api/v1/channels/7?sort_by=name HTTP/1.1\r\nhost: x\r\n\r\n".to_vec());
        requests.push(b"GET /api/v1/playouts?sort_by=name HTTP/1.1\r\nhost: x\r\n\r\n".to_vec());
    }
    for request in &requests {
        raw(dw.addr, request).await;
    }
    let spec_text = spec.to_str().unwrap();
    let url = format!("http://{}/findings", dw.admin);
    // Response audits run after the last byte: wait until the last request's are in.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let spec_owned = spec_text.to_string();
    let live = tokio::task::spawn_blocking(move || {
        driftwatch(&[
            "overlay",
            "propose",
            "--spec",
            &spec_owned,
            "--findings",
            &url,
        ])
    });
    let (code, live, err) = live.await.unwrap();
    assert_eq!(code, 0, "{err}");
    dw.stop().await;
    let events_text = events.to_str().unwrap();
    let (code, proposal, err) = driftwatch(&[
        "overlay",
        "propose",
        "--spec",
        spec_text,
        "--events",
        events_text,
    ]);
    assert_eq!(code, 0, "{err}");
    let actions = |text: &str| text.lines().skip(1).map(String::from).collect::<Vec<_>>();
    assert_eq!(
        actions(&live),
        actions(&proposal),
        "a running sidecar's /findings, or its events file"
    );
    let proposed = dir.join("proposed.yaml");
    std::fs::write(&proposed, &proposal).unwrap();
    assert!(
        !proposal.contains("sort_by"),
        "never what the API refused:\n{proposal}"
    );
    assert!(
        !proposal.contains("page_size"),
        "never a rename the tool is to blame for:\n{proposal}"
    );
    // A name from traffic is a quoted value under a comment of fixed words (tests/integration/propose.rs).
    assert!(
        proposal.contains("# query parameter (named below): sent on")
            && proposal.contains(r#"{"name": "page", "in": "query""#),
        "{proposal}"
    );
    // The path as events show it, a segment that may be a value as `*` (`policy`, a word the
    // spec has nowhere, masked by the sidecar unless `events.log_values`): proposed as a
    // parameter named for its collection.
    assert!(
        proposal.contains("# endpoint GET (its path below)")
            && proposal.contains(r#"update: {"/api/v1/backups/{backup_id}": {"get""#),
        "{proposal}"
    );

    // The proposal, applied here and by oas-patch: one document.
    assert_eq!(ours(&spec, &proposed).0, theirs(&spec, &proposed));

    // On the session: the paging findings go as with the hand-written overlay, nothing is
    // added, and every finding the tool is to blame for stays.
    let hand = dir.join("paging.yaml");
    std::fs::write(&hand, PAGING).unwrap();
    let before = findings(&spec, &traffic, None);
    let by_hand = findings(&spec, &traffic, Some(&hand));
    let by_proposal = findings(&spec, &traffic, Some(&proposed));
    assert_eq!(by_proposal, by_hand, "{proposal}");
    eprintln!(
        "proposed overlay: {} findings before, {} after (hand-written: {}); {} actions",
        before.len(),
        by_proposal.len(),
        by_hand.len(),
        proposal.matches("  - target:").count()
    );
}

/// 20 `update` actions, each giving every non-empty object and list of the document one more
/// member that is itself one: each action doubles them (1.9 KB of overlay, issue 64).
fn doubling() -> String {
    let mut text =
        String::from("overlay: 1.0.0\ninfo: {title: doubling, version: '1'}\nactions:\n");
    for k in 0..20 {
        text.push_str(&format!(
            "  - target: $..[?@.*]\n    description: every object and list gains one more ({k})\n    update: {{x-d{k}: {{e: {k}}}}}\n"
        ));
    }
    text
}

/// The `/actions/N` an error names for `overlay`.
fn action_named(err: &str, overlay: &Path) -> usize {
    let said = format!("{}: at /actions/", overlay.display());
    let at = err
        .find(&said)
        .unwrap_or_else(|| panic!("names no action: {err}"))
        + said.len();
    let digits: String = err[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

/// Issue 64: the doubling overlay took `serve --check` to 5.7 GB and an abort. It is refused
/// at the action that passes the bound, before that action runs: under a 1 GiB address-space
/// limit (`ulimit -v`) the check ends with its refusal, not an allocation failure.
#[test]
fn an_overlay_that_doubles_the_document_is_refused_at_the_action_that_passes_the_bound() {
    let dir = dir("doubling");
    let overlay = dir.join("doubling.yaml");
    std::fs::write(&overlay, doubling()).unwrap();
    let out = Command::new("sh")
        .args(["-c", "ulimit -v 1048576; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_driftwatch"))
        .args([
            "serve",
            "--check",
            "--upstream",
            "http://127.0.0.1:9",
            "--spec",
        ])
        .arg(example("channels.openapi.yaml"))
        .arg("--overlay")
        .arg(&overlay)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{:?}: {err}", out.status);
    assert!(err.contains("spec.max_bytes"), "{err}");
    let action = action_named(&err, &overlay);
    assert!((1..20).contains(&action), "{err}");
}

/// The same overlay put in place of one in force: the reload answers with the refusal, the
/// revision in force stays, and the sidecar answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_to_the_doubling_overlay_is_refused_and_the_revision_in_force_stays() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dir = dir("doubling-reload");
    let overlay = dir.join("overlay.yaml");
    std::fs::write(&overlay, PAGING).unwrap();
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.overlays = vec![overlay.clone()];
        c.spec.watch_interval_ms = 0;
        c.audit.response_sample_rate = 0.0;
    }))
    .await;
    let first = admin_get(dw.admin, "/spec").await.json()["revision"].clone();
    std::fs::write(&overlay, doubling()).unwrap();
    let answer = raw(
        dw.admin,
        b"POST /spec/reload HTTP/1.1\r\nhost: admin\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
    )
    .await;
    let text = String::from_utf8_lossy(&answer.body).to_string();
    assert!(answer.status >= 400, "{} {text}", answer.status);
    assert!(text.contains("spec.max_bytes"), "{text}");
    assert!((1..20).contains(&action_named(&text, &overlay)), "{text}");
    let now = admin_get(dw.admin, "/spec").await.json()["revision"].clone();
    assert_eq!(now, first, "the revision in force stays");
    let m = scrape(dw.admin).await;
    let hits = sample(&m, "driftwatch_limit_hits_total{limit=\"spec_bytes\"}");
    assert_eq!(hits, 1.0, "counted as a spec past its bound is");
    assert_eq!(raw(dw.addr, PAGED).await.status, 200);
    dw.stop().await;
}
