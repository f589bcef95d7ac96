//! `driftwatch overlay apply`: the spec with its overlays applied, as the contract will read
//! it before bundling, written out as JSON: to see what an overlay does, and to compare it with
//! another Overlay tool's output. `driftwatch overlay propose`: an overlay proposed from the
//! sidecar's events (a file of them, or a running sidecar's `/findings`), written to stdout.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use std::io::Read;

use crate::propose::{Options, Tally, written};
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
    /// Write an overlay that would declare what the API answered 2xx to and its spec does not
    /// say (docs/overlays.md), from the sidecar's events; nothing is applied.
    Propose(ProposeArgs),
}

#[derive(Args, Debug)]
struct ProposeArgs {
    /// The spec the overlay is for (the targets of response fields are found in it).
    #[arg(long)]
    spec: PathBuf,
    /// The sidecar's events: JSON Lines as `events.output` writes them, or a saved `/findings`
    /// answer; `-` reads stdin.
    #[arg(
        long,
        required_unless_present = "findings",
        conflicts_with = "findings"
    )]
    events: Option<PathBuf>,
    /// A running sidecar's `/findings` URL (`http://127.0.0.1:9090/findings`): the events it
    /// keeps.
    #[arg(long)]
    findings: Option<String>,
    /// 2xx answers an action needs at least (never fewer than 2 by default: no action rests on
    /// one lucky request).
    #[arg(long, default_value_t = Options::default().min_requests)]
    min_requests: usize,
    /// Operations a query parameter must have been sent to, at least (2 or more proposes only
    /// parameters several operations took).
    #[arg(long, default_value_t = Options::default().min_operations)]
    min_operations: usize,
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
        OverlayCommand::Propose(args) => propose(args, out),
    }
}

fn propose(args: &ProposeArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let (text, source) = match (&args.events, &args.findings) {
        (Some(path), _) if path.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text)?;
            (text, "stdin".to_string())
        }
        (Some(path), _) => (
            std::fs::read_to_string(path).with_context(|| path.display().to_string())?,
            path.display().to_string(),
        ),
        (None, Some(url)) => (fetch(url)?, url.clone()),
        (None, None) => anyhow::bail!("name --events FILE or --findings URL"),
    };
    let tally = Tally::read(&text).with_context(|| source.clone())?;
    let (doc, _) = crate::spec::with_overlays(&args.spec, &[], DEFAULT_MAX_BYTES)?;
    let options = Options {
        min_requests: args.min_requests,
        min_operations: args.min_operations,
    };
    let actions = tally.propose(&doc, options);
    let mut unfit = match tally.unfit {
        0 => String::new(),
        n => format!(
            "; {n} findings not proposed: a parameter name, path, method or field name no API \
             could have (docs/overlays.md)"
        ),
    };
    if let n @ 1.. = tally.outside(&doc) {
        unfit.push_str(&format!(
            "; {n} requests to endpoints outside the spec's base path not proposed: another \
             document's (docs/operations.md)"
        ));
    }
    if actions.is_empty() {
        eprintln!(
            "driftwatch overlay propose: nothing to propose from {} events of {source}{unfit}",
            tally.events
        );
        return Ok(ExitCode::SUCCESS);
    }
    let text = written(&actions, &source, tally.events)?;
    write!(out, "{text}")?;
    eprintln!(
        "driftwatch overlay propose: {} actions from {} events{unfit}",
        actions.len(),
        tally.events
    );
    Ok(ExitCode::SUCCESS)
}

/// GET a running sidecar's `/findings`, within a few seconds.
fn fetch(url: &str) -> anyhow::Result<String> {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
        let asked = async {
            let response = client.get(url.parse()?).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            anyhow::ensure!(status.is_success(), "{url} answered {status}");
            Ok(String::from_utf8_lossy(&body).into_owned())
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), asked)
            .await
            .map_err(|_| anyhow::anyhow!("{url}: no answer within 10 s"))?
    })
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
