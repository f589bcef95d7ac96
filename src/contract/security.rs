//! Security schemes are part of the contract: an `apiKey` scheme (`in: query`, `header` or
//! `cookie`) that an operation's effective `security` can use is a declared input of that
//! operation, never an unknown parameter. Every apiKey name of the spec is also a secret: its
//! values are kept out of events, findings and logs whatever `log_values` says.

use serde_json::Value;

use super::resolve::deref;
use crate::finding::Location;

/// An apiKey credential an operation accepts: where it is sent and under which name (header
/// names lowercase).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    pub location: Location,
    pub name: String,
}

/// What one scheme of a security requirement asks a request to carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// `Authorization: Bearer …`: an HTTP bearer scheme, or OAuth 2 and OpenID Connect, whose
    /// token may also travel as `access_token` in the query (RFC 6750 §2.3): `query`.
    Bearer { query: bool },
    /// `Authorization: <scheme> …` of another HTTP scheme (`basic`, `digest`), lowercase.
    Http(String),
    /// An apiKey, by name where the spec puts it.
    ApiKey(Credential),
}

/// What an operation's effective `security` accepts: any one alternative, each needing every
/// scheme it names. An operation without one (no `security`, `security: []`, an empty
/// alternative `{}`, or a scheme a proxy cannot see or the spec does not declare) has none:
/// it needs no credential that can be checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Security {
    pub alternatives: Vec<Vec<Scheme>>,
}

/// The security `op` needs, if any can be checked: see [`Security`].
pub(super) fn security(doc: &Value, op: &Value) -> Option<Security> {
    let requirements = effective(doc, op)?;
    let mut alternatives = Vec::with_capacity(requirements.len());
    for requirement in requirements {
        let schemes: Option<Vec<Scheme>> = (requirement.as_object()?.keys())
            .map(|name| declared(doc, name).and_then(|s| scheme(doc, s)))
            .collect();
        match schemes? {
            empty if empty.is_empty() => return None,
            schemes => alternatives.push(schemes),
        }
    }
    (!alternatives.is_empty()).then_some(Security { alternatives })
}

/// `op`'s effective security requirements: its own `security`, else the document's.
fn effective<'d>(doc: &'d Value, op: &'d Value) -> Option<&'d Vec<Value>> {
    op.get("security")
        .or_else(|| doc.get("security"))?
        .as_array()
}

/// The scheme the spec declares under `name` in `components.securitySchemes`, as declared.
fn declared<'d>(doc: &'d Value, name: &str) -> Option<&'d Value> {
    doc.pointer("/components/securitySchemes")?.get(name)
}

/// One declared scheme, or `None` where a proxy cannot check it (`mutualTLS`, an unknown type).
fn scheme(doc: &Value, declared: &Value) -> Option<Scheme> {
    let declared = deref(doc, declared);
    match declared.get("type").and_then(Value::as_str)? {
        "apiKey" => api_key(doc, declared).map(Scheme::ApiKey),
        "oauth2" | "openIdConnect" => Some(Scheme::Bearer { query: true }),
        "http" => match declared.get("scheme").and_then(Value::as_str)? {
            s if s.eq_ignore_ascii_case("bearer") => Some(Scheme::Bearer { query: false }),
            s => Some(Scheme::Http(s.to_ascii_lowercase())),
        },
        _ => None,
    }
}

/// The names under which the spec's apiKey credentials travel, to redact wherever a request is
/// written down.
#[derive(Clone, Debug, Default)]
pub struct Secrets {
    /// Query parameter names (as declared).
    pub query: Vec<String>,
    /// Header names, lowercase.
    pub headers: Vec<String>,
    /// Cookie names.
    pub cookies: Vec<String>,
}

impl Secrets {
    /// Every apiKey scheme of the document, used or not.
    pub(super) fn of(doc: &Value) -> Secrets {
        let mut secrets = Secrets::default();
        for credential in schemes(doc).filter_map(|(_, s)| api_key(doc, s)) {
            let list = match credential.location {
                Location::Query => &mut secrets.query,
                Location::Header => &mut secrets.headers,
                _ => &mut secrets.cookies,
            };
            if !list.contains(&credential.name) {
                list.push(credential.name);
            }
        }
        secrets
    }

    /// `query` with the value of every secret parameter replaced by `REDACTED` (keys kept, so
    /// an incident responder still sees that a credential was sent).
    pub fn redact_query(&self, query: &str) -> String {
        if self.query.is_empty() {
            return query.to_string();
        }
        query
            .split('&')
            .map(|pair| {
                let key = pair.split_once('=').map_or(pair, |(k, _)| k);
                let decoded = percent_encoding::percent_decode_str(key).decode_utf8_lossy();
                match self.query.iter().any(|s| *s == decoded) {
                    true => format!("{key}=REDACTED"),
                    false => pair.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join("&")
    }

    pub fn is_secret_header(&self, name: &str) -> bool {
        self.headers.iter().any(|h| h.eq_ignore_ascii_case(name))
    }
}

/// The apiKey credentials `op` accepts under its effective `security` (its own, else the
/// document's; `security: []` accepts none).
pub(super) fn credentials(doc: &Value, op: &Value) -> Vec<Credential> {
    let mut out: Vec<Credential> = Vec::new();
    for credential in accepted(doc, op).filter_map(|s| api_key(doc, s)) {
        if !out.contains(&credential) {
            out.push(credential);
        }
    }
    out
}

/// The schemes `op`'s effective `security` names (`security: []` names none), each as
/// declared.
fn accepted<'d>(doc: &'d Value, op: &'d Value) -> impl Iterator<Item = &'d Value> {
    (effective(doc, op).into_iter().flatten())
        .filter_map(Value::as_object)
        .flat_map(|r| r.keys())
        .filter_map(move |name| declared(doc, name))
}

/// Whether `op`'s effective `security` takes a bearer token in `Authorization` (an OAuth 2,
/// OpenID Connect or HTTP bearer scheme).
pub(super) fn bearer(doc: &Value, op: &Value) -> bool {
    accepted(doc, op).map(|s| deref(doc, s)).any(|scheme| {
        let kind = scheme.get("type").and_then(Value::as_str);
        let http = scheme.get("scheme").and_then(Value::as_str);
        matches!(kind, Some("oauth2" | "openIdConnect"))
            || (kind == Some("http") && http.is_some_and(|s| s.eq_ignore_ascii_case("bearer")))
    })
}

fn schemes(doc: &Value) -> impl Iterator<Item = (&String, &Value)> {
    doc.pointer("/components/securitySchemes")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

fn api_key(doc: &Value, scheme: &Value) -> Option<Credential> {
    let scheme = deref(doc, scheme);
    if scheme.get("type").and_then(Value::as_str) != Some("apiKey") {
        return None;
    }
    let name = scheme.get("name").and_then(Value::as_str)?;
    let location = match scheme.get("in").and_then(Value::as_str)? {
        "query" => Location::Query,
        "header" => Location::Header,
        "cookie" => Location::Cookie,
        _ => return None,
    };
    Some(Credential {
        name: match location {
            Location::Header => name.to_ascii_lowercase(),
            _ => name.to_string(),
        },
        location,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn effective_security_decides_which_keys_an_operation_accepts() {
        let doc = json!({
            "security": [{"key": []}],
            "components": {"securitySchemes": {
                "key": {"type": "apiKey", "in": "query", "name": "api_key"},
                "hdr": {"type": "apiKey", "in": "header", "name": "X-Token"},
                "basic": {"type": "http", "scheme": "basic"}
            }}
        });
        let query = Credential {
            location: Location::Query,
            name: "api_key".into(),
        };
        assert_eq!(credentials(&doc, &json!({})), std::slice::from_ref(&query));
        assert_eq!(credentials(&doc, &json!({"security": []})), []);
        let either = json!({"security": [{"hdr": []}, {"basic": []}]});
        assert_eq!(credentials(&doc, &either)[0].name, "x-token");
        assert_eq!(credentials(&doc, &either).len(), 1);
        let secrets = Secrets::of(&doc);
        assert_eq!(
            secrets.redact_query("a=1&api_key=s3cret&b"),
            "a=1&api_key=REDACTED&b"
        );
        assert!(secrets.is_secret_header("x-token"));
    }
}
