//! The OpenTelemetry SDK's standard variables as `[telemetry]` keys: an operator who points
//! every service at a collector with `OTEL_EXPORTER_OTLP_ENDPOINT` points driftwatch there too.
//! They form a layer of their own, above the file and below `DRIFTWATCH_TELEMETRY_*`, so a
//! setting made for driftwatch alone wins. Pods set them for every container, so they are read
//! as the SDKs read them, never refused: an empty value is unset, names are case-insensitive,
//! and a value driftwatch cannot use is left out with a warning (said once, at start), the
//! layer below in force. A variable this layer does not know is not ours and is left alone.

use http::{HeaderName, HeaderValue};
use percent_encoding::percent_decode_str;

/// How a variable's value is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An http(s) URL without credentials in it.
    Url,
    Text,
    /// A file's path.
    Path,
    /// `key=value,...`, values percent-encoded.
    Pairs,
    /// [`Kind::Pairs`] that are valid header names and values (credentials: never shown).
    Headers,
    /// A whole number of at least 1 (milliseconds, or spans).
    Positive,
    /// A number from 0 to 1.
    Ratio,
    Sampler,
    Compression,
    Propagators,
    Exporters,
    Disabled,
}

/// `OTEL_*` variables, the `[telemetry]` key each sets and how it is read, in the order they
/// are applied: a signal's own variable after the general one, and `OTEL_SERVICE_NAME` after
/// the resource's `service.name`, so that each wins.
const KEYS: [(&str, &str, Kind); 23] = [
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "endpoint", Kind::Url),
    (
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "traces_endpoint",
        Kind::Url,
    ),
    ("OTEL_EXPORTER_OTLP_HEADERS", "headers", Kind::Headers),
    (
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "headers",
        Kind::Headers,
    ),
    (
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        "export_timeout_ms",
        Kind::Positive,
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "export_timeout_ms",
        Kind::Positive,
    ),
    (
        "OTEL_EXPORTER_OTLP_COMPRESSION",
        "compression",
        Kind::Compression,
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        "compression",
        Kind::Compression,
    ),
    ("OTEL_EXPORTER_OTLP_CERTIFICATE", "certificate", Kind::Path),
    (
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
        "certificate",
        Kind::Path,
    ),
    (
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
        "client_certificate",
        Kind::Path,
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
        "client_certificate",
        Kind::Path,
    ),
    ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "client_key", Kind::Path),
    (
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
        "client_key",
        Kind::Path,
    ),
    (
        "OTEL_RESOURCE_ATTRIBUTES",
        "resource_attributes",
        Kind::Pairs,
    ),
    ("OTEL_SERVICE_NAME", "service_name", Kind::Text),
    ("OTEL_TRACES_SAMPLER", "sampler", Kind::Sampler),
    ("OTEL_TRACES_SAMPLER_ARG", "sampler_arg", Kind::Ratio),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "queue_size", Kind::Positive),
    (
        "OTEL_BSP_SCHEDULE_DELAY",
        "export_interval_ms",
        Kind::Positive,
    ),
    ("OTEL_PROPAGATORS", "propagation", Kind::Propagators),
    ("OTEL_TRACES_EXPORTER", "exporter", Kind::Exporters),
    ("OTEL_SDK_DISABLED", "exporter", Kind::Disabled),
];

/// The protocol driftwatch speaks; `OTEL_EXPORTER_OTLP_PROTOCOL` may name another.
pub const PROTOCOL: &str = "http/protobuf";
/// The general variable first, the signal's own (which wins) last.
const PROTOCOL_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
];

const SAMPLERS: [&str; 6] = [
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
];

/// What the layer sets, and what it said of the rest.
#[derive(Debug, Default)]
pub struct Read {
    /// (variable, key, value), in the order to apply.
    pub keys: Vec<(&'static str, &'static str, toml::Value)>,
    pub notes: Notes,
}

/// What the start says once of the `OTEL_*` variables it left out.
#[derive(Debug, Clone, Default)]
pub struct Notes {
    /// One line per value left out, naming the variable, never a header's value.
    pub warnings: Vec<String>,
    /// The variable that asked for gRPC, when the `OTEL_*` endpoints were left out for it.
    pub grpc: Option<&'static str>,
}

/// The known `OTEL_*` variables of `env`, read as the SDKs read them.
pub fn read(env: &[(String, String)]) -> Read {
    let mut read = Read::default();
    let given = |var: &str| {
        (env.iter().rev())
            .find(|(name, _)| name == var)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    };
    read.notes.grpc = grpc(PROTOCOL_VARS.map(|v| (v, given(v))), &mut read.notes);
    for (var, key, kind) in KEYS {
        let Some(raw) = given(var) else { continue };
        if kind == Kind::Url && read.notes.grpc.is_some() {
            continue;
        }
        let warnings = &mut read.notes.warnings;
        match value(var, kind, raw, warnings) {
            Ok(Some(value)) => {
                if let Some(name) = service_name(kind, &value) {
                    read.keys.push((var, "service_name", name));
                }
                read.keys.push((var, key, value));
            }
            Ok(None) => {}
            Err(why) => warnings.push(format!("{var}: {why}; left out, the default applies")),
        }
    }
    read
}

/// The variable that names `grpc`, the signal's own deciding; a protocol driftwatch does not
/// know, or `http/json` (an OTLP/HTTP receiver takes protobuf as well), is said and passed.
fn grpc(vars: [(&'static str, Option<&str>); 2], notes: &mut Notes) -> Option<&'static str> {
    let mut asked = None;
    for (var, value) in vars {
        let Some(value) = value else { continue };
        match value.to_ascii_lowercase().as_str() {
            PROTOCOL => asked = None,
            "grpc" => asked = Some(var),
            "http/json" => {
                asked = None;
                notes.warnings.push(format!(
                    "{var}: driftwatch sends {PROTOCOL}, not http/json, to the same endpoint \
                     (an OTLP/HTTP receiver takes both)"
                ));
            }
            _ => notes.warnings.push(format!(
                "{var}: {} is not a protocol (grpc, http/protobuf, http/json); left out",
                shown(value)
            )),
        }
    }
    if let Some(var) = asked {
        notes.warnings.push(format!(
            "{var} is grpc: driftwatch exports over {PROTOCOL} only, so the OTEL_EXPORTER_OTLP_* \
             endpoints (a gRPC port, 4317) are left out; set DRIFTWATCH_TELEMETRY_ENDPOINT to \
             the collector's HTTP port (4318)"
        ));
    }
    asked
}

/// One variable's value as its key's, `None` when it sets nothing, or why it is left out.
fn value(
    var: &str,
    kind: Kind,
    raw: &str,
    warnings: &mut Vec<String>,
) -> Result<Option<toml::Value>, String> {
    let text = |s: &str| Ok(Some(toml::Value::String(s.to_string())));
    let lower = raw.to_ascii_lowercase();
    match kind {
        Kind::Url => url(raw).map(|()| Some(toml::Value::String(raw.to_string()))),
        Kind::Text | Kind::Path => text(raw),
        Kind::Pairs => Ok(Some(toml::Value::Table(pairs(raw)))),
        Kind::Headers => Ok(Some(toml::Value::Table(headers(var, raw, warnings)))),
        Kind::Positive => match raw.parse::<i64>() {
            Ok(n) if n >= 1 => Ok(Some(toml::Value::Integer(n))),
            _ => Err(format!(
                "{} is not a whole number of at least 1",
                shown(raw)
            )),
        },
        Kind::Ratio => match raw.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(Some(toml::Value::Float(r))),
            _ => Err(format!("{} is not a ratio from 0 to 1", shown(raw))),
        },
        Kind::Sampler if SAMPLERS.contains(&lower.as_str()) => text(&lower),
        Kind::Sampler => Err(format!(
            "{} is not a sampler driftwatch knows ({})",
            shown(raw),
            SAMPLERS.join(", ")
        )),
        Kind::Compression if matches!(lower.as_str(), "gzip" | "none") => text(&lower),
        Kind::Compression => Err(format!("{} is not gzip or none", shown(raw))),
        Kind::Propagators => propagators(var, &lower, warnings).map_or(Ok(None), text),
        Kind::Exporters => exporters(var, &lower, warnings).map_or(Ok(None), text),
        Kind::Disabled => match lower.as_str() {
            "true" => text("none"),
            "false" => Ok(None),
            _ => Err(format!("{} is not true or false", shown(raw))),
        },
    }
}

/// `OTEL_PROPAGATORS`' list: without `tracecontext` (`none`, or `baggage` alone), driftwatch
/// adds no `traceparent` (`never`); with it, `telemetry.propagation` stays as it is. One it
/// does not know (b3, jaeger, xray) is said and left out; a list of only those, as unset.
fn propagators(var: &str, list: &str, warnings: &mut Vec<String>) -> Option<&'static str> {
    let mut known = Vec::new();
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item {
            "tracecontext" | "baggage" | "none" => known.push(item),
            _ => warnings.push(format!(
                "{var}: driftwatch propagates tracecontext (and passes baggage on as a \
                 header), not {}; left out",
                shown(item)
            )),
        }
    }
    match known.is_empty() || known.contains(&"tracecontext") {
        true => None,
        false => Some("never"),
    }
}

/// `OTEL_TRACES_EXPORTER`'s list: `otlp` in it exports, else `none` turns export off. One
/// driftwatch does not have (jaeger, zipkin, console) is said and left out; a list of only
/// those, as unset: OTLP, to the endpoint if one is set.
fn exporters(var: &str, list: &str, warnings: &mut Vec<String>) -> Option<&'static str> {
    let mut known = Vec::new();
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item {
            "otlp" | "none" => known.push(item),
            _ => warnings.push(format!(
                "{var}: driftwatch exports otlp only, not {}; left out",
                shown(item)
            )),
        }
    }
    if known.contains(&"otlp") {
        Some("otlp")
    } else if known.contains(&"none") {
        Some("none")
    } else {
        None
    }
}

/// Whether `raw` is an http(s) URL without credentials; why not, without the credentials.
fn url(raw: &str) -> Result<(), String> {
    let parsed = url::Url::parse(raw).map_err(|e| format!("is not a URL ({e})"))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        let host = parsed.host_str().unwrap_or_default();
        return Err(format!(
            "the URL for {host} carries credentials (they would be logged): set them in \
             OTEL_EXPORTER_OTLP_HEADERS"
        ));
    }
    if !matches!(parsed.scheme(), "http" | "https") {
        // Named by its scheme alone: the rest may hold a token in its query.
        return Err(format!(
            "a {} URL is not http or https",
            shown(parsed.scheme())
        ));
    }
    Ok(())
}

/// A `service.name` among resource attributes, to be the service name unless
/// `OTEL_SERVICE_NAME` (applied after) says otherwise.
fn service_name(kind: Kind, value: &toml::Value) -> Option<toml::Value> {
    let name = value.as_table()?.get("service.name")?;
    (kind == Kind::Pairs && name.as_str().is_some_and(|s| !s.is_empty())).then(|| name.clone())
}

/// `key1=value1,key2=value2` (W3C Baggage's list, values percent-encoded), as the
/// specification writes headers and resource attributes; an item without `=` is skipped.
fn pairs(list: &str) -> toml::Table {
    list.split(',')
        .filter_map(|item| item.split_once('='))
        .map(|(k, v)| {
            let v = percent_decode_str(v.trim()).decode_utf8_lossy();
            (k.trim().to_string(), toml::Value::String(v.into_owned()))
        })
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

/// [`pairs`] that make valid headers; one that does not is left out, said by its position and
/// length alone: the values are credentials.
fn headers(var: &str, list: &str, warnings: &mut Vec<String>) -> toml::Table {
    let mut table = pairs(list);
    let mut bad = Vec::new();
    for (i, (name, value)) in table.iter().enumerate() {
        let value = value.as_str().unwrap_or_default();
        if HeaderName::from_bytes(name.as_bytes()).is_err() || HeaderValue::from_str(value).is_err()
        {
            bad.push(name.clone());
            warnings.push(format!(
                "{var}: entry {} ({} bytes) is not a valid header name and value; left out",
                i + 1,
                name.len() + value.len() + 1
            ));
        }
    }
    table.retain(|name, _| !bad.iter().any(|b| b == name));
    table
}

/// A value for a warning: at most its first 32 characters, and its length when cut.
fn shown(value: &str) -> String {
    match value.char_indices().nth(32) {
        None => format!("`{value}`"),
        Some((at, _)) => format!("`{}…` ({} bytes)", &value[..at], value.len()),
    }
}

#[cfg(test)]
mod tests;
