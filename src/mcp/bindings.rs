//! What an MCP server does with each argument of a tool, learned from its own requests: the
//! argument's value found in a path segment, a query parameter or a body field says where the
//! server sends it, under which name. Servers rename (`PublicKey` goes out as `public_key`,
//! `name` as `q`), nest (`sourceBranch` as `source.branch.name`), bind path parameters
//! (`repo` fills `{repo_slug}`) and join lists (`labels` as `a,b`); a catalog check that does
//! not know it reports a defect the server's own request contradicts. Learned only from a
//! request tied to one call, and only from values that tell: not a boolean, nor a text of
//! fewer than three characters (`1`, `""`), nor a value two arguments of the call share.
//! Pure: the proxy hands it the call's arguments and the request.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Where a server sends an argument, by the name the spec knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bound {
    /// It fills this path parameter.
    Path(String),
    /// It goes out as this query parameter or top-level body field.
    Renamed(String),
    /// It is placed inside this top-level body field, which the server builds.
    Nested(String),
    /// A list joined into one string under this name.
    Joined(String),
    /// It goes out as this request header (`author_username` as `Api-Username`).
    Header(String),
    /// A path parameter, query parameter or top-level body field the server fills itself: no
    /// argument is named after it, and its value is none of the call's.
    Supplied(String),
}

/// One tool's learned bindings, in the `tools --map` vocabulary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Learned {
    pub bind: BTreeMap<String, String>,
    pub rename: BTreeMap<String, String>,
    pub nests: BTreeMap<String, String>,
    pub joins: BTreeSet<String>,
    pub supplied: BTreeSet<String>,
    /// Arguments sent as request headers.
    pub headers: BTreeSet<String>,
}

/// Arguments a tool's bindings hold at most.
const MAX_ARGUMENTS: usize = 64;
/// Bytes of a request body read to learn from.
const MAX_BODY: usize = 64 << 10;

impl Learned {
    /// Take what one request showed; an argument keeps its first binding. Whether it grew.
    pub fn take(&mut self, found: Vec<(String, Bound)>) -> bool {
        let mut grew = false;
        for (argument, bound) in found {
            if self.len() >= MAX_ARGUMENTS {
                break;
            }
            if let Bound::Supplied(field) = bound {
                grew |= self.supplied.insert(field);
                continue;
            }
            // A parameter an argument filled is not the server's, whatever another request of
            // the tool showed: supplied means in every request.
            if let Bound::Path(p) = &bound {
                grew |= self.supplied.remove(p);
            }
            if self.knows(&argument) {
                continue;
            }
            grew = true;
            match bound {
                Bound::Path(p) => self.bind.insert(argument, p),
                Bound::Renamed(name) => self.rename.insert(argument, name),
                Bound::Nested(field) => self.nests.insert(argument, field),
                Bound::Joined(name) => {
                    if name != argument {
                        self.rename.insert(argument.clone(), name);
                    }
                    self.joins.insert(argument);
                    None
                }
                Bound::Supplied(_) => None,
                Bound::Header(_) => {
                    self.headers.insert(argument);
                    None
                }
            };
        }
        grew
    }

    fn knows(&self, argument: &str) -> bool {
        self.bind.contains_key(argument)
            || self.rename.contains_key(argument)
            || self.nests.contains_key(argument)
            || self.joins.contains(argument)
            || self.headers.contains(argument)
    }

    fn len(&self) -> usize {
        self.bind.len()
            + self.rename.len()
            + self.nests.len()
            + self.joins.len()
            + self.supplied.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A call's arguments as the comparison names them: top-level ones, and the members of the
/// groups some servers take (`pathParameters`, `queryParameters`, `body`, `requestBody`).
pub fn flatten(arguments: &Value, max: usize) -> Vec<(String, Value)> {
    const GROUPS: [&str; 5] = [
        "pathParameters",
        "queryParameters",
        "headerParameters",
        "body",
        "requestBody",
    ];
    let mut out = Vec::new();
    // One object argument wrapping them all (Speakeasy's `request`): its members are the
    // arguments, as the catalog check reads them.
    if let Some(top) = arguments.as_object()
        && let [(name, inner)] = top.iter().collect::<Vec<_>>().as_slice()
        && inner.is_object()
        && !GROUPS.contains(&name.as_str())
    {
        return flatten(inner, max);
    }
    for (name, value) in arguments.as_object().into_iter().flatten() {
        match value.as_object() {
            Some(group) if GROUPS.contains(&name.as_str()) => {
                out.extend(group.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            _ => out.push((name.clone(), value.clone())),
        }
        if out.len() >= max {
            out.truncate(max);
            break;
        }
    }
    out
}

/// What a request shows: its path values by parameter name, its query pairs (decoded), its
/// JSON body.
pub struct Seen {
    path: Vec<(String, String)>,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    body: Option<Value>,
}

impl Seen {
    /// `template`'s parameters paired with `path`'s segments; a template that does not line
    /// up with the path (a parameter spanning segments) pairs none.
    pub fn of(template: &str, path_and_query: &str, body: Option<&[u8]>) -> Seen {
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let (t, p): (Vec<&str>, Vec<&str>) = (
            template.trim_end_matches('/').split('/').collect(),
            path.trim_end_matches('/').split('/').collect(),
        );
        // The request's path may carry a base path before the template.
        let skip = p.len().saturating_sub(t.len());
        let path = match p.len() >= t.len() {
            true => t
                .iter()
                .zip(&p[skip..])
                .filter_map(|(t, v)| {
                    let name = t.strip_prefix('{')?.strip_suffix('}')?;
                    Some((name.to_string(), decode(v)))
                })
                .collect(),
            false => Vec::new(),
        };
        let query = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                (decode(&k.replace('+', " ")), decode(&v.replace('+', " ")))
            })
            .collect();
        // A large body is not read again for this: its arguments were learned from smaller ones.
        let body = body
            .filter(|b| b.len() <= MAX_BODY)
            .and_then(|b| serde_json::from_slice(b).ok().or_else(|| form(b)));
        Seen {
            path,
            query,
            headers: Vec::new(),
            body,
        }
    }

    /// The request's headers too (only their values are compared; only names are kept).
    pub fn with_headers<'h>(mut self, headers: impl Iterator<Item = (&'h str, &'h str)>) -> Seen {
        self.headers = headers
            .take(64)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self
    }
}

/// An `application/x-www-form-urlencoded` body as an object of its fields (the first of a
/// repeated key), read as a JSON body's top-level fields are (Slack's and Mastodon's writes).
/// Only a body that can be one: UTF-8, at least one `key=value`, no raw whitespace (a form
/// encodes spaces as `+`).
fn form(body: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(body).ok()?;
    if !text.contains('=') || text.chars().any(char::is_whitespace) {
        return None;
    }
    let mut fields = serde_json::Map::new();
    for (k, v) in form_urlencoded::parse(body) {
        fields
            .entry(k.into_owned())
            .or_insert(Value::String(v.into_owned()));
    }
    Some(Value::Object(fields))
}

/// The text a value is compared by; `None` for one that tells nothing (a boolean, a list or
/// object, a text under three characters).
fn telling(value: &Value) -> Option<String> {
    scalar_text(value).filter(|text| !value.is_boolean() && text.chars().count() >= 3)
}

/// Where `seen` shows each argument whose value tells, and what the server called it there.
/// An argument found under its own name teaches nothing (there is nothing to map).
pub fn learn(arguments: &[(String, Value)], seen: &Seen) -> Vec<(String, Bound)> {
    let texts: Vec<(&str, Option<String>)> = arguments
        .iter()
        .map(|(name, value)| (name.as_str(), telling(value)))
        .collect();
    let shared = |text: &str| {
        texts
            .iter()
            .filter(|(_, t)| t.as_deref() == Some(text))
            .count()
            > 1
    };
    let mut out = Vec::new();
    for ((name, value), (_, text)) in arguments.iter().zip(&texts) {
        let found = match (text, value) {
            (Some(text), _) if !shared(text) => find(text, seen),
            (None, Value::Array(items)) => joined(items, seen),
            _ => None,
        };
        match found {
            Some(Bound::Path(p) | Bound::Renamed(p)) if p == *name => {}
            Some(bound) => out.push((name.clone(), bound)),
            None => {}
        }
    }
    let supplied = supplied(arguments, seen, &out);
    out.extend(supplied);
    out
}

/// What the request carries that no argument accounts for, by name or by value (`bound`: what
/// the arguments were found under): a field the server fills itself.
fn supplied(
    arguments: &[(String, Value)],
    seen: &Seen,
    bound: &[(String, Bound)],
) -> Vec<(String, Bound)> {
    let bound: BTreeSet<&str> = bound
        .iter()
        .filter_map(|(_, b)| match b {
            Bound::Renamed(r) | Bound::Nested(r) | Bound::Joined(r) => Some(r.as_str()),
            _ => None,
        })
        .collect();
    let named = |key: &str| bound.contains(key) || arguments.iter().any(|(name, _)| name == key);
    let accounts = |key: &str, value: &str| {
        named(key) || (arguments.iter()).any(|(_, v)| scalar_text(v).as_deref() == Some(value))
    };
    // An object or list the server sends whole (the record it read, edited and writes back):
    // its own unless an argument is that value or a value that tells inside it.
    let holds_an_argument = |value: &Value| {
        (arguments.iter())
            .any(|(_, v)| v == value || telling(v).is_some_and(|text| holds(value, &text, 0)))
    };
    let mut supplied = BTreeSet::new();
    // A path value no argument is (Keycloak's `{realm}`, the server's configured tenant).
    for (param, value) in &seen.path {
        if !(arguments.iter()).any(|(_, v)| scalar_text(v).as_deref() == Some(value)) {
            supplied.insert(param.as_str());
        }
    }
    for (key, value) in &seen.query {
        if !accounts(key, value) {
            supplied.insert(key.as_str());
        }
    }
    let body = seen.body.as_ref().and_then(Value::as_object);
    for (key, value) in body.into_iter().flatten() {
        let theirs = match scalar_text(value) {
            Some(text) => !accounts(key, &text),
            None => !named(key) && !holds_an_argument(value),
        };
        if theirs {
            supplied.insert(key.as_str());
        }
    }
    supplied
        .into_iter()
        .map(|key| (String::new(), Bound::Supplied(key.to_string())))
        .collect()
}

/// A scalar's text as the wire carries it (`true`, `7`, `abc`); `None` for an object or list.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Where a value is found: a path value, a query value, a top-level body field, deeper in the
/// body (the top-level field that holds it).
fn find(text: &str, seen: &Seen) -> Option<Bound> {
    if let Some((p, _)) = seen.path.iter().find(|(_, v)| v == text) {
        return Some(Bound::Path(p.clone()));
    }
    if let Some((k, _)) = seen.query.iter().find(|(_, v)| v == text) {
        return Some(Bound::Renamed(k.clone()));
    }
    if let Some((k, _)) = seen.headers.iter().find(|(_, v)| v == text) {
        return Some(Bound::Header(k.clone()));
    }
    let body = seen.body.as_ref()?.as_object()?;
    for (k, v) in body {
        if telling(v).as_deref() == Some(text) {
            return Some(Bound::Renamed(k.clone()));
        }
    }
    body.iter()
        .find(|(_, v)| holds(v, text, 0))
        .map(|(k, _)| Bound::Nested(k.clone()))
}

/// Whether `value` holds `text` somewhere inside it (bounded in depth).
fn holds(value: &Value, text: &str, depth: usize) -> bool {
    if depth > 16 {
        return false;
    }
    match value {
        Value::Object(o) => o.values().any(|v| holds(v, text, depth + 1)),
        Value::Array(a) => a.iter().any(|v| holds(v, text, depth + 1)),
        v => depth > 0 && telling(v).as_deref() == Some(text),
    }
}

/// A list of strings sent as one, joined by commas, in the query or a top-level body field.
fn joined(items: &[Value], seen: &Seen) -> Option<Bound> {
    let texts: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
    let joined = texts.filter(|t| t.len() > 1)?.join(",");
    if let Some((k, _)) = seen.query.iter().find(|(_, v)| *v == joined) {
        return Some(Bound::Joined(k.clone()));
    }
    let body = seen.body.as_ref()?.as_object()?;
    body.iter()
        .find(|(_, v)| v.as_str() == Some(joined.as_str()))
        .map(|(k, _)| Bound::Joined(k.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Vec<(String, Value)> {
        flatten(&v, 256)
    }

    #[test]
    fn renames_nestings_path_bindings_and_joins_are_read_off_the_request() {
        let seen = Seen::of(
            "/repositories/{workspace}/{repo_slug}/pullrequests",
            "/2.0/repositories/acme/widgets/pullrequests?q=fix%20login&labels=bug,ui",
            Some(br#"{"title": "Fix login", "source": {"branch": {"name": "feature/login"}}, "merge_strategy": "squash"}"#),
        );
        let found = learn(
            &args(
                json!({"workspace": "acme", "repo": "widgets", "name": "fix login",
                "title": "Fix login", "sourceBranch": "feature/login", "strategy": "squash",
                "labels": ["bug", "ui"], "draft": true, "page": 1}),
            ),
            &seen,
        );
        assert_eq!(
            found,
            [
                ("repo".to_string(), Bound::Path("repo_slug".into())),
                ("name".to_string(), Bound::Renamed("q".into())),
                ("sourceBranch".to_string(), Bound::Nested("source".into())),
                (
                    "strategy".to_string(),
                    Bound::Renamed("merge_strategy".into())
                ),
                ("labels".to_string(), Bound::Joined("labels".into())),
            ]
        );
        let mut learned = Learned::default();
        assert!(learned.take(found.clone()));
        assert!(!learned.take(found), "nothing new");
        assert_eq!(learned.bind["repo"], "repo_slug");
        assert_eq!(learned.rename["strategy"], "merge_strategy");
        assert_eq!(learned.nests["sourceBranch"], "source");
        assert!(learned.joins.contains("labels") && !learned.rename.contains_key("labels"));
    }

    #[test]
    fn values_that_tell_nothing_or_that_two_arguments_share_teach_nothing() {
        let seen = Seen::of("/items/{id}", "/items/abc?limit=10&x=yes&y=same", None);
        let found = learn(
            &args(json!({"item": "abc", "max": 10, "flag": true, "a": "same", "b": "same"})),
            &seen,
        );
        // `x=yes` is no argument's, by name or value: the server fills it itself.
        assert_eq!(
            found,
            [
                ("item".to_string(), Bound::Path("id".into())),
                (String::new(), Bound::Supplied("x".into()))
            ]
        );
        // Grouped arguments are named by their members.
        let grouped =
            args(json!({"queryParameters": {"term": "hello"}, "pathParameters": {"id": "abc"}}));
        let seen = Seen::of("/items/{id}", "/items/abc?search=hello", None);
        assert_eq!(
            learn(&grouped, &seen),
            [("term".to_string(), Bound::Renamed("search".into()))]
        );
        // A value sent as a header: the argument is the server's header.
        let seen = Seen::of("/posts", "/posts", Some(br#"{"raw": "hello there"}"#))
            .with_headers([("api-username", "ada-lovelace")].into_iter());
        let found = learn(
            &args(json!({"author_username": "ada-lovelace", "raw": "hello there"})),
            &seen,
        );
        assert_eq!(
            found,
            [(
                "author_username".to_string(),
                Bound::Header("api-username".into())
            )]
        );
        let mut learned = Learned::default();
        learned.take(found);
        assert!(learned.headers.contains("author_username"));
        // One object wrapping every argument (Speakeasy's `request`) is read through.
        let wrapped = args(json!({"request": {"projectKey": "acme-web", "flag": "dark-mode"}}));
        let seen = Seen::of(
            "/flags/{projectKey}/{featureFlagKey}",
            "/flags/acme-web/dark-mode",
            None,
        );
        assert_eq!(
            learn(&wrapped, &seen),
            [("flag".to_string(), Bound::Path("featureFlagKey".into()))]
        );
    }

    #[test]
    fn a_record_written_back_whole_teaches_its_objects_and_lists_as_the_servers() {
        // GET, change the name, PUT the rest: the lists and objects the tool has no argument
        // for are the server's, and no silent clear of that tool.
        let seen = Seen::of(
            "/channels/{id}",
            "/channels/42",
            Some(
                br#"{"name": "News 24", "graphicsElementIds": [3, 9], "watermark": {"id": 7},
                     "tags": ["evening-news"], "number": "24"}"#,
            ),
        );
        let found = learn(
            &args(json!({"id": 42, "name": "News 24", "tag": "evening-news"})),
            &seen,
        );
        let supplied: Vec<&str> = (found.iter())
            .filter_map(|(_, b)| match b {
                Bound::Supplied(f) => Some(f.as_str()),
                _ => None,
            })
            .collect();
        // `tags` holds the call's `tag`: the tool's, nested; `name` is the tool's by name.
        assert_eq!(supplied, ["graphicsElementIds", "number", "watermark"]);
        assert!(
            found.contains(&("tag".into(), Bound::Nested("tags".into()))),
            "{found:?}"
        );
        // An argument that is the whole list is the tool's, not the server's.
        let found = learn(&args(json!({"ids": [3, 9]})), &seen);
        assert!(!found.contains(&(String::new(), Bound::Supplied("graphicsElementIds".into()))));
    }

    #[test]
    fn a_form_body_is_read_as_a_json_bodys_fields_are() {
        let seen = Seen::of(
            "/chat.postMessage",
            "/chat.postMessage",
            Some(b"channel=C024BE91L&text=Hello+there&as_user=true"),
        );
        let found = learn(
            &args(json!({"channel_id": "C024BE91L", "text": "Hello there"})),
            &seen,
        );
        assert_eq!(
            found,
            [
                ("channel_id".to_string(), Bound::Renamed("channel".into())),
                (String::new(), Bound::Supplied("as_user".into())),
            ]
        );
        // Text that is no form is not read as one.
        assert!(form(b"hello there=1").is_none());
        assert!(form(b"plain").is_none());
    }

    #[test]
    fn a_path_value_no_argument_carries_is_the_servers_until_an_argument_fills_it() {
        // Keycloak's servers put their configured realm in every path.
        let seen = Seen::of(
            "/admin/realms/{realm}/users/{id}",
            "/admin/realms/master/users/5f1c-77",
            None,
        );
        let found = learn(&args(json!({"userId": "5f1c-77"})), &seen);
        assert_eq!(
            found,
            [
                ("userId".to_string(), Bound::Path("id".into())),
                (String::new(), Bound::Supplied("realm".into())),
            ]
        );
        let mut learned = Learned::default();
        learned.take(found);
        assert!(learned.supplied.contains("realm"));
        // Another call names the realm: it was an argument's after all.
        let found = learn(
            &args(json!({"tenant": "master", "userId": "5f1c-77"})),
            &seen,
        );
        assert!(learned.take(found));
        assert!(!learned.supplied.contains("realm"), "{learned:?}");
    }
}
