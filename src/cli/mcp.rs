//! `driftwatch mcp`: the flags of the MCP gateway (`gateway`), read into its plan before it
//! starts (the `--header` credentials from their files or variables, the `--enable` list), and
//! the snippets a client needs to reach it (`--client-config`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::serve::{ServeArgs, SidecarArgs};
use crate::settings::Settings;

#[derive(Args, Debug)]
pub struct McpArgs {
    #[command(flatten)]
    sidecar: SidecarArgs,
    /// The operations to expose, one operationId or "METHOD /path" a line; an operation new in
    /// the spec stays unexposed until listed.
    #[arg(long, conflicts_with = "all", required_unless_present = "all")]
    enable: Option<PathBuf>,
    /// Expose every operation, those a new revision adds too.
    #[arg(long)]
    all: bool,
    /// Where MCP clients connect: streamable HTTP at /mcp.
    #[arg(long, default_value = "127.0.0.1:8070", conflicts_with = "stdio")]
    listen: SocketAddr,
    /// A `Host` the MCP endpoint answers besides localhost, 127.0.0.1 and ::1 (the name clients
    /// use to reach a pod, e.g. `driftwatch-mcp:8070`); any other is refused with 403, against
    /// DNS rebinding. Repeatable.
    #[arg(
        long = "allowed-host",
        value_name = "HOST[:PORT]",
        conflicts_with = "stdio"
    )]
    allowed_hosts: Vec<String>,
    /// Speak MCP on stdin and stdout instead (a client that starts driftwatch itself); logs go
    /// to stderr, and the end of stdin ends the process.
    #[arg(long)]
    stdio: bool,
    /// A header every call sends to the API, its value read from a file or the environment
    /// (`Authorization=file:/run/secrets/token`, `X-Api-Key=env:API_KEY`): credentials come from
    /// the operator, never from the model, and are never logged. Repeatable.
    #[arg(long = "header", value_name = "NAME=file:PATH|env:VAR")]
    headers: Vec<String>,
    /// Print what a client needs to reach this gateway, with these same settings, and exit:
    /// Claude Desktop's `mcpServers` entry (it starts `driftwatch mcp --stdio`), Cursor's and
    /// VS Code's `mcp.json` entries (streamable HTTP), or the MCP Inspector's command line.
    #[arg(long, value_enum)]
    client_config: Option<ClientKind>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum ClientKind {
    Claude,
    Cursor,
    Vscode,
    Inspector,
}

/// The snippet `kind` needs. Paths are made absolute: a client starts driftwatch elsewhere.
fn client_config(args: &McpArgs, kind: ClientKind) -> anyhow::Result<String> {
    let url = format!("http://{}/mcp", args.listen);
    let absolute = |p: &PathBuf| -> anyhow::Result<String> {
        Ok(std::path::absolute(p)
            .with_context(|| format!("{}", p.display()))?
            .display()
            .to_string())
    };
    let mut argv = vec!["mcp".to_string(), "--stdio".to_string()];
    let paths = [
        ("--spec", &args.sidecar.spec),
        ("--enable", &args.enable),
        ("--config", &args.sidecar.config),
    ];
    for (flag, path) in paths {
        if let Some(path) = path {
            argv.extend([flag.to_string(), absolute(path)?]);
        }
    }
    for overlay in &args.sidecar.overlays {
        argv.extend(["--overlay".to_string(), absolute(overlay)?]);
    }
    if args.all {
        argv.push("--all".into());
    }
    let texts = [
        ("--upstream", &args.sidecar.upstream),
        ("--admin-listen", &args.sidecar.admin_listen),
    ];
    for (flag, value) in texts {
        if let Some(value) = value {
            argv.extend([flag.to_string(), value.clone()]);
        }
    }
    if let Some(mode) = args.sidecar.mode {
        argv.extend(["--mode".to_string(), mode.as_str().to_string()]);
    }
    for header in &args.headers {
        argv.extend(["--header".to_string(), header.clone()]);
    }
    let program = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "driftwatch".into());
    let snippet = match kind {
        ClientKind::Claude => serde_json::json!({
            "mcpServers": {"driftwatch": {"command": program, "args": argv}}
        }),
        ClientKind::Cursor => serde_json::json!({"mcpServers": {"driftwatch": {"url": url}}}),
        ClientKind::Vscode => {
            serde_json::json!({"servers": {"driftwatch": {"type": "http", "url": url}}})
        }
        ClientKind::Inspector => {
            return Ok(format!(
                "npx @modelcontextprotocol/inspector --cli {url} --transport http --method tools/list"
            ));
        }
    };
    Ok(serde_json::to_string_pretty(&snippet)?)
}

impl McpArgs {
    /// The sidecar's settings, as `serve` builds them from the same flags (its proxy on a
    /// loopback port of its own, with one serving thread).
    fn settings(&self) -> anyhow::Result<Settings> {
        let serve = ServeArgs::in_process(&self.sidecar);
        serve.in_process_settings(self.stdio)
    }

    /// The `--header`s, read now: a missing file or variable stops the start, naming it.
    fn credentials(&self) -> anyhow::Result<Vec<(http::HeaderName, http::HeaderValue)>> {
        self.headers
            .iter()
            .map(|spec| {
                let (name, source) = spec.split_once('=').with_context(|| {
                    format!("--header {spec}: expected NAME=file:PATH or NAME=env:VAR")
                })?;
                let value = match source.split_once(':') {
                    Some(("file", path)) => std::fs::read_to_string(path)
                        .with_context(|| format!("--header {name}: {path}"))?,
                    Some(("env", var)) => std::env::var(var)
                        .with_context(|| format!("--header {name}: environment variable {var}"))?,
                    _ => anyhow::bail!(
                        "--header {name}: the value comes from file:PATH or env:VAR, never inline"
                    ),
                };
                let name = http::HeaderName::try_from(name)
                    .with_context(|| format!("--header {name}: not a header name"))?;
                let mut value = http::HeaderValue::try_from(value.trim())
                    .with_context(|| format!("--header {name}: not a header value"))?;
                value.set_sensitive(true);
                Ok((name, value))
            })
            .collect()
    }

    /// The names `--enable` lists, or `None` for `--all`.
    fn enabled(&self) -> anyhow::Result<Option<Vec<String>>> {
        let Some(path) = &self.enable else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
        Ok(Some(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from)
                .collect(),
        ))
    }
}

pub fn run(args: &McpArgs) -> anyhow::Result<ExitCode> {
    let settings = args.settings()?;
    let credentials = args.credentials()?;
    if let Some(kind) = args.client_config {
        println!("{}", client_config(args, kind)?);
        return Ok(ExitCode::SUCCESS);
    }
    let gateway = crate::gateway::Plan {
        enabled: args.enabled()?,
        credentials,
        serve: match args.stdio {
            true => crate::gateway::Serve::Stdio,
            false => crate::gateway::Serve::Http {
                listen: args.listen,
                allowed_hosts: args.allowed_hosts.clone(),
            },
        },
    };
    crate::start::init_logging(crate::start::LogFormat::Auto);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(crate::gateway::run(settings, gateway))?;
    Ok(ExitCode::SUCCESS)
}
