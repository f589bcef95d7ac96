//! `driftwatch incident`: a running sidecar's silent clears, each as one story (the read, the
//! write, the answer or read that found the field empty), for the responder a page sent. Text
//! for a terminal, Markdown for a postmortem, JSON for a program; with `incidents.keep_values`,
//! what each field held and a `curl` that puts it back. Reads `/incidents` on the admin port,
//! with the admin token when given.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::incident::{Format, Incident, render};

/// How long the admin port has to answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of an answer read at most (the ring's own bound, `incidents.max_bytes`, is 8 MiB by
/// default).
const MAX_ANSWER: usize = 256 << 20;

#[derive(Args, Debug)]
pub struct IncidentArgs {
    /// The incident (the write's request id); none: every incident, newest first.
    id: Option<String>,
    /// The sidecar's admin URL.
    #[arg(long, default_value = "http://127.0.0.1:9090")]
    admin: String,
    /// A file holding the admin token (`admin.token_file`).
    #[arg(long)]
    token_file: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// The API's base URL, for the restore's `curl` (default: `$API`, set it in the shell).
    #[arg(long, default_value = "$API")]
    api: String,
    /// Only the incidents of this write operation.
    #[arg(long)]
    operation: Option<String>,
    /// Only those that erased this field (as the write names it).
    #[arg(long)]
    field: Option<String>,
    /// Only those whose write this tool made.
    #[arg(long)]
    tool: Option<String>,
    /// Only those changed since (RFC 3339 or Unix seconds).
    #[arg(long)]
    since: Option<String>,
}

pub fn run(args: &IncidentArgs, out: &mut dyn std::io::Write) -> anyhow::Result<ExitCode> {
    let token = match &args.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--token-file {}", path.display()))?;
            Some(text.trim_end().to_string())
        }
        None => None,
    };
    let url = url(args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let body = runtime.block_on(fetch(&url, token.as_deref()))?;
    let incidents: Vec<Incident> = serde_json::from_slice::<Answer>(&body)
        .with_context(|| format!("{url}: not an /incidents answer"))?
        .incidents;
    if args.id.is_some() && incidents.is_empty() {
        bail!(
            "no incident {} at {}",
            args.id.as_deref().unwrap_or(""),
            args.admin
        );
    }
    out.write_all(render(&incidents, args.format, &args.api).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

#[derive(serde::Deserialize)]
struct Answer {
    incidents: Vec<Incident>,
}

/// `/incidents` with the filters asked for.
fn url(args: &IncidentArgs) -> anyhow::Result<hyper::Uri> {
    let mut query = form_urlencoded::Serializer::new(String::new());
    let filters = [
        ("id", &args.id),
        ("operation", &args.operation),
        ("field", &args.field),
        ("tool", &args.tool),
        ("since", &args.since),
    ];
    for (key, value) in filters {
        if let Some(value) = value {
            query.append_pair(key, value);
        }
    }
    let text = format!(
        "{}/incidents?{}",
        args.admin.trim_end_matches('/'),
        query.finish()
    );
    text.parse()
        .with_context(|| format!("--admin {}", args.admin))
}

async fn fetch(url: &hyper::Uri, token: Option<&str>) -> anyhow::Result<Bytes> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut request = http::Request::get(url.clone());
    if let Some(token) = token {
        request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let asked = client.request(request.body(Empty::new())?);
    let response = tokio::time::timeout(TIMEOUT, asked)
        .await
        .map_err(|_| anyhow::anyhow!("{url}: no answer within {TIMEOUT:?}"))?
        .with_context(|| format!("{url}: cannot reach the admin port"))?;
    let status = response.status();
    let limited = http_body_util::Limited::new(response.into_body(), MAX_ANSWER);
    let body = tokio::time::timeout(TIMEOUT, limited.collect())
        .await
        .map_err(|_| anyhow::anyhow!("{url}: the answer did not end within {TIMEOUT:?}"))?
        .map_err(|e| anyhow::anyhow!("{url}: {e} (at most {MAX_ANSWER} bytes are read)"))?
        .to_bytes();
    if status == http::StatusCode::UNAUTHORIZED {
        bail!("{url}: 401, the admin port needs its token: --token-file FILE");
    }
    if !status.is_success() {
        bail!(
            "{url}: {status}: {}",
            String::from_utf8_lossy(&body).trim_end()
        );
    }
    Ok(body)
}
