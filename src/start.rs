//! Start-up that `serve`, `wrap`, `mcp` and `demo` share: each API's spec loaded and compiled
//! into a sidecar, the proxy and admin listeners served side by side until a shutdown signal,
//! and the logs set up. The commands in `cli` parse their flags into `Settings` and call this.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::admin::Admin;
use crate::listener::Listener;
use crate::proxy::{Sidecar, Source, StartError, ToolSource};
use crate::revision::Revision;
use crate::settings::{Settings, SpecSource};
use crate::spec::Spec;

/// How logs are written: `--log-format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum LogFormat {
    #[default]
    Auto,
    Json,
    Text,
}

/// Serve the proxy and, beside it, the admin listener, until `shutdown` resolves and the
/// proxy has drained. The two meet only here: the admin listener gets a narrow handle.
pub async fn serve(
    proxy: TcpListener,
    admin: TcpListener,
    sidecar: Arc<Sidecar>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), StartError> {
    serve_with_tools(proxy, admin, sidecar, None, shutdown).await
}

/// [`serve`], the admin listener also showing what `driftwatch wrap` learned of its tools.
pub async fn serve_with_tools(
    proxy: TcpListener,
    admin: TcpListener,
    sidecar: Arc<Sidecar>,
    tools: Option<Arc<dyn crate::admin::ToolsView>>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), StartError> {
    let handle = Admin {
        tools,
        registry: sidecar.registry.clone(),
        recent: sidecar.sinks.recent.clone(),
        incidents: sidecar.clone(),
        ready: sidecar.ready.clone(),
        modes: (sidecar.apis.iter())
            .map(|api| api.settings.policy.mode)
            .collect(),
        revisions: sidecar.clone(),
        token: sidecar.settings.admin_token.clone(),
        ready_detail: Some(ready_detail(&sidecar)),
        survival: sidecar.memory.survival.clone(),
    };
    // What the load left to do after ready: the whole-document checks, off the request path.
    let checking = sidecar.clone();
    tokio::task::spawn_blocking(move || checking.check_specs());
    // Both listeners, and so every bound's series, exist before the first scrape can come.
    let proxy = Listener::new(proxy, sidecar.settings.proxy.bounds(), sidecar.limit_hits());
    let admin = Listener::new(
        admin,
        sidecar.settings.admin_bounds.clone(),
        sidecar.limit_hits(),
    );
    let admin_task = tokio::spawn(crate::admin::serve(admin, Arc::new(handle)));
    let telemetry = sidecar.telemetry.clone();
    let served = crate::proxy::run(proxy, sidecar, shutdown).await;
    admin_task.abort();
    if let Some(telemetry) = telemetry {
        telemetry.finish(std::time::Duration::from_secs(5)).await;
    }
    served
}

/// Load and compile each API's spec (a file or a URL, or given in memory for the first) and
/// assemble a sidecar with a fresh registry.
pub async fn build(
    settings: Settings,
    embedded: Option<(&Path, &[u8])>,
    tools: ToolSource,
) -> anyhow::Result<Sidecar> {
    let revisions = load_all(&settings, embedded).await?;
    say_traces(&settings.telemetry);
    for (api, (revision, _)) in settings.apis.iter().zip(&revisions) {
        if let Some(warning) = plain_credentials(api, revision) {
            tracing::warn!("{warning}");
        }
    }
    Ok(Sidecar::new(
        settings,
        revisions,
        Registry::default(),
        tools,
    )?)
}

/// Once, at start: each `OTEL_*` value left out, then one line saying where traces go and how,
/// or that they are off and why.
fn say_traces(telemetry: &crate::settings::TelemetrySettings) {
    for warning in &telemetry.warnings {
        tracing::warn!("{warning}");
    }
    match &telemetry.export {
        Some(export) => tracing::info!("traces exported to {export}"),
        None => tracing::info!("traces off: {}", telemetry.off),
    }
}

/// Said once at start and by `serve --check`: the spec's operations take credentials and the
/// upstream is plain `http://` past loopback, so they cross the network in clear text.
pub(crate) fn plain_credentials(
    api: &crate::settings::ApiSettings,
    revision: &Revision,
) -> Option<String> {
    let upstream = api.upstream.as_ref()?;
    (revision.contract.takes_credentials && upstream.plain_beyond_loopback()).then(|| {
        format!(
            "the upstream http://{} is plain HTTP and the spec's operations take credentials: \
             each request's key, token or password crosses the network in clear text \
             (use https://, or a loopback upstream)",
            upstream.authority
        )
    })
}

/// Every API's spec, in the order of `settings.apis`; an error names the API when there are
/// several.
pub async fn load_all(
    settings: &Settings,
    embedded: Option<(&Path, &[u8])>,
) -> anyhow::Result<Vec<(Revision, Option<String>)>> {
    let mut loaded = Vec::with_capacity(settings.apis.len());
    for (i, api) in settings.apis.iter().enumerate() {
        let one = load(settings, &api.spec, embedded.filter(|_| i == 0)).await;
        loaded.push(match (&api.name, one) {
            (Some(name), Err(e)) if settings.apis.len() > 1 => {
                return Err(e.context(format!("API `{name}`")));
            }
            (_, one) => one?,
        });
    }
    Ok(loaded)
}

/// The spec `spec` names (a file or a URL, or given in memory), compiled, and the URL's
/// `ETag` if it came from one.
async fn load(
    settings: &Settings,
    spec: &crate::settings::SpecSettings,
    embedded: Option<(&Path, &[u8])>,
) -> anyhow::Result<(Revision, Option<String>)> {
    let (spec_doc, etag) = match (embedded, &spec.source) {
        (Some((name, bytes)), _) => (Spec::parse_with(name, bytes, &spec.load)?, None),
        (None, SpecSource::File(path)) => (Source::File(path.clone()).read(&spec.load)?, None),
        (None, SpecSource::Documents(docs)) => {
            (Source::Documents(docs.clone()).read(&spec.load)?, None)
        }
        (None, SpecSource::Url(spec_url)) => {
            let url = crate::settings::url_shown(&spec_url.uri.to_string());
            let client = crate::proxy::client(settings)?;
            let timeout = settings.proxy.request_timeout;
            let max = spec.load.max_bytes;
            let (source, etag) = crate::proxy::fetch(&client, timeout, spec_url, None, max)
                .await?
                .ok_or_else(|| anyhow::anyhow!("{url}: answered 304 to an unconditional GET"))?;
            (source.read(&spec.load)?, etag)
        }
        (None, SpecSource::Embedded) => {
            anyhow::bail!("no spec: pass --spec or set spec.path or spec.url")
        }
    };
    Ok((Revision::compile(&spec_doc, &spec.contract)?, etag))
}

/// Logs on stderr, filtered by `RUST_LOG` (default `info`): one JSON object per line when
/// stderr is not a terminal (every container log) or with `--log-format json`, else text;
/// colour only on a terminal.
pub fn init_logging(format: LogFormat) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let terminal = std::io::stderr().is_terminal();
    let json = match format {
        LogFormat::Auto => !terminal,
        LogFormat::Json => true,
        LogFormat::Text => false,
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(terminal && !json);
    let _ = if json {
        logs.json().flatten_event(true).try_init()
    } else {
        logs.try_init()
    };
}

/// SIGTERM or SIGINT, listened for from the call on, not from the first poll: `wrap` makes it
/// before it starts the server, so a signal that comes while the server starts stops it. (Made
/// after, a SIGTERM in that window took the default action: wrap ended, and the server's
/// grandchild was left running.)
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    let term = signal(SignalKind::terminate()).ok();
    let int = signal(SignalKind::interrupt()).ok();
    async move {
        async fn received(signal: Option<Signal>) {
            match signal {
                Some(mut s) => drop(s.recv().await),
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = received(term) => tracing::info!("SIGTERM: draining"),
            () = received(int) => tracing::info!("SIGINT: draining"),
        }
    }
}

/// The lines `/readyz` adds: the shared store's state, and the warning when most requests
/// route nowhere.
fn ready_detail(sidecar: &crate::proxy::Sidecar) -> Arc<dyn Fn() -> String + Send + Sync> {
    let store = sidecar.store_health();
    let unrouted: Vec<_> = sidecar
        .apis
        .iter()
        .map(|api| api.unrouted.clone())
        .collect();
    Arc::new(move || {
        let lines: Vec<String> = store
            .as_ref()
            .map(|health| health.line())
            .into_iter()
            .chain(unrouted.iter().filter_map(|u| u.warning()))
            .collect();
        lines.join("\n")
    })
}
