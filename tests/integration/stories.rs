//! The stories driftwatch exists for, and the no-false-positive rules of design.md, each as a
//! request and the exact findings it must give.

use driftwatch::contract::{Contract, ContractOptions};
use driftwatch::finding::{Kind, Location};
use driftwatch::spec::Spec;
use serde_json::json;

use super::kinds::{channel, channel_with, channel_without, req};
use super::util::{contract, example};

fn kinds(findings: &[driftwatch::finding::Finding]) -> Vec<(Kind, String)> {
    findings
        .iter()
        .map(|f| (f.kind, f.field.to_string()))
        .collect()
}

#[test]
fn a_renamed_query_parameter_is_unknown_and_the_required_one_missing_pointing_at_each_other() {
    let billing = contract(&example("billing.openapi.yaml"));
    let findings = req("GET", "/v2/invoices?customer_id=cus_42&limit=10").audit(&billing);
    assert_eq!(
        kinds(&findings),
        [
            (Kind::UnknownQueryParam, "customer_id".into()),
            (Kind::MissingRequiredParam, "customerId".into())
        ]
    );
    assert_eq!(findings[0].suggestion.as_deref(), Some("customerId"));
    assert_eq!(
        findings[0].message,
        "query parameter `customer_id` is not accepted by GET /invoices (listInvoices); did you mean `customerId`, which is required and missing?"
    );
    assert_eq!(
        findings[1].suggestion.as_deref(),
        Some("rename `customer_id` to `customerId`")
    );
    assert!(
        findings[1]
            .message
            .ends_with("the request sent `customer_id` instead"),
        "{}",
        findings[1].message
    );
    assert!(
        findings
            .iter()
            .all(|f| f.operation.as_deref() == Some("listInvoices"))
    );
}

#[test]
fn a_replace_that_omits_a_field_is_flagged_and_a_merge_is_not() {
    let channels = contract(&example("channels.openapi.yaml"));
    let put = req("PUT", "/api/v1/channels/7")
        .json(&channel_without("graphicsElementIds"))
        .audit(&channels);
    assert_eq!(
        kinds(&put),
        [(Kind::OmittedOnReplace, "/graphicsElementIds".into())]
    );
    assert_eq!(put[0].expected.as_deref(), Some("array<integer>"));
    let patch = req("PATCH", "/api/v1/channels/7").raw(
        "application/merge-patch+json",
        &json!({"name": "Renamed"}).to_string(),
    );
    assert_eq!(kinds(&patch.audit(&channels)), []);
}

#[test]
fn omitting_a_required_nullable_field_is_not_sending_null() {
    let channels = contract(&example("channels.openapi.yaml"));
    let omitted = req("PUT", "/api/v1/channels/7")
        .json(&channel_without("watermarkId"))
        .audit(&channels);
    assert_eq!(
        kinds(&omitted),
        [
            (Kind::BodySchemaViolation, "/watermarkId".into()),
            (Kind::OmittedOnReplace, "/watermarkId".into())
        ]
    );
    assert!(
        omitted[1]
            .message
            .contains("required and nullable: send null to clear it"),
        "{}",
        omitted[1].message
    );
    assert_eq!(omitted[1].expected.as_deref(), Some("integer|null"));
    let null = req("PUT", "/api/v1/channels/7").json(&channel_with("watermarkId", json!(null)));
    assert_eq!(kinds(&null.audit(&channels)), []);
}

#[test]
fn read_only_properties_are_never_expected_in_a_request() {
    let channels = contract(&example("channels.openapi.yaml"));
    let billing = contract(&example("billing.openapi.yaml"));
    let schedule = json!({"name": "Weeknights", "keepMultiPartEpisodesTogether": true, "treatCollectionsAsShows": false,
        "shuffleScheduleItems": false, "randomStartPoint": false, "fixedStartTimeBehavior": "Strict", "padToNearestMinute": null});
    assert_eq!(
        kinds(
            &req("PUT", "/api/v1/schedules/2")
                .json(&schedule)
                .audit(&channels)
        ),
        []
    );
    // Invoice.id is required *and* readOnly: a request need not carry it.
    let invoice = json!({"customerId": "cus_42", "amount": 1200, "currency": "eur", "memo": null, "metadata": {"po": "7"}});
    let post = req("POST", "/v2/invoices")
        .header("Idempotency-Key", "k1")
        .json(&invoice);
    assert_eq!(kinds(&post.audit(&billing)), []);
}

#[test]
fn query_text_is_coerced_but_json_bodies_are_not() {
    let channels = contract(&example("channels.openapi.yaml"));
    assert_eq!(
        kinds(&req("GET", "/api/v1/playouts?pageSize=30&pageNum=0").audit(&channels)),
        []
    );
    let body = req("PUT", "/api/v1/channels/7")
        .json(&channel_with("ffmpegProfileId", json!("30")))
        .audit(&channels);
    assert_eq!(
        kinds(&body),
        [(Kind::BodyTypeMismatch, "/ffmpegProfileId".into())]
    );
    assert_eq!(
        (body[0].expected.as_deref(), body[0].observed.as_deref()),
        (Some("integer"), Some("string"))
    );
    let path = req("GET", "/api/v1/channels/seven").audit(&channels);
    assert_eq!(kinds(&path), [(Kind::ParamTypeMismatch, "id".into())]);
    assert_eq!(path[0].location, Location::Path);
}

#[test]
fn parameter_styles_are_read_as_declared() {
    let channels = contract(&example("channels.openapi.yaml"));
    let billing = contract(&example("billing.openapi.yaml"));
    let clean = [
        (&channels, "/api/v1/playouts?channelIds=1,2,3&sort=name"),
        (&channels, "/api/v1/playouts?query=late+night&sort=number"),
        (&channels, "/api/v1/playouts?query=caf%C3%A9%20bar"),
        (&channels, "/api/v1/playouts/"),
        (
            &channels,
            "/api/v1/playouts/3/items?showFiller=true&start=2026-12-01T00%3A00%3A00Z",
        ),
        (
            &billing,
            "/v2/invoices?customerId=c1&expand=lines&expand=customer",
        ),
        (
            &billing,
            "/v2/invoices?customerId=c1&created[gte]=1700000000&created%5Blte%5D=1800000000",
        ),
        (&billing, "/v2/invoices/in_42"),
    ];
    for (contract, target) in clean {
        let method = if target.starts_with("/v2/invoices/") {
            "DELETE"
        } else {
            "GET"
        };
        assert_eq!(kinds(&req(method, target).audit(contract)), [], "{target}");
    }
    let drifted = [
        (&channels, "/api/v1/playouts?channelIds=1,two", "channelIds"),
        (&channels, "/api/v1/playouts?sort=channel", "sort"),
        (&channels, "/api/v1/playouts?pageSize=0", "pageSize"),
        (
            &billing,
            "/v2/invoices?customerId=c1&created[gte]=soon",
            "created",
        ),
        (&billing, "/v2/invoices/42", "invoiceId"),
    ];
    for (contract, target, field) in drifted {
        let method = if target.starts_with("/v2/invoices/") {
            "DELETE"
        } else {
            "GET"
        };
        assert_eq!(
            kinds(&req(method, target).audit(contract)),
            [(Kind::ParamTypeMismatch, field.into())],
            "{target}"
        );
    }
}

#[test]
fn openapi_3_0_nullable_forms_accept_null() {
    let billing = contract(&example("billing.openapi.yaml"));
    let customer = json!({"name": "Ada", "email": "a@x.test", "phone": null, "address": null, "billingAddress": null, "taxExempt": true});
    assert_eq!(
        kinds(
            &req("PUT", "/v2/customers/c1")
                .json(&customer)
                .audit(&billing)
        ),
        []
    );
    let mut wrong = customer.clone();
    wrong["phone"] = json!(5551234);
    wrong["address"] = json!("Main St");
    let found = req("PUT", "/v2/customers/c1").json(&wrong).audit(&billing);
    let fields: Vec<&str> = found.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["/phone", "/address"], "{found:#?}");
}

#[test]
fn header_and_cookie_parameters() {
    let billing = contract(&example("billing.openapi.yaml"));
    let invoice = json!({"customerId": "c1", "amount": 5, "currency": "usd"});
    let missing = req("POST", "/v2/invoices").json(&invoice).audit(&billing);
    assert_eq!(
        kinds(&missing),
        [(Kind::MissingRequiredParam, "idempotency-key".into())]
    );
    assert_eq!(missing[0].location, Location::Header);
    let customer = json!({"name": "Ada", "email": "a@x.test", "phone": null, "address": null, "billingAddress": null, "taxExempt": true});
    let cookie = req("PUT", "/v2/customers/c1")
        .header("Cookie", "theme=dark; session=abc")
        .json(&customer)
        .audit(&billing);
    assert_eq!(
        kinds(&cookie),
        [(Kind::ParamTypeMismatch, "session".into())]
    );
    let ok = req("PUT", "/v2/customers/c1")
        .header("Cookie", "session=42")
        .json(&customer);
    assert_eq!(kinds(&ok.audit(&billing)), []);
}

#[test]
fn headers_added_by_clients_and_proxies_are_never_reported() {
    let channels = contract(&example("channels.openapi.yaml"));
    let r = req("GET", "/api/v1/channels/7")
        .header("Host", "api.test")
        .header("User-Agent", "mcp-server/1.0")
        .header("Accept", "application/json")
        .header("Accept-Encoding", "gzip, deflate")
        .header("Authorization", "Bearer secret")
        .header("X-Forwarded-For", "10.0.0.1")
        .header(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .header("X-MCP-Tool", "get_channel");
    assert_eq!(kinds(&r.audit(&channels)), []);
}

#[test]
fn findings_never_carry_request_values() {
    let channels = contract(&example("channels.openapi.yaml"));
    let billing = contract(&example("billing.openapi.yaml"));
    let mut found = req("PUT", "/api/v1/channels/7")
        .json(
            &channel_with("ffmpegProfileId", json!("hunter2"))
                .as_object()
                .unwrap()
                .clone()
                .into_iter()
                .chain([("hunter2x".to_string(), json!("hunter2"))])
                .collect(),
        )
        .audit(&channels);
    found.extend(
        req("PUT", "/api/v1/channels/7")
            .json(&channel_with("streamingMode", json!("hunter2")))
            .audit(&channels),
    );
    found.extend(
        req(
            "GET",
            "/v2/invoices?customerId=c&limit=hunter2&status=hunter2",
        )
        .audit(&billing),
    );
    let text = serde_json::to_string(&found).unwrap();
    assert_eq!(found.len(), 5, "{text}");
    assert_eq!(
        text.matches("hunter2").count(),
        2,
        "only the undeclared field's *name* may appear: {text}"
    );
}

#[test]
fn one_of_bodies_take_their_properties_from_the_matching_branch_and_all_of_unions() {
    let doc = json!({"openapi": "3.1.0", "paths": {"/pets/{id}": {"put": {
        "requestBody": {"content": {"application/json": {"schema": {"oneOf": [
            {"$ref": "#/components/schemas/Cat"}, {"$ref": "#/components/schemas/Dog"}]}}}},
        "responses": {"200": {"description": "ok"}}}}},
        "components": {"schemas": {
            "Pet": {"type": "object", "required": ["kind"], "properties": {"kind": {"type": "string"}, "name": {"type": "string"}}},
            "Cat": {"allOf": [{"$ref": "#/components/schemas/Pet"}, {"properties": {"kind": {"const": "cat"}, "indoor": {"type": "boolean"}}}]},
            "Dog": {"allOf": [{"$ref": "#/components/schemas/Pet"}, {"properties": {"kind": {"const": "dog"}, "breed": {"type": "string"}}}]}}}});
    let spec = Spec::from_document(std::path::Path::new("pets.json"), doc).unwrap();
    let pets = Contract::compile(&spec, &ContractOptions::default()).unwrap();
    let cat = req("PUT", "/pets/1").json(&json!({"kind": "cat", "name": "Tom", "indoor": true}));
    assert_eq!(kinds(&cat.audit(&pets)), []);
    let dog = req("PUT", "/pets/1")
        .json(&json!({"kind": "dog", "name": "Rex"}))
        .audit(&pets);
    assert_eq!(kinds(&dog), [(Kind::OmittedOnReplace, "/breed".into())]);
    let odd = req("PUT", "/pets/1")
        .json(&json!({"kind": "dog", "name": "Rex", "breed": "lab", "indoor": false}))
        .audit(&pets);
    assert_eq!(kinds(&odd), [(Kind::UndeclaredBodyField, "/indoor".into())]);
}

#[test]
fn the_full_valid_channel_is_clean_under_every_declared_json_media_type() {
    let channels = contract(&example("channels.openapi.yaml"));
    for media in [
        "application/json",
        "application/json; charset=utf-8",
        "text/json",
        "application/vnd.ersatz+json",
    ] {
        let r = req("PUT", "/api/v1/channels/7/").raw(media, &channel().to_string());
        assert_eq!(kinds(&r.audit(&channels)), [], "{media}");
    }
}
