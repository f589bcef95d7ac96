//! Issue 63, list then update, through a real MCP server under `driftwatch wrap` in enforce
//! mode: the agent lists a collection through driftwatch (a common way to find what to edit),
//! then writes one item back with a full-replace PUT whose body leaves out a field the item
//! holds, because the server's tool has no argument for it. driftwatch must refuse the PUT (409,
//! `silent_clear_risk`) and the API must still hold the field.
//!
//! The server: `@zereight/mcp-gitlab@2.1.64` (npm, scripts/list-update-server), reaching the API
//! by `GITLAB_API_URL`, driven by the official Python SDK (scripts/mcp-session.py). Its
//! `list_webhooks` sends `GET /projects/42/hooks` (no query, no body); its `update_webhook`
//! sends `PUT /projects/42/hooks/7` whose JSON body is the call's arguments less `project_id`,
//! `group_id` and `hook_id` (`buildWebhookMutationBody` in its build/index.js). Its input
//! schema has no `url_variables` and no `emoji_events`, which GitLab's hooks hold.
//!
//! The spec: tests/data/wrap/gitlab-hooks.openapi.yaml, written by hand, NOT GitLab's own. No
//! OpenAPI 3 document of GitLab's REST v4 is in the registries, and GitLab's own PUT of a hook
//! keeps what it is not sent (a merge). The API here is this test's mock, which replaces: a PUT
//! stores exactly its body (beside the fields the API computes, `readOnly` in the spec), so an
//! omitted field is erased; the spec marks the PUT `x-driftwatch-write: replace` because the mock
//! does. The list answers an array of the item GET's schema (one `$ref`), each item carrying
//! its `id`, the value of the item GET's `{hook_id}`.
//!
//! Before issue 63 the PUT was forwarded with `omitted_on_replace` warnings only, and the mock's
//! hook lost `url_variables` and `emoji_events`. Now the list teaches the memory each hook, and
//! the write is refused on what the list showed, with no read of its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::mcp::PYTHON_SDK;
use super::sidecar::admin_get;
use super::upstream::{self, Recorded, Responder, Upstream};
use super::wrap::Session;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The server's entry point (build/index.js), installed when missing.
fn gitlab_server() -> PathBuf {
    let out = Command::new("bash")
        .arg(root().join("scripts/list-update-server"))
        .output()
        .expect("scripts/list-update-server");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    root().join(String::from_utf8(out.stdout).unwrap().trim())
}

/// The project the hooks belong to, and the hook the agent edits.
const PROJECT: u64 = 42;
const HOOK: u64 = 7;

/// The fields the API computes (`readOnly` in the spec): a replace keeps them.
const COMPUTED: [&str; 5] = [
    "id",
    "project_id",
    "created_at",
    "alert_status",
    "disabled_until",
];

/// The project's hooks as GitLab shows them. Hook 7 holds `url_variables` and `emoji_events`,
/// which `update_webhook` has no argument for.
fn seed() -> BTreeMap<u64, Value> {
    let hook = |id: u64, name: &str, url_variables: Value, emoji: bool| {
        json!({
            "id": id, "project_id": PROJECT, "created_at": "2026-11-02T09:14:00Z",
            "alert_status": "executable", "disabled_until": null,
            "url": format!("https://ci.example.com/hooks/{id}/{{token}}"),
            "name": name, "description": format!("{name}: starts the pipeline"),
            "enable_ssl_verification": true,
            "push_events": true, "push_events_branch_filter": "main",
            "branch_filter_strategy": "wildcard",
            "issues_events": false, "confidential_issues_events": false,
            "merge_requests_events": true, "tag_push_events": true,
            "note_events": false, "confidential_note_events": false,
            "job_events": false, "pipeline_events": false, "wiki_page_events": false,
            "deployment_events": false, "feature_flag_events": false,
            "releases_events": false, "milestone_events": false,
            "emoji_events": emoji, "resource_access_token_events": false,
            "custom_webhook_template": "{\"ref\":\"{{ref}}\"}",
            "url_variables": url_variables,
        })
    };
    BTreeMap::from([
        (HOOK, hook(HOOK, "CI", json!([{"key": "token"}]), true)),
        (8, hook(8, "Chat", json!([]), false)),
    ])
}

/// A stateful GitLab mock with replace semantics: `GET .../hooks` answers every hook, `GET
/// .../hooks/{id}` one, `PUT .../hooks/{id}` stores exactly its body beside the computed fields
/// (what it leaves out is erased) and answers the hook as stored; anything else 404.
fn gitlab_api(hooks: Arc<Mutex<BTreeMap<u64, Value>>>) -> Responder {
    Arc::new(move |r: &Recorded| {
        let path = r.target.split('?').next().unwrap_or_default();
        let collection = format!("/api/v4/projects/{PROJECT}/hooks");
        let not_found = (404, r#"{"message":"404 Not found"}"#.to_string());
        let mut hooks = hooks.lock().unwrap();
        if path == collection && r.method == "GET" {
            let all: Vec<&Value> = hooks.values().collect();
            return (200, json!(all).to_string());
        }
        let Some(id) = path
            .strip_prefix(&format!("{collection}/"))
            .and_then(|id| id.parse::<u64>().ok())
        else {
            return not_found;
        };
        let Some(hook) = hooks.get_mut(&id) else {
            return not_found;
        };
        match r.method.as_str() {
            "GET" => (200, hook.to_string()),
            "PUT" => {
                let Ok(Value::Object(body)) = serde_json::from_slice::<Value>(&r.body) else {
                    return (400, r#"{"error":"a JSON object"}"#.into());
                };
                let mut stored: serde_json::Map<String, Value> = COMPUTED
                    .iter()
                    .filter_map(|k| Some((k.to_string(), hook.get(*k)?.clone())))
                    .collect();
                for (k, v) in body {
                    if !COMPUTED.contains(&k.as_str()) {
                        stored.insert(k, v);
                    }
                }
                *hook = Value::Object(stored);
                (200, hook.to_string())
            }
            _ => (405, r#"{"error":"405 Method Not Allowed"}"#.into()),
        }
    })
}

/// `update_webhook`'s arguments as an agent that read hook 7 in the list makes them: every
/// field the tool has, as the list showed it, and a new name.
fn update_arguments(listed: &Value) -> Value {
    // WebhookMutationFields of the server's build/schemas.js that GitLab's hooks show.
    const TOOL_FIELDS: [&str; 22] = [
        "url",
        "name",
        "description",
        "enable_ssl_verification",
        "push_events",
        "push_events_branch_filter",
        "branch_filter_strategy",
        "issues_events",
        "confidential_issues_events",
        "merge_requests_events",
        "tag_push_events",
        "note_events",
        "confidential_note_events",
        "job_events",
        "pipeline_events",
        "wiki_page_events",
        "deployment_events",
        "feature_flag_events",
        "releases_events",
        "milestone_events",
        "resource_access_token_events",
        "custom_webhook_template",
    ];
    let mut args = serde_json::Map::new();
    args.insert("project_id".into(), json!(PROJECT.to_string()));
    args.insert("hook_id".into(), json!(HOOK));
    for field in TOOL_FIELDS {
        args.insert(field.into(), listed[field].clone());
    }
    args.insert("name".into(), json!("CI (main only)"));
    Value::Object(args)
}

/// One line per request the mock saw: method, target, the body's top-level keys.
fn seen(api: &Upstream) -> Vec<String> {
    api.recorded()
        .iter()
        .map(|r| {
            let keys = match serde_json::from_slice::<Value>(&r.body) {
                Ok(Value::Object(o)) => o.keys().cloned().collect::<Vec<_>>().join(","),
                _ if r.body.is_empty() => "-".into(),
                _ => format!("{} bytes, not an object", r.body.len()),
            };
            format!("{} {} body keys [{keys}]", r.method, r.target)
        })
        .collect()
}

/// The event of the PUT (`updateProjectHook`), once driftwatch has recorded it.
async fn put_event(admin: std::net::SocketAddr, api: &Upstream) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // The admin port is up once wrap has started (the SDK starts it).
        let up = tokio::net::TcpStream::connect(admin).await.is_ok();
        let body = if up {
            admin_get(admin, "/findings").await.body
        } else {
            Vec::new()
        };
        if let Ok(findings) = serde_json::from_slice::<Value>(&body) {
            let events = findings["events"].as_array().cloned().unwrap_or_default();
            if let Some(put) = events
                .into_iter()
                .find(|e| e["operation"] == "updateProjectHook" && e["method"] == "PUT")
            {
                return put;
            }
        }
        assert!(
            Instant::now() < deadline,
            "waited 30 s for the PUT's event; the mock saw {:#?}",
            seen(api)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_servers_list_then_full_replace_put_is_refused_in_enforce_and_the_field_kept() {
    let started = Instant::now();
    let server = gitlab_server();
    let hooks = Arc::new(Mutex::new(seed()));
    let api = upstream::start(gitlab_api(hooks.clone()), Duration::ZERO, None).await;
    let spec = root().join("tests/data/wrap/gitlab-hooks.openapi.yaml");
    let wrap: Vec<String> = [
        "--mode",
        "enforce",
        "--spec",
        &spec.display().to_string(),
        "--upstream",
        &format!("http://{}", api.addr),
        "--env",
        "GITLAB_API_URL={url}/api/v4",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let listed = seed()[&HOOK].clone();
    let plan = json!([
        {"call": ["list_webhooks", {"project_id": PROJECT.to_string()}]},
        {"call": ["update_webhook", update_arguments(&listed)]},
    ]);
    let env = [
        (
            "GITLAB_PERSONAL_ACCESS_TOKEN",
            "glpat-placeholder".to_string(),
        ),
        // Its webhook tools are off by default; and no look-up of its newest version on npm.
        ("GITLAB_TOOLSETS", "webhooks".to_string()),
        ("GITLAB_DISABLE_VERSION_CHECK", "true".to_string()),
    ];
    let command = ["node".to_string(), server.display().to_string()];
    let session = Session::start_with("list-then-update", plan, &wrap, &command, PYTHON_SDK, &env);
    let put = put_event(session.admin, &api).await;
    let out = session.release();

    let saw = seen(&api);
    println!("the mock saw:\n  {}", saw.join("\n  "));
    let hook = hooks.lock().unwrap()[&HOOK].clone();
    let omitted: Vec<&String> = (listed.as_object().unwrap().keys())
        .filter(|k| !COMPUTED.contains(&k.as_str()) && hook.get(k.as_str()).is_none())
        .collect();
    println!("the mock's hook 7 now lacks {omitted:?}: {hook}");
    let kinds: Vec<String> = put["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let text = |v: &Value| v.as_str().unwrap_or("?").to_string();
            format!(
                "{} {} ({})",
                text(&f["kind"]),
                text(&f["field"]),
                text(&f["action"])
            )
        })
        .collect();
    println!(
        "the PUT's event: status {} action {} tool {} findings {kinds:?}",
        put["status"], put["action"], put["tool"]
    );
    println!(
        "the calls' results: {}",
        serde_json::to_string_pretty(&out["results"]).unwrap()
    );
    println!(
        "took {:.1} s (install, server start, two calls)",
        started.elapsed().as_secs_f64()
    );

    // The flow is the one described: the server's own tools, the list through driftwatch, and
    // a PUT that cannot carry the two fields because its tool has no argument for them.
    let tools = out["tools"]["tools"].as_array().unwrap();
    let update = tools
        .iter()
        .find(|t| t["name"] == "update_webhook")
        .unwrap();
    let properties = update["inputSchema"]["properties"].as_object().unwrap();
    for field in ["url_variables", "emoji_events"] {
        assert!(!properties.contains_key(field), "the tool has `{field}`");
    }
    let listed_text = out["results"][0]["text"].as_str().unwrap_or_default();
    let listed_back: Value = serde_json::from_str(listed_text)
        .unwrap_or_else(|_| panic!("list_webhooks: {}", out["results"][0]));
    assert_eq!(
        listed_back.as_array().map(Vec::len),
        Some(2),
        "{listed_text}"
    );
    assert_eq!(
        saw.first().map(String::as_str),
        Some("GET /api/v4/projects/42/hooks body keys [-]"),
        "the list went through driftwatch to the API: {saw:#?}"
    );
    assert_eq!(put["tool"], "update_webhook", "{put}");

    // driftwatch refused the PUT: 409, silent_clear_risk naming the field the list showed held.
    let risk: Vec<&Value> = put["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["kind"] == "silent_clear_risk")
        .collect();
    assert!(
        put["status"] == 409
            && put["action"] == "blocked"
            && risk.iter().any(|f| f["field"] == "/url_variables"),
        "driftwatch should refuse the PUT (409, silent_clear_risk /url_variables); it was {} {} \
         with {kinds:?}, and the mock's hook 7 lost {omitted:?}",
        put["action"],
        put["status"]
    );
    // The API never saw it, and hook 7 still holds what the tool could not send. The list
    // decided: driftwatch sent no read of hook 7 of its own.
    assert_eq!(saw.len(), 1, "the list, and nothing else: {saw:#?}");
    assert!(put.get("read_before_write").is_none(), "{put}");
    assert_eq!(
        (&hook["url_variables"], &hook["emoji_events"]),
        (&json!([{"key": "token"}]), &json!(true)),
        "the mock's hook 7 lost what the PUT omitted: {hook:#}"
    );
    assert_eq!(hook, listed, "hook 7 is as it was");
    // And the agent is told: the server passes on GitLab's error text, and wrap adds its own.
    let result = &out["results"][1];
    let text = result.to_string();
    assert!(
        text.contains("409")
            && text.contains("silent_clear_risk")
            && text.contains("url_variables"),
        "the refused call's result says why: {result}"
    );
}
