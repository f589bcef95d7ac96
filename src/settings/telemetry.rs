//! `[telemetry]` typed: off unless an endpoint is set; then the traces URL parsed, each
//! export header a valid name and value, the sampler one the SDK names, and the propagation a
//! known choice. Header values are credentials: `Debug` shows their names only.

use std::time::Duration;

use http::{HeaderName, HeaderValue, Uri};

use super::Fail;
use crate::config::{Config, ConfigError};
pub use crate::telemetry::{Export, Propagation, Root, Sampler};

/// Traces: `None` exports nothing and adds nothing to any request.
#[derive(Clone, Debug, Default)]
pub struct TelemetrySettings {
    pub export: Option<Export>,
}

pub fn telemetry(c: &Config, fail: &Fail<'_>) -> Result<TelemetrySettings, ConfigError> {
    let t = &c.telemetry;
    let endpoint = match (&t.traces_endpoint, &t.endpoint) {
        (Some(url), _) => endpoint("telemetry.traces_endpoint", url, "", fail)?,
        (None, Some(url)) => endpoint("telemetry.endpoint", url, "v1/traces", fail)?,
        (None, None) => return Ok(TelemetrySettings::default()),
    };
    let mut headers = Vec::new();
    for (name, value) in &t.headers {
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
    Ok(TelemetrySettings {
        export: Some(Export {
            endpoint,
            headers,
            service_name: t.service_name.clone(),
            resource: t.resource_attributes.clone().into_iter().collect(),
            sampler: sampler(&t.sampler, t.sampler_arg, fail)?,
            propagation: propagation(&t.propagation, fail)?,
            queue_size: t.queue_size,
            batch_size: t.batch_size.min(t.queue_size),
            interval: Duration::from_millis(t.export_interval_ms),
            timeout: Duration::from_millis(t.export_timeout_ms),
        }),
    })
}

/// An http(s) URL without credentials in it (they would be logged with it: use `headers`),
/// with `path` appended to a base endpoint.
fn endpoint(key: &str, url: &str, path: &str, fail: &Fail<'_>) -> Result<Uri, ConfigError> {
    let bad = |why: &str| fail(key, format!("`{url}` {why}"));
    let parsed = url::Url::parse(url).map_err(|e| bad(&format!("is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("is not an http or https URL"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Said without the URL: what it carries is a secret.
        let host = parsed.host_str().unwrap_or_default();
        return Err(fail(
            key,
            format!("the URL for {host} carries credentials: set them in telemetry.headers"),
        ));
    }
    let mut whole = parsed.as_str().to_string();
    if !path.is_empty() {
        whole = format!("{}/{path}", whole.trim_end_matches('/'));
    }
    whole.parse().map_err(|_| bad("is not a usable URI"))
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
