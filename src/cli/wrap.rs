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

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::serve::{ServeArgs, SidecarArgs};
use crate::settings::Settings;

#[derive(Args, Debug)]
pub struct WrapArgs {
    #[command(flatten)]
    sidecar: SidecarArgs,
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
        let mut serve = ServeArgs::in_process(&self.sidecar);
        if let Some(listen) = &self.listen {
            serve.listen = Some(listen.clone());
        }
        // stdout is the client's MCP stream (or, with --mcp-upstream, kept clean all the same).
        serve.in_process_settings(true)
    }

    /// `--env`'s variables, as NAME and a value whose `{url}` wrap fills.
    fn variables(&self) -> anyhow::Result<Vec<(String, String)>> {
        self.env
            .iter()
            .map(|pair| {
                let (name, value) = pair
                    .split_once('=')
                    .with_context(|| format!("--env {pair}: expected NAME=VALUE"))?;
                Ok((name.to_string(), value.to_string()))
            })
            .collect()
    }
}

pub fn run(args: &WrapArgs) -> anyhow::Result<ExitCode> {
    let settings = args.settings()?;
    let plan = crate::wrap::Plan {
        command: args.command.clone(),
        env: args.variables()?,
        map: match &args.map {
            Some(path) => Some(crate::wrap::live::UserMap::read(path)?),
            None => None,
        },
        mcp: match &args.mcp_upstream {
            None => crate::wrap::Mcp::Stdio,
            Some(upstream) => crate::wrap::Mcp::Http {
                upstream: upstream.clone(),
                listen: args.mcp_listen,
            },
        },
        admin_given: args.sidecar.admin_listen.is_some(),
    };
    crate::start::init_logging(crate::start::LogFormat::Auto);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(crate::wrap::run(settings, plan))?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
