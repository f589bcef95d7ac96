//! The scripted stale agent: an MCP server's tools whose hand-written schemas drifted from the
//! API's spec. `list_playouts` still says `page_size`; `update_schedule` types
//! `padToNearestMinute` as a string; `update_channel` does not know `graphicsElementIds`, so a
//! GET-edit-PUT round trip drops it.

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Map, Value, json};

/// The properties the stale `update_channel` tool schema declares: the spec's 30, less one.
pub const UPDATE_CHANNEL_TOOL_FIELDS: [&str; 29] = [
    "number",
    "name",
    "group",
    "categories",
    "ffmpegProfileId",
    "streamingMode",
    "watermarkId",
    "fallbackFillerId",
    "preferredAudioLanguageCode",
    "preferredAudioTitle",
    "preferredSubtitleLanguageCode",
    "subtitleMode",
    "musicVideoCreditsMode",
    "musicVideoCreditsTemplate",
    "songVideoMode",
    "transcodeMode",
    "idleBehavior",
    "isEnabled",
    "showInEpg",
    "playoutSource",
    "playoutMode",
    "mirrorSourceChannelId",
    "playoutOffset",
    "slugSeconds",
    "streamSelectorMode",
    "streamSelector",
    "sortNumber",
    "logo",
    "epgTimeShiftMinutes",
];

/// One HTTP call the agent made, and what came back.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: Method,
    pub target: String,
    pub status: u16,
    pub body: Value,
    pub request_id: String,
}

pub struct Agent {
    client: Client<HttpConnector, Full<Bytes>>,
    /// Where the MCP server sends requests: driftwatch, not the API.
    base: String,
    calls: usize,
}

/// Why a call of the scripted agent failed: the demo's own plumbing, never a finding.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("building the request: {0}")]
    Request(#[from] http::Error),
    #[error("sending the request: {0}")]
    Send(#[from] hyper_util::client::legacy::Error),
    #[error("reading the answer: {0}")]
    Read(#[from] hyper::Error),
}

impl Agent {
    pub fn new(base: String) -> Agent {
        Agent {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base,
            calls: 0,
        }
    }

    pub async fn call(
        &mut self,
        tool: &str,
        method: Method,
        target: &str,
        body: Option<&Value>,
    ) -> Result<Call, AgentError> {
        let body = body.map(|b| ("application/json", b));
        self.send(tool, method, target, body).await
    }

    /// An incident's restore, as the responder would send it: its method, path, media type
    /// and body.
    pub async fn restore(&mut self, r: &crate::incident::Restore) -> Result<Call, AgentError> {
        let method = Method::from_bytes(r.method.as_bytes()).unwrap_or(Method::PUT);
        let body = Some((r.content_type.as_str(), &r.body));
        self.send("incident_restore", method, &r.path, body).await
    }

    async fn send(
        &mut self,
        tool: &str,
        method: Method,
        target: &str,
        body: Option<(&str, &Value)>,
    ) -> Result<Call, AgentError> {
        self.calls += 1;
        let request_id = format!("demo-{:02}", self.calls);
        let mut req = Request::builder()
            .method(method.clone())
            .uri(format!("{}{target}", self.base))
            .header("x-mcp-tool", tool)
            .header("x-request-id", &request_id);
        if let Some((media, _)) = body {
            req = req.header("content-type", media);
        }
        let req = req.body(Full::new(
            body.map(|(_, b)| Bytes::from(b.to_string()))
                .unwrap_or_default(),
        ))?;
        let resp = self.client.request(req).await?;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await?.to_bytes();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Call {
            method,
            target: target.to_string(),
            status,
            body,
            request_id,
        })
    }

    /// Tool `list_playouts(page_size)`: the spec renamed the parameter to `pageSize`.
    pub async fn list_playouts(&mut self) -> Result<Call, AgentError> {
        self.call(
            "list_playouts",
            Method::GET,
            "/api/v1/playouts?page_size=2",
            None,
        )
        .await
    }

    /// Tool `update_schedule`: its schema types `padToNearestMinute` as a string.
    pub async fn update_schedule(&mut self) -> Result<Call, AgentError> {
        let body = json!({"name": "Weeknights", "keepMultiPartEpisodesTogether": true, "treatCollectionsAsShows": false,
            "shuffleScheduleItems": false, "randomStartPoint": false, "fixedStartTimeBehavior": "Strict", "padToNearestMinute": "30"});
        self.call(
            "update_schedule",
            Method::PUT,
            "/api/v1/schedules/2",
            Some(&body),
        )
        .await
    }

    /// Tool `get_channel`.
    pub async fn get_channel(&mut self) -> Result<Call, AgentError> {
        self.call("get_channel", Method::GET, "/api/v1/channels/7", None)
            .await
    }

    /// Tool `update_channel`: rename the channel, sending back what the tool schema knows of
    /// the channel it just read. `graphicsElementIds` is not in that schema, so it is dropped.
    pub async fn rename_channel(
        &mut self,
        current: &Value,
        name: &str,
    ) -> Result<(Call, usize), AgentError> {
        let mut body: Map<String, Value> = UPDATE_CHANNEL_TOOL_FIELDS
            .iter()
            .filter_map(|f| Some((f.to_string(), current.get(*f)?.clone())))
            .collect();
        body.insert("name".into(), json!(name));
        let fields = body.len();
        let call = self
            .call(
                "update_channel",
                Method::PUT,
                "/api/v1/channels/7",
                Some(&Value::Object(body)),
            )
            .await?;
        Ok((call, fields))
    }
}
