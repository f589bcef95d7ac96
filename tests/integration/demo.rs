//! `driftwatch demo` tells the story it promises: the binary exits 0, and the transcript shows
//! the drift reported in observe mode, the silent clear happening and its incident's restore
//! giving the value back, enforce mode refusing it, and
//! a stale spec's next silent clear found in the API's answers.

use std::process::Command;

#[test]
fn the_demo_binary_prints_the_story_and_exits_0() {
    let out = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .arg("demo")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected_in_order = [
        "== Observe mode",
        "unknown_query_param query page_size",
        "did you mean `pageSize`?",
        "driftwatch_unknown_query_params_total{operation=\"listPlayouts\",param=\"page_size\"} 0 -> 1",
        "body_type_mismatch body /padToNearestMinute",
        "upstream_rejected body /padToNearestMinute",
        "API         200 graphicsElementIds [3,7]",
        "critical silent_clear_risk body /graphicsElementIds",
        "critical silent_clear body /graphicsElementIds: `graphicsElementIds` was erased by the write demo-04",
        "driftwatch_silent_clears_total{operation=\"updateChannel\",field=\"graphicsElementIds\",stage=\"confirmed\"} 0 -> 1",
        "API         200 graphicsElementIds []  <- silently cleared by the PUT",
        "incident demo-04: graphicsElementIds CLEARED",
        "read, the fields held values",
        "demo-03    tool get_channel",
        "write omitted them, forwarded",
        "tool update_channel",
        "graphicsElementIds = [3,7]",
        "curl -X PATCH 'http://127.0.0.1:",
        "{\"graphicsElementIds\":[3,7]}",
        "agent       PATCH /api/v1/channels/7",
        "graphicsElementIds [3,7], name \"Retro TV HD\"  <- restored, the rename kept",
        "== Enforce mode",
        "detail: query parameter `page_size` is not accepted",
        "detail: body field `/padToNearestMinute` is string",
        "driftwatch  409 refused, never sent to the API",
        "detail: Include `graphicsElementIds` with its current value",
        "API         200 graphicsElementIds [3,7]  <- intact",
        "driftwatch_blocked_total{operation=\"updateChannel\",kind=\"silent_clear_risk\"} 0 -> 1",
        "4. driftwatch restarted (its memory is empty)",
        "driftwatch  409 refused, never sent to the API",
        "it read channel 7 itself just before the write",
        "API         200 graphicsElementIds [3,7]  <- intact",
        "driftwatch_reads_before_write_total{operation=\"updateChannel\",outcome=\"held\"} 0 -> 1",
        "== A stale spec",
        "warning  undeclared_response_field response /graphicsElementIds",
        "critical replace_will_drop_field body /graphicsElementIds: GET /api/v1/channels/{id} returns `graphicsElementIds`",
        "driftwatch_findings_total{kind=\"replace_will_drop_field\",operation=\"updateChannel\",severity=\"critical\",blame=\"server\"} 0 -> 1",
        "== No second copy",
        "1. tools/list: 2 tools; updateChannel takes 32 arguments, graphicsElementIds among them: true",
        "3. updateChannel 7 with the new name and every field it read: done",
        "4. getChannel 7: name \"Retro TV HD\", graphicsElementIds [3,7]  (kept",
    ];
    let mut rest = &text[..];
    for line in expected_in_order {
        let at = rest
            .find(line)
            .unwrap_or_else(|| panic!("`{line}` missing (or out of order) in:\n{text}"));
        rest = &rest[at + line.len()..];
    }
    assert!(!text.contains("UNEXPECTED"), "{text}");
}
