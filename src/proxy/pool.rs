//! The connections of one serving thread to one upstream: HTTP/1.1 keep-alive connections
//! (plain TCP or rustls, made by the same connector as the rest of the upstream client), reused
//! in turn. A request's upstream is known before it is sent (its API's, `Pools`), so one list
//! of connections is the whole pool: no key, no per-request clone of a client, no task to wait for a connection to
//! become idle again. hyper-util's pooled client does all three for every request; measured
//! against it on the same forwarder (examples/hyper_floor, wrk, GET of channel 7), this costs
//! about 1.3 us of CPU less per request (9.5 to 9.8 us against 10.8 to 11.3).
//!
//! A connection goes back to the list when its response's head has arrived; it is taken again
//! only once hyper says it is ready (its response read to the end), the most recent first, so
//! that after a burst the connections it opened fall idle and are closed after a minute
//! (one is looked at from the other end each time one is kept). A request that a reused
//! connection could not even start (the API had closed it while it sat idle) is sent again on
//! another: nothing of it went out. One on a new connection is not sent twice.
//!
//! A thread's connections to one upstream are at most its share of `proxy.max_connections`,
//! each holding a place from its handshake until it is dropped (with several upstreams, each
//! has that share: the config bounds how many there are): HTTP/2 clients multiplex many requests on
//! one connection, and 5 of them with 200 streams each opened 1,000 sockets to a slow API. At
//! the bound a request waits for one of the thread's connections to finish its response.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1::{Builder, SendRequest};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tower_service::Service;

use super::body::UpstreamBody;
use super::error::{ProxyError, StartError};
use super::stall::BodyError;
use crate::settings::{Settings, Upstream};

/// An idle connection is closed after this, as hyper-util's pool did.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Connections kept at most; one more is closed once its response is read.
const MAX_KEPT: usize = 1024;

/// The API's connections for one serving thread.
pub struct Pool {
    connector: HttpsConnector<HttpConnector>,
    /// Scheme and authority: where connections go.
    target: Uri,
    http1: Builder,
    kept: Mutex<VecDeque<Kept>>,
    /// This thread's share of `proxy.max_connections`: one per open connection.
    places: Arc<Semaphore>,
    /// Told when a connection is kept: a request waiting at the bound looks again.
    kept_one: Notify,
}

/// A connection and its place among the thread's.
struct Connection {
    sender: SendRequest<UpstreamBody>,
    /// Given back when the connection is dropped.
    _place: OwnedSemaphorePermit,
}

struct Kept {
    conn: Connection,
    since: Instant,
}

impl Kept {
    /// Idle past `IDLE_TIMEOUT` (counted from when it was kept: its response's head).
    fn stale(&self) -> bool {
        self.since.elapsed() >= IDLE_TIMEOUT
    }

    fn sender(&self) -> &SendRequest<UpstreamBody> {
        &self.conn.sender
    }
}

/// A serving thread's connections to every API's upstreams, by the API's index and then the
/// upstream's.
pub type Pools = Vec<Vec<Pool>>;

/// One pool per API and upstream, for one serving thread, sharing one connector (its TLS
/// config read once per thread, not once per upstream).
pub fn pools(settings: &Settings, apis: &[Arc<super::Api>]) -> Result<Pools, StartError> {
    let connector = super::upstream::connector(settings)?;
    let each = |api: &Arc<super::Api>| {
        let one = |upstream| Pool::new(settings, upstream, connector.clone());
        api.upstreams.iter().map(one).collect()
    };
    Ok(apis.iter().map(each).collect())
}

/// How long a request at the bound waits to be told of a kept connection before it looks
/// again (a connection becomes ready when its response is read, which nobody announces).
const LOOK_AGAIN: Duration = Duration::from_millis(5);

/// Why no response came back.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// No connection could be made: TCP, TLS or the HTTP/1.1 handshake.
    #[error("cannot connect: {0}")]
    Connect(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The connection failed while the request was sent or its response's head read.
    #[error("{0}")]
    Request(#[source] hyper::Error),
}

/// The client's part in a failed upstream request: its body, streamed on, failed or stalled.
pub fn client_body_failed(error: &PoolError) -> Option<ProxyError> {
    chain(error).into_iter().find_map(|e| {
        Some(match e.downcast_ref::<BodyError>()? {
            BodyError::Stalled(after) => ProxyError::BodyStalled(*after),
            BodyError::Peer(e) => ProxyError::BodyUnreadable(e.to_string()),
        })
    })
}

/// Why an upstream request failed, as the `cause` label: `connect`, `tls`, `timeout`, `other`.
pub fn cause(error: &PoolError) -> &'static str {
    let chain = chain(error);
    if chain
        .iter()
        .any(|e| e.downcast_ref::<rustls::Error>().is_some())
    {
        "tls"
    } else if chain.iter().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
    }) {
        "timeout"
    } else if matches!(error, PoolError::Connect(_)) {
        "connect"
    } else {
        "other"
    }
}

/// Why an upstream request failed, as a span's `error.type`: `connection_refused`,
/// `connection_reset`, `timeout`, `tls`, else the conventions' `_OTHER`.
pub fn error_type(error: &PoolError) -> &'static str {
    use std::io::ErrorKind;
    let chain = chain(error);
    let io = |kind: ErrorKind| {
        chain.iter().any(|e| {
            e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == kind)
        })
    };
    match cause(error) {
        "tls" | "timeout" => cause(error),
        _ if io(ErrorKind::ConnectionRefused) => "connection_refused",
        _ if io(ErrorKind::ConnectionReset) => "connection_reset",
        _ => "_OTHER",
    }
}

/// The innermost error's message (`invalid peer certificate: UnknownIssuer`, `Connection
/// refused`): the part an operator can act on.
pub fn root_cause(error: &PoolError) -> String {
    chain(error)
        .last()
        .map(|e| e.to_string())
        .unwrap_or_else(|| error.to_string())
}

/// The error and its sources, looking inside `io::Error`s (whose `source()` skips the error
/// they wrap).
fn chain<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> Vec<&'e (dyn std::error::Error + 'static)> {
    let mut out = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        out.push(e);
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    out
}

impl Pool {
    pub fn new(
        settings: &Settings,
        upstream: &Upstream,
        connector: HttpsConnector<HttpConnector>,
    ) -> Pool {
        let target = Uri::builder()
            .scheme(upstream.scheme.clone())
            .authority(upstream.authority.clone())
            .path_and_query("/")
            .build()
            .expect("a scheme and an authority make a URI");
        let mut http1 = Builder::new();
        http1.preserve_header_case(settings.proxy.preserve_header_case);
        let threads = settings.proxy.serving_threads();
        let share = settings.proxy.max_connections.div_ceil(threads).max(1);
        Pool {
            connector,
            target,
            http1,
            kept: Mutex::new(VecDeque::new()),
            places: Arc::new(Semaphore::new(share)),
            kept_one: Notify::new(),
        }
    }

    /// Send `request` (origin-form target, `Host` set) on a kept connection, or a new one;
    /// at the bound, on the first of the thread's connections to finish its response.
    pub async fn request(
        &self,
        mut request: Request<UpstreamBody>,
    ) -> Result<Response<Incoming>, PoolError> {
        loop {
            let (mut conn, reused) = match self.take() {
                Some(conn) => (conn, true),
                None => match self.places.clone().try_acquire_owned() {
                    Ok(place) => (self.connect(place).await?, false),
                    Err(_) => match self.busy() {
                        // Ready once its response has been read; closed if it failed.
                        Some(mut conn) => match conn.sender.ready().await {
                            Ok(()) => (conn, true),
                            Err(_) => continue,
                        },
                        None => {
                            let _ =
                                tokio::time::timeout(LOOK_AGAIN, self.kept_one.notified()).await;
                            continue;
                        }
                    },
                },
            };
            match conn.sender.try_send_request(request).await {
                Ok(response) => {
                    self.keep(conn);
                    return Ok(response);
                }
                Err(mut failed) => match failed.take_message() {
                    // Not started: that connection was gone. It is not kept; try another.
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(PoolError::Request(failed.into_error())),
                },
            }
        }
    }

    /// The most recently kept connection that is ready for a request; closed and long-idle
    /// ones are dropped on the way.
    fn take(&self) -> Option<Connection> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let mut i = kept.len();
        while i > 0 {
            i -= 1;
            let k = &kept[i];
            if k.sender().is_closed() {
                kept.remove(i);
            } else if k.sender().is_ready() {
                let k = kept.remove(i).expect("i is in the list");
                if !k.stale() {
                    return Some(k.conn);
                }
            } // else: still reading its response
        }
        None
    }

    /// The oldest kept connection still reading its response, to wait on at the bound.
    fn busy(&self) -> Option<Connection> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|k| !k.sender().is_closed());
        kept.pop_front().map(|k| k.conn)
    }

    /// Keep `conn` for a later request; the oldest kept one goes if it is closed or stale.
    fn keep(&self, conn: Connection) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept
            .front()
            .is_some_and(|k| k.sender().is_closed() || (k.sender().is_ready() && k.stale()))
        {
            kept.pop_front();
        }
        if kept.len() < MAX_KEPT && !conn.sender.is_closed() {
            kept.push_back(Kept {
                conn,
                since: Instant::now(),
            });
            self.kept_one.notify_one();
        }
    }

    /// A new connection, driven by a task on this thread's runtime until it closes.
    async fn connect(&self, place: OwnedSemaphorePermit) -> Result<Connection, PoolError> {
        let mut connector = self.connector.clone();
        std::future::poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(PoolError::Connect)?;
        let io = connector
            .call(self.target.clone())
            .await
            .map_err(PoolError::Connect)?;
        let (sender, connection) = self
            .http1
            .handshake(io)
            .await
            .map_err(|e| PoolError::Connect(Box::new(e)))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("upstream connection ended: {e}");
            }
        });
        Ok(Connection {
            sender,
            _place: place,
        })
    }
}
