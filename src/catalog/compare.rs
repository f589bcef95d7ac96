//! The comparison: each tool's arguments, sorted by layout into path, query, header and body,
//! against what its operation (or operations) expects, on the small type vocabulary. A tool no
//! one mapped, or an argument of a shape not taught, is a defect naming what is missing; the
//! rest of the catalog is still checked.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use super::args::{Args, bind_path, layout_of, sort_args};
use super::bind::Binding;
use super::declared::{declared, fits, show};
use super::expected::{Body, Expected, Field};
use super::{
    CatalogError, Defect, DefectKind, Elsewhere, Layout, MappedTool, Mapper, Mapping, Matched,
    Report, Tool, find_operation,
};
use crate::contract::{Contract, FieldType, Operation};
use crate::finding::Location;

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
    // Scored only when a tool is unmapped, then once for the whole catalog.
    let mapper = std::cell::OnceCell::new();
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
                    report.defects.push(
                        mapper
                            .get_or_init(|| Mapper::new(contract, tools))
                            .unmapped(tool),
                    );
                    continue;
                }
            },
        };
        let ops = operations(contract, tool, &references)?;
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
    report.unexposed = unexposed(contract, &reached);
    report.rank();
    Ok(report)
}

/// The operations no tool reaches, as `METHOD /template (id)`.
fn unexposed(contract: &Contract, reached: &HashSet<String>) -> Vec<String> {
    (contract.operations().iter())
        .filter(|op| !reached.contains(&op.id))
        .map(|op| format!("{} {} ({})", op.method, op.template, op.id))
        .collect()
}

/// The operations `references` name, each found in `contract`; one it lacks is the map's error.
fn operations<'c>(
    contract: &'c Contract,
    tool: &Tool,
    references: &[String],
) -> Result<Vec<&'c Operation>, CatalogError> {
    references
        .iter()
        .map(|r| {
            find_operation(contract, r).ok_or_else(|| CatalogError::UnknownOperation {
                tool: tool.name.clone(),
                operation: r.clone(),
            })
        })
        .collect()
}

/// One tool against what it calls; its defects are pushed onto `out`.
fn compare_tool(
    tool: &Tool,
    expected: &Expected,
    entry: &MappedTool,
    out: &mut Vec<Defect>,
) -> (Layout, Vec<Binding>) {
    let root = &tool.input_schema;
    let arguments = super::args::arguments_of(root, expected);
    let layout = layout_of(arguments);
    let mut args = sort_args(root, arguments, layout, expected, entry);
    let bindings = bind_path(arguments, &mut args, expected, entry);
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
    report.params(&args);
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
    /// Parameters: path and query exactly, both ways; headers only one way (optional headers
    /// such as If-Match may be set by the MCP server itself).
    fn params(&mut self, args: &Args<'_>) {
        let expected = self.expected;
        for (loc, declared) in [(Location::Path, &args.path), (Location::Query, &args.query)] {
            for p in expected.params_in(loc) {
                let found = declared.get(&p.name).copied();
                self.one(
                    &p.name,
                    (&p.summary.ty, &p.members),
                    found,
                    (DefectKind::MissingParam, p.required),
                );
                self.enums(&p.name, p.enum_values.as_deref(), found);
            }
            for name in declared.keys().filter(|n| !expected.is_param(loc, n)) {
                self.unreachable(name, loc.as_str());
            }
        }
    }

    /// A defect of every kind but a missing optional one ([`Reporter::push_missing`]).
    fn push(
        &mut self,
        kind: DefectKind,
        field: &str,
        expected: Option<String>,
        declared: Option<String>,
    ) {
        self.push_missing((kind, true), field, expected, declared);
    }

    fn push_missing(
        &mut self,
        (kind, required): (DefectKind, bool),
        field: &str,
        expected: Option<String>,
        declared: Option<String>,
    ) {
        self.out.push(Defect {
            tool: self.tool.name.clone(),
            operation: self.expected.label.clone(),
            kind,
            severity: kind.severity(required),
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

    /// Values the tool offers for an argument that the spec's enum does not take
    /// (`merge-commit` where the API takes `merge_commit`): every call with one is refused or
    /// misread. Compared as the wire carries them, as text.
    fn enums(&mut self, name: &str, spec: Option<&[Value]>, found: Option<&Value>) {
        let offered = found
            .map(|schema| crate::contract::deref(self.root, schema))
            .and_then(|schema| schema.get("enum"))
            .and_then(Value::as_array);
        let (Some(spec), Some(offered)) = (spec, offered) else {
            return;
        };
        let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), String::from);
        let taken: Vec<String> = spec.iter().map(text).collect();
        let refused: Vec<String> = offered
            .iter()
            .map(text)
            .filter(|v| !taken.contains(v))
            .collect();
        if refused.is_empty() {
            return;
        }
        let list = |v: &[String]| {
            let shown: Vec<&str> = v.iter().take(10).map(String::as_str).collect();
            let more = v.len().saturating_sub(shown.len());
            match more {
                0 => shown.join(", "),
                n => format!("{}, ... ({n} more)", shown.join(", ")),
            }
        };
        self.push(
            DefectKind::EnumMismatch,
            name,
            Some(list(&taken)),
            Some(list(&refused)),
        );
    }

    /// One expected field against what the tool declares for it: absent (unless the server
    /// supplies it), of a shape not taught, or of another type. `missing` is the kind an
    /// absent one is, and whether the spec requires it.
    fn one(
        &mut self,
        name: &str,
        (ty, members): (&FieldType, &[FieldType]),
        found: Option<&Value>,
        missing: (DefectKind, bool),
    ) {
        let shown = || match members {
            [] => ty.to_string(),
            m => show(m),
        };
        let Some(schema) = found else {
            if !self.supplied.iter().any(|s| s == name) {
                self.push_missing(missing, name, Some(shown()), Some("absent".into()));
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

    /// Field by field: each the tool omits is missing (a silent clear on a full replace), each
    /// it adds is unreachable.
    fn fields(&mut self, fields: &[Field], declared: &BTreeMap<String, &Value>) {
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
            let missing = (missing, p.required);
            self.one(&p.name, (&p.summary.ty, &p.members), found, missing);
            self.enums(&p.name, p.enum_values.as_deref(), found);
        }
        for name in declared.keys().filter(|n| !self.expected.is_field(n)) {
            self.unreachable(name, "body");
        }
    }

    /// An array of strings the map says the server joins, where the spec takes one string.
    fn joined(&self, name: &str, ty: &FieldType, got: &[FieldType]) -> bool {
        self.joins.contains(&name)
            && *ty == FieldType::String
            && got.iter().any(|g| matches!(g, FieldType::Array(_)))
    }

    /// The body the tool declares against the one the operation takes.
    fn body(&mut self, args: &Args) {
        match (&self.expected.body, args.declared_body(self.root)) {
            (Body::None, declared) => {
                let extra = declared
                    .into_iter()
                    .flat_map(|d| d.into_keys())
                    .chain(args.body_schema.map(|_| "requestBody".to_string()));
                for name in extra.collect::<std::collections::BTreeSet<_>>() {
                    self.unreachable(&name, "body");
                }
            }
            (Body::Fields(fields), Some(declared)) => self.fields(fields, &declared),
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
                    (DefectKind::MissingField, true),
                );
            }
            (Body::Fields(_), None) => {
                let schema = args.body_schema.unwrap_or(&Value::Null);
                self.one(
                    "requestBody",
                    (&FieldType::Object, &[]),
                    Some(schema),
                    (DefectKind::MissingField, true),
                );
            }
        }
    }
}
