//! A valid request for every operation of a spec, built from the document as written (not
//! driftwatch's normalized copy, so a normalization bug cannot hide itself): examples,
//! defaults, enums, minimal valid values; parameters serialized in their declared style. Shared
//! by the no-false-positive test and `examples/first_contact.rs` (the APIs.guru directory).
#![allow(dead_code)]

use driftwatch::contract::deref;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value, json};

pub const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// A request built for one operation.
pub struct Built {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    /// The body's media type is not JSON, so `unaudited` (info) is its one expected finding.
    pub opaque_body: bool,
}

pub fn build_all(doc: &Value) -> Vec<(String, Built)> {
    let mut out = Vec::new();
    for (template, item) in doc["paths"].as_object().unwrap() {
        let item = deref(doc, item);
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let id = op
                .get("operationId")
                .and_then(Value::as_str)
                .map(String::from)
                .unwrap_or(format!("{method} {template}"));
            out.push((id, build(doc, template, method, item, op)));
        }
    }
    out
}

pub fn build(doc: &Value, template: &str, method: &str, item: &Value, op: &Value) -> Built {
    let mut params: Vec<&Value> = Vec::new();
    for list in [item.get("parameters"), op.get("parameters")] {
        for p in list.and_then(Value::as_array).into_iter().flatten() {
            let p = deref(doc, p);
            params.retain(|q| !(q["name"] == p["name"] && q["in"] == p["in"]));
            params.push(p);
        }
    }
    // A template's `?`/`#` part fixes keys (AWS's `/#X-Amz-Target=Svc.Op`, `/#Action=Op`):
    // sent as a real client does, the target as a header and the rest in the query.
    let (route, fixed) = match template.find(['?', '#']) {
        Some(at) => (&template[..at], &template[at + 1..]),
        None => (template, ""),
    };
    let mut path = if route.is_empty() { "/" } else { route }.to_string();
    let mut query = Vec::new();
    let mut headers = Vec::new();
    for pair in fixed.split(['&', '?', '#']).filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((_, value)) if value.contains('{') => {}
            Some(("X-Amz-Target", value)) => headers.push(("X-Amz-Target".into(), value.into())),
            Some((name, value)) => query.push(format!("{}={}", enc(name), enc(value))),
            // A bare key only says the parameter is there; it is sent as declared.
            None => {}
        }
    }
    let names: Vec<&str> = params.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut cookies = Vec::new();
    for p in params.iter().copied() {
        let name = p["name"].as_str().unwrap();
        let location = p["in"].as_str().unwrap();
        // OpenAPI: header parameters named Accept, Content-Type or Authorization are ignored.
        let reserved = ["accept", "content-type", "authorization"];
        if location == "header" && reserved.contains(&name.to_ascii_lowercase().as_str()) {
            continue;
        }
        let required = p.get("required") == Some(&json!(true));
        if !required && p.get("schema").is_some_and(|s| !satisfiable(doc, s)) {
            continue;
        }
        // An optional exploded object whose property is also a parameter's name or another
        // object's property (AWS's `LaunchTemplate.Version` beside `Version`, EC2's three
        // `{Value}` objects): no serialization tells them apart.
        let exploded = location == "query"
            && p.get("style").is_none_or(|s| s == "form")
            && p.get("explode") != Some(&json!(false));
        let properties = p
            .get("schema")
            .map(|s| deref(doc, s))
            .and_then(|s| s.get("properties"));
        let elsewhere = |k: &str| {
            names.contains(&k)
                || params.iter().filter(|q| !std::ptr::eq(**q, p)).any(|q| {
                    let props = q
                        .get("schema")
                        .map(|s| deref(doc, s))
                        .and_then(|s| s.get("properties"));
                    props.is_some_and(|props| props.get(k).is_some())
                })
        };
        let collides = properties
            .and_then(Value::as_object)
            .is_some_and(|props| props.keys().any(|k| elsewhere(k)));
        if !required && exploded && collides {
            continue;
        }
        let (value, json_content) = match p.get("schema") {
            Some(s) if location == "path" => (param_value(doc, p, &non_empty(doc, s)), false),
            Some(s) => (param_value(doc, p, s), false),
            None => {
                let media = p["content"].as_object().unwrap().values().next().unwrap();
                (generate(doc, &media["schema"], 0, false), true)
            }
        };
        // A required object that takes any key and declares none is sent with one of ours: an
        // empty object serializes to nothing, the same as leaving it out.
        let value = match value {
            Value::Object(map) if map.is_empty() && required => {
                let open = p["schema"].get("additionalProperties") != Some(&json!(false));
                if open {
                    json!({"key1": "x"})
                } else {
                    Value::Object(map)
                }
            }
            other => other,
        };
        let style = p.get("style").and_then(Value::as_str).unwrap_or(
            if matches!(location, "query" | "cookie") {
                "form"
            } else {
                "simple"
            },
        );
        let explode = p
            .get("explode")
            .and_then(Value::as_bool)
            .unwrap_or(style == "form");
        match location {
            "path" if json_content => {
                path = path.replace(&format!("{{{name}}}"), &enc_path(&value.to_string()))
            }
            "path" => {
                path = path.replace(
                    &format!("{{{name}}}"),
                    &path_value(name, &value, style, explode),
                )
            }
            "query" if json_content => query.push(format!("{name}={}", enc(&value.to_string()))),
            "query" => query.extend(query_pairs(name, &value, style, explode)),
            "header" if json_content => headers.push((name.to_string(), value.to_string())),
            "header" => headers.push((name.to_string(), joined(&value, ","))),
            "cookie" if json_content => cookies.push(format!("{name}={}", enc(&value.to_string()))),
            "cookie" => cookies.push(format!("{name}={}", joined(&value, ","))),
            _ => unreachable!(),
        }
    }
    credentials(doc, op, &mut query, &mut headers, &mut cookies);
    if !cookies.is_empty() {
        headers.push(("Cookie".into(), cookies.join("; ")));
    }
    let (body, opaque_body) = body(doc, op, &mut headers);
    let target = if query.is_empty() {
        path
    } else {
        format!("{path}?{}", query.join("&"))
    };
    Built {
        method: method.to_ascii_uppercase(),
        target,
        headers,
        body,
        opaque_body,
    }
}

/// The credentials of the first alternative of the operation's effective `security` (its
/// own, else the document's), as a client configured for the API sends them; a key a
/// parameter already sends is not sent twice.
fn credentials(
    doc: &Value,
    op: &Value,
    query: &mut Vec<String>,
    headers: &mut Vec<(String, String)>,
    cookies: &mut Vec<String>,
) {
    let security = op.get("security").or_else(|| doc.get("security"));
    let first = security.and_then(|s| s.get(0)).and_then(Value::as_object);
    let schemes = doc.pointer("/components/securitySchemes");
    for name in first.into_iter().flat_map(|r| r.keys()) {
        let Some(scheme) = schemes.and_then(|s| s.get(name)).map(|s| deref(doc, s)) else {
            continue;
        };
        let key = scheme["name"].as_str().unwrap_or("");
        let authorization = |value: String| ("Authorization".to_string(), value);
        let has_header =
            |hs: &Vec<(String, String)>, n: &str| hs.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        match (scheme["type"].as_str(), scheme["in"].as_str()) {
            (Some("apiKey"), Some("header")) if !has_header(headers, key) => {
                headers.push((key.into(), "gen-key".into()))
            }
            (Some("apiKey"), Some("query"))
                if !query.iter().any(|q| q.split('=').next() == Some(&enc(key))) =>
            {
                query.push(format!("{}=gen-key", enc(key)))
            }
            (Some("apiKey"), Some("cookie")) => cookies.push(format!("{key}=gen-key")),
            (Some("oauth2" | "openIdConnect"), _) if !has_header(headers, "authorization") => {
                headers.push(authorization("Bearer gen-token".into()))
            }
            (Some("http"), _) if !has_header(headers, "authorization") => {
                let http = scheme["scheme"].as_str().unwrap_or("bearer");
                headers.push(authorization(format!("{http} gen-credential")))
            }
            _ => {}
        }
    }
}

fn body(doc: &Value, op: &Value, headers: &mut Vec<(String, String)>) -> (Option<Vec<u8>>, bool) {
    let Some(rb) = op.get("requestBody") else {
        return (None, false);
    };
    let rb = deref(doc, rb);
    let content = rb["content"].as_object().unwrap();
    let json = content.iter().find(|(m, _)| is_json(m));
    match json {
        Some((media, m)) => {
            let concrete = media.replace('*', "vnd.generated");
            headers.push(("Content-Type".into(), concrete));
            let value = m
                .get("schema")
                .map(|s| generate(doc, s, 0, true))
                .unwrap_or(json!({}));
            (Some(value.to_string().into_bytes()), false)
        }
        None if rb.get("required") == Some(&json!(true)) => {
            let media = content.keys().next().unwrap();
            let concrete = if media.contains('*') {
                "application/octet-stream".to_string()
            } else {
                media.clone()
            };
            headers.push(("Content-Type".into(), concrete));
            (Some(b"data".to_vec()), true)
        }
        None => (None, false),
    }
}

fn is_json(media: &str) -> bool {
    let m = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    m == "application/json" || m == "text/json" || m.ends_with("+json")
}

/// A parameter's value: its own example or the schema's; object parameters carry every
/// declared property, so exploded and deepObject keys are really sent.
fn param_value(doc: &Value, param: &Value, schema: &Value) -> Value {
    // A parameter's own example is used where it fits the schema (objects and arrays are
    // always generated: their insides are not checked here).
    let s = deref(doc, schema);
    param
        .get("example")
        .filter(|e| fits(s, type_of(s), e))
        .cloned()
        .unwrap_or_else(|| generate(doc, schema, 0, true))
}

/// A path parameter's schema without the empty value: `/projects//experiments` reaches no
/// operation on any server, though `minLength: 0` (or an `enum` with `""`) allows it.
fn non_empty(doc: &Value, schema: &Value) -> Value {
    let mut s = deref(doc, schema).clone();
    if let Some(map) = s.as_object_mut() {
        if map.get("minLength").and_then(Value::as_u64).unwrap_or(0) == 0 {
            map.insert("minLength".into(), json!(1));
        }
        if let Some(Value::Array(members)) = map.get_mut("enum") {
            members.retain(|m| m != "");
        }
    }
    s
}

/// Whether some value fits `s`: not when every `enum` member is of another type than the
/// declared one (`type: string, enum: [true, false]`, an array whose `enum` lists strings).
/// An optional field or parameter of such a schema is left out; a required one makes its
/// operation unsatisfiable (pinned by name in examples/first_contact.rs).
fn satisfiable(doc: &Value, schema: &Value) -> bool {
    let s = deref(doc, schema);
    let ty = type_of(s);
    let members_fit = s
        .get("enum")
        .and_then(Value::as_array)
        .is_none_or(|e| e.iter().any(|v| of_type(ty, v)));
    let items_fit = ty != "array" || s.get("items").is_none_or(|i| satisfiable(doc, i));
    members_fit && items_fit
}

/// Whether `v` is of JSON Schema type `ty` (`composite` and unknown types take anything).
fn of_type(ty: &str, v: &Value) -> bool {
    match ty {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn enc(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

/// RFC 3986: clients leave the unreserved characters `-._~` as they are.
const PATH_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn enc_path(s: &str) -> String {
    utf8_percent_encode(s, PATH_VALUE).to_string()
}

fn joined(value: &Value, sep: &str) -> String {
    match value {
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(sep),
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| [k.clone(), text(v)])
            .collect::<Vec<_>>()
            .join(sep),
        other => text(other),
    }
}

fn path_value(name: &str, value: &Value, style: &str, explode: bool) -> String {
    let items: Vec<String> = match value {
        Value::Array(items) => items.iter().map(|v| enc_path(&text(v))).collect(),
        other => vec![enc_path(&text(other))],
    };
    match (style, explode) {
        ("label", true) => format!(".{}", items.join(".")),
        ("label", false) => format!(".{}", items.join(",")),
        ("matrix", true) if value.is_array() => {
            items.iter().map(|i| format!(";{name}={i}")).collect()
        }
        ("matrix", _) => format!(";{name}={}", items.join(",")),
        _ => items.join(","),
    }
}

fn query_pairs(name: &str, value: &Value, style: &str, explode: bool) -> Vec<String> {
    let n = enc(name);
    // A query has no spelling for null: a nullable property sent as null is left out.
    let value = &match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    };
    match (value, style, explode) {
        (Value::Object(map), "deepObject", _) => map
            .iter()
            .map(|(k, v)| format!("{n}%5B{}%5D={}", enc(k), enc(&text(v))))
            .collect(),
        // An array property once per item (`Accounts=1&Accounts=2`); OpenAPI leaves nested
        // values undefined, and this is how AWS's query APIs send them.
        (Value::Object(map), "form", true) => map
            .iter()
            .flat_map(|(k, v)| {
                match v {
                    Value::Array(items) => items.iter().map(text).collect(),
                    other => vec![text(other)],
                }
                .into_iter()
                .map(move |v| format!("{}={}", enc(k), enc(&v)))
            })
            .collect(),
        (Value::Object(_), "spaceDelimited", _) => {
            vec![format!("{n}={}", enc(&joined(value, " ")))]
        }
        (Value::Object(_), "pipeDelimited", _) => vec![format!("{n}={}", enc(&joined(value, "|")))],
        (Value::Object(_), _, _) => vec![format!("{n}={}", enc(&joined(value, ",")))],
        (Value::Array(items), "form", true) => items
            .iter()
            .map(|v| format!("{n}={}", enc(&text(v))))
            .collect(),
        (Value::Array(_), "spaceDelimited", _) => vec![format!("{n}={}", enc(&joined(value, " ")))],
        (Value::Array(_), "pipeDelimited", _) => vec![format!("{n}={}", enc(&joined(value, "|")))],
        (Value::Array(_), _, _) => vec![format!("{n}={}", enc(&joined(value, ",")))],
        (other, _, _) => vec![format!("{n}={}", enc(&text(other)))],
    }
}

/// A valid value for `schema`. `top` marks the request body's own object, where every
/// writable property is sent (a replace write must not omit any); deeper, only required ones.
fn generate(doc: &Value, schema: &Value, depth: usize, top: bool) -> Value {
    let s = deref(doc, schema);
    if depth > 16 {
        return json!(null);
    }
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    let ty = type_of(s);
    if let Some(members) = s.get("enum").and_then(Value::as_array) {
        let typed = members.iter().find(|v| !v.is_null() && of_type(ty, v));
        if let Some(first) = typed.or(members.iter().find(|v| !v.is_null())) {
            return first.clone();
        }
    }
    let given = [
        s.get("default"),
        s.get("example"),
        s.get("examples")
            .and_then(Value::as_array)
            .and_then(|e| e.first()),
    ];
    if let Some(v) = given.into_iter().flatten().find(|v| fits(s, ty, v)) {
        return v.clone();
    }
    if s.get("allOf").is_some_and(Value::is_array) {
        return generate(doc, &merge_all_of(doc, s, 0), depth + 1, top);
    }
    for key in ["oneOf", "anyOf"] {
        let Some(branches) = s.get(key).and_then(Value::as_array) else {
            continue;
        };
        let concrete: Vec<&Value> = branches
            .iter()
            .filter(|b| deref(doc, b).get("type") != Some(&json!("null")))
            .collect();
        // The first branch the schema's own `type` allows (`type: array` beside a `oneOf` of
        // an object and an array takes the array).
        let fits_type = |b: &&&Value| {
            let t = type_of(deref(doc, b));
            ty == "composite" || t == ty || deref(doc, b).get("type").is_none()
        };
        let first = concrete.iter().find(fits_type).or(concrete.first());
        let branch = deref(doc, first.copied().unwrap_or(&branches[0]));
        if ty != "object" {
            let mut value = generate(doc, branch, depth + 1, top);
            // `required` beside the branches (no `type`, no `properties`) still applies.
            if let Value::Object(obj) = &mut value {
                for (k, v) in object(doc, s, depth, top) {
                    obj.entry(k).or_insert(v);
                }
            }
            return value;
        }
        // An object whose branches only add constraints (`required: [a]` or `[b]`): send
        // the first branch's fields and none that only another branch requires.
        let required_by = |b: &Value| -> Vec<String> {
            deref(doc, b)
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        };
        let mine = required_by(branch);
        let others: Vec<String> = concrete
            .iter()
            .flat_map(|b| required_by(b))
            .filter(|n| !mine.contains(n))
            .collect();
        let mut obj = object(doc, s, depth, top);
        obj.retain(|k, _| !others.contains(k));
        // The branch adds what the parent lacks; it does not overwrite what the parent's own
        // properties produced (a branch `required: [conclusion]` without the property).
        if let Value::Object(extra) = generate(doc, branch, depth + 1, top) {
            for (k, v) in extra {
                obj.entry(k).or_insert(v);
            }
        }
        for name in mine {
            if !obj.contains_key(&name)
                && let Some(prop) = s.get("properties").and_then(|p| p.get(&name))
            {
                obj.insert(name, generate(doc, prop, depth + 1, false));
            }
        }
        return Value::Object(obj);
    }
    match ty {
        "object" => Value::Object(object(doc, s, depth, top)),
        "array" => {
            // Two items, so that delimited styles (`a,b`, `a|b`) are really split.
            let max = s
                .get("maxItems")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            let min = s
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(2)
                .max(1)
                .min(max.max(1));
            let item = s
                .get("items")
                .map(|i| generate(doc, i, depth + 1, false))
                .unwrap_or(json!("x"));
            if s.get("maxItems") == Some(&json!(0)) {
                return json!([]);
            }
            let unique = s.get("uniqueItems") == Some(&json!(true));
            let choices = s
                .get("items")
                .map(|i| deref(doc, i))
                .and_then(|i| i.get("enum"))
                .and_then(Value::as_array);
            let second = choices.and_then(|e| e.get(1)).cloned();
            // Unique items drawn from an enum: no more items than it has values.
            let min = match (unique, choices) {
                (true, Some(e)) => min.min(e.len().max(1) as u64),
                // Items we cannot vary (objects, booleans): one, unless more are required.
                (true, None) if distinct(&item, 1) == item => s
                    .get("minItems")
                    .and_then(Value::as_u64)
                    .unwrap_or(1)
                    .max(1),
                _ => min,
            };
            let next = |i: u64| match (&second, unique) {
                (Some(v), _) if i == 1 => v.clone(),
                (_, true) => distinct(&item, i),
                _ => item.clone(),
            };
            Value::Array(
                (0..min)
                    .map(|i| if i > 0 { next(i) } else { item.clone() })
                    .collect(),
            )
        }
        "integer" | "number" => number(s, ty == "integer"),
        "boolean" => json!(true),
        "null" => json!(null),
        _ => string(s),
    }
}

/// `allOf` as one schema: the branches' `properties` joined (a property two branches declare
/// is the `allOf` of both, so `from: {required: [email]}` refines the base's `from`), their
/// `required` lists joined, and any other keyword from the first schema that has it. A value is
/// generated once from the whole, so no branch overwrites another's field with a placeholder.
fn merge_all_of(doc: &Value, s: &Value, depth: usize) -> Value {
    let mut out = s.as_object().cloned().unwrap_or_default();
    let Some(Value::Array(branches)) = out.remove("allOf") else {
        return Value::Object(out);
    };
    for branch in &branches {
        let branch = deref(doc, branch);
        let branch = match branch.get("allOf") {
            Some(_) if depth < 8 => merge_all_of(doc, branch, depth + 1),
            _ => branch.clone(),
        };
        let Value::Object(map) = branch else { continue };
        for (key, value) in map {
            match (key.as_str(), out.get_mut(&key), value) {
                ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                    for (name, p) in theirs {
                        match mine.get_mut(&name) {
                            Some(existing) => {
                                let read_only = [&*existing, &p]
                                    .iter()
                                    .any(|x| deref(doc, x).get("readOnly") == Some(&json!(true)));
                                let both =
                                    json!({"allOf": [existing.clone(), p], "readOnly": read_only});
                                *existing = both;
                            }
                            None => {
                                mine.insert(name, p);
                            }
                        }
                    }
                }
                ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                    for name in theirs {
                        if !mine.contains(&name) {
                            mine.push(name);
                        }
                    }
                }
                (_, Some(_), _) => {}
                (_, None, value) => {
                    out.insert(key, value);
                }
            }
        }
    }
    Value::Object(out)
}

fn type_of(s: &Value) -> &str {
    match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.get("properties").is_some() => "object",
        _ if s.get("items").is_some() => "array",
        _ if s.get("allOf").is_some() || s.get("oneOf").is_some() || s.get("anyOf").is_some() => {
            "composite"
        }
        _ => "string",
    }
}

/// Whether a given example or default can stand for `s`: right type, no containers (their
/// insides are not checked here), and matching the pattern. Real specs carry wrong examples.
fn fits(s: &Value, ty: &str, v: &Value) -> bool {
    let type_ok = match (ty, v) {
        ("string", Value::String(text)) => {
            let chars = text.chars().count() as u64;
            matches_pattern(s, text)
                && chars >= s.get("minLength").and_then(Value::as_u64).unwrap_or(0)
                && chars
                    <= s.get("maxLength")
                        .and_then(Value::as_u64)
                        .unwrap_or(u64::MAX)
        }
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) => true,
        _ => false,
    };
    let listed = s
        .get("enum")
        .and_then(Value::as_array)
        .is_none_or(|e| e.contains(v));
    type_ok
        && listed
        && s.get("minimum")
            .and_then(Value::as_f64)
            .is_none_or(|m| v.as_f64().is_none_or(|x| x >= m))
        && s.get("maximum")
            .and_then(Value::as_f64)
            .is_none_or(|m| v.as_f64().is_none_or(|x| x <= m))
}

/// Whether `text` matches `s`'s pattern as jsonschema runs it (ECMA-262, lookarounds too).
fn matches_pattern(s: &Value, text: &str) -> bool {
    s.get("pattern")
        .and_then(Value::as_str)
        .is_none_or(|p| jsonschema::is_valid(&json!({"pattern": p}), &json!(text)))
}

/// rand_regex generates from unanchored patterns only (a sample of the unanchored pattern
/// matches the anchored one too), and reads `\d` as Unicode where ECMA-262 means ASCII. An
/// escaped backslash (`\\d` is a backslash and a `d`) is kept as it is.
fn strip_anchors(p: &str) -> String {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            match chars[i + 1] {
                'd' => out.push_str("[0-9]"),
                'w' => out.push_str("[A-Za-z0-9_]"),
                's' => out.push_str("[ ]"),
                n => {
                    out.push(c);
                    out.push(n);
                }
            }
            i += 2;
            continue;
        }
        let after_open = i > 0 && matches!(chars[i - 1], '|' | '(') && !out.ends_with("\\(");
        let drop = match c {
            '^' => i == 0 || after_open,
            '$' => i + 1 == chars.len() || matches!(chars[i + 1], '|' | ')'),
            _ => false,
        };
        if !drop {
            out.push(c);
        }
        i += 1;
    }
    out
}

fn distinct(item: &Value, i: u64) -> Value {
    match item {
        Value::Number(n) => json!(n.as_f64().unwrap_or(0.0) as i64 + i as i64),
        Value::String(s) => json!(format!("{s}{i}")),
        other => other.clone(),
    }
}

fn object(doc: &Value, s: &Value, depth: usize, top: bool) -> Map<String, Value> {
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut out = Map::new();
    for (name, prop) in s
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let read_only = prop.get("readOnly") == Some(&json!(true))
            || deref(doc, prop).get("readOnly") == Some(&json!(true));
        // A property whose schema is `false` (Vercel declares one named `additionalProperties`)
        // must be absent.
        if prop == &json!(false) {
            continue;
        }
        let required_here = required.contains(&name.as_str());
        if read_only || !(top || required_here) || (!required_here && !satisfiable(doc, prop)) {
            continue;
        }
        // Nullable body fields are sent as null, to exercise both nullable spellings
        // (3.0 `nullable: true`, 3.1 `["null", T]`) in the normalized schemas.
        let value = if top && nullable(deref(doc, prop)) {
            json!(null)
        } else {
            generate(doc, prop, depth + 1, false)
        };
        out.insert(name.clone(), value);
    }
    // Real specs require names they never declare (`required: [project]`): any value will do.
    // (A declared one left out above is read-only: required of responses only.)
    let open = s.get("additionalProperties") != Some(&json!(false));
    let declared_names = s.get("properties").and_then(Value::as_object);
    for name in required {
        let declared = declared_names.is_some_and(|p| p.contains_key(name));
        if !out.contains_key(name) && open && !declared {
            let extra = s.get("additionalProperties").filter(|a| a.is_object());
            let value = extra.map_or(json!("x"), |a| generate(doc, a, depth + 1, false));
            out.insert(name.to_string(), value);
        }
    }
    // `minProperties`: the optional declared ones first, then keys of our own where allowed.
    let min = s.get("minProperties").and_then(Value::as_u64).unwrap_or(0) as usize;
    let declared = s.get("properties").and_then(Value::as_object);
    for (name, prop) in declared.into_iter().flatten() {
        if out.len() >= min {
            break;
        }
        if !out.contains_key(name) && deref(doc, prop).get("readOnly") != Some(&json!(true)) {
            out.insert(name.clone(), generate(doc, prop, depth + 1, false));
        }
    }
    let mut n = 0;
    while out.len() < min && open && n < min {
        let extra = s.get("additionalProperties").filter(|a| a.is_object());
        let value = extra.map_or(json!("x"), |a| generate(doc, a, depth + 1, false));
        out.insert(format!("extra{n}"), value);
        n += 1;
    }
    out
}

/// Null is a value of `s`: 3.0's `nullable` or 3.1's `null` type, and its `enum` (if any)
/// lists null (Vercel: `type: [string, null]` with an `enum` of strings is not nullable).
fn nullable(s: &Value) -> bool {
    let typed = s.get("nullable") == Some(&json!(true))
        || s.get("type")
            .and_then(Value::as_array)
            .is_some_and(|t| t.contains(&json!("null")));
    let listed = s
        .get("enum")
        .and_then(Value::as_array)
        .is_none_or(|e| e.contains(&Value::Null) || s.get("nullable") == Some(&json!(true)));
    typed && listed
}

fn number(s: &Value, integer: bool) -> Value {
    // 3.0 writes exclusive bounds as booleans beside `minimum`/`maximum`.
    let step = if integer { 1.0 } else { 0.5 };
    let bump = |key: &str| s.get(key) == Some(&json!(true));
    let min = s.get("minimum").and_then(Value::as_f64).map(|m| {
        if bump("exclusiveMinimum") {
            m + step
        } else {
            m
        }
    });
    let max_bool = s.get("maximum").and_then(Value::as_f64).map(|m| {
        if bump("exclusiveMaximum") {
            m - step
        } else {
            m
        }
    });
    let exclusive = s
        .get("exclusiveMinimum")
        .and_then(Value::as_f64)
        .map(|m| m + 1.0);
    let max = max_bool.or(s
        .get("exclusiveMaximum")
        .and_then(Value::as_f64)
        .map(|m| m - 1.0));
    let mut v = exclusive.or(min).unwrap_or(1.0);
    if let Some(max) = max {
        v = v.min(max);
    }
    if let Some(step) = s.get("multipleOf").and_then(Value::as_f64) {
        v = (v / step).ceil() * step;
    }
    if integer { json!(v as i64) } else { json!(v) }
}

fn string(s: &Value) -> Value {
    let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(1) as usize;
    let max = s
        .get("maxLength")
        .and_then(Value::as_u64)
        .unwrap_or(u64::MAX) as usize;
    if let Some(p) = s.get("pattern").and_then(Value::as_str) {
        use rand::{RngExt, SeedableRng};
        let generator = rand_regex::Regex::compile(&strip_anchors(p), 6)
            .unwrap_or_else(|e| panic!("pattern {p}: {e}"));
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        // Samples of a pattern rand_regex only approximates (anchors inside groups, escapes it
        // reads otherwise) are kept only where the pattern, as jsonschema runs it, matches.
        let matches = |t: &String| matches_pattern(s, t);
        let hit = (0..200)
            .map(|_| rng.sample::<String, _>(&generator))
            .filter(|t| (min..=max).contains(&t.chars().count()))
            .find(matches);
        return json!(
            hit.unwrap_or_else(|| panic!("pattern {p}: no sample within length {min}..={max}"))
        );
    }
    let base = match s.get("format").and_then(Value::as_str) {
        Some("date-time") => "2026-01-01T00:00:00Z".to_string(),
        Some("date") => "2026-01-01".to_string(),
        Some("email") => "a@example.com".to_string(),
        Some("uri") | Some("url") => "https://example.com/x".to_string(),
        Some("uuid") => "3fa85f64-5717-4562-b3fc-2c963f66afa6".to_string(),
        _ => "x".to_string(),
    };
    let text = if base.len() >= min {
        base
    } else {
        base.repeat(min)
    };
    json!(text.chars().take(max).collect::<String>())
}
