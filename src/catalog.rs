//! MCP tool-catalog parity: does every tool of a `tools/list` declare exactly its endpoint's
//! body fields and query parameters, with the spec's types? A hand-written catalog drifts three
//! ways (a body field the tool omits: on a full replace, a silent clear; a query parameter it
//! omits: unreachable; a type that lies), and the check must never pass by comparing nothing:
//! an unmapped tool, a body that is not a plain object schema under a flat tool, or a type union
//! it has not been taught is an error, not a skip.

mod compare;
mod generate;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::contract::{Contract, Operation};

pub use compare::check;
pub use generate::{UnknownOperation, generate};

/// One tool of a `tools/list` result.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub input_schema: Value,
    /// `_meta.operation` (or `_meta.operationId`): the operation, when the tool says so.
    pub meta_operation: Option<String>,
}

/// How a tool lays out its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// Path, query, header and body fields side by side (FastMCP).
    Flat,
    /// The body under one `requestBody` argument (openapi-mcp-generator).
    Nested,
    /// `pathParameters`, `queryParameters`, `headerParameters`, `body` (Speakeasy Gram).
    Grouped,
}

/// Tool name to operation (id or `"PUT /path/{id}"`), and which arguments are headers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    #[serde(default)]
    pub tools: HashMap<String, MappedTool>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum MappedTool {
    Operation(String),
    Detailed {
        operation: String,
        #[serde(default)]
        headers: Vec<String>,
    },
}

impl MappedTool {
    fn operation(&self) -> &str {
        match self {
            MappedTool::Operation(op) | MappedTool::Detailed { operation: op, .. } => op,
        }
    }
    fn headers(&self) -> &[String] {
        match self {
            MappedTool::Operation(_) => &[],
            MappedTool::Detailed { headers, .. } => headers,
        }
    }
}

/// What is wrong with one tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DefectKind {
    /// A body property the tool omits on a full-replace write: every call erases it.
    SilentClear,
    /// A body property the tool omits on another write.
    MissingField,
    /// A query (or path) parameter the tool omits: unreachable for the agent.
    MissingParam,
    /// An argument the endpoint does not accept.
    UnreachableArgument,
    /// The tool's type differs from the spec's.
    TypeMismatch,
}

impl DefectKind {
    /// The stable name, as JSON output writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            DefectKind::SilentClear => "silent_clear",
            DefectKind::MissingField => "missing_field",
            DefectKind::MissingParam => "missing_param",
            DefectKind::UnreachableArgument => "unreachable_argument",
            DefectKind::TypeMismatch => "type_mismatch",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Defect {
    pub tool: String,
    pub operation: String,
    pub kind: DefectKind,
    pub field: String,
    /// What the spec says (a type, or `declared`).
    pub expected: Option<String>,
    /// What the tool declares (a type, or `absent`).
    pub declared: Option<String>,
}

/// How a tool was tied to its operation.
#[derive(Debug, Clone, Serialize)]
pub struct Matched {
    pub tool: String,
    pub operation: String,
    pub layout: Layout,
    /// `map` (the mapping file), `meta` (the tool's `_meta`) or `inferred` (same name as an
    /// operationId).
    pub by: &'static str,
}

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub defects: Vec<Defect>,
    /// Operations no tool reaches (info): a new endpoint that never made it into the catalog.
    pub unexposed: Vec<String>,
    pub tools: Vec<Matched>,
}

/// Why the check could not be done: the catalog or the mapping cannot be compared honestly.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("the tools file is not a tools/list result: {0}")]
    NotAToolsList(String),
    #[error(
        "tool `{0}` is not mapped to an operation: add it to the --map file, give it _meta.operationId, or name it after an operationId"
    )]
    Unmapped(String),
    #[error("tool `{tool}` is mapped to `{operation}`, which the spec does not have")]
    UnknownOperation { tool: String, operation: String },
    #[error(
        "tool `{tool}`: {reason}; teach driftwatch this shape rather than comparing it against nothing"
    )]
    Untaught { tool: String, reason: String },
}

/// Read a `tools/list` result: `{"tools":[...]}` (or a JSON-RPC response holding one).
pub fn read_tools(doc: &Value) -> Result<Vec<Tool>, CatalogError> {
    let list = doc
        .get("tools")
        .or_else(|| doc.get("result").and_then(|r| r.get("tools")))
        .and_then(Value::as_array)
        .ok_or_else(|| CatalogError::NotAToolsList("no `tools` array".into()))?;
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let name = t
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| CatalogError::NotAToolsList(format!("tool {i} has no `name`")))?;
            let meta = t.get("_meta").and_then(Value::as_object);
            Ok(Tool {
                name: name.to_string(),
                input_schema: t.get("inputSchema").cloned().unwrap_or(Value::Null),
                meta_operation: meta.and_then(meta_operation).map(String::from),
            })
        })
        .collect()
}

/// The operation a tool's `_meta` names: `operation` (an id or `METHOD /path`) first, which is
/// exact where ids repeat, then `operationId`.
pub fn meta_operation(meta: &serde_json::Map<String, Value>) -> Option<&str> {
    meta.get("operation")
        .or_else(|| meta.get("operationId"))
        .and_then(Value::as_str)
}

/// The operation `reference` names: an operationId, or `"METHOD /path/{template}"`.
pub fn find_operation<'c>(contract: &'c Contract, reference: &str) -> Option<&'c Operation> {
    contract.operation(reference).or_else(|| {
        let (method, template) = reference.split_once(' ')?;
        contract
            .operations()
            .iter()
            .find(|op| op.method.eq_ignore_ascii_case(method) && op.template == template)
    })
}
