//! The `OTEL_*` layer as pods set it for every container (issue 65): empty is unset, names
//! are case-insensitive, a value driftwatch cannot use is left out and the default holds, and
//! nothing in it stops the start. driftwatch's own keys stay strict.

use super::*;

const ENDPOINT: (&str, &str) = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");

/// The settings of a one-API file with `vars` set; a refusal fails the test, naming it.
fn with(vars: &[(&str, &str)]) -> Settings {
    let file = an_api("otel-env.toml");
    load(Some(&file), env(vars), Vec::new()).unwrap_or_else(|e| panic!("{vars:?}: {e}"))
}

fn export(vars: &[(&str, &str)]) -> Export {
    let mut all = vec![ENDPOINT];
    all.extend_from_slice(vars);
    (with(&all).telemetry.export).unwrap_or_else(|| panic!("{vars:?}: export off"))
}

#[test]
fn an_empty_otel_variable_is_unset() {
    let empty = [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_SERVICE_NAME",
        "OTEL_TRACES_SAMPLER",
        "OTEL_TRACES_SAMPLER_ARG",
        "OTEL_BSP_MAX_QUEUE_SIZE",
        "OTEL_PROPAGATORS",
        "OTEL_TRACES_EXPORTER",
        "OTEL_SDK_DISABLED",
    ];
    let vars: Vec<(&str, &str)> = empty.iter().map(|v| (*v, "")).collect();
    let e = export(&vars);
    assert_eq!(e.endpoint, "http://collector:4318/v1/traces");
    assert_eq!(e.sampler, Sampler::ParentBased(Root::AlwaysOn));
    assert_eq!(e.service_name, "driftwatch");
    assert_eq!(e.timeout, std::time::Duration::from_secs(10));
    assert!(e.headers.is_empty());
    // An empty endpoint is no endpoint: export off, the start not stopped.
    let off = with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]);
    assert!(off.telemetry.export.is_none());
}

#[test]
fn otel_names_are_case_insensitive() {
    let cases = [
        ("ALWAYS_OFF", Sampler::AlwaysOff),
        ("Always_On", Sampler::AlwaysOn),
        (
            "ParentBased_TraceIdRatio",
            Sampler::ParentBased(Root::Ratio(0.5)),
        ),
    ];
    for (name, sampler) in cases {
        let e = export(&[
            ("OTEL_TRACES_SAMPLER", name),
            ("OTEL_TRACES_SAMPLER_ARG", "0.5"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "HTTP/Protobuf"),
        ]);
        assert_eq!(e.sampler, sampler, "{name}");
    }
}

/// A sampler, a ratio or a number driftwatch cannot read is left out: the default holds.
#[test]
fn an_unknown_or_malformed_otel_value_falls_back_to_the_default() {
    let e = export(&[
        ("OTEL_TRACES_SAMPLER", "xray"),
        ("OTEL_TRACES_SAMPLER_ARG", "half"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "-3"),
        ("OTEL_BSP_SCHEDULE_DELAY", "0"),
    ]);
    assert_eq!(e.sampler, Sampler::ParentBased(Root::AlwaysOn));
    assert_eq!(e.timeout, std::time::Duration::from_secs(10));
    assert_eq!(e.queue_size, 2048);
    assert_eq!(e.interval, std::time::Duration::from_secs(1));
    let ratio = export(&[
        ("OTEL_TRACES_SAMPLER", "traceidratio"),
        ("OTEL_TRACES_SAMPLER_ARG", "2"),
    ]);
    assert_eq!(ratio.sampler, Sampler::Ratio(1.0));
    let timeout = export(&[
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"),
        ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2500"),
    ]);
    assert_eq!(timeout.timeout, std::time::Duration::from_millis(2500));
}

/// `grpc` names a port driftwatch cannot speak to: the `OTEL_*` endpoint is left out (export
/// off), the start goes on; driftwatch's own endpoint still exports.
#[test]
fn grpc_leaves_the_otel_endpoint_out_and_does_not_stop_the_start() {
    for var in [
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    ] {
        let s = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            (var, "GRPC"),
        ]);
        assert!(s.telemetry.export.is_none(), "{var}");
    }
    let own = with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("DRIFTWATCH_TELEMETRY_ENDPOINT", "http://c:4318"),
    ]);
    let e = own.telemetry.export.unwrap();
    assert_eq!(e.endpoint, "http://c:4318/v1/traces");
    // The signal's own protocol wins over the general one.
    let traces = with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
    ]);
    assert!(traces.telemetry.export.is_some());
}

#[test]
fn sdk_disabled_and_exporter_none_turn_export_off() {
    let off = [
        ("OTEL_SDK_DISABLED", "true"),
        ("OTEL_SDK_DISABLED", "TRUE"),
        ("OTEL_TRACES_EXPORTER", "none"),
        ("OTEL_TRACES_EXPORTER", "None"),
    ];
    for var in off {
        assert!(with(&[ENDPOINT, var]).telemetry.export.is_none(), "{var:?}");
    }
    let on = [
        ("OTEL_SDK_DISABLED", "false"),
        ("OTEL_SDK_DISABLED", "yes"),
        ("OTEL_TRACES_EXPORTER", "otlp"),
        ("OTEL_TRACES_EXPORTER", "jaeger"),
        ("OTEL_TRACES_EXPORTER", "zipkin,OTLP"),
    ];
    for var in on {
        assert!(with(&[ENDPOINT, var]).telemetry.export.is_some(), "{var:?}");
    }
    // OTEL_SDK_DISABLED wins over the exporter's list.
    let both = [
        ENDPOINT,
        ("OTEL_TRACES_EXPORTER", "otlp"),
        ("OTEL_SDK_DISABLED", "true"),
    ];
    assert!(with(&both).telemetry.export.is_none());
}

/// OTEL_SERVICE_NAME > `service.name` in OTEL_RESOURCE_ATTRIBUTES > the default; driftwatch's
/// own variable over both.
#[test]
fn the_service_name_comes_from_the_resource_attributes_unless_otel_service_name_is_set() {
    let attrs = ("OTEL_RESOURCE_ATTRIBUTES", "service.name=checkout,team=pay");
    assert_eq!(export(&[attrs]).service_name, "checkout");
    let named = [attrs, ("OTEL_SERVICE_NAME", "named")];
    assert_eq!(export(&named).service_name, "named");
    let empty = [attrs, ("OTEL_SERVICE_NAME", "")];
    assert_eq!(export(&empty).service_name, "checkout");
    let own = [attrs, ("DRIFTWATCH_TELEMETRY_SERVICE_NAME", "dw")];
    assert_eq!(export(&own).service_name, "dw");
    assert_eq!(export(&[]).service_name, "driftwatch");
}

/// Without `tracecontext` in OTEL_PROPAGATORS driftwatch adds no `traceparent`; with it (or
/// with only propagators it does not know), `telemetry.propagation` holds.
#[test]
fn otel_propagators_without_tracecontext_add_no_traceparent() {
    let cases = [
        ("none", Propagation::Never),
        ("NONE", Propagation::Never),
        ("baggage", Propagation::Never),
        ("tracecontext,baggage", Propagation::WhenAbsent),
        ("TraceContext", Propagation::WhenAbsent),
        ("b3,jaeger", Propagation::WhenAbsent),
        ("b3, tracecontext", Propagation::WhenAbsent),
    ];
    for (list, expected) in cases {
        let e = export(&[("OTEL_PROPAGATORS", list)]);
        assert_eq!(e.propagation, expected, "{list}");
    }
}

/// driftwatch's own settings are not a pod's: a bad value there is refused, naming it.
#[test]
fn driftwatchs_own_telemetry_keys_stay_strict() {
    let file = an_api("otel-strict.toml");
    let refused = [
        ("DRIFTWATCH_TELEMETRY_SAMPLER", "ALWAYS_OFF"),
        ("DRIFTWATCH_TELEMETRY_EXPORT_TIMEOUT_MS", "\"10s\""),
        ("DRIFTWATCH_TELEMETRY_SAMPLER", "xray"),
    ];
    for (var, value) in refused {
        let vars = env(&[ENDPOINT, (var, value)]);
        let e = load(Some(&file), vars, Vec::new()).unwrap_err().to_string();
        assert!(e.contains(var), "{var}={value}: {e}");
    }
}

/// Export off says why, naming what turned it off; on, it says where and how, never a header
/// or the endpoint's query.
#[test]
fn export_off_says_why_and_on_says_where_and_how() {
    let cases = [
        (vec![], "no endpoint"),
        (
            vec![ENDPOINT, ("OTEL_SDK_DISABLED", "True")],
            "OTEL_SDK_DISABLED",
        ),
        (
            vec![ENDPOINT, ("OTEL_TRACES_EXPORTER", "none")],
            "OTEL_TRACES_EXPORTER",
        ),
        (
            vec![ENDPOINT, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
            "grpc",
        ),
        (
            vec![
                ENDPOINT,
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem"),
            ],
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
        ),
        (
            vec![ENDPOINT, ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/k.pem")],
            "go together",
        ),
    ];
    let mut wrong = Vec::new();
    for (vars, why) in cases {
        let t = with(&vars).telemetry;
        if t.export.is_some() || !t.off.contains(why) {
            wrong.push(format!("{vars:?}: {:?}", t.off));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    let e = export(&[
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "https://c/v1/traces?token=s3cret",
        ),
        ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cret"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "GZIP"),
        ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
        ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ("OTEL_PROPAGATORS", "none"),
    ]);
    assert_eq!(e.compression, Compression::Gzip);
    assert_eq!(
        e.to_string(),
        "https://c/v1/traces, sampler parentbased_traceidratio 0.25, propagation never, \
         compression gzip"
    );
}

/// A CA file from OTEL_EXPORTER_OTLP_CERTIFICATE is read at start and said; one that holds no
/// certificate turns export off, and from driftwatch's own key is refused.
#[test]
fn the_collectors_ca_file_is_read_at_start() {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = params.self_signed(&key).unwrap();
    let ca_file = write("collector-ca.pem", &ca.pem());
    let ca_path = ca_file.to_str().unwrap();
    let e = export(&[("OTEL_EXPORTER_OTLP_CERTIFICATE", ca_path)]);
    assert_eq!(e.ca_file.as_deref(), Some(ca_file.as_path()));
    assert!(e.to_string().ends_with(&format!(", CA {ca_path}")), "{e}");
    let empty = write("collector-empty.pem", "");
    let empty = empty.to_str().unwrap();
    let off = with(&[ENDPOINT, ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", empty)]);
    assert!(off.telemetry.export.is_none());
    assert!(
        off.telemetry.off.contains("no PEM certificate"),
        "{}",
        off.telemetry.off
    );
    let file = an_api("otel-ca.toml");
    let own = env(&[ENDPOINT, ("DRIFTWATCH_TELEMETRY_CERTIFICATE", empty)]);
    let e = load(Some(&file), own, Vec::new()).unwrap_err().to_string();
    assert!(e.contains("telemetry.certificate"), "{e}");
}
