//! `missing_credentials`: a request that carries no credential its operation's `security`
//! accepts will be refused by the API (401 or 403), and an agent behind an MCP server sees
//! only that. The finding says what the spec accepts and what the request sent, by kind and
//! place (`Authorization: Basic`, `x-api-key` in the query), never a value: a token sent with
//! no scheme in `Authorization` is named as such, not echoed.

use std::borrow::Cow;

use super::bounded::Findings;
use crate::contract::{Credential, Operation, Scheme, Security};
use crate::finding::{Finding, Kind, Location};
use crate::request::RequestView;

/// Alternatives named in a finding's `expected` at most (the rest as `…`).
const NAMED: usize = 4;

/// The `Authorization` schemes a finding may name as sent: any other first word could be the
/// credential itself, sent without a scheme.
const KNOWN_SCHEMES: [&str; 10] = [
    "Bearer",
    "Basic",
    "Digest",
    "Negotiate",
    "NTLM",
    "Token",
    "OAuth",
    "HOBA",
    "Mutual",
    "AWS4-HMAC-SHA256",
];

/// Push `missing_credentials` where no alternative of `op`'s security is carried whole.
pub(super) fn check(op: &Operation, request: &RequestView, out: &mut Findings) {
    if let Some(finding) = missing_credentials(op, request) {
        out.push(finding);
    }
}

/// `missing_credentials`, where `request` carries no alternative of `op`'s security whole
/// (also what `driftwatch mcp` asks of its `--header`s at start).
pub fn missing_credentials(op: &Operation, request: &RequestView) -> Option<Finding> {
    let security = op.security.as_ref()?;
    let mut sent = Sent::of(request);
    sent.token_parameter = token_parameter(op, &sent);
    let carried = |alternative: &Vec<Scheme>| alternative.iter().all(|s| sent.carries(s));
    let mut finding =
        (!security.alternatives.iter().any(carried)).then(|| finding(security, &sent))?;
    finding.operation = Some(op.id.as_str().into());
    Some(finding)
}

/// Whether the request sends a required `token` or `access_token` parameter the operation
/// declares: the OAuth token as Slack's spec has it on every method (its API reads either).
fn token_parameter(op: &Operation, sent: &Sent) -> bool {
    (op.params.iter())
        .filter(|p| p.required && ["token", "access_token"].contains(&p.name.as_str()))
        .filter(|p| matches!(p.location, Location::Query | Location::Header))
        .any(|p| sent.has(p.location, &p.name, false))
}

fn finding(security: &Security, sent: &Sent) -> Finding {
    let (location, field) = place(&security.alternatives[0][0]);
    let expected = accepted(security);
    let observed = sent.describe(security);
    Finding::new(Kind::MissingCredentials, location, field)
        .message(format!(
            "the request carries no credential the spec accepts for it: it asks for {expected}; \
             it sent {observed}, and the API will refuse it (401 or 403)"
        ))
        .expected(expected)
        .observed(observed)
}

/// Where a scheme's credential travels, and under which name.
fn place(scheme: &Scheme) -> (Location, &str) {
    match scheme {
        Scheme::ApiKey(Credential { location, name }) => (*location, name),
        _ => (Location::Header, "authorization"),
    }
}

/// `Authorization: Bearer, or header x-api-key`: the alternatives, each scheme of one joined
/// by `and`.
fn accepted(security: &Security) -> String {
    let mut out: Vec<String> = (security.alternatives.iter().take(NAMED))
        .map(|alternative| {
            let each: Vec<String> = alternative.iter().map(named).collect();
            each.join(" and ")
        })
        .collect();
    if security.alternatives.len() > NAMED {
        out.push("…".into());
    }
    out.join(", or ")
}

fn named(scheme: &Scheme) -> String {
    match scheme {
        Scheme::Bearer { query: false } => "Authorization: Bearer".into(),
        Scheme::Bearer { query: true } => {
            "Authorization: Bearer (or access_token in the query)".into()
        }
        Scheme::Http(name) => format!("Authorization: {}", capitalized(name)),
        Scheme::ApiKey(c) => format!("{} {}", where_(c.location), c.name),
    }
}

fn where_(location: Location) -> &'static str {
    match location {
        Location::Query => "query",
        Location::Cookie => "cookie",
        _ => "header",
    }
}

fn capitalized(name: &str) -> String {
    let mut chars = name.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_ascii_uppercase().to_string() + chars.as_str()
    })
}

/// What a request carries that could be a credential. The query and the cookies are read
/// where a scheme asks for them, allocating nothing: most secured requests carry a bearer
/// token, found by the first word of `Authorization` alone.
struct Sent<'r> {
    /// The first word of `Authorization`, if any.
    authorization: Option<&'r str>,
    request: &'r RequestView<'r>,
    /// It sends the OAuth token as the operation's own parameter ([`token_parameter`]).
    token_parameter: bool,
}

impl<'r> Sent<'r> {
    fn of(request: &'r RequestView<'r>) -> Sent<'r> {
        let authorization = (request.headers.get("authorization"))
            .map(|value| value.split_ascii_whitespace().next().unwrap_or(""));
        Sent {
            authorization,
            request,
            token_parameter: false,
        }
    }

    fn carries(&self, scheme: &Scheme) -> bool {
        match scheme {
            Scheme::Bearer { query } => {
                self.authorized_by("bearer")
                    || (*query && (self.in_query("access_token") || self.token_parameter))
            }
            Scheme::Http(name) => self.authorized_by(name),
            Scheme::ApiKey(Credential { location, name }) => self.has(*location, name, false),
        }
    }

    fn authorized_by(&self, scheme: &str) -> bool {
        self.authorization
            .is_some_and(|word| word.eq_ignore_ascii_case(scheme))
    }

    fn in_query(&self, name: &str) -> bool {
        self.has(Location::Query, name, false)
    }

    /// The query's keys, percent-decoded (borrowed unless escaped).
    fn query_keys(&self) -> impl Iterator<Item = Cow<'r, str>> {
        (self.request.query.unwrap_or("").split('&'))
            .filter(|pair| !pair.is_empty())
            .map(|pair| pair.split_once('=').map_or(pair, |(key, _)| key))
            .map(|key| percent_encoding::percent_decode_str(key).decode_utf8_lossy())
    }

    fn cookie_names(&self) -> impl Iterator<Item = &'r str> {
        (self.request.headers.get("cookie").unwrap_or("").split(';'))
            .filter_map(|pair| pair.split_once('=').map(|(name, _)| name.trim()))
    }

    /// Whether `name` is sent in `location`; `loose`: whatever its case (to say where a key
    /// went that the spec puts elsewhere). Header names are the contract's, lowercase already;
    /// a query or cookie key looked for among the headers is lowered here.
    fn has(&self, location: Location, name: &str, loose: bool) -> bool {
        let same = |key: &str| key == name || (loose && key.eq_ignore_ascii_case(name));
        match location {
            Location::Query => self.query_keys().any(|key| same(&key)),
            Location::Cookie => self.cookie_names().any(same),
            _ => {
                let lower = match name.bytes().any(|b| b.is_ascii_uppercase()) {
                    true => Cow::Owned(name.to_ascii_lowercase()),
                    false => Cow::Borrowed(name),
                };
                self.request.headers.get(&lower).is_some()
            }
        }
    }

    /// What was sent, by kind and place: `Authorization: Basic`, `x-api-key in the query`,
    /// or `no credential`.
    fn describe(&self, security: &Security) -> String {
        let mut out: Vec<String> = Vec::new();
        if let Some(word) = self.authorization {
            out.push(
                match KNOWN_SCHEMES.iter().find(|s| s.eq_ignore_ascii_case(word)) {
                    Some(scheme) => format!("Authorization: {scheme}"),
                    None => "an Authorization header without a known scheme".into(),
                },
            );
        }
        let keys = security.alternatives.iter().flatten();
        for key in keys.filter_map(|s| match s {
            Scheme::ApiKey(c) => Some(c),
            _ => None,
        }) {
            let elsewhere = [Location::Header, Location::Query, Location::Cookie]
                .into_iter()
                .filter(|l| *l != key.location)
                .find(|l| self.has(*l, &key.name, true));
            if let Some(place) = elsewhere {
                let said = format!("{} in the {}", key.name, where_(place));
                if !out.contains(&said) {
                    out.push(said);
                }
            }
        }
        if self.authorization.is_none() && self.in_query("access_token") {
            out.push("access_token in the query".into());
        }
        match out.is_empty() {
            true => "no credential".into(),
            false => out.join(", "),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::contract::{Contract, ContractOptions};
    use crate::request::RequestView;
    use crate::spec::Spec;
    use serde_json::json;

    fn contract(options: ContractOptions) -> Contract {
        let doc = json!({"openapi": "3.1.0",
            "security": [{"bearer": []}, {"key": []}],
            "components": {"securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "key": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "basic": {"type": "http", "scheme": "basic"},
                "oauth": {"type": "oauth2", "flows": {}},
                "tls": {"type": "mutualTLS"},
                "qkey": {"type": "apiKey", "in": "query", "name": "api_key"},
                "sid": {"type": "apiKey", "in": "cookie", "name": "sid"}}},
            "paths": {
                "/private": {"get": {"operationId": "private", "responses": {}}},
                "/public": {"get": {"operationId": "public", "security": [], "responses": {}}},
                "/optional": {"get": {"operationId": "optional", "responses": {},
                    "security": [{}, {"bearer": []}]}},
                "/both": {"get": {"operationId": "both", "responses": {},
                    "security": [{"basic": [], "qkey": []}]}},
                "/oauth": {"get": {"operationId": "oauth", "responses": {},
                    "security": [{"oauth": []}]}},
                "/cookie": {"get": {"operationId": "cookie", "responses": {},
                    "security": [{"sid": []}]}},
                "/tls": {"get": {"operationId": "tls", "responses": {},
                    "security": [{"tls": []}]}},
                "/undeclared": {"get": {"operationId": "undeclared", "responses": {},
                    "security": [{"nowhere": []}]}}}});
        let spec = Spec::from_document(std::path::Path::new("t.json"), doc).unwrap();
        Contract::compile(&spec, &options).unwrap()
    }

    /// `(observed)` of the `missing_credentials` finding, or `None` where there is none.
    fn missing(c: &Contract, target: &str, headers: &[(&str, &str)]) -> Option<String> {
        let headers: Vec<(String, String)> = (headers.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let view = RequestView::new("GET", target, &headers, None);
        let findings = crate::audit::audit(c, &view).findings;
        let kinds: Vec<_> = findings.iter().map(|f| f.kind.as_str()).collect();
        let found = findings
            .into_iter()
            .find(|f| f.kind == crate::finding::Kind::MissingCredentials)?;
        // A key sent in the query where the spec says header is also a key the API ignores.
        let expected: &[&str] = match target.contains("X-API-Key") {
            true => &["unknown_query_param", "missing_credentials"],
            false => &["missing_credentials"],
        };
        assert_eq!(kinds, expected, "{target}");
        Some(found.observed.unwrap().to_string())
    }

    #[test]
    fn a_request_without_a_credential_its_operation_accepts_is_told_what_it_sent() {
        let c = contract(ContractOptions::default());
        let none = missing(&c, "/private", &[]).unwrap();
        assert_eq!(none, "no credential");
        let query = missing(&c, "/private?X-API-Key=s3cret", &[]).unwrap();
        assert_eq!(query, "x-api-key in the query");
        let basic = missing(&c, "/private", &[("Authorization", "Basic dTpw")]);
        assert_eq!(basic.as_deref(), Some("Authorization: Basic"));
        // A token without a scheme is never echoed.
        let bare = missing(&c, "/private", &[("Authorization", "sk-s3cret")]).unwrap();
        assert!(!bare.contains("s3cret"), "{bare}");
        // Either alternative does; the public and the optional operations need none.
        assert_eq!(
            missing(&c, "/private", &[("authorization", "bearer t")]),
            None
        );
        assert_eq!(missing(&c, "/private", &[("x-api-key", "k")]), None);
        assert_eq!(missing(&c, "/public", &[]), None);
        assert_eq!(missing(&c, "/optional", &[]), None);
        // Both schemes of one alternative are needed.
        let half = missing(&c, "/both", &[("Authorization", "Basic dTpw")]);
        assert_eq!(half.as_deref(), Some("Authorization: Basic"));
        let whole = [("Authorization", "Basic dTpw")];
        assert_eq!(missing(&c, "/both?api_key=k", &whole), None);
        // OAuth 2 takes the token in the query too (RFC 6750 §2.3); a cookie key by name.
        assert_eq!(missing(&c, "/oauth?access_token=t", &[]), None);
        assert_eq!(missing(&c, "/cookie", &[("Cookie", "a=1; sid=s")]), None);
        assert_eq!(
            missing(&c, "/cookie", &[("Cookie", "a=1")]).as_deref(),
            Some("no credential")
        );
        // What a proxy cannot see, or the spec does not declare, is not checked.
        assert_eq!(missing(&c, "/tls", &[]), None);
        assert_eq!(missing(&c, "/undeclared", &[]), None);
    }

    #[test]
    fn the_finding_names_what_the_spec_accepts_and_can_be_turned_off() {
        let c = contract(ContractOptions::default());
        let none: Vec<(String, String)> = Vec::new();
        let view = RequestView::new("GET", "/private", &none, None);
        let f = &crate::audit::audit(&c, &view).findings[0];
        assert_eq!(f.severity, crate::finding::Severity::Error);
        assert_eq!(
            (f.location.as_str(), f.field.as_str()),
            ("header", "authorization")
        );
        assert_eq!(
            f.expected.as_deref(),
            Some("Authorization: Bearer, or header x-api-key")
        );
        let off = contract(ContractOptions {
            credentials: false,
            ..ContractOptions::default()
        });
        assert!(crate::audit::audit(&off, &view).findings.is_empty());
    }
}
