//! `driftwatch diff OLD NEW`: what changed between two revisions of a spec, classed by what it
//! does to clients that have not updated; for people (text), pull requests (markdown) and
//! tools (JSON). A revision is a file, or `git:REV:PATH` from the current repository.

use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde_json::json;

use crate::contract::{Contract, ContractOptions};
use crate::diff::{Change, Class, diff};
use crate::spec::Spec;

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The old revision: a spec file, or `git:REV:PATH` (e.g. `git:main:openapi.yaml`).
    old: String,
    /// The new revision, the same way.
    new: String,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Exit 1 when a change reaches this class.
    #[arg(long, value_enum, default_value_t = FailOn::Breaking)]
    fail_on: FailOn,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Format {
    Text,
    Json,
    Markdown,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum FailOn {
    Breaking,
    Hazard,
    Never,
}

pub fn run(args: &DiffArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let old = load(&args.old)?;
    let new = load(&args.new)?;
    let changes = diff(&old, &new);
    match args.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &json!({ "changes": changes }))?;
            writeln!(out)?;
        }
        Format::Text => text(out, &changes)?,
        Format::Markdown => markdown(out, &changes, &args.old, &args.new)?,
    }
    let threshold = match args.fail_on {
        FailOn::Breaking => Some(Class::Breaking),
        FailOn::Hazard => Some(Class::Hazard),
        FailOn::Never => None,
    };
    let failed = threshold.is_some_and(|t| changes.iter().any(|c| c.class >= t));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A revision: a file, or `git:REV:PATH` read with `git show` from the current repository.
fn load(source: &str) -> anyhow::Result<Contract> {
    let spec = match source.strip_prefix("git:") {
        Some(rest) => {
            let (rev, path) = rest
                .split_once(':')
                .with_context(|| format!("`{source}`: expected git:REV:PATH"))?;
            let shown = Command::new("git")
                .args(["show", &format!("{rev}:{path}")])
                .output()
                .with_context(|| format!("`{source}`: cannot run git"))?;
            if !shown.status.success() {
                anyhow::bail!(
                    "`{source}`: {}",
                    String::from_utf8_lossy(&shown.stderr).trim()
                );
            }
            Spec::parse(Path::new(path), &shown.stdout)?
        }
        None => Spec::load(Path::new(source))?,
    };
    Ok(Contract::compile(&spec, &ContractOptions::default())?)
}

fn counts(changes: &[Change]) -> String {
    [Class::Breaking, Class::Hazard, Class::Info]
        .iter()
        .map(|class| {
            let n = changes.iter().filter(|c| c.class == *class).count();
            format!("{n} {class}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn arrow(c: &Change) -> String {
    match (&c.from, &c.to) {
        (Some(f), Some(t)) => format!("{f} -> {t}"),
        (Some(f), None) => format!("was {f}"),
        (None, Some(t)) => t.clone(),
        (None, None) => String::new(),
    }
}

fn text(out: &mut dyn Write, changes: &[Change]) -> anyhow::Result<()> {
    for c in changes {
        writeln!(
            out,
            "{:<8} {:<30} {:<28} {:<9} {:<24} {}",
            c.class.as_str(),
            c.kind,
            c.operation,
            c.location,
            c.field,
            arrow(c)
        )?;
    }
    writeln!(out, "{} changes ({})", changes.len(), counts(changes))?;
    Ok(())
}

fn markdown(out: &mut dyn Write, changes: &[Change], old: &str, new: &str) -> anyhow::Result<()> {
    writeln!(out, "### API changes: `{old}` → `{new}`\n")?;
    writeln!(out, "{} changes: {}.\n", changes.len(), counts(changes))?;
    if changes.iter().any(|c| c.class == Class::Hazard) {
        writeln!(
            out,
            "> **hazard**: clients that have not updated keep working but lose data or are ignored (a property added to a full-replace body is erased by every client that does not send it).\n"
        )?;
    }
    if changes.is_empty() {
        return Ok(());
    }
    writeln!(out, "| class | change | operation | where | field | |")?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    for c in changes {
        writeln!(
            out,
            "| {} | `{}` | `{}` | {} | `{}` | {} |",
            c.class,
            c.kind,
            c.operation,
            c.location,
            c.field,
            arrow(c).replace('|', "\\|")
        )?;
    }
    Ok(())
}
