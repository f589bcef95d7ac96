//! The CI formats of `check`, `diff` and `tools` against what CI reads: SARIF 2.1.0 against
//! the official OASIS schema (`tests/data/sarif-schema-2.1.0.json`, from the SARIF TC's
//! repository), JUnit's counts and GitHub's workflow commands; each points at the line a
//! reviewer opens and exits as the text format does.

use std::path::Path;

use serde_json::{Value, json};

use super::util::shared_spec;

const SPEC: &str = "examples/channels.openapi.yaml";

fn driftwatch(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().unwrap_or(2) < 2, "{args:?}: {stderr}");
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into(),
    )
}

fn check(format: &str) -> (i32, String) {
    let traffic = "examples/channels.traffic.jsonl";
    driftwatch(&[
        "check",
        "--spec",
        SPEC,
        "--traffic",
        traffic,
        "--format",
        format,
    ])
}

fn diff(format: &str) -> (i32, String) {
    let dir = shared_spec("ersatztv/history");
    let old = dir.join("3-v1-2025-10-13-b851a7dab.json");
    let new = dir.join("4-v1-2025-10-13-7c2083d3f.json");
    let (old, new) = (old.display().to_string(), new.display().to_string());
    driftwatch(&["diff", &old, &new, "--format", format])
}

fn tools(format: &str) -> (i32, String) {
    let catalog = "examples/channels.tools.json";
    driftwatch(&[
        "tools",
        "--spec",
        SPEC,
        "--tools",
        catalog,
        "--map",
        "config/tools.toml",
        "--format",
        format,
    ])
}

/// The 1-based line of the first line of `file` that contains `needle`, found here by plain
/// search (not by the code under test).
fn line_of(file: &str, needle: &str) -> usize {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
    1 + text.lines().position(|l| l.contains(needle)).unwrap()
}

fn sarif_schema() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sarif-schema-2.1.0.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-04/schema#");
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
}

fn schema_errors(schema: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    schema
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn sarif_of_check_diff_and_tools_validates_against_the_official_schema() {
    let schema = sarif_schema();
    let mut invalid = Vec::new();
    let mut docs = Vec::new();
    for (name, (code, out)) in [
        ("check", check("sarif")),
        ("diff", diff("sarif")),
        ("tools", tools("sarif")),
    ] {
        assert_eq!(code, 1, "{name}: the findings fail the job as in text");
        let doc: Value = serde_json::from_str(&out).unwrap();
        for e in schema_errors(&schema, &doc) {
            invalid.push(format!("{name}: {e}"));
        }
        docs.push(doc);
    }
    assert_eq!(invalid, Vec::<String>::new());

    // check: one result per group, at the operation's `operationId` line in the spec.
    let results = docs[0]["runs"][0]["results"].as_array().unwrap();
    let at = |rule: &str| {
        let r = results.iter().find(|r| r["ruleId"] == rule).unwrap();
        let loc = &r["locations"][0];
        (
            r["level"].as_str().unwrap().to_string(),
            loc["physicalLocation"]["artifactLocation"]["uri"].clone(),
            loc["physicalLocation"]["region"]["startLine"].clone(),
            loc["logicalLocations"][0]["fullyQualifiedName"].clone(),
        )
    };
    let put = line_of(SPEC, "operationId: updateChannel");
    assert_eq!(
        at("omitted_on_replace"),
        (
            "warning".into(),
            json!(SPEC),
            json!(put),
            json!("updateChannel")
        )
    );
    assert_eq!(
        at("unknown_query_param"),
        (
            "error".into(),
            json!(SPEC),
            json!(line_of(SPEC, "operationId: listPlayouts")),
            json!("listPlayouts")
        )
    );
    assert_eq!(results.len(), 4);
    // Every rule a result names is declared, at the index it gives.
    for doc in &docs {
        let run = &doc["runs"][0];
        for r in run["results"].as_array().unwrap() {
            let index = r["ruleIndex"].as_u64().unwrap() as usize;
            assert_eq!(run["tool"]["driver"]["rules"][index]["id"], r["ruleId"]);
        }
    }
    // tools: a defect at its tool's `"name"` line in the catalog.
    let defect = docs[2]["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "silent_clear")
        .unwrap();
    let region = &defect["locations"][0]["physicalLocation"];
    assert_eq!(
        (
            &region["artifactLocation"]["uri"],
            &region["region"]["startLine"]
        ),
        (
            &json!("examples/channels.tools.json"),
            &json!(line_of(
                "examples/channels.tools.json",
                "\"update_channel\""
            ))
        )
    );
}

#[test]
fn a_broken_sarif_document_fails_the_same_schema() {
    let schema = sarif_schema();
    let (_, out) = check("sarif");
    let good: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(schema_errors(&schema, &good), Vec::<String>::new());
    type Break = (&'static str, fn(&mut Value));
    let breaks: [Break; 4] = [
        ("a level SARIF does not have", |d| {
            d["runs"][0]["results"][0]["level"] = json!("critical")
        }),
        ("a result without a message", |d| {
            d["runs"][0]["results"][0]
                .as_object_mut()
                .unwrap()
                .remove("message");
        }),
        ("another version", |d| d["version"] = json!("2.0.0")),
        ("a line number below 1", |d| {
            d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] =
                json!(0)
        }),
    ];
    for (what, broken) in breaks {
        let mut doc = good.clone();
        broken(&mut doc);
        assert_ne!(schema_errors(&schema, &doc), Vec::<String>::new(), "{what}");
    }
}

#[test]
fn junit_counts_the_groups_that_fail_and_the_exit_code_agrees_with_text() {
    for (name, (code, out), text_code) in [
        ("check", check("junit"), check("text").0),
        ("diff", diff("junit"), diff("text").0),
        ("tools", tools("junit"), tools("text").0),
    ] {
        assert_eq!(code, text_code, "{name}");
        assert!(out.starts_with(r#"<?xml version="1.0" encoding="UTF-8"?>"#));
        let cases = out.matches("<testcase ").count();
        let failures = out.matches("<failure ").count();
        let header = format!(r#"tests="{cases}" failures="{failures}" errors="0""#);
        assert!(out.contains(&header), "{name}: {header} in\n{out}");
        assert!(failures > 0, "{name}");
    }
    // check: three errors fail, the warning does not (--fail-on error).
    let (_, out) = check("junit");
    assert_eq!(
        (
            out.matches("<testcase ").count(),
            out.matches("<failure ").count()
        ),
        (4, 3)
    );
}

#[test]
fn github_annotations_name_file_and_line_and_nothing_else_is_a_command() {
    let (code, out) = check("github");
    assert_eq!(code, 1);
    let lines: Vec<&str> = out.lines().collect();
    let put = line_of(SPEC, "operationId: updateChannel");
    let expected = format!(
        "::warning file={SPEC},line={put},title=omitted_on_replace updateChannel body /graphicsElementIds::"
    );
    assert!(
        lines.iter().any(|l| l.starts_with(&expected)),
        "{expected}\n{out}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("::error ")).count(),
        3
    );
    assert_eq!(
        lines.last(),
        Some(&"5 exchanges, 4 findings (critical 0, error 3, warning 1, info 0), 0 malformed")
    );
    let (_, out) = diff("github");
    assert!(
        out.lines()
            .next()
            .unwrap()
            .starts_with("::error file=") && out.contains("title=response_retyped GetResolutionByName response 200::breaking change response_retyped"),
        "{out}"
    );
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The Action's script in a real repository: a pull request renames a query parameter, and
/// the catalog beside the spec has defects.
#[test]
fn the_action_annotates_a_changed_spec_and_a_catalog_and_fails_the_job() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = std::env::temp_dir().join(format!("driftwatch-action-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&repo);
    std::fs::create_dir_all(repo.join("api")).unwrap();
    let spec = std::fs::read_to_string(root.join(SPEC)).unwrap();
    std::fs::write(repo.join("api/openapi.yaml"), &spec).unwrap();
    for (from, to) in [
        ("examples/channels.tools.json", "api/tools.json"),
        ("config/tools.toml", "api/tools.toml"),
    ] {
        std::fs::copy(root.join(from), repo.join(to)).unwrap();
    }
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "base"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    std::fs::write(
        repo.join("api/openapi.yaml"),
        spec.replace("- name: pageSize", "- name: page_size"),
    )
    .unwrap();

    let summary = repo.join("summary.md");
    let out = std::process::Command::new(root.join("scripts/action-run"))
        .current_dir(&repo)
        .env("DW", env!("CARGO_BIN_EXE_driftwatch"))
        .env("SPEC", "api/openapi.yaml")
        .env("BASE", &base)
        .env("TOOLS", "api/tools.json")
        .env("TOOLS_MAP", "api/tools.toml")
        .env("SARIF_DIR", "sarif")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{out:?}");
    let list = line_of(SPEC, "operationId: listPlayouts");
    let renamed = format!(
        "::error file=api/openapi.yaml,line={list},title=param_renamed listPlayouts query page_size::hazard change param_renamed"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with(&renamed)),
        "{renamed}\n{stdout}"
    );
    let tool = line_of("examples/channels.tools.json", "\"update_channel\"");
    let defect = format!(
        "::error file=api/tools.json,line={tool},title=silent_clear update_channel graphicsElementIds::"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with(&defect)),
        "{defect}\n{stdout}"
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.contains("| hazard | `param_renamed` | `listPlayouts` |"),
        "{md}"
    );
    let schema = sarif_schema();
    for name in ["diff.sarif", "tools.sarif"] {
        let text = std::fs::read_to_string(repo.join("sarif").join(name)).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(schema_errors(&schema, &doc), Vec::<String>::new(), "{name}");
        assert!(
            !doc["runs"][0]["results"].as_array().unwrap().is_empty(),
            "{name}"
        );
    }

    // The same pull request with the spec as it was, and no catalog: nothing to say, exit 0.
    git(&repo, &["checkout", "-q", "--", "api/openapi.yaml"]);
    let out = std::process::Command::new(root.join("scripts/action-run"))
        .current_dir(&repo)
        .env("DW", env!("CARGO_BIN_EXE_driftwatch"))
        .env("SPEC", "api/openapi.yaml")
        .env("BASE", &base)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let _ = std::fs::remove_dir_all(&repo);
}
