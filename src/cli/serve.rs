//! `driftwatch serve`: run the sidecar. Loads the config (file, flags, env), the spec, binds
//! both listeners, and serves until SIGTERM or SIGINT, then drains and exits 0.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::proxy::{Revision, Sidecar, Source};
use crate::spec::Spec;

#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// The OpenAPI 3.0/3.1 spec (JSON or YAML, optionally .gz).
    #[arg(long)]
    spec: Option<PathBuf>,
    /// The API: http://host:port or https://host:port.
    #[arg(long)]
    upstream: Option<String>,
    /// Proxy listen address (default 127.0.0.1:8080).
    #[arg(long)]
    listen: Option<String>,
    /// Admin listen address for /metrics, /healthz, /readyz, /findings, /spec (default 127.0.0.1:9090).
    #[arg(long)]
    admin_listen: Option<String>,
    /// observe (forward everything) or enforce (refuse harmful requests).
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// `off` forwards everything unaudited (the pass-through baseline).
    #[arg(long, value_enum)]
    audit: Option<Switch>,
    /// TOML config file; see config/driftwatch.toml for every key.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Refuse a spec with a part that cannot be compiled, instead of skipping the part with a
    /// warning (`spec.strict`).
    #[arg(long)]
    strict: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ModeArg {
    Observe,
    Enforce,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Switch {
    On,
    Off,
}

impl ServeArgs {
    /// The flags as config overrides (`section.key`, value).
    fn overrides(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(v) = &self.spec {
            out.push(("spec.path", v.display().to_string()));
        }
        if let Some(v) = &self.upstream {
            out.push(("proxy.upstream", v.clone()));
        }
        if let Some(v) = &self.listen {
            out.push(("proxy.listen", v.clone()));
        }
        if let Some(v) = &self.admin_listen {
            out.push(("admin.listen", v.clone()));
        }
        if let Some(m) = self.mode {
            out.push((
                "proxy.mode",
                if matches!(m, ModeArg::Enforce) {
                    "enforce"
                } else {
                    "observe"
                }
                .into(),
            ));
        }
        out
    }
}

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let mut config = Config::load(args.config.as_deref(), &args.overrides(), std::env::vars())?;
    if let Some(switch) = args.audit {
        config.audit.enabled = matches!(switch, Switch::On);
    }
    config.spec.strict |= args.strict;
    init_logging();
    let runtime = match config.proxy.workers {
        1 => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        0 => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?,
        n => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build()?,
    };
    runtime.block_on(async move {
        let sidecar = build(config, None).await?;
        let proxy = TcpListener::bind(sidecar.config.proxy.listen).await.map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", sidecar.config.proxy.listen))?;
        let admin = TcpListener::bind(sidecar.config.admin.listen).await.map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", sidecar.config.admin.listen))?;
        sidecar.revision().log_warnings();
        tracing::info!(
            listen = %proxy.local_addr()?, admin = %admin.local_addr()?, upstream = %sidecar.upstream.authority,
            mode = sidecar.policy.mode.as_str(), spec = %sidecar.revision().spec.source, revision = %sidecar.revision().spec.revision,
            operations = sidecar.revision().spec.operations, "driftwatch serving"
        );
        crate::proxy::run(proxy, admin, Arc::new(sidecar), shutdown_signal()).await?;
        tracing::info!("drained, exiting");
        Ok(ExitCode::SUCCESS)
    })
}

/// Load and compile the spec named by the config (a file or a URL, or given in memory) and
/// assemble a sidecar with a fresh registry.
pub async fn build(config: Config, embedded: Option<(&Path, &[u8])>) -> anyhow::Result<Sidecar> {
    let (spec, etag) = match (embedded, &config.spec.path, &config.spec.url) {
        (Some((name, bytes)), _, _) => (Spec::parse(name, bytes)?, None),
        (None, Some(path), _) => (Source::File(path.clone()).read()?, None),
        (None, None, Some(url)) => {
            let client = crate::proxy::client(&config)?;
            let (source, etag) = crate::proxy::fetch(&client, &config, url, None)
                .await
                .map_err(|e| anyhow::anyhow!(e))?
                .ok_or_else(|| anyhow::anyhow!("{url}: answered 304 to an unconditional GET"))?;
            (source.read()?, etag)
        }
        (None, None, None) => anyhow::bail!("no spec: pass --spec or set spec.path or spec.url"),
    };
    let revision = Revision::compile(&spec, &config)?;
    drop(spec);
    Ok(Sidecar::new(config, revision, Registry::default())?.with_etag(etag))
}

fn init_logging() {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: draining"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: draining"),
    }
}
