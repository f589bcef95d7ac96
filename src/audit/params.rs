//! Parameters: path, query, header and cookie values, read the way OpenAPI's style/explode
//! rules say they were written (form, spaceDelimited, pipeDelimited, deepObject, exploded
//! objects, simple, label, matrix), coerced from text, then validated with the compiled schema.
//! Unknown query keys get a did-you-mean; a missing required parameter that an unknown key
//! probably meant points back at it.

use compact_str::ToCompactString;
use std::borrow::Cow;

use percent_encoding::percent_decode_str;
use serde_json::{Map, Value, json};

use super::bounded::Findings;
use super::coerce::{guess, observed_type, scalar};
use super::suggest::did_you_mean;
use crate::contract::{FieldType, Operation, Param, Style};
use crate::finding::{Finding, Kind, Location};
use crate::request::RequestView;

pub(super) fn check(
    op: &Operation,
    request: &RequestView,
    path_values: &[&str],
    out: &mut Findings,
) {
    check_path(op, path_values, out);
    let authorized = request.headers.get("authorization").is_some();
    check_query(op, request.query.unwrap_or(""), authorized, out);
    check_headers(op, request, out);
    check_cookies(op, request, out);
}

/// A parameter value as sent: coerced to the declared types, and what its plain-text reading
/// is made from. Either reading may validate (a string-typed enum of digits is text;
/// `?limit=30` is an integer).
struct Sent<'r> {
    typed: Value,
    read: Read<'r>,
}

/// What a value's text reading and observed type come from.
enum Read<'r> {
    /// The items as sent, and whether object items are `k=v` pairs.
    Items(Vec<Cow<'r, str>>, bool),
    /// An object read from keys of its own (deepObject, exploded form): its text reading.
    Object(Value),
}

fn check_path(op: &Operation, values: &[&str], out: &mut Findings) {
    for (name, raw) in op.path_params.iter().zip(values) {
        let Some(param) = op.param(Location::Path, name) else {
            continue;
        };
        let decoded = percent_decode_str(raw).decode_utf8_lossy();
        let text = match param.style {
            Style::Label => decoded.strip_prefix('.').unwrap_or(&decoded),
            Style::Matrix => decoded
                .strip_prefix(&format!(";{name}="))
                .unwrap_or(&decoded),
            _ => &decoded,
        };
        if valid_scalar(param, text) {
            continue;
        }
        let delimiter = if param.style == Style::Label && param.explode {
            '.'
        } else {
            ','
        };
        let items = delimited(param, text, delimiter)
            .map(Cow::Borrowed)
            .collect();
        validate(param, &sent_from(param, items, param.explode), out);
    }
}

fn check_query(op: &Operation, query: &str, authorized: bool, out: &mut Findings) {
    let pairs: Vec<(Cow<str>, Cow<str>)> = form_urlencoded::parse(query.as_bytes()).collect();
    let mut used = vec![false; pairs.len()];
    let mut missing = Vec::new();
    let mut free_form = false;
    for param in op.params_in(Location::Query) {
        if param.style != Style::DeepObject && takes_valid_scalar(param, &pairs, &mut used) {
            continue;
        }
        let sent = match param.style {
            // deepObject is defined for objects; on an array, a primitive or an `anyOf` of an
            // object and a scalar (all seen in real specs) the value may come under its own
            // name (`expand=a&expand=b`, `created=5`) instead of as `created[gt]=5`.
            Style::DeepObject => {
                deep_object(param, &pairs, &mut used).or_else(|| by_name(param, &pairs, &mut used))
            }
            _ if is_exploded_object(param) => {
                free_form |= param.free_form;
                exploded_object(op, param, &pairs, &mut used)
            }
            _ => by_name(param, &pairs, &mut used),
        };
        match sent {
            Some(sent) => validate(param, &sent, out),
            None if param.required => missing.push(param),
            None => {}
        }
    }
    other_inputs(op, &pairs, &mut used);
    // A required exploded object that takes any key (AWS's `Attributes`, sent as
    // `Attributes.entry.1.key=...`) is sent when a key no other parameter takes is there.
    if used.contains(&false) {
        missing.retain(|p| !(p.free_form && is_exploded_object(p)));
    }
    missing.retain(|p| !carried_by_authorization(op, p, authorized));
    let unknown = match !free_form && !op.open_query && used.contains(&false) {
        true => unknown_keys(op, &pairs, &used, out),
        false => Vec::new(),
    };
    for (key, suggestion) in &unknown {
        let also_missing = missing.iter().any(|m| Some(&m.name) == suggestion.as_ref());
        let unknown = unknown_param(op, key, suggestion.clone(), also_missing);
        out.push(unknown.observed(sent_type(&pairs, key)));
    }
    for param in missing {
        let sent_instead = unknown
            .iter()
            .find(|(_, s)| s.as_deref() == Some(param.name.as_str()))
            .map(|(k, _)| *k);
        out.push(missing_param(op, param, sent_instead));
    }
}

/// The apiKey credentials the operation's security accepts, and the keys its template fixes
/// (`/a?type=list`), are declared inputs too: each key they name is marked used.
fn other_inputs(op: &Operation, pairs: &[(Cow<str>, Cow<str>)], used: &mut [bool]) {
    let credentials = op
        .credentials
        .iter()
        .filter(|c| c.location == Location::Query)
        .map(|c| c.name.as_str());
    let fixed = op.route_keys.iter().map(|k| k.name.as_str());
    for name in credentials.chain(fixed) {
        for ((key, _), used) in pairs.iter().zip(used.iter_mut()) {
            *used |= *key == name;
        }
    }
}

/// The keys no parameter took, each once, with the declared name it may have meant; as many
/// as `out` has room for (past it, counted as left out).
fn unknown_keys<'q>(
    op: &Operation,
    pairs: &'q [(Cow<str>, Cow<str>)],
    used: &[bool],
    out: &mut Findings,
) -> Vec<(&'q str, Option<String>)> {
    let declared: Vec<&str> = op
        .params_in(Location::Query)
        .flat_map(|p| {
            std::iter::once(p.name.as_str()).chain(p.properties.iter().map(|(n, _)| n.as_str()))
        })
        .collect();
    let mut unknown: Vec<(&str, Option<String>)> = Vec::new();
    for ((key, _), used) in pairs.iter().zip(used) {
        if !used && !unknown.iter().any(|(k, _)| k == key) {
            if unknown.len() >= out.room() {
                out.left_out();
                break;
            }
            unknown.push((key, did_you_mean(key, declared.iter().copied())));
        }
    }
    unknown
}

/// The JSON type the values sent under `key` all read as (`integer`, `number`, `boolean`),
/// else `string`: a type, never a value, so that `overlay propose` declares the parameter as
/// the client sent it (a tool's boolean argument arrives as `?flag=true`).
fn sent_type(pairs: &[(Cow<str>, Cow<str>)], key: &str) -> &'static str {
    let sent = || {
        pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    };
    let integer = |v: &str| v.strip_prefix('-').unwrap_or(v).parse::<u64>().is_ok();
    let number = |v: &str| !v.contains(char::is_alphabetic) && v.parse::<f64>().is_ok();
    if sent().all(|v| v == "true" || v == "false") {
        "boolean"
    } else if sent().all(integer) {
        "integer"
    } else if sent().all(number) {
        "number"
    } else {
        "string"
    }
}

/// `unknown_query_param` for `key`, with the name it may have meant (`also_missing`: that
/// name is required and was not sent).
fn unknown_param(
    op: &Operation,
    key: &str,
    suggestion: Option<String>,
    also_missing: bool,
) -> Finding {
    let hint = match (&suggestion, also_missing) {
        (Some(s), true) => format!("; did you mean `{s}`, which is required and missing?"),
        (Some(s), false) => format!("; did you mean `{s}`?"),
        (None, _) => String::new(),
    };
    Finding::new(Kind::UnknownQueryParam, Location::Query, key)
        .suggestion(suggestion)
        .message(format!(
            "query parameter `{key}` is not accepted by {} {} ({}){hint}",
            op.method, op.template, op.id
        ))
}

fn check_headers(op: &Operation, request: &RequestView, out: &mut Findings) {
    let authorized = request.headers.get("authorization").is_some();
    for param in op.params_in(Location::Header) {
        match request.headers.get(&param.name) {
            Some(raw) if valid_scalar(param, raw.trim()) => {}
            Some(raw) => validate(
                param,
                &sent_from(param, split(param, raw), param.explode),
                out,
            ),
            None if param.required && !carried_by_authorization(op, param, authorized) => {
                out.push(missing_param(op, param, None))
            }
            None => {}
        }
    }
}

/// A required `token` parameter of an operation whose security takes a bearer token (OAuth 2,
/// OpenID Connect, HTTP bearer) is the same credential, sent in `Authorization` instead:
/// Slack's spec declares `token` required on every method, and its API reads either.
fn carried_by_authorization(op: &Operation, param: &Param, authorized: bool) -> bool {
    authorized
        && op.bearer
        && ["token", "access_token"]
            .iter()
            .any(|n| param.name.eq_ignore_ascii_case(n))
}

/// A header or cookie value in `simple` style: arrays and objects are comma-separated; a
/// string is taken whole (`x-fapi-auth-date: Mon, 01 Jan 2026 ...` holds commas).
fn split<'r>(param: &Param, raw: &'r str) -> Vec<Cow<'r, str>> {
    delimited(param, raw, ',')
        .map(|s| Cow::Borrowed(s.trim()))
        .collect()
}

/// The items of a path or header value: only arrays and objects are delimited (`,4F` is one
/// string, AWS WorkDocs' ids), and JSON text (`content: application/json`) keeps its commas.
fn delimited<'r>(param: &Param, raw: &'r str, delimiter: char) -> std::str::SplitN<'r, char> {
    let whole =
        param.json_content || !matches!(param.summary.ty, FieldType::Array(_) | FieldType::Object);
    raw.splitn(if whole { 1 } else { usize::MAX }, delimiter)
}

/// A `form` object parameter with `explode`: its properties arrive as query keys of their own.
fn is_exploded_object(param: &Param) -> bool {
    param.style == Style::Form && param.explode && param.summary.ty == FieldType::Object
}

fn check_cookies(op: &Operation, request: &RequestView, out: &mut Findings) {
    let cookie = request.headers.get("cookie").unwrap_or("");
    for param in op.params_in(Location::Cookie) {
        let value = cookie
            .split(';')
            .filter_map(|c| c.trim().split_once('='))
            .find(|(k, _)| *k == param.name);
        match value {
            Some((_, raw)) if valid_scalar(param, raw.trim()) => {}
            Some((_, raw)) => validate(param, &sent_from(param, split(param, raw), false), out),
            None if param.required => out.push(missing_param(op, param, None)),
            None => {}
        }
    }
}

/// Whether `raw` is a scalar parameter's value that validates as its declared type: the
/// common case, answered without the text reading and the observed type `Sent` holds for a
/// finding (three allocations on every clean request; this makes none for a number).
fn valid_scalar(param: &Param, raw: &str) -> bool {
    let scalar_type = !matches!(param.summary.ty, FieldType::Array(_) | FieldType::Object);
    scalar_type
        && !param.json_content
        && param
            .validator
            .get()
            .is_none_or(|v| v.is_valid(&scalar(raw, &param.summary.ty)))
}

/// A scalar query parameter sent under its own name, its first value valid: every key of its
/// name is taken, as `by_name` takes them, and nothing is left to check.
fn takes_valid_scalar(param: &Param, pairs: &[(Cow<str>, Cow<str>)], used: &mut [bool]) -> bool {
    let first = pairs.iter().position(|(key, _)| *key == param.name);
    if !first.is_some_and(|i| valid_scalar(param, &pairs[i].1)) {
        return false;
    }
    for ((key, _), used) in pairs.iter().zip(used.iter_mut()) {
        *used |= *key == param.name;
    }
    true
}

/// Values of a parameter sent under its own name, split by its style's delimiter.
fn by_name<'q>(
    param: &Param,
    pairs: &'q [(Cow<'q, str>, Cow<'q, str>)],
    used: &mut [bool],
) -> Option<Sent<'q>> {
    let mut items: Vec<Cow<str>> = Vec::new();
    let delimiter = match param.style {
        Style::SpaceDelimited => ' ',
        Style::PipeDelimited => '|',
        _ => ',',
    };
    let split = !param.explode || param.style != Style::Form;
    let is_scalar =
        !matches!(param.summary.ty, FieldType::Array(_) | FieldType::Object) || param.json_content;
    for (i, (key, value)) in pairs.iter().enumerate() {
        if *key != param.name {
            continue;
        }
        used[i] = true;
        if is_scalar {
            if items.is_empty() {
                items.push(Cow::Borrowed(value.as_ref()));
            }
        } else if split {
            items.extend(value.split(delimiter).map(Cow::Borrowed));
        } else {
            items.push(Cow::Borrowed(value.as_ref()));
        }
    }
    (!items.is_empty()).then(|| sent_from(param, items, false))
}

/// `filter[name]=x&filter[size]=2` for a deepObject parameter `filter`.
fn deep_object(
    param: &Param,
    pairs: &[(Cow<str>, Cow<str>)],
    used: &mut [bool],
) -> Option<Sent<'static>> {
    let mut typed = Map::new();
    let mut text = Map::new();
    for (i, (key, value)) in pairs.iter().enumerate() {
        let Some(rest) = key
            .strip_prefix(param.name.as_str())
            .and_then(|r| r.strip_prefix('['))
        else {
            continue;
        };
        let Some((prop, _)) = rest.split_once(']') else {
            continue;
        };
        used[i] = true;
        typed.insert(prop.to_string(), property_value(param, prop, value));
        text.insert(prop.to_string(), Value::String(value.to_string()));
    }
    (!typed.is_empty()).then(|| Sent {
        typed: Value::Object(typed),
        read: Read::Object(Value::Object(text)),
    })
}

/// An exploded form object: its properties arrive as query keys of their own.
fn exploded_object(
    op: &Operation,
    param: &Param,
    pairs: &[(Cow<str>, Cow<str>)],
    used: &mut [bool],
) -> Option<Sent<'static>> {
    let mut typed = Map::new();
    let mut text = Map::new();
    for (i, (key, value)) in pairs.iter().enumerate() {
        let property = param.properties.iter().any(|(p, _)| p == key);
        // A key that is a parameter's own name is that parameter's, never an exploded
        // object's property (EC2: `Value` beside three `{Value}` objects).
        if property && op.param(Location::Query, key).is_none() {
            used[i] = true;
            let value_typed = property_value(param, key, value);
            // An array property's text form is its items as strings, like its typed form.
            let value_text = match &value_typed {
                Value::Array(items) if items.len() == 1 => json!([value.as_ref()]),
                Value::Array(_) => value.split(',').map(Value::from).collect(),
                _ => Value::String(value.to_string()),
            };
            // An array property sent once per item (`Accounts=1&Accounts=2`) is all of them.
            for (map, v) in [(&mut typed, value_typed), (&mut text, value_text)] {
                match (map.get_mut(key.as_ref()), v) {
                    (Some(Value::Array(items)), Value::Array(more)) => items.extend(more),
                    (_, v) => {
                        map.insert(key.to_string(), v);
                    }
                }
            }
        }
    }
    (!typed.is_empty()).then(|| Sent {
        typed: Value::Object(typed),
        read: Read::Object(Value::Object(text)),
    })
}

/// A property of an object parameter, read as the type its own schema declares (`filter[id]=12`
/// is the string "12" where `id` is a string, the number 12 where it is a number).
fn property_value(param: &Param, prop: &str, raw: &str) -> Value {
    match param.properties.iter().find(|(name, _)| name == prop) {
        // `filter[id]=1,2` for an array property: its items, comma-separated (or JSON text).
        Some((_, ty @ FieldType::Array(item))) => match scalar(raw, ty) {
            // An array of arrays sent one item per key: `["a","b"]` is one item.
            Value::Array(inner)
                if matches!(**item, FieldType::Array(_)) && !inner.iter().all(Value::is_array) =>
            {
                Value::Array(vec![Value::Array(inner)])
            }
            json @ Value::Array(_) => json,
            // One object item as JSON text, its key repeated for the others.
            json @ Value::Object(_) => Value::Array(vec![json]),
            _ => Value::Array(raw.split(',').map(|s| scalar(s, item)).collect()),
        },
        Some((_, ty)) => scalar(raw, ty),
        None => guess(raw),
    }
}

/// Read `items` as `param`'s declared type. Only the typed reading is made here: the text
/// reading and the observed type are made by [`Sent::text`] and [`Sent::observed`] when the
/// typed one does not validate, so a valid array costs no copy of its items as text.
/// `pairs_with_eq`: object items are `k=v` (exploded simple style) rather than alternating `k,v`.
fn sent_from<'r>(param: &Param, items: Vec<Cow<'r, str>>, pairs_with_eq: bool) -> Sent<'r> {
    let first = items.first().map(|s| s.as_ref()).unwrap_or("");
    let typed = if param.json_content {
        serde_json::from_str(first).unwrap_or_else(|_| Value::String(first.to_string()))
    } else {
        match &param.summary.ty {
            FieldType::Array(_) if empty_list(&items) => Value::Array(Vec::new()),
            FieldType::Array(item) => {
                // Items that are arrays or objects, as JSON text: the commas inside them are
                // not delimiters (`[1,2]` is one item, `["a"],["b"]` two).
                let nested = matches!(**item, FieldType::Array(_) | FieldType::Object);
                let sequence = nested
                    .then(|| {
                        serde_json::from_str::<Vec<Value>>(&format!("[{}]", items.join(","))).ok()
                    })
                    .flatten();
                Value::Array(
                    sequence.unwrap_or_else(|| items.iter().map(|s| scalar(s, item)).collect()),
                )
            }
            FieldType::Object => Value::Object(
                entries(&items, pairs_with_eq)
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), guess(v)))
                    .collect(),
            ),
            ty => scalar(first, ty),
        }
    };
    Sent {
        typed,
        read: Read::Items(items, pairs_with_eq),
    }
}

/// `name=`: the empty array in the delimited styles (`explode: false`), read as `[]`, while
/// the text form keeps the other reading (one empty item).
fn empty_list(items: &[Cow<str>]) -> bool {
    items.len() == 1 && items[0].is_empty()
}

/// An object's entries from its items: `k=v` each, or `k,v` alternating.
fn entries<'a>(items: &'a [Cow<str>], pairs_with_eq: bool) -> Vec<(&'a str, &'a str)> {
    if pairs_with_eq {
        items.iter().filter_map(|s| s.split_once('=')).collect()
    } else {
        items
            .chunks(2)
            .filter_map(|c| Some((c.first()?.as_ref(), c.get(1)?.as_ref())))
            .collect()
    }
}

impl Sent<'_> {
    /// The value as plain text: a string, or the items (an object's values) as strings.
    fn text(&self, param: &Param) -> Value {
        let (items, pairs_with_eq) = match &self.read {
            Read::Object(text) => return text.clone(),
            Read::Items(items, pairs_with_eq) => (items, *pairs_with_eq),
        };
        let first = items.first().map(|s| s.as_ref()).unwrap_or("");
        if param.json_content {
            return Value::String(first.to_string());
        }
        match &param.summary.ty {
            FieldType::Array(_) => items.iter().map(|s| Value::String(s.to_string())).collect(),
            FieldType::Object => Value::Object(
                entries(items, pairs_with_eq)
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
                    .collect(),
            ),
            _ => Value::String(first.to_string()),
        }
    }

    /// The type the value was sent as, for a finding's `observed`.
    fn observed(&self, param: &Param) -> String {
        let items = match &self.read {
            Read::Object(_) => return "object".into(),
            Read::Items(items, _) => items,
        };
        let first = items.first().map(|s| s.as_ref()).unwrap_or("");
        if param.json_content {
            return FieldType::of_value(&self.typed).to_string();
        }
        match &param.summary.ty {
            FieldType::Array(_) if empty_list(items) => "array<string>".into(),
            FieldType::Array(item) => {
                let declared = item.to_string();
                let observed = items
                    .iter()
                    .map(|s| observed_type(s))
                    .find(|t| *t != declared)
                    .unwrap_or("string");
                format!("array<{observed}>")
            }
            FieldType::Object => "object".into(),
            _ => observed_type(first).into(),
        }
    }
}

fn validate(param: &Param, sent: &Sent, out: &mut Findings) {
    let Some(validator) = param.validator.get() else {
        return;
    };
    if validator.is_valid(&sent.typed) {
        return;
    }
    let text = sent.text(param);
    if param.allow_empty && text.as_str() == Some("") {
        return; // `allowEmptyValue: true`: `?pretty=` is the parameter sent without a value.
    }
    if validator.is_valid(&text) {
        return;
    }
    let observed = sent.observed(param);
    let reason = validator
        .iter_errors(&sent.typed)
        .next()
        .map(|e| match (e.kind(), e.instance_path().as_str()) {
            (jsonschema::error::ValidationErrorKind::Type { .. }, "") => {
                format!("expected {}, got {observed}", param.summary)
            }
            (_, "") => e.masked().to_string(),
            // Inside an object or array value: where, so that "expected object, got object"
            // never stands for a wrong property.
            (_, at) => format!("at `{at}`: {}", e.masked()),
        })
        .unwrap_or_default();
    out.push(
        Finding::new(Kind::ParamTypeMismatch, param.location, &param.name)
            .expected(param.summary.to_compact_string())
            .observed(observed)
            .message(format!(
                "{} parameter `{}`: {reason}",
                param.location, param.name
            )),
    );
}

fn missing_param(op: &Operation, param: &Param, sent_instead: Option<&str>) -> Finding {
    let (suggestion, hint) = match sent_instead {
        Some(k) => (
            Some(format!("rename `{k}` to `{}`", param.name)),
            format!("; the request sent `{k}` instead"),
        ),
        None => (None, String::new()),
    };
    let finding = Finding::new(Kind::MissingRequiredParam, param.location, &param.name)
        .expected(param.summary.to_compact_string())
        .suggestion(suggestion)
        .message(format!(
            "{} parameter `{}` is required by {} {} ({}){hint}",
            param.location, param.name, op.method, op.template, op.id
        ));
    match sent_instead {
        Some(k) => finding.observed(format!("`{k}` sent instead")),
        None => finding.observed("absent"),
    }
}
