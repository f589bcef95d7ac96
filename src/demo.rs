//! `driftwatch demo`: the whole story in one command, on loopback only. An embedded Channels
//! API with real full-replace semantics, driftwatch in front of it, and a scripted stale agent
//! whose tool schemas have drifted from the spec. Ordinary code with its own tests.

pub mod agent;
pub mod api;

/// The Channels spec the demo and its API share (also `examples/channels.openapi.yaml`).
pub const SPEC: &str = include_str!("../examples/channels.openapi.yaml");
pub const SPEC_NAME: &str = "examples/channels.openapi.yaml";

/// The same spec as if it had been generated before the API grew `graphicsElementIds`: neither
/// the channel model that GET returns nor the PUT body declares it. The demo's third act runs
/// driftwatch on it, to show the spec going stale on the API's side.
pub fn stale_spec() -> Option<String> {
    let cut = "        graphicsElementIds:\n          type: array\n          items: { type: integer, format: int32 }\n";
    SPEC.contains(cut).then(|| SPEC.replace(cut, ""))
}
