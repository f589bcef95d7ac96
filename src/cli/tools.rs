//! `driftwatch tools`: check an MCP tool catalog (`tools/list`) against the spec, or generate
//! one from it. Exit 0 clean, 1 on any defect, 2 on a load or mapping error.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use crate::catalog::{Mapping, Report, check, generate, read_tools};
use crate::contract::Contract;
use crate::spec::Spec;

#[derive(Args, Debug)]
pub struct ToolsArgs {
    /// The OpenAPI 3.0/3.1 spec.
    #[arg(long)]
    spec: PathBuf,
    /// The catalog: a `tools/list` result (JSON).
    #[arg(long, required_unless_present = "generate")]
    tools: Option<PathBuf>,
    /// TOML mapping tool names to operations (`[tools] update_channel = "updateChannel"`, or
    /// `{ operation = "PUT /path/{id}", headers = ["If-Match"] }`); see config/tools.toml.
    #[arg(long)]
    map: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write a `tools/list` derived from the spec instead of checking one.
    #[arg(long)]
    generate: bool,
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
}

pub fn run(args: &ToolsArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let spec = Spec::load(&args.spec)?;
    let contract = Contract::compile(&spec, &Default::default())?;
    if args.generate {
        let enabled = match (&args.enable, args.all) {
            (_, true) => None,
            (Some(path), false) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("{}", path.display()))?
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(String::from)
                    .collect::<Vec<_>>(),
            ),
            (None, false) => anyhow::bail!(
                "--generate needs --enable FILE (operations are off until enabled) or --all"
            ),
        };
        let catalog = generate(&contract, enabled.as_deref())?;
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
    let report = check(&contract, &tools, &mapping)?;
    match args.format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)?;
        }
        Format::Text => text_report(out, &report)?,
    }
    Ok(if report.defects.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn text_report(out: &mut dyn Write, report: &Report) -> anyhow::Result<()> {
    for t in &report.tools {
        writeln!(
            out,
            "{:<28} -> {:<32} {:?} layout, mapped by {}",
            t.tool, t.operation, t.layout, t.by
        )?;
    }
    for d in &report.defects {
        writeln!(
            out,
            "  {:<20} {:<20} {:<24} expected {:<18} declared {}",
            format!("{:?}", d.kind),
            d.tool,
            d.field,
            d.expected.as_deref().unwrap_or("-"),
            d.declared.as_deref().unwrap_or("-")
        )?;
    }
    for u in &report.unexposed {
        writeln!(out, "  unexposed            {u}")?;
    }
    writeln!(
        out,
        "{} tools, {} defects, {} operations no tool reaches",
        report.tools.len(),
        report.defects.len(),
        report.unexposed.len()
    )?;
    Ok(())
}
