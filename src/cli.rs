//! The `driftwatch` command line: one file per subcommand. Only this module (and `main`)
//! decides exit codes: 0 clean, 1 findings at or above `--fail-on`, 2 usage or load error.

mod annotations;
mod ca;
mod check;
pub mod demo;
mod diff;
mod health;
mod incident;
mod mcp;
mod overlay;
mod preflight;
pub mod serve;
mod tools;
mod wrap;
mod writes;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "driftwatch",
    version,
    about = "Audit API traffic against the API's own OpenAPI spec"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Audit recorded traffic (HAR 1.2 or JSON Lines) against a spec.
    Check(check::CheckArgs),
    /// Run the sidecar: a reverse proxy that audits every request against the spec.
    Serve(serve::ServeArgs),
    /// The whole story in one command: an embedded API, driftwatch, and a stale agent.
    Demo(demo::DemoArgs),
    /// What changed between two revisions of a spec, classed breaking / hazard / info.
    Diff(diff::DiffArgs),
    /// Check an MCP tool catalog against the spec (or generate one from it).
    Tools(tools::ToolsArgs),
    /// OpenAPI Overlays: see the spec as its overlays complete it.
    Overlay(overlay::OverlayArgs),
    /// Serve the spec's operations as MCP tools, each call audited on its way to the API.
    Mcp(mcp::McpArgs),
    /// Run a stdio MCP server as a child, relaying its stdio unchanged, its API traffic through
    /// the sidecar: every finding names the tool call that caused it.
    Wrap(wrap::WrapArgs),
    /// Print the forward proxy's CA certificate (made if missing) and how runtimes trust it.
    Ca(ca::CaArgs),
    /// A running sidecar's silent clears, each as one story, with what the fields held and the
    /// request that puts them back (`incidents.keep_values`).
    Incident(incident::IncidentArgs),
    /// Exit 0 if a running sidecar is ready (its /readyz answers 200), else 1: for probes.
    Health(health::HealthArgs),
}

/// Parse the arguments, run the subcommand, map the outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check::run(&args, &mut std::io::stdout().lock()),
        Command::Serve(args) => serve::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Diff(args) => diff::run(&args, &mut std::io::stdout().lock()),
        Command::Tools(args) => tools::run(&args, &mut std::io::stdout().lock()),
        Command::Overlay(args) => overlay::run(&args, &mut std::io::stdout().lock()),
        Command::Health(args) => health::run(&args),
        Command::Incident(args) => incident::run(&args, &mut std::io::stdout().lock()),
        Command::Ca(args) => ca::run(&args),
        Command::Mcp(args) => mcp::run(&args),
        Command::Wrap(args) => wrap::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("driftwatch: {e:#}");
            ExitCode::from(2)
        }
    }
}
