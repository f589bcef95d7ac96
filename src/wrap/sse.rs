//! An SSE stream from the MCP server, read event by event as it passes: each event's `data`
//! lines, joined, are one message, read as the stdio relay reads a line. An event's bytes are
//! held until the blank line that ends it (its client cannot act on it before then), so that
//! the answer to a call whose request driftwatch refused can pass on saying why; every other
//! event passes as it came. Held within `mcp.max_message_bytes`: an event past it passes on as
//! it comes, unread.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use hyper::body::Incoming;

/// What reads the messages: the front, which knows the session's calls.
pub(super) trait Reader: Send + Sync {
    /// Read a message of the server's; the message to pass on instead, if it was rewritten.
    fn read_answer(&self, session: u64, message: &[u8]) -> Option<Vec<u8>>;
    /// A message past the bound went by unread.
    fn unread(&self, session: u64);
    /// Bytes of one message at most (`mcp.max_message_bytes`).
    fn bound(&self) -> usize;
}

/// The stream's reading: the line being read, the event's data so far, and its bytes held.
pub(super) struct Events {
    front: Box<dyn Reader>,
    session: u64,
    line: Vec<u8>,
    data: Vec<u8>,
    /// A line of the event was past the bound: it is not read.
    spoiled: bool,
    /// The event's bytes so far, held until it ends.
    held: Vec<u8>,
    /// The event grew past the bound: its bytes pass on as they come.
    passing: bool,
}

impl Events {
    pub(super) fn new(front: Box<dyn Reader>, session: u64) -> Events {
        Events {
            front,
            session,
            line: Vec::new(),
            data: Vec::new(),
            spoiled: false,
            held: Vec::new(),
            passing: false,
        }
    }

    /// Read `bytes`; the bytes to pass on now: each event that ended (as it came, or with its
    /// answer rewritten), and what passes unheld.
    fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        let bound = self.front.bound();
        let mut out = Vec::new();
        for &b in bytes {
            match self.passing {
                true => out.push(b),
                false => self.held.push(b),
            }
            if b == b'\n' {
                self.line_ended(&mut out);
            } else if self.line.len() < bound {
                self.line.push(b);
            } else {
                self.spoiled = true;
            }
            if !self.passing && self.held.len() > bound {
                out.append(&mut self.held);
                self.passing = true;
            }
        }
        out
    }

    /// A line ended: a `data` line adds to the message; a blank line ends the event.
    fn line_ended(&mut self, out: &mut Vec<u8>) {
        let bound = self.front.bound();
        let line = std::mem::take(&mut self.line);
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if let Some(value) = line.strip_prefix(b"data:") {
            if !self.data.is_empty() {
                self.data.push(b'\n');
            }
            let value = value.strip_prefix(b" ").unwrap_or(value);
            match self.data.len() + value.len() <= bound {
                true => self.data.extend_from_slice(value),
                false => self.spoiled = true,
            }
            return;
        }
        if !line.is_empty() {
            return;
        }
        let data = std::mem::take(&mut self.data);
        let rewritten = match std::mem::take(&mut self.spoiled) {
            false if !data.is_empty() => self.front.read_answer(self.session, &data),
            true => {
                self.front.unread(self.session);
                None
            }
            false => None,
        };
        let held = std::mem::take(&mut self.held);
        match (std::mem::take(&mut self.passing), rewritten) {
            (true, _) => {}
            (false, Some(message)) => out.extend_from_slice(&with_data(&held, &message)),
            (false, None) => out.extend_from_slice(&held),
        }
    }
}

/// An event's bytes with its `data` lines replaced by one carrying `message`; its other
/// fields (`event`, `id`, `retry`, comments) kept, in order.
fn with_data(event: &[u8], message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(event.len() + message.len());
    let mut said = false;
    for line in event.split_inclusive(|b| *b == b'\n') {
        let text = line.strip_suffix(b"\n").unwrap_or(line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.is_empty() {
            continue;
        }
        if !text.starts_with(b"data:") {
            out.extend_from_slice(line);
        } else if !std::mem::replace(&mut said, true) {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(message.trim_ascii_end());
            out.push(b'\n');
        }
    }
    out.push(b'\n');
    out
}

/// The server's body passed on as it comes: first the bytes already read (an answer past the
/// bound), then its frames, read by `events` (an SSE stream's) when there are any.
pub(super) struct Tapped {
    pub first: Option<Bytes>,
    pub body: Incoming,
    pub events: Option<Events>,
}

impl Body for Tapped {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        loop {
            let polled = Pin::new(&mut self.body).poll_frame(cx);
            let Some(events) = &mut self.events else {
                return polled;
            };
            match polled {
                Poll::Ready(Some(Ok(frame))) => {
                    let Some(data) = frame.data_ref() else {
                        return Poll::Ready(Some(Ok(frame)));
                    };
                    let out = events.feed(data);
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out.into()))));
                    }
                }
                Poll::Ready(None) => {
                    // The stream ended inside an event: what was held of it goes as it came.
                    let rest = std::mem::take(&mut events.held);
                    self.events = None;
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(rest.into()))));
                    }
                    return Poll::Ready(None);
                }
                other => return other,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        let held = self.events.as_ref().is_some_and(|e| !e.held.is_empty());
        self.first.is_none() && !held && self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match (&self.first, &self.events) {
            (None, None) => self.body.size_hint(),
            _ => http_body::SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewritten_event_keeps_its_other_fields() {
        let event = b"event: message\r\nid: 7\r\ndata: {\"a\":\ndata: 1}\r\n\r\n";
        let out = with_data(event, b"{\"a\":2}\n");
        assert_eq!(out, b"event: message\r\nid: 7\r\ndata: {\"a\":2}\n\n");
    }
}
