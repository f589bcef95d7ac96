//! Time and connection bounds on both sides (issue 14, defect 3): a client that trickles its
//! head, says nothing, idles, or stalls its body, and an upstream that stalls its body, each
//! costs the sidecar a bounded time; connections past `proxy.max_connections` are shed. Each
//! case was seen red first (held open for as long as the peer liked).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::sidecar::{config, raw, sample, scrape, start};
use super::upstream::{self, ok};

/// Bounds short enough for a test. The idle bound is the shorter, so that an idle HTTP/1.1
/// connection (also bound by hyper's header timer, which runs while it waits for its next
/// request) is closed by it.
fn bounded(c: &mut driftwatch::config::Config) {
    c.proxy.header_read_timeout_ms = 800;
    c.proxy.idle_timeout_ms = 300;
    c.proxy.body_stall_timeout_ms = 400;
}

/// How long until the sidecar closes `stream` (reads until end of stream), at most 5 s.
pub async fn closed_after(stream: &mut TcpStream) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return start.elapsed(),
            Ok(Ok(_)) => {}
            Err(_) => panic!("still open after 5 s"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_trickles_its_head_says_nothing_or_idles_is_closed() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), bounded)).await;

    // Slowloris: one byte of a header every 100 ms, for ever.
    let mut slow = TcpStream::connect(dw.addr).await.unwrap();
    slow.write_all(b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let trickle = async {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if slow.write_all(b"x").await.is_err() {
                return Instant::now();
            }
        }
        panic!("a trickled head was read for 10 s");
    };
    let started = Instant::now();
    let ended = trickle.await;
    assert!(ended - started < Duration::from_secs(3));
    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(
            &m,
            "driftwatch_limit_hits_total{limit=\"header_read\",listener=\"proxy\"}"
        ),
        1.0
    );

    // Connected and silent.
    let mut silent = TcpStream::connect(dw.addr).await.unwrap();
    assert!(closed_after(&mut silent).await < Duration::from_secs(3));

    // One request, then idle on a keep-alive connection.
    let mut idle = TcpStream::connect(dw.addr).await.unwrap();
    idle.write_all(b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 4096];
    assert!(idle.read(&mut buf).await.unwrap() > 0, "the answer comes");
    assert!(closed_after(&mut idle).await < Duration::from_secs(3));

    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(
            &m,
            "driftwatch_limit_hits_total{limit=\"header_read\",listener=\"proxy\"}"
        ),
        2.0,
        "the trickle and the silent one"
    );
    assert_eq!(
        sample(
            &m,
            "driftwatch_limit_hits_total{limit=\"idle\",listener=\"proxy\"}"
        ),
        1.0
    );
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_is_not_idle() {
    // The upstream takes longer than the idle bound to answer: the request still completes.
    let up = upstream::start(ok(), Duration::from_millis(1200), None).await;
    let dw = start(config(&format!("http://{}", up.addr), bounded)).await;
    let answer = raw(
        dw.addr,
        b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await;
    assert_eq!(answer.status, 200);
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stalls_its_body_gets_408() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), bounded)).await;
    let mut stream = TcpStream::connect(dw.addr).await.unwrap();
    stream
        .write_all(b"PUT /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"na")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "still waiting on the body after 5 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(up.recorded().is_empty(), "nothing went upstream");

    // Past audit.max_body the body streams on as it arrives: a stall there is the client's too.
    let mut stream = TcpStream::connect(dw.addr).await.unwrap();
    let head = "PUT /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 3000000\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&vec![b' '; 1_500_000]).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "still waiting on the streamed body after 5 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");

    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(&m, "driftwatch_limit_hits_total{limit=\"body_stall\"}"),
        2.0
    );
    assert_eq!(
        sample(&m, "driftwatch_upstream_errors_total{cause=\"other\"}"),
        0.0,
        "not the upstream's fault"
    );
    dw.stop().await;
}

/// An upstream that answers every request with a head and 5 of 100 body bytes, then stalls.
async fn stalling_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"id\"";
                let _ = stream.write_all(head.as_bytes()).await;
                tokio::time::sleep(Duration::from_secs(60)).await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_stalls_its_body_is_cut_off() {
    let up = stalling_upstream().await;
    let dw = start(config(&format!("http://{up}"), |c| {
        c.proxy.body_stall_timeout_ms = 400; // before the idle bound (2 min)
    }))
    .await;
    let mut stream = TcpStream::connect(dw.addr).await.unwrap();
    stream
        .write_all(b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(closed_after(&mut stream).await < Duration::from_secs(3));
    let m = scrape(dw.admin).await;
    assert_eq!(
        sample(&m, "driftwatch_limit_hits_total{limit=\"body_stall\"}"),
        1.0
    );
    dw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_shed_and_service_resumes() {
    let up = upstream::start(ok(), Duration::ZERO, None).await;
    let dw = start(config(&format!("http://{}", up.addr), |c| {
        c.proxy.max_connections = 8;
    }))
    .await;
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(TcpStream::connect(dw.addr).await.unwrap());
    }
    let mut shed = TcpStream::connect(dw.addr).await.unwrap();
    assert!(closed_after(&mut shed).await < Duration::from_secs(1));
    let m = scrape(dw.admin).await;
    assert!(
        sample(
            &m,
            "driftwatch_limit_hits_total{limit=\"connections\",listener=\"proxy\"}"
        ) >= 1.0
    );
    drop(held);
    let answer = super::util::eventually("service resumes", || async {
        let mut stream = TcpStream::connect(dw.addr).await.ok()?;
        stream
            .write_all(b"GET /api/v1/channels/7 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        (!answer.is_empty()).then_some(answer)
    })
    .await;
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    dw.stop().await;
}
