//! Every input in `fuzz/regressions/<target>/` (inputs the fuzzer once failed on, kept), and
//! the seeds the fuzz script starts from, through the fuzz targets' own checks
//! (`fuzz/checks.rs`): a bug the fuzzer found stays found, in `cargo test`, without libFuzzer.

use std::path::PathBuf;

use crate::fuzz_checks as checks;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `fuzz/regressions/<target>/`, plus `seeds`.
fn inputs(target: &str, seeds: &[PathBuf]) -> Vec<Vec<u8>> {
    let dir = root().join("fuzz/regressions").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.extend(seeds.iter().cloned());
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

fn shared(rel: &str) -> PathBuf {
    super::util::shared_spec(rel)
}

#[test]
fn spec_load() {
    let seeds = [
        root().join("examples/channels.openapi.yaml"),
        root().join("examples/billing.openapi.yaml"),
        shared("scalar/galaxy.json"),
        shared("ersatztv/v1.json"),
    ];
    for input in inputs("spec_load", &seeds) {
        checks::spec_load(&input);
    }
}

#[test]
fn request_audit() {
    let contract = checks::channels(&root());
    let found = inputs("request_audit", &[]);
    assert!(!found.is_empty(), "the regressions are there");
    for input in found {
        checks::request_audit(&contract, &input);
    }
}

#[test]
fn query_path() {
    let contract = checks::github(&root());
    for input in inputs("query_path", &[]) {
        checks::query_path(&contract, &input);
    }
    checks::query_path(&contract, b"\x00/repos/o/r/issues?state=open&labels=a,b");
}

#[test]
fn traffic() {
    let contract = checks::channels(&root());
    let seeds = [root().join("examples/channels.traffic.jsonl")];
    for input in inputs("traffic", &seeds) {
        checks::traffic(&contract, &input);
    }
}

#[test]
fn mcp_request() {
    let contract = checks::github(&root());
    for input in inputs("mcp_request", &[]) {
        checks::mcp_request(&contract, &input);
    }
    // listIssues's path values as dot-segments (issue 34, defect 4): refused, never sent.
    let list = contract
        .operations()
        .iter()
        .position(|op| op.template == "/repos/{owner}/{repo}/issues" && op.method == "GET")
        .unwrap();
    let mut input = u16::try_from(list).unwrap().to_le_bytes().to_vec();
    input.extend_from_slice(br#"{"owner": "..", "repo": ".."}"#);
    checks::mcp_request(&contract, &input);
    input.truncate(2);
    input.extend_from_slice(b"owner=o\nrepo=r\nstate=open\nlabels=[\"a\",\"b\"]");
    checks::mcp_request(&contract, &input);
}

#[test]
fn mcp_relay() {
    for input in inputs("mcp_relay", &[]) {
        checks::mcp_relay(&input);
    }
    // Two steps each: (what, which). A call, its id reused by another tool, an answer past
    // the bound (ends nothing), then its answer (ends both); a session's end.
    let call = |tool: u8, id: u8| [0u8, tool << 4 | id];
    let mut script: Vec<u8> = [call(0, 1), call(1, 1), [5, 1], call(2, 2), [2, 1], [4, 0]].concat();
    checks::mcp_relay(&script);
    // 1,025 calls under one id: the last goes untracked, and nothing is named after.
    script = (0..1_025).flat_map(|_| call(3, 0)).collect();
    script.extend(call(1, 5));
    script.extend([2u8, 0]);
    checks::mcp_relay(&script);
}

#[test]
fn store_entry() {
    let contract = checks::channels(&root());
    for input in inputs("store_entry", &[]) {
        checks::store_entry(&contract, &input);
    }
    checks::store_entry(&contract, br#"{"r":"g1","t":1764000000123,"n":"namegraphicsElementIds","f":[[4,false,7],[22,false,9]]}"#);
    checks::store_entry(
        &contract,
        br#"{"r":"g1","t":253402300800000,"n":"name","f":[[4,false,7]]}"#,
    );
    checks::store_entry(
        &contract,
        br#"{"o":"updateChannel","w":"p0","f":[["name","name","g1",18446744073709551615,"00ff"]]}"#,
    );
}
