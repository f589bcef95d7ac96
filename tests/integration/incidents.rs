//! From the page to the restore: the demo's Channels API (which really clears what a PUT
//! omits) behind a sidecar in observe mode, a stale agent's PUT erasing channel 7's
//! `graphicsElementIds`, told as one incident with the value it held, put back by the restore
//! the incident carries, and the same story from `driftwatch incident`.

use std::net::SocketAddr;

use serde_json::{Value, json};

use super::sidecar::{RawResponse, config, raw, start};
use super::silent_clears::{api_answering_204, demo_api, stale_body};
use super::util::eventually;

const TOKEN: &str = "incident-admin-token-0123";

fn token_file(name: &str) -> std::path::PathBuf {
    let file = std::env::temp_dir().join(format!("driftwatch-{name}-{}", std::process::id()));
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    file
}

/// A request through the proxy, as the agent's tool sends it.
fn request(method: &str, path: &str, rid: &str, tool: &str, body: Option<&Value>) -> Vec<u8> {
    let body = body.map(Value::to_string).unwrap_or_default();
    format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer alice\r\nx-request-id: {rid}\r\nx-mcp-tool: {tool}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The read is remembered (and its values held) after its last byte: wait for it.
async fn remembered(admin: SocketAddr) {
    eventually("the read remembered", || async {
        let m = super::sidecar::scrape(admin).await;
        (super::sidecar::sample(&m, "driftwatch_memory_entries") >= 1.0).then_some(())
    })
    .await;
}

/// The stale agent through `dw`: it reads channel 7 (`g1`), and once driftwatch remembers
/// the read, PUTs it back renamed without graphicsElementIds (`p1`, with `headers`); the
/// PUT's status.
async fn stale_rename(dw: &super::sidecar::Running, headers: &[&str]) -> u16 {
    let path = "/api/v1/channels/7";
    let read = raw(dw.addr, &request("GET", path, "g1", "get_channel", None))
        .await
        .json();
    remembered(dw.admin).await;
    let mut put = request(
        "PUT",
        path,
        "p1",
        "update_channel",
        Some(&stale_body(&read)),
    );
    let end = put.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    for header in headers {
        put.splice(end..end, format!("\r\n{header}").into_bytes());
    }
    raw(dw.addr, &put).await.status
}

/// An incident's timeline as (what, request id), in order.
fn story(incident: &Value) -> Vec<(&str, &str)> {
    (incident["timeline"].as_array().unwrap().iter())
        .map(|s| {
            (
                s["what"].as_str().unwrap(),
                s["request_id"].as_str().unwrap(),
            )
        })
        .collect()
}

async fn incidents(admin: SocketAddr, query: &str, token: Option<&str>) -> RawResponse {
    let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    let ask =
        format!("GET /incidents{query} HTTP/1.1\r\nhost: admin\r\n{auth}connection: close\r\n\r\n");
    raw(admin, ask.as_bytes()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_agents_clear_is_one_incident_whose_restore_gives_the_value_back_and_keeps_the_edit()
 {
    let api = demo_api().await;
    let file = token_file("incident-token");
    let dw = start(config(&format!("http://{api}"), |c| {
        c.admin.token_file = Some(file.clone());
        c.incidents.keep_values = true;
    }))
    .await;
    let path = "/api/v1/channels/7";
    let read = raw(dw.addr, &request("GET", path, "g1", "get_channel", None))
        .await
        .json();
    assert_eq!(read["graphicsElementIds"], json!([3, 7]));
    let put = request(
        "PUT",
        path,
        "p1",
        "update_channel",
        Some(&stale_body(&read)),
    );
    remembered(dw.admin).await;
    assert_eq!(
        raw(dw.addr, &put).await.status,
        200,
        "observe mode forwards it"
    );

    // Guarded: without the token, nothing.
    assert_eq!(incidents(dw.admin, "", None).await.status, 401);
    let found = eventually("the clear confirmed as an incident", || async {
        let all = incidents(dw.admin, "", Some(TOKEN)).await.json();
        let first = all["incidents"][0].clone();
        (first["state"] == "cleared").then_some(all)
    })
    .await;
    let list = found["incidents"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{found:#}");
    let i = &list[0];
    assert_eq!(i["id"], "p1");
    assert_eq!(i["path"], path, "the path with its values");
    assert_eq!(i["fields"], json!(["graphicsElementIds"]));
    assert_eq!(i["tool"], "update_channel");
    assert_eq!(i["operation"], "updateChannel");
    assert_eq!(
        story(i),
        [("read", "g1"), ("write", "p1"), ("answer", "p1")],
        "{i:#}"
    );
    assert_eq!(i["timeline"][0]["tool"], "get_channel");
    assert_eq!(
        i["kept"]["lost"],
        json!([{"field": "graphicsElementIds", "value": [3, 7]}])
    );

    // The API did clear it; the restore puts it back and keeps the agent's rename.
    let now = raw(dw.addr, &request("GET", path, "g2", "get_channel", None))
        .await
        .json();
    assert_eq!(now["graphicsElementIds"], json!([]));
    // The spec has a merge-patch PATCH on the channel: only the lost field goes.
    let restore = &i["kept"]["restore"];
    assert_eq!(restore["method"], "PATCH");
    assert_eq!(restore["content_type"], "application/merge-patch+json");
    assert_eq!(restore["body"], json!({"graphicsElementIds": [3, 7]}));
    let sent = request(
        "PATCH",
        restore["path"].as_str().unwrap(),
        "r1",
        "restore",
        Some(&restore["body"]),
    );
    let direct = raw(api, &sent).await;
    assert_eq!(
        direct.status,
        200,
        "{}",
        String::from_utf8_lossy(&direct.body)
    );
    let after = raw(api, &request("GET", path, "g3", "get_channel", None))
        .await
        .json();
    assert_eq!(after["graphicsElementIds"], json!([3, 7]));
    assert_eq!(after["name"], "Retro TV HD", "the agent's edit kept");

    // The same story from the CLI, as text.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["incident", "p1", "--admin", &format!("http://{}", dw.admin)])
        .arg("--token-file")
        .arg(&file)
        .args(["--api", &format!("http://{api}")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for said in [
        "incident p1: graphicsElementIds CLEARED",
        &format!("PUT {path}"),
        "tool: update_channel",
        "g1",
        "graphicsElementIds = [3,7]",
        &format!("curl -X PATCH 'http://{api}{path}'"),
    ] {
        assert!(text.contains(said), "no {said:?} in:\n{text}");
    }
    let markdown = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args([
            "incident",
            "--format",
            "markdown",
            "--admin",
            &format!("http://{}", dw.admin),
        ])
        .arg("--token-file")
        .arg(&file)
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&markdown.stdout);
    assert!(
        md.contains("## Silent clear `p1`: graphicsElementIds"),
        "{md}"
    );
    assert!(md.contains("| `g1` |") || md.contains("`g1`"), "{md}");
    let _ = std::fs::remove_file(&file);
}

/// Values are the API's data: kept only where the operator says so, and then only behind the
/// admin token; off, the incident tells the story without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_are_kept_only_when_asked_and_only_behind_the_admin_token() {
    let mut c = config("http://127.0.0.1:1", |c| c.incidents.keep_values = true);
    let refused = driftwatch::settings::Settings::from_config(&c)
        .err()
        .unwrap();
    assert!(
        refused.to_string().contains("admin.token_file"),
        "{refused}"
    );
    c.incidents.keep_values = false;

    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), |_| {})).await;
    assert_eq!(stale_rename(&dw, &[]).await, 200);
    let found = eventually("the incident", || async {
        let all = incidents(dw.admin, "?field=graphicsElementIds", None)
            .await
            .json();
        (all["incidents"][0]["state"] == "cleared").then_some(all)
    })
    .await;
    let i = &found["incidents"][0];
    assert_eq!(i["id"], "p1");
    assert!(i.get("kept").is_none(), "{i:#}");
    // The read's tool, from the memory's snapshot of it (no values kept).
    assert_eq!(i["timeline"][0]["tool"], "get_channel", "{i:#}");
    // No admin token: the path's template, never the resource's ids.
    assert_eq!(i["path"], "/api/v1/channels/{id}", "{i:#}");
    assert!(!found.to_string().contains("[3,7]"), "{found}");
    let none = incidents(dw.admin, "?tool=another_tool", None).await.json();
    assert_eq!(none["incidents"], json!([]));
    assert_eq!(incidents(dw.admin, "?what=1", None).await.status, 400);
}

/// Two replicas on one Redis: the read through A and the write through B make one incident,
/// the same from either replica, with the value B took from A's read; the store's bytes hold
/// neither the value nor the resource's path (sealed with `incidents.seal_key_file`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_replicas_the_read_here_and_the_write_there_are_one_incident_sealed_in_the_store() {
    use super::shared_memory::{RedisServer, hash_key, replica, stored};
    let api = demo_api().await;
    let redis = RedisServer::start();
    let conn = redis.client().await;
    let (key, token) = (hash_key("incidents"), token_file("incidents-replicas"));
    let seal = hash_key("incidents-seal");
    let replica = |mode| {
        let mut c = replica(api, &redis, &key, mode);
        c.admin.token_file = Some(token.clone());
        c.incidents.keep_values = true;
        c.incidents.seal_key_file = Some(seal.clone());
        c
    };
    let a = start(replica(driftwatch::policy::Mode::Observe)).await;
    let b = start(replica(driftwatch::policy::Mode::Observe)).await;
    let path = "/api/v1/channels/7";
    let read = raw(a.addr, &request("GET", path, "g1", "get_channel", None))
        .await
        .json();
    // The snapshot in the store, and the sealed values queued before it, with it.
    stored(&a, 1.0).await;
    let put = request(
        "PUT",
        path,
        "p1",
        "update_channel",
        Some(&stale_body(&read)),
    );
    assert_eq!(raw(b.addr, &put).await.status, 200);

    let mut seen = Vec::new();
    for dw in [&a, &b] {
        let found = eventually("the incident in the store", || async {
            let all = incidents(dw.admin, "", Some(TOKEN)).await.json();
            (all["incidents"][0]["state"] == "cleared").then_some(all)
        })
        .await;
        seen.push(found["incidents"].clone());
    }
    assert_eq!(seen[0], seen[1], "the same incident from either replica");
    let i = &seen[0][0];
    assert_eq!(
        (i["id"].as_str(), i["path"].as_str()),
        (Some("p1"), Some(path))
    );
    assert_eq!(
        story(i),
        [("read", "g1"), ("write", "p1"), ("answer", "p1")],
        "{i:#}"
    );
    assert_eq!(
        i["timeline"][0]["tool"], "get_channel",
        "the read's tool, from A"
    );
    assert_eq!(
        i["kept"]["lost"],
        json!([{"field": "graphicsElementIds", "value": [3, 7]}])
    );

    // The store's raw bytes: every key's, whatever its type.
    let mut conn = conn.clone();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        keys.iter().any(|k| k.starts_with("driftwatch:i:")),
        "{keys:?}"
    );
    assert!(
        keys.iter().any(|k| k.starts_with("driftwatch:iv:")),
        "{keys:?}"
    );
    assert!(
        keys.iter().any(|k| k.starts_with("driftwatch:v:")),
        "{keys:?}"
    );
    for k in &keys {
        let kind: String = redis::cmd("TYPE")
            .arg(k)
            .query_async(&mut conn)
            .await
            .unwrap();
        let mut read = match kind.as_str() {
            "string" => redis::cmd("GET"),
            "list" => redis::cmd("LRANGE"),
            "zset" => redis::cmd("ZRANGE"),
            "set" => redis::cmd("SMEMBERS"),
            other => panic!("{k} is a {other}"),
        };
        read.arg(k);
        if kind == "list" || kind == "zset" {
            read.arg(0).arg(-1);
        }
        let value: redis::Value = read.query_async(&mut conn).await.unwrap();
        let bytes = raw_bytes(value);
        for secret in ["[3,7]", "channels/7", "Retro TV"] {
            let held = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(
                !held,
                "{k} holds {secret:?}: {}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
}

/// Every byte a store's answer holds, one after the other.
fn raw_bytes(value: redis::Value) -> Vec<u8> {
    match value {
        redis::Value::BulkString(b) => b,
        redis::Value::SimpleString(t) => t.into_bytes(),
        redis::Value::Array(items) | redis::Value::Set(items) => {
            items.into_iter().flat_map(raw_bytes).collect()
        }
        other => format!("{other:?}").into_bytes(),
    }
}

/// The story's other endings: a write the API refused (412) lost nothing and opens no
/// incident; a write answered 204 is told cleared by the next read, whose request id (the
/// exemplar's) finds the incident; a write whose next read shows the field kept is told
/// survived, with no restore.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_opens_none_a_later_read_clears_or_closes_it() {
    let path = "/api/v1/channels/7";
    let file = token_file("incident-endings");
    let keep = |c: &mut driftwatch::config::Config| {
        c.admin.token_file = Some(file.clone());
        c.incidents.keep_values = true;
    };
    let ask = |dw: SocketAddr, q: &'static str| async move {
        incidents(dw, q, Some(TOKEN)).await.json()["incidents"].clone()
    };

    // Refused: the demo API answers 412 to a stale If-Match, and changes nothing.
    let api = demo_api().await;
    let dw = start(config(&format!("http://{api}"), keep)).await;
    assert_eq!(stale_rename(&dw, &["if-match: \"stale\""]).await, 412);
    // The risk was recorded (its answer read), and no incident came of it.
    eventually("the refused write's risk recorded", || async {
        let m = super::sidecar::scrape(dw.admin).await;
        let at_risk = "driftwatch_silent_clears_total{operation=\"updateChannel\",field=\"graphicsElementIds\",stage=\"at_risk\"}";
        (super::sidecar::sample(&m, at_risk) >= 1.0).then_some(())
    })
    .await;
    assert_eq!(
        ask(dw.admin, "").await,
        json!([]),
        "nothing lost, no incident"
    );

    // Answered 204: the next read confirms, and its request id finds the incident.
    let api = api_answering_204().await;
    let dw = start(config(&format!("http://{api}"), keep)).await;
    assert_eq!(stale_rename(&dw, &[]).await, 204);
    let at_risk = eventually("the write's incident", || async {
        let found = ask(dw.admin, "?id=p1").await;
        (found[0]["state"] == "at_risk").then_some(found)
    })
    .await;
    assert!(at_risk[0]["kept"]["restore"].is_object(), "{at_risk:#}");
    raw(dw.addr, &request("GET", path, "g2", "get_channel", None)).await;
    let cleared = eventually("the later read's clear", || async {
        let found = ask(dw.admin, "?id=g2").await;
        (found[0]["state"] == "cleared").then_some(found)
    })
    .await;
    let story: Vec<&str> = (cleared[0]["timeline"].as_array().unwrap().iter())
        .map(|s| s["what"].as_str().unwrap())
        .collect();
    assert_eq!(story, ["read", "write", "read_after"], "{cleared:#}");
    assert_eq!(cleared[0]["id"], "p1");

    // Kept: an API whose 204 PUT keeps what it omits; the next read shows the field held.
    let state = std::sync::Arc::new(std::sync::Mutex::new(Value::Object(
        driftwatch::demo::api::seed(),
    )));
    let responder = std::sync::Arc::new(move |r: &super::upstream::Recorded| -> (u16, String) {
        let s = state.lock().unwrap();
        match r.method.as_str() {
            "PUT" => (204, String::new()),
            _ => (200, s.to_string()),
        }
    });
    let api = super::upstream::start(responder, std::time::Duration::ZERO, None)
        .await
        .addr;
    let dw = start(config(&format!("http://{api}"), keep)).await;
    assert_eq!(stale_rename(&dw, &[]).await, 204);
    eventually("the write's incident", || async {
        (ask(dw.admin, "?id=p1").await[0]["state"] == "at_risk").then_some(())
    })
    .await;
    raw(dw.addr, &request("GET", path, "g2", "get_channel", None)).await;
    let survived = eventually("the fields shown kept", || async {
        let found = ask(dw.admin, "?id=p1").await;
        (found[0]["state"] == "survived").then_some(found)
    })
    .await;
    assert!(survived[0]["kept"].get("restore").is_none(), "{survived:#}");
    assert_eq!(survived[0]["kept"]["lost"][0]["value"], json!([3, 7]));
    let _ = std::fs::remove_file(&file);
}

/// In the store, incidents are bounded as in the ring: past `incidents.max`, the oldest go
/// with their stories and values; read values keep to an index of their own, so the
/// snapshots' bound is not shared with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_keeps_at_most_max_incidents_their_keys_going_with_them() {
    use super::shared_memory::{RedisServer, hash_key, replica, stored};
    // An API whose channel always holds the list, and whose PUT answers what it kept (the
    // list emptied when omitted): every stale rename is a clear.
    let responder = std::sync::Arc::new(|r: &super::upstream::Recorded| -> (u16, String) {
        let channel = Value::Object(driftwatch::demo::api::seed());
        match r.method.as_str() {
            "PUT" => {
                let mut sent: Value = serde_json::from_slice(&r.body).unwrap();
                sent["graphicsElementIds"] = json!([]);
                (200, sent.to_string())
            }
            _ => (200, channel.to_string()),
        }
    });
    let api = super::upstream::start(responder, std::time::Duration::ZERO, None)
        .await
        .addr;
    let redis = RedisServer::start();
    let mut conn = redis.client().await;
    let (key, token, seal) = (
        hash_key("incidents-bound"),
        token_file("incidents-bound"),
        hash_key("incidents-bound-seal"),
    );
    let mut c = replica(api, &redis, &key, driftwatch::policy::Mode::Observe);
    c.admin.token_file = Some(token.clone());
    c.incidents.keep_values = true;
    c.incidents.seal_key_file = Some(seal);
    c.incidents.max = 2;
    let dw = start(c).await;
    let path = "/api/v1/channels/7";
    for n in 1..=3 {
        let (g, p) = (format!("g{n}"), format!("p{n}"));
        let read = raw(dw.addr, &request("GET", path, &g, "get_channel", None))
            .await
            .json();
        stored(&dw, 1.0).await;
        let put = request("PUT", path, &p, "update_channel", Some(&stale_body(&read)));
        assert_eq!(raw(dw.addr, &put).await.status, 200);
        eventually("the clear told to the store", || async {
            let found = incidents(dw.admin, &format!("?id={p}"), Some(TOKEN))
                .await
                .json();
            (found["incidents"][0]["state"] == "cleared").then_some(())
        })
        .await;
    }
    let all = incidents(dw.admin, "", Some(TOKEN)).await.json();
    let ids: Vec<&str> = (all["incidents"].as_array().unwrap().iter())
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["p3", "p2"], "{all:#}");
    let keys = |pattern: &'static str| {
        let mut conn = conn.clone();
        async move {
            let found: Vec<String> = redis::cmd("KEYS")
                .arg(pattern)
                .query_async(&mut conn)
                .await
                .unwrap();
            found.len()
        }
    };
    assert_eq!(keys("driftwatch:i:*").await, 2);
    assert!(keys("driftwatch:iv:*").await <= 2);
    let indexed: usize = redis::cmd("ZCARD")
        .arg("driftwatch:index")
        .query_async(&mut conn)
        .await
        .unwrap();
    let values: usize = redis::cmd("ZCARD")
        .arg("driftwatch:vindex")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        (indexed, values),
        (1, 1),
        "one resource: one snapshot, one read's values"
    );
}
