//! `driftwatch wrap [options] -- COMMAND ARGS...`: a stdio MCP server run as driftwatch's
//! child, in the place a client's config names a command. stdin and stdout pass between the
//! client and the server unchanged (newline-delimited JSON-RPC), read on the way: a
//! `tools/call` is in flight from its request to its answer, so each API request the server
//! makes through the sidecar (in this process, on a loopback port) is tied to the call that
//! caused it (`mcp::calls`). The server reaches the sidecar by a base-URL variable the user
//! names (`--env BASE_URL={url}`) or, with `proxy.kind = "forward"`, by the proxy variables and
//! the CA, set here. The catalog the server answers `tools/list` with is checked live against
//! the spec in force, on the map learned from its own traffic unless `--map` gives one.
//! Logs and events never go to stdout: it is the client's stream.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use tokio::net::TcpListener;

use super::serve::{ModeArg, ServeArgs};
use crate::config::ProxyKind;
use crate::listener::Listener;
use crate::mcp::calls::Calls;
use crate::proxy::{Sidecar, ToolSource};
use crate::settings::Settings;
use crate::start::{build, serve_with_tools};
use crate::trust::Trust;

/// The admin port `wrap` takes unless told otherwise.
const DEFAULT_ADMIN: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 9090);

#[derive(Args, Debug)]
pub struct WrapArgs {
    /// The API's OpenAPI 3.0/3.1 spec (or `[spec]`/`[[api]]` in --config).
    #[arg(long)]
    spec: Option<PathBuf>,
    /// The API: http://host:port or https://host:port (reverse mode).
    #[arg(long)]
    upstream: Option<String>,
    /// Admin listen address for /metrics, /findings, /tools/map, /tools/check (default
    /// 127.0.0.1:9090).
    #[arg(long)]
    admin_listen: Option<String>,
    /// observe (forward every request) or enforce (refuse a harmful one).
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// TOML config file, as for `serve`; `[proxy] kind = "forward"` sets the server's proxy
    /// variables and CA instead of a base URL.
    #[arg(long)]
    config: Option<PathBuf>,
    /// A variable for the server, `{url}` replaced by the sidecar's URL
    /// (`--env BASE_URL={url}`, `--env GITLAB_API_URL={url}/api/v4`). Repeatable.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// The tools map (`driftwatch tools --map`) for the live catalog check; without it, the
    /// map learned from the server's traffic.
    #[arg(long)]
    map: Option<PathBuf>,
    /// Where the sidecar's proxy listens (default: a loopback port of its own, named to the
    /// child by --env or the proxy variables). Give it when the server runs elsewhere.
    #[arg(long)]
    listen: Option<String>,
    /// An MCP server that speaks streamable HTTP: its endpoint (`http://host:port/mcp`). Its
    /// clients connect to --mcp-listen instead, and COMMAND, if given, runs beside it (its
    /// stdio not relayed).
    #[arg(long)]
    mcp_upstream: Option<String>,
    /// Where MCP clients connect with --mcp-upstream.
    #[arg(long, default_value = "127.0.0.1:8070", requires = "mcp_upstream")]
    mcp_listen: std::net::SocketAddr,
    /// The MCP server to run, and its arguments (`{url}` in them is the sidecar's URL).
    #[arg(
        last = true,
        required_unless_present = "mcp_upstream",
        value_name = "COMMAND"
    )]
    command: Vec<String>,
}

impl WrapArgs {
    fn settings(&self) -> anyhow::Result<Settings> {
        let mut serve = ServeArgs::in_process(
            self.spec.clone(),
            self.upstream.clone(),
            self.admin_listen.clone(),
            self.mode,
            self.config.clone(),
        );
        if let Some(listen) = &self.listen {
            serve.listen = Some(listen.clone());
        }
        // stdout is the client's MCP stream (or, with --mcp-upstream, kept clean all the same).
        serve.in_process_settings(true)
    }

    /// `--env`'s variables, `{url}` filled.
    fn variables(&self, url: &str) -> anyhow::Result<Vec<(String, String)>> {
        self.env
            .iter()
            .map(|pair| {
                let (name, value) = pair
                    .split_once('=')
                    .with_context(|| format!("--env {pair}: expected NAME=VALUE"))?;
                Ok((name.to_string(), value.replace("{url}", url)))
            })
            .collect()
    }
}

pub fn run(args: &WrapArgs) -> anyhow::Result<ExitCode> {
    let settings = args.settings()?;
    let user_map = match &args.map {
        Some(path) => Some(crate::wrap::live::UserMap::read(path)?),
        None => None,
    };
    crate::start::init_logging(crate::start::LogFormat::Auto);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(async move {
        let admin_listen = settings.admin.listen;
        let sidecar = Arc::new(build(settings, None, ToolSource::Calls).await?);
        let calls = sidecar.calls().context("wrap's sidecar follows calls")?.clone();
        let bind = |addr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))
        };
        let proxy = bind(sidecar.settings.proxy.listen).await?;
        let admin = match TcpListener::bind(admin_listen).await {
            // A second wrapped server in the same client config finds the default taken: it
            // takes a free loopback port instead, and says which.
            Err(e) if args.admin_listen.is_none() && admin_listen == DEFAULT_ADMIN => {
                let free = bind("127.0.0.1:0".parse()?).await?;
                tracing::warn!(taken = %admin_listen, admin = %free.local_addr()?, "the admin port is taken ({e}): serving it on a free one");
                free
            }
            bound => bound.map_err(|e| anyhow::anyhow!("cannot listen on {admin_listen}: {e}"))?,
        };
        let url = format!("http://{}", proxy.local_addr()?);
        let mut env = args.variables(&url)?;
        let trust = match sidecar.settings.proxy.kind {
            ProxyKind::Forward => Some(Trust::write(&sidecar.settings.forward.ca_dir)?),
            ProxyKind::Reverse => None,
        };
        if let Some(trust) = &trust {
            env.extend(trust.environment(&url));
        }
        let live = Arc::new(crate::wrap::live::Live::new(sidecar.clone(), calls.clone(), user_map));
        tokio::spawn(live.clone().check_on_change());
        let mut child = match args.command.is_empty() {
            true => None,
            false => {
                // `{url}` in the server's own arguments too (`--api-url {url}`), as in --env.
                let command: Vec<String> = (args.command.iter())
                    .map(|arg| arg.replace("{url}", &url))
                    .collect();
                Some(spawn(&command, &env, args.mcp_upstream.is_none())?)
            }
        };
        let relayed = mcp_side(args, &sidecar, child.as_mut(), calls, live.clone()).await?;
        tracing::info!(admin = %admin.local_addr()?, proxy = %url, "driftwatch wrap: serving");
        let (done, status) = tokio::sync::oneshot::channel();
        let ended = async move {
            let _ = done.send(until_done(child, relayed).await);
        };
        let view: Arc<dyn crate::admin::ToolsView> = live;
        serve_with_tools(proxy, admin, sidecar, Some(view), ended).await?;
        let status = status.await.ok().flatten();
        drop(trust);
        anyhow::Ok(status.map_or(0, |s| s.code().unwrap_or(1)))
    })?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

/// The MCP side: the front for an HTTP server (`--mcp-upstream`), or the relay of the child's
/// stdio, which is given back to wait for.
async fn mcp_side(
    args: &WrapArgs,
    sidecar: &Sidecar,
    child: Option<&mut Child>,
    calls: Arc<Calls>,
    live: Arc<crate::wrap::live::Live>,
) -> anyhow::Result<Option<crate::wrap::relay::Relayed>> {
    let limits = sidecar.settings.mcp.messages;
    let Some(upstream) = &args.mcp_upstream else {
        let child = child.context("a COMMAND to relay")?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        tracing::info!(command = %args.command[0], "relaying the MCP server's stdio");
        return Ok(Some(crate::wrap::relay::both(
            stdin, stdout, calls, live, limits,
        )?));
    };
    let stall = (
        sidecar.settings.proxy.body_stall_timeout,
        sidecar.body_stalls(),
    );
    let front = crate::wrap::front::Front::new(upstream, calls, live, limits, stall)?;
    let socket = TcpListener::bind(args.mcp_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.mcp_listen))?;
    let bounds = sidecar.settings.mcp.bounds.clone();
    let listener = Listener::new(socket, bounds, sidecar.limit_hits());
    tracing::info!(mcp = %listener.local_addr()?, %upstream, "relaying the MCP server's streamable HTTP");
    tokio::spawn(front.serve(listener));
    Ok(None)
}

/// Until the server exits (its status is wrap's), or, with no server of wrap's own, a signal.
async fn until_done(
    child: Option<Child>,
    relayed: Option<crate::wrap::relay::Relayed>,
) -> Option<ExitStatus> {
    match child {
        Some(child) => crate::wrap::relay::until_exit(child, relayed).await,
        None => {
            crate::start::shutdown_signal().await;
            None
        }
    }
}

/// The server, its stdio piped to the relay, or (`relayed` false: an HTTP server) its stdin
/// closed and its stdout sent to stderr: stdout is never the server's.
fn spawn(command: &[String], env: &[(String, String)], relayed: bool) -> anyhow::Result<Child> {
    let (program, args) = command.split_first().context("no COMMAND after --")?;
    let (stdin, stdout) = match relayed {
        true => (Stdio::piped(), Stdio::piped()),
        false => (
            Stdio::null(),
            Stdio::from(std::io::stderr().as_fd().try_clone_to_owned()?),
        ),
    };
    // A process group of its own, which `crate::wrap::relay::until_exit` stops whole: `npx` and `sh -c`
    // start the server as a grandchild.
    std::os::unix::process::CommandExt::process_group(
        Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(stdin)
            .stdout(stdout)
            .stderr(Stdio::inherit()),
        0,
    )
    .spawn()
    .with_context(|| format!("cannot start `{program}`"))
}
