//! Two APIs in one sidecar (`[[api]]` tables): each request finds its API (by prefix or `Host`
//! behind a reverse proxy, by the host asked for through a forward proxy), goes to that API's
//! upstream, is audited against that API's spec, and its findings, metrics and events carry
//! that API's name; reloading one API under load loses and misroutes no request of either.

use std::time::Duration;

use bytes::Bytes;
use driftwatch::config::{ApiConfig, Config};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::forward_proxy::api as tls_api;
use super::sidecar::{admin_get, raw, sample, scrape, start};
use super::upstream::{self, Upstream, ok};
use super::util::example;

fn api(
    name: &str,
    spec: &str,
    upstream: &Upstream,
    edit: impl FnOnce(&mut ApiConfig),
) -> ApiConfig {
    let mut api = ApiConfig {
        name: name.into(),
        spec: example(spec).display().to_string(),
        upstream: Some(format!("http://{}", upstream.addr)),
        ..ApiConfig::default()
    };
    edit(&mut api);
    api
}

fn two(apis: Vec<ApiConfig>, edit: impl FnOnce(&mut Config)) -> Config {
    let mut c = Config::default();
    c.events.output = "none".into();
    c.api = apis;
    edit(&mut c);
    c
}

/// Two APIs, each before an upstream of its own (both answer `{"ok":true}`): channels, selected
/// by the prefix `/channels/`, and billing, selected as `billing` says.
async fn channels_and_billing(
    billing: impl FnOnce(&mut ApiConfig),
) -> (Config, Upstream, Upstream) {
    let (channels_up, billing_up) = (
        upstream::start(ok(), Duration::ZERO, None).await,
        upstream::start(ok(), Duration::ZERO, None).await,
    );
    let config = two(
        vec![
            api("channels", "channels.openapi.yaml", &channels_up, |a| {
                a.prefix = Some("/channels/".into())
            }),
            api("billing", "billing.openapi.yaml", &billing_up, billing),
        ],
        |_| {},
    );
    (config, channels_up, billing_up)
}

/// The events in `/findings`, as (api, operation, kind, field).
async fn events(admin: std::net::SocketAddr) -> Vec<(String, String, String, String)> {
    let body = admin_get(admin, "/findings").await.json();
    let mut out = Vec::new();
    for e in body["events"].as_array().unwrap() {
        for f in e["findings"].as_array().unwrap() {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            out.push((
                text(&e["api"]),
                text(&e["operation"]),
                text(&f["kind"]),
                text(&f["field"]),
            ));
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_apis_behind_one_reverse_proxy_each_get_their_upstream_spec_metrics_and_events() {
    let (config, channels_up, billing_up) =
        channels_and_billing(|a| a.hosts = vec!["billing.test".into()]).await;
    let dw = start(config).await;
    let sent = [
        ("/channels/api/v1/playouts?pageSize=abc", "x"),
        ("/v2/invoices?customer_id=cus_1", "billing.test:8080"),
        ("/v2/invoices", "elsewhere.test"),
    ];
    let mut statuses = Vec::new();
    for (target, host) in sent {
        let request = format!("GET {target} HTTP/1.1\r\nhost: {host}\r\n\r\n");
        statuses.push(raw(dw.addr, request.as_bytes()).await.status);
    }
    assert_eq!(statuses, [200, 200, 404], "the third names no API");
    let (got_c, got_b) = (channels_up.recorded(), billing_up.recorded());
    assert_eq!(got_c.len(), 1);
    assert_eq!(
        got_c[0].target, "/api/v1/playouts?pageSize=abc",
        "the prefix taken off"
    );
    assert_eq!(got_b.len(), 1);
    assert_eq!(got_b[0].target, "/v2/invoices?customer_id=cus_1");

    // Response findings come from the response work, after the client has its answer: wait
    // for both requests' and both responses' findings.
    let found = super::util::eventually("both APIs' events", || async {
        let e = events(dw.admin).await;
        (e.iter().filter(|f| f.2.contains("response")).count() >= 2 && e.len() >= 5).then_some(e)
    })
    .await;
    let found: Vec<String> = found
        .iter()
        .map(|(a, o, k, f)| format!("{a} {o} {k} {f}"))
        .collect();
    assert_eq!(
        found,
        [
            // The renamed parameter: sent as customer_id, required as customerId.
            "billing listInvoices missing_required_param customerId",
            "billing listInvoices undeclared_response_media_type content-type",
            "billing listInvoices unknown_query_param customer_id",
            "channels listPlayouts param_type_mismatch pageSize",
            // The mock answers `{"ok":true}` to everything.
            "channels listPlayouts undeclared_response_field /ok",
        ]
    );
    let series = [
        "driftwatch_requests_total{operation=\"listPlayouts\",outcome=\"forwarded\",code=\"200\",api=\"channels\"}",
        "driftwatch_requests_total{operation=\"listInvoices\",outcome=\"forwarded\",code=\"200\",api=\"billing\"}",
        "driftwatch_unknown_query_params_total{operation=\"listInvoices\",param=\"customer_id\",api=\"billing\"}",
        "driftwatch_client_errors_total{reason=\"no_api\"}",
    ];
    let m = super::util::eventually("every request recorded", || async {
        let m = scrape(dw.admin).await;
        series.iter().all(|s| sample(&m, s) >= 1.0).then_some(m)
    })
    .await;
    for s in series {
        assert_eq!(sample(&m, s), 1.0, "{s}\n{m}");
    }
    assert!(
        m.contains("driftwatch_spec_operations{api=\"channels\"} 10"),
        "{m}"
    );
    assert!(m.contains("driftwatch_spec_info{revision="), "{m}");
    assert_eq!(
        m.matches("driftwatch_spec_info{").count(),
        2,
        "one revision per API"
    );
    let spec = admin_get(dw.admin, "/spec").await.json();
    let names: Vec<&str> = spec["apis"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["api"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["channels", "billing"]);
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_apis_behind_one_forward_proxy_are_found_by_the_host_asked_for() {
    let tls = tls_api("two").await;
    let billing_up = upstream::start(ok(), Duration::ZERO, None).await;
    let mut config = super::forward_proxy::forward_config(&tls, |_| {});
    config
        .api
        .push(api("billing", "billing.openapi.yaml", &billing_up, |a| {
            a.hosts = vec!["billing.test:443".into()]
        }));
    let dw = start(config).await;
    let proxy = format!("http://{}", dw.addr);
    let ca = tls.ca_dir.join("ca.pem").display().to_string();
    for url in [
        "https://api.test/api/v1/playouts?pageSize=abc",
        "https://billing.test/v2/invoices?customer_id=cus_1",
    ] {
        assert_eq!(status_through(&proxy, &ca, url), "200", "{url}");
    }
    assert_eq!(tls.up.recorded()[0].target, "/api/v1/playouts?pageSize=abc");
    assert_eq!(
        billing_up.recorded()[0].target,
        "/v2/invoices?customer_id=cus_1"
    );
    let m = scrape(dw.admin).await;
    for s in [
        "driftwatch_unknown_query_params_total{operation=\"listInvoices\",param=\"customer_id\",api=\"billing\"}",
        "driftwatch_requests_total{operation=\"listPlayouts\",outcome=\"forwarded\",code=\"200\",api=\"channels\"}",
    ] {
        assert_eq!(sample(&m, s), 1.0, "{s}\n{m}");
    }
    dw.stop().await;
}

/// Load on both APIs while one of them is reloaded twenty times (two revisions of its spec
/// alternating): every request of both is answered 200, reaches its own API's upstream, and
/// routes to an operation of its own spec (a request audited against the other API's spec, or
/// lost between revisions, would show as `_unknown`, a non-200 or a count that does not add up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloading_one_api_under_load_loses_and_misroutes_no_request_of_either() {
    let (channels_up, billing_up) = (
        upstream::start(ok(), Duration::ZERO, None).await,
        upstream::start(ok(), Duration::ZERO, None).await,
    );
    let dir = std::env::temp_dir().join(format!("driftwatch-many-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let original = std::fs::read_to_string(example("channels.openapi.yaml")).unwrap();
    let revised = original.replacen("info:", "info:\n  x-revision: two", 1);
    let spec = dir.join("channels.yaml");
    std::fs::write(&spec, &original).unwrap();
    let dw = start(two(
        vec![
            api("channels", "channels.openapi.yaml", &channels_up, |a| {
                a.prefix = Some("/channels".into());
                a.spec = spec.display().to_string();
            }),
            api("billing", "billing.openapi.yaml", &billing_up, |a| {
                a.prefix = Some("/billing".into())
            }),
        ],
        |c| c.spec.watch_interval_ms = 0,
    ))
    .await;
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut load = Vec::new();
    for (i, target) in [
        "/channels/api/v1/channels/7",
        "/billing/v2/invoices?limit=5",
    ]
    .into_iter()
    .cycle()
    .take(8)
    .enumerate()
    {
        let (client, url) = (client.clone(), format!("http://{}{target}", dw.addr));
        load.push(tokio::spawn(async move {
            let mut answered = Vec::new();
            while tokio::time::Instant::now() < deadline {
                let request = http::Request::get(&url).body(Full::default()).unwrap();
                let response = client.request(request).await.unwrap();
                answered.push(response.status().as_u16());
                response.into_body().collect().await.unwrap();
            }
            (i % 2, answered)
        }));
    }
    let mut reloads = 0;
    for n in 0..20 {
        std::fs::write(&spec, if n % 2 == 0 { &revised } else { &original }).unwrap();
        let reloaded = admin_post(dw.admin, "/spec/reload?api=channels").await;
        assert!(reloaded.contains("\"result\":\"success\""), "{reloaded}");
        assert!(reloaded.contains("\"api\":\"channels\""), "{reloaded}");
        reloads += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut sent = [0usize; 2];
    for task in load {
        let (which, answered) = task.await.unwrap();
        assert!(answered.iter().all(|s| *s == 200), "{answered:?}");
        sent[which] += answered.len();
    }
    println!("requests answered while channels reloaded {reloads} times: {sent:?}");
    assert!(sent[0] > 100 && sent[1] > 100, "{sent:?}");
    assert!(
        channels_up
            .recorded()
            .iter()
            .all(|r| r.target == "/api/v1/channels/7")
    );
    assert!(
        billing_up
            .recorded()
            .iter()
            .all(|r| r.target == "/v2/invoices?limit=5")
    );
    assert_eq!(
        (channels_up.recorded().len(), billing_up.recorded().len()),
        (sent[0], sent[1])
    );
    let m = scrape(dw.admin).await;
    let requests = |op: &str, api: &str| {
        let s = format!(
            "driftwatch_requests_total{{operation=\"{op}\",outcome=\"forwarded\",code=\"200\",api=\"{api}\"}}"
        );
        sample(&m, &s) as usize
    };
    assert_eq!(requests("getChannel", "channels"), sent[0], "{m}");
    assert_eq!(requests("listInvoices", "billing"), sent[1], "{m}");
    assert!(
        !m.contains("operation=\"_unknown\""),
        "no request routed nowhere: {m}"
    );
    let reloaded = |api: &str| {
        sample(
            &m,
            &format!("driftwatch_spec_reloads_total{{result=\"success\",api=\"{api}\"}}"),
        )
    };
    assert_eq!(
        (reloaded("channels"), reloaded("billing")),
        (1.0 + reloads as f64, 1.0)
    );
    dw.stop().await;
}

/// The status curl gets for `url` through the forward proxy at `proxy`, trusting `ca`.
fn status_through(proxy: &str, ca: &str, url: &str) -> String {
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-x",
            proxy,
            "--cacert",
            ca,
            url,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).to_string()
}

async fn admin_post(admin: std::net::SocketAddr, path: &str) -> String {
    let request = format!("POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n");
    String::from_utf8_lossy(&raw(admin, request.as_bytes()).await.body).to_string()
}

/// One API on two hosts, with no `upstream` of its own: a request goes to the host the client
/// sent it to (not to the first host), and both are audited against the API's one spec.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_api_on_two_hosts_sends_each_request_to_the_host_it_was_sent_to() {
    let tls = tls_api("two-hosts").await;
    let second = upstream::start(ok(), Duration::ZERO, Some(tls.pki.acceptor.clone())).await;
    let hosts = [
        format!("localhost:{}", tls.up.addr.port()),
        format!("127.0.0.1:{}", second.addr.port()),
    ];
    let dw = start(super::forward_proxy::forward_config(&tls, |c| {
        c.api[0].hosts = hosts.to_vec();
        c.api[0].upstream = None;
    }))
    .await;
    let proxy = format!("http://{}", dw.addr);
    let ca = tls.ca_dir.join("ca.pem").display().to_string();
    for host in &hosts {
        let url = format!("https://{host}/api/v1/playouts?pageSize=abc");
        assert_eq!(status_through(&proxy, &ca, &url), "200", "{url}");
    }
    let (first, other) = (tls.up.recorded(), second.recorded());
    assert_eq!(
        (first.len(), other.len()),
        (1, 1),
        "each host got its own request"
    );
    assert_eq!(first[0].header("host"), Some(hosts[0].as_str()));
    assert_eq!(other[0].header("host"), Some(hosts[1].as_str()));
    let m = scrape(dw.admin).await;
    let series = "driftwatch_findings_total{kind=\"param_type_mismatch\",operation=\"listPlayouts\",severity=\"error\",blame=\"client\",api=\"channels\"}";
    assert_eq!(sample(&m, series), 2.0, "{m}");
    dw.stop().await;
}

/// `serve --check` with two `[[api]]` tables loads both specs and prints each API: what
/// selects it, where it goes, its mode and its spec.
#[test]
fn serve_check_prints_every_api() {
    let dir = std::env::temp_dir().join(format!("driftwatch-check-apis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("two.toml");
    let spec = |name: &str| example(name).display().to_string();
    std::fs::write(
        &config,
        format!(
            "[[api]]\nname = \"channels\"\nspec = {:?}\nprefix = \"/channels\"\nupstream = \"http://127.0.0.1:5000\"\n\
             [[api]]\nname = \"billing\"\nspec = {:?}\nhosts = [\"billing.test\"]\nupstream = \"https://billing.test\"\nmode = \"enforce\"\n",
            spec("channels.openapi.yaml"),
            spec("billing.openapi.yaml")
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_driftwatch"))
        .args(["serve", "--check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "  api       channels (prefix /channels)",
        "  upstream  http://127.0.0.1:5000",
        "  api       billing (hosts billing.test:443)",
        "  upstream  https://billing.test",
        "  mode      enforce, audit on",
        "channels.openapi.yaml: OpenAPI 3.1.0",
        "billing.openapi.yaml: OpenAPI",
    ] {
        assert!(text.contains(line), "`{line}` in:\n{text}");
    }
}

/// Issue 49, defect 5: hosts `svc.local:80` and `svc.local:8080`, or prefixes `/api` and
/// `/api/billing`, overlap; each request went to the first API's upstream (with its
/// credentials). The `Host`'s port now tells two APIs of one name apart, and the longest
/// prefix wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_hosts_and_prefixes_each_reach_their_own_api() {
    let ups = [
        upstream::start(ok(), Duration::ZERO, None).await,
        upstream::start(ok(), Duration::ZERO, None).await,
        upstream::start(ok(), Duration::ZERO, None).await,
        upstream::start(ok(), Duration::ZERO, None).await,
    ];
    let spec = "channels.openapi.yaml";
    let dw = start(two(
        vec![
            api("a", spec, &ups[0], |a| {
                a.hosts = vec!["svc.local:80".into()]
            }),
            api("b", spec, &ups[1], |a| {
                a.hosts = vec!["svc.local:8080".into()]
            }),
            api("c", spec, &ups[2], |a| a.prefix = Some("/api".into())),
            api("d", spec, &ups[3], |a| {
                a.prefix = Some("/api/billing".into())
            }),
        ],
        |_| {},
    ))
    .await;
    let sent = [
        ("/x/a", "svc.local"),
        ("/x/b", "svc.local:8080"),
        ("/api/x/c", "other"),
        ("/api/billing/x/d", "other"),
    ];
    for (target, host) in sent {
        let request = format!("GET {target} HTTP/1.1\r\nhost: {host}\r\n\r\n");
        assert_eq!(
            raw(dw.addr, request.as_bytes()).await.status,
            200,
            "{target}"
        );
    }
    let got: Vec<Vec<String>> = ups
        .iter()
        .map(|up| up.recorded().into_iter().map(|r| r.target).collect())
        .collect();
    assert_eq!(got, [["/x/a"], ["/x/b"], ["/x/c"], ["/x/d"]]);
    dw.stop().await;
}

/// Issue 51: under `wrap`, each API's traffic teaches its own map and each API's tools are
/// checked against its own spec. Before, only the first API's operations were learned, and the
/// catalog was checked against the first API's spec alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrap_learns_and_live_checks_every_api() {
    use driftwatch::admin::ToolsView;
    use driftwatch::proxy::ToolSource;
    use serde_json::{Value, json};
    let (config, _channels_up, _billing_up) =
        channels_and_billing(|a| a.hosts = vec!["billing.test".into()]).await;
    let (dw, sidecar) = super::sidecar::start_with(config, ToolSource::Calls).await;
    let calls = sidecar.calls().unwrap().clone();
    let live = std::sync::Arc::new(driftwatch::wrap::live::Live::new(
        sidecar.clone(),
        calls.clone(),
        None,
    ));
    tokio::spawn(live.clone().check_on_change());
    // One call in flight at a time: each request is its call's.
    let sent = [
        (
            "list_playouts",
            json!({"pageSize": 5}),
            "/channels/api/v1/playouts?pageSize=5",
            "x",
        ),
        (
            "list_invoices",
            json!({"customer_id": "cus_1"}),
            "/v2/invoices?customerId=cus_1",
            "billing.test",
        ),
    ];
    for (i, (tool, arguments, target, host)) in sent.iter().enumerate() {
        let id = json!(i);
        calls.begin(1, &id, tool, Some(arguments));
        let request = format!("GET {target} HTTP/1.1\r\nhost: {host}\r\n\r\n");
        assert_eq!(raw(dw.addr, request.as_bytes()).await.status, 200);
        calls.end(1, &id);
    }
    let string = json!({"type": "string"});
    let tool = |name: &str, properties: Value| json!({"name": name, "inputSchema": {"type": "object", "properties": properties}});
    live.listed(json!({"tools": [
        tool("list_playouts", json!({"pageSize": {"type": "integer"}})),
        // Named as the agent calls it: the server sends it as `customerId`.
        tool("list_invoices", json!({"customer_id": string})),
    ]}));
    let report: Value = super::util::eventually("the live check of both APIs", || async {
        let report: Value = serde_json::from_str(&live.check().ok()?).ok()?;
        let billing = report["apis"]["billing"]["tools"].as_array()?;
        (!billing.is_empty()).then_some(report)
    })
    .await;
    let placed = |api: &str| -> Vec<(String, String)> {
        let tools = report["apis"][api]["tools"].as_array().unwrap();
        let text = |v: &Value| v.as_str().unwrap().to_string();
        tools
            .iter()
            .map(|t| (text(&t["tool"]), text(&t["operation"])))
            .collect()
    };
    assert_eq!(
        placed("channels"),
        [("list_playouts".into(), "listPlayouts".into())],
        "{report:#}"
    );
    assert_eq!(
        placed("billing"),
        [("list_invoices".into(), "listInvoices".into())],
        "{report:#}"
    );
    // The rename the billing call showed is learned, so neither name is a defect (the
    // optional parameters the tool lacks are).
    let billing = report["apis"]["billing"]["defects"].as_array().unwrap();
    let fields: Vec<&str> = billing.iter().filter_map(|d| d["field"].as_str()).collect();
    assert!(fields.contains(&"status"), "{report:#}");
    assert!(
        !fields.iter().any(|f| f.starts_with("customer")),
        "{report:#}"
    );
    let billing_map = live.map(Some("billing")).unwrap();
    assert!(billing_map.contains("list_invoices"), "{billing_map}");
    assert!(
        billing_map.contains(r#"rename = { "customer_id" = "customerId" }"#),
        "{billing_map}"
    );
    let channels_map = live.map(None).unwrap();
    assert!(
        channels_map.contains("list_playouts") && !channels_map.contains("list_invoices"),
        "{channels_map}"
    );
    assert!(live.map(Some("nowhere")).is_err());
    dw.stop().await;
}

/// Issue 51: `/spec` showed one `mode`, the first API's, though each `[[api]]` may have its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_shows_each_apis_own_mode() {
    let (config, _channels_up, _billing_up) = channels_and_billing(|a| {
        a.prefix = Some("/billing/".into());
        a.mode = Some(driftwatch::policy::Mode::Enforce);
    })
    .await;
    let dw = start(config).await;
    let spec = admin_get(dw.admin, "/spec").await.json();
    let modes: Vec<(&str, &str)> = (spec["apis"].as_array().unwrap().iter())
        .map(|a| (a["api"].as_str().unwrap(), a["mode"].as_str().unwrap()))
        .collect();
    assert_eq!(modes, [("channels", "observe"), ("billing", "enforce")]);
    assert_eq!(
        spec["mode"], "observe",
        "the first API's, at the top as before"
    );
    dw.stop().await;
}
