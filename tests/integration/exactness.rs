//! Limits of ours are never findings of theirs (issue 14, defect 8): a compressed JSON body is
//! decoded for the audit (and forwarded as sent), numbers and nesting that JSON allows but the
//! parser cannot hold are `unaudited`, a regex engine's limit is `unaudited`, never a
//! violation, so enforce mode does not refuse them. Circular `$ref`s and duplicate keys are
//! load warnings. Each was seen red first (`invalid_json_body`, `body_schema_violation`, or
//! loaded silently).

use std::io::Write;
use std::path::Path;

use driftwatch::audit::audit;
use driftwatch::contract::{Contract, ContractOptions};
use driftwatch::finding::Kind;
use driftwatch::request::RequestView;
use driftwatch::spec::Spec;

fn contract(yaml: &str) -> Contract {
    let spec = Spec::parse(Path::new("exact.yaml"), yaml.as_bytes()).unwrap();
    Contract::compile(&spec, &ContractOptions::default()).unwrap()
}

/// One POST /things whose body schema is `schema` (YAML flow style).
fn things(schema: &str) -> Contract {
    contract(&format!(
        "openapi: 3.1.0\ninfo: {{title: t, version: '1'}}\npaths:\n  /things:\n    post:\n      requestBody:\n        content:\n          application/json:\n            schema: {schema}\n      responses: {{'200': {{description: ok}}}}\n"
    ))
}

fn kinds(contract: &Contract, headers: &[(&str, &str)], body: &[u8]) -> Vec<(Kind, String)> {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let request = RequestView::new("POST", "/things", &headers, Some(body));
    audit(contract, &request)
        .findings
        .into_iter()
        .map(|f| (f.kind, f.observed.unwrap_or_default().into_string()))
        .collect()
}

const JSON: (&str, &str) = ("content-type", "application/json");

#[test]
fn a_gzip_body_is_audited_decoded() {
    let c = things("{type: object, properties: {n: {type: integer}}, additionalProperties: false}");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(br#"{"n": "seven"}"#).unwrap();
    let body = gz.finish().unwrap();
    let found = kinds(&c, &[JSON, ("content-encoding", "gzip")], &body);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, Kind::BodyTypeMismatch, "{found:?}");
    // Not gzip after all: not audited, and said so; never invalid JSON.
    let found = kinds(&c, &[JSON, ("content-encoding", "gzip")], b"{\"n\": 1}");
    assert_eq!(
        found,
        [(Kind::Unaudited, "undecodable gzip body".to_string())]
    );
    let found = kinds(&c, &[JSON, ("content-encoding", "zstd")], b"(zstd)");
    assert_eq!(
        found,
        [(Kind::Unaudited, "undecodable zstd body".to_string())]
    );
}

#[test]
fn numbers_and_nesting_json_allows_are_unaudited_never_invalid() {
    let c = things("{}");
    for (body, why) in [
        ("{\"n\": 1e400}".to_string(), "number out of range"),
        (
            format!("{{\"n\": {}}}", "9".repeat(400)),
            "number out of range",
        ),
        (
            format!("{}{}", "[".repeat(200), "]".repeat(200)),
            "nesting deeper than 128",
        ),
    ] {
        let found = kinds(&c, &[JSON], body.as_bytes());
        assert_eq!(
            found,
            [(Kind::Unaudited, why.to_string())],
            "{}",
            &body[..20]
        );
    }
    // Broken JSON is still invalid JSON.
    let found = kinds(&c, &[JSON], b"{\"n\": }");
    assert_eq!(found[0].0, Kind::InvalidJsonBody);
}

#[test]
fn a_regex_engine_limit_is_unaudited_never_a_violation() {
    let c = things("{type: object, properties: {s: {type: string, pattern: '^(?:a(?=a)|a)*b$'}}}");
    let body = format!("{{\"s\": \"{}c\"}}", "a".repeat(64));
    let found = kinds(&c, &[JSON], body.as_bytes());
    assert_eq!(
        found,
        [(Kind::Unaudited, "regex engine limit".to_string())],
        "{found:?}"
    );
}

/// A spec whose body schema is a chain of `links` references, `S0` to `S{links}`, and `end`
/// as the last one's schema.
fn chain(links: usize, end: &str) -> Contract {
    let mut schemas: Vec<String> = (0..links)
        .map(|i| {
            format!(
                "\"S{i}\": {{\"$ref\": \"#/components/schemas/S{}\"}}",
                i + 1
            )
        })
        .collect();
    schemas.push(format!("\"S{links}\": {end}"));
    let doc = format!(
        r##"{{"openapi": "3.1.0", "info": {{"title": "t", "version": "1"}}, "paths": {{"/things": {{"post": {{"requestBody": {{"content": {{"application/json": {{"schema": {{"$ref": "#/components/schemas/S0"}}}}}}}}, "responses": {{"200": {{"description": "ok"}}}}}}}}}}, "components": {{"schemas": {{{}}}}}}}"##,
        schemas.join(", ")
    );
    let spec = Spec::parse(Path::new("chain.json"), doc.as_bytes()).unwrap();
    Contract::compile(&spec, &ContractOptions::default()).unwrap()
}

#[test]
fn a_long_ref_chain_is_walked_once_and_a_cycle_at_its_end_said_once() {
    // 2,000 links, then a loop back to the 1,999th: said once, with each link walked once
    // (the walk used to start again from every link, up to 64 steps each).
    let looped = chain(2_000, r##"{"$ref": "#/components/schemas/S1999"}"##);
    let looped_warnings = looped.warnings();
    let circular: Vec<&str> = looped_warnings
        .iter()
        .filter(|w| w.reason.as_str() == "circular_ref")
        .map(|w| w.pointer.as_str())
        .collect();
    assert_eq!(circular.len(), 1, "{circular:?}");
    let ends = chain(2_000, r#"{"type": "object"}"#);
    assert!(
        ends.warnings()
            .iter()
            .all(|w| w.reason.as_str() != "circular_ref"),
        "{:?}",
        ends.warnings()
    );
}

#[test]
fn a_ref_chain_deeper_than_the_bound_is_cut_at_its_way_in_and_said_once() {
    // jsonschema's compile grows with the square of such a chain (40,000 links: 36 s to load
    // before the bound); past `spec.max_ref_depth` (256) the body's reference is not followed.
    let end = r#"{"type": "object", "properties": {"a": {"type": "integer"}}}"#;
    let wrong = br#"{"a": "x"}"#;
    let within = chain(200, end);
    assert!(within.warnings().is_empty(), "{:?}", within.warnings());
    let found = kinds(&within, &[("content-type", "application/json")], wrong);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, Kind::BodyTypeMismatch);

    let deep = chain(2_000, end);
    let deep_warnings = deep.warnings();
    let said: Vec<(&str, &str)> = deep_warnings
        .iter()
        .map(|w| (w.reason.as_str(), w.pointer.as_str()))
        .collect();
    assert_eq!(
        said,
        [(
            "ref_depth",
            "/paths/~1things/post/requestBody/content/application~1json/schema/$ref"
        )]
    );
    assert!(deep.warnings()[0].detail.contains("2001 references deep"));
    let op = deep.operation("POST /things").unwrap();
    assert_eq!(deep.skipped(op), [driftwatch::contract::Skipped::RefDepth]);
    assert_eq!(
        kinds(&deep, &[("content-type", "application/json")], wrong),
        [],
        "nothing is checked past the cut"
    );
}

#[test]
fn circular_refs_and_duplicate_keys_are_load_warnings() {
    let circular = "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /things:\n    post:\n      requestBody:\n        content:\n          application/json:\n            schema: {$ref: '#/components/schemas/A'}\n      responses: {'200': {description: ok}}\ncomponents:\n  schemas:\n    A: {$ref: '#/components/schemas/B'}\n    B: {$ref: '#/components/schemas/A'}\n";
    let c = contract(circular);
    let reasons: Vec<&str> = c.warnings().iter().map(|w| w.reason.as_str()).collect();
    assert!(reasons.contains(&"circular_ref"), "{:?}", c.warnings());
    let dup = r#"{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {"/things": {"post": {"responses": {"200": {"description": "a"}}, "responses": {"201": {"description": "b"}}}}}}"#;
    let spec = Spec::parse(Path::new("dup.json"), dup.as_bytes()).unwrap();
    let c = Contract::compile(&spec, &ContractOptions::default()).unwrap();
    let c_warnings = c.warnings();
    let dups: Vec<&str> = c_warnings
        .iter()
        .filter(|w| w.reason.as_str() == "duplicate_key")
        .map(|w| w.pointer.as_str())
        .collect();
    assert_eq!(
        dups,
        ["/paths/~1things/post/responses"],
        "{:?}",
        c.warnings()
    );
}
