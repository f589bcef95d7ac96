//! The request body: media type, JSON syntax, the compiled schema, then what JSON Schema
//! cannot say: undeclared fields where `additionalProperties` is absent, and declared fields a
//! full-replace write leaves out (the first sign of a silent clear).

use std::borrow::Cow;

use compact_str::ToCompactString;
use jsonschema::ValidationError;
use jsonschema::error::{TypeKind, ValidationErrorKind};

use super::bounded::Findings;
use super::suggest::did_you_mean;
use crate::contract::{Additional, BodyShape, MediaBody, Operation, Property, WriteSemantics};
use crate::finding::{Finding, Kind, Location, Severity};
use crate::json::Node;
use crate::request::RequestView;

/// Which of an operation's top-level body properties (by index in
/// [`Operation::body_properties`]) a request's JSON body sent, as the audit's one pass over
/// its keys found them: what `/coverage` marks, so it need not read the body again.
/// Up to 64 properties are held inline: most bodies cost no allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SentProperties {
    Few(u64),
    Many(Box<[u64]>),
}

impl SentProperties {
    fn new(n: usize) -> SentProperties {
        match n <= 64 {
            true => SentProperties::Few(0),
            false => SentProperties::Many(vec![0; n.div_ceil(64)].into()),
        }
    }

    fn words(&self) -> &[u64] {
        match self {
            SentProperties::Few(bits) => std::slice::from_ref(bits),
            SentProperties::Many(words) => words,
        }
    }

    fn mark(&mut self, i: usize) {
        let word = match self {
            SentProperties::Few(bits) => bits,
            SentProperties::Many(words) => &mut words[i / 64],
        };
        *word |= 1 << (i % 64);
    }

    fn has(&self, i: usize) -> bool {
        self.words()
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// The indices sent, ascending.
    pub fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        (self.words().iter().enumerate()).flat_map(|(w, &bits)| {
            (0..64)
                .filter(move |b| bits & (1 << b) != 0)
                .map(move |b| w * 64 + b)
        })
    }
}

/// The body's findings into `out`; which declared properties it sent, where the audit read
/// them against the operation's own top-level properties (not a `oneOf` branch's).
pub(super) fn check(
    op: &Operation,
    request: &RequestView,
    out: &mut Findings,
) -> Option<SentProperties> {
    let declared = op.body.as_ref()?;
    let raw = request.body.unwrap_or_default();
    if raw.is_empty() {
        if declared.required {
            out.push(
                Finding::new(Kind::MissingRequiredParam, Location::Body, "")
                    .expected("request body")
                    .observed("absent")
                    .message(format!(
                        "{} {} ({}) requires a request body",
                        op.method, op.template, op.id
                    )),
            );
        }
        return None;
    }
    if declared.media.is_empty() {
        return None; // `content: {}` declares a body of no particular type.
    }
    let content_type = request.content_type();
    let Some(media) = content_type.and_then(|ct| match_media(&declared.media, ct)) else {
        out.push(unsupported(
            op,
            &declared.media,
            content_type.unwrap_or("none"),
        ));
        return None;
    };
    if !media.json {
        out.push(
            Finding::new(Kind::Unaudited, Location::Body, "")
                .observed(media.media_type.clone())
                .message(format!(
                    "`{}` bodies are forwarded but not audited",
                    media.media_type
                )),
        );
        return None;
    }
    let raw = match decoded(request, raw) {
        Ok(raw) => raw,
        Err(observed) => {
            out.push(undecoded(observed));
            return None;
        }
    };
    let doc = match crate::json::parse(&raw) {
        Ok(doc) => doc,
        Err(e) => {
            out.push(unparsed(&e));
            return None;
        }
    };
    check_value(op, media, doc.root(), out)
}

/// `unsupported_media_type` for a body `sent` as a type the operation does not accept.
fn unsupported(op: &Operation, accepted: &[MediaBody], sent: &str) -> Finding {
    let accepted: Vec<&str> = accepted.iter().map(|m| m.media_type.as_str()).collect();
    Finding::new(Kind::UnsupportedMediaType, Location::Header, "content-type")
        .expected(accepted.join(", "))
        .observed(sent)
        .message(format!(
            "{} {} does not accept a `{sent}` body; send one of {}",
            op.method,
            op.template,
            accepted.join(", ")
        ))
}

/// `unaudited` for a body that could not be decoded for reading (`observed` says why).
fn undecoded(observed: String) -> Finding {
    Finding::new(Kind::Unaudited, Location::Body, "")
        .message(format!(
            "the body is forwarded as sent but not audited: {observed}"
        ))
        .observed(observed)
}

/// The body as the audit reads it: decoded from its `Content-Encoding`, within
/// `DECODED_MAX`; else why not (`undecodable gzip body`).
fn decoded<'a>(request: &RequestView, raw: &'a [u8]) -> Result<Cow<'a, [u8]>, String> {
    let coding = match request.headers.get("content-encoding") {
        None => return Ok(Cow::Borrowed(raw)),
        Some(coding) if coding.trim().eq_ignore_ascii_case("identity") => {
            return Ok(Cow::Borrowed(raw));
        }
        Some(coding) => coding,
    };
    crate::encoding::decode(Some(coding), raw.to_vec(), DECODED_MAX)
        .map(Cow::Owned)
        .map_err(|why| {
            let coding = coding.trim().to_ascii_lowercase();
            match why {
                crate::encoding::Undecoded::Undecodable => format!("undecodable {coding} body"),
                crate::encoding::Undecoded::TooLarge => {
                    format!("{coding} body over 16 MiB decoded")
                }
            }
        })
}

/// The finding for a body serde_json could not parse: `unaudited` where the limit is the
/// parser's (valid JSON it cannot hold), else `invalid_json_body`.
fn unparsed(e: &serde_json::Error) -> Finding {
    if let Some(why) = beyond_the_parser(e) {
        return Finding::new(Kind::Unaudited, Location::Body, "")
            .observed(why)
            .message(format!(
                "the body is valid JSON the audit cannot hold ({why} at line {}, column {}): forwarded, not audited",
                e.line(),
                e.column()
            ));
    }
    Finding::new(Kind::InvalidJsonBody, Location::Body, "")
        .expected("JSON")
        .observed(not_json_at(e))
        .message(format!(
            "the body is not valid JSON ({:?} error at line {}, column {})",
            e.classify(),
            e.line(),
            e.column()
        ))
}

/// Where a body stopped being JSON, as a finding's `observed` says it, request or response.
pub(super) fn not_json_at(e: &serde_json::Error) -> String {
    format!("invalid JSON at line {}, column {}", e.line(), e.column())
}

/// Bytes a compressed request body may decode to for the audit.
const DECODED_MAX: usize = 16 << 20;

/// A parse error that is a limit of the parser, not of the JSON (RFC 8259 sets no bound on
/// numbers or nesting): a number past `f64`, or nesting past serde_json's 128 levels.
fn beyond_the_parser(e: &serde_json::Error) -> Option<&'static str> {
    let text = e.to_string();
    if text.starts_with("number out of range") {
        Some("number out of range")
    } else if text.starts_with("recursion limit exceeded") {
        Some("nesting deeper than 128")
    } else {
        None
    }
}

/// Audit a parsed JSON body against one declared media type; which of the operation's
/// top-level properties it sent (see [`SentProperties`]).
fn check_value(
    op: &Operation,
    media: &MediaBody,
    value: Node,
    out: &mut Findings,
) -> Option<SentProperties> {
    let shape = super::branches::chosen_shape(&media.shape, value);
    schema_errors(op, media, value, shape, out);
    let (
        Some(BodyShape::Object {
            properties,
            additional,
            ..
        }),
        Some(sent),
    ) = (shape, value.as_object())
    else {
        return None;
    };
    // One pass over the keys sent: each is declared (and marked sent) or not, and the
    // writable ones are counted, so that a body that omits nothing is not looked up property
    // by property.
    let mut seen = SentProperties::new(properties.len());
    let mut declared = super::members::Cursor::new(properties);
    let mut writable_sent = 0;
    for (key, _) in sent.members() {
        match declared.position(key) {
            Some(at) => {
                writable_sent += usize::from(!properties[at].read_only);
                seen.mark(at);
            }
            None if *additional != Additional::Allowed
                && !out.full()
                && !super::branches::declared_in_any(&media.shape, key, value) =>
            {
                let absent = |name: &str| !sent.members().any(|(k, _)| k == name);
                out.push(undeclared(op, key, properties, *additional, absent));
            }
            None => {}
        }
    }
    let writable = properties.iter().filter(|p| !p.read_only).count();
    if op.write == WriteSemantics::Replace && writable_sent < writable {
        out.reserve(writable - writable_sent);
        omitted_fields(op, properties, &seen, out);
    }
    let own = !properties.is_empty() && std::ptr::eq(properties.as_slice(), op.body_properties());
    own.then_some(seen)
}

/// What the body's schema refuses, each error as its finding. A merge write (PATCH) sends only
/// what changes: `required` in a schema it shares with the full model does not apply to it.
fn schema_errors(
    op: &Operation,
    media: &MediaBody,
    value: Node,
    shape: Option<&BodyShape>,
    out: &mut Findings,
) {
    let top_level = match shape {
        Some(BodyShape::Object { properties, .. }) => properties.as_slice(),
        _ => &[],
    };
    let partial = op.write == WriteSemantics::Merge;
    // `is_valid` first: it stops at the first error and builds none; most bodies are valid.
    let Some(validator) = media.validator.get().filter(|v| !v.is_valid(value)) else {
        return;
    };
    for error in validator.iter_errors(value) {
        if partial && matches!(error.kind(), ValidationErrorKind::Required { .. }) {
            continue;
        }
        let Some(finding) = schema_finding(&error, value, top_level, shape.is_some()) else {
            continue;
        };
        // Only an error that would be listed says that more were left out.
        if out.full() {
            break;
        }
        out.push(finding);
    }
}

/// `omitted_on_replace` for each writable property a replace write's body leaves out, unless
/// the API computes it. Which were sent, `check_value`'s one pass over the members marked (a
/// lookup of each declared property scanned the body's members: 5 % of `check`'s time).
fn omitted_fields(
    op: &Operation,
    properties: &[Property],
    sent: &SentProperties,
    out: &mut Findings,
) {
    let omitted_at = |(i, p): &(usize, &Property)| {
        !p.read_only && !sent.has(*i) && !op.computed.contains(&p.name)
    };
    for (_, p) in properties.iter().enumerate().filter(omitted_at) {
        out.push(omitted(op, p));
    }
}

/// Pick the declared media type for a `Content-Type`: exact match first, then ranges
/// (`application/*+json`, `application/*`, `*/*`).
pub(super) fn match_media<'m, M: Named>(media: &'m [M], content_type: &str) -> Option<&'m M> {
    // Compared without regard to ASCII case (media types are case-insensitive), with no copy
    // of the header made per request.
    let essence = content_type.split(';').next().unwrap_or("").trim();
    // Declared types are compared by their essence too: `application/json; charset=utf-8`
    // in the spec accepts `application/json;charset=UTF-8` on the wire (and a declared type
    // without a slash, `applicationjson`, accepts itself).
    let declared = |m: &'m M| m.name().split(';').next().unwrap_or("").trim();
    if let Some(exact) = media
        .iter()
        .find(|m| declared(m).eq_ignore_ascii_case(essence))
    {
        return Some(exact);
    }
    let (kind, sub) = essence.split_once('/')?;
    media.iter().find(|m| {
        let Some((mk, ms)) = declared(m).split_once('/') else {
            return false;
        };
        (mk == "*" || mk.eq_ignore_ascii_case(kind))
            && (ms == "*"
                || ms.eq_ignore_ascii_case(sub)
                || (ms.starts_with("*+") && ends_with_ignoring_case(sub, &ms[1..])))
    })
}

fn ends_with_ignoring_case(text: &str, suffix: &str) -> bool {
    let (text, suffix) = (text.as_bytes(), suffix.as_bytes());
    text.len() >= suffix.len() && text[text.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

/// A declared media type, request or response side.
pub(super) trait Named {
    fn name(&self) -> &str;
}

impl Named for MediaBody {
    fn name(&self) -> &str {
        &self.media_type
    }
}

impl Named for crate::contract::ResponseMedia {
    fn name(&self) -> &str {
        &self.media_type
    }
}

/// A finding for one JSON Schema error, or `None` where another check reports it better:
/// top-level undeclared fields (with a did-you-mean) and readOnly properties a request need
/// not carry even when the schema lists them as required.
fn schema_finding(
    error: &ValidationError,
    body: Node,
    top_level: &[Property],
    shape_known: bool,
) -> Option<Finding> {
    let path = error.instance_path().as_str();
    match error.kind() {
        // The regex engine gave up (its backtracking bound): nothing was learnt of the value.
        ValidationErrorKind::BacktrackLimitExceeded { .. }
        | ValidationErrorKind::RegexEngineFailure { .. } => Some(
            Finding::new(Kind::Unaudited, Location::Body, path)
                .observed("regex engine limit")
                .message(format!(
                    "the pattern at {} could not be evaluated within the regex engine's bounds: not checked",
                    place(path)
                )),
        ),
        ValidationErrorKind::AdditionalProperties { .. }
        | ValidationErrorKind::UnevaluatedProperties { .. }
            if path.is_empty() && shape_known =>
        {
            None
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            Some(forbidden_fields(path, unexpected))
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            // A property the API computes is never the client's to send.
            let computed = path.is_empty() && top_level.iter().any(|p| p.name == name && p.read_only);
            (!computed).then(|| required_missing(path, name))
        }
        ValidationErrorKind::Type { kind } => {
            let expected = type_names(kind);
            let observed = type_at(body, path);
            Some(
                Finding::new(Kind::BodyTypeMismatch, Location::Body, path)
                    .expected(expected.clone())
                    .observed(observed)
                    .message(format!(
                        "{} is {observed}, the spec says {expected}",
                        field("body", path)
                    )),
            )
        }
        kind @ (ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::OneOfNotValid { .. }) => {
            Some(no_branch(kind, error, body))
        }
        _ => Some(
            Finding::new(Kind::BodySchemaViolation, Location::Body, path)
                .expected(error.kind().keyword())
                .message(format!("{}: {}", field("body", path), masked(error))),
        ),
    }
}

/// Fields sent where the schema forbids any it does not declare.
fn forbidden_fields(path: &str, unexpected: &[String]) -> Finding {
    let names = unexpected.join("`, `");
    let first = unexpected.first().map_or("", |s| s);
    Finding::new(
        Kind::UndeclaredBodyField,
        Location::Body,
        format!("{path}/{first}"),
    )
    .severity(Severity::Error)
    .observed("present")
    .message(format!(
        "body field(s) `{names}` at {} are not declared and the schema forbids others",
        place(path)
    ))
}

/// A required body field the body lacks.
fn required_missing(path: &str, name: &str) -> Finding {
    Finding::new(
        Kind::BodySchemaViolation,
        Location::Body,
        compact_str::format_compact!("{path}/{name}"),
    )
    .expected("required")
    .observed("absent")
    .message(format!("required body field `{path}/{name}` is missing"))
}

/// A value no branch of an `anyOf`/`oneOf` accepts: the finding names the fields the closest
/// branch rejects, and what each rejects (each said as its own finding would say it).
fn no_branch(kind: &ValidationErrorKind, error: &ValidationError, body: Node) -> Finding {
    let path = error.instance_path().as_str();
    let keyword = error.kind().keyword();
    let generic = Finding::new(Kind::BodySchemaViolation, Location::Body, path)
        .expected(keyword)
        .message(format!("{}: {}", field("body", path), masked(error)));
    let Some((branch, errors)) = super::branches::closest(kind) else {
        return generic;
    };
    let said: Vec<Finding> = errors
        .iter()
        .filter_map(|e| schema_finding(e, body, &[], false))
        .collect();
    let Some(first) = said.first() else {
        return generic;
    };
    let each: Vec<&str> = said.iter().map(|f| f.message.as_str()).take(5).collect();
    let more = match said.len().saturating_sub(each.len()) {
        0 => String::new(),
        n => format!("; and {n} more"),
    };
    Finding::new(
        Kind::BodySchemaViolation,
        Location::Body,
        first.field.clone(),
    )
    .expected(format!("{keyword} branch {branch}"))
    .observed(first.observed.clone().unwrap_or_default())
    .message(format!(
        "{} fits no branch of its `{keyword}`; the closest (branch {branch}) rejects: {}{more}",
        field("body", path),
        each.join("; ")
    ))
}

/// The type of the value at `pointer` in `body`, read from the document: an error's own
/// instance is built by parsing the body again.
pub(super) fn type_at(body: Node, pointer: &str) -> &'static str {
    body.pointer(pointer).map_or("unknown", Node::type_name)
}

/// How a message names the field at `path` of a body (`"body"`) or a response
/// (`"response"`): the body's root is "the body" or "the response", not "field ``".
pub(super) fn field(whose: &str, path: &str) -> String {
    match path {
        "" => format!("the {whose}"),
        _ => format!("{whose} field `{path}`"),
    }
}

/// Where in a body a message points: `` `/a/0` ``, or the body's root.
fn place(path: &str) -> String {
    match path {
        "" => "the body's root".to_string(),
        _ => format!("`{path}`"),
    }
}

/// An error's message with values masked, without its instance (`additionalItems` is the one
/// message that reads it, to count the items: parsing the body again per error).
pub(super) fn masked(error: &ValidationError) -> String {
    match error.kind() {
        ValidationErrorKind::AdditionalItems { .. } => "additional items are not allowed".into(),
        _ => error.masked().to_string(),
    }
}

/// `integer`, or `null|string` for a type list, as a finding's `expected`.
pub(super) fn type_names(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(t) => t.to_string(),
        TypeKind::Multiple(set) => set
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join("|"),
    }
}

/// An undeclared body field: an error where the schema forbids others, or where it is a
/// renamed field (its suggestion is a writable property the body lacks: `autoInit` for
/// `auto_init`, which the API then never sees, unless the spec's own example sends it), else a
/// warning.
fn undeclared(
    op: &Operation,
    key: &str,
    properties: &[Property],
    additional: Additional,
    absent: impl Fn(&str) -> bool,
) -> Finding {
    let suggestion = did_you_mean(key, properties.iter().map(|p| p.name.as_str()));
    // The spec's own example sends the name: it names the field both ways, not a rename.
    let exemplified = op
        .body
        .as_ref()
        .is_some_and(|b| b.example_keys.iter().any(|k| k == key));
    let renamed = !exemplified
        && suggestion.as_deref().is_some_and(|s| {
            super::suggest::is_rename(key, s)
                && absent(s)
                && properties.iter().any(|p| p.name == s && !p.read_only)
        });
    let hint = match (&suggestion, renamed) {
        (Some(s), true) => format!(
            "; did you mean `{s}`? The body lacks `{s}`: the API ignores `{key}`, so `{s}` is \
             not set"
        ),
        (Some(s), false) => format!("; did you mean `{s}`?"),
        (None, _) => String::new(),
    };
    let severity = if additional == Additional::Forbidden || renamed {
        Severity::Error
    } else {
        Severity::Warning
    };
    Finding::new(Kind::UndeclaredBodyField, Location::Body, format!("/{key}"))
        .severity(severity)
        .observed("present")
        .suggestion(suggestion)
        .message(format!(
            "body field `{key}` is not declared by {} {} ({}){hint}",
            op.method, op.template, op.id
        ))
}

fn omitted(op: &Operation, p: &Property) -> Finding {
    let note = match (p.required, p.summary.nullable) {
        (true, true) => {
            "required and nullable: send null to clear it, the current value to keep it"
        }
        (true, false) => "required",
        (false, true) => "optional, nullable",
        (false, false) => "optional",
    };
    // Pieces pushed, not `format!`: a replace write that omits twenty fields makes twenty of
    // these, and `check` makes millions.
    let mut field = compact_str::CompactString::with_capacity(p.name.len() + 1);
    field.push('/');
    field.push_str(&p.name);
    let parts = [
        op.method.as_str(),
        " ",
        &op.template,
        " (",
        &op.id,
        ") replaces the whole resource and the body omits `",
        &p.name,
        "` (",
        note,
        "); the API will clear it",
    ];
    let mut message =
        compact_str::CompactString::with_capacity(parts.iter().map(|s| s.len()).sum());
    parts.iter().for_each(|s| message.push_str(s));
    Finding::new(Kind::OmittedOnReplace, Location::Body, field)
        .expected(p.summary.to_compact_string())
        .observed("absent")
        .message(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Declared(&'static str);

    impl Named for Declared {
        fn name(&self) -> &str {
            self.0
        }
    }

    #[test]
    fn sent_properties_past_64_are_kept_in_words_of_their_own() {
        for n in [1, 64, 65, 200] {
            let mut sent = SentProperties::new(n);
            let marked: Vec<usize> = [0, 63, 64, 130, n - 1]
                .into_iter()
                .filter(|&i| i < n)
                .collect();
            for &i in &marked {
                sent.mark(i);
            }
            let mut want = marked.clone();
            want.dedup();
            assert_eq!(sent.indices().collect::<Vec<_>>(), want, "{n}");
            assert!((0..n).all(|i| sent.has(i) == want.contains(&i)), "{n}");
            assert_eq!(matches!(sent, SentProperties::Few(_)), n <= 64, "{n}");
        }
    }

    #[test]
    fn a_content_type_matches_its_declared_type_in_any_ascii_case_and_by_range() {
        // As the contract holds them: lowercased at compile.
        let media = [
            Declared("application/json; charset=utf-8"),
            Declared("application/*+json"),
            Declared("text/*"),
        ];
        let matched = |content_type| match_media(&media, content_type).map(|m| m.0);
        assert_eq!(
            matched("Application/JSON;charset=UTF-8"),
            Some("application/json; charset=utf-8")
        );
        assert_eq!(
            matched("application/Merge-Patch+JSON"),
            Some("application/*+json")
        );
        assert_eq!(matched("TEXT/plain"), Some("text/*"));
        assert_eq!(matched("application/xml"), None);
        assert_eq!(matched("image/png"), None);
        assert_eq!(matched("json"), None);
    }
}
