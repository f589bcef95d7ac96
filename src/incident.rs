//! Incidents: one silent clear's whole story, for the responder paged by it. Events say what
//! each request did; an incident joins the three that make a clear (the read that showed the
//! field holding a value, the write that omitted it, the answer or read that found it empty)
//! under the write's request id, with the resource's path as sent, and, where the operator
//! keeps values (`incidents.keep_values`), what each erased field held and the request that
//! puts it back. Pure data: the sidecar's ring (`sink::Incidents`) builds them from its events,
//! the admin port serves them, `driftwatch incident` reads them back and prints them.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

mod render;
mod restore;

pub use render::{Format, render};
pub use restore::{Kept, Lost, Restore};

/// One write's erased (or at-risk and forwarded) fields, and how it came about.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Incident {
    /// The write's request id: the incident's name.
    pub id: String,
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// The write's operation.
    pub operation: String,
    pub method: String,
    /// The resource's path as the write sent it, values and all (the admin port is guarded;
    /// events keep these values out).
    pub path: String,
    pub path_template: String,
    /// The erased fields, as the write names them.
    pub fields: Vec<String>,
    /// The tool call behind the write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    pub spec_revision: String,
    pub mode: String,
    #[serde(
        serialize_with = "crate::finding::rfc3339",
        deserialize_with = "rfc3339_in"
    )]
    pub opened_at: SystemTime,
    #[serde(
        serialize_with = "crate::finding::rfc3339",
        deserialize_with = "rfc3339_in"
    )]
    pub updated_at: SystemTime,
    /// What happened, oldest first.
    pub timeline: Vec<Step>,
    /// What the fields held, and the request that puts them back (`incidents.keep_values`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<Kept>,
}

/// `at_risk`: the write went through omitting fields that held values, and no view of the
/// resource has shown them yet; `cleared`: one has shown them empty; `survived`: the next read
/// showed them still holding values (nothing was lost, and there is nothing to restore).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum State {
    AtRisk,
    Cleared,
    Survived,
}

/// One request of the story.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Step {
    #[serde(
        serialize_with = "crate::finding::rfc3339",
        deserialize_with = "rfc3339_in"
    )]
    pub at: SystemTime,
    pub what: What,
    pub request_id: String,
    /// The operation it was (the read's may be a list's or driftwatch's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The fields this step is about.
    pub fields: Vec<String>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum What {
    /// The read that showed the fields holding values.
    Read,
    /// The write that omitted them, forwarded.
    Write,
    /// The write's own answer showed them empty.
    Answer,
    /// A later read showed them empty.
    ReadAfter,
    /// A later read showed them still holding values.
    Survived,
}

impl What {
    pub fn says(self) -> &'static str {
        match self {
            What::Read => "read, the fields held values",
            What::Write => "write omitted them, forwarded",
            What::Answer => "the write's answer shows them empty",
            What::ReadAfter => "a later read shows them empty",
            What::Survived => "a later read shows them kept",
        }
    }
}

/// What one event tells of a silent clear: the at-risk write it records, or the clear it
/// confirms. Made by the proxy from a finding and its request, consumed by the ring (and, with
/// a shared store, kept there as one entry of the incident's story).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Told {
    pub write_request_id: String,
    pub step: Step,
    /// The read its evidence names (the write's own step carries it).
    pub read: Option<Step>,
    /// Known at the write: the incident's own fields.
    pub about: About,
}

/// The incident's fields as one event knows them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct About {
    pub api: Option<String>,
    pub operation: String,
    pub method: String,
    pub path: String,
    pub path_template: String,
    pub spec_revision: String,
    pub mode: String,
}

impl Incident {
    /// The incident a store's entries tell, in the order they were told, with the values kept
    /// apart; `None` for no entries.
    pub fn fold(told: Vec<Told>, kept: Option<Kept>) -> Option<Incident> {
        let mut told = told.into_iter();
        let mut incident = Incident::open(told.next()?, kept);
        for t in told {
            incident.add(t, None);
        }
        Some(incident)
    }

    /// The incident `told` opens.
    pub fn open(told: Told, kept: Option<Kept>) -> Incident {
        let about = told.about.clone();
        let mut incident = Incident {
            id: told.write_request_id.clone(),
            state: State::AtRisk,
            api: about.api,
            operation: about.operation,
            method: about.method,
            path: about.path,
            path_template: about.path_template,
            fields: Vec::new(),
            tool: None,
            trace_id: None,
            spec_revision: about.spec_revision,
            mode: about.mode,
            opened_at: told.step.at,
            updated_at: told.step.at,
            timeline: Vec::new(),
            kept: None,
        };
        incident.add(told, kept);
        incident
    }

    /// Add what a later event told: a clear confirmed, the fields shown surviving, or the
    /// write itself where a confirmation came first (another replica's). The write's own
    /// entry names the incident's operation, path, tool and trace, whichever came first.
    pub fn add(&mut self, told: Told, kept: Option<Kept>) {
        let Told {
            step, read, about, ..
        } = told;
        let written = self.timeline.iter().any(|s| s.what == What::Write);
        match step.what {
            What::Answer | What::ReadAfter => self.state = State::Cleared,
            What::Survived if self.state == State::AtRisk => {
                self.state = State::Survived;
                if let Some(k) = &mut self.kept {
                    k.restore = None;
                }
            }
            What::Write if !written => {
                self.tool = step.tool.clone();
                self.trace_id = step.trace_id.clone();
                self.operation = about.operation;
                self.method = about.method;
                self.path = about.path;
                self.path_template = about.path_template;
                self.spec_revision = about.spec_revision;
            }
            _ => {}
        }
        if step.what != What::Survived {
            merge_fields(&mut self.fields, step.fields.clone());
        }
        if step.what != What::Read {
            self.opened_at = self.opened_at.min(step.at);
        }
        self.updated_at = self.updated_at.max(step.at);
        self.kept = self.kept.take().or(kept);
        for new in read.into_iter().chain([step]) {
            let same = |s: &Step| s.request_id == new.request_id && s.what == new.what;
            let full = self.timeline.len() >= MAX_STEPS;
            match self.timeline.iter_mut().find(|s| same(s)) {
                Some(old) => merge_fields(&mut old.fields, new.fields),
                None if !full => self.timeline.push(new),
                None => {}
            }
        }
        self.timeline.sort_by_key(|s| (s.at, s.what));
    }

    /// Whether a filter of `/incidents` keeps it.
    pub fn matches(&self, q: &Query) -> bool {
        // An id names the write, or any request of the story (an exemplar's may be the read
        // that confirmed the clear).
        let named =
            |id: &String| &self.id == id || self.timeline.iter().any(|s| &s.request_id == id);
        q.id.as_ref().is_none_or(named)
            && (q.operation.as_ref()).is_none_or(|op| &self.operation == op)
            && (q.field.as_ref()).is_none_or(|f| self.fields.iter().any(|x| x == f))
            && (q.tool.as_ref()).is_none_or(|t| self.tool.as_ref() == Some(t))
            && q.since.is_none_or(|since| self.updated_at >= since)
    }

    /// Its bytes, roughly, for the ring's bound: what its JSON weighs.
    pub fn weight(&self) -> usize {
        serde_json::to_vec(self).map_or(0, |v| v.len())
    }
}

/// Steps an incident keeps at most: a field read and cleared over and over is one story, not
/// a log.
pub const MAX_STEPS: usize = 16;

fn merge_fields(into: &mut Vec<String>, new: Vec<String>) {
    for f in new {
        if !into.contains(&f) {
            into.push(f);
        }
    }
}

/// The incidents `/incidents` serves: this replica's, or every replica's through the store
/// they share (the proxy's; the admin port sees only this).
pub trait View: Send + Sync {
    fn query(&self, q: Query) -> Queried<'_>;
}

/// What [`View::query`] answers, once the store (if any) has.
pub type Queried<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Vec<Incident>> + Send + 'a>>;

/// Filters of `/incidents?id=&operation=&field=&tool=&since=&limit=`.
#[derive(Debug, Default)]
pub struct Query {
    pub id: Option<String>,
    pub operation: Option<String>,
    /// A field as the write names it (`graphicsElementIds`).
    pub field: Option<String>,
    pub tool: Option<String>,
    pub since: Option<SystemTime>,
    pub limit: Option<usize>,
}

/// A time as findings and events write it (RFC 3339), read back.
fn rfc3339_in<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
    let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    humantime::parse_rfc3339_weak(&text).map_err(serde::de::Error::custom)
}
