//! `driftwatch health`: exit 0 when a running sidecar answers `/readyz` (or `/healthz`) with
//! 200, else 1 with the reason on stderr. It is what the image's HEALTHCHECK and an exec probe
//! run: the image has no curl or wget. It reads the admin address from the same config
//! file and environment `serve` reads, so it needs no argument inside the container.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::config::Layers;
use crate::settings::Settings;

/// How long the probe waits for an answer.
const TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Args, Debug)]
pub struct HealthArgs {
    /// The admin address to ask (default: `admin.listen` from the config and environment; an
    /// unspecified address such as 0.0.0.0 is asked on loopback).
    #[arg(long)]
    admin: Option<SocketAddr>,
    /// TOML config file, the one `serve` reads.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Ask `/healthz` (the process is up) instead of `/readyz` (it is serving).
    #[arg(long)]
    live: bool,
}

pub fn run(args: &HealthArgs) -> anyhow::Result<ExitCode> {
    let admin = match args.admin {
        Some(admin) => admin,
        None => {
            let layers = Layers {
                file: args.config.as_deref(),
                env: std::env::vars().collect(),
                flags: Vec::new(),
            };
            Settings::load(layers)?.admin.listen
        }
    };
    let url = format!(
        "http://{}{}",
        asked(admin),
        if args.live { "/healthz" } else { "/readyz" }
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let status = runtime.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
        tokio::time::timeout(TIMEOUT, client.get(url.parse()?))
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {TIMEOUT:?}"))?
            .map(|response| response.status())
            .map_err(|e| anyhow::anyhow!("cannot reach it: {e}"))
    });
    match status {
        Ok(status) if status.is_success() => Ok(ExitCode::SUCCESS),
        Ok(status) => {
            eprintln!("driftwatch health: {url} answered {status}");
            Ok(ExitCode::from(1))
        }
        Err(e) => {
            eprintln!("driftwatch health: {url}: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Where to ask: the listen address, or loopback when it listens on every address.
fn asked(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}
