//! The live catalog check: the catalog the server answers `tools/list` with, checked against
//! the spec in force by the rules of `driftwatch tools`, on the user's `--map` or else on the
//! map learned from the server's traffic. It runs again when the server lists its tools again
//! (after `notifications/tools/list_changed` the client asks) and when the learned map gains
//! an operation. Its defects become the `catalog_defects` gauge and one event per tool whose
//! defects are new; `/tools/check` serves the whole report as `tools --format json` writes it.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use anyhow::Context;
use serde_json::Value;

use crate::catalog::{
    Defect, DefectKind, Mapping, Report, Tool, check, find_operation, read_tools,
};
use crate::contract::Contract;
use crate::mcp::calls::{Calls, map_toml};
use crate::mcp::message::Refused;
use crate::proxy::Api;
use crate::proxy::Sidecar;
use crate::revision::Revision;
use crate::sink::{Event, ToolFields};

/// The user's map, read and parsed once at start (a broken one stops the start).
pub struct UserMap(Mapping);

impl UserMap {
    pub fn read(path: &Path) -> anyhow::Result<UserMap> {
        let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
        let map = toml::from_str(&text).with_context(|| format!("{}", path.display()))?;
        Ok(UserMap(map))
    }
}

#[derive(Default)]
struct State {
    /// The server's last `tools/list` result.
    list: Option<Value>,
    /// The last report, as `tools --format json` writes it.
    report: Option<String>,
    /// Defects already sent as events: (API, tool, kind, field).
    reported: HashSet<(usize, String, &'static str, String)>,
    /// Why the last catalog could not be read (an answer past `mcp.max_message_bytes`).
    unreadable: Option<String>,
}

pub struct Live {
    sidecar: Arc<Sidecar>,
    calls: Arc<Calls>,
    user_map: Option<UserMap>,
    state: Mutex<State>,
    listed: tokio::sync::Notify,
}

impl Live {
    pub fn new(sidecar: Arc<Sidecar>, calls: Arc<Calls>, user_map: Option<UserMap>) -> Live {
        Live {
            sidecar,
            calls,
            user_map,
            state: Mutex::default(),
            listed: tokio::sync::Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server answered a `tools/list`.
    pub fn listed(&self, list: Value) {
        let mut state = self.state();
        state.list = Some(list);
        state.unreadable = None;
        drop(state);
        self.listed.notify_one();
    }

    /// An answer past a message bound (`refused`) went by unread while a `tools/list` awaited
    /// one: the catalog may have been it, and is not checked. Said at `/tools/check` and logged.
    pub fn unreadable(&self, refused: &Refused) {
        let past = match refused {
            Refused::Bytes(bound) => format!("past mcp.max_message_bytes ({bound} bytes)"),
            other => other.to_string(),
        };
        let why = format!(
            "the MCP server's tools/list answer was {past} and passed on unread: its catalog is not checked; raise the bound to check it"
        );
        let mut state = self.state();
        if state.unreadable.is_none() {
            tracing::warn!("{why}");
        }
        state.unreadable = Some(why);
    }

    pub async fn check_on_change(self: Arc<Self>) {
        let survival = &self.sidecar.memory.survival;
        let mut lessons = survival.generation();
        loop {
            tokio::select! {
                () = self.listed.notified() => {}
                () = self.calls.learned_changed.notified() => {}
                // A write's answer read after its call was mapped may change the reading.
                () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
                    if survival.generation() == lessons {
                        continue;
                    }
                }
            }
            lessons = survival.generation();
            // A large catalog against a large spec is seconds of CPU (14,142 tools against
            // GitHub's: 8.3 s): off the runtime, which serves /healthz on this same thread.
            let live = self.clone();
            match tokio::task::spawn_blocking(move || live.check()).await {
                Ok(Err(e)) => tracing::warn!("the live catalog check could not run: {e:#}"),
                Err(e) => tracing::warn!("the live catalog check failed: {e}"),
                Ok(Ok(())) => {}
            }
        }
    }

    /// API `api`'s learned map, read back from the text `/tools/map` serves: what is checked
    /// is what is shown.
    fn learned_mapping(&self, api: usize) -> anyhow::Result<Mapping> {
        Ok(toml::from_str(&map_toml(
            &self.calls.learned(api),
            &self.calls.bindings(),
        ))?)
    }

    /// A tool whose every operation the writes' own answers showed keeping what it omits is
    /// read as a merge (unless its map says otherwise): what it leaves out is no silent clear.
    fn read_as_merge(&self, api: &Api, contract: &Contract, mapping: &mut Mapping) {
        let survival = &self.sidecar.memory.survival;
        let name = api.label.name().unwrap_or_default();
        for entry in mapping.tools.values_mut().filter(|e| e.write.is_none()) {
            let ops: Vec<_> = entry
                .references()
                .filter_map(|r| find_operation(contract, r))
                .collect();
            let merges = |op: &&crate::contract::Operation| {
                survival
                    .of(&crate::memory::survival::name(name, op))
                    .is_some_and(|l| l.reads_as_merge())
            };
            if !ops.is_empty() && ops.iter().all(merges) {
                entry.write = Some(crate::contract::WriteSemantics::Merge);
            }
        }
    }

    /// Each API's map: the user's (the same for all) or the one learned from its traffic.
    fn mappings(&self) -> anyhow::Result<Vec<Mapping>> {
        (0..self.sidecar.apis.len())
            .map(|api| match &self.user_map {
                Some(UserMap(map)) => Ok(map.clone()),
                None => self.learned_mapping(api),
            })
            .collect()
    }

    fn check(&self) -> anyhow::Result<()> {
        let Some(list) = self.state().list.clone() else {
            return Ok(());
        };
        let tools = read_tools(&list).context("the server's tools/list")?;
        let apis = &self.sidecar.apis;
        let revisions: Vec<_> = apis.iter().map(|api| api.revision()).collect();
        let mut mappings = self.mappings()?;
        let shares = share(&tools, &mappings, &revisions);
        // Learned, a map holds only the tools called so far: the others are not yet mapped,
        // which is no defect of theirs.
        let learned = self.user_map.is_none();
        let counted = |d: &Defect| !(learned && d.kind == DefectKind::Unmapped);
        let mut reports = Vec::new();
        let mut all = Vec::new();
        for (i, api) in apis.iter().enumerate() {
            let contract = &revisions[i].contract;
            self.read_as_merge(api, contract, &mut mappings[i]);
            let report = check(contract, &shares[i], &mappings[i])?;
            let defects: Vec<Defect> = report
                .defects
                .iter()
                .filter(|d| counted(d))
                .cloned()
                .collect();
            for (tool, defects) in self.new_defects(i, &defects) {
                let event = event(api, &revisions[i].spec.revision, tool, defects);
                self.sidecar.publish(event);
            }
            all.extend(defects);
            reports.push((api.name(), report));
        }
        self.sidecar.sinks.tools.defects(&all);
        self.state().report = Some(report_json(&reports)?);
        Ok(())
    }

    /// Defects not reported before, by tool.
    fn new_defects(&self, api: usize, defects: &[Defect]) -> Vec<(String, Vec<Defect>)> {
        let mut state = self.state();
        let mut by_tool: Vec<(String, Vec<Defect>)> = Vec::new();
        for d in defects {
            let key = (api, d.tool.clone(), d.kind.as_str(), d.field.clone());
            if !state.reported.insert(key) {
                continue;
            }
            match by_tool.last_mut() {
                Some((tool, list)) if *tool == d.tool => list.push(d.clone()),
                _ => by_tool.push((d.tool.clone(), vec![d.clone()])),
            }
        }
        by_tool
    }
}

/// The tools each API checks: a tool goes to the first API whose map places it (the learned
/// map holds it, or every operation the user's map names for it is that API's); a tool no map
/// places goes to the first API, which reports it unmapped (or infers it) as with one API.
fn share(tools: &[Tool], mappings: &[Mapping], revisions: &[Arc<Revision>]) -> Vec<Vec<Tool>> {
    let mut shares = vec![Vec::new(); revisions.len()];
    for tool in tools {
        let placed = |(mapping, revision): (&Mapping, &Arc<Revision>)| {
            let entry = mapping.tools.get(&tool.name)?;
            let mut refs = entry.references().peekable();
            refs.peek()?;
            refs.all(|r| find_operation(&revision.contract, r).is_some())
                .then_some(())
        };
        let home = (mappings.iter().zip(revisions))
            .position(|pair| placed(pair).is_some())
            .unwrap_or(0);
        shares[home].push(tool.clone());
    }
    shares
}

/// What `/tools/check` serves: the report as `tools --format json` writes it, or, with
/// several APIs, `{"apis": {NAME: report, ...}}` in the APIs' order.
fn report_json(reports: &[(&str, Report)]) -> anyhow::Result<String> {
    Ok(match reports {
        [(_, report)] => serde_json::to_string_pretty(report)?,
        _ => serde_json::to_string_pretty(&PerApi {
            apis: Apis(reports),
        })?,
    })
}

/// Several APIs' reports, each written straight from its report (no copy as a `Value`).
#[derive(serde::Serialize)]
struct PerApi<'a> {
    apis: Apis<'a>,
}

/// The reports by API name, as a JSON object in the APIs' order.
struct Apis<'a>(&'a [(&'a str, Report)]);

impl serde::Serialize for Apis<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, report)| (name, report)))
    }
}

/// One event for a tool's new catalog defects (`action = "catalog"`).
fn event(api: &crate::proxy::Api, revision: &str, tool: String, defects: Vec<Defect>) -> Event {
    Event {
        at: SystemTime::now(),
        api: api.settings.name.clone(),
        request_id: String::new(),
        traceparent: None,
        trace: crate::sink::TraceIds::default(),
        tool: ToolFields {
            tool: Some(tool),
            ..ToolFields::default()
        },
        operation: defects.first().map(|d| d.operation.clone()),
        method: "tools/list".into(),
        path_template: None,
        path: String::new(),
        status: None,
        action: "catalog",
        error: None,
        mode: api.settings.policy.mode.as_str(),
        spec_revision: revision.to_string(),
        findings: Vec::new(),
        findings_left_out: 0,
        catalog_defects: defects,
        repair: None,
        read_before_write: None,
        values: None,
    }
}

impl crate::admin::ToolsView for Live {
    fn map(&self, api: Option<&str>) -> Result<String, String> {
        let apis = &self.sidecar.apis;
        let index = match api {
            None => 0,
            Some(name) => (apis.iter().position(|a| a.name() == name))
                .ok_or_else(|| format!("no API is named {name:?}"))?,
        };
        let mut text = map_toml(&self.calls.learned(index), &self.calls.bindings());
        if apis.len() > 1 {
            let note = format!(
                "# The map of API {:?}; each API has its own: /tools/map?api=NAME.\n",
                apis[index].name()
            );
            text.insert_str(0, &note);
        }
        Ok(text)
    }

    fn check(&self) -> Result<String, String> {
        let state = self.state();
        match (&state.unreadable, &state.report) {
            (Some(why), _) => Err(why.clone()),
            (None, Some(report)) => Ok(report.clone()),
            (None, None) => Err("the MCP server has not listed its tools yet".into()),
        }
    }
}
