//! `[telemetry]` typed: off unless an endpoint is set and the exporter is `otlp`; then the
//! traces URL parsed and not one of driftwatch's own listeners, each export header a valid
//! name and value, the sampler one the SDK names, the propagation a known choice, and the
//! collector's TLS files read. Header values are credentials: `Debug` shows their names only.
//! Export off says why, for the start log and `serve --check`. A TLS file named by an `OTEL_*`
//! variable that cannot be read turns export off instead of stopping the sidecar: pods set
//! those for every container, and the file may be another container's.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Uri};

use super::Fail;
use crate::config::{Config, ConfigError, Origin, Origins};
pub use crate::telemetry::{Compression, Export, Propagation, Root, Sampler};

/// Traces: `export` `None` exports nothing and adds nothing to any request; `off` says why.
#[derive(Clone, Debug, Default)]
pub struct TelemetrySettings {
    pub export: Option<Export>,
    /// Why nothing is exported, for a person.
    pub off: String,
    /// What the `OTEL_*` layer left out, each naming its variable: said once at start.
    pub warnings: Vec<String>,
}

pub fn telemetry(
    c: &Config,
    origins: &Origins,
    fail: &Fail<'_>,
) -> Result<TelemetrySettings, ConfigError> {
    let notes = origins.otel();
    let mut out = TelemetrySettings {
        export: None,
        off: String::new(),
        warnings: notes.warnings.clone(),
    };
    let t = &c.telemetry;
    let (on, compression) = exporter(c, fail)?;
    // The signal's own endpoint wins, unless the general one was set by a layer above it (a
    // pod's OTEL_EXPORTER_OTLP_TRACES_ENDPOINT does not override DRIFTWATCH_TELEMETRY_ENDPOINT).
    let above = |a: &str, b: &str| layer(&origins.of(a)) > layer(&origins.of(b));
    let traces = (t.traces_endpoint.as_ref()).filter(|_| {
        t.endpoint.is_none() || !above("telemetry.endpoint", "telemetry.traces_endpoint")
    });
    let (key, url, path) = match (traces, &t.endpoint) {
        (Some(url), _) => ("telemetry.traces_endpoint", url, ""),
        (None, Some(url)) => ("telemetry.endpoint", url, "v1/traces"),
        (None, None) => {
            out.off = no_endpoint(notes.grpc);
            return Ok(out);
        }
    };
    let endpoint = endpoint(key, url, path, fail)?;
    not_our_own(key, &endpoint, c, fail)?;
    if !on {
        out.off = format!(
            "telemetry.exporter is none, set by {}",
            origins.of("telemetry.exporter")
        );
        return Ok(out);
    }
    let Some((tls, ca_file)) = tls(c, origins, fail, &mut out)? else {
        return Ok(out);
    };
    out.export = Some(Export {
        endpoint,
        headers: headers(c, fail)?,
        service_name: t.service_name.clone(),
        resource: t.resource_attributes.clone().into_iter().collect(),
        sampler: sampler(&t.sampler, t.sampler_arg, fail)?,
        propagation: propagation(&t.propagation, fail)?,
        compression,
        tls,
        ca_file,
        queue_size: t.queue_size,
        batch_size: t.batch_size.min(t.queue_size),
        interval: Duration::from_millis(t.export_interval_ms),
        timeout: Duration::from_millis(t.export_timeout_ms),
    });
    positive(c, fail)?;
    Ok(out)
}

/// Whether the exporter is `otlp` (else `none`), and the compression; driftwatch's own
/// spelling only (the `OTEL_*` layer wrote its variables' so).
fn exporter(c: &Config, fail: &Fail<'_>) -> Result<(bool, Compression), ConfigError> {
    let t = &c.telemetry;
    let on = match t.exporter.as_str() {
        "otlp" => true,
        "none" => false,
        other => {
            let why = format!("`{other}` is not otlp or none");
            return Err(fail("telemetry.exporter", why));
        }
    };
    let compression = match t.compression.as_str() {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        other => {
            let why = format!("`{other}` is not gzip or none");
            return Err(fail("telemetry.compression", why));
        }
    };
    Ok((on, compression))
}

/// Why there is no endpoint: none set, or the `OTEL_*` one left out for gRPC.
fn no_endpoint(grpc: Option<&str>) -> String {
    match grpc {
        Some(var) => format!(
            "{var} is grpc: driftwatch exports over http/protobuf only, so the OTEL endpoint \
             was left out"
        ),
        None => "no endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or telemetry.endpoint)".into(),
    }
}

type CollectorTls = std::sync::Arc<rustls::ClientConfig>;

/// The collector's TLS and the CA file; `None` with `out.off` set when a file an `OTEL_*`
/// variable named cannot be used (another container's, maybe); refused when driftwatch's own
/// setting named it.
fn tls(
    c: &Config,
    origins: &Origins,
    fail: &Fail<'_>,
    out: &mut TelemetrySettings,
) -> Result<Option<(CollectorTls, Option<PathBuf>)>, ConfigError> {
    let t = &c.telemetry;
    let set = match t.client_certificate {
        Some(_) => "telemetry.client_certificate",
        None => "telemetry.client_key",
    };
    let client = super::pair(
        set,
        (&t.client_certificate, &t.client_key),
        "client_certificate and client_key",
        fail,
    );
    let otel = |key: &str| matches!(origins.of(key), Origin::Env(v) if v.starts_with("OTEL_"));
    let client = match client {
        Ok(client) => client,
        Err(_) if otel(set) => {
            out.off = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY \
                       go together; one is set alone"
                .into();
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let client = (client.as_ref()).map(|(cert, key)| (cert.as_path(), key.as_path()));
    match crate::telemetry::tls(t.certificate.as_deref(), client) {
        Ok(tls) => Ok(Some((tls, t.certificate.clone()))),
        Err((key, why)) => {
            let key = format!("telemetry.{key}");
            if !otel(&key) {
                return Err(fail(&key, why));
            }
            out.off = format!("{} cannot be used: {why}", origins.of(&key));
            Ok(None)
        }
    }
}

/// Each export header a valid name and a sensitive value.
fn headers(c: &Config, fail: &Fail<'_>) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
    let mut headers = Vec::new();
    for (name, value) in &c.telemetry.headers {
        let key = "telemetry.headers";
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| fail(key, format!("`{name}` is not a valid header name")))?;
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            fail(
                key,
                format!("the value of `{name}` is not a valid header value"),
            )
        })?;
        value.set_sensitive(true);
        headers.push((name, value));
    }
    Ok(headers)
}

/// The counts and times that must not be zero.
fn positive(c: &Config, fail: &Fail<'_>) -> Result<(), ConfigError> {
    let t = &c.telemetry;
    for (key, n) in [
        ("telemetry.queue_size", t.queue_size as u64),
        ("telemetry.batch_size", t.batch_size as u64),
        ("telemetry.export_interval_ms", t.export_interval_ms),
        ("telemetry.export_timeout_ms", t.export_timeout_ms),
    ] {
        if n == 0 {
            return Err(fail(key, "must be at least 1".into()));
        }
    }
    Ok(())
}

/// An http(s) URL without credentials in it (they would be logged with it: use `headers`),
/// with `path` appended to a base endpoint.
fn endpoint(key: &str, url: &str, path: &str, fail: &Fail<'_>) -> Result<Uri, ConfigError> {
    let bad = |why: &str| fail(key, format!("`{}` {why}", without_secrets(url)));
    let parsed = url::Url::parse(url).map_err(|e| bad(&format!("is not a URL: {e}")))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Said without the URL: what it carries is a secret.
        let host = parsed.host_str().unwrap_or_default();
        return Err(fail(
            key,
            format!("the URL for {host} carries credentials: set them in telemetry.headers"),
        ));
    }
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("is not an http or https URL"));
    }
    let mut whole = parsed.as_str().to_string();
    if !path.is_empty() {
        whole = format!("{}/{path}", whole.trim_end_matches('/'));
    }
    whole.parse().map_err(|_| bad("is not a usable URI"))
}

/// A setting's layer, in rising precedence: the default, the file, a pod's `OTEL_*`,
/// driftwatch's own `DRIFTWATCH_*` variables, a flag.
fn layer(origin: &Origin) -> u8 {
    match origin {
        Origin::Default => 0,
        Origin::File { .. } => 1,
        Origin::Env(name) if name.starts_with("OTEL_") => 2,
        Origin::Env(_) => 3,
        Origin::Flag(_) => 4,
    }
}

/// `url` as an error may show it: no userinfo (a token may sit there, `https://TOKEN@host`), no
/// query or fragment (nor there).
fn without_secrets(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = rest[..authority_end]
        .rsplit_once('@')
        .map_or(&rest[..authority_end], |(_, h)| h);
    let path = &rest[authority_end..];
    let path = &path[..path.find(['?', '#']).unwrap_or(path.len())];
    match scheme {
        "" => format!("{host}{path}"),
        _ => format!("{scheme}://{host}{path}"),
    }
}

/// An endpoint at one of driftwatch's own listeners would have every batch sent to itself:
/// through the proxy to the API (a `POST /v1/traces` upstream for every few requests), or to
/// the admin listener. Refused, naming the listener.
fn not_our_own(key: &str, endpoint: &Uri, c: &Config, fail: &Fail<'_>) -> Result<(), ConfigError> {
    let ours = [
        (
            "proxy",
            c.proxy.listen,
            "its batches would go through the proxy to the API",
        ),
        (
            "admin",
            c.admin.listen,
            "the admin listener is not a collector",
        ),
    ];
    for (listener, at, why) in ours {
        if reaches(endpoint, at) {
            return Err(fail(
                key,
                format!(
                    "`{}` is driftwatch's own {listener} listener ({listener}.listen \
                     {at}): {why}; point it at the collector's OTLP/HTTP port (4318)",
                    without_secrets(&endpoint.to_string())
                ),
            ));
        }
    }
    Ok(())
}

/// Whether a connection to `endpoint` would reach a listener on `at`: the same port, and the
/// same address, or loopback or unspecified where the listener takes every address (0.0.0.0,
/// [::]) or loopback. `localhost` is loopback; another name is not resolved at start.
pub(super) fn reaches(endpoint: &Uri, at: SocketAddr) -> bool {
    let https = endpoint.scheme_str() == Some("https");
    let port = endpoint.port_u16().unwrap_or(if https { 443 } else { 80 });
    if at.port() == 0 || port != at.port() {
        return false;
    }
    let host = endpoint.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches([']', '.']);
    let ips = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip.to_canonical()],
        Err(_) if host == "localhost" || host.ends_with(".localhost") => {
            vec![Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()]
        }
        Err(_) => return false,
    };
    let listener = at.ip().to_canonical();
    let here = |ip: &IpAddr| ip.is_loopback() || ip.is_unspecified();
    ips.iter().any(|ip| {
        *ip == listener
            || (listener.is_unspecified() && here(ip))
            || (ip.is_unspecified() && listener.is_loopback())
    })
}

fn sampler(name: &str, arg: Option<f64>, fail: &Fail<'_>) -> Result<Sampler, ConfigError> {
    let ratio = || match arg {
        Some(r) if (0.0..=1.0).contains(&r) => Ok(r),
        Some(r) => Err(fail(
            "telemetry.sampler_arg",
            format!("{r} is not a ratio from 0 to 1"),
        )),
        None => Ok(1.0),
    };
    Ok(match name {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::Ratio(ratio()?),
        "parentbased_always_on" => Sampler::ParentBased(Root::AlwaysOn),
        "parentbased_always_off" => Sampler::ParentBased(Root::AlwaysOff),
        "parentbased_traceidratio" => Sampler::ParentBased(Root::Ratio(ratio()?)),
        other => {
            return Err(fail(
                "telemetry.sampler",
                format!(
                    "`{other}` is not a sampler: always_on, always_off, traceidratio, \
                     parentbased_always_on, parentbased_always_off or parentbased_traceidratio"
                ),
            ));
        }
    })
}

fn propagation(name: &str, fail: &Fail<'_>) -> Result<Propagation, ConfigError> {
    match name {
        "always" => Ok(Propagation::Always),
        "when_absent" => Ok(Propagation::WhenAbsent),
        "never" => Ok(Propagation::Never),
        other => Err(fail(
            "telemetry.propagation",
            format!("`{other}` is not one of always, when_absent or never"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener on 0.0.0.0 or [::] takes loopback; `localhost` is loopback; an IPv4 address
    /// mapped into IPv6 is the address; the port must be the same; names are not resolved.
    #[test]
    fn an_endpoint_reaches_a_listener_on_its_port_at_the_same_or_a_wildcard_address() {
        let reach = [
            ("http://127.0.0.1:8080", "0.0.0.0:8080"),
            ("http://localhost:8080/v1/traces", "0.0.0.0:8080"),
            ("http://[::1]:8080", "[::]:8080"),
            ("http://127.0.0.1:8080", "[::]:8080"),
            ("http://localhost:9090", "127.0.0.1:9090"),
            ("http://LOCALHOST.:9090", "[::1]:9090"),
            ("http://0.0.0.0:8080", "127.0.0.1:8080"),
            ("http://[::ffff:127.0.0.1]:8080", "127.0.0.1:8080"),
            ("http://10.0.0.5:8080", "10.0.0.5:8080"),
            ("http://127.0.0.1", "0.0.0.0:80"),
            ("https://127.0.0.1", "0.0.0.0:443"),
            ("http://a.localhost:8080", "127.0.0.1:8080"),
        ];
        let apart = [
            ("http://127.0.0.1:4318", "0.0.0.0:8080"),
            ("http://10.0.0.6:8080", "10.0.0.5:8080"),
            ("http://10.0.0.6:8080", "127.0.0.1:8080"),
            ("http://127.0.0.2:8080", "127.0.0.1:8080"),
            ("http://collector:8080", "0.0.0.0:8080"),
            ("https://127.0.0.1", "0.0.0.0:80"),
            ("http://127.0.0.1:0", "127.0.0.1:0"),
        ];
        let mut wrong = Vec::new();
        for (expected, cases) in [(true, &reach[..]), (false, &apart[..])] {
            for (url, at) in cases {
                let endpoint = url::Url::parse(url).unwrap().as_str().parse().unwrap();
                if reaches(&endpoint, at.parse().unwrap()) != expected {
                    wrong.push(format!("{url} at {at}: expected {expected}"));
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }
}
