//! `driftwatch check` as a user runs it: the real binary, real files, exit codes and output.

use std::process::Command;

use serde_json::Value;

use super::util::example;

fn driftwatch(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(args)
        .output()
        .expect("run driftwatch");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn temp(name: &str, contents: &str) -> String {
    let dir = std::env::temp_dir().join(format!("driftwatch-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path.to_string_lossy().into_owned()
}

/// `driftwatch check --format json` on `spec` and `traffic`: exit code and the parsed document.
fn check_json(spec: &std::path::Path, traffic: &str) -> (i32, Value) {
    let (code, stdout, stderr) = driftwatch(&[
        "check",
        "--spec",
        spec.to_str().unwrap(),
        "--traffic",
        traffic,
        "--format",
        "json",
    ]);
    let doc = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    (code, doc)
}

/// (exchange, kind, field) of every finding, in order.
pub fn triples(doc: &Value) -> Vec<(u64, String, String)> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["exchange"].as_u64().unwrap(),
                f["kind"].as_str().unwrap().to_string(),
                f["field"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn t(exchange: u64, kind: &str, field: &str) -> (u64, String, String) {
    (exchange, kind.to_string(), field.to_string())
}

#[test]
fn check_reports_the_example_traffic_as_json_and_fails_on_errors() {
    let traffic = example("channels.traffic.jsonl");
    let (code, doc) = check_json(&example("channels.openapi.yaml"), traffic.to_str().unwrap());
    assert_eq!(code, 1);
    assert_eq!(
        triples(&doc),
        [
            t(1, "unknown_query_param", "page_size"),
            t(2, "param_type_mismatch", "showFiller"),
            t(3, "body_type_mismatch", "/ffmpegProfileId"),
            t(3, "omitted_on_replace", "/graphicsElementIds"),
        ]
    );
    let first = &doc["findings"][0];
    for key in [
        "kind",
        "severity",
        "operation",
        "method",
        "path",
        "location",
        "field",
        "expected",
        "observed",
        "suggestion",
        "exchange",
        "message",
    ] {
        assert!(first.get(key).is_some(), "finding lacks `{key}`: {first}");
    }
    assert_eq!(first["suggestion"], "pageSize");
    assert_eq!(first["path"], "/api/v1/playouts");
    assert_eq!(doc["summary"]["exchanges"], 5);
    assert_eq!(doc["summary"]["by_severity"]["error"], 3);
}

#[test]
fn fail_on_sets_the_exit_code() {
    let spec = example("channels.openapi.yaml");
    let traffic = example("channels.traffic.jsonl");
    let run = |level: &str| {
        driftwatch(&[
            "check",
            "--spec",
            spec.to_str().unwrap(),
            "--traffic",
            traffic.to_str().unwrap(),
            "--fail-on",
            level,
        ])
        .0
    };
    assert_eq!(
        (run("never"), run("critical"), run("error"), run("warning")),
        (0, 0, 1, 1)
    );
    let clean = temp(
        "clean.jsonl",
        "{\"method\":\"GET\",\"url\":\"/api/v1/channels/7\"}\n",
    );
    assert_eq!(
        driftwatch(&[
            "check",
            "--spec",
            spec.to_str().unwrap(),
            "--traffic",
            &clean
        ])
        .0,
        0
    );
}

#[test]
fn text_output_groups_by_operation_and_names_malformed_lines() {
    let spec = example("channels.openapi.yaml");
    let traffic = temp(
        "mixed.jsonl",
        "{\"method\":\"GET\",\"url\":\"/api/v1/playouts?page_size=1\"}\nnot json\n{\"method\":\"GET\",\"url\":\"/api/v1/playouts?page_size=2\"}\n",
    );
    let (code, stdout, _) = driftwatch(&[
        "check",
        "--spec",
        spec.to_str().unwrap(),
        "--traffic",
        &traffic,
    ]);
    assert_eq!(code, 1);
    assert!(
        stdout.starts_with("listPlayouts\n  error    unknown_query_param    query  page_size"),
        "{stdout}"
    );
    assert!(stdout.contains("x2 (exchange 0, 2)"), "{stdout}");
    assert!(
        stdout.contains("malformed line 2: expected ident at line 1 column 2"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(
            "2 exchanges, 2 findings (critical 0, error 2, warning 0, info 0), 1 malformed\n"
        ),
        "{stdout}"
    );
}

#[test]
fn load_errors_exit_2_naming_file_and_pointer() {
    let traffic = example("channels.traffic.jsonl");
    let broken = temp(
        "broken.yaml",
        "openapi: 3.1.0\npaths:\n  /a:\n    get:\n      parameters:\n        - $ref: '#/components/parameters/Gone'\n",
    );
    let swagger = temp("swagger.json", "{\"swagger\":\"2.0\"}");
    let cases = [
        (
            broken.as_str(),
            "broken.yaml: at /paths/~1a/get/parameters/0: $ref `#/components/parameters/Gone` does not resolve",
        ),
        (swagger.as_str(), "Swagger \"2.0\" is not supported"),
        (
            "/nonexistent/api.yaml",
            "/nonexistent/api.yaml: cannot read",
        ),
    ];
    for (spec, message) in cases {
        let (code, _, stderr) = driftwatch(&[
            "check",
            "--spec",
            spec,
            "--traffic",
            traffic.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{spec}");
        assert!(stderr.contains(message), "{stderr}");
    }
}

#[test]
fn har_traffic_is_checked_too() {
    let spec = example("billing.openapi.yaml");
    let har = temp(
        "billing.har",
        r#"{"log":{"version":"1.2","creator":{"name":"test","version":"1"},"entries":[
          {"request":{"method":"GET","url":"https://billing.example.com/v2/invoices?customer_id=c1","headers":[]},"response":{"status":400,"headers":[],"content":{"mimeType":"application/json","text":"{}"}}},
          {"request":{"method":"GET","url":"https://billing.example.com/v2/invoices?customerId=c1","headers":[]},"response":{"status":200,"headers":[],"content":{}}}]}}"#,
    );
    let (code, doc) = check_json(&spec, &har);
    assert_eq!(code, 1);
    assert_eq!(
        triples(&doc),
        [
            t(0, "unknown_query_param", "customer_id"),
            t(0, "missing_required_param", "customerId"),
            // Responses are audited too: listInvoices declares no 400.
            t(0, "undeclared_status", "400")
        ]
    );
}

/// Issue 50: an API whose PUT keeps what it is not sent (it computes it, or merges) answers
/// with the omitted field still holding its value. That answer withdraws the risk, the
/// operation learns the field survives omission (the next write omitting it is not even
/// `omitted_on_replace`), and `--writes` says the write now reads as a merge, and why.
#[test]
fn a_write_whose_own_answer_shows_the_omitted_field_kept_is_no_risk_and_reads_as_merge() {
    let spec = example("channels.openapi.yaml");
    let read = serde_json::Value::Object(driftwatch::demo::api::seed());
    let mut stale = read.clone();
    for key in ["id", "uniqueId", "graphicsElementIds"] {
        stale.as_object_mut().unwrap().shift_remove(key);
    }
    let exchange = |method: &str, rid: &str, at: &str| {
        let mut line = serde_json::json!({"method": method, "url": "/api/v1/channels/7", "time": at,
            "headers": {"authorization": "Bearer a", "content-type": "application/json", "x-request-id": rid},
            "response": {"status": 200, "body": read}});
        if method == "PUT" {
            line["body"] = stale.clone();
        }
        line
    };
    let lines = [
        exchange("GET", "g1", "2026-12-02T10:00:00Z"),
        exchange("PUT", "p1", "2026-12-02T10:00:05Z"),
        exchange("GET", "g2", "2026-12-02T10:00:10Z"),
        exchange("PUT", "p2", "2026-12-02T10:00:15Z"),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let traffic = temp("kept.jsonl", &text);
    let (code, doc) = check_json(&spec, &traffic);
    let found = triples(&doc);
    assert!(
        !found
            .iter()
            .any(|(_, kind, _)| kind.starts_with("silent_clear")),
        "{found:?}"
    );
    assert!(
        !found
            .iter()
            .any(|(n, _, field)| *n == 4 && field == "/graphicsElementIds"),
        "learned: the second write's omission is not reported: {found:?}"
    );
    assert_eq!(code, 0, "{found:?}");
    let (_, _, stderr) = driftwatch(&[
        "check",
        "--spec",
        spec.to_str().unwrap(),
        "--traffic",
        &traffic,
        "--writes",
        "--format",
        "json",
    ]);
    assert!(
        stderr.contains("learned   1 writes, from their answers:")
            && stderr.contains(
                "PUT /api/v1/channels/{id}  merge: its answers kept every omitted field that held a value (graphicsElementIds), and none was emptied"
            ),
        "{stderr}"
    );
}

#[test]
fn check_keeps_the_silent_clear_memory_across_recorded_traffic() {
    let spec = example("channels.openapi.yaml");
    let mut read = serde_json::Value::Object(driftwatch::demo::api::seed());
    let mut stale = read.clone();
    for key in ["id", "uniqueId", "graphicsElementIds"] {
        stale.as_object_mut().unwrap().shift_remove(key);
    }
    let lines = [
        serde_json::json!({"method": "GET", "url": "/api/v1/channels/7", "time": "2026-12-02T10:00:00Z",
            "headers": {"authorization": "Bearer a", "x-request-id": "g1"}, "response": {"status": 200, "body": read}}),
        serde_json::json!({"method": "PUT", "url": "/api/v1/channels/7", "time": "2026-12-02T10:00:05Z",
            "headers": {"authorization": "Bearer a", "content-type": "application/json", "x-request-id": "p1"}, "body": stale,
            "response": {"status": 204}}),
        {
            read["graphicsElementIds"] = serde_json::json!([]);
            serde_json::json!({"method": "GET", "url": "/api/v1/channels/7", "headers": {"authorization": "Bearer a"},
                "response": {"status": 200, "body": read}})
        },
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let traffic = temp("incident.jsonl", &text);
    let (code, doc) = check_json(&spec, &traffic);
    assert_eq!(code, 1);
    assert_eq!(
        triples(&doc),
        [
            t(1, "silent_clear_risk", "/graphicsElementIds"),
            t(2, "silent_clear", "/graphicsElementIds")
        ]
    );
    let clear = &doc["findings"][1]["evidence"];
    assert_eq!(
        (
            clear["read_request_id"].as_str(),
            clear["write_request_id"].as_str()
        ),
        (Some("g1"), Some("p1"))
    );
    assert_eq!(clear["read_at"], "2026-12-02T10:00:00.000Z");
}

#[test]
fn a_write_linked_to_a_get_on_another_template_shares_its_memory_by_parameter_values() {
    let spec = temp(
        "linked.yaml",
        r#"openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /api/v1/channels/{id}/details:
    get:
      operationId: getChannelDetails
      parameters: [{name: id, in: path, required: true, schema: {type: integer}}]
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {type: object, properties: {name: {type: string}, graphicsElementIds: {type: array, items: {type: integer}}}}
  /api/v1/channels/{channelId}:
    put:
      operationId: updateChannel
      x-driftwatch-read: getChannelDetails
      parameters: [{name: channelId, in: path, required: true, schema: {type: integer}}]
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {name: {type: string}, graphicsElementIds: {type: array, items: {type: integer}}}}
      responses: {"200": {description: ok}}
"#,
    );
    let lines = [
        r#"{"method":"GET","url":"/api/v1/channels/7/details","headers":{"x-request-id":"g7"},"response":{"status":200,"body":{"name":"Retro","graphicsElementIds":[3,7]}}}"#,
        r#"{"method":"PUT","url":"/api/v1/channels/8","headers":{"content-type":"application/json"},"body":{"name":"Other"}}"#,
        r#"{"method":"PUT","url":"/api/v1/channels/7","headers":{"content-type":"application/json"},"body":{"name":"Retro HD"}}"#,
    ];
    let traffic = temp("linked.jsonl", &(lines.join("\n") + "\n"));
    let (code, doc) = check_json(std::path::Path::new(&spec), &traffic);
    assert_eq!(code, 1);
    assert_eq!(
        triples(&doc),
        [
            t(1, "omitted_on_replace", "/graphicsElementIds"),
            t(2, "silent_clear_risk", "/graphicsElementIds")
        ],
        "channel 8 was never read; channel 7 was, through the linked GET"
    );
    assert_eq!(doc["findings"][1]["evidence"]["read_request_id"], "g7");
}

#[test]
fn check_takes_the_sidecars_config_for_field_maps() {
    let spec = temp(
        "mapped.yaml",
        r#"openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /channels/{id}:
    parameters: [{name: id, in: path, required: true, schema: {type: integer}}]
    get:
      operationId: getChannel
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {type: object, properties: {name: {type: string}, graphicsElements: {type: array, items: {type: object}}}}
    put:
      operationId: updateChannel
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {name: {type: string}, graphicsElementIds: {type: array, items: {type: integer}}}}
      responses: {"200": {description: ok}}
"#,
    );
    let traffic = temp(
        "mapped.jsonl",
        concat!(
            r#"{"method":"GET","url":"/channels/7","response":{"status":200,"body":{"name":"Retro","graphicsElements":[{"id":3}]}}}"#,
            "\n",
            r#"{"method":"PUT","url":"/channels/7","headers":{"content-type":"application/json"},"body":{"name":"Retro HD"}}"#,
            "\n"
        ),
    );
    let (_, unmapped) = check_json(std::path::Path::new(&spec), &traffic);
    assert_eq!(
        triples(&unmapped),
        [t(1, "omitted_on_replace", "/graphicsElementIds")],
        "names that differ are not guessed"
    );
    let config = temp(
        "mapped.toml",
        "[memory.field_map.updateChannel]\ngraphicsElementIds = \"graphicsElements\"\n",
    );
    let (code, stdout, stderr) = driftwatch(&[
        "check",
        "--spec",
        &spec,
        "--traffic",
        &traffic,
        "--format",
        "json",
        "--config",
        &config,
    ]);
    assert_eq!(code, 1, "{stderr}");
    let mapped: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        triples(&mapped),
        [t(1, "silent_clear_risk", "/graphicsElementIds")]
    );
}

/// A finding about a body's root names "the body" or "the response", not "field ``" (issue 35's
/// "response field `` is array").
#[test]
fn a_finding_about_the_root_of_a_body_names_the_body() {
    let traffic = temp(
        "root.jsonl",
        r#"{"method":"GET","url":"/api/v1/channels/7","response":{"status":200,"headers":{"content-type":"application/json"},"body":[]}}
{"method":"PUT","url":"/api/v1/channels/7","headers":{"content-type":"application/json"},"body":[]}
"#,
    );
    let (_, doc) = check_json(&super::util::example("channels.openapi.yaml"), &traffic);
    let messages: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["field"] == "")
        .filter_map(|f| f["message"].as_str())
        .collect();
    assert!(
        messages.contains(&"the response is array, the spec says object"),
        "{messages:?}"
    );
    assert!(
        messages.contains(&"the body is array, the spec says object"),
        "{messages:?}"
    );
    assert!(
        messages.iter().all(|m| !m.contains("field ``")),
        "{messages:?}"
    );
}
