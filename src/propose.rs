//! `driftwatch overlay propose`: an OpenAPI Overlay that would declare what the API has shown,
//! in the sidecar's events, that it accepts and returns, where its spec is silent: a query
//! parameter sent to several operations, an endpoint no template fits, a top-level response
//! field every answer carried; each only when the API answered 2xx and never refused it
//! (`propose/actions.rs`). The events' names are a client's text: only those a parameter, path,
//! method or field could have are proposed (`propose/names.rs`), and each is written as a quoted
//! value, never into a comment (`propose/yaml.rs`). Pure: text in, text out; nothing is applied
//! until the operator names the file.

mod actions;
mod names;
mod template;
mod yaml;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

pub use yaml::{Unreadable, written};

/// How much evidence an action needs. The defaults fit a session of a few hundred requests
/// (issue 66: an agent's 160 requests proposed nothing at the former `min_operations` of 2, as
/// a tool's parameter reaches one operation): two 2xx answers, never one lucky request.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// 2xx answers at least, for any action.
    pub min_requests: usize,
    /// Operations at least a query parameter was sent to (raise it to propose only global
    /// parameters: one operation's unknown parameter may be one the API ignores).
    pub min_operations: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            min_requests: 2,
            min_operations: 1,
        }
    }
}

/// Bytes of a time or request id kept as evidence (as metric labels are cut): a client's
/// 60 KB `x-request-id` is not copied into the proposal.
const MAX_EVIDENCE: usize = 256;

/// Where and when something was seen.
#[derive(Clone, Debug, Default)]
struct Seen {
    requests: usize,
    first: String,
    last: String,
    request_id: String,
    last_request_id: String,
    /// How many requests sent it as each JSON type (a query parameter's finding says it in
    /// `observed`): what its proposed type rests on.
    sent_as: BTreeMap<String, usize>,
}

/// The types a finding's `observed` may say a query value was sent as.
const TYPES: [&str; 4] = ["boolean", "integer", "number", "string"];

impl Seen {
    /// One more; the example is the earliest request (the least id among those at one
    /// time), and the latest beside it, so events read in any order give the same evidence.
    fn add(&mut self, at: &str, request_id: &str) {
        let (at, request_id) = (cut(at), cut(request_id));
        self.merge(&Seen {
            requests: 1,
            first: at.clone(),
            last: at,
            request_id: request_id.clone(),
            last_request_id: request_id,
            sent_as: BTreeMap::new(),
        });
    }

    /// `other`'s requests counted here too.
    fn merge(&mut self, other: &Seen) {
        let first = (&other.first, &other.request_id) < (&self.first, &self.request_id);
        if self.requests == 0 || first {
            (self.first, self.request_id) = (other.first.clone(), other.request_id.clone());
        }
        let last = (&other.last, &other.last_request_id) > (&self.last, &self.last_request_id);
        if self.requests == 0 || last {
            self.last = other.last.clone();
            self.last_request_id = other.last_request_id.clone();
        }
        self.requests += other.requests;
        for (kind, n) in &other.sent_as {
            *self.sent_as.entry(kind.clone()).or_default() += n;
        }
    }

    /// The JSON type every request that said one sent (an integer and a number: `number`; any
    /// two others: `string`); `None` when no event said (events of an older sidecar).
    fn sent_type(&self) -> Option<&'static str> {
        let sent = |kinds: &[&str]| self.sent_as.keys().all(|k| kinds.contains(&k.as_str()));
        match () {
            _ if self.sent_as.is_empty() => None,
            _ if sent(&["boolean"]) => Some("boolean"),
            _ if sent(&["integer"]) => Some("integer"),
            _ if sent(&["integer", "number"]) => Some("number"),
            _ => Some("string"),
        }
    }

    /// The counts, the times and the request ids, from traffic: values of
    /// `x-driftwatch-evidence`.
    fn evidence(&self) -> Value {
        let mut evidence = json!({"requests": self.requests, "first": self.first,
            "last": self.last, "request_id": self.request_id,
            "last_request_id": self.last_request_id});
        if !self.sent_as.is_empty() {
            evidence["sent_as"] = json!(self.sent_as);
        }
        evidence
    }
}

/// `text` within `MAX_EVIDENCE` bytes, a cut one ending in `…`.
fn cut(text: &str) -> String {
    if text.len() <= MAX_EVIDENCE {
        return text.to_string();
    }
    let end = (0..=MAX_EVIDENCE - 3)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}…", &text[..end])
}

/// An operation: its method (lowercase) and template.
type Op = (String, String);

/// The events, tallied.
#[derive(Default)]
pub struct Tally {
    pub events: usize,
    /// Findings not proposed because what they name cannot be a parameter name, a path, a
    /// method or a field name: the summary line counts them.
    pub unfit: usize,
    params: BTreeMap<String, BTreeMap<Op, Seen>>,
    rejected: BTreeSet<String>,
    endpoints: BTreeMap<Op, Seen>,
    /// (operation, status) → field → seen; and how many answers had response findings.
    fields: BTreeMap<(Op, String), BTreeMap<String, Seen>>,
    answers: BTreeMap<(Op, String), usize>,
}

/// One proposed action.
#[derive(Clone, Debug, PartialEq)]
pub struct Action {
    /// What the operator reads above the action: fixed words and numbers, nothing from traffic.
    pub comment: String,
    pub target: String,
    pub update: Value,
    /// What it was seen on (the first and last time, the earliest request id: a client's text),
    /// written as the action's `x-driftwatch-evidence`.
    pub evidence: Value,
}

/// A line of the events that is not JSON.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: not an event (JSON): {source}")]
pub struct NotAnEvent {
    pub line: usize,
    source: serde_json::Error,
}

impl Tally {
    /// The events in `text` tallied: a `/findings` answer (`{"events": [...]}`) or one event a
    /// line, as `events.output` writes them.
    pub fn read(text: &str) -> Result<Tally, NotAnEvent> {
        let mut tally = Tally::default();
        if let Ok(Value::Object(mut whole)) = serde_json::from_str::<Value>(text)
            && let Some(Value::Array(events)) = whole.remove("events")
        {
            events.iter().for_each(|e| tally.add(e));
            return Ok(tally);
        }
        let lines = (text.lines().enumerate()).filter(|(_, l)| !l.trim().is_empty());
        for (i, line) in lines {
            let event = serde_json::from_str(line).map_err(|source| NotAnEvent {
                line: i + 1,
                source,
            })?;
            tally.add(&event);
        }
        Ok(tally)
    }

    /// Count one event (as the sidecar writes it, or as `/findings` lists it).
    pub fn add(&mut self, event: &Value) {
        self.events += 1;
        let text = |k: &str| event.get(k).and_then(Value::as_str).unwrap_or_default();
        let status = event.get("status").and_then(Value::as_u64).unwrap_or(0);
        let (at, id) = (text("timestamp"), text("request_id"));
        let ok = (200..300).contains(&status);
        let method = names::method(text("method"));
        let op = (
            method.unwrap_or_default().to_string(),
            text("path_template").to_string(),
        );
        let findings = event.get("findings").and_then(Value::as_array);
        let mut answered = false;
        for f in findings.into_iter().flatten() {
            let field = f.get("field").and_then(Value::as_str).unwrap_or_default();
            let fit = match f.get("kind").and_then(Value::as_str).unwrap_or_default() {
                "unknown_query_param" if f.get("suggestion").is_some_and(|s| !s.is_null()) => true,
                "unknown_query_param" if matches!(status, 400 | 422) => {
                    self.rejected.insert(field.to_string());
                    true
                }
                "unknown_query_param" if ok && !op.1.is_empty() => {
                    let fit = method.is_some() && names::parameter(field);
                    if fit {
                        let ops = self.params.entry(field.to_string()).or_default();
                        let seen = ops.entry(op.clone()).or_default();
                        seen.add(at, id);
                        let observed = f.get("observed").and_then(Value::as_str);
                        if let Some(kind) = observed.filter(|k| TYPES.contains(k)) {
                            *seen.sent_as.entry(kind.to_string()).or_default() += 1;
                        }
                    }
                    fit
                }
                "unknown_operation" if ok => {
                    let path = text("path");
                    let fit = method.is_some() && names::path(path);
                    if fit {
                        let shape = (op.0.clone(), path.to_string());
                        self.endpoints.entry(shape).or_default().add(at, id);
                    }
                    fit
                }
                "undeclared_response_field" if ok && !op.1.is_empty() => {
                    answered = true;
                    self.response_field(&op, status, field, (at, id))
                }
                _ if ok && f.get("location").and_then(Value::as_str) == Some("response") => {
                    answered = true;
                    true
                }
                _ => true,
            };
            self.unfit += usize::from(!fit);
        }
        if answered {
            *self.answers.entry((op, status.to_string())).or_default() += 1;
        }
    }

    /// A top-level field an answer carried undeclared; a nested one is not proposed (nor
    /// unfit), one whose name no field could have is unfit (false).
    fn response_field(&mut self, op: &Op, status: u64, pointer: &str, seen: (&str, &str)) -> bool {
        let Some(token) = pointer.strip_prefix('/').filter(|t| !t.contains('/')) else {
            return true;
        };
        let Some(name) = names::field(token).filter(|_| !op.0.is_empty()) else {
            return false;
        };
        let fields = self.fields.entry((op.clone(), status.to_string()));
        let seen_here = fields.or_default().entry(name).or_default();
        seen_here.add(seen.0, seen.1);
        true
    }

    /// The requests to endpoints outside every base path of `doc` (another API's on the same
    /// host, as Keycloak's token endpoint is beside its admin API): never proposed into it.
    pub fn outside(&self, doc: &Value) -> usize {
        let bases = crate::contract::BasePaths::new(doc, None);
        let each = self.endpoints.iter();
        let outside = each.filter(|((_, path), _)| template::relative(&bases, path).is_none());
        outside.map(|(_, seen)| seen.requests).sum()
    }

    /// The actions the tally supports, against `doc` (the spec as read, which the overlay will
    /// be applied to): parameters, then endpoints, then response fields, each sorted.
    pub fn propose(&self, doc: &Value, o: Options) -> Vec<Action> {
        let mut actions = self.parameters(doc, o);
        actions.extend(self.endpoints(doc, o));
        actions.extend(self.response_fields(doc, o));
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::yaml::{document, render};
    use super::*;

    pub(super) fn event(method: &str, template: &str, status: u16, findings: Value) -> Value {
        json!({"timestamp": "2026-12-06T10:00:00Z", "request_id": "r1", "method": method,
               "path_template": template, "path": template, "status": status, "findings": findings})
    }

    pub(super) fn unknown(name: &str, suggestion: Option<&str>) -> Value {
        json!({"kind": "unknown_query_param", "field": name, "location": "query", "suggestion": suggestion})
    }

    #[test]
    fn a_parameter_is_proposed_where_the_api_took_it_twice_and_never_where_it_refused_it() {
        let mut t = Tally::default();
        for template in ["/a", "/b"] {
            t.add(&event(
                "GET",
                template,
                200,
                json!([unknown("page", None), unknown("sort_by", None)]),
            ));
            t.add(&event(
                "GET",
                template,
                200,
                json!([unknown("customer_id", Some("customerId"))]),
            ));
        }
        t.add(&event(
            "GET",
            "/a",
            200,
            json!([unknown("page", None), unknown("only_here", None)]),
        ));
        t.add(&event(
            "GET",
            "/a",
            200,
            json!([unknown("only_here", None)]),
        ));
        t.add(&event("GET", "/b", 400, json!([unknown("sort_by", None)])));
        t.add(&event("GET", "/gone", 200, json!([unknown("page", None)])));
        let doc = json!({"paths": {"/a": {"get": {}}, "/b": {"get": {}}}});
        let actions = t.propose(&doc, Options::default());
        let targets: Vec<(&str, &Value)> = actions
            .iter()
            .map(|a| (a.target.as_str(), &a.update["parameters"][0]["name"]))
            .collect();
        assert_eq!(
            targets,
            [
                ("$.paths['/a'].get", &json!("only_here")),
                ("$.paths['/a'].get", &json!("page")),
                ("$.paths['/b'].get", &json!("page"))
            ],
            "not /gone, which the spec has not; not sort_by, refused once"
        );
        assert!(
            (actions[1].comment).contains("sent on 4 requests of 3 operation(s)"),
            "{}",
            actions[1].comment
        );
        assert_eq!(t.unfit, 0);
    }

    /// A finding as the sidecar writes it: with the type its values were sent as.
    fn sent(name: &str, observed: &str) -> Value {
        let mut f = unknown(name, None);
        f["observed"] = json!(observed);
        f
    }

    /// An event `n` (its request id `r{n}`, at second `n`).
    fn nth(mut e: Value, n: usize) -> Value {
        e["request_id"] = json!(format!("r{n:03}"));
        e["timestamp"] = json!(format!("2026-12-06T10:{:02}:{:02}Z", n / 60, n % 60));
        e
    }

    /// Issue 66: on a short session a tool's parameter reaches one operation; twice answered
    /// 2xx is enough at the defaults, once never is, and the evidence says the counts.
    #[test]
    fn a_parameter_seen_twice_on_one_operation_is_proposed_at_the_defaults_and_once_is_not() {
        let doc = json!({"paths": {"/users": {"get": {}}, "/groups": {"get": {}}}});
        let mut t = Tally::default();
        for n in 0..3 {
            let e = event("GET", "/users", 200, json!([sent("brief", "boolean")]));
            t.add(&nth(e, n));
        }
        let once = event("GET", "/groups", 200, json!([sent("lucky", "string")]));
        t.add(&nth(once, 9));
        let actions = t.propose(&doc, Options::default());
        let named: Vec<(&str, &Value)> = (actions.iter())
            .map(|a| (a.target.as_str(), &a.update["parameters"][0]["name"]))
            .collect();
        assert_eq!(named, [("$.paths['/users'].get", &json!("brief"))]);
        let evidence = &actions[0].evidence;
        assert_eq!(
            (
                &evidence["requests"],
                &evidence["operations"],
                &evidence["sent_as"]
            ),
            (&json!(3), &json!(1), &json!({"boolean": 3})),
            "{evidence}"
        );
        assert_eq!(
            (&evidence["request_id"], &evidence["last_request_id"]),
            (&json!("r000"), &json!("r002"))
        );
    }

    /// Issue 66: a boolean argument sent as `?flag=true` is proposed `boolean`, not `string`;
    /// a type is declared only when every value sent had it, and none when no event says.
    #[test]
    fn a_parameter_is_typed_as_it_was_sent() {
        let doc = json!({"paths": {"/a": {"get": {}}}});
        let mut t = Tally::default();
        let sends = [
            ("flag", "boolean"),
            ("flag", "boolean"),
            ("max", "integer"),
            ("max", "integer"),
            ("ratio", "integer"),
            ("ratio", "number"),
            ("q", "integer"),
            ("q", "string"),
        ];
        for (n, (name, observed)) in sends.iter().enumerate() {
            t.add(&nth(
                event("GET", "/a", 200, json!([sent(name, observed)])),
                n,
            ));
        }
        for n in 0..2 {
            t.add(&nth(
                event("GET", "/a", 200, json!([unknown("old", None)])),
                n,
            ));
        }
        let got: Vec<(Value, Value)> = (t.propose(&doc, Options::default()).iter())
            .map(|a| &a.update["parameters"][0])
            .map(|p| (p["name"].clone(), p["schema"].clone()))
            .collect();
        let expected = [
            ("flag", json!({"type": "boolean"})),
            ("max", json!({"type": "integer"})),
            ("old", json!({})),
            ("q", json!({"type": "string"})),
            ("ratio", json!({"type": "number"})),
        ];
        let expected: Vec<(Value, Value)> =
            (expected.into_iter()).map(|(n, s)| (json!(n), s)).collect();
        assert_eq!(got, expected);
    }

    /// Names, ids and times from traffic holding YAML's every line break, quotes, `#`, `: `
    /// and a document marker.
    const HOSTILE: &[&str] = &[
        "p\r  - target: $.paths.*\r    remove: true\r  #",
        "nel\u{85}  - target: $.paths.*",
        "ls\u{2028}  - target: $.paths.*",
        "ps\u{2029}  - target: $.paths.*",
        "lf\n  - target: $.paths.*",
        "q\"uote'd",
        "hash # mark",
        "key: value",
        "--- x",
        "del\u{7f}c1\u{9f}bom\u{feff}",
    ];

    #[test]
    fn the_proposal_read_back_is_exactly_the_actions_whatever_traffic_holds() {
        let doc = json!({"paths": {"/a": {"get": {}}, "/b": {"get": {}}}});
        let mut t = Tally::default();
        let mut findings: Vec<Value> = HOSTILE.iter().map(|n| unknown(n, None)).collect();
        findings.push(unknown("page", None));
        findings.push(unknown("---", None));
        for template in ["/a", "/b"] {
            for hostile in HOSTILE {
                let mut e = event("GET", template, 200, json!(findings));
                e["request_id"] = json!(hostile);
                e["timestamp"] = json!(hostile);
                t.add(&e);
            }
        }
        let actions = t.propose(&doc, Options::default());
        let source = "events\r- target: $";
        let text = render(&actions, source, t.events);
        let read: Value = yaml_serde::from_str(&text).unwrap();
        assert_eq!(read, document(&actions, source, t.events), "{text}");
        let names: Vec<&Value> = (actions.iter())
            .map(|a| &a.update["parameters"][0]["name"])
            .collect();
        assert_eq!(
            names,
            [&json!("---"), &json!("---"), &json!("page"), &json!("page")]
        );
        assert_eq!(
            t.unfit,
            2 * HOSTILE.len() * HOSTILE.len(),
            "each unfit name, each event"
        );
        let evidence = &read["actions"][0]["x-driftwatch-evidence"];
        let earliest = HOSTILE.iter().min().unwrap();
        assert_eq!(evidence["request_id"], json!(earliest), "{text}");
        let comments = text.lines().filter(|l| l.trim_start().starts_with('#'));
        let traffic: Vec<&str> = comments
            .filter(|l| l.contains("target") || l.contains("---") || l.contains("page"))
            .collect();
        assert!(traffic.is_empty(), "{traffic:#?}");
    }

    #[test]
    fn evidence_is_cut_and_a_method_or_path_no_api_has_is_unfit() {
        let mut t = Tally::default();
        let long = "é".repeat(MAX_EVIDENCE);
        let get = json!([{"kind": "unknown_operation", "field": "/x", "location": "path"}]);
        for (method, path) in [
            ("GET", "/x"),
            ("GET", "/x"),
            ("PROPFIND", "/x"),
            ("GET", "/x y"),
        ] {
            let mut e = event(method, "", 200, get.clone());
            e["path"] = json!(path);
            e["request_id"] = json!(long);
            t.add(&e);
        }
        assert_eq!(t.unfit, 2);
        let actions = t.propose(&json!({}), Options::default());
        let id = actions[0].evidence["request_id"].as_str().unwrap();
        assert!(id.len() <= MAX_EVIDENCE && id.ends_with('…'), "{id}");
        assert_eq!(actions.len(), 1);
    }
}
