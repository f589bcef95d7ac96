//! The MCP gateway that `driftwatch mcp` runs: the spec's operations served as MCP tools over
//! streamable HTTP (at `/mcp`) or stdio, built on the official Rust SDK (`rmcp`). The tool list
//! is the one `tools --generate` writes, from the spec in force: exposure is off until an
//! operation is enabled. A call becomes the request its operation describes (`mcp`) and goes
//! through the sidecar's own pipeline, run in this process on a loopback port: audited,
//! remembered, refused in enforce mode, counted and logged like any other request. When the
//! spec changes, the tool list follows it and every connected client is sent
//! `notifications/tools/list_changed`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{
    NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext, SubscriptionSink,
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value};
use tokio::net::TcpListener;

use crate::contract::{Contract, Operation};
use crate::listener::Listener;
use crate::proxy::Sidecar;
use crate::settings::Settings;
use crate::start::{build, serve, shutdown_signal};

pub mod stdio;

/// What the gateway serves, as `driftwatch mcp`'s flags say.
pub struct Plan {
    /// The operations `--enable` lists, or `None` for `--all`.
    pub enabled: Option<Vec<String>>,
    /// The `--header`s every call sends, read at start.
    pub credentials: Vec<(http::HeaderName, http::HeaderValue)>,
    pub serve: Serve,
}

/// Where MCP clients reach the gateway.
pub enum Serve {
    /// stdin and stdout: the end of stdin ends the process.
    Stdio,
    /// Streamable HTTP at `/mcp` on `listen`, for loopback's `Host` and `allowed_hosts`.
    Http {
        listen: SocketAddr,
        allowed_hosts: Vec<String>,
    },
}

/// Build the sidecar and serve the gateway beside it until stdin ends (stdio) or a signal.
pub async fn run(settings: Settings, plan: Plan) -> anyhow::Result<()> {
    let admin_listen = settings.admin.listen;
    let sidecar = Arc::new(build(settings, None, crate::proxy::ToolSource::Header).await?);
    let bind = |addr| async move {
        TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))
    };
    let proxy = bind(sidecar.settings.proxy.listen).await?;
    let admin = bind(admin_listen).await?;
    let gateway = Gateway::new(
        sidecar.clone(),
        plan.enabled,
        plan.credentials,
        proxy.local_addr()?,
    );
    // Unknown names in --enable are an error at start, not a silently smaller tool list.
    let tools = gateway.tools()?.len();
    gateway.say_uncredentialed();
    tokio::spawn(gateway.clone().announce_changes());
    let mode = sidecar.apis[0].settings.policy.mode.as_str();
    let upstream = sidecar.settings.upstream()?.authority.clone();
    let Serve::Http {
        listen,
        allowed_hosts,
    } = plan.serve
    else {
        tracing::info!(admin = %admin.local_addr()?, %upstream, mode, tools, "driftwatch mcp serving on stdio");
        let stdio = stdio::bounded(sidecar.settings.mcp.messages);
        let session = rmcp::ServiceExt::serve(gateway, stdio).await?;
        let ended = async move {
            let _ = session.waiting().await;
            tracing::info!("stdin closed: draining");
        };
        serve(proxy, admin, sidecar, ended).await?;
        return Ok(());
    };
    let mcp = Listener::new(
        bind(listen).await?,
        sidecar.settings.mcp.bounds.clone(),
        sidecar.limit_hits(),
    );
    tracing::info!(listen = %mcp.local_addr()?, admin = %admin.local_addr()?, %upstream, mode, tools, "driftwatch mcp serving at /mcp");
    tokio::spawn(accept(mcp, gateway, allowed_hosts));
    serve(proxy, admin, sidecar, shutdown_signal()).await?;
    Ok(())
}

/// Serve MCP's streamable HTTP on every connection `listener` admits (under its bounds), for
/// requests whose `Host` is loopback's or one of `allowed_hosts`.
async fn accept(listener: Listener, gateway: Gateway, allowed_hosts: Vec<String>) {
    let limits = gateway.shared.sidecar.settings.mcp.clone();
    let mut config = StreamableHttpServerConfig::default();
    config.allowed_hosts.extend(allowed_hosts);
    let config = config.with_max_request_body_bytes(limits.messages.bytes);
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(limits.session_idle_timeout);
    let sessions = Arc::new(sessions);
    let front = Guard {
        service: StreamableHttpService::new(move || Ok(gateway.clone()), sessions.clone(), config),
        sessions,
        limits,
    };
    crate::listener::serve(listener, move |req| front.clone().answer(req)).await;
}

type McpBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// What stands before rmcp on the MCP listener: a message is read and held to its bounds
/// before rmcp parses it, and a new session past `mcp.max_sessions` is refused; each refusal
/// is a JSON-RPC error.
#[derive(Clone)]
struct Guard {
    service: StreamableHttpService<Gateway, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
    limits: crate::settings::McpSettings,
}

impl Guard {
    async fn answer(
        self,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> Result<hyper::Response<McpBody>, std::convert::Infallible> {
        if req.method() != http::Method::POST {
            return Ok(self.service.handle(req).await);
        }
        let limits = self.limits.messages;
        let (parts, body) = req.into_parts();
        let bytes = match Limited::new(body, limits.bytes).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return Ok(refusal(&crate::mcp::message::Refused::Bytes(limits.bytes)));
            }
            Err(e) => {
                let syntax = crate::mcp::message::Refused::Syntax(format!("the body: {e}"));
                return Ok(refusal(&syntax));
            }
        };
        if let Err(refused) = crate::mcp::message::check(&bytes, limits) {
            return Ok(refusal(&refused));
        }
        let new_session = !parts.headers.contains_key("mcp-session-id");
        if new_session && self.sessions.sessions.read().await.len() >= self.limits.max_sessions {
            let message = format!(
                "driftwatch has {} MCP sessions open (mcp.max_sessions): end one (DELETE) or retry later",
                self.limits.max_sessions
            );
            let error = crate::mcp::message::json_rpc_error(-32000, &message);
            return Ok(json_rpc(http::StatusCode::SERVICE_UNAVAILABLE, error));
        }
        let req = hyper::Request::from_parts(parts, Full::new(bytes));
        Ok(self.service.handle(req).await)
    }
}

/// A message refused before parsing: 400 for what is not JSON, 413 for what is too large.
fn refusal(refused: &crate::mcp::message::Refused) -> hyper::Response<McpBody> {
    let status = match refused {
        crate::mcp::message::Refused::Syntax(_) => http::StatusCode::BAD_REQUEST,
        _ => http::StatusCode::PAYLOAD_TOO_LARGE,
    };
    json_rpc(status, refused.json_rpc())
}

/// A JSON-RPC error as the answer to an HTTP request, with `status`.
fn json_rpc(status: http::StatusCode, error: String) -> hyper::Response<McpBody> {
    let mut response = hyper::Response::new(Full::new(Bytes::from(error)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// One gateway for every MCP session: the sidecar, and who to tell when the tools change.
#[derive(Clone)]
pub(super) struct Gateway {
    shared: Arc<Shared>,
}

struct Shared {
    sidecar: Arc<Sidecar>,
    enabled: Option<Vec<String>>,
    /// The sidecar's proxy, on loopback.
    proxy: SocketAddr,
    client: Client<HttpConnector, Full<Bytes>>,
    /// `--header`s: sent with every call, after the tool's own headers.
    credentials: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Clients of protocol versions before 2026-07-28, told on their session.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Clients of 2026-07-28 on, told on their `subscriptions/listen` stream while it is open.
    listening: Mutex<Vec<(u64, SubscriptionSink)>>,
    /// Names the streams in `listening` (request ids repeat across clients).
    next_stream: std::sync::atomic::AtomicU64,
    /// The tools of the last revision asked about, by its hash: a call looks its tool up in
    /// it, and a list of GitHub's 1,223 tools is generated once per revision, not per request.
    tools: Mutex<Option<(String, Arc<Vec<Tool>>)>>,
}

/// A body read back from the API, at most this many bytes.
const MAX_RESULT: usize = 8 << 20;

impl Gateway {
    pub(super) fn new(
        sidecar: Arc<Sidecar>,
        enabled: Option<Vec<String>>,
        credentials: Vec<(http::HeaderName, http::HeaderValue)>,
        proxy: SocketAddr,
    ) -> Gateway {
        let client = Client::builder(TokioExecutor::new()).build_http();
        let peers = Mutex::new(Vec::new());
        let shared = Shared {
            sidecar,
            enabled,
            proxy,
            client,
            credentials,
            peers,
            listening: Mutex::new(Vec::new()),
            next_stream: Default::default(),
            tools: Mutex::new(None),
        };
        Gateway {
            shared: Arc::new(shared),
        }
    }

    /// The tools of the spec in force, as `tools --generate` writes them; an enabled name the
    /// spec no longer has is left out with a warning (the spec is in force; the list is stale).
    /// Once, at start: the served operations whose `security` no `--header` (nor the upstream
    /// URL's `user:password@`) satisfies. Every call of their tools would be refused by the API
    /// and is `missing_credentials` here.
    fn say_uncredentialed(&self) {
        let rev = self.shared.sidecar.revision();
        let mut headers: Vec<(String, String)> = (self.shared.credentials.iter())
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let upstream = self.shared.sidecar.settings.upstream().ok();
        if let Some(basic) = upstream.and_then(|u| u.basic.as_ref()) {
            headers.push(("authorization".into(), basic.to_str().unwrap_or("").into()));
        }
        let call = crate::request::RequestView::new("GET", "/", &headers, None);
        let contract = &rev.contract;
        // In the spec's order, each once (the file may name one operation twice, or by id
        // and by `METHOD /path`).
        let enabled = self.enabled(contract);
        let served = |op: &&Operation| {
            enabled.as_ref().is_none_or(|enabled| {
                (enabled.iter()).any(|(_, o)| o.is_some_and(|o| o.index == op.index))
            })
        };
        let lacking: Vec<&str> = (contract.operations().iter().filter(served))
            .filter(|op| crate::audit::missing_credentials(op, &call).is_some())
            .map(|op| op.id.as_str())
            .collect();
        if let Some(first) = lacking.first() {
            tracing::warn!(
                operations = lacking.len(),
                first,
                "served tools' operations need a credential no --header gives: each call of \
                 them is missing_credentials, and the API will refuse it (pass it with --header)"
            );
        }
    }

    fn tools(&self) -> anyhow::Result<Arc<Vec<Tool>>> {
        let rev = self.shared.sidecar.revision();
        if let Some((hash, tools)) = &*self.shared.tools.lock().expect("tools")
            && *hash == rev.spec.revision
        {
            return Ok(tools.clone());
        }
        let contract = &rev.contract;
        let enabled = self.enabled(contract).map(|enabled| {
            (enabled.into_iter())
                .filter_map(|(name, op)| {
                    if op.is_none() {
                        tracing::warn!(operation = %name, "enabled, but not in the spec in force: not served");
                    }
                    op.map(|_| name.clone())
                })
                .collect::<Vec<_>>()
        });
        let catalog = crate::catalog::generate(contract, enabled.as_deref())?;
        let mut tools = catalog["tools"].as_array().cloned().unwrap_or_default();
        let reserved = self.reserved(contract);
        for tool in &mut tools {
            drop_reserved_headers(contract, tool, &reserved);
        }
        let tools: Arc<Vec<Tool>> = Arc::new(
            tools
                .into_iter()
                .map(|t| serde_json::from_value(t).context("a generated tool"))
                .collect::<anyhow::Result<_>>()?,
        );
        *self.shared.tools.lock().expect("tools") =
            Some((rev.spec.revision.clone(), tools.clone()));
        Ok(tools)
    }

    /// Each name `--enable` lists, with the operation it names in `contract` (`None`: not
    /// there); `None` for `--all`. Resolved here alone, per revision: a reload may drop one.
    fn enabled<'s, 'c>(
        &'s self,
        contract: &'c Contract,
    ) -> Option<Vec<(&'s String, Option<&'c Operation>)>> {
        let names = self.shared.enabled.as_ref()?;
        Some(
            names
                .iter()
                .map(|n| (n, crate::catalog::find_operation(contract, n)))
                .collect(),
        )
    }

    /// The header names no tool call may set, for `contract`: the operator's `--header`s and
    /// the spec's apiKey headers besides the names every request reserves.
    fn reserved(&self, contract: &Contract) -> crate::mcp::Reserved {
        let operator = self.shared.credentials.iter().map(|(n, _)| n.as_str());
        crate::mcp::Reserved::new(
            operator.chain(contract.secrets.headers.iter().map(String::as_str)),
        )
    }

    /// Every half second, compare the spec in force with the last one seen; on a change, tell
    /// every client that is still connected.
    async fn announce_changes(self) {
        let mut seen = self.shared.sidecar.revision().spec.revision.clone();
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = self.shared.sidecar.revision().spec.revision.clone();
            if now == seen {
                continue;
            }
            seen = now;
            self.say_unexposed();
            let peers: Vec<_> = self.shared.peers.lock().expect("peers").clone();
            let mut still = Vec::new();
            for peer in peers {
                if peer.notify_tool_list_changed().await.is_ok() {
                    still.push(peer);
                }
            }
            let sinks: Vec<_> = self.shared.listening.lock().expect("sinks").clone();
            let mut told = 0;
            for (_, sink) in sinks {
                told += usize::from(sink.notify_tool_list_changed().await.is_ok());
            }
            tracing::info!(revision = %seen, sessions = still.len(), subscriptions = told, "tools/list_changed sent");
            *self.shared.peers.lock().expect("peers") = still;
        }
    }

    /// The operations the new revision adds that `--enable` does not list: served only once
    /// someone decides to (a new endpoint is a decision, not an accident).
    fn say_unexposed(&self) {
        let rev = self.shared.sidecar.revision();
        let Some(enabled) = self.enabled(&rev.contract) else {
            return;
        };
        let exposed = |id: &str| (enabled.iter()).any(|(_, op)| op.is_some_and(|op| op.id == id));
        let added = rev
            .changes
            .iter()
            .filter(|c| c.kind == "operation_added" && !exposed(&c.operation));
        for change in added {
            tracing::warn!(
                operation = %change.operation,
                "new in the spec and not exposed: list it in the --enable file to serve it"
            );
        }
    }

    /// The request for `name` with `args`, through the sidecar, and its answer as a result.
    async fn call(&self, name: &str, args: &Map<String, Value>) -> CallToolResult {
        let rev = self.shared.sidecar.revision();
        let tools = self.tools().ok();
        let tool = tools
            .as_ref()
            .and_then(|tools| tools.iter().find(|t| t.name == name));
        // `_meta.operation` (method and template) where the spec repeats the operationId.
        let op = tool
            .and_then(|t| t.meta.as_deref())
            .and_then(crate::catalog::meta_operation)
            .and_then(|reference| crate::catalog::find_operation(&rev.contract, reference));
        let Some(op) = op else {
            return error_text(format!("no tool `{name}` is exposed"));
        };
        let base = rev.contract.base_paths().first().map_or("", String::as_str);
        let reserved = self.reserved(&rev.contract);
        let call = match crate::mcp::request(op, base, args, &reserved) {
            Ok(call) => call,
            Err(e) => return error_text(e.to_string()),
        };
        match self.send(call, name).await {
            Ok((status, content_type, body)) => result(status, content_type.as_deref(), &body),
            Err(e) => error_text(format!("driftwatch could not reach its proxy: {e}")),
        }
    }

    async fn send(
        &self,
        call: crate::mcp::Call,
        tool: &str,
    ) -> anyhow::Result<(u16, Option<String>, Bytes)> {
        let uri = format!("http://{}{}", self.shared.proxy, call.target);
        let mut req = hyper::Request::builder()
            .method(call.method.as_str())
            .uri(uri)
            .header(
                self.shared.sidecar.settings.events.tool_header.as_str(),
                tool,
            );
        for (name, value) in &call.headers {
            req = req.header(name, value);
        }
        for (name, value) in &self.shared.credentials {
            req = req.header(name, value);
        }
        let body = match call.body {
            Some((media, bytes)) => {
                req = req.header("content-type", media);
                Full::new(Bytes::from(bytes))
            }
            None => Full::new(Bytes::new()),
        };
        let response = self.shared.client.request(req.body(body)?).await?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let body = Limited::new(response.into_body(), MAX_RESULT)
            .collect()
            .await
            .map_err(|e| anyhow::anyhow!("the API's answer: {e}"))?
            .to_bytes();
        Ok((status, content_type, body))
    }
}

/// A header parameter that is `reserved` leaves the tool's arguments, with a warning naming
/// its operation (once per revision: the tools are made once per revision).
fn drop_reserved_headers(contract: &Contract, tool: &mut Value, reserved: &crate::mcp::Reserved) {
    let reference = tool
        .get("_meta")
        .and_then(Value::as_object)
        .and_then(crate::catalog::meta_operation);
    let Some(op) = reference.and_then(|r| crate::catalog::find_operation(contract, r)) else {
        return;
    };
    let headers = op
        .params
        .iter()
        .filter(|p| p.location == crate::finding::Location::Header);
    for p in headers {
        let Some(why) = reserved.why(&p.name) else {
            continue;
        };
        tracing::warn!(operation = %op.label(), header = %p.name, "header parameter not offered to tool calls: {why}");
        let schema = &mut tool["inputSchema"];
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            props.remove(&p.name);
        }
        if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| r.as_str() != Some(p.name.as_str()));
        }
    }
}

fn error_text(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// The API's answer as a tool result: a JSON body as structured content, an error status (or
/// driftwatch's refusal) as an error result whose text is the problem's `detail`.
fn result(status: u16, content_type: Option<&str>, body: &[u8]) -> CallToolResult {
    let json = content_type
        .is_some_and(|t| t.contains("json"))
        .then(|| serde_json::from_slice::<Value>(body).ok())
        .flatten();
    let text = String::from_utf8_lossy(body).into_owned();
    if !(200..300).contains(&status) {
        let detail = json
            .as_ref()
            .and_then(|j| j.get("detail"))
            .and_then(Value::as_str)
            .map_or_else(
                || format!("HTTP {status}: {text}"),
                |d| format!("HTTP {status}: {d}"),
            );
        return error_text(detail);
    }
    match json {
        Some(Value::Object(object)) => CallToolResult::structured(Value::Object(object)),
        Some(other) => CallToolResult::structured(serde_json::json!({ "value": other })),
        None if body.is_empty() => {
            CallToolResult::success(vec![ContentBlock::text(format!("HTTP {status}"))])
        }
        None => CallToolResult::success(vec![ContentBlock::text(text)]),
    }
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities).with_instructions(
            "Each tool is an operation of the API's OpenAPI spec. A tool that replaces a \
             resource needs every field: read it first and send it back whole.",
        )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut peers = self.shared.peers.lock().expect("peers");
        // A session that ended (DELETE, idle, its client gone) is forgotten here, not only
        // when the spec next changes: each one held about 12 KB until then.
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let order = std::sync::atomic::Ordering::Relaxed;
        let stream = self.shared.next_stream.fetch_add(1, order);
        let sink = context.sink().clone();
        self.shared
            .listening
            .lock()
            .expect("sinks")
            .push((stream, sink));
        context.cancelled().await;
        let mut listening = self.shared.listening.lock().expect("sinks");
        listening.retain(|(s, _)| *s != stream);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .tools()
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(ListToolsResult::with_all_items(tools.to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.clone().unwrap_or_default();
        Ok(self.call(&request.name, &args).await.into())
    }
}
