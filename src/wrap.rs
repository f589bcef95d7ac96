//! What `driftwatch wrap` runs beside the sidecar: the relay of a stdio MCP server's two
//! streams, the front of an HTTP one, the live catalog check of the tools either lists, and
//! what a server behind the forward proxy is told to trust. Each reads MCP messages with the
//! pure `mcp` core (calls in flight, bounds) and hands the calls to the sidecar's attribution.

pub mod front;
pub mod live;
pub mod relay;
mod sessions;
mod sse;

use std::os::fd::AsFd;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;

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

/// What `driftwatch wrap` runs, as its flags say.
pub struct Plan {
    /// The MCP server and its arguments (`{url}` in them is the sidecar's URL); empty with an
    /// HTTP server that runs elsewhere.
    pub command: Vec<String>,
    /// `--env`'s variables for the server, `{url}` in a value filled.
    pub env: Vec<(String, String)>,
    /// The user's tools map for the live check; `None`: the map learned from the traffic.
    pub map: Option<live::UserMap>,
    pub mcp: Mcp,
    /// `--admin-listen` was given: a taken port is an error, not a free one taken instead.
    pub admin_given: bool,
}

/// How the MCP server speaks.
pub enum Mcp {
    /// On the child's stdin and stdout, relayed.
    Stdio,
    /// Streamable HTTP at `upstream`, its clients connecting to `listen` instead.
    Http {
        upstream: String,
        listen: std::net::SocketAddr,
    },
}

/// Run the sidecar, the MCP server and its relay or front, and the live check, until the
/// server exits (its exit code is wrap's) or, with no server of wrap's own, a signal.
pub async fn run(settings: Settings, mut plan: Plan) -> anyhow::Result<i32> {
    let admin_listen = settings.admin.listen;
    let sidecar = Arc::new(build(settings, None, ToolSource::Calls).await?);
    let calls = sidecar
        .calls()
        .context("wrap's sidecar follows calls")?
        .clone();
    let proxy = bind(sidecar.settings.proxy.listen).await?;
    let admin = admin_port(admin_listen, plan.admin_given).await?;
    let url = format!("http://{}", proxy.local_addr()?);
    let mut env: Vec<(String, String)> = (plan.env.iter())
        .map(|(name, value)| (name.clone(), value.replace("{url}", &url)))
        .collect();
    let trust = match sidecar.settings.proxy.kind {
        ProxyKind::Forward => Some(Trust::write(&sidecar.settings.forward.ca_dir)?),
        ProxyKind::Reverse => None,
    };
    if let Some(trust) = &trust {
        env.extend(trust.environment(&url));
    }
    let live = Arc::new(live::Live::new(
        sidecar.clone(),
        calls.clone(),
        plan.map.take(),
    ));
    tokio::spawn(live.clone().check_on_change());
    // Listened for before the server starts: a signal while it starts still stops it.
    let stop = crate::start::shutdown_signal();
    let mut child = match plan.command.is_empty() {
        true => None,
        false => {
            // `{url}` in the server's own arguments too (`--api-url {url}`), as in --env.
            let command: Vec<String> = (plan.command.iter())
                .map(|arg| arg.replace("{url}", &url))
                .collect();
            Some(spawn(&command, &env, matches!(plan.mcp, Mcp::Stdio))?)
        }
    };
    let relayed = mcp_side(&plan, &sidecar, child.as_mut(), calls, live.clone()).await?;
    tracing::info!(admin = %admin.local_addr()?, proxy = %url, "driftwatch wrap: serving");
    let (done, status) = tokio::sync::oneshot::channel();
    let ended = async move {
        let _ = done.send(until_done(child, relayed, stop).await);
    };
    let view: Arc<dyn crate::admin::ToolsView> = live;
    serve_with_tools(proxy, admin, sidecar, Some(view), ended).await?;
    let status = status.await.ok().flatten();
    drop(trust);
    Ok(status.map_or(0, |s| s.code().unwrap_or(1)))
}

async fn bind(addr: std::net::SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))
}

/// The admin listener. A second wrapped server in the same client config finds the default
/// port taken: unless the port was given, it takes a free loopback port instead, and says so.
async fn admin_port(addr: std::net::SocketAddr, given: bool) -> anyhow::Result<TcpListener> {
    match TcpListener::bind(addr).await {
        Err(e) if !given && addr == DEFAULT_ADMIN => {
            let free = bind("127.0.0.1:0".parse()?).await?;
            tracing::warn!(taken = %addr, admin = %free.local_addr()?, "the admin port is taken ({e}): serving it on a free one");
            Ok(free)
        }
        bound => bound.map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}")),
    }
}

/// The MCP side: the front for an HTTP server (`--mcp-upstream`), or the relay of the child's
/// stdio, which is given back to wait for.
async fn mcp_side(
    plan: &Plan,
    sidecar: &Sidecar,
    child: Option<&mut Child>,
    calls: Arc<Calls>,
    live: Arc<live::Live>,
) -> anyhow::Result<Option<relay::Relayed>> {
    let limits = sidecar.settings.mcp.messages;
    let Mcp::Http { upstream, listen } = &plan.mcp else {
        let child = child.context("a COMMAND to relay")?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        tracing::info!(command = %plan.command[0], "relaying the MCP server's stdio");
        let explain = sidecar.settings.mcp.explain_refusals;
        return Ok(Some(relay::both(
            stdin, stdout, calls, live, limits, explain,
        )?));
    };
    let stall = (
        sidecar.settings.proxy.body_stall_timeout,
        sidecar.body_stalls(),
    );
    let explain = sidecar.settings.mcp.explain_refusals;
    let front = front::HttpFront::new(upstream, calls, live, (limits, explain), stall)?;
    let socket = TcpListener::bind(*listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let bounds = sidecar.settings.mcp.bounds.clone();
    let listener = Listener::new(socket, bounds, sidecar.limit_hits());
    tracing::info!(mcp = %listener.local_addr()?, %upstream, "relaying the MCP server's streamable HTTP");
    tokio::spawn(front.serve(listener));
    Ok(None)
}

/// Until the server exits (its status is wrap's), or, with no server of wrap's own, a signal.
async fn until_done(
    child: Option<Child>,
    relayed: Option<relay::Relayed>,
    stop: impl std::future::Future<Output = ()>,
) -> Option<ExitStatus> {
    match child {
        Some(child) => relay::until_exit(child, relayed, stop).await,
        None => {
            stop.await;
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
    // A process group of its own, which `relay::until_exit` stops whole: `npx` and `sh -c`
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
