//! An SSE stream from the MCP server, read event by event as it passes: each event's `data`
//! lines, joined, are one message, read as the stdio relay reads a line. An event's bytes are
//! held until the blank line that ends it (its client cannot act on it before then), so that
//! the answer to a call whose request driftwatch refused can pass on saying why; every other
//! event passes as it came. Held within `mcp.max_message_bytes`: an event past it passes on as
//! it comes, unread, its data skimmed for the ids of the answers it holds (their calls end as
//! a read answer's do). A JSON answer past the bound passes the same way (`Skimmed`).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use hyper::body::Incoming;
use serde_json::Value;

use crate::mcp::message::Skim;

/// What reads the messages: the front, which knows the session's calls.
pub(super) trait Reader: Send + Sync {
    /// Read a message of the server's; the message to pass on instead, if it was rewritten.
    fn read_answer(&self, session: u64, message: &[u8]) -> Option<Vec<u8>>;
    /// A message past the bound went by unread; `answered`, the ids its skim found.
    fn unread(&self, session: u64, answered: Option<Vec<Value>>);
    /// Bytes of one message at most (`mcp.max_message_bytes`).
    fn bound(&self) -> usize;
}

/// The stream's reading: the line being read, the event's data so far, and its bytes held.
pub(super) struct Events {
    front: Box<dyn Reader>,
    session: u64,
    line: Vec<u8>,
    data: Vec<u8>,
    /// The event's data is past the bound: it is not read, only skimmed.
    skim: Option<Skim>,
    /// The line is a `data` line of a skimmed event: its bytes go to the skim as they come.
    skimming: bool,
    /// The line is past the bound and no `data` line: it is not read.
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
            skim: None,
            skimming: false,
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
            } else if let Some(skim) = self.skim.as_mut().filter(|_| self.skimming) {
                skim.feed(&[b]);
            } else if self.line.len() < bound {
                self.line.push(b);
            } else if !self.spoiled {
                self.line_past_bound(b);
            }
            if !self.passing && self.held.len() > bound {
                out.append(&mut self.held);
                self.passing = true;
            }
        }
        out
    }

    /// The line grew past the bound at `b`: a `data` line's value goes to the event's skim
    /// from here on; any other line is not read.
    fn line_past_bound(&mut self, b: u8) {
        let line = std::mem::take(&mut self.line);
        let Some(value) = line.strip_prefix(b"data:") else {
            self.spoiled = true;
            return;
        };
        let skim = self.skimmed();
        skim.feed(b"\n");
        skim.feed(value.strip_prefix(b" ").unwrap_or(value));
        skim.feed(&[b]);
        self.skimming = true;
    }

    /// The event's skim, begun with its data so far.
    fn skimmed(&mut self) -> &mut Skim {
        let data = &mut self.data;
        self.skim.get_or_insert_with(|| {
            let mut skim = Skim::default();
            skim.feed(&std::mem::take(data));
            skim
        })
    }

    /// A line ended: a `data` line adds to the message; a blank line ends the event.
    fn line_ended(&mut self, out: &mut Vec<u8>) {
        let bound = self.front.bound();
        let line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.skimming) | std::mem::take(&mut self.spoiled) {
            return;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if let Some(value) = line.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            if self.skim.is_some() || self.data.len() + value.len() + 1 > bound {
                let skim = self.skimmed();
                skim.feed(b"\n");
                skim.feed(value);
                return;
            }
            if !self.data.is_empty() {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            return;
        }
        if !line.is_empty() {
            return;
        }
        let data = std::mem::take(&mut self.data);
        let rewritten = match self.skim.take() {
            None if !data.is_empty() => self.front.read_answer(self.session, &data),
            Some(skim) => {
                self.front.unread(self.session, skim.answered());
                None
            }
            None => None,
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
/// bound), then its frames, read by `events` (an SSE stream's) or skimmed (an answer past the
/// bound) when there are any.
pub(super) struct Tapped {
    pub first: Option<Bytes>,
    pub body: Incoming,
    pub events: Option<Events>,
    pub skimmed: Option<Skimmed>,
}

/// A JSON answer past the bound, skimmed as it passes; what the skim found is told to the
/// front when the body ends, or is dropped.
pub(super) struct Skimmed {
    front: Box<dyn Reader>,
    session: u64,
    skim: Skim,
}

impl Skimmed {
    pub(super) fn new(front: Box<dyn Reader>, session: u64) -> Skimmed {
        let skim = Skim::default();
        Skimmed {
            front,
            session,
            skim,
        }
    }
}

impl Drop for Skimmed {
    fn drop(&mut self) {
        let skim = std::mem::take(&mut self.skim);
        self.front.unread(self.session, skim.answered());
    }
}

impl Body for Tapped {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Some(first) = self.first.take() {
            if let Some(skimmed) = &mut self.skimmed {
                skimmed.skim.feed(&first);
            }
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        if self.skimmed.is_some() {
            let polled = Pin::new(&mut self.body).poll_frame(cx);
            if let Poll::Ready(Some(Ok(frame))) = &polled
                && let (Some(data), Some(skimmed)) = (frame.data_ref(), &mut self.skimmed)
            {
                skimmed.skim.feed(data);
            }
            // Its end (the last frame, none, or an error) tells the front, as the drop would.
            if !matches!(polled, Poll::Pending | Poll::Ready(Some(Ok(_))))
                || self.body.is_end_stream()
            {
                self.skimmed = None;
            }
            return polled;
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
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A front that notes what it was given to read, and what went by unread.
    #[derive(Clone, Default)]
    struct Noted(Arc<Mutex<Vec<String>>>);

    impl Reader for Noted {
        fn read_answer(&self, _: u64, message: &[u8]) -> Option<Vec<u8>> {
            let said = format!("read {}", String::from_utf8_lossy(message));
            self.0.lock().unwrap().push(said);
            None
        }
        fn unread(&self, _: u64, answered: Option<Vec<Value>>) {
            self.0.lock().unwrap().push(format!("unread {answered:?}"));
        }
        fn bound(&self) -> usize {
            50
        }
    }

    /// Issue 64, r01: an event past the bound went by unread and its call stayed in flight.
    #[test]
    fn an_event_past_the_bound_passes_as_it_came_and_its_answers_id_is_skimmed() {
        let long = "x".repeat(60);
        let stream = [
            format!("event: message\ndata: {{\"result\":\"{long}\",\"id\":7}}\n\n"),
            format!(
                ": {long}\ndata: {{\"id\":8,\ndata: \"result\":\"{}\"}}\n\n",
                &long[..30]
            ),
            format!("data: {{\"id\":9,\"result\":1}}\r\n: {long}\r\n\r\n"),
        ]
        .concat();
        for piece in [1, 5, stream.len()] {
            let noted = Noted::default();
            let mut events = Events::new(Box::new(noted.clone()), 1);
            let out: Vec<u8> = (stream.as_bytes().chunks(piece))
                .flat_map(|c| events.feed(c))
                .collect();
            assert_eq!(String::from_utf8(out).unwrap(), stream, "{piece} at a time");
            assert_eq!(
                *noted.0.lock().unwrap(),
                [
                    "unread Some([Number(7)])",
                    "unread Some([Number(8)])",
                    r#"read {"id":9,"result":1}"#
                ],
                "{piece} at a time"
            );
        }
    }

    #[test]
    fn a_rewritten_event_keeps_its_other_fields() {
        let event = b"event: message\r\nid: 7\r\ndata: {\"a\":\ndata: 1}\r\n\r\n";
        let out = with_data(event, b"{\"a\":2}\n");
        assert_eq!(out, b"event: message\r\nid: 7\r\ndata: {\"a\":2}\n\n");
    }
}
