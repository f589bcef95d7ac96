//! A recording upstream on a real loopback socket: it reads each HTTP/1.1 request off the wire
//! (so tests see exactly the bytes driftwatch forwarded, framing included), records it, and
//! answers with whatever the test's responder says. Optionally TLS, optionally slow, optionally
//! closing a connection left idle (an API's keep-alive timeout).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as it arrived at the upstream.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The request target exactly as on the wire.
    pub target: String,
    /// Header names lowercased, values as sent, in order.
    pub headers: Vec<(String, String)>,
    /// The body after de-chunking.
    pub body: Vec<u8>,
    pub chunked: bool,
    /// The minor HTTP version (1 for HTTP/1.1).
    pub version: u8,
    /// Header names as they were on the wire (case kept), in order.
    pub names_as_sent: Vec<String>,
    /// Trailer fields after a chunked body, names lowercased.
    pub trailers: Vec<(String, String)>,
    /// The connection it came on, numbered from 0 in the order they were accepted.
    pub connection: usize,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

pub type Responder = Arc<dyn Fn(&Recorded) -> (u16, String) + Send + Sync>;

/// A responder that also picks the `content-type` of its answer.
pub type TypedResponder = Arc<dyn Fn(&Recorded) -> (u16, &'static str, String) + Send + Sync>;

pub struct Upstream {
    pub addr: std::net::SocketAddr,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicUsize>,
}

impl Upstream {
    pub fn recorded(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

/// Answer 200 `{"ok":true}` to everything.
pub fn ok() -> Responder {
    Arc::new(|_| (200, "{\"ok\":true}".into()))
}

/// Answer every request with `responder`'s status and body, as `application/json`.
pub async fn start(
    responder: Responder,
    delay: Duration,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> Upstream {
    let typed: TypedResponder = Arc::new(move |r| {
        let (status, body) = responder(r);
        (status, "application/json", body)
    });
    start_typed(typed, delay, tls).await
}

pub async fn start_typed(
    responder: TypedResponder,
    delay: Duration,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> Upstream {
    listen(responder, delay, tls, None).await
}

/// Like `start`, and a connection that brings no new request within `idle` of its last
/// answer is closed without having said so (no `Connection: close`).
pub async fn start_closing_idle(responder: Responder, delay: Duration, idle: Duration) -> Upstream {
    let typed: TypedResponder = Arc::new(move |r| {
        let (status, body) = responder(r);
        (status, "application/json", body)
    });
    listen(typed, delay, None, Some(idle)).await
}

async fn listen(
    responder: TypedResponder,
    delay: Duration,
    tls: Option<tokio_rustls::TlsAcceptor>,
    idle: Option<Duration>,
) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let accepted = Arc::new(AtomicUsize::new(0));
    let (store, count) = (requests.clone(), accepted.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let connection = count.fetch_add(1, Ordering::SeqCst);
            let (store, responder, tls) = (store.clone(), responder.clone(), tls.clone());
            let served = Served {
                store,
                responder,
                delay,
                idle,
                connection,
            };
            tokio::spawn(async move {
                match tls {
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(stream).await {
                            serve(stream, served).await;
                        }
                    }
                    None => serve(stream, served).await,
                }
            });
        }
    });
    Upstream {
        addr,
        requests,
        accepted,
    }
}

/// How one connection is answered.
struct Served {
    store: Arc<Mutex<Vec<Recorded>>>,
    responder: TypedResponder,
    delay: Duration,
    idle: Option<Duration>,
    connection: usize,
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, served: Served) {
    let Served {
        store,
        responder,
        delay,
        idle,
        connection,
    } = served;
    let mut buf = Vec::new();
    loop {
        let next = read_request(&mut stream, &mut buf);
        let next = match idle {
            Some(idle) => tokio::time::timeout(idle, next).await.ok().flatten(),
            None => next.await,
        };
        let Some(mut request) = next else {
            return; // closed by the client, or idle too long
        };
        request.connection = connection;
        store.lock().unwrap().push(request.clone());
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let (status, content_type, body) = responder(&request);
        let head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nx-upstream: yes\r\n\r\n",
            body.len()
        );
        if stream.write_all(head.as_bytes()).await.is_err()
            || stream.write_all(body.as_bytes()).await.is_err()
        {
            return;
        }
    }
}

async fn fill<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 8192];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

/// Read one request from `stream` (leftover bytes stay in `buf` for the next one).
pub async fn read_request<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
) -> Option<Recorded> {
    let (head_len, mut rec) = loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(n)) = req.parse(buf) {
            let rec = Recorded {
                method: req.method?.to_string(),
                target: req.path?.to_string(),
                headers: req
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_ascii_lowercase(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect(),
                body: Vec::new(),
                chunked: false,
                version: req.version?,
                names_as_sent: req.headers.iter().map(|h| h.name.to_string()).collect(),
                trailers: Vec::new(),
                connection: 0,
            };
            break (n, rec);
        }
        if !fill(stream, buf).await {
            return None;
        }
    };
    buf.drain(..head_len);
    rec.chunked = rec
        .header("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"));
    if rec.chunked {
        loop {
            let line_end = loop {
                if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
                    break i;
                }
                if !fill(stream, buf).await {
                    return None;
                }
            };
            let size = usize::from_str_radix(
                std::str::from_utf8(&buf[..line_end])
                    .ok()?
                    .split(';')
                    .next()?
                    .trim(),
                16,
            )
            .ok()?;
            buf.drain(..line_end + 2);
            if size == 0 {
                rec.trailers = read_trailers(stream, buf).await?;
                break;
            }
            while buf.len() < size + 2 {
                if !fill(stream, buf).await {
                    return None;
                }
            }
            rec.body.extend_from_slice(&buf[..size]);
            buf.drain(..size + 2);
        }
    } else {
        let len: usize = rec
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < len {
            if !fill(stream, buf).await {
                return None;
            }
        }
        rec.body = buf.drain(..len).collect();
    }
    Some(rec)
}

/// The trailer section after the last chunk, up to its empty line.
async fn read_trailers<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
) -> Option<Vec<(String, String)>> {
    let mut trailers = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
                break i;
            }
            if !fill(stream, buf).await {
                return None;
            }
        };
        let line = String::from_utf8_lossy(&buf[..line_end]).into_owned();
        buf.drain(..line_end + 2);
        if line.is_empty() {
            return Some(trailers);
        }
        let (name, value) = line.split_once(':')?;
        trailers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
}
