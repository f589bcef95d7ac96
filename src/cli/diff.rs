//! `driftwatch diff OLD NEW`: what changed between two revisions of a spec, classed by what it
//! does to clients that have not updated; for people (text), pull requests (markdown), tools
//! (JSON) and CI (SARIF, JUnit, GitHub annotations at the operation's line in the new
//! revision). A revision is a file, or `git:REV:PATH` from the current repository.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde_json::json;

use super::annotations::{self, Annotation, CiFormat, Level, Lines};
use crate::contract::{Contract, ContractOptions};
use crate::diff::{Change, Class, diff};
use crate::spec::{LoadOptions, Spec};

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The old revision: a spec file, or `git:REV:PATH` (e.g. `git:main:openapi.yaml`).
    old: String,
    /// The new revision, the same way.
    new: String,
    /// An OpenAPI Overlay applied to the new revision (repeat it for several, in order):
    /// `diff api.yaml api.yaml --overlay paging.yaml` shows what the overlay changes.
    #[arg(long = "overlay", value_name = "FILE")]
    overlays: Vec<PathBuf>,
    /// An OpenAPI Overlay applied to the old revision, the same way.
    #[arg(long = "old-overlay", value_name = "FILE")]
    old_overlays: Vec<PathBuf>,
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
    Sarif,
    Junit,
    Github,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum FailOn {
    Breaking,
    Hazard,
    Never,
}

pub fn run(args: &DiffArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let old = load(&args.old, &args.old_overlays)?;
    let new = load(&args.new, &args.overlays)?;
    let changes = diff(&old.contract, &new.contract);
    let threshold = match args.fail_on {
        FailOn::Breaking => Some(Class::Breaking),
        FailOn::Hazard => Some(Class::Hazard),
        FailOn::Never => None,
    };
    match args.format {
        Format::Sarif => ci(out, CiFormat::Sarif, &changes, &new, threshold)?,
        Format::Junit => ci(out, CiFormat::Junit, &changes, &new, threshold)?,
        Format::Github => ci(out, CiFormat::Github, &changes, &new, threshold)?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &json!({ "changes": changes }))?;
            writeln!(out)?;
        }
        Format::Text => text(out, &changes)?,
        Format::Markdown => markdown(out, &changes, &args.old, &args.new)?,
    }
    let failed = threshold.is_some_and(|t| changes.iter().any(|c| c.class >= t));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One revision, compiled, with the file it came from (and, for a git revision, the text
/// `git show` gave, which is nowhere on disk).
struct Revision {
    contract: Contract,
    file: String,
    shown: Option<String>,
}

impl Revision {
    /// Its lines, for annotations: read again only when a CI format asks.
    fn lines(&self) -> Lines {
        match &self.shown {
            Some(text) => Lines::new(text.clone()),
            None => Lines::of_spec(Path::new(&self.file)),
        }
    }
}

/// A revision: a file, or `git:REV:PATH` read with `git show` from the current repository.
fn load(source: &str, overlays: &[PathBuf]) -> anyhow::Result<Revision> {
    let options = LoadOptions {
        overlays: overlays.to_vec(),
        ..LoadOptions::default()
    };
    let (spec, file, shown) = match source.strip_prefix("git:") {
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
            let spec = Spec::parse_with(Path::new(path), &shown.stdout, &options)?;
            let text = String::from_utf8_lossy(&shown.stdout).into_owned();
            (spec, path.to_string(), Some(text))
        }
        None => (
            Spec::load_with(Path::new(source), &options)?,
            source.to_string(),
            None,
        ),
    };
    let contract = Contract::compile(&spec, &ContractOptions::default())?;
    Ok(Revision {
        contract,
        file,
        shown,
    })
}

/// One annotation per change, at its operation in the new revision (a removed operation is
/// not there: it points at the `paths` line).
fn ci(
    out: &mut dyn Write,
    format: CiFormat,
    changes: &[Change],
    new: &Revision,
    threshold: Option<Class>,
) -> std::io::Result<()> {
    let lines = new.lines();
    let annotations: Vec<Annotation> = changes
        .iter()
        .map(|c| {
            let fails = threshold.is_some_and(|t| c.class >= t);
            let weight = match c.class {
                Class::Breaking => Level::Error,
                Class::Hazard => Level::Warning,
                Class::Info => Level::Note,
            };
            let arrow = arrow(c);
            let arrow = if arrow.is_empty() {
                arrow
            } else {
                format!(": {arrow}")
            };
            Annotation {
                rule: c.kind.to_string(),
                level: Level::of(fails, weight),
                fails,
                title: format!("{} {} {}", c.operation, c.location, c.field)
                    .trim_end()
                    .to_string(),
                message: format!(
                    "{} change {} at {} {} {}{arrow}",
                    c.class, c.kind, c.operation, c.location, c.field
                ),
                file: new.file.clone(),
                line: lines.operation(&c.operation),
                operation: Some(c.operation.clone()),
                properties: Default::default(),
            }
        })
        .collect();
    let run = annotations::Run {
        command: "diff",
        clean: "no change between the revisions".into(),
        summary: format!("{} changes ({})", changes.len(), counts(changes)),
        annotations: &annotations,
    };
    annotations::write(out, format, &run)
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
