//! `checks::mcp_relay` under libFuzzer (what it asserts is said there).
#![no_main]

// Each target uses one of the checks.
#[allow(dead_code)]
#[path = "../checks.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    checks::mcp_relay(data);
});
