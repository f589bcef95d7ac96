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
    eprint!(
        "{}",
        crate::trust::guide(&ca.cert_path().display().to_string(), &proxy)
    );
    Ok(ExitCode::SUCCESS)
}
