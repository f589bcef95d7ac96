//! `diff`: the ErsatzTV history pairwise with pinned counts (revisions 5 and 6, 3.0.1
//! `nullable` against 3.1.1 type arrays, are no change at all), and the oasdiff fixture pairs
//! classed as their names say.

use std::collections::BTreeMap;

use driftwatch::contract::Contract;
use driftwatch::diff::{Change, Class, diff};

use super::util::{contract, shared_spec};

const HISTORY: [&str; 6] = [
    "1-v1-2025-09-05-487d99dc6.json",
    "2-v1-2025-10-12-48e7c85f7.json",
    "3-v1-2025-10-13-b851a7dab.json",
    "4-v1-2025-10-13-7c2083d3f.json",
    "5-v1-2025-11-04-453737a52.json",
    "6-v1-2025-11-29-7bd8cefe2.json",
];

fn history(i: usize) -> Contract {
    contract(&shared_spec(&format!("ersatztv/history/{}", HISTORY[i])))
}

fn counts(changes: &[Change]) -> BTreeMap<(Class, &'static str), usize> {
    let mut out = BTreeMap::new();
    for c in changes {
        *out.entry((c.class, c.kind)).or_default() += 1;
    }
    out
}

/// (from, to, changes by class and kind) for each consecutive pair of revisions.
type Pinned = (usize, usize, &'static [(Class, &'static str, usize)]);

const PAIRS: [Pinned; 5] = [
    (
        1,
        2,
        &[
            (Class::Breaking, "response_retyped", 1),
            (Class::Info, "operation_added", 5),
        ],
    ),
    (2, 3, &[(Class::Info, "operation_added", 5)]),
    // GetResolutionByName answered an integer, now a ResolutionViewModel object.
    (3, 4, &[(Class::Breaking, "response_retyped", 1)]),
    // FFmpegProfileAudioFormat gained AacLatm, in both the create and the update body.
    (4, 5, &[(Class::Info, "enum_values_added", 2)]),
    // 3.0.1 `nullable: true` against 3.1.1 `["null", T]`: the same API.
    (5, 6, &[]),
];

#[test]
fn the_ersatztv_history_diffs_pairwise_as_pinned() {
    let mut problems = Vec::new();
    for (from, to, expected) in PAIRS {
        let changes = diff(&history(from - 1), &history(to - 1));
        let got = counts(&changes);
        let want: BTreeMap<(Class, &str), usize> =
            expected.iter().map(|(c, k, n)| ((*c, *k), *n)).collect();
        if got != want {
            problems.push(format!(
                "{from} -> {to}: got {got:?}, pinned {want:?}\n{changes:#?}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Each oasdiff fixture pair (`*_base`, `*_revision`) with the changes its name describes:
/// (class, kind, field).
/// (class, kind, field) of one expected change.
type Expected = (Class, &'static str, &'static str);

const FIXTURES: &[(&str, &[Expected])] = &[
    // A 3.1 type array loses its null: the parameter accepts less.
    (
        "nullable_type_array_param",
        &[(Class::Breaking, "param_type_changed", "q")],
    ),
    // A response property can no longer be null: clients are not hurt.
    (
        "nullable_type_array_response",
        &[(Class::Info, "response_property_retyped", "200 /p")],
    ),
    // Request properties wrapped in `oneOf: [null, ...]`: they accept more.
    (
        "nullable_wrap",
        &[
            (Class::Info, "body_property_retyped", "optionalEnum"),
            (Class::Info, "body_property_retyped", "optionalPrimitive"),
            (Class::Info, "body_property_retyped", "optionalRef"),
        ],
    ),
    ("nullable_wrap_body", &[(Class::Info, "body_retyped", "")]),
    // The wrap also narrows the enum: a value clients send is gone.
    (
        "nullable_wrap_narrowed",
        &[
            (Class::Breaking, "enum_values_removed", "optionalEnum"),
            (Class::Info, "body_property_retyped", "optionalEnum"),
        ],
    ),
    (
        "nullable_wrap_param",
        &[(Class::Info, "param_type_changed", "kind")],
    ),
    // A response property may now be null: a client that does not expect it breaks.
    (
        "nullable_wrap_response",
        &[(Class::Breaking, "response_property_retyped", "200 /status")],
    ),
    (
        "request_body_nullable_31",
        &[(Class::Info, "body_retyped", "")],
    ),
    (
        "request_param_nullable_to_array_31",
        &[(Class::Breaking, "param_type_changed", "token")],
    ),
    (
        "request_property_became_nullable_31",
        &[
            (Class::Breaking, "response_property_retyped", "200 /status"),
            (Class::Info, "body_property_retyped", "name"),
        ],
    ),
    (
        "request_property_became_nullable",
        &[(Class::Info, "body_property_retyped", "name")],
    ),
    (
        "request_property_type_changed",
        &[(Class::Breaking, "body_property_retyped", "age")],
    ),
];

#[test]
fn the_oasdiff_fixture_pairs_get_the_classes_their_names_say() {
    let mut problems = Vec::new();
    for (name, expected) in FIXTURES {
        let old = contract(&shared_spec(&format!("oasdiff/checker__{name}_base.yaml")));
        let new = contract(&shared_spec(&format!(
            "oasdiff/checker__{name}_revision.yaml"
        )));
        let changes = diff(&old, &new);
        let got: Vec<(Class, &str, &str)> = changes
            .iter()
            .map(|c| (c.class, c.kind, c.field.as_str()))
            .collect();
        if got != *expected {
            problems.push(format!("{name}: got {got:?}, expected {expected:?}"));
        }
    }
    // The array-to-object pair (its own file names): the body and a property change type.
    let old = contract(&shared_spec(
        "oasdiff/checker__request_property_type_changed_base_array_to_object.yaml",
    ));
    let new = contract(&shared_spec(
        "oasdiff/checker__request_property_type_changed_revision_array_to_object.yaml",
    ));
    let classes: Vec<Class> = diff(&old, &new).iter().map(|c| c.class).collect();
    if classes != [Class::Breaking, Class::Breaking] {
        problems.push(format!("array_to_object: {classes:?}"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

const BILLING_V1: &str = r##"
openapi: 3.1.0
info: { title: billing, version: "1" }
paths:
  /invoices:
    get:
      operationId: listInvoices
      parameters:
        - { name: customer_id, in: query, schema: { type: string } }
      responses: { "200": { description: ok } }
  /customers/{id}:
    put:
      operationId: replaceCustomer
      parameters: [{ name: id, in: path, required: true, schema: { type: string } }]
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties: { name: { type: string }, email: { type: string } }
      responses: { "200": { description: ok } }
    patch:
      operationId: patchCustomer
      requestBody:
        content:
          application/merge-patch+json:
            schema:
              type: object
              properties: { name: { type: string } }
      responses: { "200": { description: ok } }
"##;

fn parse(text: &str) -> Contract {
    let spec = driftwatch::spec::Spec::parse(std::path::Path::new("billing.yaml"), text.as_bytes())
        .unwrap();
    Contract::compile(&spec, &Default::default()).unwrap()
}

#[test]
fn a_property_added_to_a_replace_body_is_a_hazard_and_a_renamed_parameter_is_named() {
    let v2 = BILLING_V1
        .replace("name: customer_id", "name: customerId")
        .replace(
            "properties: { name: { type: string }, email: { type: string } }",
            "properties: { name: { type: string }, email: { type: string }, taxId: { type: string } }",
        )
        .replace(
            "properties: { name: { type: string } }",
            "properties: { name: { type: string }, note: { type: string } }",
        );
    let changes = diff(&parse(BILLING_V1), &parse(&v2));
    let got: Vec<String> = changes
        .iter()
        .map(|c| {
            format!(
                "{} {} {} {} {:?} -> {:?}",
                c.class, c.kind, c.operation, c.field, c.from, c.to
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            r#"hazard param_renamed listInvoices customerId Some("customer_id") -> Some("customerId")"#,
            r#"hazard body_property_added replaceCustomer taxId None -> Some("string")"#,
            // On a merge write an unsent property keeps its value: nothing is lost.
            r#"info body_property_added patchCustomer note None -> Some("string")"#,
        ]
    );
}

fn driftwatch(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn the_diff_command_prints_json_text_and_markdown_and_exits_by_fail_on() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/specs/ersatztv/history");
    let three = dir.join(HISTORY[2]).display().to_string();
    let four = dir.join(HISTORY[3]).display().to_string();
    let (code, stdout, stderr) = driftwatch(&["diff", &three, &four, "--format", "json"]);
    assert_eq!(code, 1, "a breaking change fails by default: {stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        doc["changes"][0],
        serde_json::json!({"class": "breaking", "kind": "response_retyped", "operation": "GetResolutionByName",
            "location": "response", "field": "200", "from": "integer", "to": "object"})
    );
    assert_eq!(
        driftwatch(&["diff", &three, &four, "--fail-on", "never"]).0,
        0
    );
    let (code, text, _) = driftwatch(&["diff", &four, &four]);
    assert_eq!(
        (code, text.trim()),
        (0, "0 changes (0 breaking, 0 hazard, 0 info)")
    );
    let (_, md, _) = driftwatch(&["diff", &three, &four, "--format", "markdown"]);
    assert!(md.contains("| breaking | `response_retyped` | `GetResolutionByName` | response | `200` | integer -> object |"), "{md}");
    // A hazard fails only when asked to.
    let v1 = std::env::temp_dir().join(format!("driftwatch-diff-v1-{}.yaml", std::process::id()));
    let v2 = std::env::temp_dir().join(format!("driftwatch-diff-v2-{}.yaml", std::process::id()));
    std::fs::write(&v1, BILLING_V1).unwrap();
    std::fs::write(
        &v2,
        BILLING_V1.replace("name: customer_id", "name: customerId"),
    )
    .unwrap();
    let (v1, v2) = (v1.display().to_string(), v2.display().to_string());
    assert_eq!(driftwatch(&["diff", &v1, &v2]).0, 0);
    let (code, text, _) = driftwatch(&["diff", &v1, &v2, "--fail-on", "hazard"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("param_renamed") && text.contains("customer_id -> customerId"),
        "{text}"
    );
}

#[test]
fn the_diff_command_reads_git_revisions_and_exits_2_on_a_load_error() {
    // The committed bundled spec (HEAD) against the working copy: the same revision.
    let (code, text, stderr) = driftwatch(&[
        "diff",
        "git:HEAD:examples/channels.openapi.yaml",
        "examples/channels.openapi.yaml",
    ]);
    assert_eq!(
        (code, text.lines().last()),
        (0, Some("0 changes (0 breaking, 0 hazard, 0 info)")),
        "{stderr}"
    );
    let (code, _, stderr) = driftwatch(&[
        "diff",
        "git:no-such-rev:x.yaml",
        "examples/channels.openapi.yaml",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("git:no-such-rev:x.yaml"), "{stderr}");
    let (code, _, stderr) = driftwatch(&["diff", "missing.yaml", "examples/channels.openapi.yaml"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("missing.yaml"), "{stderr}");
}
