//! One request, start to finish: read (and maybe buffer) the body, audit, decide, forward,
//! correlate the upstream's answer, record. The response streams back as it arrives.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, HOST, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use serde_json::json;

use super::body::{Captured, UpstreamBody, capture};
use super::headers::{add_forwarded, new_request_id, strip_hop_by_hop, value_text};
use super::late::{Late, LateMeta, LateTasks, Remember};
use super::problem;
use super::tee::Tee;
use super::upstream::{cause, root_cause};
use super::{Revision, Sidecar};
use crate::audit::audit;
use crate::contract::Operation;
use crate::finding::{Finding, Kind, Location};
use crate::memory::{Key, scope_of};
use crate::policy::Action;
use crate::request::{Headers, RequestView};
use crate::silent::{Tracker, resource_key};
use crate::sink::{Event, EventFinding, NO_OPERATION, Outcome, SECRET_HEADERS};

pub type ResponseBody = Either<Tee, Full<Bytes>>;

fn header_text(headers: &http::HeaderMap, name: &str) -> Option<String> {
    value_text(headers.get(name))
}

/// Header lookup for the audit over hyper's header map.
struct HeaderView<'a>(&'a http::HeaderMap);

impl Headers for HeaderView<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).and_then(|v| v.to_str().ok())
    }
}

/// What the audit concluded, carried to the recording step.
struct Audited<'c> {
    operation: Option<&'c Operation>,
    findings: Vec<Finding>,
    /// The resource's memory key, for an operation with a remembered resource.
    memory_key: Option<Key>,
}

pub async fn handle(
    s: Arc<Sidecar>,
    req: Request<Incoming>,
    peer: SocketAddr,
    tls: bool,
) -> Result<Response<ResponseBody>, Infallible> {
    let (mut parts, body) = req.into_parts();
    // The spec in force when the request arrived; it stays with the request to its end.
    let rev = s.revision();
    let rid_header = HeaderName::from_bytes(s.config.events.request_id_header.as_bytes())
        .unwrap_or(HeaderName::from_static("x-request-id"));
    let request_id = match parts.headers.get(&rid_header).and_then(|v| v.to_str().ok()) {
        Some(id) => id.to_string(),
        None => {
            let id = new_request_id();
            if let Ok(v) = HeaderValue::from_str(&id) {
                parts.headers.insert(rid_header.clone(), v);
            }
            id
        }
    };
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());

    let (audited, body, captured) = if !s.config.audit.enabled {
        s.metrics.unaudited("audit_off");
        (
            Audited {
                operation: None,
                findings: Vec::new(),
                memory_key: None,
            },
            UpstreamBody::Replay {
                prefix: Default::default(),
                rest: body,
            },
            None,
        )
    } else {
        match capture(body, s.config.audit.max_body, declared).await {
            Err(e) => {
                let detail = format!("the request body could not be read: {e}");
                let resp = problem::response(
                    StatusCode::BAD_REQUEST,
                    "Bad request body",
                    &detail,
                    &request_id,
                    None,
                );
                return Ok(resp.map(|b| Either::Right(Full::new(b))));
            }
            Ok(Captured::Complete(bytes, forward)) => {
                let audited = run_audit(&s, &rev, &parts, &path_and_query, Some(&bytes), false);
                (audited, forward, Some(bytes))
            }
            Ok(Captured::TooLarge(forward)) => {
                s.metrics.unaudited("body_too_large");
                (
                    run_audit(&s, &rev, &parts, &path_and_query, None, true),
                    forward,
                    None,
                )
            }
        }
    };

    // Silent-clear memory: a replace write is compared with the last GET of the resource.
    let mut audited = audited;
    let memory_key = audited.memory_key.take();
    let tracker = Tracker {
        memory: &s.memory,
        field_maps: &s.config.memory.field_map,
    };
    let at_risk = match (audited.operation, &memory_key) {
        (Some(op), Some(key)) => {
            tracker.before_write(op, key, SystemTime::now(), &mut audited.findings)
        }
        _ => Vec::new(),
    };
    // Shared, not copied: most responses raise nothing, and this runs for every request.
    let late_meta = audited.operation.map(|_| LateMeta {
        tool: parts.headers.get(&s.config.events.tool_header).cloned(),
        traceparent: parts.headers.get("traceparent").cloned(),
        uri: parts.uri.clone(),
    });
    let audited = audited;
    let op_id = audited.operation.map(|op| op.id.as_str());
    let blocking = s.policy.blocking(op_id, &audited.findings);
    // What the event needs from the request, taken only when there is something to report,
    // so that a clean request's headers move upstream without a copy.
    let meta = (!audited.findings.is_empty())
        .then(|| Meta::new(&s, &rev, &parts, &path_and_query, captured.as_deref()));
    let record = Record {
        s: &s,
        revision: &rev.spec.revision,
        request_id: &request_id,
        audited: &audited,
        meta,
    };
    if !blocking.is_empty() {
        let resp = problem::blocked(&blocking, &request_id);
        let resp = if blocking.iter().any(|f| f.kind == Kind::SilentClearRisk) {
            problem::silent_clear(resp, &blocking)
        } else {
            resp
        };
        let mut kinds: Vec<&str> = blocking.iter().map(|f| f.kind.as_str()).collect();
        kinds.dedup();
        for kind in kinds {
            s.metrics.blocked(op_id.unwrap_or(NO_OPERATION), kind);
        }
        record.finish(Outcome::Blocked, Some(422), Vec::new());
        return Ok(resp.map(|b| Either::Right(Full::new(b))));
    }

    let original_host = parts.headers.get(HOST).cloned().or_else(|| {
        parts
            .uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    });
    let mut forward_parts = parts;
    strip_hop_by_hop(&mut forward_parts.headers);
    if s.config.proxy.forwarded_headers {
        add_forwarded(
            &mut forward_parts.headers,
            &peer.ip().to_string(),
            if tls { "https" } else { "http" },
            original_host.as_ref(),
        );
    }
    if s.config.proxy.preserve_host {
        if let Some(host) = original_host {
            forward_parts.headers.insert(HOST, host);
        }
    } else if let Ok(host) = HeaderValue::from_str(s.upstream.authority.as_str()) {
        forward_parts.headers.insert(HOST, host);
    }
    forward_parts.version = Version::HTTP_11;
    forward_parts.uri = match s.upstream.uri(&path_and_query) {
        Ok(uri) => uri,
        Err(e) => {
            let resp = problem::response(
                StatusCode::BAD_REQUEST,
                "Bad request target",
                &format!("the request target cannot be forwarded: {e}"),
                &request_id,
                None,
            );
            return Ok(resp.map(|b| Either::Right(Full::new(b))));
        }
    };

    let started = Instant::now();
    let sent = tokio::time::timeout(
        Duration::from_millis(s.config.proxy.request_timeout_ms),
        s.client.request(Request::from_parts(forward_parts, body)),
    )
    .await;
    s.metrics.upstream_seconds(started.elapsed().as_secs_f64());
    let (status, title, detail, cause) = match sent {
        Ok(Ok(mut resp)) => {
            let status = resp.status();
            let mut extra = Vec::new();
            if status.is_client_error() && !audited.findings.is_empty() {
                extra.push(rejected(status, &audited.findings));
            }
            strip_hop_by_hop(resp.headers_mut());
            let report = s.config.proxy.report_header && !audited.findings.is_empty();
            if report
                && let Ok(v) =
                    HeaderValue::from_str(&compact(audited.findings.iter().chain(&extra)))
            {
                resp.headers_mut()
                    .insert(HeaderName::from_static("driftwatch-findings"), v);
            }
            record.finish(Outcome::Forwarded, Some(status.as_u16()), extra);
            let (Some(op), Some(meta)) = (audited.operation, late_meta) else {
                return Ok(resp.map(|b| Either::Left(Tee::pass(b))));
            };
            let remember = match memory_key {
                Some(key) if status.is_success() && (op.remembers || !at_risk.is_empty()) => {
                    Some(Remember { key, at_risk })
                }
                _ => None,
            };
            let rate = s.config.audit.response_sample_rate;
            let late = Late {
                s: s.clone(),
                rev: rev.clone(),
                op_id: op.id.clone(),
                request_id: request_id.clone(),
                meta,
                status: status.as_u16(),
                content_type: resp.headers().get(http::header::CONTENT_TYPE).cloned(),
                encoding: resp.headers().get(http::header::CONTENT_ENCODING).cloned(),
                audit_body: rate >= 1.0 || (rate > 0.0 && fastrand::f64() < rate),
                remember,
            };
            if !late.wants_body() {
                late.run(None);
                return Ok(resp.map(|b| Either::Left(Tee::pass(b))));
            }
            let limit = s.config.audit.max_response_body;
            let on_end = Box::new(move |copy| LateTasks::spawn(late, copy));
            return Ok(resp.map(|b| Either::Left(Tee::copying(b, limit, on_end))));
        }
        Ok(Err(e)) => {
            let cause = cause(&e);
            let detail = format!(
                "driftwatch could not reach the upstream {}: {cause} error: {}",
                s.upstream.authority,
                root_cause(&e)
            );
            (
                StatusCode::BAD_GATEWAY,
                "Upstream unreachable",
                detail,
                cause,
            )
        }
        Err(_) => {
            let detail = format!(
                "the upstream {} did not answer within {} ms",
                s.upstream.authority, s.config.proxy.request_timeout_ms
            );
            (
                StatusCode::GATEWAY_TIMEOUT,
                "Upstream timeout",
                detail,
                "timeout",
            )
        }
    };
    s.metrics.upstream_error(cause);
    record.finish(Outcome::UpstreamError, Some(status.as_u16()), Vec::new());
    let resp = problem::response(status, title, &detail, &request_id, None);
    Ok(resp.map(|b| Either::Right(Full::new(b))))
}

/// Audit the request; an internal failure is counted and the request goes on unaudited.
fn run_audit<'c>(
    s: &Sidecar,
    rev: &'c Revision,
    parts: &http::request::Parts,
    path_and_query: &str,
    body: Option<&[u8]>,
    too_large: bool,
) -> Audited<'c> {
    let started = Instant::now();
    let headers = HeaderView(&parts.headers);
    let view = RequestView::new(
        parts.method.as_str(),
        path_and_query,
        &headers,
        body.filter(|b| !b.is_empty()),
    );
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let a = audit(&rev.contract, &view);
        let key = a
            .operation
            .filter(|_| s.config.memory.enabled)
            .and_then(|op| {
                let credential = view.headers.get(&s.config.memory.scope_header);
                resource_key(op, &a.path_values, scope_of(credential))
            });
        (a.operation, a.findings, key)
    }));
    s.metrics.audit_seconds(started.elapsed().as_secs_f64());
    match result {
        Ok((operation, mut findings, memory_key)) => {
            if too_large {
                findings.retain(|f| {
                    f.location != Location::Body && f.kind != Kind::UnsupportedMediaType
                });
                findings.push(
                    Finding::new(Kind::Unaudited, Location::Body, "")
                        .observed("body larger than audit.max_body")
                        .message(format!(
                            "the body is larger than {} bytes and was forwarded unaudited",
                            s.config.audit.max_body
                        )),
                );
            }
            if let Some(op) = operation {
                // Parts of its spec were skipped at load: what they would have checked was not.
                for reason in &op.skipped {
                    s.metrics.unaudited(reason.unaudited_reason());
                }
                findings
                    .iter_mut()
                    .filter(|f| f.operation.is_none())
                    .for_each(|f| f.operation = Some(op.id.clone()));
            }
            Audited {
                operation,
                findings,
                memory_key,
            }
        }
        Err(_) => {
            s.metrics.audit_error();
            tracing::error!(method = %parts.method, path = %parts.uri.path(), "internal audit error; request forwarded unaudited");
            Audited {
                operation: None,
                findings: Vec::new(),
                memory_key: None,
            }
        }
    }
}

/// `upstream_rejected`: the API refused a request that had findings, so those findings are
/// the likely cause; the message names the first.
fn rejected(status: StatusCode, findings: &[Finding]) -> Finding {
    let first = &findings[0];
    Finding::new(Kind::UpstreamRejected, first.location, first.field.clone())
        .observed(status.as_u16().to_string())
        .message(format!(
            "the API answered {} to a request with {} finding(s); first: {} `{}`",
            status.as_u16(),
            findings.len(),
            first.kind,
            first.field
        ))
}

/// `kind:field` pairs for the `driftwatch-findings` response header, bounded in length.
fn compact<'f>(findings: impl Iterator<Item = &'f Finding>) -> String {
    let mut out = String::new();
    for f in findings {
        let item = format!("{}:{}", f.kind, f.field);
        if out.len() + item.len() + 1 > 512 {
            break;
        }
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(&item);
    }
    out.chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control())
        .collect()
}

/// The request's side of an audit event.
struct Meta {
    method: String,
    path: String,
    tool: Option<String>,
    traceparent: Option<String>,
    values: Option<serde_json::Value>,
}

impl Meta {
    fn new(
        s: &Sidecar,
        rev: &Revision,
        parts: &http::request::Parts,
        path_and_query: &str,
        body: Option<&[u8]>,
    ) -> Meta {
        Meta {
            method: parts.method.to_string(),
            path: parts.uri.path().to_string(),
            tool: header_text(&parts.headers, &s.config.events.tool_header),
            traceparent: header_text(&parts.headers, "traceparent"),
            values: s
                .config
                .events
                .log_values
                .then(|| values(s, &rev.contract.secrets, parts, path_and_query, body)),
        }
    }
}

/// Query, body and non-secret headers, for `log_values = true` only. The spec's apiKey
/// credentials are secrets whatever the config says: their query values are redacted and their
/// headers left out.
fn values(
    s: &Sidecar,
    secrets: &crate::contract::Secrets,
    parts: &http::request::Parts,
    path_and_query: &str,
    body: Option<&[u8]>,
) -> serde_json::Value {
    let secret = |name: &str| {
        SECRET_HEADERS.contains(&name)
            || secrets.is_secret_header(name)
            || s.config
                .events
                .secret_headers
                .iter()
                .any(|h| h.eq_ignore_ascii_case(name))
    };
    let headers: serde_json::Map<String, serde_json::Value> = parts
        .headers
        .iter()
        .filter(|(k, _)| !secret(k.as_str()))
        .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or("(binary)"))))
        .collect();
    let query = path_and_query
        .split_once('?')
        .map(|(_, q)| secrets.redact_query(q));
    let body = body.map(|b| String::from_utf8_lossy(&b[..b.len().min(4096)]).into_owned());
    json!({"query": query, "body": body, "headers": headers})
}

/// The recording step shared by every outcome: metrics, then (when there were findings) an
/// event in the log and the recent ring.
struct Record<'a> {
    s: &'a Sidecar,
    /// The spec revision the request was audited with.
    revision: &'a str,
    request_id: &'a str,
    audited: &'a Audited<'a>,
    meta: Option<Meta>,
}

impl Record<'_> {
    fn finish(self, outcome: Outcome, status: Option<u16>, extra: Vec<Finding>) {
        let s = self.s;
        let (op_id, template) = match self.audited.operation {
            Some(op) => (op.id.as_str(), Some(op.template.clone())),
            None => (NO_OPERATION, None),
        };
        s.metrics.request(op_id, outcome);
        let all: Vec<&Finding> = self.audited.findings.iter().chain(&extra).collect();
        for f in &all {
            s.metrics.finding(op_id, f);
        }
        let Some(meta) = self.meta else { return };
        let operation = self.audited.operation.map(|op| op.id.as_str());
        let findings = all
            .iter()
            .map(|f| EventFinding {
                finding: (*f).clone(),
                action: if outcome == Outcome::Blocked
                    && s.policy.action(operation, f) == Action::Block
                {
                    "block"
                } else {
                    "log"
                },
            })
            .collect();
        let event = Arc::new(Event {
            at: SystemTime::now(),
            request_id: self.request_id.to_string(),
            traceparent: meta.traceparent,
            tool: meta.tool,
            operation: operation.map(String::from),
            method: meta.method,
            path_template: template,
            path: meta.path,
            status,
            action: match outcome {
                Outcome::Forwarded => "forwarded",
                Outcome::Blocked => "blocked",
                Outcome::UpstreamError => "upstream_error",
            },
            mode: s.policy.mode.as_str(),
            spec_revision: self.revision.to_string(),
            findings,
            values: meta.values,
        });
        if !s.events.log(event.clone()) {
            s.metrics.event_dropped();
        }
        s.recent.push(event);
    }
}
