//! `driftwatch check` on what people have: a Chrome-shaped HAR whose bodies are base64, the
//! same traffic gzip'd and zstd'd by the system's own `gzip` and `zstd`, piped on stdin; one
//! finding a line; and the parallel audit giving the sequential verdict, byte for byte.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::cli::triples;
use super::util::example;

/// `driftwatch check` with `args`, `stdin` piped in: exit code, stdout, stderr. Its config
/// fixes the hash key, so that two runs write the same value hashes (a run's own key is
/// random).
fn check(args: &[&str], stdin: Option<&[u8]>) -> (i32, String, String) {
    let spec = example("channels.openapi.yaml");
    let key = temp_dir().join("hash-key");
    std::fs::write(&key, "a key for every run of these tests").unwrap();
    let config = temp_dir().join("check.toml");
    std::fs::write(
        &config,
        format!("[memory]\nhash_key_file = {:?}\n", key.to_str().unwrap()),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["check", "--spec", spec.to_str().unwrap()])
        .args(["--config", config.to_str().unwrap()])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.map(<[u8]>::to_vec);
    let writer = std::thread::spawn(move || {
        if let Some(bytes) = input {
            let _ = pipe.write_all(&bytes);
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (
        out.status.code().unwrap(),
        text(out.stdout),
        text(out.stderr),
    )
}

fn temp_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("driftwatch-inputs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `file` compressed by the system's `tool` (gzip or zstd), next to it under `name`.
fn compressed(tool: &str, file: &Path, name: &str) -> String {
    let out = Command::new(tool)
        .args(["-c", file.to_str().unwrap()])
        .output()
        .unwrap_or_else(|e| panic!("{tool} (Debian's {tool} package): {e}"));
    assert!(out.status.success());
    let path = temp_dir().join(name);
    std::fs::write(&path, out.stdout).unwrap();
    path.to_string_lossy().into_owned()
}

fn kinds(doc: &Value) -> Vec<(u64, String)> {
    triples(doc)
        .into_iter()
        .map(|(e, kind, _)| (e, kind))
        .collect()
}

#[test]
fn a_chrome_har_with_base64_bodies_is_audited_and_remembered() {
    let har = example("channels.chrome.har");
    let text = std::fs::read_to_string(&har).unwrap();
    assert!(
        text.contains(r#""encoding": "base64""#),
        "the sample keeps Chrome's encoding"
    );
    let (code, out, err) = check(
        &["--traffic", har.to_str().unwrap(), "--format", "json"],
        None,
    );
    assert_eq!(code, 1, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        kinds(&doc),
        [
            (1, "silent_clear_risk".to_string()),
            (1, "silent_clear".to_string()),
            (2, "unknown_query_param".to_string())
        ],
        "the base64 GET was remembered, the base64 PUT response confirmed the clear"
    );
    assert_eq!(doc["summary"]["malformed_total"], 0);
}

#[test]
fn gzip_zstd_and_stdin_read_as_the_plain_file_does() {
    for (plain, name) in [
        (example("channels.traffic.jsonl"), "traffic.jsonl"),
        (example("channels.chrome.har"), "traffic.har"),
    ] {
        let args = |traffic: &str| -> Vec<String> {
            ["--traffic", traffic, "--format", "json"]
                .map(String::from)
                .to_vec()
        };
        let run = |traffic: &str, stdin: Option<&[u8]>| {
            let args = args(traffic);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, out, err) = check(&args, stdin);
            assert!(code == 0 || code == 1, "{traffic}: {err}");
            out
        };
        let expected = run(plain.to_str().unwrap(), None);
        assert!(kinds(&serde_json::from_str(&expected).unwrap()).len() >= 3);
        let gz = compressed("gzip", &plain, &format!("{name}.gz"));
        let zst = compressed("zstd", &plain, &format!("{name}.zst"));
        // Told by its bytes, not its name.
        let renamed = temp_dir().join(format!("{name}.data"));
        std::fs::copy(&gz, &renamed).unwrap();
        for traffic in [gz.as_str(), zst.as_str(), renamed.to_str().unwrap()] {
            assert_eq!(run(traffic, None), expected, "{traffic}");
        }
        let bytes = std::fs::read(&plain).unwrap();
        assert_eq!(run("-", Some(&bytes)), expected, "stdin");
        let gz_bytes = std::fs::read(&gz).unwrap();
        assert_eq!(run("-", Some(&gz_bytes)), expected, "gzip on stdin");
    }
}

#[test]
fn jsonl_writes_one_finding_a_line_and_the_summary_on_stderr() {
    let traffic = example("channels.traffic.jsonl");
    let traffic = traffic.to_str().unwrap();
    let (_, json_out, _) = check(&["--traffic", traffic, "--format", "json"], None);
    let doc: Value = serde_json::from_str(&json_out).unwrap();
    let (code, out, err) = check(&["--traffic", traffic, "--format", "jsonl"], None);
    assert_eq!(code, 1);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(&lines, doc["findings"].as_array().unwrap());
    let total = doc["summary"]["findings"].as_u64().unwrap();
    assert!(
        err.starts_with(&format!("5 exchanges, {total} findings")),
        "{err}"
    );
}

/// A day of an agent's traffic, in small: the example lines, and for each of `n` channels a
/// GET, a stale PUT that omits its list, and a GET that shows it emptied (every fourth PUT
/// refused by the API), so the memory confirms clears across the whole recording. Each line
/// has its time, as recordings do (without one, the time read is the clock's).
fn incident_traffic(n: usize) -> String {
    let mut out = String::new();
    let example = std::fs::read_to_string(example("channels.traffic.jsonl")).unwrap();
    for i in 0..n {
        let held = json!({"id": i, "name": "Retro TV", "graphicsElementIds": [3, 7]});
        let emptied = json!({"id": i, "name": "Retro TV", "graphicsElementIds": []});
        let status = if i % 4 == 3 { 409 } else { 204 };
        let lines = [
            json!({"method": "GET", "url": format!("/api/v1/channels/{i}"),
                   "response": {"status": 200, "body": held}}),
            json!({"method": "PUT", "url": format!("/api/v1/channels/{i}"),
                   "headers": {"content-type": "application/json"}, "body": {"name": "Retro TV"},
                   "response": {"status": status}}),
            json!({"method": "GET", "url": format!("/api/v1/channels/{i}"),
                   "response": {"status": 200, "body": emptied}}),
        ];
        for (k, mut line) in lines.into_iter().enumerate() {
            let at = std::time::UNIX_EPOCH
                + std::time::Duration::from_secs(1_764_752_400 + (3 * i + k) as u64);
            line["time"] = json!(humantime::format_rfc3339_seconds(at).to_string());
            out.push_str(&line.to_string());
            out.push('\n');
        }
        if i % 100 == 0 {
            out.push_str(&example);
        }
    }
    out
}

#[test]
fn the_parallel_audit_gives_the_sequential_verdict_byte_for_byte() {
    let path = temp_dir().join("incident.jsonl");
    std::fs::write(&path, incident_traffic(3000)).unwrap();
    let traffic = path.to_str().unwrap();
    for format in ["json", "text"] {
        let run = |jobs: &str| {
            check(
                &["--traffic", traffic, "--format", format, "--jobs", jobs],
                None,
            )
        };
        let (code, sequential, _) = run("1");
        assert_eq!(code, 1);
        for jobs in ["2", "4"] {
            assert!(
                run(jobs).1 == sequential,
                "--jobs {jobs} --format {format} differs"
            );
        }
        if format == "json" {
            let doc: Value = serde_json::from_str(&sequential).unwrap();
            let by_kind = &doc["summary"]["by_kind"];
            assert_eq!(
                (&by_kind["silent_clear_risk"], &by_kind["silent_clear"]),
                (&json!(3000), &json!(2250)),
                "every PUT at risk, every one the API took confirmed by the next GET"
            );
        }
    }
}

/// Logs that a real nginx wrote (`examples/access/`: its JSON log with `escape=json` and the
/// request body, and its combined log, for the example's five requests; the `log_format` is in
/// the README): the query drift is found in both, the body's only where the body was logged.
#[test]
fn nginx_json_and_combined_access_logs_are_traffic() {
    let run = |file: &str| {
        let path = example(&format!("access/{file}"));
        let (code, out, err) = check(
            &["--traffic", path.to_str().unwrap(), "--format", "json"],
            None,
        );
        assert_eq!(code, 1, "{err}");
        let doc: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            (
                &doc["summary"]["exchanges"],
                &doc["summary"]["malformed_total"]
            ),
            (&json!(5), &json!(0))
        );
        triples(&doc)
    };
    let query = |all: &[(u64, String, String)]| -> Vec<(u64, String, String)> {
        all.iter()
            .filter(|(_, kind, _)| kind.contains("query") || kind.starts_with("param"))
            .cloned()
            .collect()
    };
    let expected = vec![
        (
            1,
            "unknown_query_param".to_string(),
            "page_size".to_string(),
        ),
        (
            2,
            "param_type_mismatch".to_string(),
            "showFiller".to_string(),
        ),
    ];
    let combined = run("nginx.combined.log");
    assert_eq!(combined, expected, "no body is logged: no body finding");
    let json = run("nginx.json.log");
    assert_eq!(query(&json), expected);
    assert!(
        json.contains(&(
            4,
            "body_type_mismatch".to_string(),
            "/ffmpegProfileId".to_string()
        )),
        "the logged body is audited: {json:?}"
    );
}

#[test]
fn a_named_input_format_is_read_as_named_and_a_wrong_one_reads_nothing() {
    let combined = example("access/nginx.combined.log");
    let jsonl = example("channels.traffic.jsonl");
    let (combined, jsonl) = (combined.to_str().unwrap(), jsonl.to_str().unwrap());
    let named = check(&["--traffic", combined, "--input-format", "combined"], None);
    let told = check(&["--traffic", combined], None);
    assert_eq!((named.0, &named.1), (1, &told.1), "{}", named.2);
    for (traffic, wrong) in [(combined, "jsonl"), (jsonl, "combined"), (jsonl, "har")] {
        let (code, _, err) = check(&["--traffic", traffic, "--input-format", wrong], None);
        assert_eq!(code, 2, "{traffic} as {wrong}: {err}");
        assert!(err.contains("no exchange could be read"), "{err}");
    }
}

/// The progress bar is drawn on a terminal (a pseudo-terminal from util-linux's `script`) and
/// never into a pipe.
#[test]
fn a_progress_bar_shows_on_a_terminal_only() {
    let one = std::fs::read_to_string(example("channels.traffic.jsonl")).unwrap();
    let traffic = temp_dir().join("progress.jsonl");
    std::fs::write(&traffic, one.repeat(2000)).unwrap();
    let spec = example("channels.openapi.yaml");
    let command = format!(
        "{} check --spec {} --traffic {} > /dev/null",
        env!("CARGO_BIN_EXE_driftwatch"),
        spec.display(),
        traffic.display()
    );
    let log = temp_dir().join("pty.log");
    let out = Command::new("script")
        .args(["-qec", &command, log.to_str().unwrap()])
        .output()
        .expect("util-linux's script");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let drawn = String::from_utf8_lossy(&out.stdout);
    let size = format!(
        "/{}.",
        std::fs::metadata(&traffic).unwrap().len() / 1024 / 1024
    );
    assert!(
        drawn.contains(&size) && drawn.contains("MiB"),
        "no bar ({size}) on the terminal: {drawn:?}"
    );
    let (_, _, piped) = check(&["--traffic", traffic.to_str().unwrap()], None);
    assert_eq!(piped, "", "nothing on a piped stderr");
}
