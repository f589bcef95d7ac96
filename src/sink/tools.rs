//! The tool behind each API request (`driftwatch wrap`): requests and findings by tool, and
//! the defects of the catalog the server serves. Tool names come from the agent's calls and
//! the server's catalog, so only the first `TOOL_LABELS` names get a label of their own; the
//! rest count as `_other`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::labels::BoundedLabel;
use crate::finding::Finding;
use crate::mcp::calls::Attribution;

/// Tool names with a label of their own. A real catalog has tens of tools (GitLab's 118).
const TOOL_LABELS: usize = 256;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    tool: String,
    attribution: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabels {
    tool: String,
    kind: &'static str,
    severity: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DefectLabels {
    tool: String,
    kind: &'static str,
    severity: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UntrackedLabels {
    reason: &'static str,
}

pub struct ToolMetrics {
    requests: Family<RequestLabels, Counter>,
    untracked: Family<UntrackedLabels, Counter>,
    findings: Family<FindingLabels, Counter>,
    defects: Family<DefectLabels, Gauge>,
    tools: BoundedLabel,
}

impl ToolMetrics {
    pub fn new(registry: &mut Registry) -> ToolMetrics {
        let m = ToolMetrics {
            requests: Family::default(),
            untracked: Family::default(),
            findings: Family::default(),
            defects: Family::default(),
            tools: BoundedLabel::new(TOOL_LABELS),
        };
        let r = registry.sub_registry_with_prefix("driftwatch");
        r.register(
            "tool_requests",
            "API requests by the tool call that caused them (driftwatch wrap): tool, and attribution (only_call, only_tool, arguments, ambiguous, header; none: no call in flight)",
            m.requests.clone(),
        );
        r.register(
            "tool_calls_untracked",
            "Tool calls driftwatch wrap let go without their answer: reason bound (begun while 1,024 were in flight: requests are ambiguous until they could have expired) or expired (unanswered after 5 minutes)",
            m.untracked.clone(),
        );
        r.register(
            "tool_findings",
            "Findings by the tool whose call caused the request, kind and severity",
            m.findings.clone(),
        );
        r.register(
            "catalog_defects",
            "Defects of the tool catalog the MCP server serves, checked live against the spec in force: tool, kind and severity (critical: silent_clear, every call erases the field; error: an argument, type or required parameter the API refuses or ignores; warning: a tool tied to no operation; info: an optional parameter no tool exposes)",
            m.defects.clone(),
        );
        m
    }

    /// The counters the calls in flight count their losses in, each series at zero from the
    /// start.
    pub fn untracked(&self) -> crate::mcp::calls::Untracked {
        let series = |reason| {
            self.untracked
                .get_or_create(&UntrackedLabels { reason })
                .clone()
        };
        crate::mcp::calls::Untracked {
            bound: series("bound"),
            expired: series("expired"),
        }
    }

    /// One API request, and the tool it was tied to (`None`: no call was in flight).
    pub fn request(&self, tool: Option<&Attribution>) {
        let (tool, attribution) = match tool {
            Some(a) => (self.tools.of(a.label()), a.by.as_str()),
            None => (String::new(), "none"),
        };
        let labels = RequestLabels { tool, attribution };
        self.requests.get_or_create(&labels).inc();
    }

    pub fn findings(&self, tool: Option<&Attribution>, findings: &[Finding]) {
        let Some(tool) = tool.filter(|_| !findings.is_empty()) else {
            return;
        };
        let tool = self.tools.of(tool.label());
        for f in findings {
            let labels = FindingLabels {
                tool: tool.clone(),
                kind: f.kind.as_str(),
                severity: f.severity.as_str(),
            };
            self.findings.get_or_create(&labels).inc();
        }
    }

    /// The catalog's defects now, by tool, kind and severity; the last check's series are
    /// replaced.
    pub fn defects<'a>(&self, defects: impl IntoIterator<Item = &'a crate::catalog::Defect>) {
        self.defects.clear();
        for d in defects {
            let labels = DefectLabels {
                tool: self.tools.of(&d.tool),
                kind: d.kind.as_str(),
                severity: d.severity.as_str(),
            };
            self.defects.get_or_create(&labels).inc();
        }
    }
}
