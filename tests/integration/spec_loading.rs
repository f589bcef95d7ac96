//! Loading end to end: a YAML spec split over files, recursive schemas, base-path override,
//! and HAR traffic through the CLI.

use std::path::PathBuf;

use driftwatch::contract::{Contract, ContractOptions};
use driftwatch::finding::Kind;
use driftwatch::spec::Spec;
use serde_json::json;

use super::kinds::req;

fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("driftwatch-load-{name}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("models")).unwrap();
    dir
}

#[test]
fn a_spec_split_over_files_with_a_recursive_schema_audits_through_its_refs() {
    let d = dir("split");
    std::fs::write(
        d.join("api.yaml"),
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /folders/{id}:\n    parameters:\n      - $ref: 'models/params.yaml#/Id'\n    put:\n      requestBody:\n        content:\n          application/json:\n            schema: {$ref: 'models/folder.yaml#/Folder'}\n      responses: {'200': {description: ok}}\n",
    )
    .unwrap();
    std::fs::write(
        d.join("models/params.yaml"),
        "Id: {name: id, in: path, required: true, schema: {type: integer}}\n",
    )
    .unwrap();
    std::fs::write(
        d.join("models/folder.yaml"),
        "Folder:\n  type: object\n  required: [name]\n  properties:\n    name: {type: string}\n    parent: {$ref: '#/Folder', nullable: true}\n    children: {type: array, items: {$ref: '#/Folder'}}\n",
    )
    .unwrap();
    let spec = Spec::load(&d.join("api.yaml")).unwrap();
    let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
    let good = json!({"name": "a", "parent": null, "children": [{"name": "b", "children": [{"name": "c"}]}]});
    assert_eq!(req("PUT", "/folders/1").json(&good).audit(&contract), []);
    let bad = json!({"name": "a", "parent": null, "children": [{"name": "b", "children": [{"name": 3}]}]});
    let found = req("PUT", "/folders/x").json(&bad).audit(&contract);
    let got: Vec<(Kind, &str)> = found.iter().map(|f| (f.kind, f.field.as_str())).collect();
    assert_eq!(
        got,
        [
            (Kind::ParamTypeMismatch, "id"),
            (Kind::BodyTypeMismatch, "/children/0/children/0/name")
        ]
    );
}

#[test]
fn the_base_path_comes_from_servers_unless_overridden() {
    let spec = Spec::load(&super::util::example("billing.openapi.yaml")).unwrap();
    let from_servers = Contract::compile(&spec, &ContractOptions::default()).unwrap();
    assert_eq!(req("DELETE", "/v2/invoices/in_1").audit(&from_servers), []);
    let options = ContractOptions {
        base_path: Some("/billing/api/".into()),
        ..ContractOptions::default()
    };
    let overridden = Contract::compile(&spec, &options).unwrap();
    assert_eq!(
        req("DELETE", "/billing/api/invoices/in_1").audit(&overridden),
        []
    );
    // Under the configured base path, a path no template fits is an unknown operation; under
    // another (the servers' `/v2`, stale here) it is no request of this API (issue 66): no
    // finding, and the sidecar counts it in the unrouted share, whose warning names the base
    // path in force.
    let unknown = req("DELETE", "/billing/api/invoice/in_1").audit(&overridden);
    assert_eq!(unknown[0].kind, Kind::UnknownOperation);
    assert_eq!(req("DELETE", "/v2/invoices/in_1").audit(&overridden), []);
    assert!(matches!(
        overridden.route("DELETE", "/v2/invoices/in_1"),
        driftwatch::contract::Route::OutsideBasePath
    ));
}

#[test]
fn x_driftwatch_write_overrides_the_method_default() {
    let doc = json!({"openapi": "3.1.0", "paths": {"/a": {
        "put": {"x-driftwatch-write": "merge", "requestBody": {"content": {"application/json": {"schema": {
            "type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}}}}}, "responses": {}},
        "post": {"x-driftwatch-write": "replace", "requestBody": {"content": {"application/json": {"schema": {
            "type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}}}}}, "responses": {}}}}});
    let spec = Spec::from_document(std::path::Path::new("a.json"), doc).unwrap();
    let contract = Contract::compile(&spec, &ContractOptions::default()).unwrap();
    assert_eq!(req("PUT", "/a").json(&json!({"x": 1})).audit(&contract), []);
    let post = req("POST", "/a").json(&json!({"x": 1})).audit(&contract);
    assert_eq!(
        post.iter()
            .map(|f| (f.kind, f.field.as_str()))
            .collect::<Vec<_>>(),
        [(Kind::OmittedOnReplace, "/y")]
    );
    let mut overrides = std::collections::HashMap::new();
    overrides.insert(
        "POST /a".to_string(),
        driftwatch::contract::WriteSemantics::Create,
    );
    let options = ContractOptions {
        write_overrides: overrides,
        ..ContractOptions::default()
    };
    let contract = Contract::compile(&spec, &options).unwrap();
    assert_eq!(
        req("POST", "/a").json(&json!({"x": 1})).audit(&contract),
        []
    );
}

/// A document with a part of each kind the whole-document checks find: a pattern in another
/// dialect, a keyword the meta-schema refuses, and a `$ref` loop; and a body the checks leave
/// alone.
fn needs_checks() -> serde_json::Value {
    json!({
        "openapi": "3.1.0",
        "paths": {
            "/p": {"get": {"operationId": "p", "parameters": [
                {"name": "id", "in": "query", "schema": {"type": "string", "pattern": "^\\p{XDigit}+$"}},
                {"name": "n", "in": "query", "schema": {"type": "integer"}}
            ], "responses": {"200": {"description": "ok"}}}},
            "/s": {"post": {"operationId": "s", "requestBody": {"content": {"application/json": {
                "schema": {"type": "object", "required": {"a": 1}}}}},
                "responses": {"200": {"description": "ok"}}}},
            "/loop": {"post": {"operationId": "loop", "requestBody": {"content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/A"}}}},
                "responses": {"200": {"description": "ok"}}}},
            "/b": {"post": {"operationId": "b", "requestBody": {"content": {"application/json": {
                "schema": {"type": "object", "properties": {"x": {"type": "integer"}}}}}},
                "responses": {"200": {"description": "ok"}}}}
        },
        "components": {"schemas": {"A": {"$ref": "#/components/schemas/B"}, "B": {"$ref": "#/components/schemas/A"}}}
    })
}

/// The sidecar's load leaves the whole-document checks and every validator to later
/// (`ContractOptions::lazy`); what it then finds and audits is what the eager load (`check`,
/// `--strict`) finds and audits, and nothing is compiled before it is asked for.
#[test]
fn a_lazy_load_finds_and_audits_what_an_eager_one_does() {
    let spec = Spec::from_document(std::path::Path::new("api.json"), needs_checks()).unwrap();
    let eager = Contract::compile(&spec, &ContractOptions::default()).unwrap();
    let lazy_options = ContractOptions {
        lazy: true,
        ..ContractOptions::default()
    };
    let lazy = Contract::compile(&spec, &lazy_options).unwrap();
    assert!(eager.is_checked());
    assert!(!lazy.is_checked(), "the checks wait for their first use");
    let b = lazy.operation("b").unwrap();
    let body = &b.body.as_ref().unwrap().media[0];
    assert!(!format!("{:?}", body.validator).contains("kept: true"));
    // A request to an operation compiles what it needs, running the checks first.
    let bad = req("POST", "/b").json(&json!({"x": "1"}));
    let kinds = |c: &Contract| -> Vec<Kind> { bad.audit(c).iter().map(|f| f.kind).collect() };
    assert_eq!(kinds(&lazy), kinds(&eager));
    assert!(
        !kinds(&lazy).is_empty(),
        "the body's validator was compiled and used"
    );
    assert!(lazy.is_checked());
    for id in ["p", "s", "loop", "b"] {
        let (l, e) = (lazy.operation(id).unwrap(), eager.operation(id).unwrap());
        assert_eq!(lazy.skipped(l), eager.skipped(e), "{id}");
    }
    let said = |c: &Contract| {
        let mut said: Vec<(String, &'static str)> = c
            .warnings()
            .iter()
            .map(|w| (w.pointer.clone(), w.reason.as_str()))
            .collect();
        said.sort();
        said
    };
    assert_eq!(said(&lazy), said(&eager));
    let reasons: Vec<&str> = said(&eager).iter().map(|(_, r)| *r).collect();
    assert_eq!(
        reasons,
        ["circular_ref", "pattern", "schema"],
        "{:?}",
        said(&eager)
    );
}

/// `serve` answers ready before the whole-document checks have run, runs them then, off the
/// request path, and says what they found as the eager load did: `/spec`, the warnings metric,
/// and the requests to a changed part counted as partly unaudited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidecar_checks_the_document_after_ready_and_says_what_it_found() {
    use super::sidecar::{admin_get, config, raw, scrape, start};
    use super::upstream::{self, ok};
    use super::util::eventually;
    let spec = std::env::temp_dir().join(format!("driftwatch-lazy-{}.json", std::process::id()));
    std::fs::write(&spec, needs_checks().to_string()).unwrap();
    let up = upstream::start(ok(), std::time::Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.spec.path = Some(spec.clone());
        c.audit.response_sample_rate = 0.0;
    }))
    .await;
    let line = |text: &str, prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .map(|l| l.rsplit(' ').next().unwrap_or("").to_string())
    };
    let said = eventually("the checks' warnings in the metric", || async {
        let text = scrape(dw.admin).await;
        line(&text, "driftwatch_spec_warnings{reason=\"pattern\"")
    })
    .await;
    assert_eq!(said, "1");
    let listed = admin_get(dw.admin, "/spec").await.json();
    assert_eq!(listed["warning_count"], 3, "{listed}");
    let request = b"GET /p?id=00ff&n=x HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    assert_eq!(raw(dw.addr, request).await.status, 200);
    let text = scrape(dw.admin).await;
    assert_eq!(
        line(
            &text,
            "driftwatch_unaudited_total{reason=\"spec_pattern_skipped\""
        )
        .as_deref(),
        Some("1"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l
            .starts_with("driftwatch_findings_total{kind=\"param_type_mismatch\",operation=\"p\"")),
        "the rest of the operation is audited: {text}"
    );
    let _ = std::fs::remove_file(spec);
}

/// Past `max_compiled` body validators, the oldest is let go, and compiled again when next
/// needed: the audit is the same whichever are kept.
#[test]
fn body_validators_past_the_bound_are_let_go_and_compiled_again() {
    let object = |ty: &str| {
        json!({"content": {"application/json": {"schema":
        {"type": "object", "properties": {"x": {"type": ty}}}}}})
    };
    let c = lazy_keeping_one(json!({
        "/a": {"post": {"operationId": "a", "requestBody": object("integer"), "responses": {"200": {"description": "ok"}}}},
        "/b": {"post": {"operationId": "b", "requestBody": object("string"), "responses": {"200": {"description": "ok"}}}}
    }));
    let kept = |id: &str| {
        let op = c.operation(id).unwrap();
        format!("{:?}", op.body.as_ref().unwrap().media[0].validator).contains("kept: true")
    };
    let kinds = |path: &'static str, body: serde_json::Value| -> Vec<Kind> {
        req("POST", path)
            .json(&body)
            .audit(&c)
            .iter()
            .map(|f| f.kind)
            .collect()
    };
    let wrong_a = kinds("/a", json!({"x": "1"}));
    assert!(!wrong_a.is_empty());
    assert!(kept("a") && !kept("b"));
    assert!(!kinds("/b", json!({"x": 1})).is_empty());
    assert!(kept("b") && !kept("a"), "the bound lets the oldest go");
    assert_eq!(
        kinds("/a", json!({"x": "1"})),
        wrong_a,
        "compiled again, the same audit"
    );
    assert!(kinds("/a", json!({"x": 1})).is_empty());
    assert!(kept("a") && !kept("b"));
}

/// The sidecar audits an answer whose schema must be compiled first off its serving threads:
/// `Contract::response_compiles` says which, before the first answer of a status and again
/// once the bound let its validator go, and never for an answer with no schema to compile.
#[test]
fn an_answer_says_whether_its_audit_compiles_a_schema_first() {
    let answers = |ty: &str| {
        json!({"200": {"description": "ok", "content": {"application/json": {"schema":
            {"type": "object", "properties": {"x": {"type": ty}}}}}},
            "204": {"description": "none"}})
    };
    let c = lazy_keeping_one(json!({
        "/a": {"get": {"operationId": "a", "responses": answers("integer")}},
        "/b": {"get": {"operationId": "b", "responses": answers("string")}}
    }));
    let compiles = |id: &str, status| c.response_compiles(c.operation(id).unwrap(), status);
    let answer = |target, body: serde_json::Value| {
        let a = super::responses::answer(200, "application/json", &body);
        super::responses::audit_answer(&c, "GET", target, &a)
    };
    assert!(compiles("a", 200) && compiles("b", 200));
    assert!(
        !compiles("a", 204) && !compiles("a", 500),
        "no schema, nothing to compile"
    );
    let wrong_a = answer("/a", json!({"x": "1"}));
    assert!(!wrong_a.is_empty());
    assert!(!compiles("a", 200), "kept after its first answer");
    assert!(compiles("b", 200));
    assert!(answer("/b", json!({"x": "1"})).is_empty());
    assert!(compiles("a", 200), "the bound let it go");
    assert_eq!(
        answer("/a", json!({"x": "1"})),
        wrong_a,
        "compiled again, the same audit"
    );
}

/// A contract of `paths` compiled as the sidecar compiles it, keeping one body or response
/// validator at most.
fn lazy_keeping_one(paths: serde_json::Value) -> Contract {
    let doc = json!({"openapi": "3.1.0", "paths": paths});
    let spec = Spec::from_document(std::path::Path::new("api.json"), doc).unwrap();
    let options = ContractOptions {
        lazy: true,
        max_compiled: 1,
        ..ContractOptions::default()
    };
    Contract::compile(&spec, &options).unwrap()
}
