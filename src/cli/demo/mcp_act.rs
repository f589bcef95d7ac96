//! The demo's last act: no second copy. The agent's tools are the spec's own, served by
//! `driftwatch mcp`'s gateway over MCP (rmcp's client and server on an in-memory pipe), so the
//! update tool declares every field, the agent sends back every field it read, and nothing is
//! erased.

use std::io::Write;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Map, Value, json};

use super::{expect, stage};
use crate::policy::Mode;

fn call(name: &'static str, args: Value) -> CallToolRequestParams {
    let args = args.as_object().cloned().unwrap_or_default();
    CallToolRequestParams::new(name).with_arguments(args)
}

fn structured(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

pub(super) async fn mcp_act(out: &mut (dyn Write + Send)) -> anyhow::Result<bool> {
    let stage = stage(Mode::Enforce).await?;
    writeln!(
        out,
        "== No second copy: the agent's tools are the spec's own (driftwatch mcp, enforce mode) ==\n"
    )?;
    let enabled = Some(vec!["getChannel".to_string(), "updateChannel".to_string()]);
    let gateway =
        crate::gateway::Gateway::new(stage.sidecar.clone(), enabled, Vec::new(), stage.proxy);
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(server) = gateway.serve(server_io).await {
            let _ = server.waiting().await;
        }
    });
    let client = ().serve(client_io).await?;
    let tools = client.list_all_tools().await?;
    let declared: Vec<String> = tools
        .iter()
        .find(|t| t.name == "updateChannel")
        .and_then(|t| t.input_schema.get("properties"))
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    writeln!(
        out,
        "1. tools/list: {} tools; updateChannel takes {} arguments, graphicsElementIds among them: {}",
        tools.len(),
        declared.len(),
        declared.iter().any(|d| d == "graphicsElementIds")
    )?;
    let read = client
        .call_tool(call("getChannel", json!({"id": 7})))
        .await?;
    let channel = structured(&read);
    writeln!(
        out,
        "2. getChannel 7: name {}, graphicsElementIds {}",
        channel["name"], channel["graphicsElementIds"]
    )?;
    // The agent renames the channel and sends back every argument its tool declares.
    let mut args = Map::new();
    for name in &declared {
        if let Some(value) = channel.get(name) {
            args.insert(name.clone(), value.clone());
        }
    }
    args.insert("name".into(), json!("Retro TV HD"));
    let wrote = client
        .call_tool(call("updateChannel", Value::Object(args)))
        .await?;
    let refused = wrote.is_error == Some(true);
    writeln!(
        out,
        "3. updateChannel 7 with the new name and every field it read: {}",
        if refused { "refused" } else { "done" }
    )?;
    let after = structured(
        &client
            .call_tool(call("getChannel", json!({"id": 7})))
            .await?,
    );
    writeln!(
        out,
        "4. getChannel 7: name {}, graphicsElementIds {}  (kept: the tool could not forget it)",
        after["name"], after["graphicsElementIds"]
    )?;
    let _ = client.cancel().await;
    let kept =
        !refused && after["name"] == "Retro TV HD" && after["graphicsElementIds"] == json!([3, 7]);
    expect(
        out,
        kept,
        "the update through the spec's own tool kept graphicsElementIds",
    )
}
