//! driftwatch's own read of a replace write's resource, just before the write: the GET the
//! contract pairs with the write, sent to the same upstream with the write's own headers (its
//! credentials among them) and nothing more, bounded in time and size, a span of its own under
//! the request's. Both stages that decide on it use it: the read before a write the memory
//! cannot judge (`before_write.rs`) and the repair (`repair.rs`), which reuses the first's.
//! A read is used only when it is the resource: an answer that is not (an envelope, an error
//! object, another resource) is a reason to refuse, never a view with nothing to lose.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{
    ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, ETAG, EXPECT, HeaderValue,
    TRANSFER_ENCODING,
};
use http::request::Parts;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Limited};

use super::Sidecar;
use super::body::UpstreamBody;
use super::headers::RequestId;
use super::outgoing::{Peer, outgoing, send};
use super::pool::Pool;
use super::record::Ledger;
use crate::contract::Operation;
use crate::memory::Snapshot;
use crate::repair::read_path;
use crate::revision::Revision;
use crate::telemetry::{Span, SpanKind, Start, Telemetry};

/// Why a read could not be made or used: what the agent and the operator read.
#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum ReadError {
    #[error(
        "the spec shows no GET of this resource to read it by (name one: `x-driftwatch-read`, or `[memory.resources]`)"
    )]
    NoRead,
    #[error("the write's path does not fit its template, so the resource's cannot be made")]
    NoPath,
    #[error("the read of the resource failed: {0}")]
    Failed(String),
    #[error("the read of the resource was answered {0}")]
    Status(u16),
    #[error("the read's answer could not be used: {0}")]
    Body(String),
    #[error("the read's answer is not the resource: {0}")]
    Unfit(String),
}

impl ReadError {
    /// The API says the resource does not exist: a replace creates it, and erases nothing.
    pub fn absent(&self) -> bool {
        matches!(self, ReadError::Status(404 | 410))
    }
}

/// The resource as driftwatch read it.
pub(super) struct Read {
    pub request_id: RequestId,
    pub body: Bytes,
    pub etag: Option<HeaderValue>,
    /// Its top-level fields, as the memory keeps them.
    pub snapshot: Snapshot,
}

/// Read the resource of `ledger`'s replace write (`parts`), which omits `omitted` (their names
/// in the read): a GET of the path the contract pairs with it, checked to be the resource.
pub(super) async fn read(
    s: &Arc<Sidecar>,
    pool: &Pool,
    rev: &Revision,
    ledger: &Ledger<'_>,
    (parts, omitted): (&Parts, &[&str]),
    peer: &Peer,
) -> (RequestId, Result<Read, ReadError>) {
    let id = RequestId::new();
    let read = async {
        let op = ledger.operation.ok_or(ReadError::NoRead)?;
        let read_op = op.read.and_then(|i| rev.contract.operation_at(i));
        let read_op = read_op.ok_or(ReadError::NoRead)?;
        let path =
            read_path(&rev.contract, op, read_op, parts.uri.path()).ok_or(ReadError::NoPath)?;
        let mut span = (s.telemetry.as_ref()).map(|t| span(t, ledger, read_op, &id));
        let mut request = read_parts(s, parts, &path, &id)?;
        let upstream = &ledger.api.upstreams[ledger.upstream];
        let url = (span.as_ref()).map(|_| {
            let path = s.path_text(&rev.contract, request.uri.path());
            super::trace::url_full(upstream, &path, request.uri.query())
        });
        if let Some(span) = &span {
            crate::telemetry::context::inject(span.context(), &mut request.headers);
        }
        let fetched = fetch(s, pool, ledger, request, peer).await;
        if let Some(span) = &mut span {
            match &fetched {
                Ok((status, _)) => super::trace::answered(span, url, *status),
                Err(e) => {
                    span.set("error.type", "_OTHER");
                    span.set_error(e.to_string());
                }
            }
        }
        let (status, (body, etag)) = fetched?;
        if !status.is_success() {
            return Err(ReadError::Status(status.as_u16()));
        }
        let last = path_value(rev, read_op, &path);
        let snapshot = resource(s, (read_op, omitted), last.as_deref(), &body, &id);
        if let (Err(e), Some(span)) = (&snapshot, &mut span) {
            span.set_error(e.to_string());
        }
        Ok(Read {
            request_id: id.clone(),
            body,
            etag,
            snapshot: snapshot?,
        })
    };
    let result = read.await;
    (id, result)
}

/// The read's span: a client span of its own, the child of the write's.
fn span(t: &Telemetry, ledger: &Ledger<'_>, read_op: &Operation, id: &RequestId) -> Span {
    let start = Start {
        name: ("GET", read_op.template.as_str()),
        kind: SpanKind::Client,
        time: None,
        links: Vec::new(),
    };
    let mut span = t.span(start, ledger.span_context().as_ref());
    span.set_all(&ledger.api.span_attributes[ledger.upstream]);
    span.set_str("http.request.method", "GET");
    span.set_str("url.template", &read_op.template);
    span.set_str("driftwatch.operation", &read_op.id);
    span.set_str("driftwatch.request_id", id.as_str());
    span.set_str("driftwatch.read_for", ledger.request_id.as_str());
    span
}

/// The read's body as a snapshot, if it is the resource: a JSON object (`crate::repair::fits`).
fn resource(
    s: &Sidecar,
    (read_op, omitted): (&Operation, &[&str]),
    last: Option<&str>,
    body: &[u8],
    id: &RequestId,
) -> Result<Snapshot, ReadError> {
    let doc = crate::json::parse(body)
        .map_err(|e| ReadError::Body(format!("its JSON could not be read ({e})")))?;
    let root = doc.root();
    crate::repair::fits(read_op, last, root, omitted).map_err(ReadError::Unfit)?;
    let mut snapshot = Snapshot::of(&s.memory.hash_key, root)
        .ok_or_else(|| ReadError::Unfit("not a JSON object".into()))?;
    snapshot.request_id = id.as_str().to_string();
    snapshot.at = std::time::SystemTime::now();
    Ok(snapshot)
}

/// The value of the read's last path parameter in `path`, as the audit routes it.
fn path_value(rev: &Revision, read_op: &Operation, path: &str) -> Option<String> {
    let crate::contract::Route::Found { path_values, .. } = rev.contract.route("GET", path) else {
        return None;
    };
    let last = path_values.get(read_op.path_params.len().checked_sub(1)?)?;
    Some(
        percent_encoding::percent_decode_str(last)
            .decode_utf8_lossy()
            .into_owned(),
    )
}

/// The read: a GET of `path` (the write's query kept) with the write's own headers, its
/// credentials among them, less what describes the write's body or makes it conditional;
/// identity-encoded, under a request id of its own.
fn read_parts(s: &Sidecar, parts: &Parts, path: &str, id: &RequestId) -> Result<Parts, ReadError> {
    let mut headers = parts.headers.clone();
    for name in [
        CONTENT_TYPE,
        CONTENT_LENGTH,
        CONTENT_ENCODING,
        TRANSFER_ENCODING,
        EXPECT,
    ] {
        headers.remove(name);
    }
    let conditional: Vec<_> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("if-"))
        .cloned()
        .collect();
    conditional.iter().for_each(|k| drop(headers.remove(k)));
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    headers.insert(
        s.settings.events.request_id_header.clone(),
        id.value().clone(),
    );
    let target = match parts.uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let mut request = Request::builder()
        .method(Method::GET)
        .uri(target)
        .version(parts.version)
        .body(())
        .map_err(|e| ReadError::Failed(e.to_string()))?;
    *request.headers_mut() = headers;
    Ok(request.into_parts().0)
}

/// The answer's status, body and `ETag`, within `proxy.request_timeout_ms` and bounded by
/// `audit.max_response_body`.
async fn fetch(
    s: &Arc<Sidecar>,
    pool: &Pool,
    ledger: &Ledger<'_>,
    read_parts: Parts,
    peer: &Peer,
) -> Result<(StatusCode, (Bytes, Option<HeaderValue>)), ReadError> {
    let upstream = &ledger.api.upstreams[ledger.upstream];
    let none = UpstreamBody::Buffered {
        data: None,
        trailers: None,
        exact: true,
    };
    let request = outgoing(s, upstream, read_parts, none, peer)
        .map_err(|e| ReadError::Failed(e.to_string()))?;
    let timeout = s.settings.proxy.request_timeout;
    let read = async {
        let response = send(s, upstream, pool, request)
            .await
            .map_err(|e| ReadError::Failed(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Ok((status, (Bytes::new(), None)));
        }
        let etag = response.headers().get(ETAG).cloned();
        let limit = s.settings.audit.max_response_body;
        let body = Limited::new(response.into_body(), limit).collect().await;
        let body = body.map_err(|e| {
            ReadError::Body(format!("{e} (audit.max_response_body is {limit} bytes)"))
        })?;
        Ok((status, (body.to_bytes(), etag)))
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(read) => read,
        Err(_) => Err(ReadError::Failed(format!(
            "no whole answer within {} ms",
            timeout.as_millis()
        ))),
    }
}
