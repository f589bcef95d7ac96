//! Audit-core benchmarks (issue targets: GET with 5 query params on GitHub < 2 µs; 30-property
//! PUT on Channels, JSON parse included, < 15 µs; load + compile of the GitHub spec < 1.5 s).
//! Run: `cargo bench --bench audit`. Figures are recorded in docs/benchmarks.md.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use criterion::{Criterion, criterion_group, criterion_main};
mod common;

use common::{CHANNEL, channel_response, channels, contract, json_headers, stored_channel};
use driftwatch::audit::{audit_request, audit_response};
use driftwatch::contract::Contract;
use driftwatch::memory::{HashKey, Key, Memory};
use driftwatch::request::RequestView;
use driftwatch::response::ResponseView;

/// The allocator the `driftwatch` binary runs with (src/main.rs), so the figures are its.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn shared(rel: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/specs")
        .join(rel);
    assert!(path.exists(), "missing {}", path.display());
    path
}

/// GitHub's open issues of a repository, by five of the operation's query parameters.
const ISSUES: &str =
    "/repos/octo/hello/issues?state=open&labels=bug,ui&sort=created&direction=desc&per_page=30";

/// GitHub's spec, and the headers its client sends.
fn github_issues() -> (Contract, Vec<(String, String)>) {
    let github = contract(&shared("github/api.github.com.json.gz"));
    (
        github,
        vec![("accept".into(), "application/vnd.github+json".into())],
    )
}

fn audit(c: &mut Criterion) {
    let (github, headers) = github_issues();
    let get = RequestView::new("GET", ISSUES, &headers, None);
    assert!(audit_request(&github, &get).is_empty());
    c.bench_function("audit GET github issues, 5 query params", |b| {
        b.iter(|| audit_request(&github, black_box(&get)))
    });

    let channels = channels();
    let json = json_headers();
    let put = RequestView::new("PUT", "/api/v1/channels/7", &json, Some(CHANNEL.as_bytes()));
    assert!(audit_request(&channels, &put).is_empty());
    c.bench_function("audit PUT channels, 30-property body", |b| {
        b.iter(|| audit_request(&channels, black_box(&put)))
    });
    // The floor: parsing the same body with serde_json and nothing else.
    c.bench_function("baseline: serde_json parse of the same body", |b| {
        b.iter(|| {
            serde_json::from_slice::<serde_json::Value>(black_box(CHANNEL.as_bytes())).unwrap()
        })
    });
    let drifted = CHANNEL
        .replace(r#","graphicsElementIds":[3,7]"#, "")
        .replace(r#""ffmpegProfileId":1"#, r#""ffmpegProfileId":"1""#);
    let bad = RequestView::new("PUT", "/api/v1/channels/7", &json, Some(drifted.as_bytes()));
    assert_eq!(audit_request(&channels, &bad).len(), 2);
    c.bench_function("audit PUT channels, 30-property body, 2 findings", |b| {
        b.iter(|| audit_request(&channels, black_box(&bad)))
    });

    // The response side: the channel as GET returns it (31 properties), parsed and audited.
    let stored = stored_channel();
    let (op, response) = channel_response(&channels, &json, &stored);
    c.bench_function("audit GET channels response, 31-property body", |b| {
        b.iter(|| audit_response(&channels, op, black_box(&response)))
    });
    // What the sidecar does with that response: one parse shared by the audit and the
    // silent-clear memory, which remembers each field's state and keyed hash.
    let memory = Memory::new(10_000, Duration::from_secs(600), HashKey::random());
    let key = Key {
        path: "getChannel:7".into(),
        scope: 0,
    };
    c.bench_function("audit GET channels response and remember it", |b| {
        b.iter(|| {
            let body = black_box(stored.as_bytes());
            let parsed = driftwatch::json::parse(body).unwrap();
            let view = ResponseView {
                parsed: Some(parsed.root()),
                ..response
            };
            let findings = audit_response(&channels, op, &view);
            memory.remember(&key, "r", SystemTime::UNIX_EPOCH, &parsed.root());
            findings
        })
    });
    c.bench_function("baseline: serde_json parse of the response body", |b| {
        b.iter(|| {
            serde_json::from_slice::<serde_json::Value>(black_box(stored.as_bytes())).unwrap()
        })
    });
}

fn load(c: &mut Criterion) {
    let path = shared("github/api.github.com.json.gz");
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    group.bench_function("load + compile github api.github.com (13 MB)", |b| {
        b.iter(|| contract(black_box(&path)))
    });
    group.finish();
}

/// What `/coverage` adds per request: the count, and the inputs read while some are unseen.
fn coverage(c: &mut Criterion) {
    use driftwatch::contract::Route;
    use driftwatch::coverage::Coverage;
    let channels = channels();
    let json = json_headers();
    let put = RequestView::new("PUT", "/api/v1/channels/7", &json, Some(CHANNEL.as_bytes()));
    let Route::Found { operation: op, .. } = channels.route("PUT", put.path) else {
        panic!("updateChannel not routed");
    };
    // A property the body never sends keeps the properties marked on every request: from the
    // audit's pass over the keys, or, where the audit did not read them, by reading the body.
    let unseen = Coverage::new(&channels);
    let without = CHANNEL.replace(r#","graphicsElementIds":[3,7]"#, "");
    let partial = RequestView::new("PUT", "/api/v1/channels/7", &json, Some(without.as_bytes()));
    let sent = driftwatch::audit::audit(&channels, &partial).sent_properties;
    assert!(sent.is_some());
    c.bench_function(
        "coverage PUT channels, 30-property body, one never sent, the audit's keys",
        |b| b.iter(|| unseen.request(op, black_box(&partial), sent.as_ref())),
    );
    c.bench_function(
        "coverage PUT channels, 30-property body, one never sent, the body read",
        |b| b.iter(|| unseen.request(op, black_box(&partial), None)),
    );
    // Every property seen once: later requests are counted only.
    let seen = Coverage::new(&channels);
    seen.request(op, &put, None);
    c.bench_function("coverage PUT channels, every input seen", |b| {
        b.iter(|| {
            seen.request(op, black_box(&put), None);
            seen.response(op, 200);
        })
    });
    let (github, headers) = github_issues();
    let get = RequestView::new("GET", ISSUES, &headers, None);
    let Route::Found { operation: op, .. } = github.route("GET", get.path) else {
        panic!("issues not routed");
    };
    let cov = Coverage::new(&github);
    c.bench_function("coverage GET github issues, 5 of its query params", |b| {
        b.iter(|| {
            cov.request(op, black_box(&get), None);
            cov.response(op, 200);
            cov.tool(op, "list_issues");
        })
    });
}

/// The credentials check on a secured operation (examples/notes.openapi.yaml: a bearer token
/// or an X-API-Key header): carried by the first alternative, by the second, and by none (the
/// finding is built).
fn credentials(c: &mut Criterion) {
    let notes =
        contract(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/notes.openapi.yaml"));
    let target = "/v1/notes?limit=10&tag=work";
    let sent = [
        (
            "bearer",
            vec![("authorization".to_string(), "Bearer t0ken".to_string())],
        ),
        (
            "the second alternative's key",
            vec![("x-api-key".into(), "k3y".into())],
        ),
        (
            "none (a finding)",
            vec![("accept".into(), "application/json".into())],
        ),
    ];
    for (what, headers) in &sent {
        let get = RequestView::new("GET", target, headers, None);
        let findings = audit_request(&notes, &get).len();
        assert_eq!(findings, usize::from(what.starts_with("none")), "{what}");
        c.bench_function(&format!("audit GET notes, credentials: {what}"), |b| {
            b.iter(|| audit_request(&notes, black_box(&get)))
        });
    }
}

criterion_group!(benches, audit, load, coverage, credentials);
criterion_main!(benches);
