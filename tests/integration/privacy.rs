//! Values stay private unless `events.log_values` (issue 14, defect 6): a token in a path is
//! not written to events, `/findings`, the 422 detail, logs or `check` output; the value hash
//! of the silent-clear evidence is keyed, so a reader of the events cannot confirm a guess.
//! Seen red first: the token was in all four.

use std::process::Command;
use std::time::Duration;

use super::sidecar::{admin_get, config, raw, start};
use super::upstream::{self, ok};
use super::util::example;

const TOKEN: &str = "tok9Secret4242";

/// Requests that carry the token in their path: a wrong type for a declared path parameter,
/// and a route the spec does not have.
fn requests() -> [String; 2] {
    [
        format!(
            "PUT /api/v1/channels/{TOKEN} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{{}}"
        ),
        format!("GET /api/v1/{TOKEN}/things HTTP/1.1\r\nhost: x\r\n\r\n"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_a_path_is_not_written_anywhere() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let events = std::env::temp_dir().join(format!("dw-privacy-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&events);
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.proxy.mode = driftwatch::policy::Mode::Enforce;
        c.events.output = events.display().to_string();
    }))
    .await;
    let [bad_type, unknown] = requests();
    let refused = raw(dw.addr, bad_type.as_bytes()).await;
    assert_eq!(refused.status, 422);
    let detail = String::from_utf8_lossy(&refused.body).to_string();
    assert!(!detail.contains(TOKEN), "422: {detail}");
    raw(dw.addr, unknown.as_bytes()).await;
    let recent = String::from_utf8_lossy(&admin_get(dw.admin, "/findings").await.body).to_string();
    assert!(recent.contains("unknown_operation"), "{recent}");
    assert!(!recent.contains(TOKEN), "/findings: {recent}");
    dw.stop().await;
    let written = std::fs::read_to_string(&events).unwrap();
    assert_eq!(written.lines().count(), 2, "{written}");
    assert!(!written.contains(TOKEN), "events: {written}");
    let _ = std::fs::remove_file(&events);
}

#[test]
fn check_output_does_not_carry_path_values() {
    let dir = std::env::temp_dir().join(format!("dw-privacy-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let traffic = dir.join("t.jsonl");
    std::fs::write(
        &traffic,
        format!(
            "{{\"method\":\"PUT\",\"url\":\"/api/v1/channels/{TOKEN}\",\"headers\":{{\"content-type\":\"application/json\"}},\"body\":{{}}}}\n{{\"method\":\"GET\",\"url\":\"/api/v1/{TOKEN}/things\"}}\n"
        ),
    )
    .unwrap();
    for format in ["json", "text"] {
        let out = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
            .args(["check", "--spec"])
            .arg(example("channels.openapi.yaml"))
            .arg("--traffic")
            .arg(&traffic)
            .args(["--format", format])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("unknown_operation"), "{text}");
        assert!(!text.contains(TOKEN), "{format}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
