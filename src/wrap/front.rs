//! The MCP front for a server that speaks streamable HTTP (`--mcp-upstream URL`): a listener,
//! held to the MCP bounds like every listener (`crate::listener`), that relays each request to
//! the server's endpoint and its answer back, SSE streams included, read on the way as the
//! stdio relay reads lines. A request body is read whole (within `mcp.max_message_bytes`,
//! past it 413; one that sends nothing for `proxy.body_stall_timeout_ms`, 408) before it goes
//! on, so a call is in flight before the server sees it; a JSON answer is read whole, or past
//! the bound passed on unread as it comes; an SSE stream is read event by event as it passes
//! (`sse.rs`). Sessions the server gave are followed apart from ids a client only sent
//! (`sessions.rs`), so made-up session ids push out only each other.

use std::convert::Infallible;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::live::Live;
use super::sessions::Sessions;
use super::sse::{Events, Reader, Skimmed, Tapped};
use crate::mcp::calls::Calls;
use crate::mcp::message::{Limits, Refused};
use crate::mcp::relay::Session;

type Relayed = BoxBody<Bytes, hyper::Error>;

#[derive(Clone)]
pub struct HttpFront {
    upstream: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    calls: Arc<Calls>,
    live: Arc<Live>,
    limits: Limits,
    /// A request body that sends nothing this long is cut (408), counted in `stalls`.
    stall: Option<std::time::Duration>,
    stalls: prometheus_client::metrics::counter::Counter,
    sessions: Arc<Mutex<Sessions>>,
}

impl HttpFront {
    /// `upstream` is the server's MCP endpoint: `http://host:port/path`.
    pub fn new(
        upstream: &str,
        calls: Arc<Calls>,
        live: Arc<Live>,
        (limits, explain): (Limits, bool),
        stall: (
            Option<std::time::Duration>,
            prometheus_client::metrics::counter::Counter,
        ),
    ) -> anyhow::Result<HttpFront> {
        let uri: Uri = upstream
            .parse()
            .map_err(|e| anyhow::anyhow!("--mcp-upstream {upstream}: {e}"))?;
        if uri.scheme_str() != Some("http") || uri.authority().is_none() {
            anyhow::bail!(
                "--mcp-upstream {upstream}: expected http://host:port/path (the server beside driftwatch)"
            );
        }
        Ok(HttpFront {
            upstream: uri,
            client: Client::builder(TokioExecutor::new()).build_http(),
            calls,
            live,
            limits,
            stall: stall.0,
            stalls: stall.1,
            sessions: Arc::new(Mutex::new(Sessions::new(limits, explain))),
        })
    }

    /// Serve every connection `listener` admits.
    pub async fn serve(self, listener: crate::listener::Listener) {
        crate::listener::serve(listener, move |req| self.clone().answer(req)).await;
    }

    async fn answer(self, req: Request<Incoming>) -> Result<Response<Relayed>, Infallible> {
        Ok(match self.relay(req).await {
            Ok(response) => response,
            Err((status, message)) => {
                let mut response = own(status, &message);
                if status == StatusCode::REQUEST_TIMEOUT {
                    // A stalled body: its peer is cut whole, HTTP/2 included.
                    response.extensions_mut().insert(crate::listener::Close);
                }
                response
            }
        })
    }

    async fn relay(
        &self,
        req: Request<Incoming>,
    ) -> Result<Response<Relayed>, (StatusCode, String)> {
        let session = session_key(req.headers().get("mcp-session-id"));
        let (mut parts, body) = req.into_parts();
        let body = crate::proxy::Stalling::new(body, self.stall, self.stalls.clone());
        let body = Limited::new(body, self.limits.bytes)
            .collect()
            .await
            .map_err(|e| match e.downcast_ref::<crate::proxy::BodyError>() {
                Some(stalled @ crate::proxy::BodyError::Stalled(_)) => (
                    StatusCode::REQUEST_TIMEOUT,
                    format!("the request body: {stalled}"),
                ),
                _ if e.is::<http_body_util::LengthLimitError>() => (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    Refused::Bytes(self.limits.bytes).json_rpc(),
                ),
                _ => (
                    StatusCode::BAD_REQUEST,
                    format!("the request body could not be read: {e}"),
                ),
            })?;
        let mut body = body.to_bytes();
        if parts.method == Method::POST {
            let rewritten = self.with_session(session, |s, calls| s.from_client(calls, &body));
            // A request's `params._meta` now names driftwatch's span.
            if let Some(rewritten) = rewritten {
                body = Bytes::from(rewritten);
                parts.headers.remove(http::header::TRANSFER_ENCODING);
                parts.headers.insert(CONTENT_LENGTH, body.len().into());
            }
        }
        if parts.method == Method::DELETE {
            self.calls.end_session(session);
            self.sessions().end(session);
        }
        parts.uri = self.target(&parts.uri);
        parts.headers.remove(HOST);
        if let Some(authority) = self.upstream.authority() {
            let host =
                HeaderValue::from_str(authority.as_str()).expect("an authority is a header value");
            parts.headers.insert(HOST, host);
        }
        let response = self
            .client
            .request(Request::from_parts(parts, Full::new(body)))
            .await
            .map_err(|e| {
                (
                    StatusCode::BAD_GATEWAY,
                    format!("driftwatch could not reach the MCP server: {e}"),
                )
            })?;
        Ok(self.read_back(session, response).await)
    }

    /// The upstream endpoint, with the client's query.
    fn target(&self, asked: &Uri) -> Uri {
        let path = self.upstream.path();
        let pq = match asked.query() {
            Some(q) => format!("{path}?{q}"),
            None => path.to_string(),
        };
        let mut parts = self.upstream.clone().into_parts();
        parts.path_and_query = pq.parse().ok();
        Uri::from_parts(parts).unwrap_or_else(|_| self.upstream.clone())
    }

    async fn read_back(&self, session: u64, response: Response<Incoming>) -> Response<Relayed> {
        let given = response.headers().get("mcp-session-id");
        let session = given.map_or(session, |id| session_key(Some(id)));
        if given.is_some() && response.status().is_success() {
            self.sessions().prove(session);
        }
        let sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let (mut parts, body) = response.into_parts();
        if sse {
            // An event may be rewritten (a refused call's answer): its length is not known.
            parts.headers.remove(CONTENT_LENGTH);
            let events = Some(Events::new(Box::new(self.clone()), session));
            let tapped = Tapped {
                first: None,
                body,
                events,
                skimmed: None,
            };
            return Response::from_parts(parts, tapped.boxed());
        }
        // A JSON answer: read whole within the bound, or passed on unread (and skimmed).
        let (read, body) = self.read_within(session, body).await;
        let Some(whole) = read else {
            return Response::from_parts(parts, body);
        };
        match self.read_answer(session, &whole) {
            Some(rewritten) => {
                parts.headers.insert(CONTENT_LENGTH, rewritten.len().into());
                let body = Full::new(Bytes::from(rewritten));
                Response::from_parts(parts, body.map_err(|e| match e {}).boxed())
            }
            None => Response::from_parts(parts, body),
        }
    }

    /// The body's bytes while they fit the bound, and the body to pass on: those bytes, then
    /// (past the bound) the rest as it comes, skimmed for the calls it answers. `None`: past
    /// the bound, or cut short.
    async fn read_within(&self, session: u64, mut body: Incoming) -> (Option<Bytes>, Relayed) {
        let passed = |held: bytes::BytesMut, body| {
            let skimmed = Skimmed::new(Box::new(self.clone()), session);
            Tapped {
                first: Some(held.freeze()),
                body,
                events: None,
                skimmed: Some(skimmed),
            }
            .boxed()
        };
        let mut held = bytes::BytesMut::new();
        loop {
            match body.frame().await {
                None => {
                    let whole = held.freeze();
                    let passed = Full::new(whole.clone()).map_err(|e| match e {}).boxed();
                    return (Some(whole), passed);
                }
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        held.extend_from_slice(data);
                    }
                    if held.len() > self.limits.bytes {
                        return (None, passed(held, body));
                    }
                }
                Some(Err(e)) => {
                    tracing::debug!("the MCP server's answer ended early: {e}");
                    return (None, passed(held, body));
                }
            }
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with_session<T>(&self, key: u64, f: impl FnOnce(&mut Session, &Calls) -> T) -> T {
        f(self.sessions().get(key), &self.calls)
    }
}

impl Reader for HttpFront {
    fn read_answer(&self, session: u64, message: &[u8]) -> Option<Vec<u8>> {
        let answered = self.with_session(session, |s, calls| s.from_server(calls, message));
        if let Some(list) = answered.listed {
            self.live.listed(list);
        }
        if let Some(refused) = &answered.unread_list {
            self.live.unreadable(refused);
        }
        answered.rewritten
    }

    /// An answer past the bound went by unread: the calls it answers end; if it may have
    /// answered a `tools/list`, the live check says it could not read the catalog instead of
    /// waiting for ever.
    fn unread(&self, session: u64, answered: Option<Vec<serde_json::Value>>) {
        if self.with_session(session, |s, calls| s.unread(calls, answered)) {
            self.live.unreadable(&Refused::Bytes(self.limits.bytes));
        }
    }

    fn bound(&self) -> usize {
        self.limits.bytes
    }
}

/// A session id as a key (0: no session).
fn session_key(id: Option<&HeaderValue>) -> u64 {
    id.map_or(0, |id| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        id.as_bytes().hash(&mut h);
        h.finish() | 1
    })
}

/// driftwatch's own answer: a JSON-RPC error with a null id.
fn own(status: StatusCode, message: &str) -> Response<Relayed> {
    let body = if message.starts_with('{') {
        message.to_string()
    } else {
        crate::mcp::message::json_rpc_error(-32603, message)
    };
    let mut response = Response::new(Full::new(Bytes::from(body)).map_err(|e| match e {}).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_id_is_a_key_that_is_never_zero() {
        let id = HeaderValue::from_static("abc");
        assert_ne!(session_key(Some(&id)), 0);
        assert_eq!(session_key(Some(&id)), session_key(Some(&id)));
        assert_eq!(session_key(None), 0);
    }
}
