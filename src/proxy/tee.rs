//! Response bodies stream to the client frame by frame as they arrive; where driftwatch needs
//! to read one (a GET to remember, a write to confirm), a copy of up to `limit` bytes is kept
//! on the side and handed to a task after the last frame: the client never waits on it. The
//! copy is decoded (gzip, deflate, br) for reading; the client gets the bytes as sent. The copy
//! is handed over however the body ends: complete, cut by the upstream, or dropped when the
//! client hangs up (`Drop`), so the response work is never silently skipped.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{Either, Full};

use super::late::{Copied, Late, LateTasks};
use super::stall::{BodyError, Stalling};

/// A response body on its way to the client: the upstream's, streamed (and copied on the
/// side when wanted), or driftwatch's own answer.
pub type ResponseBody = Either<Tee, Full<Bytes>>;

/// An answer of driftwatch's own (a refusal, a problem), as the client's response.
pub(super) fn own(response: Response<Bytes>) -> Response<ResponseBody> {
    response.map(|b| Either::Right(Full::new(b)))
}

pub struct Tee {
    inner: Stalling,
    copy: Option<Copy>,
}

struct Copy {
    buf: Vec<u8>,
    limit: usize,
    overflow: bool,
    /// The work the copy is for, handed to [`LateTasks::spawn`] with it (held here, not as a
    /// boxed callback: one allocation less on every audited response).
    late: Late,
}

impl Tee {
    pub fn pass(inner: Stalling) -> Tee {
        Tee { inner, copy: None }
    }

    /// Stream `inner`, and hand `late` the copy once the last frame has gone to the client,
    /// or how the body ended short of it.
    pub fn copying(inner: Stalling, limit: usize, late: Late) -> Tee {
        if inner.is_end_stream() {
            // An empty body (a 204) is never polled: it is complete already.
            LateTasks::spawn(late, Copied::Whole(Vec::new()));
            return Tee::pass(inner);
        }
        // One allocation where the length is known (Content-Length), within the bound.
        let expected = inner.size_hint().lower().min(limit as u64) as usize;
        Tee {
            inner,
            copy: Some(Copy {
                buf: Vec::with_capacity(expected),
                limit,
                overflow: false,
                late,
            }),
        }
    }
}

impl Tee {
    /// Hand the copy over, once: `ended` says how the body ended when it did not complete.
    fn finish(&mut self, ended: Option<Copied>) {
        if let Some(copy) = self.copy.take() {
            let copied = match ended {
                Some(short) => short,
                None if copy.overflow => Copied::TooLarge,
                None => Copied::Whole(copy.buf),
            };
            LateTasks::spawn(copy.late, copied);
        }
    }
}

impl Drop for Tee {
    fn drop(&mut self) {
        self.finish(Some(Copied::ClientGone));
    }
}

impl Body for Tee {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(copy), Some(data)) = (this.copy.as_mut(), frame.data_ref()) {
                    if copy.buf.len() + data.len() > copy.limit {
                        copy.overflow = true;
                    } else if !copy.overflow {
                        copy.buf.extend_from_slice(data);
                    }
                }
                // hyper stops polling a body whose length is used up: finish here too.
                if this.inner.is_end_stream() {
                    this.finish(None);
                }
            }
            Poll::Ready(None) => this.finish(None),
            Poll::Ready(Some(Err(_))) => this.finish(Some(Copied::UpstreamFailed)),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
