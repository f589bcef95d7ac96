//! driftwatch audits HTTP traffic against the API's own OpenAPI spec.
//!
//! # Layout
//! Data flows one way, and the modules are listed in that order:
//! - [`spec`]: read a JSON/YAML OpenAPI 3.0/3.1 document, bundle its `$ref`s, normalize 3.0.
//! - [`contract`]: compile the spec once into a router, operations and validators; how each
//!   write is read (replace or action: `contract::writes`), and a path's shape for events.
//! - [`request`], [`response`]: the views of an HTTP exchange that the audit reads;
//!   [`encoding`]: their gzip, deflate or br bodies decoded for reading, within a bound;
//!   [`json`]: the one parse of every body the audit reads.
//! - [`audit`]: check one request, or its response, against the contract and return findings.
//! - [`finding`]: what the audit reports, with stable kind names.
//! - [`diff`]: what changed between two revisions of a spec, and what it does to clients.
//! - [`catalog`]: an MCP tool catalog against the spec: every tool's fields, exactly.
//! - [`mcp`]: a tool call made into the request its operation describes (the MCP gateway);
//!   which tool call caused a request, and where its arguments went (`mcp::calls`,
//!   `mcp::bindings`, for `driftwatch wrap`).
//! - [`memory`], [`silent`]: the last GET of each resource, what writes' answers taught of
//!   each operation, and silent-clear detection on both.
//! - [`traffic`]: recorded exchanges (HAR, JSON Lines) for offline checks.
//! - [`config`], [`settings`]: the config as written and layered (file < env < flags), and the
//!   one validated, typed value built from it at start.
//! - [`policy`]: observe/enforce, and the action per finding.
//! - [`revision`]: the spec in force, and the narrow handle to read or reload it.
//! - [`listener`]: how every listener accepts, within its bounds.
//! - [`proxy`], [`admin`], [`sink`]: the live sidecar (the request path as stages with one exit,
//!   as a reverse proxy or a forward proxy whose CA ends the CONNECTs to the APIs it audits:
//!   `proxy::front`, `proxy::ca`), its admin listener (which sees the proxy only through a narrow
//!   handle), metrics and events.
//! - [`cli`], [`demo`]: the subcommands of the `driftwatch` binary (`wrap` runs an MCP server
//!   behind the sidecar), and the embedded demo.
#![forbid(unsafe_code)]

pub mod admin;
pub mod audit;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod contract;
pub mod demo;
pub mod diff;
pub mod encoding;
pub mod finding;
pub mod json;
pub mod listener;
pub mod mcp;
pub mod memory;
pub mod policy;
pub mod proxy;
pub mod request;
pub mod response;
pub mod revision;
pub mod settings;
pub mod silent;
pub mod sink;
pub mod spec;
pub mod start;
pub mod traffic;
pub mod trust;
pub mod wrap;
