//! driftwatch audits HTTP traffic against the API's own OpenAPI spec.
//!
//! # Layout
//! Data flows one way, and the modules are listed in that order (docs/ARCHITECTURE.md has a
//! line for each file):
//! - [`spec`]: read a JSON/YAML OpenAPI 3.0/3.1 document, bundle its `$ref`s, normalize 3.0.
//! - [`contract`]: compile the spec once into a router, operations and validators; how each
//!   write is read, replace or action (`contract/writes.rs`), and a path's shape for events.
//! - [`request`], [`response`]: the views of an HTTP exchange that the audit reads;
//!   [`encoding`]: their gzip, deflate or br bodies decoded for reading, within a bound;
//!   [`json`]: the one parse of every body the audit reads.
//! - [`audit`]: check one request, or its response, against the contract and return findings.
//! - [`finding`]: what the audit reports, with stable kind names.
//! - [`coverage`]: what the traffic exercised of the contract (operations, parameters, body
//!   properties, responses, and each tool's operations), for `check --coverage` and `/coverage`.
//! - [`diff`]: what changed between two revisions of a spec, and what it does to clients.
//! - [`catalog`]: an MCP tool catalog against the spec: every tool's fields, exactly.
//! - [`mcp`]: a tool call made into the request its operation describes (the MCP gateway);
//!   which tool call caused a request (`mcp/calls.rs`) and where its arguments went
//!   (`mcp/bindings.rs`); the bounds an MCP message is held to before it is parsed.
//! - [`memory`], [`silent`]: the last GET of each resource, what writes' answers taught of
//!   each operation, and silent-clear detection on both; [`incident`]: one clear's story, the
//!   values it erased and the request that restores them.
//! - [`traffic`]: recorded exchanges (HAR, JSON Lines, access logs) for offline checks;
//!   [`propose`]: an OpenAPI Overlay drafted from the sidecar's events, for what the API showed
//!   that its spec does not declare (`driftwatch overlay propose`).
//! - [`config`], [`settings`]: the config as written and layered (file < env < flags), and the
//!   one validated, typed value built from it at start.
//! - [`policy`]: observe/enforce, and the action per finding; [`repair`]: where a replace
//!   write's resource is read and how its body is completed from that read (`repair`).
//! - [`revision`]: the spec in force, and the narrow handle to read or reload it.
//! - [`template`]: a path template's shape, which routing and the merge of documents compare.
//! - [`listener`]: how every listener accepts, within its bounds.
//! - [`proxy`]: the live sidecar. Which API a request is for, from a `CONNECT`, an
//!   absolute-form URI, a prefix or `Host` (`proxy/route.rs`); the request path as stages with
//!   one exit (`proxy/stages.rs`, `proxy/record.rs`), the tool call behind a request under
//!   `wrap` (`proxy/tool.rs`); forward mode's front and CA (`proxy/front.rs`, `proxy/ca.rs`).
//! - [`admin`], [`sink`]: the admin listener (which sees the proxy only through a narrow
//!   handle), metrics and events; [`telemetry`]: OpenTelemetry spans of each request and tool
//!   call, trace context in and out, and their bounded export over OTLP/HTTP.
//! - [`start`]: the start-up `serve`, `wrap`, `mcp` and `demo` share.
//! - [`gateway`]: the MCP gateway `driftwatch mcp` runs, each tool call sent through the
//!   sidecar's own pipeline.
//! - [`wrap`]: what `driftwatch wrap` runs beside the sidecar: the MCP server's stdio relay or
//!   HTTP front, and the live catalog check; [`trust`]: what its server is told to trust.
//! - [`cli`], [`demo`]: the subcommands of the `driftwatch` binary (they parse, then call the
//!   library), and the embedded demo.
#![forbid(unsafe_code)]

pub mod admin;
pub mod audit;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod contract;
pub mod coverage;
pub mod demo;
pub mod diff;
pub mod encoding;
pub mod finding;
pub mod gateway;
pub mod incident;
pub mod json;
pub mod listener;
pub mod mcp;
pub mod memory;
pub mod policy;
pub mod propose;
pub mod proxy;
pub mod repair;
pub mod request;
pub mod response;
pub mod revision;
pub mod settings;
pub mod silent;
pub mod sink;
pub mod spec;
pub mod start;
pub mod telemetry;
pub mod template;
pub mod traffic;
pub mod trust;
pub mod wrap;
