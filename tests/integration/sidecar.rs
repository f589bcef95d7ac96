//! Running driftwatch in-process on loopback port 0 with its own registry, and talking to it
//! over real sockets: raw HTTP/1.1 (to control every byte) and the admin endpoints.

use std::net::SocketAddr;
use std::sync::Arc;

use driftwatch::config::Config;
use driftwatch::proxy::{Sidecar, ToolSource};
use driftwatch::settings::Settings;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::util::example;

pub struct Running {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), driftwatch::proxy::StartError>>>,
}

impl Running {
    /// Trigger shutdown and wait for the drain to finish.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// A config for the Channels example spec in front of `upstream`, edited by the test.
pub fn config(upstream: &str, edit: impl FnOnce(&mut Config)) -> Config {
    let mut config = Config::default();
    config.spec.path = Some(example("channels.openapi.yaml"));
    config.proxy.upstream = Some(upstream.to_string());
    config.events.output = "none".into();
    edit(&mut config);
    config
}

/// Start a sidecar in-process and return once its `/readyz` answers 200: the proxy listener
/// sets ready after its serving threads start, and under load a test that asked at once
/// found 503 (seen twice in CI on `operations::admin_endpoints`).
pub async fn start(config: Config) -> Running {
    start_with(config, ToolSource::Header).await.0
}

/// [`start`], the sidecar following MCP calls as `wrap`'s does (`ToolSource::Calls`); the
/// sidecar itself, for what runs beside it.
pub async fn start_with(config: Config, tools: ToolSource) -> (Running, Arc<Sidecar>) {
    let settings = Settings::from_config(&config).unwrap_or_else(|e| panic!("{e}"));
    let sidecar = driftwatch::start::build(settings, None, tools)
        .await
        .unwrap();
    let sidecar = Arc::new(sidecar);
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (addr, admin_addr) = (proxy.local_addr().unwrap(), admin.local_addr().unwrap());
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(driftwatch::start::serve(
        proxy,
        admin,
        sidecar.clone(),
        async move {
            let _ = rx.await;
        },
    ));
    let running = Running {
        addr,
        admin: admin_addr,
        shutdown: Some(tx),
        task: Some(task),
    };
    super::util::eventually("the sidecar to become ready", || async {
        (admin_get(admin_addr, "/readyz").await.status == 200).then_some(())
    })
    .await;
    (running, sidecar)
}

#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// Send `request` bytes as they are on a new connection and read one response.
pub async fn raw(addr: SocketAddr, request: &[u8]) -> RawResponse {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        if let Ok(httparse::Status::Complete(n)) = resp.parse(&buf) {
            let headers: Vec<(String, String)> = resp
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_ascii_lowercase(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect();
            let status = resp.code.unwrap();
            let len: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let mut body = buf[n..].to_vec();
            while body.len() < len {
                let read = stream.read(&mut chunk).await.unwrap();
                assert!(read > 0, "connection closed mid-body");
                body.extend_from_slice(&chunk[..read]);
            }
            return RawResponse {
                status,
                headers,
                body,
            };
        }
        let read = stream.read(&mut chunk).await.unwrap();
        assert!(
            read > 0,
            "connection closed before a response: {}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..read]);
    }
}

/// A GET on the admin listener.
pub async fn admin_get(admin: SocketAddr, path: &str) -> RawResponse {
    raw(
        admin,
        format!("GET {path} HTTP/1.1\r\nhost: admin\r\nconnection: close\r\n\r\n").as_bytes(),
    )
    .await
}

/// The value of one sample line of a `/metrics` scrape (0 when absent).
pub fn sample(scrape: &str, series: &str) -> f64 {
    scrape
        .lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0.0)
}

pub async fn scrape(admin: SocketAddr) -> String {
    String::from_utf8(admin_get(admin, "/metrics").await.body).unwrap()
}
