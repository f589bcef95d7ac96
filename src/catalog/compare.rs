//! The comparison: each tool's arguments, sorted by layout into path, query, header and body,
//! against what its operation (or operations) expects, on the small type vocabulary. A tool no
//! one mapped, or an argument of a shape not taught, is a defect naming what is missing; the
//! rest of the catalog is still checked.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

use super::bind::{self, Binding, Loose};
use super::declared::{declared, deref, fits, show};
use super::expected::{Body, Expected};
use super::{
    CatalogError, Defect, DefectKind, Elsewhere, Layout, MappedTool, Mapping, Matched, Report,
    Tool, find_operation,
};
use crate::contract::{Contract, FieldType};
use crate::finding::Location;

const GROUPS: [&str; 4] = [
    "pathParameters",
    "queryParameters",
    "headerParameters",
    "body",
];

/// Check every tool against the contract; all defects of all tools in one report. Only a map
/// (or a tool's `_meta`) naming an operation the spec lacks is an error: that is the map's to fix.
pub fn check(
    contract: &Contract,
    tools: &[Tool],
    mapping: &Mapping,
) -> Result<Report, CatalogError> {
    let mut report = Report::default();
    let mut reached = HashSet::new();
    let unmapped = MappedTool::default();
    let noise = super::suggest::noise(tools);
    for tool in tools {
        let entry = mapping.tools.get(&tool.name);
        let (references, by): (Vec<String>, &'static str) = match entry {
            Some(MappedTool {
                elsewhere: Some(why),
                ..
            }) => {
                report.elsewhere.push(Elsewhere {
                    tool: tool.name.clone(),
                    why: why.clone(),
                });
                continue;
            }
            Some(entry) => (entry.references().map(String::from).collect(), "map"),
            None => match &tool.meta_operation {
                Some(op) => (vec![op.clone()], "meta"),
                None if contract.operation(&tool.name).is_some() => {
                    (vec![tool.name.clone()], "inferred")
                }
                None => {
                    report
                        .defects
                        .push(super::suggest::unmapped(contract, tool, &noise));
                    continue;
                }
            },
        };
        let ops = references
            .iter()
            .map(|r| {
                find_operation(contract, r).ok_or_else(|| CatalogError::UnknownOperation {
                    tool: tool.name.clone(),
                    operation: r.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        reached.extend(ops.iter().map(|op| op.id.clone()));
        let entry = entry.unwrap_or(&unmapped);
        let expected = Expected::of(&ops, entry.write);
        let (layout, bindings) = compare_tool(tool, &expected, entry, &mut report.defects);
        report.tools.push(Matched {
            tool: tool.name.clone(),
            operation: expected.label,
            layout,
            by,
            bindings,
        });
    }
    report.unexposed = contract
        .operations()
        .iter()
        .filter(|op| !reached.contains(&op.id))
        .map(|op| format!("{} {} ({})", op.method, op.template, op.id))
        .collect();
    Ok(report)
}

/// A tool's arguments by where they go, keyed by the name they go on the wire under.
#[derive(Default)]
struct Args<'t> {
    path: BTreeMap<String, &'t Value>,
    query: BTreeMap<String, &'t Value>,
    header: BTreeMap<String, &'t Value>,
    /// Body fields (flat and grouped-as-object).
    body: BTreeMap<String, &'t Value>,
    /// The one body argument's schema (nested and grouped layouts).
    body_schema: Option<&'t Value>,
    /// Arguments that fit nowhere by name: path-parameter candidates, else unreachable.
    loose: Vec<(String, &'t Value)>,
}

fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// Every argument name a tool declares, in any layout (a group's and a body argument's fields
/// included): what the mapper matches against parameter and field names.
pub(super) fn argument_names(root: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (name, schema) in properties(root) {
        if GROUPS.contains(&name.as_str()) || name == "requestBody" {
            out.extend(properties(deref(root, schema)).map(|(k, _)| k.clone()));
        } else {
            out.push(name.clone());
        }
    }
    out
}

fn layout_of(root: &Value) -> Layout {
    let top: Vec<&String> = properties(root).map(|(k, _)| k).collect();
    if !top.is_empty() && top.iter().all(|k| GROUPS.contains(&k.as_str())) {
        Layout::Grouped
    } else if top.iter().any(|k| *k == "requestBody") {
        Layout::Nested
    } else {
        Layout::Flat
    }
}

/// Sort the tool's arguments by where they go: by group (grouped layout) or by name.
fn sort_args<'t>(
    root: &'t Value,
    layout: Layout,
    expected: &Expected,
    entry: &MappedTool,
) -> Args<'t> {
    let mut args = Args::default();
    let wire = |name: &String| entry.rename.get(name).unwrap_or(name).clone();
    if layout == Layout::Grouped {
        let group = |g: &str| root.get("properties").and_then(|p| p.get(g));
        if let Some(schema) = group("pathParameters") {
            args.loose
                .extend(properties(deref(root, schema)).map(|(k, v)| (k.clone(), v)));
        }
        for (g, target) in [
            ("queryParameters", &mut args.query),
            ("headerParameters", &mut args.header),
        ] {
            if let Some(schema) = group(g) {
                target.extend(properties(deref(root, schema)).map(|(k, v)| (wire(k), v)));
            }
        }
        args.body_schema = group("body");
        return args;
    }
    for (name, schema) in properties(root) {
        if entry.local.contains(name) || entry.nests.contains_key(name) {
            continue;
        }
        let w = wire(name);
        if entry.bind.contains_key(name) {
            args.loose.push((name.clone(), schema));
        } else if layout == Layout::Nested && name == "requestBody" {
            args.body_schema = Some(schema);
        } else if expected.is_param(Location::Path, &w) {
            // A composite may take one value both ways (GitHub's create_branch: the ref it
            // reads, the ref it creates).
            if expected.is_field(&w) {
                args.body.insert(w.clone(), schema);
            }
            args.path.insert(w, schema);
        } else if expected.is_param(Location::Query, &w) {
            args.query.insert(w, schema);
        } else if expected.is_param(Location::Header, &w)
            || entry.headers.iter().any(|h| h.eq_ignore_ascii_case(name))
        {
            args.header.insert(w, schema);
        } else if expected.is_field(&w) {
            args.body.insert(w, schema);
        } else {
            args.loose.push((name.clone(), schema));
        }
    }
    args
}

/// Fill the path parameters no argument is named after from the loose arguments.
fn bind_path(
    root: &Value,
    args: &mut Args,
    expected: &Expected,
    entry: &MappedTool,
) -> Vec<Binding> {
    // Open: no argument is named after it, or the map binds one to it all the same.
    let open: Vec<&str> = expected
        .params_in(Location::Path)
        .map(|p| p.name.as_str())
        .filter(|p| !args.path.contains_key(*p) || entry.bind.values().any(|b| b == p))
        .collect();
    let required: Vec<&str> = root
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let loose: Vec<Loose> = args
        .loose
        .iter()
        .map(|(name, _)| Loose {
            name,
            required: required.contains(&name.as_str()),
        })
        .collect();
    let bindings = bind::bind(&open, &loose, &entry.bind);
    for b in &bindings {
        if let Some(i) = args.loose.iter().position(|(n, _)| *n == b.argument) {
            let (_, schema) = args.loose.remove(i);
            args.path.insert(b.parameter.clone(), schema);
        }
    }
    bindings
}

/// One tool against what it calls; its defects are pushed onto `out`.
fn compare_tool(
    tool: &Tool,
    expected: &Expected,
    entry: &MappedTool,
    out: &mut Vec<Defect>,
) -> (Layout, Vec<Binding>) {
    let root = &tool.input_schema;
    let layout = layout_of(root);
    let mut args = sort_args(root, layout, expected, entry);
    let bindings = bind_path(root, &mut args, expected, entry);
    if matches!(expected.body, Body::Whole { .. }) {
        // What fits nowhere else was meant for the body, which is no object of fields.
        args.body.extend(args.loose.drain(..));
    }
    let joins: Vec<&str> = entry
        .joins
        .iter()
        .map(|a| entry.rename.get(a).unwrap_or(a).as_str())
        .collect();
    // A field the server builds from arguments it nests there is filled, as a supplied one is.
    let supplied: Vec<String> = entry
        .supplied
        .iter()
        .chain(entry.nests.values())
        .cloned()
        .collect();
    let mut report = Reporter {
        tool,
        expected,
        root,
        supplied: &supplied,
        joins: &joins,
        out,
    };
    // Parameters: path and query exactly, both ways; headers only one way (optional headers
    // such as If-Match may be set by the MCP server itself).
    for (loc, declared) in [(Location::Path, &args.path), (Location::Query, &args.query)] {
        for p in expected.params_in(loc) {
            let found = declared.get(&p.name).copied();
            report.one(
                &p.name,
                (&p.summary.ty, &p.members),
                found,
                DefectKind::MissingParam,
            );
        }
        for name in declared.keys().filter(|n| !expected.is_param(loc, n)) {
            report.unreachable(name, loc.as_str());
        }
    }
    let unreachable_path = layout == Layout::Grouped;
    for (name, _) in &args.loose {
        report.unreachable(name, if unreachable_path { "path" } else { "body" });
    }
    for name in args.header.keys().filter(|n| {
        !expected.is_param(Location::Header, n)
            && !entry.headers.iter().any(|h| h.eq_ignore_ascii_case(n))
    }) {
        report.unreachable(name, "header");
    }
    report.body(&args);
    (layout, bindings)
}

/// Pushes one tool's defects.
struct Reporter<'a, 'c> {
    tool: &'a Tool,
    expected: &'a Expected<'c>,
    root: &'a Value,
    supplied: &'a [String],
    /// Spec names of array arguments the server joins into one string.
    joins: &'a [&'a str],
    out: &'a mut Vec<Defect>,
}

impl Reporter<'_, '_> {
    fn push(
        &mut self,
        kind: DefectKind,
        field: &str,
        expected: Option<String>,
        declared: Option<String>,
    ) {
        self.out.push(Defect {
            tool: self.tool.name.clone(),
            operation: self.expected.label.clone(),
            kind,
            field: field.to_string(),
            expected,
            declared,
            candidates: Vec::new(),
        });
    }

    fn unreachable(&mut self, name: &str, place: &str) {
        self.push(
            DefectKind::UnreachableArgument,
            name,
            None,
            Some(place.into()),
        );
    }

    /// One expected field against what the tool declares for it: absent (unless the server
    /// supplies it), of a shape not taught, or of another type.
    fn one(
        &mut self,
        name: &str,
        (ty, members): (&FieldType, &[FieldType]),
        found: Option<&Value>,
        missing: DefectKind,
    ) {
        let shown = || match members {
            [] => ty.to_string(),
            m => show(m),
        };
        let Some(schema) = found else {
            if !self.supplied.iter().any(|s| s == name) {
                self.push(missing, name, Some(shown()), Some("absent".into()));
            }
            return;
        };
        match declared(self.root, schema) {
            Err(reason) => self.push(DefectKind::Untaught, name, Some(shown()), Some(reason)),
            Ok(got) if self.joined(name, ty, &got) => {}
            Ok(got) if !fits(ty, members, &got) => self.push(
                DefectKind::TypeMismatch,
                name,
                Some(shown()),
                Some(show(&got)),
            ),
            Ok(_) => {}
        }
    }

    /// An array of strings the map says the server joins, where the spec takes one string.
    fn joined(&self, name: &str, ty: &FieldType, got: &[FieldType]) -> bool {
        self.joins.contains(&name)
            && *ty == FieldType::String
            && got.iter().any(|g| matches!(g, FieldType::Array(_)))
    }

    fn body(&mut self, args: &Args) {
        let declared_body: Option<BTreeMap<String, &Value>> = match args.body_schema {
            Some(schema) => {
                let schema = deref(self.root, schema);
                (schema.get("properties").is_some())
                    .then(|| properties(schema).map(|(k, v)| (k.clone(), v)).collect())
            }
            None => Some(args.body.clone()),
        };
        match (&self.expected.body, declared_body) {
            (Body::None, declared) => {
                let extra = declared
                    .into_iter()
                    .flat_map(|d| d.into_keys())
                    .chain(args.body_schema.map(|_| "requestBody".to_string()));
                for name in extra.collect::<std::collections::BTreeSet<_>>() {
                    self.unreachable(&name, "body");
                }
            }
            (Body::Fields(fields), Some(declared)) => {
                for f in fields.iter().filter(|f| !f.property.read_only) {
                    let found = declared.get(&f.property.name).copied();
                    if found.is_none() && !f.always {
                        continue;
                    }
                    let missing = match f.clears {
                        true => DefectKind::SilentClear,
                        false => DefectKind::MissingField,
                    };
                    let p = f.property;
                    self.one(&p.name, (&p.summary.ty, &p.members), found, missing);
                }
                for name in declared.keys().filter(|n| !self.expected.is_field(n)) {
                    self.unreachable(name, "body");
                }
            }
            (Body::Whole { media, .. }, Some(declared))
                if !declared.is_empty() || args.body_schema.is_some() =>
            {
                let why = format!(
                    "the request body is not a plain object schema ({}); declare it as one \
                     `requestBody` argument",
                    media.summary
                );
                self.push(
                    DefectKind::Untaught,
                    "requestBody",
                    Some(media.summary.to_string()),
                    Some(why),
                );
            }
            (Body::Whole { media, required }, Some(_)) => {
                if *required {
                    let ty = media.summary.ty.to_string();
                    self.push(
                        DefectKind::MissingField,
                        "requestBody",
                        Some(ty),
                        Some("absent".into()),
                    );
                }
            }
            (Body::Whole { media, .. }, None) => {
                // One body argument that is not an object of properties: its type, whole.
                let schema = args.body_schema.unwrap_or(&Value::Null);
                self.one(
                    "requestBody",
                    (&media.summary.ty, &[]),
                    Some(schema),
                    DefectKind::MissingField,
                );
            }
            (Body::Fields(_), None) => {
                let schema = args.body_schema.unwrap_or(&Value::Null);
                self.one(
                    "requestBody",
                    (&FieldType::Object, &[]),
                    Some(schema),
                    DefectKind::MissingField,
                );
            }
        }
    }
}

/// The JSON Schema a generated tool declares for a type (the inverse of `declared`): a union's
/// members as `anyOf`.
pub(super) fn schema_for(
    ty: &FieldType,
    members: &[FieldType],
    nullable: bool,
    description: Option<&str>,
) -> Value {
    let mut out = Map::new();
    let name = match ty {
        FieldType::String => Some("string"),
        FieldType::Integer => Some("integer"),
        FieldType::Number => Some("number"),
        FieldType::Boolean => Some("boolean"),
        FieldType::Object => Some("object"),
        FieldType::Array(item) => {
            out.insert("items".into(), schema_for(item, &[], false, None));
            Some("array")
        }
        FieldType::Any => {
            if !members.is_empty() {
                let branches = members.iter().map(|m| schema_for(m, &[], false, None));
                out.insert("anyOf".into(), Value::Array(branches.collect()));
            }
            None
        }
    };
    if let Some(name) = name {
        out.insert(
            "type".into(),
            if nullable {
                serde_json::json!([name, "null"])
            } else {
                Value::String(name.into())
            },
        );
    }
    if let Some(d) = description {
        out.insert("description".into(), Value::String(d.into()));
    }
    Value::Object(out)
}
