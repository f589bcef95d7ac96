//! The admin listener, separate from the proxy port: `/metrics` for Prometheus, `/healthz` and
//! `/readyz` for the orchestrator, `/findings`, `/coverage`, `/incidents`, `/spec` and
//! `/spec/diff` for the operator, and `POST /spec/reload`, the one request here that changes what the proxy does.
//! It sees the proxy only through a narrow handle ([`Admin`]): the shared sinks, the readiness flag, and
//! [`Revisions`] to read the spec in force and ask for a reload. With `admin.token_file` set,
//! what shows traffic or the spec, and the reload, need the bearer token; what Prometheus and
//! the kubelet read stays open.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use serde_json::json;
use sha2::Digest;

use crate::policy::Mode;
use crate::revision::{ReloadError, Revision, Revisions};
use crate::sink::{Recent, RecentQuery};

/// What the admin listener reads and may trigger.
pub struct Admin {
    pub registry: Arc<prometheus_client::registry::Registry>,
    pub recent: Arc<Recent>,
    /// Silent clears as incidents, at `/incidents`.
    pub incidents: Arc<dyn crate::incident::View>,
    pub ready: Arc<std::sync::atomic::AtomicBool>,
    /// Each API's mode, in the order of `Revisions::all`.
    pub modes: Vec<Mode>,
    pub revisions: Arc<dyn Revisions>,
    /// Required on the guarded routes when set.
    pub token: Option<Token>,
    /// Lines `/readyz` adds to its answer: the shared memory store's state, with
    /// `memory.backend = "redis"`, and the warning when most requests route nowhere.
    pub ready_detail: Option<Arc<dyn Fn() -> String + Send + Sync>>,
    /// What `driftwatch wrap` learned of its MCP server's tools, at `/tools/map` and
    /// `/tools/check`; `None` elsewhere (404).
    pub tools: Option<Arc<dyn ToolsView>>,
    /// What replace writes' answers taught, shown per API at `/spec`.
    pub survival: Arc<crate::memory::survival::Survival>,
}

/// The tools of the MCP server behind the proxy, as `driftwatch wrap` sees them.
pub trait ToolsView: Send + Sync {
    /// API `api`'s learned map (the first API's when `None`), in the `tools --map` format
    /// (TOML); or why there is none (no API of that name).
    fn map(&self, api: Option<&str>) -> Result<String, String>;
    /// The live catalog check's report, as `tools --format json` writes it; or why there is
    /// none (no `tools/list` answer yet, or one past the message bound).
    fn check(&self) -> Result<String, String>;
}

/// A bearer token, kept as its SHA-256: a request's token is hashed and the digests compared,
/// so the comparison's time says nothing about the token's bytes.
#[derive(Clone)]
pub struct Token([u8; 32]);

impl Token {
    pub fn new(secret: &[u8]) -> Token {
        Token(sha2::Sha256::digest(secret).into())
    }

    /// Whether the request's `Authorization: Bearer …` carries this token (the scheme's name
    /// in any case, as RFC 9110 section 11.1 has it).
    fn admits(&self, req: &Request<Incoming>) -> bool {
        req.headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| bearer(v.as_bytes()))
            .is_some_and(|given| Token::new(given).0 == self.0)
    }
}

/// The credentials of a `Bearer` authorization, whatever the scheme's case.
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, credentials) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| credentials.trim_ascii())
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// Routes that show traffic or the spec, or change what the proxy does.
const GUARDED: [&str; 8] = [
    "/findings",
    "/coverage",
    "/incidents",
    "/spec",
    "/spec/diff",
    "/spec/reload",
    "/tools/map",
    "/tools/check",
];

/// `/tools/map[?api=NAME]` (TOML) or `/tools/check` (JSON; 404 until the server has listed
/// its tools).
fn tools(view: &dyn ToolsView, path: &str, query: &str) -> Response<Full<Bytes>> {
    if path == "/tools/map" {
        let api = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "api");
        return match view.map(api.as_ref().map(|(_, v)| v.as_ref())) {
            Ok(map) => respond(StatusCode::OK, "application/toml", map),
            Err(why) => respond(StatusCode::NOT_FOUND, "text/plain", format!("{why}\n")),
        };
    }
    match view.check() {
        Ok(report) => respond(StatusCode::OK, "application/json", report),
        Err(why) => respond(StatusCode::NOT_FOUND, "text/plain", format!("{why}\n")),
    }
}

/// Serve the admin routes on every connection `listener` admits, under its bounds
/// (`admin.max_connections`, `admin.header_read_timeout_ms`, `admin.idle_timeout_ms`).
pub async fn serve(listener: crate::listener::Listener, s: Arc<Admin>) {
    crate::listener::serve(listener, move |req| answer(s.clone(), req)).await;
}

async fn answer(
    s: Arc<Admin>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let query = req.uri().query().unwrap_or("");
    let path = req.uri().path();
    if let Some(token) = &s.token
        && GUARDED.contains(&path)
        && !token.admits(&req)
    {
        return Ok(unauthorized(path));
    }
    let reply = match path {
        "/metrics" => metrics(&s, &req),
        "/healthz" => respond(StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" => ready(&s),
        "/spec" => spec(&s),
        "/spec/reload" if req.method() == http::Method::POST => {
            let only = form_urlencoded::parse(query.as_bytes())
                .find(|(k, _)| k == "api")
                .map(|(_, v)| v.into_owned());
            let outcomes = s.revisions.reload("POST /spec/reload", only.as_deref()).await;
            reloaded(&outcomes, &s.revisions.all())
        }
        "/spec/reload" => respond(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "POST /spec/reload reloads the spec file (?api=NAME: that API's alone)\n".into(),
        ),
        "/spec/diff" => spec_diff(&s),
        "/findings" => findings(&s, query),
        "/coverage" => coverage(&s, query),
        "/incidents" => incidents(&s, query).await,
        "/tools/map" | "/tools/check" if let Some(view) = &s.tools => tools(view.as_ref(), path, query),
        _ => respond(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /metrics, /healthz, /readyz, /findings, /coverage, /incidents, /spec, /spec/diff, POST /spec/reload\n".into(),
        ),
    };
    Ok(reply)
}

/// `/metrics`: the OpenMetrics format, with exemplars, to a scraper that asks for it (as
/// Prometheus does with exemplar storage on); the text format 0.0.4 to anything else.
fn metrics(s: &Admin, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let accept = req.headers().get(http::header::ACCEPT);
    let accept = accept.and_then(|a| a.to_str().ok()).unwrap_or("");
    if accept.contains("application/openmetrics-text") {
        let text = crate::sink::encode_openmetrics(&s.registry);
        let media = "application/openmetrics-text; version=1.0.0; charset=utf-8";
        return respond(StatusCode::OK, media, text);
    }
    let text = crate::sink::encode(&s.registry);
    respond(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        text,
    )
}

/// `/findings`: the recent events the filters keep, newest first.
fn findings(s: &Admin, query: &str) -> Response<Full<Bytes>> {
    match parse_query(query) {
        Ok(q) => {
            let events = s.recent.query(&q);
            let body = json!({"events": events});
            respond(StatusCode::OK, "application/json", body.to_string())
        }
        Err(e) => respond(StatusCode::BAD_REQUEST, "text/plain", format!("{e}\n")),
    }
}

/// `/coverage[?api=NAME]`: what the traffic exercised of the spec in force (the first API's
/// unless named), in the shape of `check --coverage --format json`'s `coverage` object.
fn coverage(s: &Admin, query: &str) -> Response<Full<Bytes>> {
    let all = s.revisions.all();
    let wanted = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "api");
    let found = match &wanted {
        None => all.first(),
        Some((_, name)) => all
            .iter()
            .find(|(n, _)| n.as_deref() == Some(name.as_ref())),
    };
    let Some((_, rev)) = found else {
        let why = format!(
            "no API named {:?}\n",
            wanted.map(|(_, v)| v).unwrap_or_default()
        );
        return respond(StatusCode::NOT_FOUND, "text/plain", why);
    };
    let report = rev.coverage.report(&rev.contract, &rev.spec.revision);
    match serde_json::to_string(&report) {
        Ok(body) => respond(StatusCode::OK, "application/json", body),
        Err(e) => respond(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            format!("{e}\n"),
        ),
    }
}

/// `/incidents`: the silent clears the filters keep, the most recently changed first.
async fn incidents(s: &Admin, query: &str) -> Response<Full<Bytes>> {
    match incidents_query(query) {
        Ok(q) => {
            let incidents = s.incidents.query(q).await;
            let body = json!({"incidents": incidents});
            respond(StatusCode::OK, "application/json", body.to_string())
        }
        Err(e) => respond(StatusCode::BAD_REQUEST, "text/plain", format!("{e}\n")),
    }
}

/// 401 for a guarded path asked without the admin token, with its challenge.
fn unauthorized(path: &str) -> Response<Full<Bytes>> {
    let mut reply = respond(
        StatusCode::UNAUTHORIZED,
        "text/plain",
        format!("{path} needs the admin token: Authorization: Bearer <admin.token_file>\n"),
    );
    let challenge = HeaderValue::from_static("Bearer realm=\"driftwatch admin\"");
    reply
        .headers_mut()
        .insert(http::header::WWW_AUTHENTICATE, challenge);
    reply
}

/// `/readyz`: ready once the proxy serves, whether or not the store answers (observe mode
/// never stops traffic), with the lines `ready_detail` adds.
fn ready(s: &Admin) -> Response<Full<Bytes>> {
    if !s.ready.load(Ordering::SeqCst) {
        return respond(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "not ready\n".into(),
        );
    }
    let detail = s.ready_detail.as_ref().map(|line| line());
    let detail = detail
        .filter(|d| !d.is_empty())
        .map(|d| d + "\n")
        .unwrap_or_default();
    respond(StatusCode::OK, "text/plain", format!("ready\n{detail}"))
}

/// `/spec`: the first API's fields at the top, as a sidecar of one API always answered; each
/// API's own, its mode among them, under `apis` when there are several.
fn spec(s: &Admin) -> Response<Full<Bytes>> {
    let all = s.revisions.all();
    let each = |(i, (name, rev)): (usize, &(Option<String>, Arc<Revision>))| {
        let (spec, warnings) = (&rev.spec, &rev.contract.warnings());
        let mode = s.modes.get(i).map(|m| m.as_str());
        let bundled: Vec<_> = rev.files.bundled.iter().map(|f| &f.path).collect();
        let overlays: Vec<_> = rev.files.overlays.iter().map(|f| &f.path).collect();
        json!({"api": name, "mode": mode, "revision": spec.revision, "openapi": spec.openapi,
               "operations": spec.operations, "source": spec.source, "bundled": bundled,
               "overlays": overlays, "documents": spec.documents,
               "warning_count": warnings.len(),
               "warnings": &warnings[..warnings.len().min(200)],
               "learned_writes": learned_writes(&rev.contract, &s.survival, name.as_deref())})
    };
    let mut body = each((0, &all[0]));
    if all.len() > 1 {
        body["apis"] = all.iter().enumerate().map(each).collect();
    }
    respond(StatusCode::OK, "application/json", body.to_string())
}

/// `/spec/diff`: what changed at each API's last reload.
fn spec_diff(s: &Admin) -> Response<Full<Bytes>> {
    let all = s.revisions.all();
    let each = |(name, rev): &(Option<String>, Arc<Revision>)| json!({"api": name, "from": rev.previous, "to": rev.spec.revision, "changes": rev.changes});
    let mut body = each(&all[0]);
    if all.len() > 1 {
        body["apis"] = all.iter().map(each).collect();
    }
    respond(StatusCode::OK, "application/json", body.to_string())
}

/// The replace writes whose answers taught something: how each is read now, and why.
fn learned_writes(
    contract: &crate::contract::Contract,
    survival: &crate::memory::survival::Survival,
    api: Option<&str>,
) -> serde_json::Value {
    use crate::memory::survival::{Learned, taught};
    let each = |(op, learned): (&crate::contract::Operation, Learned)| {
        json!({"operation": op.id, "method": op.method, "template": op.template,
               "reads_as": learned.reading(), "reason": learned.why(),
               "kept": learned.kept, "erased": learned.erased})
    };
    taught(contract, survival, api.unwrap_or_default())
        .into_iter()
        .map(each)
        .collect()
}

/// `POST /spec/reload`'s answer: 200 when every API asked for reloaded, else 422. With one
/// API, its outcome at the top, as before; with several, each in `apis` as well.
fn reloaded(
    outcomes: &crate::revision::Reloaded,
    all: &[(Option<String>, Arc<Revision>)],
) -> Response<Full<Bytes>> {
    let in_force = |name: &Option<String>| {
        all.iter()
            .find(|(n, _)| n == name)
            .map(|(_, rev)| rev.spec.revision.clone())
    };
    let each =
        |(name, outcome): &(Option<String>, Result<Arc<Revision>, ReloadError>)| match outcome {
            Ok(rev) => json!({"api": name, "result": "success", "revision": rev.spec.revision,
                          "previous": rev.previous, "changes": rev.changes.len()}),
            Err(error) => json!({"api": name, "result": "error", "error": error.to_string(),
                             "revision": in_force(name)}),
        };
    let Some(first) = outcomes.first() else {
        let body = json!({"result": "error", "error": "no API of that name"});
        return respond(StatusCode::NOT_FOUND, "application/json", body.to_string());
    };
    let failed = outcomes.iter().any(|(_, o)| o.is_err());
    let mut body = each(first);
    if outcomes.len() > 1 {
        body["result"] = json!(if failed { "error" } else { "success" });
        body["apis"] = outcomes.iter().map(each).collect();
    }
    let status = match failed {
        true => StatusCode::UNPROCESSABLE_ENTITY,
        false => StatusCode::OK,
    };
    respond(status, "application/json", body.to_string())
}

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    r
}

/// A `/findings` filter the client got wrong.
#[derive(Debug, thiserror::Error)]
enum QueryError {
    #[error("limit `{0}` is not a number")]
    Limit(String),
    #[error("since `{0}`: {1}")]
    Since(String, humantime::TimestampError),
    #[error("since `{0}`: past any time this system can hold")]
    Past(String),
    #[error("unknown filter `{0}`: use {1}")]
    Unknown(String, &'static str),
}

/// `kind`, `operation`, `limit`, and `since` as RFC 3339 or Unix seconds.
fn parse_query(query: &str) -> Result<RecentQuery, QueryError> {
    let mut q = RecentQuery::default();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match key.as_ref() {
            "kind" => q.kind = Some(value.into_owned()),
            "operation" => q.operation = Some(value.into_owned()),
            "limit" => q.limit = Some(limit(&value)?),
            "since" => q.since = Some(since(&value)?),
            other => {
                let known = "kind, operation, since, limit";
                return Err(QueryError::Unknown(other.to_string(), known));
            }
        }
    }
    Ok(q)
}

/// `/incidents`' filters: `id`, `operation`, `field`, `tool`, `limit`, and `since` as RFC 3339
/// or Unix seconds.
fn incidents_query(query: &str) -> Result<crate::incident::Query, QueryError> {
    let mut q = crate::incident::Query::default();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        let text = Some(value.to_string());
        match key.as_ref() {
            "id" => q.id = text,
            "operation" => q.operation = text,
            "field" => q.field = text,
            "tool" => q.tool = text,
            "limit" => q.limit = Some(limit(&value)?),
            "since" => q.since = Some(since(&value)?),
            other => {
                let known = "id, operation, field, tool, since, limit";
                return Err(QueryError::Unknown(other.to_string(), known));
            }
        }
    }
    Ok(q)
}

fn limit(value: &str) -> Result<usize, QueryError> {
    value
        .parse()
        .map_err(|_| QueryError::Limit(value.to_string()))
}

/// A time as RFC 3339 or Unix seconds.
fn since(value: &str) -> Result<SystemTime, QueryError> {
    match value.parse::<u64>() {
        Ok(secs) => (SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs)))
            .ok_or_else(|| QueryError::Past(value.to_string())),
        Err(_) => humantime::parse_rfc3339_weak(value)
            .map_err(|e| QueryError::Since(value.to_string(), e)),
    }
}
