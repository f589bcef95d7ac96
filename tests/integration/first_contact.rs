//! First contact with real APIs: shapes real specs use that OpenAPI allows, each with a request
//! that must audit clean and a near twin that must still be reported; parts of a spec that
//! cannot be compiled are skipped with a warning (and refused with `strict`); an API key in
//! the query appears in no sink.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use driftwatch::audit::audit;
use driftwatch::contract::{Contract, ContractOptions, Skipped};
use driftwatch::finding::Severity;
use driftwatch::request::RequestView;
use driftwatch::spec::Spec;
use serde_json::{Value, json};

use super::sidecar::{admin_get, config, raw, start};
use super::upstream::{self, ok};
use super::util::shared_spec;

fn compile(doc: Value, strict: bool) -> Result<Contract, String> {
    let spec = Spec::from_document(Path::new("api.json"), doc).map_err(|e| e.to_string())?;
    let options = ContractOptions {
        strict,
        ..Default::default()
    };
    Contract::compile(&spec, &options).map_err(|e| e.to_string())
}

fn spec(paths: Value) -> Value {
    json!({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": paths,
    "components": {"securitySchemes": {
        "key": {"type": "apiKey", "in": "query", "name": "api_key"},
        "token": {"type": "apiKey", "in": "header", "name": "X-Token"}
    }}})
}

/// (kind, field) of every finding of severity error or worse, and the operation it routed to.
fn errors(c: &Contract, method: &str, target: &str, headers: &[(&str, &str)]) -> Vec<String> {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let body = headers
        .iter()
        .find(|(k, _)| k == "body")
        .map(|(_, v)| v.as_bytes());
    let a = audit(c, &RequestView::new(method, target, &headers, body));
    let op = a.operation.map_or("-", |o| o.id.as_str());
    a.findings
        .iter()
        .filter(|f| f.severity >= Severity::Error)
        .map(|f| format!("{op} {} {}", f.kind.as_str(), f.field))
        .collect()
}

fn get(params: Value) -> Value {
    json!({"get": {"operationId": "list", "parameters": params, "responses": {"200": {"description": "ok"}}}})
}

#[test]
fn an_api_key_is_a_declared_input_where_security_allows_it() {
    let c = compile(
        spec(json!({
            "/a": {"get": {"operationId": "a", "security": [{"key": []}], "responses": {}}},
            "/b": {"get": {"operationId": "b", "security": [], "responses": {}}},
            "/c": {"get": {"operationId": "c", "security": [{"token": []}], "responses": {}}}
        })),
        false,
    )
    .unwrap();
    assert_eq!(
        errors(&c, "GET", "/a?api_key=s3cret", &[]),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&c, "GET", "/b?api_key=s3cret", &[]),
        ["b unknown_query_param api_key"]
    );
    // Not a key `c` takes, and not the credential it does.
    assert_eq!(
        errors(&c, "GET", "/c?api_key=s3cret", &[]),
        [
            "c unknown_query_param api_key",
            "c missing_credentials x-token"
        ]
    );
}

#[test]
fn an_array_parameter_is_read_as_its_items_type_then_as_text_and_a_finding_names_what_was_sent() {
    let c = compile(
        spec(json!({"/a": get(json!([
            {"name": "ids", "in": "query", "explode": false,
             "schema": {"type": "array", "items": {"type": "integer"}}},
            // Items of no declared type that must not be numbers: `5` read as a number fails,
            // and only the text reading (the string "5") validates.
            {"name": "codes", "in": "query", "explode": false,
             "schema": {"type": "array", "items": {"not": {"type": "integer"}, "maxLength": 2}}}
        ]))})),
        false,
    )
    .unwrap();
    let audit_of = |target: &str| {
        let headers: Vec<(String, String)> = Vec::new();
        audit(&c, &RequestView::new("GET", target, &headers, None)).findings
    };
    assert!(audit_of("/a?ids=1,2&codes=5,ab").is_empty());
    let wrong_item = audit_of("/a?ids=1,x");
    assert_eq!(wrong_item.len(), 1, "{wrong_item:?}");
    assert_eq!(wrong_item[0].kind.as_str(), "param_type_mismatch");
    assert_eq!(wrong_item[0].expected.as_deref(), Some("array<integer>"));
    assert_eq!(wrong_item[0].observed.as_deref(), Some("array<string>"));
    assert!(
        wrong_item[0].message.contains("at `/1`"),
        "{}",
        wrong_item[0].message
    );
    let wrong_code = audit_of("/a?codes=5,12345");
    assert_eq!(wrong_code.len(), 1, "{wrong_code:?}");
    assert_eq!(wrong_code[0].field, "codes");
}

#[test]
fn parameter_shapes_real_specs_use_audit_clean_and_their_twins_do_not() {
    let c = compile(
        spec(json!({
            "/open": get(json!([{"name": "filter", "in": "query", "style": "form", "explode": true,
                "schema": {"type": "object", "properties": {"name": {"type": "string"}}}}])),
            "/closed": {"get": {"operationId": "closed", "parameters": [{"name": "filter", "in": "query",
                "schema": {"type": "object", "properties": {"name": {"type": "string"}},
                           "additionalProperties": false}}], "responses": {}}},
            "/big": {"get": {"operationId": "big", "parameters": [{"name": "since", "in": "query",
                "schema": {"type": "integer"}}], "responses": {}}},
            "/empty": {"get": {"operationId": "empty", "parameters": [
                {"name": "pretty", "in": "query", "allowEmptyValue": true, "schema": {"type": "boolean"}},
                {"name": "strict", "in": "query", "schema": {"type": "boolean"}}], "responses": {}}},
            "/arrays": {"get": {"operationId": "arrays", "parameters": [
                {"name": "ids", "in": "query", "explode": false, "schema": {"type": "array", "items": {"type": "integer"}}},
                {"name": "nums", "in": "query", "explode": false,
                 "schema": {"type": "array", "minItems": 1, "items": {"type": "integer"}}}], "responses": {}}},
            "/deep": {"get": {"operationId": "deep", "parameters": [{"name": "expand", "in": "query",
                "style": "deepObject", "schema": {"type": "array", "items": {"type": "string"}}}], "responses": {}}},
            "/either": {"get": {"operationId": "either", "parameters": [{"name": "image", "in": "query",
                "schema": {"oneOf": [{"type": "integer"}, {"type": "integer", "minimum": 0}]}}],
                "responses": {}}},
            "/tsp/{tspId}/{rating}/{id}": {"get": {"operationId": "tsp", "responses": {}, "parameters": [
                {"name": "tspId", "in": "path", "required": true, "schema": {"type": "string", "enum": [1, 2]}},
                {"name": "rating", "in": "path", "required": true, "schema": {"type": "integer", "enum": ["1", "2"]}},
                {"name": "id", "in": "path", "required": true, "schema": {"type": "string", "minLength": 2}},
                {"name": "mixin", "in": "query", "schema": {"type": "array", "enum": ["live"], "items": {"type": "string"}}}]}},
            "/aws": {"get": {"operationId": "aws", "responses": {}, "parameters": [
                {"name": "Targets", "in": "query", "required": true, "schema": {"type": "object", "properties": {
                    "Accounts": {"type": "array", "items": {"type": "string", "pattern": "^[0-9]{12}$"}},
                    "Rules": {"type": "array", "items": {"type": "object", "required": ["Arn"]}},
                    "Pairs": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}}}},
                {"name": "Attributes", "in": "query", "required": true, "schema": {"type": "object"}}]}},
            "/f(ids={ids})": {"get": {"operationId": "odata", "responses": {}, "parameters": [
                {"name": "ids", "in": "path", "required": true, "content": {"application/json": {
                    "schema": {"type": "array", "items": {"type": "string"}}}}},
                {"name": "meta", "in": "header", "content": {"application/json": {
                    "schema": {"type": "object", "properties": {"a": {"type": "array"}}}}}}]}},
            "/ec2": {"get": {"operationId": "ec2", "responses": {}, "parameters": [
                {"name": "Value", "in": "query", "schema": {"type": "string"}},
                {"name": "Check", "in": "query", "schema": {"type": "object", "properties": {
                    "Value": {"type": "boolean"}, "Mode": {"type": "integer"}}}}]}},
            "/files/{name}{ext}": {"get": {"operationId": "file", "responses": {}, "parameters": [
                {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "ext", "in": "path", "required": true, "schema": {"enum": [".json", ".xml"]}}]}}
        })),
        false,
    )
    .unwrap();
    let cases: &[(&str, &[&str])] = &[
        // An exploded object without `additionalProperties: false` absorbs any key.
        ("/open?name=a&other=b", &[]),
        (
            "/closed?name=a&other=b",
            &["closed unknown_query_param other"],
        ),
        // Integers beyond 64 bits, and spelled with a zero fraction, are integers.
        ("/big?since=-66281360155520106496", &[]),
        ("/big?since=35.0", &[]),
        ("/big?since=1.5", &["big param_type_mismatch since"]),
        // allowEmptyValue: the name alone is a value.
        ("/empty?pretty=", &[]),
        ("/empty?strict=", &["empty param_type_mismatch strict"]),
        // `ids=` is the empty array.
        ("/arrays?ids=", &[]),
        ("/arrays?nums=", &["arrays param_type_mismatch nums"]),
        // deepObject declared on an array: the name itself is declared.
        ("/deep?expand=a&expand=b", &[]),
        ("/deep?expnd=a", &["deep unknown_query_param expnd"]),
        // `oneOf` is read as `anyOf`: a value two branches take is accepted, none still is not.
        ("/either?image=5", &[]),
        ("/either?image=x", &["either param_type_mismatch image"]),
        // An enum of another type than its schema's is read in that type; a string path
        // value with a comma is one string; an array's enum of strings lists its items.
        ("/tsp/1/2/%2C4F?mixin=live", &[]),
        ("/tsp/3/2/ab", &["tsp param_type_mismatch tspId"]),
        ("/tsp/1/3/ab", &["tsp param_type_mismatch rating"]),
        ("/tsp/1/2/%2C", &["tsp param_type_mismatch id"]),
        ("/tsp/1/2/ab?mixin=dead", &["tsp param_type_mismatch mixin"]),
        // An exploded object's array property, its key once per item (AWS's query APIs): strings,
        // objects and arrays as JSON text; a required object that takes any key is sent when a
        // key no other parameter takes is there.
        (
            "/aws?Accounts=401301656279&Accounts=401301656280&Rules=%7B%22Arn%22%3A%22a%22%7D&Pairs=%5B%22a%22%5D&Attributes.entry.1.key=k",
            &[],
        ),
        (
            "/aws?Accounts=401301656279&Accounts=4013&Attributes.entry.1.key=k",
            &["aws param_type_mismatch Targets"],
        ),
        (
            "/aws?Rules=%7B%7D&Attributes.entry.1.key=k",
            &["aws param_type_mismatch Targets"],
        ),
        (
            "/aws?Accounts=401301656279",
            &["aws missing_required_param Attributes"],
        ),
        // A key that is a parameter's own name is that parameter's, not an object's property.
        ("/ec2?Value=x", &[]),
        ("/ec2?Value=x&Mode=no", &["ec2 param_type_mismatch Check"]),
        // Two path parameters with nothing between them: a name and its extension.
        ("/files/v1.2.json", &[]),
        ("/files/v1.2.yaml", &["file param_type_mismatch ext"]),
    ];
    // JSON text (`content: application/json`) in a path or a header: its commas are its own.
    let meta = |v: &'static str| [("meta", v)];
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);
    let json_cases: &[Case] = &[
        (
            "/f(ids=%5B%22a%22%2C%22b%22%5D)",
            &meta(r#"{"a":[1,2]}"#),
            &[],
        ),
        (
            "/f(ids=%5B1%2C2%5D)",
            &[],
            &["odata param_type_mismatch ids"],
        ),
        (
            "/f(ids=%5B%22a%22%5D)",
            &meta(r#"{"a":1}"#),
            &["odata param_type_mismatch meta"],
        ),
    ];
    let mut problems = Vec::new();
    for (target, headers, want) in json_cases {
        let got = errors(&c, "GET", target, headers);
        if got != *want {
            problems.push(format!("{target}: got {got:?}, want {want:?}"));
        }
    }
    for (target, want) in cases {
        let got = errors(&c, "GET", target, &[]);
        if got != *want {
            problems.push(format!("{target}: got {got:?}, want {want:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn routes_real_specs_declare_reach_the_operation_meant() {
    let op = |id: &str, body: Value| {
        json!({"operationId": id, "responses": {},
        "requestBody": {"content": {"application/json": {"schema": body}}}})
    };
    let c = compile(
        spec(json!({
            "/services/jira": {"get": {"operationId": "jira", "responses": {}}},
            "/services/{slug}": {"put": {"operationId": "putService", "responses": {},
                "parameters": [{"name": "slug", "in": "path", "required": true, "schema": {"type": "string"}}]}},
            "/#X-Amz-Target=Svc.Create": {"post": op("create", json!({"type": "object", "required": ["Name"],
                "properties": {"Name": {"type": "string"}}}))},
            "/#X-Amz-Target=Svc.Delete": {"post": op("delete", json!({"type": "object", "required": ["Id"],
                "properties": {"Id": {"type": "integer"}}}))},
            "/v1/{name}": {"get": {"operationId": "getThing", "responses": {}, "parameters": [
                {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "view", "in": "query", "schema": {"type": "string"}}]}},
            "/typed": {"post": {"operationId": "typed", "responses": {}, "requestBody": {"content": {
                "application/json; charset=utf-8": {"schema": {"type": "object"}}}}}},
            "/sites/{site}/zones/{zone}": {"get": {"operationId": "getZone", "responses": {}, "parameters": [
                {"name": "site", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "zone", "in": "path", "required": true, "schema": {"type": "string"}}]}},
            "/sites/{site}/{kind}/count": {"get": {"operationId": "countZones", "responses": {}, "parameters": [
                {"name": "site", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "kind", "in": "path", "required": true, "schema": {"enum": ["zones", "rssizones"]}},
                {"name": "distinct", "in": "query", "schema": {"type": "string"}}]}},
            "/{account}.vtex.com.br/api/orders": {"get": {"operationId": "orders", "responses": {}, "parameters": [
                {"name": "account", "in": "path", "required": true, "schema": {"type": "string"}}]}},
            "/{account}.{env}.com.br/api/fulfil": {"get": {"operationId": "fulfil", "responses": {}, "parameters": [
                {"name": "account", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "env", "in": "path", "required": true, "schema": {"type": "string"}}]}},
            "/v1/{parent}": {"get": {"operationId": "listChildren", "responses": {}, "parameters": [
                {"name": "parent", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "pageSize", "in": "query", "schema": {"type": "integer"}}]}}
        })),
        false,
    )
    .unwrap();
    let json = ("content-type", "application/json");
    // A method the concrete path lacks reaches the template that declares it.
    assert_eq!(
        errors(&c, "PUT", "/services/jira", &[]),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&c, "DELETE", "/services/jira", &[]),
        ["- method_not_allowed /services/jira"]
    );
    // AWS: one path, the operation named by X-Amz-Target.
    let delete = [
        ("X-Amz-Target", "Svc.Delete"),
        json,
        ("body", r#"{"Id":7}"#),
    ];
    assert_eq!(errors(&c, "POST", "/", &delete), Vec::<String>::new());
    let wrong = [
        ("X-Amz-Target", "Svc.Create"),
        json,
        ("body", r#"{"Id":7}"#),
    ];
    assert_eq!(
        errors(&c, "POST", "/", &wrong),
        ["create body_schema_violation /Name"]
    );
    // A body two `oneOf` branches take is accepted; one that no branch takes is not.
    let overlap = op(
        "overlap",
        json!({"oneOf": [{"properties": {"a": {"type": "string"}}},
                         {"properties": {"b": {"type": "string"}}}]}),
    );
    let o = compile(spec(json!({"/o": {"post": overlap}})), false).unwrap();
    let both = [json, ("body", r#"{"a":"x"}"#)];
    assert_eq!(errors(&o, "POST", "/o", &both), Vec::<String>::new());
    let neither = [json, ("body", r#"{"a":7,"b":7}"#)];
    // Issue 50: the finding names the field the closest branch rejects (a tie: the first).
    assert_eq!(
        errors(&o, "POST", "/o", &neither),
        ["overlap body_schema_violation /a"]
    );
    // Declared media types with parameters match by essence.
    let utf8 = [
        ("content-type", "application/json;charset=UTF-8"),
        ("body", "{}"),
    ];
    assert_eq!(errors(&c, "POST", "/typed", &utf8), Vec::<String>::new());
    let text = [("content-type", "text/plain"), ("body", "{}")];
    assert_eq!(
        errors(&c, "POST", "/typed", &text),
        ["typed unsupported_media_type content-type"]
    );
    // Two templates on one route: the operation the request fits.
    assert_eq!(
        errors(&c, "GET", "/v1/x?pageSize=2", &[]),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&c, "GET", "/v1/x?view=full", &[]),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&c, "GET", "/v1/x?pagesize=2", &[]),
        ["getThing unknown_query_param pagesize"]
    );
    // A segment with literal text beside its parameter: matched past a sibling's suffix.
    assert_eq!(
        errors(&c, "GET", "/x.vtex.com.br/api/fulfil", &[]),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&c, "GET", "/x.vtex.com.br/api/other", &[]),
        ["- unknown_operation /*/api/other"]
    );
    // A request the more concrete template refuses, audited against another the path fits.
    assert_eq!(
        errors(&c, "GET", "/sites/s/zones/count", &[]),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&c, "GET", "/sites/s/zones/count?distinct=scope", &[]),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&c, "GET", "/sites/s/zones/count?distnct=scope", &[]),
        ["getZone unknown_query_param distnct"]
    );
    let c_warnings = c.warnings();
    let ambiguous: Vec<&str> = c_warnings
        .iter()
        .filter(|w| w.reason == Skipped::AmbiguousRoute)
        .map(|w| w.pointer.as_str())
        .collect();
    assert_eq!(
        ambiguous,
        ["/paths/~1v1~1{parent}/get"],
        "AWS keys tell theirs apart"
    );
}

#[test]
fn parts_that_cannot_be_compiled_are_skipped_with_a_warning_or_refused_when_strict() {
    let doc = spec(json!({
        "/p": {"get": {"operationId": "p", "responses": {}, "parameters": [
            {"name": "id", "in": "query", "schema": {"type": "string", "pattern": "^\\p{XDigit}{8}$"}},
            {"name": "n", "in": "query", "schema": {"type": "integer"}},
            {"name": "o", "in": "query", "schema": {"oneOf": [{"type": "integer"}, {"pattern": "\\p{XDigit}"}]}}]}},
        "/s": {"post": {"operationId": "s", "responses": {},
            "requestBody": {"content": {"application/json": {"schema": null}}}}},
        "/q": {"get": {"operationId": "q", "responses": {}, "parameters": [{"name": "lost"}]}}
    }));
    let c = compile(doc.clone(), false).unwrap();
    let c_warnings = c.warnings();
    let said: Vec<(Skipped, &str)> = c_warnings
        .iter()
        .map(|w| (w.reason, w.pointer.as_str()))
        .collect();
    assert_eq!(
        said,
        [
            (
                Skipped::Pattern,
                "/paths/~1p/get/parameters/0/schema/pattern"
            ),
            // Named as the file spells it, though the audit reads the `oneOf` as `anyOf`.
            (
                Skipped::Pattern,
                "/paths/~1p/get/parameters/2/schema/oneOf/1/pattern"
            ),
            (
                Skipped::Schema,
                "/paths/~1s/post/requestBody/content/application~1json/schema"
            ),
            (Skipped::Parameter, "/paths/~1q/get/parameters/0"),
        ]
    );
    // The rest still audits: the skipped pattern passes, the other parameter is still checked.
    assert_eq!(
        errors(&c, "GET", "/p?id=00ff00ff", &[]),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&c, "GET", "/p?n=x", &[]),
        ["p param_type_mismatch n"]
    );
    // An operation that lost a parameter calls no query key unknown.
    assert_eq!(
        errors(&c, "GET", "/q?lost=1&other=2", &[]),
        Vec::<String>::new()
    );
    let op = |id: &str| c.skipped(c.operation(id).unwrap()).to_vec();
    assert_eq!(
        (op("p"), op("s"), op("q")),
        (
            vec![Skipped::Pattern],
            vec![Skipped::Schema],
            vec![Skipped::Parameter]
        )
    );
    let refused = compile(doc, true).unwrap_err();
    assert!(
        refused.starts_with(
            "api.json: at /paths/~1p/get/parameters/0/schema/pattern: pattern skipped:"
        ),
        "{refused}"
    );
}

#[test]
fn every_real_spec_still_loads_without_warnings_in_strict_mode() {
    // The shared specs are well-formed: lenient load must not weaken them.
    for (rel, _) in super::real_specs::SPECS {
        let spec = Spec::load(&shared_spec(rel)).unwrap();
        let strict = ContractOptions {
            strict: true,
            ..Default::default()
        };
        Contract::compile(&spec, &strict).unwrap_or_else(|e| panic!("{rel}: {e}"));
    }
}

const SECRET: &str = "SECRET-KEY-8c1f";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_in_the_query_appears_in_no_sink() {
    let galaxy = shared_spec("scalar/galaxy.json");
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let mut seen = Vec::new();
    for log_values in [false, true] {
        let log = std::env::temp_dir().join(format!(
            "driftwatch-secret-{}-{log_values}.jsonl",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&log);
        let dw = start(config(&format!("http://{}", up.addr), |c| {
            c.spec.path = Some(galaxy.clone());
            c.events.output = log.display().to_string();
            c.events.log_values = log_values;
        }))
        .await;
        // GET /me accepts apiKeyQuery; `extra` makes a finding, so the request is written to
        // the event log and /findings.
        let request = format!("GET /me?extra=1&api_key={SECRET} HTTP/1.1\r\nhost: x\r\n\r\n");
        assert_eq!(raw(dw.addr, request.as_bytes()).await.status, 200);
        let findings = String::from_utf8(admin_get(dw.admin, "/findings").await.body).unwrap();
        let metrics = String::from_utf8(admin_get(dw.admin, "/metrics").await.body).unwrap();
        dw.stop().await;
        let events = std::fs::read_to_string(&log).unwrap();
        assert!(events.contains("unknown_query_param"), "{events}");
        assert!(!events.contains(r#""field":"api_key""#), "{events}");
        if log_values {
            assert!(events.contains("api_key=REDACTED"), "{events}");
        }
        seen.extend([events, findings, metrics]);
    }
    // check, both formats, on the same request recorded.
    let traffic =
        std::env::temp_dir().join(format!("driftwatch-secret-{}.jsonl", std::process::id()));
    std::fs::write(
        &traffic,
        format!(r#"{{"method":"GET","url":"/me?extra=1&api_key={SECRET}"}}"#),
    )
    .unwrap();
    for format in ["text", "json"] {
        let out = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .args(["check", "--spec", galaxy.to_str().unwrap(), "--traffic"])
            .arg(&traffic)
            .args(["--format", format])
            .env("RUST_LOG", "trace")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "the finding fails the check");
        seen.push(String::from_utf8_lossy(&out.stdout).into_owned());
        seen.push(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    for (i, text) in seen.iter().enumerate() {
        assert!(!text.contains(SECRET), "sink {i} holds the key:\n{text}");
    }
    // Not vacuous: the sinks did record this request.
    assert!(seen.iter().filter(|t| t.contains("extra")).count() >= 6);
}
