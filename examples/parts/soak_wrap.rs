//! The soak's `--wrap-forward` part: `driftwatch wrap` in forward mode, its MCP front in
//! front of an MCP server of the soak's own (streamable HTTP, in this process), which answers
//! each `tools/call` by calling the API the way a server that hard-codes `https://` does:
//! `CONNECT api.test:443` to wrap's forward proxy, TLS trusting driftwatch's CA, then the
//! request. So every round is a tool call, a CONNECT, an intercepted TLS handshake, an
//! audited request attributed to its call, and the answer back; every 25th round also asks
//! for a tunnel the policy denies (loopback), which must be a 403.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Wrapped {
    pub child: std::process::Child,
    /// Where MCP clients post (`http://.../mcp`).
    pub front: String,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
}

/// Start the MCP server and wrap around it; `up` is the API the forward proxy sends
/// `api.test`'s requests to.
pub async fn start(
    binary: &str,
    dir: &Path,
    spec: &Path,
    up: SocketAddr,
    port: impl Fn() -> u16,
) -> Wrapped {
    let ca_dir = dir.join("ca");
    let made = std::process::Command::new(binary)
        .args(["ca", "--ca-dir"])
        .arg(&ca_dir)
        .output()
        .expect("driftwatch ca");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let config = dir.join("wrap-forward.toml");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nkind = \"forward\"\n[forward]\nca_dir = {:?}\n[events]\noutput = \"none\"\n[spec]\nwatch_interval_ms = 500\n[[api]]\nname = \"channels\"\nspec = {:?}\nhosts = [\"api.test:443\"]\nupstream = \"http://{up}\"\n",
            ca_dir.display().to_string(),
            spec.display().to_string()
        ),
    )
    .unwrap();
    let (proxy, admin, front, server) = (
        SocketAddr::from(([127, 0, 0, 1], port())),
        SocketAddr::from(([127, 0, 0, 1], port())),
        SocketAddr::from(([127, 0, 0, 1], port())),
        SocketAddr::from(([127, 0, 0, 1], port())),
    );
    let trust = Arc::new(client_tls(&ca_dir.join("ca.pem")));
    tokio::spawn(mcp_server(
        TcpListener::bind(server).await.unwrap(),
        proxy,
        trust,
    ));
    let child = std::process::Command::new(binary)
        .args(["wrap", "--config"])
        .arg(&config)
        .args([
            "--listen",
            &proxy.to_string(),
            "--admin-listen",
            &admin.to_string(),
        ])
        .args(["--mcp-upstream", &format!("http://{server}/mcp")])
        .args(["--mcp-listen", &front.to_string()])
        .env("RUST_LOG", "error")
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("start driftwatch wrap");
    Wrapped {
        child,
        front: format!("http://{front}/mcp"),
        proxy,
        admin,
    }
}

fn client_tls(ca: &Path) -> rustls::ClientConfig {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// The MCP server: `tools/call` calls the API through the forward proxy; the rest is `{}`.
async fn mcp_server(listener: TcpListener, proxy: SocketAddr, trust: Arc<rustls::ClientConfig>) {
    while let Ok((stream, _)) = listener.accept().await {
        let trust = trust.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let trust = trust.clone();
                async move {
                    let body = req.into_body().collect().await?.to_bytes();
                    let message: serde_json::Value =
                        serde_json::from_slice(&body).unwrap_or_default();
                    let result = match message["method"].as_str() {
                        Some("tools/call") => {
                            let request = message["params"]["arguments"]["request"]
                                .as_str()
                                .unwrap_or("");
                            let target = match message["params"]["name"].as_str() {
                                Some("listPlayouts") => "/api/v1/playouts?pageSize=10",
                                _ => "/api/v1/channels/7",
                            };
                            let text = match api_call(proxy, &trust, request, target).await {
                                Ok(status) => status,
                                Err(e) => format!("failed: {e}"),
                            };
                            serde_json::json!({"content": [{"type": "text", "text": text}]})
                        }
                        _ => serde_json::json!({}),
                    };
                    let answer = serde_json::json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
                    Ok::<_, hyper::Error>(
                        Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from(answer.to_string())))
                            .unwrap(),
                    )
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// A `CONNECT` to `target`'s host through `proxy`: its status line's code, and the stream.
async fn connect(proxy: SocketAddr, authority: &str) -> Result<(u16, TcpStream), String> {
    let mut stream = TcpStream::connect(proxy).await.map_err(|e| e.to_string())?;
    let head = format!("CONNECT {authority} HTTP/1.1\r\nhost: {authority}\r\n\r\n");
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.map_err(|e| e.to_string())? == 0 {
            return Err("closed before the CONNECT's answer".into());
        }
        got.push(byte[0]);
    }
    let code = String::from_utf8_lossy(got.get(9..12).unwrap_or_default())
        .parse()
        .unwrap_or(0);
    Ok((code, stream))
}

/// The API request a tool call makes: through a tunnel to `api.test`, TLS, HTTP/1.1.
async fn api_call(
    proxy: SocketAddr,
    trust: &Arc<rustls::ClientConfig>,
    id: &str,
    target: &str,
) -> Result<String, String> {
    let (code, stream) = connect(proxy, "api.test:443").await?;
    if code != 200 {
        return Err(format!("CONNECT answered {code}"));
    }
    let name = rustls_pki_types::ServerName::try_from("api.test").unwrap();
    let tls = tokio_rustls::TlsConnector::from(trust.clone())
        .connect(name, stream)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = Request::get(target)
        .header("host", "api.test")
        .header("x-request-id", id)
        .body(Empty::<Bytes>::new())
        .unwrap();
    let answer = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = answer.status();
    let _ = answer.into_body().collect().await;
    Ok(status.as_u16().to_string())
}

/// One round: a tool call through the front, answered as the API answered it; every 25th,
/// also a tunnel to loopback, which the policy denies. `Ok(target)` names what the API got.
pub async fn round(
    client: &Client<HttpConnector, Full<Bytes>>,
    wrapped: &Wrapped,
    n: u64,
) -> Result<&'static str, String> {
    let (tool, target) = match n % 2 {
        0 => ("getChannel", "/api/v1/channels/7"),
        _ => ("listPlayouts", "/api/v1/playouts?pageSize=10"),
    };
    let call = serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
        "params": {"name": tool, "arguments": {"id": 7, "request": format!("soak-wrap-{n}")}}});
    let request = Request::post(&wrapped.front)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(Bytes::from(call.to_string())))
        .unwrap();
    let answer = client.request(request).await.map_err(|e| e.to_string())?;
    let body = answer
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let said: serde_json::Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    let text = said["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    if text != "200" {
        return Err(format!(
            "tools/call {n}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    if n.is_multiple_of(25) {
        let admin = wrapped.admin.to_string();
        match connect(wrapped.proxy, &admin).await {
            Ok((403, _)) => {}
            other => {
                return Err(format!(
                    "a tunnel to the admin port: {:?}",
                    other.map(|o| o.0)
                ));
            }
        }
    }
    Ok(target)
}
