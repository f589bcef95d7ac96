//! The one way every listener accepts, the proxy's, the admin's and the MCP gateway's alike:
//! a place among a maximum of connections (past it a new one is closed at once), a deadline
//! for the first request head, a cut when idle, and a 100 ms pause between accepts while the
//! process is out of file descriptors or memory (a retry fails at once, and the loop would
//! spin a core). Each bound hit is counted in `driftwatch_limit_hits_total{limit, listener}`,
//! and a change of state (shedding, out of descriptors) is logged once when it starts and once
//! when it ends. The proxy hands what it accepts to its serving threads; the admin and MCP
//! listeners serve HTTP on the accepting runtime with [`serve`].

mod activity;

pub use activity::{Activity, Counted, InFlight};

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::sink::LimitHits;

/// What one listener bounds, from its section of the settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// `proxy`, `admin` or `mcp`: the `listener` label of its hits.
    pub listener: &'static str,
    pub max_connections: usize,
    /// A connection must start its first request within this (`None`: off); hyper's HTTP/1.1
    /// header timer also bounds each later head.
    pub header_read: Option<Duration>,
    /// No request in flight and no byte moved for this long closes it (`None`: off).
    pub idle: Option<Duration>,
}

/// A connection the listener admitted, with its place (given back when dropped).
pub struct Accepted {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    pub place: OwnedSemaphorePermit,
}

/// A listening socket under its [`Bounds`].
pub struct Listener {
    socket: TcpListener,
    bounds: Bounds,
    places: Arc<Semaphore>,
    hits: LimitHits,
    /// Out of descriptors or memory, said once when it starts and once when it ends.
    exhausted: bool,
    /// At the maximum, said the same way.
    shedding: bool,
}

impl Listener {
    pub fn new(socket: TcpListener, bounds: Bounds, hits: LimitHits) -> Listener {
        hits.register(bounds.listener);
        Listener {
            socket,
            places: Arc::new(Semaphore::new(bounds.max_connections)),
            bounds,
            hits,
            exhausted: false,
            shedding: false,
        }
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    pub fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    pub fn hits(&self) -> &LimitHits {
        &self.hits
    }

    /// The next connection with a place. One past the maximum is closed at once; an accept
    /// that fails for want of descriptors or memory pauses 100 ms. Cancel-safe.
    pub async fn accept(&mut self) -> Accepted {
        loop {
            match self.socket.accept().await {
                Ok((stream, peer)) => {
                    if std::mem::take(&mut self.exhausted) {
                        tracing::info!(
                            listener = self.bounds.listener,
                            "accepting connections again"
                        );
                    }
                    if let Some(place) = self.admit() {
                        return Accepted {
                            stream,
                            peer,
                            place,
                        };
                    }
                }
                Err(e) => {
                    if let Some(pause) = self.accept_failed(&e) {
                        tokio::time::sleep(pause).await;
                    }
                }
            }
        }
    }

    /// A place for one more connection, or `None` at the maximum (counted).
    fn admit(&mut self) -> Option<OwnedSemaphorePermit> {
        let listener = self.bounds.listener;
        match self.places.clone().try_acquire_owned() {
            Ok(place) => {
                if std::mem::take(&mut self.shedding) {
                    tracing::info!(
                        listener,
                        "below max_connections again: accepting connections"
                    );
                }
                Some(place)
            }
            Err(_) => {
                self.hits.hit("connections", listener);
                if !std::mem::replace(&mut self.shedding, true) {
                    tracing::warn!(
                        listener,
                        max = self.bounds.max_connections,
                        "at max_connections: closing new connections until some end"
                    );
                }
                None
            }
        }
    }

    /// How long to wait after a failed accept. Out of file descriptors (EMFILE, ENFILE) or
    /// memory, the socket stays readable and a retry fails at once. Other errors concern one
    /// connection and are retried at once.
    fn accept_failed(&mut self, error: &std::io::Error) -> Option<Duration> {
        const EMFILE: i32 = 24;
        const ENFILE: i32 = 23;
        const ENOBUFS: i32 = 105;
        const ENOMEM: i32 = 12;
        let limit = match error.raw_os_error() {
            Some(EMFILE | ENFILE) => "open_files",
            Some(ENOBUFS | ENOMEM) => "memory",
            _ => {
                tracing::debug!("accept failed: {error}");
                return None;
            }
        };
        let listener = self.bounds.listener;
        self.hits.hit(limit, listener);
        if !std::mem::replace(&mut self.exhausted, true) {
            tracing::warn!(
                listener,
                "accept failed: {error}; pausing accepts 100 ms at a time until descriptors free up"
            );
        }
        Some(Duration::from_millis(100))
    }
}

/// Run `serve` (one connection) until it ends or the connection outlives a time bound, which
/// is counted and closes it.
pub async fn watched(
    bounds: &Bounds,
    hits: &LimitHits,
    activity: Arc<Activity>,
    peer: SocketAddr,
    serve: impl Future<Output = ()>,
) {
    tokio::select! {
        () = serve => {}
        limit = activity.lapsed(bounds.header_read, bounds.idle) => {
            tracing::debug!(%peer, listener = bounds.listener, "connection closed: {limit} timeout");
            hits.hit(limit, bounds.listener);
        }
    }
}

/// A served connection that ended with `error`: a head not read in time (hyper's own header
/// timer) is counted as `header_read`; every error is said at debug level.
pub fn ended(
    error: &(dyn std::error::Error + 'static),
    listener: &'static str,
    hits: &LimitHits,
    peer: SocketAddr,
) {
    let timed_out = error
        .downcast_ref::<hyper::Error>()
        .is_some_and(hyper::Error::is_timeout);
    if timed_out {
        hits.hit("header_read", listener);
    }
    tracing::debug!(%peer, listener, "connection ended with an error: {error}");
}

/// A response carrying this closes its connection once answered: a peer that stalled its body
/// is cut whole. HTTP/1.1 does so itself (the body is left unread); an HTTP/2 connection gets
/// a GOAWAY, and closes once nothing is in flight and no byte moved for [`CLOSING_IDLE`] (a
/// peer that never acks the GOAWAY's ping would otherwise hold it). Before (issue 64, r03), an
/// HTTP/2 connection whose stalled stream got its 408 stayed open until idle (600 s on the MCP
/// front).
#[derive(Clone, Copy, Debug)]
pub struct Close;

/// How long a connection asked to close may sit with nothing in flight and nothing moving.
const CLOSING_IDLE: Duration = Duration::from_secs(1);

/// Serve HTTP/1.1 and HTTP/2 with `handle` on every connection `listener` admits, each under
/// the listener's bounds, for as long as the task runs. A response's body holds its request
/// in flight until it ends, so a long stream (MCP's SSE) is never idle while it is open; a
/// response carrying [`Close`] closes its connection.
pub async fn serve<F, Fut, B>(mut listener: Listener, handle: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let builder = connections(listener.bounds());
    loop {
        let Accepted {
            stream,
            peer,
            place,
        } = listener.accept().await;
        let (bounds, hits) = (listener.bounds().clone(), listener.hits().clone());
        let (builder, handle) = (builder.clone(), handle.clone());
        tokio::spawn(async move {
            let activity = Arc::new(Activity::default());
            let stream = Counted::new(stream, activity.clone());
            let requests = activity.clone();
            let service = hyper::service::service_fn(move |req| {
                let in_flight = requests.begin();
                let answered = handle(req);
                let requests = requests.clone();
                async move {
                    let response = answered.await?;
                    if response.extensions().get::<Close>().is_some() {
                        requests.close();
                    }
                    Ok::<_, Infallible>(response.map(|body| Held::new(body, in_flight)))
                }
            });
            let closing = activity.clone();
            let conn = async {
                let served = builder.serve_connection(TokioIo::new(stream), service);
                let mut served = std::pin::pin!(served);
                let served = tokio::select! {
                    served = served.as_mut() => served,
                    () = closing.closed() => {
                        served.as_mut().graceful_shutdown();
                        tokio::select! {
                            served = served.as_mut() => served,
                            _ = closing.lapsed(None, Some(CLOSING_IDLE)) => Ok(()),
                        }
                    }
                };
                if let Err(e) = served {
                    ended(&*e, bounds.listener, &hits, peer);
                }
            };
            watched(&bounds, &hits, activity, peer, conn).await;
            drop(place);
        });
    }
}

/// How each connection is served: HTTP/1.1 or HTTP/2, the header read bound set (`None` turns
/// hyper's own default, 30 s once a timer is set, off as well).
fn connections(bounds: &Bounds) -> hyper_util::server::conn::auto::Builder<TokioExecutor> {
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.header_read);
    builder
}

/// A response body that holds `guard` (its request counted in flight, a place) until it ends
/// or is dropped.
pub struct Held<B, G> {
    body: B,
    _guard: G,
}

impl<B, G> Held<B, G> {
    pub fn new(body: B, guard: G) -> Held<B, G> {
        Held {
            body,
            _guard: guard,
        }
    }
}

impl<B: Body + Unpin, G: Unpin> Body for Held<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
