//! The compiled view of one operation: everything the audit needs, computed once at load so
//! that a request costs a route lookup and a few comparisons.

use std::sync::Arc;

use super::lazy::{Lazy, LazyBody};

use super::types::{FieldType, TypeSummary};
use crate::finding::Location;

/// How a write treats the fields it does not send (design.md, "Write semantics").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteSemantics {
    /// Full replace: an omitted field is cleared (default for PUT).
    Replace,
    /// Partial update: omitted fields keep their values (default for PATCH).
    Merge,
    /// Creates a resource (default for POST).
    Create,
    /// Adds to a collection without touching existing fields.
    Additive,
    /// The body is the parameters of an action, not a state (GitHub's file write, merge,
    /// branch update): what it leaves out erases nothing.
    Action,
    /// Not a write (GET, DELETE, ...).
    None,
}

impl WriteSemantics {
    pub fn parse(s: &str) -> Option<WriteSemantics> {
        Some(match s {
            "replace" => WriteSemantics::Replace,
            "merge" => WriteSemantics::Merge,
            "create" => WriteSemantics::Create,
            "additive" => WriteSemantics::Additive,
            "action" => WriteSemantics::Action,
            "none" => WriteSemantics::None,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WriteSemantics::Replace => "replace",
            WriteSemantics::Merge => "merge",
            WriteSemantics::Create => "create",
            WriteSemantics::Additive => "additive",
            WriteSemantics::Action => "action",
            WriteSemantics::None => "none",
        }
    }

    pub(crate) fn default_for(method: &str) -> WriteSemantics {
        match method {
            "PUT" => WriteSemantics::Replace,
            "PATCH" => WriteSemantics::Merge,
            "POST" => WriteSemantics::Create,
            _ => WriteSemantics::None,
        }
    }
}

/// OpenAPI parameter serialization styles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    Form,
    Simple,
    Matrix,
    Label,
    SpaceDelimited,
    PipeDelimited,
    DeepObject,
}

impl Style {
    pub(crate) fn parse(s: &str) -> Option<Style> {
        Some(match s {
            "form" => Style::Form,
            "simple" => Style::Simple,
            "matrix" => Style::Matrix,
            "label" => Style::Label,
            "spaceDelimited" => Style::SpaceDelimited,
            "pipeDelimited" => Style::PipeDelimited,
            "deepObject" => Style::DeepObject,
            _ => return None,
        })
    }
}

#[derive(Debug)]
pub struct Param {
    /// As declared (case-sensitive, except header names, which are kept lowercase).
    pub name: String,
    pub location: Location,
    pub required: bool,
    pub style: Style,
    pub explode: bool,
    pub summary: TypeSummary,
    /// The member types where the schema is a union of different types (see `types::members`).
    pub members: Vec<FieldType>,
    /// For object parameters: the declared property names, which appear as query keys of their
    /// own when exploded (`form`) or as `name[prop]` (`deepObject`), with their types (each
    /// value is read as its own property's type).
    pub properties: Vec<(String, FieldType)>,
    /// An object parameter that accepts any key (`additionalProperties` not `false`): with
    /// form+explode it swallows every otherwise unknown query key.
    pub free_form: bool,
    /// Declared with `content: application/json` instead of `schema`: the value is JSON text.
    pub json_content: bool,
    /// `allowEmptyValue: true`: the name alone (`?pretty=`) is a valid value.
    pub allow_empty: bool,
    /// A path parameter whose value may hold `/` (`x-multi-segment: true` and its likes).
    pub spans_segments: bool,
    /// The allowed values, where the schema is an enum (for spec diffs).
    pub enum_values: Option<Vec<serde_json::Value>>,
    /// As the spec describes it (generated tool catalogs carry it).
    pub description: Option<String>,
    pub validator: Lazy,
}

#[derive(Debug)]
pub struct Property {
    pub name: String,
    pub summary: TypeSummary,
    /// The member types where the schema is a union of different types (see `types::members`).
    pub members: Vec<FieldType>,
    pub required: bool,
    pub read_only: bool,
    pub write_only: bool,
    /// The allowed values, where the property is an enum (for spec diffs).
    pub enum_values: Option<Vec<serde_json::Value>>,
    /// As the spec describes it (generated tool catalogs carry it).
    pub description: Option<String>,
}

/// `additionalProperties` on an object body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Additional {
    /// Not stated: undeclared fields are tolerated by the schema, but likely drift (warning).
    Absent,
    /// `false`: the schema forbids undeclared fields (error).
    Forbidden,
    /// `true` or a schema: a free-form map, undeclared fields are expected.
    Allowed,
}

/// The top-level shape of a request body, for the checks JSON Schema cannot express
/// (undeclared fields where `additionalProperties` is absent, omissions on a replace).
#[derive(Debug)]
pub enum BodyShape {
    Object {
        properties: Vec<Property>,
        additional: Additional,
        /// Names declared only in the `anyOf`/`oneOf` branches of its `allOf` members: declared
        /// (never undeclared), yet neither required nor omitted by a body of another branch.
        alternatives: Vec<String>,
    },
    /// `oneOf`/`anyOf`: the properties come from the branch the body validates against.
    Variants(Vec<(LazyBody, BodyShape)>),
    /// An array whose items have a shape (a list response of objects).
    Array(Arc<BodyShape>),
    /// Not an object (a string, no schema): only the validator applies.
    Opaque,
}

#[derive(Debug)]
pub struct MediaBody {
    /// As declared; may be a range such as `application/*+json`.
    pub media_type: String,
    /// A JSON media type, so the body is parsed and validated.
    pub json: bool,
    pub validator: LazyBody,
    pub shape: Arc<BodyShape>,
    /// The schema's type in the small vocabulary (for spec diffs).
    pub summary: TypeSummary,
}

#[derive(Debug)]
pub struct RequestBody {
    pub required: bool,
    pub media: Vec<MediaBody>,
    /// Top-level keys the spec's own JSON examples of the body send that its schema does not
    /// declare (GitHub's bulk-list example sends `predicateType`, its schema `predicate_type`):
    /// the spec names the field both ways, so neither is called a rename.
    pub example_keys: Vec<String>,
}

#[derive(Debug)]
pub struct Operation {
    /// Its place in [`super::Contract::operations`]: what names it exactly where an
    /// `operationId` does not (a spec may give two operations one id).
    pub index: usize,
    /// `operationId`, else `"PUT /api/channels/{id}"`.
    pub id: String,
    /// Another operation of the spec has the same `id` (invalid, found in real specs): what
    /// must name this one exactly uses [`Operation::label`] or `index` instead.
    pub id_shared: bool,
    /// Uppercase (`PUT`).
    pub method: String,
    /// The path template as declared (`/api/channels/{id}`), without the servers base path.
    pub template: String,
    /// Its `summary` (or the start of its `description`): what a tool's mapper reads.
    pub summary: Option<String>,
    /// Names of the template's path parameters, in order of appearance.
    pub path_params: Vec<String>,
    pub params: Vec<Param>,
    pub body: Option<RequestBody>,
    pub write: WriteSemantics,
    /// Why it has those semantics: the config, the spec's extension, or what the spec shows.
    pub write_reason: super::WriteReason,
    /// JSON pointer of the operation object, for error messages and diffs.
    pub pointer: String,
    /// Every declared response, compiled, for the response audit.
    pub responses: super::Responses,
    /// The replace writes whose resource this GET shows (their places, as ids may repeat): a
    /// field its response carries that their bodies lack will be dropped by clients built from
    /// the spec.
    pub replaced_by: Vec<usize>,
    /// Top-level properties of the 2xx JSON response, where the spec declares an object.
    pub response_fields: Option<Vec<String>>,
    /// Those of them its schema requires: a read of the resource that lacks one is not the
    /// resource (an envelope, an error object), and a repair will not decide on it.
    pub response_required: Vec<String>,
    /// Top-level properties the spec marks `readOnly` in its 2xx JSON response and, on a replace
    /// write, in its GET's: fields the API computes, which a write that omits them cannot clear
    /// (many specs mark them only in the representation, not in the write's body).
    pub computed: Vec<String>,
    /// A GET whose resource also has a replace write: its responses are remembered.
    pub remembers: bool,
    /// A replace write: the response fields of the GET of the same resource.
    pub read_fields: Option<Vec<String>>,
    /// A replace write: the GET of the same resource (its place in the contract's operations),
    /// which a repair reads the resource by.
    pub read: Option<usize>,
    /// The resource's name for silent-clear memory: the id of the GET that shows it (on the GET
    /// itself and on its replace write), or its method and template where another operation
    /// has the same id. Memory keys are this name plus path parameter values.
    pub resource: Option<String>,
    /// A collection GET whose items are views of an item GET's resource: each is remembered
    /// as if read alone (`contract/views.rs`).
    pub lists: Option<super::ListOf>,
    /// A write whose 2xx answer is its resource as it now is (the same schema as the GET's):
    /// the answer is remembered.
    pub answers_resource: bool,
    /// `x-driftwatch-read` on a write: the GET that shows its resource.
    pub(crate) read_hint: Option<String>,
    /// The apiKey credentials its effective `security` accepts: declared inputs, never unknown.
    pub credentials: Vec<super::Credential>,
    /// Its effective `security` takes a bearer token in `Authorization`.
    pub bearer: bool,
    /// What its effective `security` asks a request to carry, where that can be checked (and
    /// `audit.credentials` is on): `missing_credentials` otherwise.
    pub security: Option<super::Security>,
    /// A parameter of it was left out at load (no name or `in`): no query key is called unknown.
    pub open_query: bool,
    /// Operations declared on the same method and route (`/v1/{name}`, `/v1/{parent}`): a
    /// request is audited against each and the one it fits best is kept.
    pub alternates: Vec<usize>,
    /// Keys its template fixes after the path (`/#X-Amz-Target=Svc.Op`, `/a?type=list`):
    /// declared inputs, and what tells it apart from the operations sharing its path.
    pub route_keys: Vec<super::RouteKey>,
    /// Parts of it left out or weakened at load; a request to it counts as partly unaudited.
    /// What the whole-document checks and its validators' compile add to these is known once
    /// its first request asks ([`super::Contract::skipped`]).
    pub skipped: Vec<super::Skipped>,
    pub(super) skipped_all: std::sync::OnceLock<Vec<super::Skipped>>,
}

impl Operation {
    /// What a request to it is not checked for, as far as known: all of it once
    /// [`super::Contract::skipped`] has run for it (for every operation of a contract compiled
    /// whole: `check`, `--strict`), else the parts left out as it was built.
    pub fn skipped_known(&self) -> &[super::Skipped] {
        self.skipped_all.get().unwrap_or(&self.skipped)
    }

    /// [`super::Contract::skipped`] has run for it: what it returns will not change.
    pub fn skipped_settled(&self) -> bool {
        self.skipped_all.get().is_some()
    }

    /// Its 2xx answer shows a remembered resource: its GET's, a list of them, or a write's
    /// answer that is the resource as it now is.
    pub fn shows_resource(&self) -> bool {
        self.remembers || self.lists.is_some() || self.answers_resource
    }

    /// `"GET /api/channels/{id}"`: its method and template, one per operation.
    pub fn label(&self) -> String {
        format!("{} {}", self.method, self.template)
    }

    pub fn params_in(&self, location: Location) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(move |p| p.location == location)
    }

    pub fn param(&self, location: Location, name: &str) -> Option<&Param> {
        self.params
            .iter()
            .find(|p| p.location == location && p.name == name)
    }

    /// Top-level properties of the JSON body, when its schema is a plain object.
    pub fn body_properties(&self) -> &[Property] {
        let shape = self
            .body
            .as_ref()
            .and_then(|b| b.media.iter().find(|m| m.json))
            .map(|m| &*m.shape);
        match shape {
            Some(BodyShape::Object { properties, .. }) => properties,
            _ => &[],
        }
    }
}
