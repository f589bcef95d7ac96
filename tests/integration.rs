//! Integration tests: one binary, one module per area, shared helpers in `util`.

// The fuzz targets' checks, replayed over their kept inputs by `integration::fuzz_regressions`.
#[path = "../fuzz/checks.rs"]
mod fuzz_checks;

mod integration {
    pub mod catalog;
    pub mod check_inputs;
    pub mod ci_formats;
    pub mod cli;
    pub mod conventions;
    pub mod coverage;
    pub mod credentials;
    pub mod demo;
    pub mod deploy;
    pub mod diffs;
    pub mod documents;
    pub mod exactness;
    pub mod exits;
    pub mod fidelity;
    pub mod first_contact;
    pub mod forward_clients;
    pub mod forward_proxy;
    pub mod fuzz_regressions;
    pub mod generated;
    pub mod generator;
    pub mod hostile;
    pub mod hostile_forward;
    pub mod hostile_specs;
    pub mod hostile_traces;
    pub mod hostile_wrap;
    pub mod incidents;
    pub mod kinds;
    pub mod layout;
    pub mod list_then_update;
    pub mod listeners;
    pub mod live_responses;
    pub mod many_apis;
    pub mod mcp;
    pub mod operations;
    pub mod ops_kit;
    pub mod otel_env;
    pub mod overlays;
    pub mod privacy;
    pub mod propose;
    pub mod proxy;
    pub mod read_before_write;
    pub mod real_catalogs;
    pub mod real_specs;
    pub mod reload;
    pub mod repair;
    pub mod responses;
    pub mod rotel;
    pub mod routing;
    pub mod shared_memory;
    pub mod sidecar;
    pub mod silent_clears;
    pub mod spec_loading;
    pub mod stories;
    pub mod timeouts;
    pub mod traces;
    pub mod transport;
    pub mod upstream;
    pub mod util;
    pub mod wrap;
    pub mod writes;
}
