//! What the audit sees of an HTTP response: its status, headers and (when a copy was taken)
//! its decoded body. Borrowed, like [`crate::request::RequestView`], so the proxy audits the
//! copy it already holds and the offline checker a recorded response.

use crate::request::Headers;

#[derive(Clone, Copy)]
pub struct ResponseView<'a> {
    pub status: u16,
    pub headers: &'a dyn Headers,
    /// The decoded body; `None` when no copy was taken (too large, not sampled, HEAD), so
    /// only the status and `Content-Type` are checked.
    pub body: Option<&'a [u8]>,
    /// The body already parsed as JSON, where the caller has it (the proxy parses a copy once
    /// for the audit and the silent-clear memory); `None` and the audit parses `body` itself.
    pub parsed: Option<crate::json::Node<'a>>,
}

impl<'a> ResponseView<'a> {
    pub fn content_type(&self) -> Option<&'a str> {
        self.headers.get("content-type")
    }
}
