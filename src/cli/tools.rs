//! `driftwatch tools`: check an MCP tool catalog (`tools/list`) against the spec, or generate
//! one from it. Exit 0 clean, 1 on a defect at or above `--fail-on` (error by default), 2 on
//! a load or mapping error. The report leads with the tools worst first, then the defects
//! worst first. For CI, each defect is an annotation at its tool in the catalog, as loud as
//! its severity, each unexposed operation a note at its operation in the spec.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::annotations::{self, Annotation, CiFormat, Level, Lines};
use super::check::FailOn;
use crate::catalog::{DefectKind, Mapping, Report, check, generate, read_tools, suggest_map};
use crate::contract::Contract;
use crate::finding::Severity;
use crate::spec::Spec;

#[derive(Args, Debug)]
pub struct ToolsArgs {
    /// The OpenAPI 3.0/3.1 spec.
    #[arg(long)]
    spec: PathBuf,
    /// An OpenAPI Overlay applied to the spec first (repeat it for several, applied in order).
    #[arg(long = "overlay", value_name = "FILE")]
    overlays: Vec<PathBuf>,
    /// The catalog: a `tools/list` result (JSON).
    #[arg(long, required_unless_present = "generate")]
    tools: Option<PathBuf>,
    /// TOML mapping tool names to operations (`[tools] update_channel = "updateChannel"`, or
    /// `{ operation = "PUT /path/{id}", headers = ["If-Match"] }`); see config/tools.toml.
    #[arg(long)]
    map: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Exit 1 when a defect reaches this severity: `critical` (a silent clear), `error` (an
    /// argument, type or required parameter the API refuses or ignores), `warning` (a tool not
    /// tied to an operation), `info` (an optional parameter no tool exposes).
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    fail_on: FailOn,
    /// Write a `tools/list` derived from the spec instead of checking one.
    #[arg(long)]
    generate: bool,
    /// Write a map (TOML) of the best-scoring operation for each tool the --map file (if any)
    /// does not map, the next candidates as comments, instead of checking.
    #[arg(long, conflicts_with = "generate")]
    suggest_map: bool,
    /// List every operation no tool reaches (text output shows the first 20 otherwise).
    #[arg(long)]
    all_unexposed: bool,
    /// With --generate: the operations to expose, one operationId or "METHOD /path" a line.
    #[arg(long, requires = "generate", conflicts_with = "all")]
    enable: Option<PathBuf>,
    /// With --generate: expose every operation.
    #[arg(long, requires = "generate")]
    all: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Format {
    Text,
    Json,
    Sarif,
    Junit,
    Github,
}

pub fn run(args: &ToolsArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let load = crate::spec::LoadOptions {
        overlays: args.overlays.clone(),
        ..Default::default()
    };
    let spec = Spec::load_with(&args.spec, &load)?;
    let contract = Contract::compile(&spec, &Default::default())?;
    if args.generate {
        let catalog = generate(&contract, enabled(args)?.as_deref())?;
        serde_json::to_writer_pretty(&mut *out, &catalog)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let path = args.tools.as_ref().context("--tools FILE")?;
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
    let tools = read_tools(&doc).with_context(|| format!("{}", path.display()))?;
    let mapping: Mapping = match &args.map {
        Some(map) => {
            let text =
                std::fs::read_to_string(map).with_context(|| format!("{}", map.display()))?;
            toml::from_str(&text).with_context(|| format!("{}", map.display()))?
        }
        None => Mapping::default(),
    };
    if args.suggest_map {
        out.write_all(suggest_map(&contract, &tools, &mapping).as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let report = check(&contract, &tools, &mapping)?;
    let threshold = args.fail_on.threshold();
    let files = Files {
        catalog: path,
        catalog_text: text,
        spec: &args.spec,
    };
    match args.format {
        Format::Sarif => ci(out, CiFormat::Sarif, &report, files, threshold)?,
        Format::Junit => ci(out, CiFormat::Junit, &report, files, threshold)?,
        Format::Github => ci(out, CiFormat::Github, &report, files, threshold)?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)?;
        }
        Format::Text => text_report(out, &report, args.all_unexposed)?,
    }
    let failed = threshold
        .zip(report.worst())
        .is_some_and(|(threshold, worst)| worst >= threshold);
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The operations `--generate` exposes: those `--enable` lists, or every one (`None`) for
/// `--all`.
fn enabled(args: &ToolsArgs) -> anyhow::Result<Option<Vec<String>>> {
    Ok(match (&args.enable, args.all) {
        (_, true) => None,
        (Some(path), false) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("{}", path.display()))?
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from)
                .collect(),
        ),
        (None, false) => anyhow::bail!(
            "--generate needs --enable FILE (operations are off until enabled) or --all"
        ),
    })
}

/// The two files annotations point into; the spec is read again only when a CI format asks.
struct Files<'a> {
    catalog: &'a Path,
    catalog_text: String,
    spec: &'a Path,
}

fn ci(
    out: &mut dyn Write,
    format: CiFormat,
    report: &Report,
    files: Files,
    threshold: Option<Severity>,
) -> std::io::Result<()> {
    let (catalog, spec) = (
        files.catalog.display().to_string(),
        files.spec.display().to_string(),
    );
    let catalog_lines = Lines::new(files.catalog_text);
    let spec_lines = Lines::of_spec(files.spec);
    let defects = report.defects.iter().map(|d| {
        let mut said = format!("tool `{}` ({})", d.tool, d.operation);
        if let Some(expected) = &d.expected {
            said += &format!(": the spec has {expected}");
        }
        if let Some(declared) = &d.declared {
            said += &format!(", the tool declares {declared}");
        }
        let fails = threshold.is_some_and(|t| d.severity >= t);
        Annotation {
            rule: d.kind.as_str().to_string(),
            level: Level::of(fails, Level::weight(d.severity)),
            fails,
            title: format!("{} {}", d.tool, d.field),
            message: format!("{} `{}` [{}], {said}", d.kind.as_str(), d.field, d.severity),
            file: catalog.clone(),
            line: catalog_lines.named(&d.tool),
            operation: (!d.operation.is_empty()).then(|| d.operation.clone()),
            properties: Default::default(),
        }
    });
    let unexposed = report.unexposed.iter().map(|op| Annotation {
        rule: "unexposed".into(),
        level: Level::Note,
        fails: false,
        title: op.clone(),
        message: format!("operation {op}: no tool in the catalog reaches it"),
        file: spec.clone(),
        line: spec_lines.operation(op),
        operation: Some(op.clone()),
        properties: Default::default(),
    });
    let annotations: Vec<Annotation> = defects.chain(unexposed).collect();
    let run = annotations::Run {
        command: "tools",
        clean: format!("{} tools match the spec", report.tools.len()),
        summary: format!(
            "{} tools, {} defects, {} operations no tool reaches",
            report.tools.len(),
            report.defects.len(),
            report.unexposed.len()
        ),
        annotations: &annotations,
    };
    annotations::write(out, format, &run)
}

/// The tools with defects worst first, then the defects worst first (kinds spelled as in
/// JSON), then each tool and how it was mapped (with inferred path bindings), tools the map
/// sends elsewhere, and the unexposed operations (the first 20 unless `all`): a big spec's
/// 1,198 of them would bury 107 defects, and 200 optional filters the one that erases data.
fn text_report(out: &mut dyn Write, report: &Report, all: bool) -> anyhow::Result<()> {
    for s in &report.summary {
        let counts = [
            (s.critical, "critical"),
            (s.error, "error"),
            (s.warning, "warning"),
            (s.info, "info"),
        ];
        let counts: Vec<String> = (counts.iter().filter(|(n, _)| *n > 0))
            .map(|(n, name)| format!("{n} {name}"))
            .collect();
        writeln!(out, "{:<8} {:<28} {}", s.worst, s.tool, counts.join(", "))?;
    }
    text_defects(out, report)?;
    text_tools(out, report)?;
    let shown = if all { report.unexposed.len() } else { 20 };
    for u in report.unexposed.iter().take(shown) {
        writeln!(out, "  unexposed            {u}")?;
    }
    if report.unexposed.len() > shown {
        writeln!(
            out,
            "  unexposed            ... and {} more (--all-unexposed lists them)",
            report.unexposed.len() - shown
        )?;
    }
    let by = |severity| {
        (report.defects.iter())
            .filter(|d| d.severity == severity)
            .count()
    };
    writeln!(
        out,
        "{} tools, {} defects ({} critical, {} error, {} warning, {} info), {} operations no tool reaches",
        report.tools.len(),
        report.defects.len(),
        by(Severity::Critical),
        by(Severity::Error),
        by(Severity::Warning),
        by(Severity::Info),
        report.unexposed.len()
    )?;
    Ok(())
}

/// Each defect, worst first, with its severity.
fn text_defects(out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
    for d in &report.defects {
        if d.kind == DefectKind::Unmapped {
            writeln!(
                out,
                "  {:<8} {:<20} {:<20} expected {}",
                d.severity,
                d.kind.as_str(),
                d.tool,
                d.expected.as_deref().unwrap_or("-")
            )?;
            continue;
        }
        writeln!(
            out,
            "  {:<8} {:<20} {:<20} {:<24} expected {:<18} declared {}",
            d.severity,
            d.kind.as_str(),
            d.tool,
            d.field,
            d.expected.as_deref().unwrap_or("-"),
            d.declared.as_deref().unwrap_or("-")
        )?;
    }
    Ok(())
}

/// Each tool and how it was mapped, and the tools the map sends elsewhere.
fn text_tools(out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
    for t in &report.tools {
        writeln!(
            out,
            "{:<28} -> {:<32} {:?} layout, mapped by {}",
            t.tool, t.operation, t.layout, t.by
        )?;
        for b in &t.bindings {
            writeln!(
                out,
                "  {:<26} fills {{{}}} (bound by {})",
                b.argument, b.parameter, b.by
            )?;
        }
    }
    for e in &report.elsewhere {
        writeln!(out, "{:<28} -> elsewhere: {}", e.tool, e.why)?;
    }
    Ok(())
}
