//! The comparisons behind [`super::diff`]: operations matched by method and path template
//! (parameter names normalized, so renaming `{id}` to `{channelId}` is no change), then their
//! parameters, request bodies, write semantics and top-level response properties.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Change, Class};
use crate::contract::{
    BodyShape, Contract, DeclaredResponse, FieldType, Operation, Param, Property, TypeSummary,
    WriteSemantics,
};
use crate::finding::Location;

pub(super) fn contracts(old: &Contract, new: &Contract) -> Vec<Change> {
    let key = |op: &Operation| {
        format!(
            "{} {}",
            op.method,
            crate::contract::normalize_template(&op.template)
        )
    };
    let old_ops: BTreeMap<String, &Operation> =
        old.operations().iter().map(|op| (key(op), op)).collect();
    let new_ops: BTreeMap<String, &Operation> =
        new.operations().iter().map(|op| (key(op), op)).collect();
    let mut out = Vec::new();
    for (k, op) in &old_ops {
        if !new_ops.contains_key(k) {
            out.push(change(
                Class::Breaking,
                "operation_removed",
                op,
                "operation",
                "",
            ));
        }
    }
    for (k, op) in &new_ops {
        match old_ops.get(k) {
            None => out.push(change(Class::Info, "operation_added", op, "operation", "")),
            Some(before) => operation(old, new, before, op, &mut out),
        }
    }
    out
}

fn change(
    class: Class,
    kind: &'static str,
    op: &Operation,
    location: &'static str,
    field: &str,
) -> Change {
    Change {
        class,
        kind,
        operation: op.id.clone(),
        location,
        field: field.to_string(),
        from: None,
        to: None,
    }
}

fn with(mut c: Change, from: impl Into<Option<String>>, to: impl Into<Option<String>>) -> Change {
    c.from = from.into();
    c.to = to.into();
    c
}

fn operation(old: &Contract, new: &Contract, a: &Operation, b: &Operation, out: &mut Vec<Change>) {
    params(a, b, out);
    body(a, b, out);
    if a.write != b.write {
        let class = if b.write == WriteSemantics::Replace {
            Class::Hazard // clients sending partial bodies now erase what they leave out
        } else {
            Class::Info
        };
        out.push(with(
            change(class, "write_semantics_changed", b, "operation", ""),
            a.write.as_str().to_string(),
            b.write.as_str().to_string(),
        ));
    }
    responses(old, new, a, b, out);
}

/// How a type moved, seen from a request (what the server accepts).
fn request_type_class(from: &TypeSummary, to: &TypeSummary) -> Option<Class> {
    if from == to {
        return None;
    }
    if from.ty == to.ty || to.ty == FieldType::Any {
        // Only nullability moved, or the constraint was dropped.
        return Some(
            if to.nullable || !from.nullable || to.ty == FieldType::Any {
                Class::Info
            } else {
                Class::Breaking
            },
        );
    }
    Some(Class::Breaking)
}

/// Enum values removed from what a request may send (breaking) or added (info).
fn enums(from: &Option<Vec<Value>>, to: &Option<Vec<Value>>, base: Change, out: &mut Vec<Change>) {
    let (Some(from), Some(to)) = (from, to) else {
        return;
    };
    let list = |v: Vec<&Value>| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let removed: Vec<&Value> = from.iter().filter(|v| !to.contains(v)).collect();
    let added: Vec<&Value> = to.iter().filter(|v| !from.contains(v)).collect();
    if !removed.is_empty() {
        let mut c = base.clone();
        c.class = Class::Breaking;
        c.kind = "enum_values_removed";
        out.push(with(c, list(removed), None));
    }
    if !added.is_empty() {
        let mut c = base;
        c.class = Class::Info;
        c.kind = "enum_values_added";
        out.push(with(c, None, list(added)));
    }
}

fn params(a: &Operation, b: &Operation, out: &mut Vec<Change>) {
    let find = |op: &'_ Operation, p: &Param| -> bool {
        op.params
            .iter()
            .any(|q| q.location == p.location && q.name == p.name)
    };
    let removed: Vec<&Param> = a.params.iter().filter(|p| !find(b, p)).collect();
    let mut added: Vec<&Param> = b.params.iter().filter(|p| !find(a, p)).collect();
    for gone in removed {
        removed_param(b, gone, &mut added, out);
    }
    for new in added {
        let class = if new.required {
            Class::Breaking
        } else {
            Class::Info
        };
        out.push(with(
            change(class, "param_added", b, new.location.as_str(), &new.name),
            None,
            new.summary.to_string(),
        ));
    }
    for p in &a.params {
        let Some(q) = b
            .params
            .iter()
            .find(|q| q.location == p.location && q.name == p.name)
        else {
            continue;
        };
        let location = q.location.as_str();
        let field = Field {
            name: &q.name,
            required: (p.required, q.required),
            types: (&p.summary, &q.summary),
            enums: (&p.enum_values, &q.enum_values),
        };
        compare_field(b, location, field, "param", out);
    }
}

/// A parameter `b` no longer has: renamed where one of those `added` is in the same place, of
/// the same type, with a similar name (taken off `added`), else removed.
fn removed_param(b: &Operation, gone: &Param, added: &mut Vec<&Param>, out: &mut Vec<Change>) {
    let location = gone.location.as_str();
    let renamed = added.iter().position(|p| {
        p.location == gone.location && p.summary == gone.summary && similar(&p.name, &gone.name)
    });
    let Some(i) = renamed else {
        out.push(with(
            change(Class::Hazard, "param_removed", b, location, &gone.name),
            gone.summary.to_string(),
            None,
        ));
        return;
    };
    let to = added.remove(i);
    let class = if to.required {
        Class::Breaking
    } else {
        Class::Hazard // old clients still send the old name: ignored or refused
    };
    out.push(with(
        change(class, "param_renamed", b, location, &to.name),
        gone.name.clone(),
        to.name.clone(),
    ));
}

/// One parameter or request body property, before and after.
struct Field<'a> {
    name: &'a str,
    required: (bool, bool),
    types: (&'a TypeSummary, &'a TypeSummary),
    enums: (&'a Option<Vec<Value>>, &'a Option<Vec<Value>>),
}

/// Required, type and enum changes of a parameter or a request body property.
fn compare_field(
    op: &Operation,
    location: &'static str,
    field: Field,
    what: &str,
    out: &mut Vec<Change>,
) {
    let Field {
        name,
        required,
        types,
        enums: (enums_before, enums_after),
    } = field;
    if required.0 != required.1 {
        let (class, kind) = match (what, required.1) {
            ("param", true) => (Class::Breaking, "param_became_required"),
            ("param", false) => (Class::Info, "param_became_optional"),
            (_, true) => (Class::Breaking, "body_property_became_required"),
            (_, false) => (Class::Info, "body_property_became_optional"),
        };
        out.push(change(class, kind, op, location, name));
    }
    if let Some(class) = request_type_class(types.0, types.1) {
        let kind = if what == "param" {
            "param_type_changed"
        } else {
            "body_property_retyped"
        };
        out.push(with(
            change(class, kind, op, location, name),
            types.0.to_string(),
            types.1.to_string(),
        ));
    }
    enums(
        enums_before,
        enums_after,
        change(Class::Info, "", op, location, name),
        out,
    );
}

/// The type of an operation's JSON request body.
fn body_type(op: &Operation) -> Option<&TypeSummary> {
    Some(&op.body.as_ref()?.media.iter().find(|m| m.json)?.summary)
}

/// The top-level properties of an operation's JSON request body, if it is an object.
fn body_properties(op: &Operation) -> Option<&[Property]> {
    let media = op.body.as_ref()?.media.iter().find(|m| m.json)?;
    match &*media.shape {
        BodyShape::Object { properties, .. } => Some(properties),
        _ => None,
    }
}

fn body(a: &Operation, b: &Operation, out: &mut Vec<Change>) {
    let location = Location::Body.as_str();
    match (&a.body, &b.body) {
        (None, Some(body)) => {
            let class = if body.required {
                Class::Breaking
            } else {
                Class::Info
            };
            out.push(change(class, "body_added", b, location, ""));
        }
        (Some(_), None) => out.push(change(Class::Hazard, "body_removed", b, location, "")),
        (Some(x), Some(y)) if !x.required && y.required => out.push(change(
            Class::Breaking,
            "body_became_required",
            b,
            location,
            "",
        )),
        _ => {}
    }
    if let (Some(from), Some(to)) = (body_type(a), body_type(b))
        && let Some(class) = request_type_class(from, to)
    {
        out.push(with(
            change(class, "body_retyped", b, location, ""),
            from.to_string(),
            to.to_string(),
        ));
    }
    if let (Some(before), Some(after)) = (body_properties(a), body_properties(b)) {
        body_fields(b, before, after, out);
    }
}

/// The top-level properties of a request body, before and after (`b`: the new operation).
fn body_fields(b: &Operation, before: &[Property], after: &[Property], out: &mut Vec<Change>) {
    let location = Location::Body.as_str();
    for p in before {
        if p.read_only {
            continue;
        }
        match after.iter().find(|q| q.name == p.name) {
            None => out.push(with(
                change(Class::Hazard, "body_property_removed", b, location, &p.name),
                p.summary.to_string(),
                None,
            )),
            Some(q) => {
                let field = Field {
                    name: &q.name,
                    required: (p.required, q.required),
                    types: (&p.summary, &q.summary),
                    enums: (&p.enum_values, &q.enum_values),
                };
                compare_field(b, location, field, "body", out);
            }
        }
    }
    for q in after
        .iter()
        .filter(|q| !q.read_only && !before.iter().any(|p| p.name == q.name))
    {
        let class = if q.required {
            Class::Breaking
        } else if b.write == WriteSemantics::Replace {
            // The silent-clear mechanism: a client built before it never sends it, and the
            // full replace erases it on every write.
            Class::Hazard
        } else {
            Class::Info
        };
        out.push(with(
            change(class, "body_property_added", b, location, &q.name),
            None,
            q.summary.to_string(),
        ));
    }
}

/// Top-level properties of each declared JSON response: a removed or retyped property breaks a
/// client that reads it; a property that may now be null breaks one that does not expect null;
/// a narrowed or added one is info.
fn responses(old: &Contract, new: &Contract, a: &Operation, b: &Operation, out: &mut Vec<Change>) {
    let location = Location::Response.as_str();
    for before in &a.responses.declared {
        let Some(after) = b
            .responses
            .declared
            .iter()
            .find(|r| r.status.eq_ignore_ascii_case(&before.status))
        else {
            continue;
        };
        let json = |r: &DeclaredResponse| r.media.iter().find(|m| m.json)?.summary.clone();
        if let (Some(from), Some(to)) = (json(before), json(after))
            && from.ty != to.ty
        {
            out.push(with(
                change(
                    Class::Breaking,
                    "response_retyped",
                    b,
                    location,
                    &after.status,
                ),
                from.to_string(),
                to.to_string(),
            ));
            continue;
        }
        if let (Some(x), Some(y)) = (top_fields(old, before), top_fields(new, after)) {
            response_fields(b, &after.status, &x, &y, out);
        }
    }
}

/// The top-level properties of a JSON response's object, with their types.
fn top_fields(c: &Contract, r: &DeclaredResponse) -> Option<Vec<(String, TypeSummary)>> {
    let media = r.media.iter().find(|m| m.json)?;
    match &*c.response_shape(media)? {
        BodyShape::Object { properties, .. } => Some(
            properties
                .iter()
                .map(|p| (p.name.clone(), p.summary.clone()))
                .collect(),
        ),
        _ => None,
    }
}

/// A response's top-level properties before (`x`) and after (`y`), under `status`.
fn response_fields(
    b: &Operation,
    status: &str,
    x: &[(String, TypeSummary)],
    y: &[(String, TypeSummary)],
    out: &mut Vec<Change>,
) {
    let location = Location::Response.as_str();
    for (name, from) in x {
        let field = format!("{status} /{name}");
        match y.iter().find(|(n, _)| n == name) {
            None => out.push(with(
                change(
                    Class::Breaking,
                    "response_property_removed",
                    b,
                    location,
                    &field,
                ),
                from.to_string(),
                None,
            )),
            Some((_, to)) if to != from => {
                let class = if from.ty == to.ty && from.nullable && !to.nullable {
                    Class::Info
                } else {
                    Class::Breaking
                };
                out.push(with(
                    change(class, "response_property_retyped", b, location, &field),
                    from.to_string(),
                    to.to_string(),
                ));
            }
            Some(_) => {}
        }
    }
    for (name, to) in y.iter().filter(|(n, _)| !x.iter().any(|(m, _)| m == n)) {
        let field = format!("{status} /{name}");
        out.push(with(
            change(Class::Info, "response_property_added", b, location, &field),
            None,
            to.to_string(),
        ));
    }
}

/// Names that differ only in case and separators (`customer_id`, `customerId`), or are close
/// by Jaro-Winkler.
fn similar(a: &str, b: &str) -> bool {
    let squash = |s: &str| {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .collect::<String>()
            .to_lowercase()
    };
    squash(a) == squash(b) || strsim::jaro_winkler(&a.to_lowercase(), &b.to_lowercase()) >= 0.9
}
