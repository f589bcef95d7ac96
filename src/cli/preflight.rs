//! `driftwatch serve --check`: what `serve` would run, without serving. The settings are
//! already checked and the spec loaded and compiled by the caller; here the files `serve` would
//! read next (TLS certificates and keys, the upstream's CA) are read too, and the result is
//! printed for a person (or a CI job) to read. Nothing is bound and nothing is written, so it
//! can run beside a live sidecar with the same config.

use std::io::Write;

use crate::revision::Revision;
use crate::settings::Settings;

/// Read what is left to read, then print what would run.
pub fn check(settings: &Settings, revision: &Revision, out: &mut impl Write) -> anyhow::Result<()> {
    crate::proxy::client(settings)?;
    if let Some((cert, key)) = &settings.proxy.tls {
        crate::proxy::read_certs(cert)?;
        crate::proxy::read_key(key)?;
    }
    let upstream = settings.upstream()?;
    let threads = settings.proxy.serving_threads();
    let scheme = if settings.proxy.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let audit = if settings.audit.enabled { "on" } else { "off" };
    let memory = &settings.memory;
    let spec = &revision.spec;
    let warnings = &revision.contract.warnings;
    writeln!(
        out,
        "driftwatch serve --check: the config and the spec load"
    )?;
    writeln!(
        out,
        "  listen    {scheme}://{} ({threads} serving threads)",
        settings.proxy.listen
    )?;
    writeln!(out, "  admin     http://{}", settings.admin.listen)?;
    if settings.proxy.kind == crate::config::ProxyKind::Forward {
        let forward = &settings.forward;
        let hosts: Vec<String> = forward.hosts.iter().map(|h| h.to_string()).collect();
        let ca = crate::proxy::ca::Ca::open(&forward.ca_dir)?;
        writeln!(
            out,
            "  forward   intercepts {}; other hosts: {}; CA {}",
            hosts.join(", "),
            forward.unknown_hosts.as_str(),
            ca.cert_path().display()
        )?;
    }
    writeln!(
        out,
        "  upstream  {}://{}{}",
        upstream.scheme, upstream.authority, upstream.prefix
    )?;
    writeln!(
        out,
        "  mode      {}, audit {audit}",
        settings.policy.mode.as_str()
    )?;
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
    writeln!(
        out,
        "  spec      {}: OpenAPI {}, revision {}, {} operations",
        spec.source, spec.openapi, spec.revision, spec.operations
    )?;
    let base = crate::proxy::unrouted::base_text(
        settings.spec.contract.base_path.as_deref(),
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
    for (id, labels) in revision.contract.shared_ids() {
        writeln!(
            out,
            "  shared id {id}: {} ({})",
            labels.join(", "),
            crate::contract::Contract::SHARED_ID_MEANS
        )?;
    }
    for name in &settings.service_links {
        writeln!(
            out,
            "  ignored   {name} (a Kubernetes service link, not a setting)"
        )?;
    }
    Ok(())
}
