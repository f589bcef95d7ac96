//! A body that stops sending is cut off: a peer's body, request or response, that sends no
//! frame for `proxy.body_stall_timeout_ms` ends in `BodyError::Stalled`, so a client or an
//! upstream that sends a head and then nothing cannot hold the other side for ever. The timer
//! is armed only when the body has nothing ready (a body that arrives whole never touches the
//! clock) and made once per body.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use prometheus_client::metrics::counter::Counter;
use tokio::time::{Instant, Sleep};

/// How a peer's body failed.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error(transparent)]
    Peer(#[from] hyper::Error),
    #[error("the body sent nothing for {} ms", .0.as_millis())]
    Stalled(Duration),
}

pub struct Stalling {
    inner: Incoming,
    /// `None`: no bound, or it already fired.
    limit: Option<Duration>,
    timer: Option<Pin<Box<Sleep>>>,
    /// The timer runs for the current wait.
    armed: bool,
    /// `driftwatch_limit_hits_total{limit="body_stall"}`.
    stalls: Counter,
}

impl Stalling {
    pub fn new(inner: Incoming, limit: Option<Duration>, stalls: Counter) -> Stalling {
        Stalling {
            inner,
            limit,
            timer: None,
            armed: false,
            stalls,
        }
    }
}

impl Body for Stalling {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            this.armed = false;
            return Poll::Ready(frame.map(|f| f.map_err(BodyError::Peer)));
        }
        let Some(limit) = this.limit else {
            return Poll::Pending;
        };
        let timer = match &mut this.timer {
            Some(timer) if this.armed => timer,
            Some(timer) => {
                timer.as_mut().reset(Instant::now() + limit);
                timer
            }
            None => this.timer.insert(Box::pin(tokio::time::sleep(limit))),
        };
        this.armed = true;
        ready!(timer.as_mut().poll(cx));
        this.limit = None;
        this.stalls.inc();
        Poll::Ready(Some(Err(BodyError::Stalled(limit))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
