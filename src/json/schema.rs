//! The compiled schemas read a [`Doc`] where it lies: jsonschema validates any representation
//! that implements its `json` traits, so a body is never turned into a `serde_json::Value` to
//! be validated. The accessors are the document's own; numbers are serde_json's `Number`,
//! built on the stack, so they compare exactly as they did.

use std::borrow::Cow;
use std::sync::OnceLock;

use jsonschema::JsonType;
use jsonschema::json::{self, Json, NodeIdentity};
use jsonschema_value::LazyInstance;
use serde_json::{Number, Value};

use super::{Array, Doc, Entry, Items, Members, Node, Object};

/// The representation the body and response validators are compiled for
/// (`jsonschema::options_for::<Tape>()`).
pub struct Tape;

impl Json for Tape {
    type Node<'a> = Node<'a>;
    type PreparedKey = Box<str>;
    /// A document of one string, made again for each member name `propertyNames` checks.
    type StringBuffer = Doc<'static>;

    // An object's lookup is a scan of its members, so one pass over them never costs more
    // than the lookups it replaces. (Multiplied by a count of required names, so not `MAX`.)
    const KEYS_PER_LOOKUP: usize = 1 << 16;
    const ACYCLIC: bool = true;

    fn prepare_key(key: &str) -> Box<str> {
        key.into()
    }

    fn with_string_node<T>(
        buffer: &mut Doc<'static>,
        string: &str,
        f: impl FnOnce(Node<'_>) -> T,
    ) -> T {
        buffer.string(string);
        f(buffer.root())
    }
}

impl<'a> json::Node<'a, Tape> for Node<'a> {
    type Object = Object<'a>;
    type Array = Array<'a>;
    type Number = Number;

    fn as_object(&self) -> Option<Object<'a>> {
        Node::as_object(*self)
    }

    fn as_array(&self) -> Option<Array<'a>> {
        Node::as_array(*self)
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        self.as_str().map(Cow::Borrowed)
    }

    fn as_number(&self) -> Option<Number> {
        Node::as_number(*self)
    }

    fn as_boolean(&self) -> Option<bool> {
        self.as_bool()
    }

    fn is_null(&self) -> bool {
        Node::is_null(*self)
    }

    fn json_type(&self) -> JsonType {
        match self.entry() {
            Entry::Null | Entry::Shadowed => JsonType::Null,
            Entry::Bool(_) => JsonType::Boolean,
            Entry::PosInt(_) | Entry::NegInt(_) | Entry::Float(_) => JsonType::Number,
            Entry::Str(_) => JsonType::String,
            Entry::Array { .. } => JsonType::Array,
            Entry::Object { .. } => JsonType::Object,
        }
    }

    /// Scalars compare without building a `Value` (an `enum` of strings is checked on every
    /// request); containers through one.
    fn equals_value(&self, expected: &Value) -> bool {
        match (self.entry(), expected) {
            (Entry::Str(_), Value::String(e)) => self.as_str() == Some(e.as_str()),
            (Entry::Str(_), _) => false,
            (Entry::Bool(b), e) => e.as_bool() == Some(b),
            (Entry::Null, e) => e.is_null(),
            (Entry::PosInt(_) | Entry::NegInt(_) | Entry::Float(_), Value::Number(e)) => self
                .as_number()
                .is_some_and(|n| json::cmp::equal_numbers(&n, e)),
            (Entry::PosInt(_) | Entry::NegInt(_) | Entry::Float(_), _) => false,
            _ => json::cmp::equal(&self.to_value(), expected),
        }
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(Node::to_value(*self))
    }

    /// The instance an error carries: a scalar as it is, an object or array built when read
    /// (most never are), by parsing the body's text again. Building each was a copy of the
    /// whole body per error (a body of 100,000 members made every `required` error copy all
    /// of them); the audit reads an error's type from the document itself (`Node::type_name`
    /// at its path), so that a list of many wrong items is not parsed again per item.
    fn lazy_value(&self) -> LazyInstance<'a> {
        match self.entry() {
            Entry::Object { .. } | Entry::Array { .. } if !self.doc.text.is_empty() => {
                LazyInstance::Deferred {
                    bytes: self.doc.text.as_bytes(),
                    tag: self.at,
                    make: value_at,
                    cell: OnceLock::new(),
                }
            }
            _ => LazyInstance::Ready(self.to_value()),
        }
    }

    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::tagged(
            std::ptr::from_ref::<Doc>(self.doc) as usize,
            self.at,
        ))
    }
}

/// The node at position `at` of the document `text` parses to, as a `Value`.
fn value_at(text: &[u8], at: u32) -> Value {
    match super::parse(text) {
        Ok(doc) if (at as usize) < doc.entries.len() => Node { doc: &doc, at }.to_value(),
        _ => Value::Null, // unreachable: the text parsed once, to at least this node
    }
}

impl<'a> json::Object<'a, Tape> for Object<'a> {
    type Node = Node<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        Object::len(*self)
    }

    fn get(&self, key: &Box<str>) -> Option<Node<'a>> {
        Object::get(*self, key)
    }

    fn members(&self) -> Members<'a> {
        Object::members(*self)
    }
}

impl<'a> json::Array<'a, Tape> for Array<'a> {
    type Node = Node<'a>;
    type ElementsIter = Items<'a>;

    fn len(&self) -> usize {
        Array::len(*self)
    }

    fn elements(&self) -> Items<'a> {
        self.items()
    }
}
