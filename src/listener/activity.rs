//! What one client connection may hold in time. A connection that has not started a request
//! within its listener's header-read bound of its start (a silent peer, or one trickling the
//! HTTP/2 preface, which hyper's own header timer does not see), or that has no request in
//! flight and moved no byte for its idle bound, is closed. Activity is counted in the socket wrapper (one relaxed
//! add per read or write) and looked at by a timer a few times per bound: the request path
//! never reads the clock for it.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// What a connection has done, shared by its socket, its requests and its watchdog.
#[derive(Default)]
pub struct Activity {
    /// Bytes read and written.
    bytes: AtomicU64,
    /// Requests started.
    started: AtomicU64,
    in_flight: AtomicUsize,
    /// A response asked for the connection to close (`listener::Close`).
    closing: tokio::sync::Notify,
}

/// A request in flight on its connection, until dropped.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Activity {
    pub fn begin(self: &Arc<Activity>) -> InFlight {
        self.started.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// Close the connection once its requests are answered.
    pub fn close(&self) {
        self.closing.notify_one();
    }

    /// Resolves when a response asked for the connection to close.
    pub async fn closed(&self) {
        self.closing.notified().await;
    }

    /// Resolves when the connection has outlived a bound, naming it (`header_read` or `idle`);
    /// never without a bound.
    pub async fn lapsed(&self, first: Option<Duration>, idle: Option<Duration>) -> &'static str {
        let opened = Instant::now();
        let mut seen = self.bytes.load(Ordering::Relaxed);
        let mut moved = opened;
        loop {
            let waiting_first = self.started.load(Ordering::Relaxed) == 0 && first.is_some();
            let Some(bound) = (if waiting_first { first } else { idle }) else {
                return std::future::pending().await;
            };
            tokio::time::sleep((bound / 4).max(Duration::from_millis(10))).await;
            let now = Instant::now();
            let bytes = self.bytes.load(Ordering::Relaxed);
            if bytes != seen {
                (seen, moved) = (bytes, now);
            }
            if self.started.load(Ordering::Relaxed) == 0 {
                if first.is_some_and(|f| now - opened >= f) {
                    return "header_read";
                }
            } else if self.in_flight.load(Ordering::Relaxed) == 0
                && idle.is_some_and(|i| now - moved >= i)
            {
                return "idle";
            }
        }
    }
}

/// A socket that counts the bytes it moves into its connection's [`Activity`].
pub struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Counted<S> {
    pub fn new(inner: S, activity: Arc<Activity>) -> Counted<S> {
        Counted { inner, activity }
    }

    pub fn activity(&self) -> Arc<Activity> {
        self.activity.clone()
    }

    fn moved(&self, n: usize) {
        self.activity.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.moved(buf.filled().len() - before);
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            this.moved(n);
        }
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = polled {
            this.moved(n);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
