//! The operations kit against what driftwatch really exports: every metric the alert rules
//! and the dashboard use is one the registry emits, every metric the registry emits is alerted
//! on or shown, and the dashboard has Grafana's shape. (`promtool` and a real Prometheus check
//! the rules themselves: `.ci/run`, `scripts/prometheus-e2e`.)

use std::collections::BTreeSet;

use serde_json::Value;

use super::shared_memory::{RedisServer, hash_key};
use super::sidecar::{config, raw, scrape, start};
use super::upstream::{self, ok};

fn repo_file(rel: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `driftwatch_*` and `process_*` names in a text (PromQL in rules or panels).
fn names_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for prefix in ["driftwatch_", "process_"] {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            out.insert(name);
        }
    }
    out
}

/// (family, sample names) from a scrape: `# TYPE` lines (counters are typed under their
/// `_total` name), with `_bucket`, `_sum`, `_count` for histograms.
fn exported(scrape: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut families = BTreeSet::new();
    let mut samples = BTreeSet::new();
    for line in scrape.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').unwrap();
        families.insert(name.to_string());
        match kind {
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    samples.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                samples.insert(name.to_string());
            }
        }
    }
    (families, samples)
}

fn family_of(sample: &str, families: &BTreeSet<String>) -> Option<String> {
    families
        .iter()
        .filter(|f| sample.starts_with(f.as_str()))
        .max_by_key(|f| f.len())
        .cloned()
}

/// The PromQL of every panel of the dashboard.
fn panel_exprs() -> Vec<String> {
    let dashboard: Value = serde_json::from_str(&repo_file("dashboards/driftwatch.json")).unwrap();
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().clone())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_and_dashboard_use_exactly_the_metrics_driftwatch_exports() {
    // A family shows in a scrape once it has a series: drive one of each. Enforce mode, an
    // upstream that refuses connections, a tiny body limit, and the memory shared through a
    // real redis-server (its metrics exist only then).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = closed.local_addr().unwrap();
    drop(closed);
    let redis = RedisServer::start();
    redis.client().await;
    let dw = start(config(&format!("http://{refused}"), |c| {
        c.proxy.mode = driftwatch::policy::Mode::Enforce;
        let repair = driftwatch::policy::Action::Repair;
        c.enforce
            .kinds
            .insert(driftwatch::finding::Kind::OmittedOnReplace, repair);
        c.audit.max_body = 16;
        c.memory.backend = driftwatch::config::MemoryBackend::Redis;
        c.memory.redis_url = Some(redis.url());
        c.memory.hash_key_file = Some(hash_key("ops-kit"));
    }))
    .await;
    for request in [
        "GET /api/v1/playouts?page_size=1 HTTP/1.1\r\nhost: x\r\nx-mcp-tool: list_playouts\r\n\r\n"
            .to_string(),
        "GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n".to_string(),
        // A replace write set to repair, whose read finds the upstream closed: refused.
        "PUT /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n{\"name\":\"a\"}"
            .to_string(),
        format!(
            "PUT /api/v1/schedules/1 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 40\r\n\r\n{:<40}",
            "{\"name\":\"a\"}"
        ),
    ] {
        raw(dw.addr, request.as_bytes()).await;
    }
    // `driftwatch_spec_warnings` has its series once the whole-document checks ran, which
    // the sidecar leaves to after ready: wait for them.
    let text = super::util::eventually("the spec's warnings counted", || async {
        let text = scrape(dw.admin).await;
        text.contains("# TYPE driftwatch_spec_warnings ")
            .then_some(text)
    })
    .await;
    let (mut families, mut samples) = exported(&text);
    dw.stop().await;
    // Exported once `driftwatch wrap` has checked a catalog (tests/integration/wrap.rs scrapes
    // it from a real server's).
    let wrap_only = "driftwatch_catalog_defects";
    assert!(families.insert(wrap_only.into()) && samples.insert(wrap_only.into()));
    // Exported by `driftwatch wrap` from its start (tests/integration/hostile_wrap.rs).
    let wrap_only = "driftwatch_tool_calls_untracked_total";
    assert!(families.insert(wrap_only.into()) && samples.insert(wrap_only.into()));
    assert_eq!(
        families.len(),
        44,
        "every metric driftwatch registers: {families:?}"
    );

    let rules = repo_file("config/alerts.yml");
    let rules_doc: yaml_serde::Value = yaml_serde::from_str(&rules).unwrap();
    let exprs: Vec<String> = rules_doc["groups"][0]["rules"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r["expr"].as_str().unwrap().to_string())
        .collect();
    let panel_exprs = panel_exprs();

    let mut problems = Vec::new();
    let mut used_families = BTreeSet::new();
    for (what, exprs) in [("alerts.yml", &exprs), ("driftwatch.json", &panel_exprs)] {
        for name in exprs.iter().flat_map(|e| names_in(e)) {
            if !samples.contains(&name) {
                problems.push(format!(
                    "{what} uses {name}, which driftwatch does not export"
                ));
            }
            used_families.extend(family_of(&name, &families));
        }
    }
    let documented = repo_file("docs/metrics.md");
    for family in &families {
        if !documented.contains(&format!("`{family}`")) {
            problems.push(format!("docs/metrics.md does not list {family}"));
        }
    }
    // And the other way round: each metric the table lists is in the scrape.
    let listed = documented
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(name, _)| name);
    for name in listed {
        if !families.contains(name) {
            problems.push(format!(
                "docs/metrics.md lists {name}, which driftwatch does not export"
            ));
        }
    }
    for family in families.difference(&used_families) {
        problems.push(format!(
            "driftwatch exports {family}, which no alert rule and no dashboard panel uses"
        ));
    }
    // The rules page on these by name: a rename on either side must fail here.
    let paging = [
        "driftwatch_silent_clears_total",
        "driftwatch_findings_total",
        "driftwatch_unknown_query_params_total",
        "driftwatch_blocked_total",
        "driftwatch_spec_reloads_total",
        "driftwatch_unaudited_total",
        "driftwatch_requests_total",
        "driftwatch_upstream_errors_total",
        "driftwatch_events_dropped_total",
        "driftwatch_audit_errors_total",
        "driftwatch_memory_store_up",
        "driftwatch_memory_store_fallbacks_total",
        "driftwatch_memory_store_writer_restarts_total",
        "driftwatch_catalog_defects",
        "driftwatch_trace_spans_total",
    ];
    let in_rules: BTreeSet<String> = exprs.iter().flat_map(|e| names_in(e)).collect();
    assert_eq!(
        in_rules,
        paging.iter().map(|s| s.to_string()).collect(),
        "the metrics the alert rules watch"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_dashboard_has_grafanas_shape_and_a_datasource_variable() {
    let d: Value = serde_json::from_str(&repo_file("dashboards/driftwatch.json")).unwrap();
    let mut problems = Vec::new();
    for key in [
        "title",
        "uid",
        "schemaVersion",
        "panels",
        "templating",
        "time",
    ] {
        if d.get(key).is_none() {
            problems.push(format!("no `{key}`"));
        }
    }
    let vars = d["templating"]["list"].as_array().unwrap();
    assert!(
        vars.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a Prometheus datasource variable"
    );
    let mut ids = BTreeSet::new();
    for p in d["panels"].as_array().unwrap() {
        let title = p["title"].as_str().unwrap_or("?");
        if !ids.insert(p["id"].as_u64().unwrap()) {
            problems.push(format!("{title}: duplicate id"));
        }
        if p["datasource"]["uid"] != "${datasource}" {
            problems.push(format!("{title}: datasource is not the variable"));
        }
        for key in ["h", "w", "x", "y"] {
            if !p["gridPos"][key].is_u64() {
                problems.push(format!("{title}: gridPos.{key}"));
            }
        }
        let targets = p["targets"].as_array().unwrap();
        if targets.is_empty()
            || targets
                .iter()
                .any(|t| !t["expr"].is_string() || !t["refId"].is_string())
        {
            problems.push(format!("{title}: targets need expr and refId"));
        }
        // Every series a panel reads is narrowed to the job, namespace and pod chosen.
        for expr in targets.iter().filter_map(|t| t["expr"].as_str()) {
            let selectors = expr.matches("{job=~\"$job\",namespace=~\"$namespace\",pod=~\"$pod\"");
            if selectors.count() != names_in(expr).len() {
                problems.push(format!(
                    "{title}: `{expr}` is not narrowed to $job, $namespace, $pod"
                ));
            }
        }
    }
    for name in ["job", "namespace", "pod"] {
        if !vars
            .iter()
            .any(|v| v["name"] == name && v["type"] == "query")
        {
            problems.push(format!("no `{name}` variable"));
        }
    }
    let reloads = d["annotations"]["list"].as_array().unwrap();
    if !reloads.iter().any(|a| {
        a["expr"]
            .as_str()
            .is_some_and(|e| e.contains("driftwatch_spec_info"))
    }) {
        problems.push("no annotation for spec reloads".into());
    }
    let titles = super::util::strings(&d["panels"], "title");
    for wanted in [
        "Traffic by operation",
        "Findings by kind",
        "Silent clears by operation and field",
        "Top unknown query parameters",
        "Blocked and repaired requests, reads before writes (enforce mode)",
        "Upstream rejections after drift",
        "Audit overhead",
        "Spec revision in force",
        "Spec operations and reloads",
        "Operations by requests",
    ] {
        if !titles.contains(&wanted) {
            problems.push(format!("no panel `{wanted}`"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_and_fixed_vocabulary_series_exist_at_zero_before_the_first_event() {
    let up = upstream::start(ok(), std::time::Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |_| {})).await;
    // The spec's warnings are counted once its whole-document checks ran, after ready.
    let text = super::util::eventually("the spec's warnings counted", || async {
        let text = scrape(dw.admin).await;
        text.contains("# TYPE driftwatch_spec_warnings ")
            .then_some(text)
    })
    .await;
    dw.stop().await;
    for series in [
        "driftwatch_silent_clears_total{operation=\"updateChannel\",field=\"graphicsElementIds\",stage=\"confirmed\"} 0",
        "driftwatch_silent_clears_total{operation=\"updateChannel\",field=\"graphicsElementIds\",stage=\"at_risk\"} 0",
        "driftwatch_findings_total{kind=\"replace_will_drop_field\",operation=\"updateChannel\",severity=\"critical\",blame=\"server\"} 0",
        "driftwatch_spec_reloads_total{result=\"success\"} 1",
        "driftwatch_spec_reloads_total{result=\"error\"} 0",
        "driftwatch_upstream_errors_total{cause=\"connect\"} 0",
        "driftwatch_upstream_errors_total{cause=\"timeout\"} 0",
        "driftwatch_unaudited_total{reason=\"body_too_large\"} 0",
        "driftwatch_unaudited_total{reason=\"response_queue_full\"} 0",
        "driftwatch_unaudited_total{reason=\"spec_ref_depth\"} 0",
        "driftwatch_client_errors_total{reason=\"host\"} 0",
        "driftwatch_limit_hits_total{limit=\"open_files\",listener=\"proxy\"} 0",
        "driftwatch_repairs_total{outcome=\"repaired\"} 0",
        "driftwatch_repairs_total{outcome=\"refused\"} 0",
        "driftwatch_repairs_total{outcome=\"precondition_failed\"} 0",
        "driftwatch_requests_in_flight 0",
        "driftwatch_memory_evictions_total 0",
        &format!(
            "driftwatch_build_info{{version=\"{}\",revision=\"",
            env!("CARGO_PKG_VERSION")
        ),
        "process_resident_memory_bytes ",
        "process_cpu_seconds_total ",
        "process_open_fds ",
        "process_max_fds ",
        "process_threads ",
        "process_start_time_seconds ",
    ] {
        assert!(text.contains(series), "missing `{series}`:\n{text}");
    }
    // A healthy sidecar's panels read 0, not "no data": every metric the dashboard reads is in
    // this scrape, made before any traffic, but for these, pinned by name: their labels come
    // with their first request or tool, or only `wrap` or a shared memory exports them.
    let with_their_first_event = [
        "driftwatch_requests_total",
        "driftwatch_blocked_total",
        "driftwatch_unknown_query_params_total",
        "driftwatch_tool_requests_total",
        "driftwatch_tool_findings_total",
        "driftwatch_catalog_defects",
        "driftwatch_tool_calls_untracked_total",
        "driftwatch_memory_store_up",
        "driftwatch_memory_store_entries",
        "driftwatch_memory_store_recall_seconds_bucket",
        "driftwatch_memory_store_fallbacks_total",
    ];
    let (_, samples) = exported(&text);
    let absent: BTreeSet<String> = panel_exprs()
        .iter()
        .flat_map(|e| names_in(e))
        .filter(|name| !samples.contains(name))
        .collect();
    let expected: BTreeSet<String> = with_their_first_event.map(String::from).into();
    assert_eq!(
        absent, expected,
        "the dashboard's metrics a fresh sidecar's scrape lacks"
    );
}

#[test]
fn the_kubernetes_manifests_run_driftwatch_as_a_probed_sidecar_with_a_valid_config() {
    let docs: Vec<yaml_serde::Value> = [
        "deployment.yaml",
        "configmap.yaml",
        "servicemonitor.yaml",
        "networkpolicy.yaml",
    ]
    .iter()
    .flat_map(|f| {
        repo_file(&format!("config/k8s/{f}"))
            .split("\n---\n")
            .map(|d| yaml_serde::from_str(d).unwrap())
            .collect::<Vec<_>>()
    })
    .collect();
    let kind = |k: &str| {
        docs.iter()
            .find(|d| d["kind"].as_str() == Some(k))
            .unwrap_or_else(|| panic!("no {k}"))
    };
    let pod = &kind("Deployment")["spec"]["template"]["spec"];
    let containers = pod["containers"].as_sequence().unwrap();
    assert_eq!(containers.len(), 1, "the MCP server");
    // A native sidecar: started (and ready) before the MCP server, stopped after it.
    let sidecars = pod["initContainers"].as_sequence().unwrap();
    let dw = sidecars
        .iter()
        .find(|c| c["name"].as_str() == Some("driftwatch"))
        .unwrap();
    assert_eq!(dw["restartPolicy"].as_str(), Some("Always"));
    assert_eq!(
        dw["startupProbe"]["httpGet"]["path"].as_str(),
        Some("/readyz")
    );
    assert_eq!(pod["enableServiceLinks"].as_bool(), Some(false));
    // Pod Security "restricted": non-root, RuntimeDefault seccomp, no capabilities.
    assert_eq!(pod["securityContext"]["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"].as_str(),
        Some("RuntimeDefault")
    );
    for c in sidecars.iter().chain(containers) {
        let sc = &c["securityContext"];
        assert_eq!(
            sc["allowPrivilegeEscalation"].as_bool(),
            Some(false),
            "{:?}",
            c["name"]
        );
        assert_eq!(
            sc["capabilities"]["drop"][0].as_str(),
            Some("ALL"),
            "{:?}",
            c["name"]
        );
    }
    assert_eq!(
        dw["livenessProbe"]["httpGet"]["path"].as_str(),
        Some("/healthz")
    );
    assert_eq!(
        dw["readinessProbe"]["httpGet"]["path"].as_str(),
        Some("/readyz")
    );
    assert_eq!(dw["ports"][0]["containerPort"].as_u64(), Some(9090));
    let mcp_env = containers[0]["env"][0]["value"].as_str().unwrap();
    assert_eq!(
        mcp_env, "http://127.0.0.1:8080",
        "the MCP server calls the sidecar"
    );
    assert!(kind("ServiceMonitor")["spec"]["endpoints"][0]["port"].as_str() == Some("admin"));
    // The ConfigMap's config is one driftwatch accepts (unknown keys would be refused).
    let toml = kind("ConfigMap")["data"]["driftwatch.toml"]
        .as_str()
        .unwrap();
    let path = std::env::temp_dir().join(format!("driftwatch-k8s-{}.toml", std::process::id()));
    std::fs::write(&path, toml).unwrap();
    let layers = driftwatch::config::Layers {
        file: Some(&path),
        ..Default::default()
    };
    let settings = driftwatch::settings::Settings::load(layers).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        settings.apis[0].spec.source,
        driftwatch::settings::SpecSource::File("/etc/driftwatch/openapi.yaml".into())
    );
}

/// config/k8s/prometheusrule.yaml is scripts/prometheus-rule's output from config/alerts.yml:
/// the rules the Prometheus Operator loads are the ones promtool tests.
#[test]
fn the_prometheus_rule_is_the_alert_rules_file_unchanged() {
    let generated = std::process::Command::new("bash")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/prometheus-rule"))
        .output()
        .unwrap();
    assert!(generated.status.success());
    let committed = repo_file("config/k8s/prometheusrule.yaml");
    assert_eq!(
        String::from_utf8(generated.stdout).unwrap(),
        committed,
        "run scripts/prometheus-rule > config/k8s/prometheusrule.yaml"
    );
    let rule: yaml_serde::Value = yaml_serde::from_str(&committed).unwrap();
    let alerts: yaml_serde::Value = yaml_serde::from_str(&repo_file("config/alerts.yml")).unwrap();
    assert_eq!(rule["kind"].as_str(), Some("PrometheusRule"));
    assert_eq!(rule["spec"]["groups"], alerts["groups"]);
}

/// The forward variant (config/k8s/forward/): the MCP server keeps its URLs and names the
/// sidecar in HTTPS_PROXY, trusts the CA's certificate and never mounts its key; driftwatch's
/// config is one it accepts, in forward mode, intercepting the API's host with the Secret's CA.
#[test]
fn the_forward_variant_mounts_the_ca_certificate_alone_into_the_mcp_server() {
    let deployment: yaml_serde::Value =
        yaml_serde::from_str(&repo_file("config/k8s/forward/deployment.yaml")).unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    let mcp = &pod["containers"][0];
    let env: Vec<(&str, &str)> = mcp["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
        .collect();
    assert!(
        env.contains(&("HTTPS_PROXY", "http://127.0.0.1:8080")),
        "{env:?}"
    );
    assert!(
        env.contains(&("NODE_EXTRA_CA_CERTS", "/etc/driftwatch-ca/ca.pem")),
        "{env:?}"
    );
    let mounted = mcp["volumeMounts"][0]["name"].as_str().unwrap();
    let volume = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"].as_str() == Some(mounted))
        .unwrap();
    let items: Vec<&str> = volume["secret"]["items"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|i| i["key"].as_str().unwrap())
        .collect();
    assert_eq!(items, ["ca.pem"], "the MCP server never gets the CA's key");
    let dw = &pod["initContainers"][0];
    assert_eq!(dw["restartPolicy"].as_str(), Some("Always"));
    assert_eq!(dw["env"][0]["value"].as_str(), Some("127.0.0.1:8080"));
    let config: yaml_serde::Value =
        yaml_serde::from_str(&repo_file("config/k8s/forward/configmap.yaml")).unwrap();
    let toml = config["data"]["driftwatch.toml"].as_str().unwrap();
    let path = std::env::temp_dir().join(format!("driftwatch-k8s-fwd-{}.toml", std::process::id()));
    std::fs::write(&path, toml).unwrap();
    let layers = driftwatch::config::Layers {
        file: Some(&path),
        ..Default::default()
    };
    let settings = driftwatch::settings::Settings::load(layers).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(settings.proxy.kind, driftwatch::config::ProxyKind::Forward);
    assert_eq!(
        settings.forward.ca_dir,
        std::path::PathBuf::from("/etc/driftwatch-ca")
    );
    let hosts: Vec<String> = settings.apis[0]
        .hosts
        .iter()
        .map(|h| h.to_string())
        .collect();
    assert_eq!(hosts, ["api.github.com:443"]);
    assert_eq!(
        settings.upstream().unwrap().authority.as_str(),
        "api.github.com"
    );
}
