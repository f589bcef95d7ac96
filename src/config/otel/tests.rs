//! The reading of each variable, alone: what it sets, and what is said of what it leaves out.

use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn headers_and_attributes_are_decoded_lists() {
    let got = read(&env(&[
        ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x=1,broken"),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod"),
    ]))
    .keys;
    let headers = got[0].2.as_table().unwrap();
    assert_eq!(headers["api-key"].as_str(), Some("a b"));
    assert_eq!(headers["x"].as_str(), Some("1"));
    assert_eq!(headers.len(), 2);
    assert_eq!(got[1].1, "resource_attributes");
}

#[test]
fn a_signals_own_variable_comes_after_the_general_one() {
    let got = read(&env(&[
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b/v1/traces"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a"),
        ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
    ]))
    .keys;
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

/// Each value left out is said once, naming its variable; a header's value never, however
/// it is wrong, and a long value only cut.
#[test]
fn what_is_left_out_is_said_once_naming_the_variable_never_a_headers_value() {
    let long = "x".repeat(5000);
    let read = read(&env(&[
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "bad name=s3cret,api-key=tok\nen",
        ),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "=s3cret"),
        ("OTEL_TRACES_SAMPLER", &long),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "br"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:s3cret@c:4318"),
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "grpc://c:4317/?key=s3cret",
        ),
        ("OTEL_PROPAGATORS", "b3,tracecontext"),
        ("OTEL_TRACES_EXPORTER", "zipkin"),
        ("OTEL_SDK_DISABLED", "maybe"),
    ]));
    let said = read.notes.warnings.join("\n");
    let expected = [
        ("OTEL_EXPORTER_OTLP_HEADERS", 2),
        ("OTEL_TRACES_SAMPLER", 1),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", 1),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", 1),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", 1),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", 1),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", 1),
        ("OTEL_PROPAGATORS", 1),
        ("OTEL_TRACES_EXPORTER", 1),
        ("OTEL_SDK_DISABLED", 1),
    ];
    let mut wrong = Vec::new();
    for (var, n) in expected {
        let got = (read.notes.warnings.iter())
            .filter(|w| w.starts_with(&format!("{var}:")))
            .count();
        if got != n {
            wrong.push(format!("{var}: said {got} times, expected {n}"));
        }
    }
    for secret in ["s3cret", "tok", &long[..40]] {
        if said.contains(secret) {
            wrong.push(format!("{secret:.10} shown"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}\n{said}");
    let keys: Vec<&str> = read.keys.iter().map(|(_, k, _)| *k).collect();
    assert_eq!(
        keys,
        ["headers", "headers"],
        "the endpoint with credentials left out"
    );
    assert!(read.keys[0].2.as_table().unwrap().is_empty());
}

#[test]
fn compression_and_certificates_are_read_and_grpc_is_noted() {
    let read = read(&env(&[
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "none"),
        ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "GZIP"),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"),
        ("OTEL_EXPORTER_OTLP_CLIENT_KEY", ""),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
    ]));
    let got: Vec<(&str, String)> = (read.keys.iter())
        .map(|(_, k, v)| (*k, v.as_str().unwrap_or_default().to_string()))
        .collect();
    let expected = [
        ("compression", "none".to_string()),
        ("compression", "gzip".into()),
        ("certificate", "/etc/ca.pem".into()),
    ];
    assert_eq!(got, expected);
    assert_eq!(read.notes.grpc, Some("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"));
}
