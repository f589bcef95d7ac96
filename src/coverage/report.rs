//! What the coverage says, as one value: `check --coverage --format json` writes it as its
//! `coverage` object and `/coverage` answers it, so the two can be compared field by field;
//! `check --coverage` prints it as text after the findings.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;

use serde::{Deserialize, Serialize};

use super::Coverage;
use crate::contract::{Contract, Operation};

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Report {
    /// The revision of the spec the coverage is of (a reload starts a new coverage).
    pub spec_revision: String,
    /// Requests routed to an operation.
    pub requests: u64,
    /// Requests no operation was found for.
    pub unrouted: u64,
    pub totals: Totals,
    /// The operations requested at least once, in the spec's order.
    pub operations: Vec<Exercised>,
    /// The operations never requested, in the spec's order.
    pub never_requested: Vec<Named>,
    /// Each tool a request was attributed to, by name, with the operations it reached.
    pub tools: Vec<ToolReach>,
    /// The tools past the bound on names kept, together.
    pub other_tools: OtherTools,
}

/// How much of what the spec declares was seen.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct Totals {
    pub operations: Declared,
    pub parameters: Declared,
    pub body_properties: Declared,
    pub responses: Declared,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct Declared {
    pub declared: usize,
    pub seen: usize,
}

/// An operation: its id (its method and template where the spec gives the id to several).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Named {
    pub operation: String,
    pub method: String,
    pub template: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Exercised {
    #[serde(flatten)]
    pub named: Named,
    pub requests: u64,
    pub parameters: Seen<ParamName>,
    pub body_properties: Seen<String>,
    pub responses: Responses,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ParamName {
    #[serde(rename = "in")]
    pub location: String,
    pub name: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Seen<T> {
    pub seen: Vec<T>,
    pub never_seen: Vec<T>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Responses {
    /// Answers per declared response (`200`, `4XX`, `default`).
    pub seen: BTreeMap<String, u64>,
    pub never_seen: Vec<String>,
    /// Statuses answered that no declared response covers.
    pub undeclared: Vec<u16>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ToolReach {
    pub tool: String,
    pub requests: u64,
    pub operations: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct OtherTools {
    pub requests: u64,
    pub operations: Vec<String>,
}

fn name(op: &Operation) -> String {
    match op.id_shared {
        true => op.label(),
        false => op.id.clone(),
    }
}

fn named(op: &Operation) -> Named {
    Named {
        operation: name(op),
        method: op.method.clone(),
        template: op.template.clone(),
    }
}

pub(super) fn of(c: &Coverage, contract: &Contract, revision: &str) -> Report {
    let ops = contract.operations();
    let mut report = Report {
        spec_revision: revision.to_string(),
        requests: 0,
        unrouted: c.unrouted.load(Relaxed),
        totals: Totals::default(),
        operations: Vec::new(),
        never_requested: Vec::new(),
        tools: Vec::new(),
        other_tools: OtherTools::default(),
    };
    for (op, counted) in ops.iter().zip(c.ops.iter()) {
        let e = exercised(op, counted);
        let t = &mut report.totals;
        t.operations.declared += 1;
        add(&mut t.parameters, &e.parameters);
        add(&mut t.body_properties, &e.body_properties);
        t.responses.declared += op.responses.declared.len();
        t.responses.seen += e.responses.seen.len();
        if e.requests == 0 {
            report.never_requested.push(e.named);
            continue;
        }
        t.operations.seen += 1;
        report.requests += e.requests;
        report.operations.push(e);
    }
    let (tools, other) = c.tools.snapshot();
    let names =
        |r: &super::tools::Reach| r.reached().filter_map(|i| ops.get(i)).map(name).collect();
    report.tools = (tools.iter())
        .map(|r| ToolReach {
            tool: r.name.to_string(),
            requests: r.requests,
            operations: names(r),
        })
        .collect();
    report.tools.sort_by(|a, b| a.tool.cmp(&b.tool));
    report.other_tools = OtherTools {
        requests: other.requests,
        operations: names(&other),
    };
    report
}

fn add<T>(total: &mut Declared, seen: &Seen<T>) {
    total.declared += seen.seen.len() + seen.never_seen.len();
    total.seen += seen.seen.len();
}

fn exercised(op: &Operation, c: &super::OpCoverage) -> Exercised {
    let mut parameters = Seen {
        seen: Vec::new(),
        never_seen: Vec::new(),
    };
    for (i, p) in op.params.iter().enumerate() {
        let named = ParamName {
            location: p.location.as_str().to_string(),
            name: p.name.clone(),
        };
        split(&mut parameters, c.params.is_seen(i), named);
    }
    let mut body_properties = Seen {
        seen: Vec::new(),
        never_seen: Vec::new(),
    };
    let writable = op.body_properties().iter().enumerate();
    for (i, p) in writable.filter(|(_, p)| !p.read_only) {
        split(
            &mut body_properties,
            c.properties.is_seen(i),
            p.name.clone(),
        );
    }
    Exercised {
        named: named(op),
        requests: c.requests.load(Relaxed),
        parameters,
        body_properties,
        responses: responses(op, c),
    }
}

fn split<T>(into: &mut Seen<T>, seen: bool, item: T) {
    match seen {
        true => into.seen.push(item),
        false => into.never_seen.push(item),
    }
}

fn responses(op: &Operation, c: &super::OpCoverage) -> Responses {
    let mut r = Responses {
        seen: BTreeMap::new(),
        never_seen: Vec::new(),
        undeclared: Vec::new(),
    };
    for (declared, n) in op.responses.declared.iter().zip(c.responses.iter()) {
        match n.load(Relaxed) {
            0 => r.never_seen.push(declared.status.clone()),
            n => {
                r.seen.insert(declared.status.clone(), n);
            }
        }
    }
    for (w, word) in c.undeclared.iter().enumerate() {
        let word = word.load(Relaxed);
        for bit in (0..64).filter(|b| word & (1 << b) != 0) {
            r.undeclared.push((100 + w * 64 + bit) as u16);
        }
    }
    r
}

#[cfg(test)]
pub(super) fn responses_of(op: &Operation, c: &Coverage) -> Responses {
    responses(op, &c.ops[op.index])
}

impl Report {
    /// The text `check --coverage` prints after the findings.
    pub fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let t = &self.totals;
        let ratio = |d: &Declared| format!("{}/{}", d.seen, d.declared);
        writeln!(
            out,
            "coverage: {} of {} operations requested ({} requests, {} routed nowhere); seen: parameters {}, body properties {}, responses {}",
            t.operations.seen,
            t.operations.declared,
            self.requests,
            self.unrouted,
            ratio(&t.parameters),
            ratio(&t.body_properties),
            ratio(&t.responses)
        )?;
        for e in &self.operations {
            e.write_text(out)?;
        }
        if !self.never_requested.is_empty() {
            writeln!(out, "  never requested ({}):", self.never_requested.len())?;
            for n in &self.never_requested {
                writeln!(out, "    {}  {} {}", n.operation, n.method, n.template)?;
            }
        }
        for tool in &self.tools {
            let ops = tool.operations.join(", ");
            writeln!(
                out,
                "  tool {}: {} requests -> {ops}",
                tool.tool, tool.requests
            )?;
        }
        if self.other_tools.requests > 0 {
            let ops = self.other_tools.operations.join(", ");
            let n = self.other_tools.requests;
            writeln!(
                out,
                "  other tools (past {}): {n} requests -> {ops}",
                super::tools::TOOLS_KEPT
            )?;
        }
        Ok(())
    }
}

impl Exercised {
    fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let n = &self.named;
        writeln!(
            out,
            "  {}  {} {}  {} request(s)",
            n.operation, n.method, n.template, self.requests
        )?;
        let params: Vec<String> = (self.parameters.never_seen.iter())
            .map(|p| format!("{} {}", p.location, p.name))
            .collect();
        let lines = [
            ("parameters never sent", params.join(", ")),
            (
                "body properties never sent",
                self.body_properties.never_seen.join(", "),
            ),
            ("responses never seen", self.responses.never_seen.join(", ")),
            (
                "undeclared responses seen",
                join(&self.responses.undeclared),
            ),
        ];
        for (what, list) in lines.iter().filter(|(_, l)| !l.is_empty()) {
            writeln!(out, "    {what}: {list}")?;
        }
        Ok(())
    }
}

fn join(codes: &[u16]) -> String {
    let codes: Vec<String> = codes.iter().map(u16::to_string).collect();
    codes.join(", ")
}
