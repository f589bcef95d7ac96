//! `driftwatch serve --check`: what `serve` would run, without serving. The settings are
//! already checked and the spec loaded and compiled by the caller; here the files `serve` would
//! read next (TLS certificates and keys, the upstream's CA) are read too, and the result is
//! printed for a person (or a CI job) to read. Nothing is bound and nothing is written, so it
//! can run beside a live sidecar with the same config.

use std::io::Write;

use crate::revision::Revision;
use crate::settings::{ApiSettings, Settings};

/// Read what is left to read, then print what would run: each API with its spec revision
/// (`revisions` in the order of `settings.apis`).
pub fn check(
    settings: &Settings,
    revisions: &[Revision],
    out: &mut impl Write,
) -> anyhow::Result<()> {
    crate::proxy::client(settings)?;
    if let Some((cert, key)) = &settings.proxy.tls {
        crate::proxy::read_certs(cert)?;
        crate::proxy::read_key(key)?;
    }
    for api in &settings.apis {
        api.upstream()?;
    }
    writeln!(
        out,
        "driftwatch serve --check: the config and the spec load"
    )?;
    listeners(settings, out)?;
    let audit = if settings.audit.enabled { "on" } else { "off" };
    for (api, revision) in settings.apis.iter().zip(revisions) {
        one_api(api, revision, settings.apis.len() > 1, audit, out)?;
    }
    for name in &settings.service_links {
        writeln!(
            out,
            "  ignored   {name} (a Kubernetes service link, not a setting)"
        )?;
    }
    Ok(())
}

/// The listeners, the forward proxy, the memory and the events: what every API shares.
fn listeners(settings: &Settings, out: &mut impl Write) -> anyhow::Result<()> {
    let threads = settings.proxy.serving_threads();
    let scheme = if settings.proxy.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let memory = &settings.memory;
    writeln!(
        out,
        "  listen    {scheme}://{} ({threads} serving threads)",
        settings.proxy.listen
    )?;
    writeln!(out, "  admin     http://{}", settings.admin.listen)?;
    if settings.proxy.kind == crate::config::ProxyKind::Forward {
        let forward = &settings.forward;
        let hosts: Vec<String> = settings
            .apis
            .iter()
            .flat_map(|api| &api.hosts)
            .map(|h| h.to_string())
            .collect();
        // Checked, never written: like `nginx -t`, a check leaves the disk as it was.
        let ca = match crate::proxy::ca::Ca::inspect(&forward.ca_dir)? {
            Some(ca) => ca.cert_path().display().to_string(),
            None => format!(
                "{} (none yet: made on first start)",
                forward.ca_dir.join("ca.pem").display()
            ),
        };
        writeln!(
            out,
            "  forward   intercepts {}; other hosts: {}; CA {ca}",
            hosts.join(", "),
            forward.unknown_hosts.as_str(),
        )?;
    }
    if memory.enabled {
        writeln!(
            out,
            "  memory    at most {} resources for {:?}",
            memory.max_entries, memory.ttl
        )?;
        if let Some(shared) = &memory.shared {
            writeln!(
                out,
                "            shared through {} (keys {}*, a write waits {:?} at most)",
                shared.shown, shared.key_prefix, shared.deadline
            )?;
        }
    } else {
        writeln!(out, "  memory    off")?;
    }
    writeln!(out, "  events    {}", settings.events.output)?;
    traces(settings, out)
}

/// Where spans go, how, and what the export queue holds, or that traces are off and why; each
/// `OTEL_*` value left out. An endpoint at one of driftwatch's own listeners never gets here:
/// the settings refused it, naming the key.
fn traces(settings: &Settings, out: &mut impl Write) -> anyhow::Result<()> {
    let telemetry = &settings.telemetry;
    match &telemetry.export {
        None => writeln!(out, "  traces    off: {}", telemetry.off)?,
        Some(export) => writeln!(
            out,
            "  traces    {export} (a queue of {} spans and {} MiB at most; values within {} \
             bytes)",
            export.queue_size,
            export.queue_bytes() >> 20,
            crate::telemetry::MAX_TEXT,
        )?,
    }
    for warning in &telemetry.warnings {
        writeln!(out, "  ignored   {warning}")?;
    }
    Ok(())
}

/// One API: what selects it, where it goes, its mode, spec, base path, writes and what of its
/// spec was skipped.
fn one_api(
    api: &ApiSettings,
    revision: &Revision,
    named: bool,
    audit: &str,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    if named {
        writeln!(out, "  api       {}", selected_by(api))?;
    }
    if let Some(upstream) = &api.upstream {
        writeln!(
            out,
            "  upstream  {}://{}{}",
            upstream.scheme, upstream.authority, upstream.prefix
        )?;
    }
    if let Some(warning) = crate::start::plain_credentials(api, revision) {
        writeln!(out, "  warning   {warning}")?;
    }
    writeln!(out, "  mode      {}", mode_line(&api.policy, audit))?;
    let spec = &revision.spec;
    // `serve --check` does everything the lazy load leaves to later, before it answers.
    revision.contract.compile_all();
    let warnings = &revision.contract.warnings();
    writeln!(
        out,
        "  spec      {}: OpenAPI {}, revision {}, {} operations",
        spec.source, spec.openapi, spec.revision, spec.operations
    )?;
    for d in &spec.documents {
        let (path, base) = (d.path.display(), &d.base_path);
        writeln!(
            out,
            "  document  {path} under {base}, revision {}",
            d.revision
        )?;
    }
    for overlay in &revision.files.overlays {
        writeln!(out, "  overlay   {}", overlay.path.display())?;
    }
    let base = crate::proxy::unrouted::base_text(
        api.spec.contract.base_path.as_deref(),
        &revision.contract,
    );
    writeln!(out, "  base path {base}")?;
    super::writes::list(&revision.contract, out)?;
    writeln!(
        out,
        "  skipped   {} parts of the spec at load",
        warnings.len()
    )?;
    for warning in warnings {
        writeln!(out, "    {warning}")?;
    }
    shared_ids(&revision.contract, out)
}

/// An API's name, and what selects it: its prefix, its hosts, or neither.
fn selected_by(api: &ApiSettings) -> String {
    let hosts: Vec<String> = api.hosts.iter().map(|h| h.to_string()).collect();
    let by = match (&api.prefix, hosts.is_empty()) {
        (Some(prefix), _) => format!("prefix {prefix}"),
        (None, false) => format!("hosts {}", hosts.join(", ")),
        (None, true) => "every request no other API takes".to_string(),
    };
    format!("{} ({by})", api.name.as_deref().unwrap_or("default"))
}

/// The operationIds several operations share, each with what that means.
fn shared_ids(contract: &crate::contract::Contract, out: &mut impl Write) -> anyhow::Result<()> {
    for (id, labels) in contract.shared_ids() {
        writeln!(
            out,
            "  shared id {id}: {} ({})",
            labels.join(", "),
            crate::contract::Contract::SHARED_ID_MEANS
        )?;
    }
    Ok(())
}

/// The API's mode, and whether a replace write's resource is read before the write.
fn mode_line(policy: &crate::policy::Policy, audit: &str) -> String {
    let reads = match policy.read_before_write {
        true => "reads a replace write's resource first where the memory has no view of it",
        false => "decides replace writes on the memory alone",
    };
    format!(
        "{}, audit {audit}; {reads} (enforce.read_before_write)",
        policy.mode.as_str()
    )
}
