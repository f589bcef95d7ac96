//! `forwarding::check` under libFuzzer (what it asserts is said there).
#![no_main]

#[path = "../forwarding.rs"]
mod forwarding;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    forwarding::check(data);
});
