use serde_json::json;

use super::*;
use crate::contract::ContractOptions;
use crate::spec::Spec;

fn contract() -> Contract {
    let doc = json!({"openapi": "3.1.0", "paths": {
        "/items": {"get": {"operationId": "listItems", "parameters": [
            {"name": "pageSize", "in": "query", "schema": {"type": "integer"}},
            {"name": "filter", "in": "query", "style": "deepObject", "schema": {"type": "object"}},
            {"name": "x-trace", "in": "header", "schema": {"type": "string"}},
            {"name": "session", "in": "cookie", "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}, "4XX": {"description": "no"}}}},
        "/items/{id}": {
            "put": {"operationId": "putItem",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "requestBody": {"content": {"application/json": {"schema": {"type": "object",
                    "properties": {"name": {"type": "string"}, "tags": {"type": "array"}, "zeta": {}}}}}},
                "responses": {"200": {"description": "ok"}, "default": {"description": "err"}}},
            "delete": {"operationId": "deleteItem",
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                "responses": {"204": {"description": "gone"}}}}}});
    let spec = Spec::from_document(std::path::Path::new("c.json"), doc).unwrap();
    Contract::compile(&spec, &ContractOptions::default()).unwrap()
}

type H = Vec<(String, String)>;

fn headers(pairs: &[(&str, &str)]) -> H {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `method target` counted as the proxy counts it: audited, then marked with the body
/// properties the audit found.
fn send(c: &Contract, cov: &Coverage, method: &str, target: &str, h: &H, body: Option<&[u8]>) {
    let view = RequestView::new(method, target, h, body);
    let audit = crate::audit::audit(c, &view);
    match audit.operation {
        Some(operation) => cov.request(operation, &view, audit.sent_properties.as_ref()),
        None => cov.unrouted(),
    }
}

fn names(seen: &[ParamName]) -> Vec<String> {
    seen.iter()
        .map(|p| format!("{} {}", p.location, p.name))
        .collect()
}

#[test]
fn requests_parameters_and_properties_seen_and_never_seen() {
    let c = contract();
    let cov = Coverage::new(&c);
    let none = headers(&[]);
    let json = headers(&[("content-type", "application/json")]);
    send(
        &c,
        &cov,
        "GET",
        "/items?pageSize=2&filter%5Bname%5D=a",
        &none,
        None,
    );
    send(
        &c,
        &cov,
        "GET",
        "/items",
        &headers(&[("cookie", "a=1; session=x")]),
        None,
    );
    send(
        &c,
        &cov,
        "PUT",
        "/items/7",
        &json,
        Some(br#"{"name":"a","other":{"zeta":1}}"#),
    );
    send(&c, &cov, "PUT", "/items/8", &json, Some(b"not json"));
    send(&c, &cov, "GET", "/nowhere", &none, None);
    let r = cov.report(&c, "rev1");
    assert_eq!(
        (r.requests, r.unrouted, r.spec_revision.as_str()),
        (4, 1, "rev1")
    );
    let list = &r.operations[0];
    assert_eq!(
        (list.named.operation.as_str(), list.requests),
        ("listItems", 2)
    );
    assert_eq!(
        names(&list.parameters.seen),
        ["query pageSize", "query filter", "cookie session"]
    );
    assert_eq!(names(&list.parameters.never_seen), ["header x-trace"]);
    let put = &r.operations[1];
    assert_eq!(put.requests, 2);
    assert_eq!(names(&put.parameters.seen), ["path id"]);
    // `zeta` nested under `other` is not a top-level property.
    assert_eq!(put.body_properties.seen, ["name"]);
    assert_eq!(put.body_properties.never_seen, ["tags", "zeta"]);
    assert_eq!(r.never_requested.len(), 1);
    assert_eq!(r.never_requested[0].operation, "deleteItem");
    let t = r.totals;
    assert_eq!((t.operations.seen, t.operations.declared), (2, 3));
    assert_eq!((t.parameters.seen, t.parameters.declared), (4, 6));
    assert_eq!((t.body_properties.seen, t.body_properties.declared), (1, 3));
}

#[test]
fn responses_by_declared_entry_and_undeclared_codes_kept_apart() {
    let c = contract();
    let cov = Coverage::new(&c);
    let list = c.operation("listItems").unwrap();
    let put = c.operation("putItem").unwrap();
    for status in [200, 200, 404, 500, 503, 500] {
        cov.response(list, status);
    }
    cov.response(put, 500); // `default` covers it
    cov.response(list, 42); // no status: not kept
    let r = cov.report(&c, "");
    // An answer alone makes no request: the operations stay in `never_requested`.
    assert_eq!(r.operations.len(), 0);
    let by_op = |id: &str| super::report::responses_of(c.operation(id).unwrap(), &cov);
    let l = by_op("listItems");
    assert_eq!(l.seen.get("200"), Some(&2));
    assert_eq!(l.seen.get("4XX"), Some(&1));
    assert!(l.never_seen.is_empty());
    assert_eq!(l.undeclared, [500, 503]);
    let p = by_op("putItem");
    assert_eq!(p.seen.get("default"), Some(&1));
    assert_eq!(p.never_seen, ["200"]);
    assert!(p.undeclared.is_empty());
    assert_eq!(r.totals.responses.seen, 3);
}

#[test]
fn tools_are_bounded_in_number_and_name_length() {
    let c = contract();
    let cov = Coverage::new(&c);
    let list = c.operation("listItems").unwrap();
    let delete = c.operation("deleteItem").unwrap();
    cov.tool(list, "list_items");
    cov.tool(delete, "list_items");
    let long = "t".repeat(10_000);
    cov.tool(list, &long);
    for i in 0..TOOLS_KEPT + 10 {
        cov.tool(delete, &format!("tool{i:04}"));
    }
    let r = cov.report(&c, "");
    assert_eq!(r.tools.len(), TOOLS_KEPT);
    let named = r.tools.iter().find(|t| t.tool == "list_items").unwrap();
    assert_eq!(named.operations, ["listItems", "deleteItem"]);
    assert_eq!(named.requests, 2);
    let cut = r
        .tools
        .iter()
        .find(|t| t.tool.starts_with('t') && t.tool.len() > 200);
    assert_eq!(cut.map(|t| t.tool.len()), Some(NAME_MAX));
    // 256 kept: list_items, the long one, and 254 of the rest.
    assert_eq!(r.other_tools.requests, (TOOLS_KEPT + 10 - 254) as u64);
    assert_eq!(r.other_tools.operations, ["deleteItem"]);
}

#[test]
fn an_encoded_or_non_json_body_is_not_read_and_reading_stops_once_all_are_seen() {
    let c = contract();
    let cov = Coverage::new(&c);
    let gz = headers(&[
        ("content-type", "application/json"),
        ("content-encoding", "gzip"),
    ]);
    send(&c, &cov, "PUT", "/items/1", &gz, Some(br#"{"name":"a"}"#));
    let text = headers(&[("content-type", "text/plain")]);
    send(&c, &cov, "PUT", "/items/1", &text, Some(br#"{"tags":[]}"#));
    let r = cov.report(&c, "");
    assert!(r.operations[0].body_properties.seen.is_empty());
    let json = headers(&[("content-type", "application/json")]);
    // Every property seen before the body's end: the rest (not even JSON) is never read.
    let body = br#"{"zeta":1,"tags":[],"name":"x", oops"#;
    send(&c, &cov, "PUT", "/items/1", &json, Some(body));
    let r = cov.report(&c, "");
    assert_eq!(r.operations[0].body_properties.never_seen.len(), 0);
    // An escaped key is read as its text.
    let cov = Coverage::new(&c);
    send(
        &c,
        &cov,
        "PUT",
        "/items/1",
        &json,
        Some(br#"{"n\u0061me":1}"#),
    );
    assert_eq!(
        cov.report(&c, "").operations[0].body_properties.seen,
        ["name"]
    );
}

#[test]
fn the_report_round_trips_through_json_and_its_text_names_what_was_never_seen() {
    let c = contract();
    let cov = Coverage::new(&c);
    send(&c, &cov, "GET", "/items?pageSize=1", &headers(&[]), None);
    cov.response(c.operation("listItems").unwrap(), 200);
    cov.tool(c.operation("listItems").unwrap(), "list_items");
    let r = cov.report(&c, "rev");
    let text = serde_json::to_string(&r).unwrap();
    let back: Report = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["operations"][0]["operation"], "listItems");
    assert_eq!(
        v["operations"][0]["parameters"]["seen"][0],
        json!({"in": "query", "name": "pageSize"})
    );
    let mut out = Vec::new();
    r.write_text(&mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    for line in [
        "coverage: 1 of 3 operations requested (1 requests, 0 routed nowhere)",
        "  listItems  GET /items  1 request(s)",
        "    parameters never sent: query filter, header x-trace, cookie session",
        "    responses never seen: 4XX",
        "    deleteItem  DELETE /items/{id}",
        "  tool list_items: 1 requests -> listItems",
    ] {
        assert!(out.contains(line), "{line:?} not in:\n{out}");
    }
}

/// The body properties the audit reports a request sending are the ones a read of the body
/// finds: a coverage fed the audit's and one that reads the body itself say the same, for
/// bodies with escaped, repeated, undeclared and mistyped keys, and for bodies that are no
/// object.
#[test]
fn the_audits_sent_properties_are_what_a_read_of_the_body_finds() {
    let c = contract();
    let json = headers(&[("content-type", "application/json")]);
    let bodies: [&[u8]; 7] = [
        br#"{"name":"a"}"#,
        br#"{"na\u006de":"escaped","zeta":null}"#,
        br#"{"tags":[],"unknown":1,"name":2}"#,
        br#"{"name":"a","name":"b","zeta":{"tags":[]}}"#,
        b"{}",
        b"[1,2]",
        b"not json",
    ];
    let seen = |cov: &Coverage| {
        let report = cov.report(&c, "r");
        let put = (report.operations.iter()).find(|o| o.named.operation == "putItem");
        put.unwrap().body_properties.seen.clone()
    };
    for body in bodies {
        let view = RequestView::new("PUT", "/items/7", &json, Some(body));
        let audit = crate::audit::audit(&c, &view);
        let op = audit.operation.unwrap();
        let text = String::from_utf8_lossy(body);
        // An object's keys come from the audit; for the rest, both read nothing.
        let object = body.starts_with(b"{");
        assert_eq!(audit.sent_properties.is_some(), object, "{text}");
        let (by_audit, by_read) = (Coverage::new(&c), Coverage::new(&c));
        by_audit.request(op, &view, audit.sent_properties.as_ref());
        by_read.request(op, &view, None);
        assert_eq!(seen(&by_audit), seen(&by_read), "{text}");
        assert_eq!(
            seen(&by_read).is_empty(),
            !object || body == b"{}",
            "{text}"
        );
    }
    // The audit did report them (the body was not read again), by index in the declared list.
    let view = RequestView::new("PUT", "/items/7", &json, Some(br#"{"zeta":1,"name":"a"}"#));
    let audit = crate::audit::audit(&c, &view);
    let declared = audit.operation.unwrap().body_properties();
    let sent: Vec<&str> = (audit.sent_properties.unwrap().indices())
        .map(|i| declared[i].name.as_str())
        .collect();
    assert_eq!(sent, ["name", "zeta"]);
    // A compressed body's properties are the ones the audit decoded it to (a read of the
    // body itself leaves a Content-Encoding alone).
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, br#"{"tags":[]}"#).unwrap();
    let gz = gz.finish().unwrap();
    let gzipped = headers(&[
        ("content-type", "application/json"),
        ("content-encoding", "gzip"),
    ]);
    let view = RequestView::new("PUT", "/items/7", &gzipped, Some(&gz));
    let audit = crate::audit::audit(&c, &view);
    let cov = Coverage::new(&c);
    cov.request(
        audit.operation.unwrap(),
        &view,
        audit.sent_properties.as_ref(),
    );
    assert_eq!(seen(&cov), ["tags"]);
}
