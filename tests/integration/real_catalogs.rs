//! `driftwatch tools` on real MCP servers' catalogs (issue 36): five `tools/list` results
//! captured from pinned npm packages by the official SDK (scripts/capture-catalogs), each with its
//! map (`tests/data/catalogs/SERVER.map.toml`) and a committed triage (`SERVER.triage.tsv`: each
//! defect real, false or unclear, with its cause). Asserted, per server:
//! - with no map, every tool is checked to the end: mapped, or an `unmapped` defect;
//! - with a map that only names each tool's operations, the defects are exactly the triage's
//!   `ops` and `both` rows, and every false alarm among them is one only the map can silence
//!   (a rename, a supplied value, a binding, a nesting, a join): none is of the kinds that need
//!   no user input (path parameter names, form bodies, unions, PUT actions);
//! - with the full map, exactly the `both` and `full` rows: every false alarm gone, every real
//!   and unclear defect still there;
//! - the mapper's best guess for each tool, against the map (top 1, top 3).
//!
//! A change that hides a real drift or adds a false alarm fails here, naming the row.

use std::collections::BTreeSet;
use std::path::PathBuf;

use driftwatch::catalog::{
    DefectKind, MappedTool, Mapper, Mapping, Tool, check, find_operation, read_tools,
};
use driftwatch::contract::Contract;

use super::util::{contract, shared_spec};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/catalogs")
        .join(name)
}

/// One triaged defect: (tool, kind, field), where it is seen (`ops`, `both`, `full`), the verdict.
struct Row {
    defect: (String, String, String),
    seen: String,
    verdict: String,
    cause: String,
}

fn triage(server: &str) -> Vec<Row> {
    let text = std::fs::read_to_string(data(&format!("{server}.triage.tsv"))).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 6, "{server}.triage.tsv: {l}");
            assert!(["ops", "both", "full"].contains(&f[3]), "{l}");
            assert!(["real", "false", "unclear"].contains(&f[4]), "{l}");
            Row {
                defect: (f[0].into(), f[1].into(), f[2].into()),
                seen: f[3].into(),
                verdict: f[4].into(),
                cause: f[5].into(),
            }
        })
        .collect()
}

/// The map with everything but the operations taken out: what a user writes in minutes.
fn operations_only(map: &Mapping) -> Mapping {
    let tools = map
        .tools
        .iter()
        .map(|(name, entry)| {
            let bare = MappedTool {
                operation: entry.operation.clone(),
                operations: entry.operations.clone(),
                elsewhere: entry.elsewhere.clone(),
                ..MappedTool::default()
            };
            (name.clone(), bare)
        })
        .collect();
    Mapping { tools }
}

type Defects = BTreeSet<(String, String, String)>;

fn defects(c: &Contract, tools: &[Tool], map: &Mapping) -> Defects {
    check(c, tools, map)
        .unwrap()
        .defects
        .into_iter()
        .map(|d| (d.tool, d.kind.as_str().to_string(), d.field))
        .collect()
}

fn rows_seen(rows: &[Row], seen: &[&str]) -> Defects {
    rows.iter()
        .filter(|r| seen.contains(&r.seen.as_str()))
        .map(|r| r.defect.clone())
        .collect()
}

/// What only a map can say; a false alarm of any other cause would be the checker's own.
const NEEDS_THE_MAP: [&str; 5] = ["rename:", "supplied:", "bind:", "nests:", "joins:"];

struct Measured {
    tools: usize,
    single: usize,
    top1: usize,
    top3: usize,
}

fn server(name: &str, spec: PathBuf) -> Measured {
    let c = contract(&spec);
    let text = std::fs::read_to_string(data(&format!("{name}.tools.json"))).unwrap();
    let tools = read_tools(&serde_json::from_str(&text).unwrap()).unwrap();
    let map: Mapping =
        toml::from_str(&std::fs::read_to_string(data(&format!("{name}.map.toml"))).unwrap())
            .unwrap();
    let rows = triage(name);

    // No map: checked to the end, each tool mapped or reported.
    let raw = check(&c, &tools, &Mapping::default()).unwrap();
    let unmapped: BTreeSet<&str> = raw
        .defects
        .iter()
        .filter(|d| d.kind == DefectKind::Unmapped)
        .map(|d| d.tool.as_str())
        .collect();
    assert_eq!(
        unmapped.len() + raw.tools.len(),
        tools.len(),
        "{name}: every tool mapped or reported"
    );
    assert!(
        raw.defects
            .iter()
            .all(|d| d.kind != DefectKind::Unmapped || d.candidates.len() == 3)
    );

    // Operations only: exactly the ops and both rows; false alarms only of what needs the map.
    let got = defects(&c, &tools, &operations_only(&map));
    let want = rows_seen(&rows, &["ops", "both"]);
    assert_eq!(
        got.difference(&want).collect::<Vec<_>>(),
        Vec::<&(String, String, String)>::new(),
        "{name}: defects not in the triage (operations-only map)"
    );
    assert_eq!(
        want.difference(&got).collect::<Vec<_>>(),
        Vec::<&(String, String, String)>::new(),
        "{name}: triaged defects no longer reported (operations-only map)"
    );
    for r in rows.iter().filter(|r| r.verdict == "false") {
        assert_eq!(
            r.seen, "ops",
            "{name}: a false alarm the full map keeps: {:?}",
            r.defect
        );
        assert!(
            NEEDS_THE_MAP.iter().any(|c| r.cause.starts_with(c)),
            "{name}: a false alarm no map entry explains: {:?} {}",
            r.defect,
            r.cause
        );
    }
    // The full map: the false alarms gone, every real and unclear defect kept.
    let got = defects(&c, &tools, &map);
    assert_eq!(got, rows_seen(&rows, &["both", "full"]), "{name}: full map");
    assert!(
        rows.iter()
            .filter(|r| r.seen != "ops")
            .all(|r| r.verdict != "false")
    );

    // The mapper, against the map's single-operation tools.
    let mut measured = Measured {
        tools: tools.len(),
        single: 0,
        top1: 0,
        top3: 0,
    };
    let mapper = Mapper::new(&c, &tools);
    for tool in &tools {
        let Some(reference) = map.tools.get(&tool.name).and_then(|e| e.operation.as_ref()) else {
            continue;
        };
        let want = &find_operation(&c, reference).unwrap().id;
        let best = mapper.candidates(tool, 3);
        measured.single += 1;
        measured.top1 += usize::from(best[0].operation == *want);
        measured.top3 += usize::from(best.iter().any(|b| b.operation == *want));
    }
    eprintln!(
        "{name}: {} tools, mapper top 1 {}/{}, top 3 {}/{}",
        measured.tools, measured.top1, measured.single, measured.top3, measured.single
    );
    measured
}

fn mapper_at_least(m: Measured, top1: usize, top3: usize) {
    assert!(
        m.top1 >= top1 && m.top3 >= top3,
        "mapper fell to top 1 {}/{}, top 3 {}/{} (was {top1}, {top3})",
        m.top1,
        m.single,
        m.top3,
        m.single
    );
}

#[test]
fn github_server_catalog() {
    let m = server("github", shared_spec("github/api.github.com.json.gz"));
    mapper_at_least(m, 19, 23);
}

#[test]
fn slack_server_catalog() {
    let m = server("slack", data("slack.com.json.gz"));
    mapper_at_least(m, 5, 8);
}

#[test]
fn notion_server_catalog() {
    let m = server("notion", data("notion-openapi.json.gz"));
    mapper_at_least(m, 23, 24);
}

#[test]
fn gitlab_server_catalog() {
    let m = server("gitlab", data("gitlab.com.json.gz"));
    mapper_at_least(m, 4, 7);
}

#[test]
fn stripe_server_catalog() {
    let m = server("stripe", data("stripe.com.json.gz"));
    mapper_at_least(m, 21, 21);
}
