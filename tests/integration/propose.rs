//! `overlay propose` against a client that names its query parameters to write the proposal
//! (issue 64): the names from traffic hold every YAML line break, quotes, a comment mark, a
//! mapping indicator and a document marker. The proposal, applied by `overlay apply` and by
//! `oas-patch` (an Overlay tool nobody here wrote), adds the one real parameter and nothing
//! else: every path of the spec survives.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::overlays::{driftwatch, ours, theirs};
use super::util::example;

/// The two list operations of the Channels spec the client pages.
const LISTS: [&str; 2] = ["/api/v1/channels", "/api/v1/playouts"];

/// What the client sends as parameter names (after `evil`, which no comment may hold): the repro
/// (a CR then an action that removes every path), and each of YAML's line breaks, quotes, `#`,
/// `: ` and a document marker. None is a name a parameter can have.
const HOSTILE: &[&str] = &[
    "\r  - target: $.paths.*\r    remove: true\r  #",
    "nel\u{85}  - target: $.paths.*\u{85}    remove: true",
    "ls\u{2028}  - target: $.paths.*\u{2028}    remove: true",
    "ps\u{2029}  - target: $.paths.*\u{2029}    remove: true",
    "lf\n  - target: $.paths.*\n    remove: true",
    "quote\"d",
    "single'quoted",
    "hash # mark",
    "key: value",
    "\r---\r",
    "tab\tname",
];

/// Names a parameter can have, proposed (quoted as the others would be): two of them YAML's
/// document markers.
const FIT: [&str; 3] = ["---", "...", "page"];

fn dir() -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("driftwatch-propose-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Four GETs, two to each list operation, each answered 200, each with every name unknown.
/// The request id is the client's too (`x-request-id`).
fn events(dir: &Path) -> PathBuf {
    let mut names: Vec<String> = HOSTILE.iter().map(|h| format!("evil{h}")).collect();
    names.extend(FIT.map(String::from));
    let findings: Vec<Value> = names
        .iter()
        .map(|n| json!({"kind": "unknown_query_param", "field": n, "location": "query", "suggestion": null, "observed": "string", "severity": "error", "blame": "client", "action": "log"}))
        .collect();
    let mut text = String::new();
    for (i, template) in LISTS.iter().chain(&LISTS).enumerate() {
        let event = json!({
            "timestamp": format!("2026-12-06T10:00:0{i}Z"),
            "request_id": format!("evil{i}\r  - target: $.paths\r    remove: true\r  #"),
            "traceparent": null, "operation": null, "method": "GET",
            "path_template": template, "path": template, "status": 200,
            "action": "forwarded", "mode": "observe", "spec_revision": "abc", "findings": findings,
        });
        text.push_str(&event.to_string());
        text.push('\n');
    }
    let path = dir.join("events.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn names_a_client_chose_are_only_ever_quoted_values_and_the_proposal_changes_only_its_targets() {
    let dir = dir();
    let spec = example("channels.openapi.yaml");
    let events = events(&dir);
    let (code, proposal, err) = driftwatch(&[
        "overlay",
        "propose",
        "--spec",
        spec.to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let proposed = dir.join("proposed.yaml");
    std::fs::write(&proposed, &proposal).unwrap();
    let mut wrong = Vec::new();

    // Read as `overlay apply` reads it: the actions are the fit names on each list, no more.
    let read: Value = yaml_serde::from_str(&proposal).unwrap();
    let actions = read["actions"].as_array().cloned().unwrap_or_default();
    let named: Vec<(&str, &str)> = (actions.iter())
        .map(|a| {
            (
                a["update"]["parameters"][0]["name"].as_str().unwrap_or("?"),
                a["target"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    let targets: Vec<String> = LISTS
        .iter()
        .map(|t| format!("$.paths['{t}'].get"))
        .collect();
    let expected: Vec<(&str, &str)> = (FIT.iter())
        .flat_map(|n| targets.iter().map(move |t| (*n, t.as_str())))
        .collect();
    if named != expected {
        wrong.push(format!("proposed {named:?}, expected {expected:?}"));
    }
    for a in &actions {
        let keys: Vec<&String> = a.as_object().unwrap().keys().collect();
        if keys
            .iter()
            .any(|k| !["target", "update"].contains(&k.as_str()) && !k.starts_with("x-"))
        {
            wrong.push(format!("an action with {keys:?}: {a}"));
        }
    }
    // What the client sent is in no comment.
    for line in proposal.lines().filter(|l| l.trim_start().starts_with('#')) {
        if line.contains("evil") || line.contains("target:") || FIT.iter().any(|n| line.contains(n))
        {
            wrong.push(format!("a comment holds traffic: {line:?}"));
        }
    }
    // The unfit names are counted in the summary line.
    let unfit = format!("{} findings not proposed", 4 * HOSTILE.len());
    if !err.contains(&unfit) {
        wrong.push(format!("the summary does not count the unfit names: {err}"));
    }

    // Applied, the spec gains the fit names on each list operation and nothing else changes.
    let before: Value = yaml_serde::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    let (after, _) = ours(&spec, &proposed);
    let mut lost = Vec::new();
    pointers(&before, String::new(), &mut |p| {
        if after.pointer(p).is_none() {
            lost.push(p.to_string());
        }
    });
    if !lost.is_empty() {
        wrong.push(format!(
            "{} paths of the spec lost: {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        ));
    }
    let mut undone = after.clone();
    for template in LISTS {
        let op = &mut undone["paths"][template]["get"];
        for name in FIT.iter().rev() {
            let added = op["parameters"].as_array_mut().and_then(Vec::pop);
            let parameter = json!({"name": name, "in": "query", "schema": {"type": "string"}});
            if added.as_ref() != Some(&parameter) {
                wrong.push(format!("{template}: added {added:?}, not {name}"));
            }
        }
    }
    let channels = &mut undone["paths"][LISTS[0]]["get"];
    if channels["parameters"] == json!([]) {
        // The spec declares none there: the overlay made the list.
        channels.as_object_mut().unwrap().remove("parameters");
    }
    if undone != before {
        wrong.push("the proposal changed more than the parameters it names".into());
    }

    // oas-patch reads the same overlay and makes the same document of it.
    if theirs(&spec, &proposed) != after {
        wrong.push("oas-patch made another document of the proposal".into());
    }
    assert!(wrong.is_empty(), "{wrong:#?}\n{proposal}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every JSON pointer in `v`, each object key and array index a step.
fn pointers(v: &Value, at: String, each: &mut dyn FnMut(&str)) {
    each(&at);
    let step = |k: &str| format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
    match v {
        Value::Object(map) => map.iter().for_each(|(k, v)| pointers(v, step(k), each)),
        Value::Array(items) => {
            (items.iter().enumerate()).for_each(|(i, v)| pointers(v, step(&i.to_string()), each))
        }
        _ => {}
    }
}

/// A slice of Keycloak's admin API as its spec has it: based at `/admin/realms`.
const KEYCLOAK: &str = r##"{"openapi": "3.0.3", "info": {"title": "Keycloak Admin (part)", "version": "26"},
 "servers": [{"url": "https://sso.example.com/admin/realms"}],
 "paths": {
  "/{realm}/users": {"get": {"operationId": "getUsers",
    "parameters": [{"name": "realm", "in": "path", "required": true, "schema": {"type": "string"}},
                   {"name": "max", "in": "query", "schema": {"type": "integer"}}],
    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/User"}}}}}}}},
  "/{realm}/users/{user-id}": {
    "parameters": [{"name": "realm", "in": "path", "required": true, "schema": {"type": "string"}},
                   {"name": "user-id", "in": "path", "required": true, "schema": {"type": "string"}}],
    "get": {"operationId": "getUser", "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/User"}}}}}},
    "put": {"operationId": "putUser", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/User"}}}}, "responses": {"204": {"description": "ok"}}}}},
 "components": {"schemas": {"User": {"type": "object", "properties": {
    "id": {"type": "string"}, "username": {"type": "string"}, "enabled": {"type": "boolean"}}}}}}"##;

/// One event as the sidecar writes it (default config: a path's values as `*`).
fn session_event(
    n: usize,
    method: &str,
    template: Option<&str>,
    path: &str,
    status: u16,
    findings: Value,
) -> Value {
    json!({
        "timestamp": format!("2026-12-08T09:{:02}:{:02}.{:03}Z", n / 600, n / 10 % 60, n % 10 * 100),
        "request_id": format!("kc-{n:04}"), "traceparent": null, "tool": "keycloak", "operation": null,
        "method": method, "path_template": template, "path": path, "status": status,
        "action": "forwarded", "mode": "observe", "spec_revision": "r1", "findings": findings,
    })
}

/// A finding as the sidecar writes it.
fn finding(kind: &str, field: &str, location: &str, observed: Option<&str>) -> Value {
    json!({"kind": kind, "field": field, "location": location, "observed": observed,
           "suggestion": null, "severity": "warning", "blame": "client", "action": "log"})
}

/// An MCP server in front of Keycloak under `wrap`, 80 tool calls: each starts with a token
/// (`POST /realms/master/protocol/openid-connect/token`, an event as a sidecar before the
/// base-path rule wrote it: `unknown_operation`), then lists users with
/// `briefRepresentation=true` (a boolean argument the spec lacks; `first=0` on half of them),
/// reads a user (the answer carries `access` and `createdTimestamp`), reads a user's groups
/// (an endpoint the spec lacks), or reads a user with `userProfileMetadata=false`. A parameter
/// refused with 400 twice, and an endpoint seen once. PUTs of users are clean: no event.
fn keycloak_session(dir: &Path) -> (PathBuf, usize) {
    let mut events = Vec::new();
    let user = "/admin/realms/*/users/*";
    let query = |name, observed| finding("unknown_query_param", name, "query", Some(observed));
    let answer = json!([
        finding("undeclared_response_field", "/access", "response", None),
        finding(
            "undeclared_response_field",
            "/createdTimestamp",
            "response",
            None
        )
    ]);
    let mut n = 0;
    let mut next = |events: &mut Vec<Value>, method, template, path, status, findings| {
        events.push(session_event(n, method, template, path, status, findings));
        n += 1;
    };
    for call in 0..80 {
        let token = json!([finding("unknown_operation", "", "path", None)]);
        next(
            &mut events,
            "POST",
            None,
            "/realms/master/protocol/*/*",
            200,
            token,
        );
        let (method, template, path, findings) = match call % 4 {
            0 if call % 8 == 0 => (
                "GET",
                Some("/{realm}/users"),
                "/admin/realms/*/users",
                json!([
                    query("briefRepresentation", "boolean"),
                    query("first", "integer")
                ]),
            ),
            0 => (
                "GET",
                Some("/{realm}/users"),
                "/admin/realms/*/users",
                json!([query("briefRepresentation", "boolean")]),
            ),
            1 => (
                "GET",
                Some("/{realm}/users/{user-id}"),
                user,
                answer.clone(),
            ),
            2 => (
                "GET",
                None,
                "/admin/realms/*/users/*/groups",
                json!([finding("unknown_operation", "", "path", None)]),
            ),
            _ => {
                let mut both = answer.as_array().unwrap().clone();
                both.push(query("userProfileMetadata", "boolean"));
                (
                    "GET",
                    Some("/{realm}/users/{user-id}"),
                    user,
                    Value::Array(both),
                )
            }
        };
        next(&mut events, method, template, path, 200, findings);
    }
    for _ in 0..2 {
        let refused = json!([query("exact", "string")]);
        next(
            &mut events,
            "GET",
            Some("/{realm}/users"),
            "/admin/realms/*/users",
            400,
            refused,
        );
    }
    let once = json!([finding("unknown_operation", "", "path", None)]);
    next(
        &mut events,
        "GET",
        None,
        "/admin/realms/*/users/*/sessions",
        200,
        once,
    );
    let text: String = events.iter().map(|e| format!("{e}\n")).collect();
    let path = dir.join("keycloak-events.jsonl");
    std::fs::write(&path, text).unwrap();
    (path, events.len())
}

/// Issue 66, item 6: on a real session of 160 requests `overlay propose` proposed nothing at
/// its defaults, and lower, the token endpoint as `/realms/master/protocol/{param1}/{param2}`
/// and a boolean argument's parameter as `string`. On a session of that shape, at the
/// defaults: the boolean is `boolean`, the endpoint the spec lacks keeps its words with its
/// values named as the spec names them, the token endpoint (outside the spec's base path:
/// another document's, docs/operations.md) is not proposed into this one, and nothing rests
/// on one request or on what the API refused. Applied by driftwatch and by oas-patch: one
/// document, holding each action.
#[test]
fn a_short_session_proposes_what_it_shows_with_words_kept_and_types_as_sent() {
    let dir = dir().join("keycloak");
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("keycloak.json");
    std::fs::write(&spec, KEYCLOAK).unwrap();
    let (events, count) = keycloak_session(&dir);
    let (code, proposal, err) = driftwatch(&[
        "overlay",
        "propose",
        "--spec",
        spec.to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    eprintln!("{count} events; {err}{proposal}");
    let mut wrong = Vec::new();
    let read: Value = yaml_serde::from_str(&proposal).unwrap();
    let actions = read["actions"].as_array().cloned().unwrap_or_default();
    let said: Vec<String> = actions
        .iter()
        .map(|a| {
            let update = a["update"].as_object().unwrap();
            let what = match update.keys().next().map(String::as_str) {
                Some("parameters") => format!(
                    "{} {}",
                    a["update"]["parameters"][0]["name"], a["update"]["parameters"][0]["schema"]
                ),
                Some("properties") => a["update"]["properties"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(","),
                _ => update.keys().cloned().collect::<Vec<_>>().join(","),
            };
            format!("{} {what}", a["target"].as_str().unwrap())
        })
        .collect();
    let expected = [
        r#"$.paths['/{realm}/users'].get "briefRepresentation" {"type":"boolean"}"#,
        r#"$.paths['/{realm}/users'].get "first" {"type":"integer"}"#,
        r#"$.paths['/{realm}/users/{user-id}'].get "userProfileMetadata" {"type":"boolean"}"#,
        "$.paths /{realm}/users/{user-id}/groups",
        "$.components.schemas['User'] access",
        "$.components.schemas['User'] createdTimestamp",
    ];
    if said != expected {
        wrong.push(format!("proposed {said:#?}"));
    }
    let brief = &actions[0]["x-driftwatch-evidence"];
    let counts = (
        &brief["requests"],
        &brief["operations"],
        &brief["sent_as"],
        &brief["request_id"],
    );
    if counts
        != (
            &json!(20),
            &json!(1),
            &json!({"boolean": 20}),
            &json!("kc-0001"),
        )
    {
        wrong.push(format!("briefRepresentation's evidence: {brief}"));
    }
    let groups = &actions[3];
    let names = &groups["update"]["/{realm}/users/{user-id}/groups"]["get"]["parameters"];
    let names: Vec<&Value> = names
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| &p["name"])
        .collect();
    if names != [&json!("realm"), &json!("user-id")]
        || groups["x-driftwatch-evidence"]["requests"] != 20
    {
        wrong.push(format!("the groups endpoint: {groups}"));
    }
    for never in ["exact", "sessions", "openid", "protocol", "param1"] {
        if proposal.contains(never) {
            wrong.push(format!("proposed {never}"));
        }
    }
    if !err.contains("80 requests to endpoints outside the spec's base path not proposed") {
        wrong.push(format!("the token endpoint is not counted: {err}"));
    }
    // Read back: it applies, here and by oas-patch, to one document holding each action.
    let proposed = dir.join("proposed.yaml");
    std::fs::write(&proposed, &proposal).unwrap();
    let (after, _) = ours(&spec, &proposed);
    if theirs(&spec, &proposed) != after {
        wrong.push("oas-patch made another document of the proposal".into());
    }
    let users = &after["paths"]["/{realm}/users"]["get"]["parameters"];
    let brief =
        (users.as_array().into_iter().flatten()).find(|p| p["name"] == "briefRepresentation");
    if brief.map(|p| &p["schema"]) != Some(&json!({"type": "boolean"})) {
        wrong.push(format!("applied, /{{realm}}/users has {users}"));
    }
    if after["paths"]["/{realm}/users/{user-id}/groups"]["get"].is_null() {
        wrong.push("applied, the groups endpoint is not there".into());
    }
    assert!(wrong.is_empty(), "{wrong:#?}\n{proposal}");
    std::fs::remove_dir_all(&dir).unwrap();
}
