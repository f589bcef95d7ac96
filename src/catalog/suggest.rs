//! Which operation a tool most likely calls, scored on what the tool declares: its name, its
//! description, its arguments. No hand-written tool of the seven real catalogs tried was named
//! after its operationId, so an unmapped tool names its best candidates, and `--suggest-map`
//! writes a map of best guesses for the user to confirm. The score is a sum of plain signals a
//! reader can check: name tokens found in the operation's id or path, the tool's verb against
//! the method, path parameters the arguments can fill, parameter and field names in common.

use std::collections::HashSet;

use serde::Serialize;

use super::bind::tokens;
use super::{Defect, DefectKind, Mapping, Tool};
use crate::contract::{BodyShape, Contract, Operation};
use crate::finding::Location;

/// One operation a tool may call, with its score (higher is likelier).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    pub operation: String,
    pub method: String,
    pub template: String,
    pub score: f32,
}

/// The scorer for one catalog against one contract: the catalog's noise words and every
/// operation's words, made once and shared by all the catalog's tools.
pub struct Mapper<'c> {
    noise: HashSet<String>,
    ops: Vec<OperationWords<'c>>,
}

/// What an operation says, as words: in its id and path, in its summary; and the names of its
/// query parameters and body fields (the body a tool fills: JSON, else a form).
struct OperationWords<'c> {
    op: &'c Operation,
    own: HashSet<String>,
    summary: HashSet<String>,
    names: Vec<&'c str>,
}

impl<'c> Mapper<'c> {
    /// `tools` is the catalog: its shared name words, such as Slack's `slack_` prefix, say
    /// nothing about any one tool.
    pub fn new(contract: &'c Contract, tools: &[Tool]) -> Mapper<'c> {
        let ops = contract
            .operations()
            .iter()
            .map(|op| {
                let literal = op
                    .template
                    .split('/')
                    .filter(|s| !s.is_empty() && !s.contains('{'));
                OperationWords {
                    op,
                    own: words(&op.id).chain(literal.flat_map(words)).collect(),
                    summary: op
                        .summary
                        .as_deref()
                        .map(|s| words(s).collect())
                        .unwrap_or_default(),
                    names: names(op),
                }
            })
            .collect();
        Mapper {
            noise: noise(tools),
            ops,
        }
    }

    /// The `n` best candidates of `tool`, best first.
    pub fn candidates(&self, tool: &Tool, n: usize) -> Vec<Candidate> {
        let features = ToolFeatures::of(tool, &self.noise);
        let mut scored: Vec<(f32, &Operation)> = self
            .ops
            .iter()
            .map(|said| (features.score(said), said.op))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.index.cmp(&b.1.index)));
        scored
            .into_iter()
            .take(n)
            .map(|(score, op)| Candidate {
                operation: op.id.clone(),
                method: op.method.clone(),
                template: op.template.clone(),
                score: (score * 10.0).round() / 10.0,
            })
            .collect()
    }

    /// The `unmapped` defect of a tool, with its three best candidates.
    pub(super) fn unmapped(&self, tool: &Tool) -> Defect {
        let best = self.candidates(tool, 3);
        let named: Vec<String> = best
            .iter()
            .map(|c| format!("{} ({:.1})", c.operation, c.score))
            .collect();
        Defect {
            tool: tool.name.clone(),
            operation: String::new(),
            kind: DefectKind::Unmapped,
            severity: DefectKind::Unmapped.severity(false),
            field: String::new(),
            expected: Some(match named.is_empty() {
                true => "an operation".into(),
                false => format!("an operation: {}", named.join(", ")),
            }),
            declared: Some("no map entry, _meta or operationId name".into()),
            candidates: best,
        }
    }
}

fn names(op: &Operation) -> Vec<&str> {
    let fields = match super::expected::body_media(op).map(|m| &*m.shape) {
        Some(BodyShape::Object { properties, .. }) => properties.as_slice(),
        _ => &[],
    };
    op.params_in(Location::Query)
        .map(|p| p.name.as_str())
        .chain(fields.iter().map(|p| p.name.as_str()))
        .collect()
}

/// Name tokens shared by more than half the catalog's tools.
fn noise(tools: &[Tool]) -> HashSet<String> {
    let mut counts = std::collections::HashMap::<String, usize>::new();
    for tool in tools {
        let unique: HashSet<String> = tokens(&tool.name).into_iter().collect();
        for t in unique {
            *counts.entry(t).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .filter(|(_, c)| tools.len() > 2 && *c * 2 > tools.len())
        .map(|(t, _)| t)
        .collect()
}

/// A map of best guesses for the tools `mapping` does not map (and no `_meta` or name ties),
/// as TOML, each with its next candidates as comments.
pub fn suggest_map(contract: &Contract, tools: &[Tool], mapping: &Mapping) -> String {
    let mapper = Mapper::new(contract, tools);
    let mut out = String::from(
        "# Suggested by `driftwatch tools --suggest-map`: each tool's best-scoring operation, from\n\
         # its name, description and arguments. Confirm every line against what the MCP server\n\
         # calls; the next candidates follow as comments. See docs/catalog.md for what else a\n\
         # map can say (bind, rename, supplied, local, operations, elsewhere, write).\n[tools]\n",
    );
    for tool in tools {
        let mapped = mapping.tools.contains_key(&tool.name)
            || tool.meta_operation.is_some()
            || contract.operation(&tool.name).is_some();
        if mapped {
            continue;
        }
        let bare = tool
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let key = match bare {
            true => tool.name.clone(),
            false => toml::Value::String(tool.name.clone()).to_string(),
        };
        for (i, c) in mapper.candidates(tool, 3).iter().enumerate() {
            let value = toml::Value::String(c.operation.clone()).to_string();
            let line = format!("{key} = {value}");
            let why = format!("# {:.1}: {} {}", c.score, c.method, c.template);
            match i {
                0 => out += &format!("{line:<60} {why}\n"),
                _ => out += &format!("#   {line:<56} {why}\n"),
            }
        }
    }
    out
}

/// What a tool declares, as tokens.
struct ToolFeatures {
    /// Name tokens past the verb and the catalog's noise.
    name: Vec<String>,
    verb: Option<Verb>,
    verb_token: Option<String>,
    args: Vec<String>,
    arg_tokens: HashSet<String>,
    description: HashSet<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Verb {
    Read,
    List,
    Create,
    Update,
    Delete,
}

impl Verb {
    fn of(token: &str) -> Option<Verb> {
        Some(match token {
            "get" | "retrieve" | "read" | "fetch" | "show" | "view" | "download" => Verb::Read,
            "list" | "search" | "find" | "query" | "browse" => Verb::List,
            "create" | "add" | "post" | "new" | "push" | "fork" | "send" | "reply" | "submit"
            | "finalize" | "upload" | "invite" => Verb::Create,
            "update" | "edit" | "patch" | "modify" | "set" | "move" | "rename" | "merge"
            | "change" | "replace" | "put" => Verb::Update,
            "delete" | "remove" | "cancel" | "archive" | "close" => Verb::Delete,
            _ => return None,
        })
    }

    fn methods(self) -> &'static [&'static str] {
        match self {
            Verb::Read => &["GET"],
            // Search endpoints are often POSTs with a query body (Notion's).
            Verb::List => &["GET", "POST"],
            Verb::Create => &["POST", "PUT"],
            Verb::Update => &["PATCH", "PUT", "POST"],
            Verb::Delete => &["DELETE", "POST"],
        }
    }
}

const STOP: [&str; 22] = [
    "a", "an", "the", "of", "to", "for", "in", "on", "and", "or", "by", "with", "from", "is", "it",
    "this", "that", "be", "as", "at", "api", "id",
];

/// A token in one spelling: lowercased, singular, a few synonyms folded.
fn norm(token: &str) -> String {
    let t = token.to_ascii_lowercase();
    let t = match t.as_str() {
        "repository" | "repositories" | "repos" => "repo".to_string(),
        "pr" | "prs" | "pulls" => "pull".to_string(),
        "mr" => "merge".to_string(),
        "db" | "databases" => "database".to_string(),
        _ => t,
    };
    if let Some(stem) = t.strip_suffix("ies").filter(|s| s.len() > 2) {
        format!("{stem}y")
    } else if t.len() > 3 && t.ends_with('s') && !t.ends_with("ss") {
        t[..t.len() - 1].to_string()
    } else {
        t
    }
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    tokens(text)
        .into_iter()
        .filter(|t| !STOP.contains(&t.as_str()) && t.len() > 1)
        .map(|t| norm(&t))
}

impl ToolFeatures {
    fn of(tool: &Tool, noise: &HashSet<String>) -> ToolFeatures {
        let mut name: Vec<String> = tokens(&tool.name)
            .into_iter()
            .filter(|t| !noise.contains(t) && !STOP.contains(&t.as_str()))
            .collect();
        let verb_at = name.iter().position(|t| Verb::of(t).is_some());
        let verb_token = verb_at.map(|i| name.remove(i));
        let args: Vec<String> = super::args::argument_names(&tool.input_schema);
        ToolFeatures {
            name: name.iter().map(|t| norm(t)).collect(),
            verb: verb_token.as_deref().and_then(Verb::of),
            verb_token: verb_token.map(|t| norm(&t)),
            arg_tokens: args.iter().flat_map(|a| words(a)).collect(),
            args,
            description: tool
                .description
                .as_deref()
                .map(|d| words(d).collect())
                .unwrap_or_default(),
        }
    }

    fn score(&self, said: &OperationWords) -> f32 {
        let (op, own, summary) = (said.op, &said.own, &said.summary);
        let mut score = 0.0;
        for t in &self.name {
            score += if own.contains(t) {
                2.0
            } else if summary.contains(t) {
                1.0
            } else {
                -0.5
            };
        }
        if let Some(verb) = self.verb {
            score += match verb.methods().contains(&op.method.as_str()) {
                true => 1.5,
                false => -1.5,
            };
            let ends_in_param = op.template.ends_with('}');
            score += match (verb, ends_in_param) {
                (Verb::List, false) | (Verb::Read | Verb::Update | Verb::Delete, true) => 0.5,
                _ => 0.0,
            };
        }
        if self.verb_token.as_ref().is_some_and(|v| own.contains(v)) {
            score += 1.0;
        }
        // Words of the operation the tool never says: Slack's `admin_conversations_ekm_...`
        // shares `channel` with `slack_list_channels`, and much besides.
        let unsaid = own
            .iter()
            .filter(|t| {
                !self.name.contains(t)
                    && self.verb_token.as_ref() != Some(t)
                    && !self.arg_tokens.contains(*t)
            })
            .count();
        score -= 0.3 * unsaid.min(6) as f32;
        for p in op.params_in(Location::Path) {
            let covered =
                self.args.contains(&p.name) || words(&p.name).any(|t| self.arg_tokens.contains(&t));
            score += if covered { 1.0 } else { -1.5 };
        }
        let named = said
            .names
            .iter()
            .filter(|n| self.args.iter().any(|a| a == *n))
            .count();
        score += (named as f32 * 0.5).min(3.0);
        let described = summary.intersection(&self.description).count();
        score += (described as f32 * 0.25).min(2.0);
        score
    }
}
