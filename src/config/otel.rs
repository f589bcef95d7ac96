//! The OpenTelemetry SDK's standard variables as `[telemetry]` keys: an operator who points
//! every service at a collector with `OTEL_EXPORTER_OTLP_ENDPOINT` points driftwatch there too.
//! They form a layer of their own, above the file and below `DRIFTWATCH_TELEMETRY_*`, so a
//! setting made for driftwatch alone wins. A variable this layer does not know is not ours to
//! refuse (other SDKs in the pod read them) and is left alone.

use percent_encoding::percent_decode_str;

/// `OTEL_*` variables and the `[telemetry]` key each sets, in the order they are applied: a
/// signal's own variable after the general one, so it wins.
const KEYS: [(&str, &str); 12] = [
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "endpoint"),
    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "traces_endpoint"),
    ("OTEL_EXPORTER_OTLP_HEADERS", "headers"),
    ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "headers"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "export_timeout_ms"),
    ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "export_timeout_ms"),
    ("OTEL_SERVICE_NAME", "service_name"),
    ("OTEL_RESOURCE_ATTRIBUTES", "resource_attributes"),
    ("OTEL_TRACES_SAMPLER", "sampler"),
    ("OTEL_TRACES_SAMPLER_ARG", "sampler_arg"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "queue_size"),
    ("OTEL_BSP_SCHEDULE_DELAY", "export_interval_ms"),
];

/// The protocols `OTEL_EXPORTER_OTLP_PROTOCOL` may name: driftwatch speaks only this one.
pub const PROTOCOL: &str = "http/protobuf";
pub const PROTOCOL_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
];

/// Each known `OTEL_*` variable of `env` as (variable, key, value), in the order to apply.
pub fn keys(env: &[(String, String)]) -> Vec<(&'static str, &'static str, toml::Value)> {
    let mut out = Vec::new();
    for (var, key) in KEYS {
        let Some((_, value)) = env.iter().find(|(name, _)| name == var) else {
            continue;
        };
        let value = match key {
            "headers" | "resource_attributes" => toml::Value::Table(pairs(value)),
            "endpoint" | "traces_endpoint" | "service_name" | "sampler" => {
                toml::Value::String(value.trim().to_string())
            }
            _ => number(value),
        };
        out.push((var, key, value));
    }
    out
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

/// A number as TOML (integer or float); anything else stays text, for the key's own check to
/// refuse naming the variable.
fn number(value: &str) -> toml::Value {
    let value = value.trim();
    if let Ok(i) = value.parse::<i64>() {
        return toml::Value::Integer(i);
    }
    match value.parse::<f64>() {
        Ok(f) => toml::Value::Float(f),
        Err(_) => toml::Value::String(value.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn headers_and_attributes_are_decoded_lists() {
        let got = keys(&env(&[
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x=1,broken"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod"),
        ]));
        let headers = got[0].2.as_table().unwrap();
        assert_eq!(headers["api-key"].as_str(), Some("a b"));
        assert_eq!(headers["x"].as_str(), Some("1"));
        assert_eq!(headers.len(), 2);
        assert_eq!(got[1].1, "resource_attributes");
    }

    #[test]
    fn a_signals_own_variable_comes_after_the_general_one() {
        let got = keys(&env(&[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b/v1/traces"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ]));
        let order: Vec<&str> = got.iter().map(|(var, _, _)| *var).collect();
        assert_eq!(
            order,
            [
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "OTEL_TRACES_SAMPLER_ARG"
            ]
        );
        assert_eq!(got[2].2.as_float(), Some(0.25));
    }
}
