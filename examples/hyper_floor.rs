//! The floor of a hyper forwarder, for `scripts/bench-proxy`: the same hyper server builder
//! (HTTP/1.1 and h2c on one port), the same pooled client and the same threading as
//! driftwatch's pass-through (one single-threaded runtime per core, connections handed out in
//! turn), and nothing else: no ledger, no metrics, no header work, no timers. What separates
//! driftwatch's pass-through from this is driftwatch's own plumbing; what separates this from
//! nginx's proxy is hyper and tokio.
//!
//! `cargo run --release --example hyper_floor -- LISTEN UPSTREAM [THREADS]` (e.g.
//! `127.0.0.1:18086 127.0.0.1:18080`; threads: one per core unless given).

use std::convert::Infallible;
use std::sync::Arc;

use http::uri::{Authority, Scheme, Uri};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

type Pool = Client<HttpConnector, Incoming>;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(upstream)) = (args.next(), args.next()) else {
        eprintln!("usage: hyper_floor LISTEN UPSTREAM [THREADS]");
        std::process::exit(2);
    };
    let upstream: Authority = upstream.parse().expect("UPSTREAM is host:port");
    let threads = match args.next() {
        Some(n) => n.parse().expect("THREADS is a number"),
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let mut lanes = Vec::new();
    for _ in 1..threads {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<std::net::TcpStream>();
        let upstream = upstream.clone();
        std::thread::spawn(move || {
            let rt = runtime();
            rt.block_on(async move {
                let pool = Arc::new(pool());
                while let Some(stream) = rx.recv().await {
                    let stream = tokio::net::TcpStream::from_std(stream).expect("a socket");
                    tokio::spawn(serve(stream, pool.clone(), upstream.clone()));
                }
            });
        });
        lanes.push(tx);
    }
    runtime().block_on(async move {
        let listener = TcpListener::bind(&listen).await.expect("LISTEN is free");
        let pool = Arc::new(pool());
        for turn in (0..=lanes.len()).cycle() {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            match turn {
                0 => drop(tokio::spawn(serve(stream, pool.clone(), upstream.clone()))),
                n => {
                    let _ = lanes[n - 1].send(stream.into_std().expect("a socket"));
                }
            }
        }
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn pool() -> Pool {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(http)
}

async fn serve(stream: tokio::net::TcpStream, pool: Arc<Pool>, upstream: Authority) {
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |req: Request<Incoming>| {
        let (pool, upstream) = (pool.clone(), upstream.clone());
        async move {
            let (mut parts, body) = req.into_parts();
            let mut uri = parts.uri.into_parts();
            uri.scheme = Some(Scheme::HTTP);
            uri.authority = Some(upstream);
            parts.uri = Uri::from_parts(uri).expect("an absolute URI");
            let response = match pool.request(Request::from_parts(parts, body)).await {
                Ok(response) => response.map(http_body_util::Either::Left),
                Err(_) => Response::builder()
                    .status(502)
                    .body(http_body_util::Either::Right(http_body_util::Empty::new()))
                    .expect("a response"),
            };
            Ok::<_, Infallible>(response)
        }
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .await;
}
