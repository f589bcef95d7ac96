//! The load generator of scripts/bench-forward: the same client against the reverse proxy (plain
//! or TLS) and through the forward proxy (`CONNECT`, then TLS to the intercepted host), so the
//! ratios compare the proxies, not the clients. wrk and oha cannot go through a `CONNECT`
//! proxy, hence this. HTTP/1.1 only (ALPN offers nothing else), as wrk sends.
//!
//! Usage:
//!   tls_load keepalive TARGET SECONDS CONNECTIONS PATH   requests per second, kept-alive
//!   tls_load connect TARGET COUNT PATH                    a new connection per request, in turn:
//!                                                         mean and p50 per connection (µs)
//! TARGET: plain:ADDR | tls:ADDR:NAME:CA_FILE | forward:PROXY:HOST:CA_FILE, where `{n}` in HOST
//! is the connection's number (a host not met before: its leaf is minted for it).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{SendRequest, handshake};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

#[derive(Clone)]
enum Target {
    Plain(SocketAddr),
    Tls { addr: SocketAddr, name: String },
    Forward { proxy: SocketAddr, host: String },
}

#[derive(Clone)]
struct Client {
    target: Target,
    tls: Option<TlsConnector>,
}

type Sender = SendRequest<Empty<Bytes>>;

impl Client {
    fn parse(text: &str) -> Client {
        let parts: Vec<&str> = text.split(':').collect();
        let addr = |host: &str, port: &str| format!("{host}:{port}").parse().expect("an address");
        match parts.as_slice() {
            ["plain", host, port] => Client {
                target: Target::Plain(addr(host, port)),
                tls: None,
            },
            ["tls", host, port, name, ca] => Client {
                target: Target::Tls {
                    addr: addr(host, port),
                    name: name.to_string(),
                },
                tls: Some(connector(ca)),
            },
            ["forward", host, port, name, ca] => Client {
                target: Target::Forward {
                    proxy: addr(host, port),
                    host: name.to_string(),
                },
                tls: Some(connector(ca)),
            },
            _ => panic!("TARGET: plain:ADDR | tls:ADDR:NAME:CA | forward:PROXY:HOST:CA"),
        }
    }

    /// The host the requests name, for connection `n`.
    fn host(&self, n: usize) -> String {
        match &self.target {
            Target::Plain(_) => "localhost".into(),
            Target::Tls { name, .. } => name.clone(),
            Target::Forward { host, .. } => host.replace("{n}", &n.to_string()),
        }
    }

    async fn connect(&self, n: usize) -> Sender {
        let host = self.host(n);
        let stream = match &self.target {
            Target::Plain(addr) => return http1(TcpStream::connect(addr).await.unwrap()).await,
            Target::Tls { addr, .. } => TcpStream::connect(addr).await.unwrap(),
            Target::Forward { proxy, .. } => {
                let mut stream = TcpStream::connect(proxy).await.unwrap();
                let connect = format!("CONNECT {host}:443 HTTP/1.1\r\nhost: {host}:443\r\n\r\n");
                stream.write_all(connect.as_bytes()).await.unwrap();
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "proxy closed");
                    head.push(byte[0]);
                }
                assert!(head.starts_with(b"HTTP/1.1 200"), "CONNECT refused");
                stream
            }
        };
        stream.set_nodelay(true).unwrap();
        let name = ServerName::try_from(host).unwrap();
        let tls = self.tls.as_ref().unwrap();
        http1(tls.connect(name, stream).await.unwrap()).await
    }

    async fn get(&self, sender: &mut Sender, n: usize, path: &str) {
        sender.ready().await.unwrap();
        let request = http::Request::get(path)
            .header("host", self.host(n))
            .body(Empty::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        response.into_body().collect().await.unwrap();
    }
}

async fn http1<S>(stream: S) -> Sender
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    sender
}

fn connector(ca: &str) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in driftwatch::proxy::read_certs(std::path::Path::new(ca)).unwrap() {
        roots.add(cert).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Every handshake a full one: a resumed session would make one host's connections cheaper
    // than many hosts' for the client's sake, not the proxy's.
    config.resumption = rustls::client::Resumption::disabled();
    TlsConnector::from(Arc::new(config))
}

async fn keepalive(client: Client, seconds: u64, connections: usize, path: String) {
    let done = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for n in 0..connections {
        let (client, done, path) = (client.clone(), done.clone(), path.clone());
        tasks.push(tokio::spawn(async move {
            let mut sender = client.connect(n).await;
            while Instant::now() < end {
                client.get(&mut sender, n, &path).await;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rate = done.load(Ordering::Relaxed) as f64 / seconds as f64;
    println!("{rate:.0} req/s");
}

async fn connect(client: Client, count: usize, path: String) {
    let mut took = Vec::with_capacity(count);
    for n in 0..count {
        let started = Instant::now();
        let mut sender = client.connect(n).await;
        client.get(&mut sender, n, &path).await;
        took.push(started.elapsed().as_micros() as u64);
    }
    let mean = took.iter().sum::<u64>() / count as u64;
    took.sort_unstable();
    println!("mean {mean} us, p50 {} us per connection", took[count / 2]);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = Client::parse(&args[1]);
    match args[0].as_str() {
        "keepalive" => runtime.block_on(keepalive(
            client,
            args[2].parse().unwrap(),
            args[3].parse().unwrap(),
            args[4].clone(),
        )),
        "connect" => runtime.block_on(connect(client, args[2].parse().unwrap(), args[3].clone())),
        _ => panic!("keepalive or connect"),
    }
}
