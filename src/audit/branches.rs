//! Bodies composed of branches (`anyOf`, `oneOf`): which branch a body was meant for, so that
//! its fields are judged by that branch, and a body that fits none is told what the closest
//! branch rejects, field by field. "Not valid under any of the schemas listed in the 'anyOf'
//! keyword" names no field: neither the agent nor the operator can act on it.

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;

use crate::contract::BodyShape;
use crate::json::Node;

/// For a `oneOf`/`anyOf` body, the shape of the branch it was meant for: of the branches it
/// validates against, the one declaring most of its keys (the first on a tie); `None` when it
/// validates against none.
pub(super) fn chosen_shape<'s>(shape: &'s BodyShape, value: Node) -> Option<&'s BodyShape> {
    match shape {
        BodyShape::Variants(branches) => {
            let mut best: Option<(usize, &BodyShape)> = None;
            for (validator, branch) in branches {
                if !validator.get().is_none_or(|v| v.is_valid(value)) {
                    continue;
                }
                let Some(chosen) = chosen_shape(branch, value) else {
                    continue;
                };
                let score = declared_keys(chosen, value);
                if best.is_none_or(|(s, _)| score > s) {
                    best = Some((score, chosen));
                }
            }
            best.map(|(_, s)| s)
        }
        BodyShape::Opaque => None,
        object => Some(object),
    }
}

/// How many of the body's keys `shape` declares at its top level.
fn declared_keys(shape: &BodyShape, value: Node) -> usize {
    let (BodyShape::Object { properties, .. }, Some(object)) = (shape, value.as_object()) else {
        return 0;
    };
    object
        .members()
        .filter(|(key, _)| properties.iter().any(|p| p.name == *key))
        .count()
}

/// Whether `shape`, or any branch of it at any depth that `value` validates against, declares
/// `key` at the top level: a body is an instance of every branch it fits (`oneOf` is read as
/// `anyOf`, see `spec::readings`), so a field of another branch it fits is declared, whichever
/// branch it was judged by; a field of a branch it does not fit (a cat's `indoor` on a dog)
/// is not.
pub(super) fn declared_in_any(shape: &BodyShape, key: &str, value: Node) -> bool {
    match shape {
        BodyShape::Object {
            properties,
            alternatives,
            ..
        } => properties.iter().any(|p| p.name == key) || alternatives.iter().any(|a| a == key),
        BodyShape::Variants(branches) => branches.iter().any(|(validator, s)| {
            validator.get().is_none_or(|v| v.is_valid(value)) && declared_in_any(s, key, value)
        }),
        _ => false,
    }
}

/// For an `anyOf`/`oneOf` that no branch accepts: the errors of the branch that came closest,
/// and its place among the branches. The branch the body's discriminator points to comes
/// first (a branch rejecting a `const` or one-value `enum` is one the body was not meant for),
/// then the one with the fewest errors, undeclared keys counted one each.
pub(super) fn closest(kind: &ValidationErrorKind) -> Option<(usize, &[ValidationError<'static>])> {
    let context = match kind {
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
            context
        }
        _ => return None,
    };
    context
        .iter()
        .enumerate()
        .filter(|(_, errors)| !errors.is_empty())
        .min_by_key(|(_, errors)| distance(errors))
        .map(|(i, errors)| (i, errors.as_slice()))
}

/// How far a branch's errors say the body is from it.
fn distance(errors: &[ValidationError<'static>]) -> usize {
    errors
        .iter()
        .map(|e| match e.kind() {
            ValidationErrorKind::Constant { .. } => 1000,
            ValidationErrorKind::Enum { options }
                if options.as_array().is_some_and(|o| o.len() == 1) =>
            {
                1000
            }
            ValidationErrorKind::AdditionalProperties { unexpected }
            | ValidationErrorKind::UnevaluatedProperties { unexpected } => unexpected.len(),
            _ => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use crate::contract::{Contract, ContractOptions};
    use crate::finding::Kind;
    use crate::spec::Spec;
    use serde_json::json;

    /// A resource's actions as a cloud API declares them: an `anyOf` of `allOf`s, each the
    /// common action (its `type` one value) and the action's own fields.
    fn actions() -> Contract {
        let action = |kind: &str, fields: serde_json::Value| {
            json!({"allOf": [
                {"type": "object", "required": ["type"], "properties": {"type": {"type": "string", "enum": [kind]}}},
                {"properties": fields}]})
        };
        let doc = json!({"openapi": "3.1.0", "paths": {"/droplets/{id}/actions": {"post": {
            "operationId": "act", "responses": {"201": {"description": "ok"}},
            "requestBody": {"content": {"application/json": {"schema": {"anyOf": [
                action("enable_backups", json!({"backup_policy": {"type": "object"}})),
                action("resize", json!({"size": {"type": "string"}, "disk": {"type": "boolean"}})),
                {"allOf": [{"type": "object", "properties": {"type": {"type": "string", "enum": ["rebuild"]}}},
                           {"oneOf": [{"properties": {"image": {"type": "string"}}},
                                      {"properties": {"image_id": {"type": "integer"}}}]}]}]}}}}}}}});
        let spec = Spec::from_document(std::path::Path::new("actions.json"), doc).unwrap();
        Contract::compile(&spec, &ContractOptions::default()).unwrap()
    }

    fn audit(contract: &Contract, body: serde_json::Value) -> Vec<crate::finding::Finding> {
        let headers = vec![("content-type".to_string(), "application/json".to_string())];
        let body = body.to_string();
        let view = crate::request::RequestView::new(
            "POST",
            "/droplets/1/actions",
            &headers,
            Some(body.as_bytes()),
        );
        crate::audit::audit(contract, &view).findings
    }

    #[test]
    fn a_field_of_any_branch_at_any_depth_is_declared() {
        let c = actions();
        for body in [
            json!({"type": "resize", "size": "s-1", "disk": true}),
            json!({"type": "enable_backups", "backup_policy": {"plan": "weekly"}}),
            json!({"type": "rebuild", "image": "ubuntu"}),
            json!({"type": "rebuild", "image_id": 7}),
        ] {
            assert_eq!(audit(&c, body.clone()), [], "{body}");
        }
        let found = audit(&c, json!({"type": "resize", "size": "s-1", "sise": 1}));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].kind, found[0].field.as_str()),
            (Kind::UndeclaredBodyField, "/sise")
        );
    }

    #[test]
    fn a_body_no_branch_accepts_is_told_what_the_branch_its_type_names_rejects() {
        let found = audit(
            &actions(),
            json!({"type": "resize", "size": 5, "disk": "yes"}),
        );
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!(
            (f.kind, f.field.as_str()),
            (Kind::BodySchemaViolation, "/size")
        );
        assert_eq!(f.expected.as_deref(), Some("anyOf branch 1"));
        assert!(
            f.message.starts_with(
                "the body fits no branch of its `anyOf`; the closest (branch 1) rejects: "
            ) && f
                .message
                .contains("body field `/size` is integer, the spec says string")
                && f.message
                    .contains("body field `/disk` is string, the spec says boolean"),
            "{}",
            f.message
        );
    }
}
