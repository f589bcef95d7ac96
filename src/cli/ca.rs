//! `driftwatch ca`: the forward proxy's CA certificate on stdout (PEM, to save or mount), made
//! first if `forward.ca_dir` holds none; on stderr, what each runtime needs to trust it and to
//! send its requests through the proxy. The key never leaves its file.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::config::Layers;
use crate::proxy::ca::Ca;
use crate::settings::Settings;

#[derive(Args, Debug)]
pub struct CaArgs {
    /// TOML config file: its `[forward] ca_dir` (and `[proxy] listen`) are read.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The CA's directory, over the config's `forward.ca_dir`.
    #[arg(long)]
    ca_dir: Option<PathBuf>,
}

pub fn run(args: &CaArgs) -> anyhow::Result<ExitCode> {
    let flags = args
        .ca_dir
        .iter()
        .map(|dir| {
            let dir = toml::Value::String(dir.display().to_string());
            ("forward.ca_dir", "--ca-dir", dir)
        })
        .collect();
    let settings = Settings::load(Layers {
        file: args.config.as_deref(),
        env: std::env::vars().collect(),
        flags,
    })?;
    let ca = Ca::open(&settings.forward.ca_dir)?;
    std::io::stdout()
        .lock()
        .write_all(ca.cert_pem().as_bytes())?;
    let proxy = format!("http://{}", settings.proxy.listen);
    eprint!("{}", guide(&ca.cert_path().display().to_string(), &proxy));
    Ok(ExitCode::SUCCESS)
}

/// The environment each runtime reads, for a certificate saved at `cert` and a proxy at `proxy`.
fn guide(cert: &str, proxy: &str) -> String {
    format!(
        "\
# The certificate above is driftwatch's forward proxy CA ({cert}). In the MCP server's
# container, with it saved as /etc/driftwatch/ca.pem:
#   every runtime  HTTPS_PROXY={proxy}
#   Node           NODE_EXTRA_CA_CERTS=/etc/driftwatch/ca.pem (added to Node's roots)
#                  Node's own fetch honours HTTPS_PROXY from Node 24 with NODE_USE_ENV_PROXY=1;
#                  axios reads HTTPS_PROXY itself
#   Python         SSL_CERT_FILE=/etc/driftwatch/bundle.pem (httpx), REQUESTS_CA_BUNDLE=same (requests)
#   Go             SSL_CERT_FILE=/etc/driftwatch/bundle.pem
# SSL_CERT_FILE and REQUESTS_CA_BUNDLE replace the roots, so give them a bundle of the
# system's roots and this CA (tunneled hosts keep their own certificates):
#   cat /etc/ssl/certs/ca-certificates.crt /etc/driftwatch/ca.pem > /etc/driftwatch/bundle.pem
"
    )
}
