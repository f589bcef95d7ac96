//! MCP tool-catalog parity: does every tool of a `tools/list` declare exactly its endpoint's
//! body fields and query parameters, with the spec's types? A hand-written catalog drifts three
//! ways (a body field the tool omits: on a full replace, a silent clear; a query parameter it
//! omits: unreachable; a type that lies), and the check must never pass by comparing nothing:
//! an unmapped tool, a body that is not a plain object schema under a flat tool, or a type it
//! has not been taught is a defect naming what is missing, never a skip; and one such tool
//! never stops the rest of the catalog from being checked.

mod args;
mod bind;
mod compare;
mod declared;
mod expected;
mod generate;
mod map;
mod rank;
mod suggest;

use serde::Serialize;
use serde_json::Value;

use crate::contract::{Contract, Operation};
use crate::finding::Severity;

pub use compare::check;
pub use generate::{UnknownOperation, generate};

/// One tool of a `tools/list` result.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
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

pub use bind::Binding;
pub use map::{MappedTool, Mapping};
pub use rank::ToolSummary;
pub use suggest::{Candidate, Mapper, suggest_map};

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
    /// No map entry, `_meta` or name ties the tool to an operation: its best candidates follow.
    Unmapped,
    /// An argument of a shape the comparison has not been taught: it is not compared.
    Untaught,
    /// The tool offers values the spec's enum does not take.
    EnumMismatch,
}

impl DefectKind {
    /// How much harm the defect does, worst first: data lost on every call (`silent_clear`)
    /// is critical; a call the API refuses or misreads (an argument that goes nowhere, a type
    /// or value it refuses, a required parameter or field no argument fills) an error, and so
    /// is a tool tied to no operation, since nothing of it was compared and the check must
    /// never pass by comparing nothing; an argument of a shape not taught (not compared) a
    /// warning; an optional parameter or field no tool exposes info: the agent cannot use it,
    /// nothing breaks. `required` is whether the missing parameter or field is required.
    pub fn severity(self, required: bool) -> Severity {
        match self {
            DefectKind::SilentClear => Severity::Critical,
            DefectKind::UnreachableArgument
            | DefectKind::TypeMismatch
            | DefectKind::EnumMismatch
            | DefectKind::Unmapped => Severity::Error,
            DefectKind::MissingField | DefectKind::MissingParam => match required {
                true => Severity::Error,
                false => Severity::Info,
            },
            DefectKind::Untaught => Severity::Warning,
        }
    }

    /// The stable name, as JSON output writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            DefectKind::SilentClear => "silent_clear",
            DefectKind::MissingField => "missing_field",
            DefectKind::MissingParam => "missing_param",
            DefectKind::UnreachableArgument => "unreachable_argument",
            DefectKind::TypeMismatch => "type_mismatch",
            DefectKind::Unmapped => "unmapped",
            DefectKind::Untaught => "untaught",
            DefectKind::EnumMismatch => "enum_mismatch",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Defect {
    pub tool: String,
    pub operation: String,
    pub kind: DefectKind,
    /// How much harm it does ([`DefectKind::severity`]): reports and metrics rank by it.
    pub severity: Severity,
    pub field: String,
    /// What the spec says (a type, or `declared`).
    pub expected: Option<String>,
    /// What the tool declares (a type, or `absent`).
    pub declared: Option<String>,
    /// For `unmapped`: the operations that fit its name, description and arguments best.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<Candidate>,
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
    /// Arguments found to fill path parameters not named after them, and how.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<Binding>,
}

/// A tool the map says calls no operation of this spec.
#[derive(Debug, Clone, Serialize)]
pub struct Elsewhere {
    pub tool: String,
    pub why: String,
}

#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// One entry per tool with a defect, worst first: what an operator reads first.
    pub summary: Vec<ToolSummary>,
    /// Worst first ([`Defect::severity`]); ties in the catalog's order.
    pub defects: Vec<Defect>,
    /// Operations no tool reaches (info): a new endpoint that never made it into the catalog.
    pub unexposed: Vec<String>,
    pub tools: Vec<Matched>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub elsewhere: Vec<Elsewhere>,
}

/// Why the check could not be done: the tools file is not a catalog, or the map (or a tool's
/// `_meta`) names an operation the spec does not have. Both are the user's to fix.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("the tools file is not a tools/list result: {0}")]
    NotAToolsList(String),
    #[error(
        "tool `{tool}` is mapped to `{operation}`, which the spec does not have: an operationId or \"METHOD /path/{{template}}\""
    )]
    UnknownOperation { tool: String, operation: String },
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
                description: t
                    .get("description")
                    .and_then(Value::as_str)
                    .map(String::from),
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
