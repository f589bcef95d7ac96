//! What `check` prints, written as the findings come, in memory bounded by what is distinct:
//! `text` keeps one group per (operation, kind, location, field), with its count and first
//! exchanges; `json` writes each finding into its `findings` list as it is found and the
//! summary at the end; `jsonl` writes one finding a line, and the summary line to stderr;
//! `sarif`, `junit` and `github` keep the text groups and write one annotation per group.
//! Counts are kept for the summary; of the lines that could not be read, the first
//! [`PROBLEMS_KEPT`] are kept to show.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::json;

use super::super::annotations::{self, Annotation, CiFormat, Level, Lines};
use crate::finding::{Finding, Kind, Severity};
use crate::traffic::{Exchange, Format, Problem};

/// Unreadable lines or entries shown at most (all are counted).
pub const PROBLEMS_KEPT: usize = 100;
/// Bytes of `json` and `jsonl` rows gathered before they are written.
const ROWS_WRITTEN: usize = 1 << 16;
/// Exchanges listed per text group at most.
const EXCHANGES_SHOWN: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
    Jsonl,
    Sarif,
    Junit,
    Github,
}

impl Output {
    fn ci(self) -> Option<CiFormat> {
        match self {
            Output::Sarif => Some(CiFormat::Sarif),
            Output::Junit => Some(CiFormat::Junit),
            Output::Github => Some(CiFormat::Github),
            Output::Text | Output::Json | Output::Jsonl => None,
        }
    }
}

/// A text group: the first finding, how many, and the first exchanges.
struct Group {
    first: Finding,
    count: usize,
    exchanges: Vec<usize>,
}

/// Findings grouped by operation, kind, location and field, in that order. Looked up by
/// borrowed names: millions of findings in a few dozen groups build no key.
#[derive(Default)]
struct Groups(BTreeMap<String, ByKind>);

type ByKind = BTreeMap<(&'static str, &'static str), BTreeMap<String, Group>>;

impl Groups {
    fn add(&mut self, f: &Finding, exchange: usize) {
        let op = f.operation.as_deref().unwrap_or("(no operation)");
        if !self.0.contains_key(op) {
            self.0.insert(op.to_string(), BTreeMap::new());
        }
        let by_kind = self.0.get_mut(op).expect("inserted above");
        let by_field = by_kind
            .entry((f.kind.as_str(), f.location.as_str()))
            .or_default();
        if let Some(group) = by_field.get_mut(f.field.as_str()) {
            group.count += 1;
            if group.exchanges.len() < EXCHANGES_SHOWN {
                group.exchanges.push(exchange);
            }
            return;
        }
        let group = Group {
            count: 1,
            exchanges: vec![exchange],
            first: f.clone(),
        };
        by_field.insert(group.first.field.to_string(), group);
    }

    /// (operation, kind, location, field, group), in order.
    fn iter(&self) -> impl Iterator<Item = (&str, &'static str, &'static str, &str, &Group)> {
        self.0.iter().flat_map(|(op, by_kind)| {
            by_kind
                .iter()
                .flat_map(move |((kind, location), by_field)| {
                    by_field
                        .iter()
                        .map(move |(field, g)| (op.as_str(), *kind, *location, field.as_str(), g))
                })
        })
    }
}

/// What lenient load left out of the spec, and the exchanges that touched it.
pub struct Skipped<'a> {
    pub warnings: &'a [crate::contract::LoadWarning],
    pub unaudited: &'a BTreeMap<&'static str, usize>,
}

/// What the end of the report says besides the findings.
pub struct Ending<'a> {
    pub format: Format,
    pub revision: &'a str,
    pub skipped: Skipped<'a>,
    /// The spec, to point CI annotations at its operations.
    pub spec: &'a std::path::Path,
    /// `--fail-on`: which groups fail the job.
    pub fail_on: Option<Severity>,
    /// What the traffic exercised, with `--coverage` (text and json only).
    pub coverage: Option<crate::coverage::Report>,
}

pub struct Report<'o> {
    out: &'o mut dyn Write,
    output: Output,
    /// The JSON of the findings not yet written, handed to `out` [`ROWS_WRITTEN`] at a time:
    /// small writes through `dyn Write` cost more than the rows, and a row written on its own
    /// was copied twice, here and in the writer's buffer.
    rows: Vec<u8>,
    groups: Groups,
    /// Counts per severity and per kind, indexed by the enum: a map's lookup per finding was
    /// a cost of its own at millions of findings.
    by_severity: [usize; 4],
    by_kind: [usize; Kind::ALL.len()],
    findings: usize,
    exchanges: usize,
    problems: Vec<Problem>,
    problem_count: usize,
    /// The most severe finding so far.
    worst: Option<Severity>,
}

impl<'o> Report<'o> {
    pub fn start(out: &'o mut dyn Write, output: Output) -> std::io::Result<Report<'o>> {
        Ok(Report {
            out,
            output,
            rows: Vec::with_capacity(2 * ROWS_WRITTEN),
            groups: Groups::default(),
            by_severity: [0; 4],
            by_kind: [0; Kind::ALL.len()],
            findings: 0,
            exchanges: 0,
            problems: Vec::new(),
            problem_count: 0,
            worst: None,
        })
    }

    pub fn exchange(
        &mut self,
        exchange: &Exchange,
        path: &str,
        findings: Vec<Finding>,
    ) -> std::io::Result<()> {
        self.exchanges += 1;
        // By reference: a finding is 184 bytes, and most are only counted and written.
        for finding in &findings {
            self.finding(exchange, path, finding)?;
        }
        Ok(())
    }

    fn finding(&mut self, e: &Exchange, path: &str, f: &Finding) -> std::io::Result<()> {
        self.by_severity[f.severity as usize] += 1;
        self.by_kind[f.kind as usize] += 1;
        self.worst = self.worst.max(Some(f.severity));
        match self.output {
            Output::Json => {
                // The document opens with its first finding, so a run that stops before one
                // (no exchange could be read) writes nothing.
                let sep: &[u8] = if self.findings == 0 {
                    b"{\"findings\": [\n"
                } else {
                    b",\n"
                };
                self.rows.extend_from_slice(sep);
                super::row::write(&mut self.rows, f, &e.method, path, e.index);
            }
            Output::Jsonl => {
                super::row::write(&mut self.rows, f, &e.method, path, e.index);
                self.rows.push(b'\n');
            }
            Output::Text | Output::Sarif | Output::Junit | Output::Github => {
                self.groups.add(f, e.index);
            }
        }
        self.findings += 1;
        if self.rows.len() >= ROWS_WRITTEN {
            self.write_rows()?;
        }
        Ok(())
    }

    fn write_rows(&mut self) -> std::io::Result<()> {
        self.out.write_all(&self.rows)?;
        self.rows.clear();
        Ok(())
    }

    pub fn problem(&mut self, problem: Problem) {
        self.problem_count += 1;
        if self.problems.len() < PROBLEMS_KEPT {
            self.problems.push(problem);
        }
    }

    pub fn exchanges(&self) -> usize {
        self.exchanges
    }

    pub fn first_problem(&self) -> Option<&Problem> {
        self.problems.first()
    }

    pub fn worst(&self) -> Option<Severity> {
        self.worst
    }

    /// The end: the text table or the summary.
    pub fn finish(mut self, end: &Ending) -> anyhow::Result<()> {
        self.write_rows()?;
        let (format, skipped) = (end.format, &end.skipped);
        if let Some(ci) = self.output.ci() {
            let annotations = self.annotations(end);
            let run = annotations::Run {
                command: "check",
                clean: format!("{} exchanges, no finding", self.exchanges),
                summary: self.summary_line(),
                annotations: &annotations,
            };
            return Ok(annotations::write(self.out, ci, &run)?);
        }
        match self.output {
            Output::Text => self.write_text(format, skipped, end.coverage.as_ref())?,
            Output::Json => {
                let summary = serde_json::to_string_pretty(&self.summary(end.revision, skipped))?;
                let open = if self.findings == 0 {
                    "{\"findings\": ["
                } else {
                    "\n"
                };
                write!(self.out, "{open}],\n\"summary\": {summary}")?;
                if let Some(coverage) = &end.coverage {
                    let coverage = serde_json::to_string_pretty(coverage)?;
                    write!(self.out, ",\n\"coverage\": {coverage}")?;
                }
                writeln!(self.out, "}}")?;
            }
            Output::Jsonl => {
                self.out.flush()?;
                eprintln!("{}", self.summary_line());
            }
            Output::Sarif | Output::Junit | Output::Github => {}
        }
        Ok(())
    }

    /// One annotation per group, at its operation's line in the spec.
    fn annotations(&self, end: &Ending) -> Vec<Annotation> {
        let lines = Lines::of_spec(end.spec);
        let file = end.spec.display().to_string();
        self.groups
            .iter()
            .map(|(op, kind, location, field, group)| {
                let severity = group.first.severity;
                let fails = end.fail_on.is_some_and(|t| severity >= t);
                let weight = Level::weight(severity);
                let operation = group.first.operation.clone();
                let exchanges: Vec<String> =
                    group.exchanges.iter().map(|i| i.to_string()).collect();
                let more = if group.count > group.exchanges.len() {
                    ", ..."
                } else {
                    ""
                };
                Annotation {
                    rule: kind.to_string(),
                    level: Level::of(fails, weight),
                    fails,
                    title: format!("{op} {location} {field}").trim_end().to_string(),
                    message: format!(
                        "{} [{} {kind}, {}x, exchange {}{more}]",
                        group.first.message,
                        severity.as_str(),
                        group.count,
                        exchanges.join(", ")
                    ),
                    line: operation.as_deref().map_or(1, |o| lines.operation(o)),
                    file: file.clone(),
                    operation: operation.map(String::from),
                    properties: annotations::group_properties(group.count, &group.exchanges),
                }
            })
            .collect()
    }

    fn summary(&self, revision: &str, skipped: &Skipped) -> serde_json::Value {
        let malformed: Vec<_> = self
            .problems
            .iter()
            .map(|p| json!({"exchange": p.index, "reason": p.reason}))
            .collect();
        json!({
            "spec_revision": revision,
            "exchanges": self.exchanges,
            "findings": self.findings,
            "by_severity": self.severity_counts(),
            "by_kind": self.kind_counts(),
            "malformed": malformed,
            "malformed_total": self.problem_count,
            "load_warnings": skipped.warnings,
            "unaudited": skipped.unaudited,
        })
    }

    /// Findings per severity, most severe first.
    fn severity_counts(&self) -> serde_json::Map<String, serde_json::Value> {
        [
            Severity::Critical,
            Severity::Error,
            Severity::Warning,
            Severity::Info,
        ]
        .into_iter()
        .map(|s| {
            let n = self.by_severity[s as usize];
            (s.as_str().to_string(), json!(n))
        })
        .collect()
    }

    /// Findings per kind that occurred, by name.
    fn kind_counts(&self) -> BTreeMap<&'static str, usize> {
        Kind::ALL
            .into_iter()
            .filter(|k| self.by_kind[*k as usize] > 0)
            .map(|k| (k.as_str(), self.by_kind[k as usize]))
            .collect()
    }

    fn summary_line(&self) -> String {
        let counts: Vec<String> = self
            .severity_counts()
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect();
        format!(
            "{} exchanges, {} findings ({}), {} malformed",
            self.exchanges,
            self.findings,
            counts.join(", "),
            self.problem_count
        )
    }

    /// A table grouped by operation, then kind and field, listing the first exchanges each
    /// came from.
    fn write_text(
        self,
        format: Format,
        skipped: &Skipped,
        coverage: Option<&crate::coverage::Report>,
    ) -> anyhow::Result<()> {
        let mut current = "";
        for (op, kind, location, field, group) in self.groups.iter() {
            if op != current {
                writeln!(self.out, "{op}")?;
                current = op;
            }
            let list: Vec<String> = group.exchanges.iter().map(|i| i.to_string()).collect();
            let more = if group.count > group.exchanges.len() {
                ", ..."
            } else {
                ""
            };
            writeln!(
                self.out,
                "  {:<8} {kind:<22} {location:<6} {field:<24} x{} (exchange {}{more})",
                group.first.severity.as_str(),
                group.count,
                list.join(", ")
            )?;
            writeln!(self.out, "           {}", group.first.message)?;
        }
        let unit = match format {
            Format::Har => "entry",
            Format::Jsonl | Format::Combined => "line",
        };
        for p in &self.problems {
            writeln!(self.out, "malformed {unit} {}: {}", p.index + 1, p.reason)?;
        }
        if self.problem_count > self.problems.len() {
            let more = self.problem_count - self.problems.len();
            writeln!(self.out, "... and {more} more malformed")?;
        }
        skipped.write_text(self.out)?;
        if let Some(coverage) = coverage {
            coverage.write_text(self.out)?;
        }
        writeln!(self.out, "{}", self.summary_line())?;
        Ok(())
    }
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
