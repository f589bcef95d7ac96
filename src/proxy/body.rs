//! Request bodies on their way upstream. Up to `audit.max_body` bytes are buffered so the audit
//! can read them; the bytes forwarded are exactly the bytes received, with the client's framing
//! kept (a chunked body stays chunked, a `Content-Length` body keeps its length). A larger body
//! is replayed: the part already read, then the rest streamed as it arrives, unaudited.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http::header::CONTENT_LENGTH;
use http::request::Parts;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::Sidecar;
use super::error::ProxyError;
use super::stall::{BodyError, Stalling};

/// A request body as the check stage sees it.
pub(super) enum BodyRead {
    /// Read whole, within `audit.max_body`.
    Whole(Bytes),
    /// Larger than `audit.max_body`: streamed on unaudited.
    TooLarge,
    /// `audit.enabled = false`: nothing is read or audited.
    Off,
}

/// The body forwarded upstream.
pub enum UpstreamBody {
    /// Fully read (and audited). `exact`: the client sent a `Content-Length`.
    Buffered {
        data: Option<Bytes>,
        trailers: Option<HeaderMap>,
        exact: bool,
    },
    /// Partly read, then the rest as it arrives.
    Replay {
        prefix: VecDeque<Bytes>,
        rest: Stalling,
    },
}

/// Read `body` up to `max` bytes: the whole body, or what was read before it grew too large.
pub enum Captured {
    Complete(Bytes, UpstreamBody),
    TooLarge(UpstreamBody),
}

pub async fn capture(
    mut body: Stalling,
    max: usize,
    declared: Option<u64>,
) -> Result<Captured, BodyError> {
    let exact = declared.is_some();
    if declared.is_some_and(|n| n > max as u64) {
        return Ok(Captured::TooLarge(UpstreamBody::Replay {
            prefix: VecDeque::new(),
            rest: body,
        }));
    }
    let mut chunks: VecDeque<Bytes> = VecDeque::new();
    let mut total = 0;
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        match frame.into_data() {
            Ok(data) => {
                total += data.len();
                chunks.push_back(data);
                if total > max {
                    return Ok(Captured::TooLarge(UpstreamBody::Replay {
                        prefix: chunks,
                        rest: body,
                    }));
                }
            }
            Err(frame) => trailers = frame.into_trailers().ok(),
        }
    }
    let data = match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.pop_front().unwrap_or_default(),
        _ => {
            let mut all = BytesMut::with_capacity(total);
            chunks.iter().for_each(|c| all.extend_from_slice(c));
            all.freeze()
        }
    };
    let forward = UpstreamBody::Buffered {
        data: (!data.is_empty()).then(|| data.clone()),
        trailers,
        exact,
    };
    Ok(Captured::Complete(data, forward))
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            UpstreamBody::Buffered { data, trailers, .. } => {
                if let Some(data) = data.take() {
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Poll::Ready(trailers.take().map(|t| Ok(Frame::trailers(t))))
            }
            UpstreamBody::Replay { prefix, rest } => match prefix.pop_front() {
                Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
                None => Pin::new(rest).poll_frame(cx),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            UpstreamBody::Buffered { data, trailers, .. } => data.is_none() && trailers.is_none(),
            UpstreamBody::Replay { prefix, rest } => prefix.is_empty() && rest.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpstreamBody::Buffered {
                data, exact: true, ..
            } => SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64)),
            UpstreamBody::Buffered { .. } => SizeHint::default(),
            UpstreamBody::Replay { prefix, rest } => {
                let read: u64 = prefix.iter().map(|c| c.len() as u64).sum();
                let hint = rest.size_hint();
                match hint.exact() {
                    Some(n) => SizeHint::with_exact(n + read),
                    None => SizeHint::default(),
                }
            }
        }
    }
}

/// Read the body for the audit, and what goes upstream: the same bytes, framing kept.
pub(super) async fn read(
    s: &Sidecar,
    parts: &Parts,
    body: Incoming,
) -> Result<(BodyRead, UpstreamBody), ProxyError> {
    let body = Stalling::new(
        body,
        s.settings.proxy.body_stall_timeout,
        s.sinks.metrics.body_stalls(),
    );
    if !s.settings.audit.enabled {
        s.sinks.metrics.unaudited("audit_off");
        let forward = UpstreamBody::Replay {
            prefix: Default::default(),
            rest: body,
        };
        return Ok((BodyRead::Off, forward));
    }
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match capture(body, s.settings.audit.max_body, declared).await {
        Ok(Captured::Complete(bytes, forward)) => Ok((BodyRead::Whole(bytes), forward)),
        Ok(Captured::TooLarge(forward)) => {
            s.sinks.metrics.unaudited("body_too_large");
            Ok((BodyRead::TooLarge, forward))
        }
        Err(e) => Err(e.into()),
    }
}
