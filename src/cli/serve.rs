//! `driftwatch serve`: run the sidecar. Builds the settings (flags > env > file), loads the
//! spec, binds both listeners, wires the admin listener to the proxy, and serves until SIGTERM
//! or SIGINT, then drains and exits 0.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use tokio::net::TcpListener;

use crate::config::{ConfigError, Flag, Layers};
use crate::revision::Revision;
use crate::settings::Settings;
use crate::start::{LogFormat, build, init_logging, load_all, serve, shutdown_signal};

#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// The OpenAPI 3.0/3.1 spec (JSON or YAML, optionally .gz).
    #[arg(long)]
    spec: Option<PathBuf>,
    /// An OpenAPI Overlay applied to the spec before it is compiled; repeat it to apply
    /// several, in order (`spec.overlays`).
    #[arg(long = "overlay", value_name = "FILE")]
    overlays: Vec<PathBuf>,
    /// The API: http://host:port or https://host:port.
    #[arg(long)]
    upstream: Option<String>,
    /// Proxy listen address (default 127.0.0.1:8080).
    #[arg(long)]
    pub(super) listen: Option<String>,
    /// Admin listen address for /metrics, /healthz, /readyz, /findings, /spec (default 127.0.0.1:9090).
    #[arg(long)]
    admin_listen: Option<String>,
    /// observe (forward everything) or enforce (refuse harmful requests).
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// A forward proxy (`CONNECT` and absolute-form requests, for clients that honour
    /// HTTPS_PROXY) instead of a reverse one: `proxy.kind = "forward"`.
    #[arg(long)]
    forward: bool,
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
    /// Load the config and the spec, print what would run, and exit without serving: 0 when
    /// both load, 2 naming the problem (as `nginx -t` does).
    #[arg(long)]
    check: bool,
    /// Logs as JSON lines or text; `auto` is JSON unless stderr is a terminal.
    #[arg(long, value_enum, default_value = "auto")]
    log_format: LogFormat,
    /// Serving threads, for the sidecar `mcp` runs in its own process (not a flag).
    #[arg(skip)]
    workers: Option<i64>,
}

/// The flags of the commands that run a sidecar in their own process (`mcp`, `wrap`).
#[derive(Args, Debug, Clone)]
pub(super) struct SidecarArgs {
    /// The API's OpenAPI 3.0/3.1 spec (JSON or YAML, optionally .gz), reloaded as `serve`
    /// reloads it (or `[spec]`/`[[api]]` in --config).
    #[arg(long)]
    pub(super) spec: Option<PathBuf>,
    /// The API: http://host:port or https://host:port.
    #[arg(long)]
    pub(super) upstream: Option<String>,
    /// Admin listen address for /metrics, /healthz, /readyz, /findings, /spec and, under
    /// `wrap`, /tools/map and /tools/check (default 127.0.0.1:9090).
    #[arg(long)]
    pub(super) admin_listen: Option<String>,
    /// observe (forward every request) or enforce (refuse a harmful one).
    #[arg(long, value_enum)]
    pub(super) mode: Option<ModeArg>,
    /// TOML config file, as for `serve`.
    #[arg(long)]
    pub(super) config: Option<PathBuf>,
    /// An OpenAPI Overlay applied to the spec, as for `serve` (repeat it for several).
    #[arg(long = "overlay", value_name = "FILE")]
    pub(super) overlays: Vec<PathBuf>,
}

/// `--overlay A --overlay B` as `spec.overlays = ["A", "B"]`.
pub(super) fn overlay_flag(files: &[PathBuf]) -> Option<Flag> {
    if files.is_empty() {
        return None;
    }
    let text = |f: &PathBuf| toml::Value::String(f.display().to_string());
    let files = toml::Value::Array(files.iter().map(text).collect());
    Some(("spec.overlays", "--overlay", files))
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub(super) enum ModeArg {
    Observe,
    Enforce,
}

impl ModeArg {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            ModeArg::Observe => "observe",
            ModeArg::Enforce => "enforce",
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Switch {
    On,
    Off,
}

impl ServeArgs {
    /// The flags as config overrides: the key each sets, the flag's spelling, the value.
    fn flags(&self) -> Vec<Flag> {
        let text = |v: &str| toml::Value::String(v.to_string());
        let mut out = Vec::new();
        if let Some(v) = &self.spec {
            out.push(("spec.path", "--spec", text(&v.display().to_string())));
        }
        out.extend(overlay_flag(&self.overlays));
        if let Some(v) = &self.upstream {
            out.push(("proxy.upstream", "--upstream", text(v)));
        }
        if let Some(v) = &self.listen {
            out.push(("proxy.listen", "--listen", text(v)));
        }
        if let Some(v) = &self.admin_listen {
            out.push(("admin.listen", "--admin-listen", text(v)));
        }
        if let Some(m) = self.mode {
            out.push(("proxy.mode", "--mode", text(m.as_str())));
        }
        if self.forward {
            out.push(("proxy.kind", "--forward", text("forward")));
        }
        if let Some(switch) = self.audit {
            let on = toml::Value::Boolean(matches!(switch, Switch::On));
            out.push(("audit.enabled", "--audit", on));
        }
        if self.strict {
            out.push(("spec.strict", "--strict", toml::Value::Boolean(true)));
        }
        if let Some(n) = self.workers {
            out.push(("proxy.workers", "(mcp)", toml::Value::Integer(n)));
        }
        out
    }

    /// The sidecar `mcp` and `wrap` run in their own process: `serve`'s settings from the same
    /// flags, its proxy on a loopback port of its own with one serving thread.
    pub(super) fn in_process(shared: &SidecarArgs) -> ServeArgs {
        let SidecarArgs {
            spec,
            upstream,
            admin_listen,
            mode,
            config,
            overlays,
        } = shared.clone();
        ServeArgs {
            spec,
            overlays,
            upstream,
            listen: Some("127.0.0.1:0".into()),
            admin_listen,
            mode,
            config,
            workers: Some(1),
            ..ServeArgs::default()
        }
    }

    /// The settings of a sidecar run inside another subcommand (`mcp`, `wrap`); with
    /// `stdout_is_mcp`, events that would go to stdout go to stderr: stdout is an MCP stream,
    /// and an event written there would corrupt it.
    pub(super) fn in_process_settings(&self, stdout_is_mcp: bool) -> anyhow::Result<Settings> {
        let mut settings = self.settings(std::env::vars().collect())?;
        if stdout_is_mcp && settings.events.output == crate::sink::EventOutput::Stdout {
            settings.events.output = crate::sink::EventOutput::File("/dev/stderr".into());
        }
        Ok(settings)
    }

    /// The settings from the config file, the environment and these flags (flags > env > file).
    pub fn settings(&self, env: Vec<(String, String)>) -> Result<Settings, ConfigError> {
        let settings = Settings::load(Layers {
            file: self.config.as_deref(),
            env,
            flags: self.flags(),
        })?;
        settings.upstream()?;
        Ok(settings)
    }
}

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let settings = args.settings(std::env::vars().collect())?;
    init_logging(args.log_format);
    if !settings.service_links.is_empty() {
        tracing::warn!(
            variables = settings.service_links.join(" "),
            "left out: Kubernetes service links for a Service named driftwatch, not settings \
             (enableServiceLinks: false in the pod spec drops them)"
        );
    }
    // This thread serves as one of `proxy.workers`; the proxy starts the others, each with a
    // runtime of its own (see `proxy::run`).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    if args.check {
        let loaded = runtime.block_on(load_all(&settings, None))?;
        let revisions: Vec<Revision> = loaded.into_iter().map(|(rev, _)| rev).collect();
        super::preflight::check(&settings, &revisions, &mut std::io::stdout().lock())?;
        return Ok(ExitCode::SUCCESS);
    }
    runtime.block_on(async move {
        let (listen, admin_listen) = (settings.proxy.listen, settings.admin.listen);
        let sidecar = build(settings, None, crate::proxy::ToolSource::Header).await?;
        let bind = |addr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))
        };
        let (proxy, admin) = (bind(listen).await?, bind(admin_listen).await?);
        for api in &sidecar.apis {
            let rev = api.revision();
            tracing::info!(
                listen = %proxy.local_addr()?, admin = %admin.local_addr()?, api = api.name(), upstream = %api.upstreams[0].authority,
                mode = api.settings.policy.mode.as_str(), kind = sidecar.settings.proxy.kind.as_str(), spec = %rev.spec.source, revision = %rev.spec.revision,
                operations = rev.spec.operations, "driftwatch serving"
            );
        }
        serve(proxy, admin, Arc::new(sidecar), shutdown_signal()).await?;
        tracing::info!("drained, exiting");
        Ok(ExitCode::SUCCESS)
    })
}
