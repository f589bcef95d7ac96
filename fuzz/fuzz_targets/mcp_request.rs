//! `checks::mcp_request` under libFuzzer (what it asserts is said there).
#![no_main]

// Each target uses one of the checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

use std::sync::LazyLock;

use driftwatch::contract::Contract;
use libfuzzer_sys::fuzz_target;

/// The project root, where `examples/` is and `../shared/` is beside.
fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

static CONTRACT: LazyLock<Contract> = LazyLock::new(|| checks::github(&root()));

fuzz_target!(|data: &[u8]| {
    checks::mcp_request(&CONTRACT, data);
});
