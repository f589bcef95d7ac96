//! Ranking by harm: a catalog check of a real server lists tens to hundreds of defects, and
//! the one that erases data must not sit unread among optional filters no tool exposes. The
//! report leads with one line per tool, worst first, and lists the defects worst first.

use serde::Serialize;

use super::{Defect, Report};
use crate::finding::Severity;

/// One tool's defects, counted by severity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSummary {
    pub tool: String,
    /// Its worst defect's severity.
    pub worst: Severity,
    pub critical: usize,
    pub error: usize,
    pub warning: usize,
    pub info: usize,
}

impl ToolSummary {
    fn new(tool: &str) -> ToolSummary {
        ToolSummary {
            tool: tool.to_string(),
            worst: Severity::Info,
            critical: 0,
            error: 0,
            warning: 0,
            info: 0,
        }
    }

    fn count(&mut self, defect: &Defect) {
        self.worst = self.worst.max(defect.severity);
        *match defect.severity {
            Severity::Critical => &mut self.critical,
            Severity::Error => &mut self.error,
            Severity::Warning => &mut self.warning,
            Severity::Info => &mut self.info,
        } += 1;
    }

    /// Worse first: by the worst defect, then by the count at each severity down.
    fn rank(&self) -> impl Ord + use<> {
        std::cmp::Reverse((
            self.worst,
            self.critical,
            self.error,
            self.warning,
            self.info,
        ))
    }
}

impl Report {
    /// The summary per tool and the defects, both worst first; ties keep the catalog's order.
    pub(super) fn rank(&mut self) {
        let mut summary: Vec<ToolSummary> = Vec::new();
        for d in &self.defects {
            match summary.iter_mut().find(|s| s.tool == d.tool) {
                Some(s) => s.count(d),
                None => {
                    let mut s = ToolSummary::new(&d.tool);
                    s.count(d);
                    summary.push(s);
                }
            }
        }
        summary.sort_by_key(ToolSummary::rank);
        self.defects.sort_by_key(|d| std::cmp::Reverse(d.severity));
        self.summary = summary;
    }

    /// The worst defect's severity, if any.
    pub fn worst(&self) -> Option<Severity> {
        self.defects.iter().map(|d| d.severity).max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::DefectKind;

    fn defect(tool: &str, kind: DefectKind, required: bool) -> Defect {
        Defect {
            tool: tool.into(),
            operation: "op".into(),
            kind,
            severity: kind.severity(required),
            field: "f".into(),
            expected: None,
            declared: None,
            candidates: Vec::new(),
        }
    }

    #[test]
    fn the_tool_that_erases_leads_however_many_filters_the_others_lack() {
        let mut report = Report {
            defects: vec![
                defect("list_users", DefectKind::MissingParam, false),
                defect("list_users", DefectKind::MissingParam, false),
                defect("list_users", DefectKind::MissingParam, false),
                defect("get_user", DefectKind::TypeMismatch, true),
                defect("update_user", DefectKind::MissingField, false),
                defect("update_user", DefectKind::SilentClear, true),
                defect("find", DefectKind::Untaught, false),
            ],
            ..Report::default()
        };
        report.rank();
        let order: Vec<(&str, Severity)> = (report.summary.iter())
            .map(|s| (s.tool.as_str(), s.worst))
            .collect();
        assert_eq!(
            order,
            [
                ("update_user", Severity::Critical),
                ("get_user", Severity::Error),
                ("find", Severity::Warning),
                ("list_users", Severity::Info),
            ]
        );
        assert_eq!((report.summary[0].critical, report.summary[0].info), (1, 1));
        assert_eq!(report.summary[3].info, 3);
        let kinds: Vec<DefectKind> = report.defects.iter().map(|d| d.kind).collect();
        assert_eq!(kinds[0], DefectKind::SilentClear);
        assert_eq!(kinds[1], DefectKind::TypeMismatch);
        assert_eq!(kinds[2], DefectKind::Untaught);
        assert_eq!(report.worst(), Some(Severity::Critical));
    }

    #[test]
    fn a_required_parameter_no_tool_fills_is_an_error_an_optional_one_info() {
        assert_eq!(DefectKind::MissingParam.severity(true), Severity::Error);
        assert_eq!(DefectKind::MissingParam.severity(false), Severity::Info);
        assert_eq!(DefectKind::MissingField.severity(false), Severity::Info);
        assert_eq!(DefectKind::SilentClear.severity(false), Severity::Critical);
        assert_eq!(
            DefectKind::UnreachableArgument.severity(false),
            Severity::Error
        );
        assert_eq!(DefectKind::Unmapped.severity(false), Severity::Error);
        assert_eq!(DefectKind::Untaught.severity(false), Severity::Warning);
    }
}
