//! `driftwatch overlay apply`: the spec with its overlays applied, as the contract will read
//! it before bundling, written out as JSON: to see what an overlay does, and to compare it with
//! another Overlay tool's output.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::spec::DEFAULT_MAX_BYTES;

#[derive(Args, Debug)]
pub struct OverlayArgs {
    #[command(subcommand)]
    command: OverlayCommand,
}

#[derive(Subcommand, Debug)]
enum OverlayCommand {
    /// Write the spec with the overlays applied, in order, to stdout as JSON; each action
    /// that matched nothing is said on stderr.
    Apply(ApplyArgs),
}

#[derive(Args, Debug)]
struct ApplyArgs {
    /// The OpenAPI document (JSON or YAML, optionally .gz).
    #[arg(long)]
    spec: PathBuf,
    /// An OpenAPI Overlay (1.0 or 1.1); repeat it for several, applied in order.
    #[arg(long = "overlay", value_name = "FILE", required = true)]
    overlays: Vec<PathBuf>,
}

pub fn run(args: &OverlayArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match &args.command {
        OverlayCommand::Apply(args) => apply(args, out),
    }
}

fn apply(args: &ApplyArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let (doc, notes) = crate::spec::with_overlays(&args.spec, &args.overlays, DEFAULT_MAX_BYTES)?;
    for note in notes {
        eprintln!("driftwatch: warning: {}", note.detail);
    }
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)?;
    Ok(ExitCode::SUCCESS)
}
