//! `driftwatch check`: audit recorded traffic offline with the same core the proxy uses, and
//! fail a CI job when drift reaches `--fail-on`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::json;

use std::time::SystemTime;

use crate::audit::{ReportedOnce, audit, audit_response};
use crate::config::{ConfigError, Layers};
use crate::contract::Contract;
use crate::finding::{Finding, Severity};
use crate::memory::Memory;
use crate::request::RequestView;
use crate::response::ResponseView;
use crate::settings::Settings;
use crate::silent::{Tracker, resource_key};
use crate::spec::Spec;
use crate::traffic::Traffic;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The OpenAPI 3.0/3.1 spec (JSON or YAML, optionally .gz).
    #[arg(long)]
    spec: PathBuf,
    /// Recorded traffic: a HAR 1.2 file or JSON Lines.
    #[arg(long)]
    traffic: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Exit 1 when a finding reaches this severity.
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    fail_on: FailOn,
    /// Path prefix to strip before routing, instead of the spec's `servers` URLs.
    #[arg(long)]
    base_path: Option<String>,
    /// The sidecar's TOML config, for the same [spec] and [memory] settings as live
    /// (write semantics, base path, field maps, linked resources, credential header).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Refuse a spec with a part that cannot be compiled, instead of skipping the part with a
    /// warning.
    #[arg(long)]
    strict: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Format {
    Text,
    Json,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum FailOn {
    Info,
    Warning,
    Error,
    Critical,
    Never,
}

impl FailOn {
    fn threshold(self) -> Option<Severity> {
        match self {
            FailOn::Info => Some(Severity::Info),
            FailOn::Warning => Some(Severity::Warning),
            FailOn::Error => Some(Severity::Error),
            FailOn::Critical => Some(Severity::Critical),
            FailOn::Never => None,
        }
    }
}

impl CheckArgs {
    /// The config file's settings, with `--base-path` and `--strict` over it. The environment
    /// is not read: an offline check gives the same verdict on every machine.
    fn settings(&self) -> Result<Settings, ConfigError> {
        let mut flags = Vec::new();
        if let Some(base) = &self.base_path {
            let base = toml::Value::String(base.clone());
            flags.push(("spec.base_path", "--base-path", base));
        }
        if self.strict {
            flags.push(("spec.strict", "--strict", toml::Value::Boolean(true)));
        }
        let file = self.config.as_deref();
        let env = Vec::new();
        Settings::load(Layers { file, env, flags })
    }
}

/// One finding with the exchange it came from, as `--format json` prints it.
#[derive(Serialize)]
struct Row<'a> {
    #[serde(flatten)]
    finding: &'a Finding,
    method: &'a str,
    path: &'a str,
    exchange: usize,
}

pub fn run(args: &CheckArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let settings = args.settings()?;
    let spec = Spec::load(&args.spec)?;
    let contract = Contract::compile(&spec, &settings.spec.contract)?;
    let revision = spec.revision.clone();
    drop(spec);
    let traffic = Traffic::read(&args.traffic)?;
    if traffic.exchanges.is_empty() && !traffic.problems.is_empty() {
        anyhow::bail!(
            "{}: no exchange could be read (first problem: {})",
            args.traffic.display(),
            traffic.problems[0].reason
        );
    }
    let mut results = Vec::new();
    // The same silent-clear memory the proxy keeps, across the recording: replaying an
    // incident's traffic gives the verdict the live sidecar gave.
    let defaults = &settings.memory;
    let memory = Memory::new(defaults.max_entries, defaults.ttl, defaults.hash_key);
    let tracker = Tracker {
        memory: &memory,
        field_maps: &defaults.field_map,
    };
    let reported = ReportedOnce::default();
    // Exchanges that reached an operation with parts skipped at load, by reason.
    let mut unaudited: BTreeMap<&str, usize> = BTreeMap::new();
    for exchange in &traffic.exchanges {
        let request = RequestView::new(
            &exchange.method,
            &exchange.url,
            &exchange.headers,
            exchange.body.as_deref(),
        );
        let audited = audit(&contract, &request);
        for reason in audited.operation.iter().flat_map(|op| &op.skipped) {
            *unaudited.entry(reason.unaudited_reason()).or_default() += 1;
        }
        let mut findings = audited.findings;
        let credential = crate::request::Headers::get(
            exchange.headers.as_slice(),
            defaults.scope_header.as_str(),
        );
        let remembered = audited.operation.and_then(|op| {
            Some((
                op,
                resource_key(op, &audited.path_values, memory.hash_key.scope(credential))?,
            ))
        });
        if let Some((op, key)) = remembered {
            let at = exchange.at.unwrap_or_else(SystemTime::now);
            let at_risk = tracker.before_write(op, &key, at, &mut findings);
            if let Some(response) = &exchange.response {
                let request_id =
                    crate::request::Headers::get(exchange.headers.as_slice(), "x-request-id")
                        .map_or_else(|| format!("exchange-{}", exchange.index), String::from);
                let body = response
                    .body
                    .as_deref()
                    .and_then(|b| serde_json::from_slice(b).ok());
                findings.extend(
                    tracker
                        .after_response(
                            op,
                            &key,
                            &request_id,
                            at,
                            response.status,
                            body.as_ref(),
                            at_risk,
                        )
                        .confirmed,
                );
            }
        }
        if let (Some(op), Some(response)) = (audited.operation, &exchange.response) {
            let view = ResponseView {
                status: response.status,
                headers: &response.headers,
                body: response.body.as_deref(),
                parsed: None,
            };
            let mut answered = audit_response(&contract, op, &view);
            reported.retain_new(&mut answered);
            findings.extend(answered);
        }
        // Where it went, not the values its path carries, unless events.log_values says so.
        let path = match settings.events.log_values {
            true => request.path.to_string(),
            false => contract.path_shape(request.path),
        };
        for finding in findings {
            results.push((exchange, path.clone(), finding));
        }
    }
    let rows: Vec<Row> = results
        .iter()
        .map(|(e, path, f)| Row {
            finding: f,
            method: &e.method,
            path,
            exchange: e.index,
        })
        .collect();
    let skipped = Skipped {
        warnings: &contract.warnings,
        unaudited: &unaudited,
    };
    match args.format {
        Format::Json => write_json(out, &rows, &traffic, &revision, &skipped)?,
        Format::Text => write_text(out, &rows, &traffic, &skipped)?,
    }
    let failed = args
        .fail_on
        .threshold()
        .is_some_and(|t| rows.iter().any(|r| r.finding.severity >= t));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Findings per severity, most severe first.
fn severity_counts(rows: &[Row]) -> serde_json::Map<String, serde_json::Value> {
    [
        Severity::Critical,
        Severity::Error,
        Severity::Warning,
        Severity::Info,
    ]
    .into_iter()
    .map(|s| {
        (
            s.as_str().to_string(),
            json!(rows.iter().filter(|r| r.finding.severity == s).count()),
        )
    })
    .collect()
}

/// What lenient load left out of the spec, and the exchanges that touched it.
struct Skipped<'a> {
    warnings: &'a [crate::contract::LoadWarning],
    unaudited: &'a BTreeMap<&'a str, usize>,
}

impl Skipped<'_> {
    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        const SHOWN: usize = 20;
        if self.warnings.is_empty() {
            return Ok(());
        }
        let by_reason: Vec<String> = crate::contract::count_by_reason(self.warnings)
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{} {n}", r.as_str()))
            .collect();
        writeln!(
            out,
            "spec: {} part(s) skipped at load ({}); --strict refuses the spec instead",
            self.warnings.len(),
            by_reason.join(", ")
        )?;
        for w in self.warnings.iter().take(SHOWN) {
            writeln!(out, "  {w}")?;
        }
        if self.warnings.len() > SHOWN {
            writeln!(out, "  ... and {} more", self.warnings.len() - SHOWN)?;
        }
        for (reason, n) in self.unaudited {
            writeln!(out, "  {n} exchange(s) partly unaudited: {reason}")?;
        }
        Ok(())
    }
}

fn write_json(
    out: &mut dyn Write,
    rows: &[Row],
    traffic: &Traffic,
    revision: &str,
    skipped: &Skipped,
) -> anyhow::Result<()> {
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for row in rows {
        *by_kind.entry(row.finding.kind.as_str()).or_default() += 1;
    }
    let malformed: Vec<_> = traffic
        .problems
        .iter()
        .map(|p| json!({"exchange": p.index, "reason": p.reason}))
        .collect();
    let doc = json!({
        "findings": rows,
        "summary": {
            "spec_revision": revision,
            "exchanges": traffic.exchanges.len(),
            "findings": rows.len(),
            "by_severity": severity_counts(rows),
            "by_kind": by_kind,
            "malformed": malformed,
            "load_warnings": skipped.warnings,
            "unaudited": skipped.unaudited,
        }
    });
    serde_json::to_writer_pretty(&mut *out, &doc).context("writing output")?;
    writeln!(out)?;
    Ok(())
}

/// A table grouped by operation, then kind and field, listing the exchanges each came from.
fn write_text(
    out: &mut dyn Write,
    rows: &[Row],
    traffic: &Traffic,
    skipped: &Skipped,
) -> anyhow::Result<()> {
    // (operation, kind, location, field) to the first finding and every exchange it came from.
    type Key<'a> = (&'a str, &'a str, &'a str, &'a str);
    let mut groups: BTreeMap<Key, (&Finding, Vec<usize>)> = BTreeMap::new();
    for row in rows {
        let f = row.finding;
        let op = f.operation.as_deref().unwrap_or("(no operation)");
        let entry = groups
            .entry((op, f.kind.as_str(), f.location.as_str(), f.field.as_str()))
            .or_insert((f, Vec::new()));
        entry.1.push(row.exchange);
    }
    let mut current = "";
    for ((op, kind, location, field), (finding, exchanges)) in &groups {
        if *op != current {
            writeln!(out, "{op}")?;
            current = op;
        }
        let list: Vec<String> = exchanges.iter().take(8).map(|i| i.to_string()).collect();
        let more = if exchanges.len() > 8 { ", ..." } else { "" };
        writeln!(
            out,
            "  {:<8} {kind:<22} {location:<6} {field:<24} x{} (exchange {}{more})",
            finding.severity.as_str(),
            exchanges.len(),
            list.join(", ")
        )?;
        writeln!(out, "           {}", finding.message)?;
    }
    for p in &traffic.problems {
        writeln!(
            out,
            "malformed {} {}: {}",
            if traffic.format == "har" {
                "entry"
            } else {
                "line"
            },
            p.index + 1,
            p.reason
        )?;
    }
    skipped.write_text(out)?;
    let counts = severity_counts(rows);
    let counts: Vec<String> = counts.iter().map(|(s, n)| format!("{s} {n}")).collect();
    writeln!(
        out,
        "{} exchanges, {} findings ({}), {} malformed",
        traffic.exchanges.len(),
        rows.len(),
        counts.join(", "),
        traffic.problems.len()
    )?;
    Ok(())
}
