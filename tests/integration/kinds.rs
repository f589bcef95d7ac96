//! Every finding kind, each with a request that must produce it and a near-identical twin
//! that must not. The set of kinds covered is pinned against `Kind::ALL`, so a new kind
//! without a twin fails here.

use std::collections::BTreeSet;

use driftwatch::audit::audit_request;
use driftwatch::contract::Contract;
use driftwatch::finding::{Finding, Kind, Severity};
use driftwatch::request::RequestView;
use serde_json::{Value, json};

use super::util::{contract, example};

pub struct Req {
    pub method: &'static str,
    pub target: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

pub fn req(method: &'static str, target: &'static str) -> Req {
    Req {
        method,
        target,
        headers: Vec::new(),
        body: None,
    }
}

impl Req {
    pub fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((name.into(), value.into()));
        self
    }
    pub fn json(self, body: &Value) -> Req {
        self.raw("application/json", &body.to_string())
    }
    pub fn raw(mut self, content_type: &str, body: &str) -> Req {
        self.headers
            .push(("Content-Type".into(), content_type.into()));
        self.body = Some(body.as_bytes().to_vec());
        self
    }
    pub fn audit(&self, contract: &Contract) -> Vec<Finding> {
        let view = RequestView::new(
            self.method,
            self.target,
            &self.headers,
            self.body.as_deref(),
        );
        audit_request(contract, &view)
    }
}

/// A complete, valid body for PUT /api/v1/channels/{id}.
pub fn channel() -> Value {
    serde_json::from_str(include_str!("../../examples/channel.json"))
        .expect("examples/channel.json")
}

pub fn channel_with(key: &str, value: Value) -> Value {
    let mut body = channel();
    body[key] = value;
    body
}

pub fn channel_without(key: &str) -> Value {
    let mut body = channel();
    body.as_object_mut().unwrap().shift_remove(key);
    body
}

struct Twin {
    kind: Kind,
    spec: &'static str,
    bad: Req,
    good: Req,
    /// The field the finding must name.
    field: &'static str,
}

fn twins() -> Vec<Twin> {
    let customer = json!({"name": "Ada", "email": "ada@example.com", "phone": null, "address": null, "billingAddress": null, "taxExempt": false});
    let mut customer_extra = customer.clone();
    customer_extra["nickname"] = json!("ada");
    vec![
        Twin {
            kind: Kind::UnknownOperation,
            spec: "channels",
            bad: req("GET", "/api/v1/channel"),
            good: req("GET", "/api/v1/channels"),
            // The path's shape: a word where the spec has only words names the endpoint meant
            // (a segment where a template has a parameter would be masked: a value).
            field: "/api/v1/channel",
        },
        Twin {
            kind: Kind::MethodNotAllowed,
            spec: "channels",
            bad: req("DELETE", "/api/v1/channels/7"),
            good: req("GET", "/api/v1/channels/7"),
            field: "/api/v1/channels/*",
        },
        Twin {
            kind: Kind::SlashInPathValue,
            spec: "billing",
            // A customer id holding a `/` unescaped: `/customers/{customerId}` would fit.
            bad: req("PUT", "/v2/customers/acme/eu").json(&customer),
            good: req("PUT", "/v2/customers/acme%2Feu").json(&customer),
            field: "customerId",
        },
        Twin {
            kind: Kind::UnknownQueryParam,
            spec: "billing",
            bad: req("GET", "/v2/invoices?customerId=c1&customer_id=c1"),
            good: req("GET", "/v2/invoices?customerId=c1"),
            field: "customer_id",
        },
        Twin {
            kind: Kind::MissingRequiredParam,
            spec: "billing",
            bad: req("GET", "/v2/invoices?limit=3"),
            good: req("GET", "/v2/invoices?limit=3&customerId=c1"),
            field: "customerId",
        },
        Twin {
            kind: Kind::MissingCredentials,
            spec: "notes",
            bad: req("GET", "/v1/notes?limit=3").header("Authorization", "Basic dTpw"),
            good: req("GET", "/v1/notes?limit=3").header("Authorization", "Bearer t0k"),
            field: "authorization",
        },
        Twin {
            kind: Kind::ParamTypeMismatch,
            spec: "channels",
            bad: req("GET", "/api/v1/playouts?pageSize=fifty"),
            good: req("GET", "/api/v1/playouts?pageSize=50"),
            field: "pageSize",
        },
        Twin {
            kind: Kind::UnsupportedMediaType,
            spec: "channels",
            bad: req("PUT", "/api/v1/channels/7").raw("text/plain", &channel().to_string()),
            good: req("PUT", "/api/v1/channels/7")
                .raw("application/vnd.channel+json", &channel().to_string()),
            field: "content-type",
        },
        Twin {
            kind: Kind::InvalidJsonBody,
            spec: "channels",
            bad: req("PUT", "/api/v1/channels/7").raw(
                "application/json",
                &channel().to_string().replace("\"number\":", "\"number\""),
            ),
            good: req("PUT", "/api/v1/channels/7").raw("application/json", &channel().to_string()),
            field: "",
        },
        Twin {
            kind: Kind::UndeclaredBodyField,
            spec: "channels",
            bad: req("PUT", "/api/v1/channels/7")
                .json(&channel_with("graphicsElements", json!([{"id": 3}]))),
            good: req("PUT", "/api/v1/channels/7").json(&channel()),
            field: "/graphicsElements",
        },
        Twin {
            kind: Kind::BodyTypeMismatch,
            spec: "channels",
            bad: req("PUT", "/api/v1/channels/7")
                .json(&channel_with("ffmpegProfileId", json!("30"))),
            good: req("PUT", "/api/v1/channels/7")
                .json(&channel_with("ffmpegProfileId", json!(30))),
            field: "/ffmpegProfileId",
        },
        Twin {
            kind: Kind::BodySchemaViolation,
            spec: "channels",
            bad: req("PUT", "/api/v1/channels/7")
                .json(&channel_with("streamingMode", json!("Carrier pigeon"))),
            good: req("PUT", "/api/v1/channels/7")
                .json(&channel_with("streamingMode", json!("TransportStream"))),
            field: "/streamingMode",
        },
        Twin {
            kind: Kind::OmittedOnReplace,
            spec: "channels",
            bad: req("PUT", "/api/v1/channels/7").json(&channel_without("graphicsElementIds")),
            good: req("PUT", "/api/v1/channels/7")
                .json(&channel_with("graphicsElementIds", json!([]))),
            field: "/graphicsElementIds",
        },
        Twin {
            kind: Kind::Unaudited,
            spec: "channels",
            bad: req("PUT", "/api/v1/channels/7/logo").raw("image/png", "\u{89}PNG"),
            good: req("PUT", "/api/v1/channels/7/logo")
                .json(&json!({"url": "https://cdn.test/logo.png"})),
            field: "",
        },
        Twin {
            kind: Kind::UndeclaredBodyField,
            spec: "billing",
            bad: req("PUT", "/v2/customers/c1").json(&customer_extra),
            good: req("PUT", "/v2/customers/c1").json(&customer),
            field: "/nickname",
        },
    ]
}

#[test]
fn every_kind_has_a_producing_request_and_a_clean_twin() {
    let channels = contract(&example("channels.openapi.yaml"));
    let billing = contract(&example("billing.openapi.yaml"));
    let notes = contract(&example("notes.openapi.yaml"));
    let mut problems = Vec::new();
    let mut covered = BTreeSet::new();
    for twin in twins() {
        let contract = match twin.spec {
            "channels" => &channels,
            "notes" => &notes,
            _ => &billing,
        };
        let bad = twin.bad.audit(contract);
        let good = twin.good.audit(contract);
        if !bad
            .iter()
            .any(|f| f.kind == twin.kind && f.field == twin.field)
        {
            problems.push(format!(
                "{} {}: expected {} on `{}`, got {bad:#?}",
                twin.bad.method, twin.bad.target, twin.kind, twin.field
            ));
        }
        if !good.is_empty() {
            problems.push(format!(
                "{} {}: twin of {} must be clean, got {good:#?}",
                twin.good.method, twin.good.target, twin.kind
            ));
        }
        covered.insert(twin.kind);
    }
    // These need an upstream's answers: their twins are in proxy.rs (upstream_rejected) and
    // silent_clears.rs (silent_clear_risk, silent_clear).
    covered.extend([
        Kind::UpstreamRejected,
        Kind::SilentClearRisk,
        Kind::SilentClear,
    ]);
    // Response kinds have twins of their own, answers rather than requests (responses.rs).
    covered.extend(super::responses::response_twins().iter().map(|t| t.kind));
    let all: BTreeSet<Kind> = Kind::ALL.into_iter().collect();
    assert_eq!(covered, all, "kinds without a twin");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn severities_follow_the_design_table() {
    let billing = contract(&example("billing.openapi.yaml"));
    let channels = contract(&example("channels.openapi.yaml"));
    let strict = twins()
        .into_iter()
        .find(|t| t.spec == "billing" && t.kind == Kind::UndeclaredBodyField)
        .unwrap();
    let loose = twins()
        .into_iter()
        .find(|t| t.spec == "channels" && t.kind == Kind::UndeclaredBodyField)
        .unwrap();
    let severity = |c: &Contract, r: &Req| {
        r.audit(c)
            .into_iter()
            .find(|f| f.kind == Kind::UndeclaredBodyField)
            .map(|f| f.severity)
    };
    assert_eq!(
        severity(&billing, &strict.bad),
        Some(Severity::Error),
        "additionalProperties: false"
    );
    assert_eq!(
        severity(&channels, &loose.bad),
        Some(Severity::Warning),
        "additionalProperties absent"
    );
    // A renamed field: its suggestion is a writable property the body lacks, so the API never
    // sees the value (GitHub's `autoInit` for `auto_init`): an error, as an unknown query key is.
    let mut renamed = channel_without("graphicsElementIds");
    renamed["graphicsElements"] = json!([3, 7]);
    let found = req("PUT", "/api/v1/channels/7")
        .json(&renamed)
        .audit(&channels)
        .into_iter()
        .find(|f| f.kind == Kind::UndeclaredBodyField)
        .unwrap();
    assert_eq!(found.severity, Severity::Error, "{found:?}");
    assert_eq!(found.suggestion.as_deref(), Some("graphicsElementIds"));
    assert!(
        found.message.contains("the API ignores `graphicsElements`"),
        "{found:?}"
    );
    // The near twins stay warnings: the twin is sent too (the loose case above), or there is
    // no twin at all.
    let unrelated = req("PUT", "/api/v1/channels/7").json(&channel_with("zqxjv", json!(1)));
    assert_eq!(severity(&channels, &unrelated), Some(Severity::Warning));
    let omitted = req("PUT", "/api/v1/channels/7")
        .json(&channel_without("graphicsElementIds"))
        .audit(&channels);
    assert_eq!(omitted[0].severity, Severity::Warning);
    let unaudited = req("PUT", "/api/v1/channels/7/logo")
        .raw("image/png", "x")
        .audit(&channels);
    assert_eq!(unaudited[0].severity, Severity::Info);
}

/// Slack's spec declares a required `token` parameter on every method, and OAuth 2 security;
/// its API reads the token from `Authorization: Bearer` as well, which is what the Slack MCP
/// server sends. The near twin: without `Authorization`, the token is missing.
#[test]
fn a_required_token_is_carried_by_a_bearer_authorization() {
    let doc = json!({"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
        "components": {"securitySchemes": {"slackAuth": {"type": "oauth2", "flows": {
            "authorizationCode": {"authorizationUrl": "https://a", "tokenUrl": "https://t", "scopes": {}}}}}},
        "paths": {"/users.profile.get": {"get": {"operationId": "users_profile_get",
            "security": [{"slackAuth": ["users.profile:read"]}],
            "parameters": [{"name": "token", "in": "query", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}},
        "/chat.postMessage": {"post": {"operationId": "chat_postMessage",
            "security": [{"slackAuth": ["chat:write"]}],
            "parameters": [{"name": "token", "in": "header", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}}}});
    let spec =
        driftwatch::spec::Spec::from_document(std::path::Path::new("slack.json"), doc).unwrap();
    let slack = Contract::compile(&spec, &Default::default()).unwrap();
    for (method, target) in [("GET", "/users.profile.get"), ("POST", "/chat.postMessage")] {
        let bearer = req(method, target).header("Authorization", "Bearer xoxb-1");
        assert_eq!(bearer.audit(&slack), [], "{method} {target}");
        let bare = req(method, target).audit(&slack);
        let bare: Vec<_> = bare.iter().map(|f| (f.kind, f.field.as_str())).collect();
        assert_eq!(
            bare,
            [
                (Kind::MissingRequiredParam, "token"),
                (Kind::MissingCredentials, "authorization")
            ]
        );
    }
    // The token sent as the parameter the spec declares is the credential too.
    let in_query = req("GET", "/users.profile.get?token=xoxb-1");
    assert_eq!(in_query.audit(&slack), []);
    let in_header = req("POST", "/chat.postMessage").header("token", "xoxb-1");
    assert_eq!(in_header.audit(&slack), []);
}
