//! `driftwatch check`: audit recorded traffic offline with the same core the proxy uses, and
//! fail a CI job when drift reaches `--fail-on`.

mod replay;
mod report;
mod row;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use crate::config::{ConfigError, Layers};
use crate::contract::Contract;
use crate::coverage::Coverage;
use crate::finding::Severity;
use crate::memory::Memory;
use crate::settings::Settings;
use crate::spec::Spec;
use crate::traffic::{Format, Item, Progress, Stream};
use replay::{Replay, audit_all};
use report::{Ending, Output, Report, Skipped};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The OpenAPI 3.0/3.1 spec (JSON or YAML, optionally .gz).
    #[arg(long)]
    spec: PathBuf,
    /// An OpenAPI Overlay applied to the spec before the check (repeat it for several, applied
    /// in order; `spec.overlays`).
    #[arg(long = "overlay", value_name = "FILE")]
    overlays: Vec<PathBuf>,
    /// Recorded traffic: a HAR 1.2 file, JSON Lines (ours, or nginx's or Envoy's JSON access
    /// log) or a combined/common access log; plain, gzip'd or zstd'd; `-` reads stdin.
    #[arg(long)]
    traffic: PathBuf,
    /// The traffic's format; `auto` tells it from the first line. `jsonl` covers driftwatch's
    /// JSON Lines and nginx's and Envoy's JSON logs (told apart line by line).
    #[arg(long, value_enum, default_value_t = InputFormat::Auto)]
    input_format: InputFormat,
    /// `text`: grouped by operation, kind and field; `json`: every finding and a summary;
    /// `jsonl`: one finding a line as it is found (the summary line on stderr); `sarif`,
    /// `junit`, `github`: one annotation per group, at its operation in the spec, for CI.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    format: Output,
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
    /// List every write of the spec on stderr first, with its semantics (replace, merge,
    /// action, ...) and why: what the replace findings rest on.
    #[arg(long)]
    writes: bool,
    /// After the findings, what the traffic exercised of the spec: per operation its
    /// requests, and the parameters, body properties and responses it declares that were
    /// never seen; the operations never requested; each tool's operations (a `coverage` object
    /// with `--format json`; `text` and `json` only).
    #[arg(long)]
    coverage: bool,
    /// Threads auditing in parallel (default: one per core); the findings are the same for
    /// any number.
    #[arg(long)]
    jobs: Option<usize>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum InputFormat {
    Auto,
    Har,
    Jsonl,
    Combined,
}

impl InputFormat {
    fn named(self) -> Option<Format> {
        match self {
            InputFormat::Auto => None,
            InputFormat::Har => Some(Format::Har),
            InputFormat::Jsonl => Some(Format::Jsonl),
            InputFormat::Combined => Some(Format::Combined),
        }
    }
}

/// The severity that fails the job (`check --fail-on`, `tools --fail-on`).
#[derive(ValueEnum, Clone, Copy, Debug)]
pub(super) enum FailOn {
    Info,
    Warning,
    Error,
    Critical,
    Never,
}

impl FailOn {
    pub(super) fn threshold(self) -> Option<Severity> {
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
        flags.extend(super::serve::overlay_flag(&self.overlays));
        let file = self.config.as_deref();
        let env = Vec::new();
        Settings::load(Layers { file, env, flags })
    }
}

/// A bar of the bytes read, on stderr when it is a terminal and the input is a file.
/// The spec, every part compiled first (offline, the report lists every part that cannot
/// be), and its revision.
fn compiled(args: &CheckArgs, settings: &Settings) -> anyhow::Result<(Contract, String)> {
    let spec = Spec::load_with(&args.spec, &settings.apis[0].spec.load)?;
    let options = crate::contract::ContractOptions {
        lazy: false,
        ..settings.apis[0].spec.contract.clone()
    };
    let contract = Contract::compile(&spec, &options)?;
    Ok((contract, spec.revision.clone()))
}

/// The audit of a recording as a pipeline: while this thread replays and reports one chunk
/// in recording order, a pool audits the next.
struct Pipeline<'a> {
    contract: &'a Contract,
    settings: &'a Settings,
    /// What the traffic exercised, with `--coverage`.
    coverage: Option<&'a Coverage>,
    /// The pool's threads; 0: one per core.
    threads: usize,
    bar: Option<&'a (indicatif::ProgressBar, Progress)>,
}

impl Pipeline<'_> {
    fn run(
        self,
        stream: Stream,
        replay: &mut Replay<'_>,
        report: &mut Report<'_>,
    ) -> anyhow::Result<()> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(self.threads)
            .thread_name(|n| format!("driftwatch-check-{n}"))
            .build()?;
        let (contract, settings) = (self.contract, self.settings);
        let shared = (replay.tracker.memory.hash_key, self.coverage);
        std::thread::scope(|scope| -> anyhow::Result<()> {
            let (tx, audited_chunks) = std::sync::mpsc::sync_channel(2);
            scope.spawn(move || {
                for chunk in stream {
                    let mut exchanges = Vec::with_capacity(chunk.len());
                    let mut problems = Vec::new();
                    for item in chunk {
                        match item {
                            Item::Exchange(e) => exchanges.push(e),
                            Item::Problem(p) => problems.push(p),
                        }
                    }
                    let audited =
                        pool.install(|| audit_all(contract, settings, shared, &exchanges));
                    if tx.send((problems, exchanges, audited)).is_err() {
                        return;
                    }
                }
            });
            for (problems, exchanges, audited) in audited_chunks {
                for p in problems {
                    report.problem(p);
                }
                for (exchange, mut audited) in exchanges.iter().zip(audited) {
                    let path = std::mem::take(&mut audited.path);
                    let findings = replay.findings(exchange, audited);
                    report.exchange(exchange, &path, findings)?;
                }
                if let Some((bar, progress)) = self.bar {
                    bar.set_position(progress.read());
                }
            }
            Ok(())
        })
    }
}

fn progress_bar(progress: Option<Progress>) -> Option<(indicatif::ProgressBar, Progress)> {
    use std::io::IsTerminal;
    let progress = progress.filter(|_| std::io::stderr().is_terminal())?;
    let style = indicatif::ProgressStyle::with_template(
        "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {eta} left",
    )
    .ok()?;
    let bar = indicatif::ProgressBar::new(progress.total).with_style(style);
    Some((bar, progress))
}

/// `--coverage` is said as text or in the JSON document; the other formats are each a
/// format someone else reads (one finding a line, SARIF, JUnit, workflow commands).
fn coverage_for(args: &CheckArgs, contract: &Contract) -> anyhow::Result<Option<Coverage>> {
    if !args.coverage {
        return Ok(None);
    }
    if !matches!(args.format, Output::Text | Output::Json) {
        anyhow::bail!(
            "--coverage is written with --format text or json, not with the other formats"
        );
    }
    Ok(Some(Coverage::new(contract)))
}

/// A recording of which no exchange could be read is an error, naming its first problem.
fn none_read(args: &CheckArgs, report: &Report<'_>) -> anyhow::Result<()> {
    if report.exchanges() == 0
        && let Some(first) = report.first_problem()
    {
        let traffic = args.traffic.display();
        let first = &first.reason;
        anyhow::bail!("{traffic}: no exchange could be read (first problem: {first})");
    }
    Ok(())
}

pub fn run(args: &CheckArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let settings = args.settings()?;
    let (contract, revision) = compiled(args, &settings)?;
    let coverage = coverage_for(args, &contract)?;
    if args.writes {
        super::writes::list(&contract, &mut std::io::stderr().lock())?;
    }
    let mut stream = Stream::open(&args.traffic, args.input_format.named())?;
    let format = stream.format;
    let bar = progress_bar(stream.progress.take());
    // The same silent-clear memory the proxy keeps, across the recording: replaying an
    // incident's traffic gives the verdict the live sidecar gave.
    let defaults = &settings.memory;
    let memory = Memory::new(defaults.max_entries, defaults.ttl, defaults.hash_key);
    let mut replay = Replay::new(&memory, &defaults.field_map);
    // stdout is line-buffered: a write per finding cost more than the audit.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    let mut report = Report::start(&mut out, args.format)?;
    let pipeline = Pipeline {
        contract: &contract,
        settings: &settings,
        coverage: coverage.as_ref(),
        threads: args.jobs.unwrap_or(0),
        bar: bar.as_ref(),
    };
    pipeline.run(stream, &mut replay, &mut report)?;
    if let Some((bar, _)) = bar {
        bar.finish_and_clear();
    }
    none_read(args, &report)?;
    let fail_on = args.fail_on.threshold();
    let failed = fail_on
        .zip(report.worst())
        .is_some_and(|(threshold, worst)| worst >= threshold);
    if args.writes {
        let stderr = &mut std::io::stderr().lock();
        super::writes::learned(&contract, &memory.survival, "", stderr)?;
    }
    report.finish(&Ending {
        format,
        revision: &revision,
        skipped: Skipped {
            warnings: &contract.warnings(),
            unaudited: &replay.unaudited,
        },
        spec: &args.spec,
        fail_on,
        coverage: coverage.map(|c| c.report(&contract, &revision)),
    })?;
    out.flush()?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
