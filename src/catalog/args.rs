//! A tool's arguments sorted by where they go on the wire: path, query, header, body, or
//! nowhere by name (loose: the candidates for the path parameters no argument is named after).
//! The map's renames, bindings and local arguments apply here, before anything is compared.

use std::collections::BTreeMap;

use serde_json::Value;

use super::bind::{self, Binding, Loose};
use super::expected::Expected;
use super::{Layout, MappedTool};
use crate::contract::deref;
use crate::finding::Location;

pub(super) const GROUPS: [&str; 4] = [
    "pathParameters",
    "queryParameters",
    "headerParameters",
    "body",
];

/// A tool's arguments by where they go, keyed by the name they go on the wire under.
#[derive(Default)]
pub(super) struct Args<'t> {
    pub path: BTreeMap<String, &'t Value>,
    pub query: BTreeMap<String, &'t Value>,
    pub header: BTreeMap<String, &'t Value>,
    /// Body fields (flat and grouped-as-object).
    pub body: BTreeMap<String, &'t Value>,
    /// The one body argument's schema (nested and grouped layouts).
    pub body_schema: Option<&'t Value>,
    /// Arguments that fit nowhere by name: path-parameter candidates, else unreachable.
    pub loose: Vec<(String, &'t Value)>,
}

impl<'t> Args<'t> {
    /// The body fields the tool declares: its flat body arguments, or the properties of its
    /// one body argument; `None` when that argument is no object of properties.
    pub fn declared_body(&self, root: &'t Value) -> Option<BTreeMap<String, &'t Value>> {
        match self.body_schema {
            Some(schema) => {
                let schema = deref(root, schema);
                (schema.get("properties").is_some())
                    .then(|| properties(schema).map(|(k, v)| (k.clone(), v)).collect())
            }
            None => Some(self.body.clone()),
        }
    }
}

pub(super) fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
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

pub(super) fn layout_of(root: &Value) -> Layout {
    let top: Vec<&String> = properties(root).map(|(k, _)| k).collect();
    if !top.is_empty() && top.iter().all(|k| GROUPS.contains(&k.as_str())) {
        Layout::Grouped
    } else if top.iter().any(|k| *k == "requestBody") {
        Layout::Nested
    } else {
        Layout::Flat
    }
}

/// The schema whose properties are the tool's arguments: its input schema, or the one object
/// argument that wraps them all (Speakeasy's generated servers take `{"request": {...}}`),
/// where that argument is no parameter or field of the operation itself.
pub(super) fn arguments_of<'t>(root: &'t Value, expected: &Expected) -> &'t Value {
    let mut top = properties(root);
    let (Some((name, schema)), None) = (top.next(), top.next()) else {
        return root;
    };
    let inner = deref(root, schema);
    let named = GROUPS.contains(&name.as_str())
        || name == "requestBody"
        || expected.is_field(name)
        || [Location::Path, Location::Query, Location::Header]
            .iter()
            .any(|loc| expected.is_param(*loc, name));
    match !named && inner.get("properties").is_some() {
        true => inner,
        false => root,
    }
}

/// Whether an object argument holds the body's fields (Speakeasy names it after the body's
/// schema, `PatchWithComment`): at least half of its properties, and at least one, are fields.
fn holds_the_body(root: &Value, schema: &Value, expected: &Expected) -> bool {
    let names: Vec<&String> = properties(deref(root, schema)).map(|(k, _)| k).collect();
    let fields = names.iter().filter(|n| expected.is_field(n)).count();
    fields > 0 && fields * 2 >= names.len()
}

/// Sort the tool's arguments by where they go: by group (grouped layout) or by name.
/// `arguments` is the schema whose properties they are ([`arguments_of`]); `root` resolves refs.
pub(super) fn sort_args<'t>(
    root: &'t Value,
    arguments: &'t Value,
    layout: Layout,
    expected: &Expected,
    entry: &MappedTool,
) -> Args<'t> {
    if layout == Layout::Grouped {
        return sort_grouped(root, arguments, entry);
    }
    let mut args = Args::default();
    for (name, schema) in properties(arguments) {
        if entry.local.contains(name) || entry.nests.contains_key(name) {
            continue;
        }
        let w = entry.rename.get(name).unwrap_or(name).clone();
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
            // So may a query parameter of one operation and a body field of another (a tool
            // that reads `?email=` and writes the record back with its `email`).
            if expected.is_field(&w) {
                args.body.insert(w.clone(), schema);
            }
            args.query.insert(w, schema);
        } else if expected.is_param(Location::Header, &w)
            || entry.headers.iter().any(|h| h.eq_ignore_ascii_case(name))
        {
            args.header.insert(w, schema);
        } else if expected.is_field(&w) {
            args.body.insert(w, schema);
        } else if args.body_schema.is_none()
            && matches!(expected.body, super::expected::Body::Fields(_))
            && holds_the_body(root, schema, expected)
        {
            args.body_schema = Some(schema);
        } else {
            args.loose.push((name.clone(), schema));
        }
    }
    args
}

/// The grouped layout's arguments: `pathParameters`, `queryParameters`, `headerParameters` and
/// `body`, each a group of its own.
fn sort_grouped<'t>(root: &'t Value, arguments: &'t Value, entry: &MappedTool) -> Args<'t> {
    let mut args = Args::default();
    let wire = |name: &String| entry.rename.get(name).unwrap_or(name).clone();
    let group = |g: &str| arguments.get("properties").and_then(|p| p.get(g));
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
    args
}

/// Fill the path parameters no argument is named after from the loose arguments.
pub(super) fn bind_path(
    root: &Value,
    args: &mut Args,
    expected: &Expected,
    entry: &MappedTool,
) -> Vec<Binding> {
    // Open: no argument is named after it, or the map binds one to it all the same; never one
    // the server fills itself (a tenant in every path).
    let open: Vec<&str> = expected
        .params_in(Location::Path)
        .map(|p| p.name.as_str())
        .filter(|p| !args.path.contains_key(*p) || entry.bind.values().any(|b| b == p))
        .filter(|p| !entry.supplied.iter().any(|s| s == p))
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
    let bindings = bind::bind(&open, &expected.collections, &loose, &entry.bind);
    for b in &bindings {
        if let Some(i) = args.loose.iter().position(|(n, _)| *n == b.argument) {
            let (_, schema) = args.loose.remove(i);
            args.path.insert(b.parameter.clone(), schema);
        }
    }
    bindings
}
