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
    let stale = req("DELETE", "/v2/invoices/in_1").audit(&overridden);
    assert_eq!(stale[0].kind, Kind::UnknownOperation);
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
