//! The one JSON parse of every body the audit reads (a request's, a response's, the one the
//! silent-clear memory remembers), into a [`Doc`]: every node of the body in one vector, in
//! document order, strings borrowed from the body's text. serde_json reads the text, so the
//! grammar, the numbers and every error are serde_json's own; only what it builds differs.
//! A `serde_json::Value` made one allocation per string, array and object and hashed every
//! key into its map: that was four fifths of a request audit (`perf` on the sidecar, issue 15),
//! where the checks themselves read each member once, in order. The compiled schemas read the
//! same document through jsonschema's custom-representation traits (`json/schema.rs`).
//!
//! An object whose member names repeat keeps the last value under each name, as serde_json
//! does; it stays at its own place, where serde_json moved it to the first's.
//!
//! Nothing a body holds costs more than a sort of its names. A lookup by name scans a short
//! object's members; a wide one (a hostile body can hold a hundred thousand members, and a
//! validator may look each of its properties up) is searched in an index of the names of every
//! wide object, sorted by hash, built on the first lookup. Repeated names are looked for only
//! where a Bloom filter of the names says one may repeat, by a sort. (A first version compared
//! names pairwise: 20 bodies of 100,000 members took 66.8 s in `check`, 0.27 s now.)

mod schema;

use std::fmt;
use std::sync::OnceLock;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

pub use schema::Tape;

/// A parsed JSON body: its nodes in document order, its strings borrowed from `text` (or kept in
/// `unescaped` where the text wrote escapes).
#[derive(Default)]
pub struct Doc<'t> {
    text: &'t str,
    entries: Vec<Entry>,
    unescaped: String,
    wide: OnceLock<WideIndex>,
}

/// Objects of more members, and arrays of more elements, than this are looked up through the
/// [`WideIndex`].
const SCANNED: u32 = 32;

/// For each object of more than [`SCANNED`] members, its member names' hashes and positions,
/// sorted by hash and then name: `objects` holds (object's position, where its names start in
/// `names`), in document order. For each array of more than [`SCANNED`] elements, the
/// position of each: `arrays` holds (array's position, where its elements start in `items`).
#[derive(Default)]
struct WideIndex {
    objects: Vec<(u32, u32)>,
    names: Vec<(u64, u32)>,
    arrays: Vec<(u32, u32)>,
    items: Vec<u32>,
}

impl WideIndex {
    fn of(doc: &Doc) -> WideIndex {
        let mut index = WideIndex::default();
        for (at, entry) in doc.entries.iter().enumerate() {
            let at = len32(at);
            match *entry {
                Entry::Array { len, .. } if len > SCANNED => {
                    index.arrays.push((at, len32(index.items.len())));
                    let node = Node { doc, at };
                    index.items.extend(
                        node.as_array()
                            .into_iter()
                            .flat_map(|a| a.items())
                            .map(|n| n.at),
                    );
                    continue;
                }
                Entry::Object { len, .. } if len > SCANNED => {}
                _ => continue,
            }
            let start = index.names.len();
            index.objects.push((at, len32(start)));
            index.names.extend(
                Members::of(Node { doc, at })
                    .with_positions()
                    .map(|(position, name)| (name_hash(name.as_bytes()), position)),
            );
            index.names[start..]
                .sort_unstable_by(|a, b| (a.0, doc.name(a.1)).cmp(&(b.0, doc.name(b.1))));
        }
        index
    }

    /// The position of element `i` of the wide array at `at`.
    fn item(&self, at: u32, i: usize) -> Option<u32> {
        let a = self.arrays.binary_search_by_key(&at, |(o, _)| *o).ok()?;
        self.items.get(self.arrays[a].1 as usize + i).copied()
    }

    /// The position of the value named `name` in the wide object at `at`.
    fn find(&self, doc: &Doc, at: u32, len: u32, name: &str) -> Option<u32> {
        let i = self.objects.binary_search_by_key(&at, |(o, _)| *o).ok()?;
        let start = self.objects[i].1 as usize;
        let names = &self.names[start..start + len as usize];
        let sought = (name_hash(name.as_bytes()), name);
        let found = names
            .binary_search_by(|&(hash, position)| (hash, doc.name(position)).cmp(&sought))
            .ok()?;
        Some(names[found].1 + 1)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Entry {
    Null,
    Bool(bool),
    PosInt(u64),
    NegInt(i64),
    Float(f64),
    /// A string or a member name: bytes `start..end` of the text, or of `unescaped`.
    Str(Span),
    /// A member name a later member of the same object repeats: its member is skipped.
    Shadowed,
    /// `len` elements follow, the last node of the last one just before `end`.
    Array {
        len: u32,
        end: u32,
    },
    /// `len` members follow, each a name then its value, the last node just before `end`.
    Object {
        len: u32,
        end: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Span {
    start: u32,
    end: u32,
    unescaped: bool,
}

/// `body` parsed as `serde_json::from_slice` would parse it: the same values, the same errors.
pub fn parse(body: &[u8]) -> Result<Doc<'_>, serde_json::Error> {
    let Ok(text) = std::str::from_utf8(body) else {
        // serde_json says where the text stops being UTF-8 (cold: such a body is refused).
        return Err(serde_json::from_slice::<Value>(body)
            .err()
            .unwrap_or_else(|| serde_json::Error::custom("the body is not UTF-8")));
    };
    if u32::try_from(text.len()).is_err() {
        return Err(serde_json::Error::custom("a body over 4 GiB"));
    }
    let mut doc = Doc {
        text,
        entries: Vec::with_capacity(text.len() / 16 + 4),
        ..Doc::default()
    };
    let mut de = serde_json::Deserializer::from_str(text);
    Build { doc: &mut doc }.deserialize(&mut de)?;
    de.end()?;
    Ok(doc)
}

impl<'t> Doc<'t> {
    /// The document's top-level value.
    pub fn root(&self) -> Node<'_> {
        Node { doc: self, at: 0 }
    }

    /// A document of one string, for jsonschema's member-name nodes.
    fn string(&mut self, text: &str) {
        self.entries.clear();
        self.wide = OnceLock::new();
        self.unescaped.clear();
        self.unescaped.push_str(text);
        self.entries.push(Entry::Str(Span {
            start: 0,
            end: len32(text.len()),
            unescaped: true,
        }));
    }

    /// The member name at `position` ("" for a shadowed one, which no index holds).
    fn name(&self, position: u32) -> &str {
        match self.entries[position as usize] {
            Entry::Str(span) => self.str(span),
            _ => "",
        }
    }

    fn str(&self, span: Span) -> &str {
        let from = if span.unescaped {
            &self.unescaped
        } else {
            self.text
        };
        &from[span.start as usize..span.end as usize]
    }
}

/// One value of a [`Doc`]: a cheap copy, as a `&Value` is.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    doc: &'a Doc<'a>,
    at: u32,
}

impl<'a> Node<'a> {
    fn entry(self) -> Entry {
        self.doc.entries[self.at as usize]
    }

    /// Where the node after this one (and all it holds) starts.
    fn end(self) -> u32 {
        match self.entry() {
            Entry::Array { end, .. } | Entry::Object { end, .. } => end,
            _ => self.at + 1,
        }
    }

    pub fn as_object(self) -> Option<Object<'a>> {
        match self.entry() {
            Entry::Object { len, .. } => Some(Object { node: self, len }),
            _ => None,
        }
    }

    pub fn as_array(self) -> Option<Array<'a>> {
        match self.entry() {
            Entry::Array { len, .. } => Some(Array { node: self, len }),
            _ => None,
        }
    }

    pub fn as_str(self) -> Option<&'a str> {
        match self.entry() {
            Entry::Str(span) => Some(self.doc.str(span)),
            _ => None,
        }
    }

    pub fn as_bool(self) -> Option<bool> {
        match self.entry() {
            Entry::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The number as serde_json holds it (no allocation).
    pub fn as_number(self) -> Option<Number> {
        match self.entry() {
            Entry::PosInt(u) => Some(u.into()),
            Entry::NegInt(i) => Some(i.into()),
            Entry::Float(f) => Number::from_f64(f),
            _ => None,
        }
    }

    pub fn is_null(self) -> bool {
        self.entry() == Entry::Null
    }

    /// Null, or an empty string, array or object: what a clear leaves behind.
    pub fn is_empty(self) -> bool {
        match self.entry() {
            Entry::Null => true,
            Entry::Str(span) => span.start == span.end,
            Entry::Array { len, .. } | Entry::Object { len, .. } => len == 0,
            _ => false,
        }
    }

    /// `integer`, `string`, ... as a finding's `observed` names the type of a value.
    pub fn type_name(self) -> &'static str {
        match self.entry() {
            Entry::Null => "null",
            Entry::Bool(_) => "boolean",
            Entry::PosInt(_) | Entry::NegInt(_) => "integer",
            Entry::Float(_) => "number",
            Entry::Str(_) | Entry::Shadowed => "string",
            Entry::Array { .. } => "array",
            Entry::Object { .. } => "object",
        }
    }

    /// The node as a `serde_json::Value`, for the cold paths (a finding's evidence, an error).
    pub fn to_value(self) -> Value {
        match self.entry() {
            Entry::Null | Entry::Shadowed => Value::Null,
            Entry::Bool(b) => Value::Bool(b),
            Entry::PosInt(_) | Entry::NegInt(_) | Entry::Float(_) => {
                self.as_number().map_or(Value::Null, Value::Number)
            }
            Entry::Str(span) => Value::String(self.doc.str(span).to_owned()),
            Entry::Array { .. } => Value::Array(
                self.as_array()
                    .map_or_else(Vec::new, |a| a.items().map(Node::to_value).collect()),
            ),
            Entry::Object { len, .. } => {
                let mut map = Map::with_capacity(len as usize);
                if let Some(object) = self.as_object() {
                    map.extend(object.members().map(|(k, v)| (k.to_owned(), v.to_value())));
                }
                Value::Object(map)
            }
        }
    }

    /// The node at a JSON pointer (RFC 6901), as `Value::pointer` finds it.
    pub fn pointer(self, pointer: &str) -> Option<Node<'a>> {
        if pointer.is_empty() {
            return Some(self);
        }
        let mut node = self;
        for token in pointer.strip_prefix('/')?.split('/') {
            let token = token.replace("~1", "/").replace("~0", "~");
            node = match node.entry() {
                Entry::Object { .. } => node.as_object()?.get(&token)?,
                Entry::Array { .. } => node.as_array()?.get(token.parse().ok()?)?,
                _ => return None,
            };
        }
        Some(node)
    }
}

impl fmt::Debug for Node<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        fmt::Debug::fmt(&self.to_value(), f)
    }
}

/// An object node: its members in the order the body wrote them.
#[derive(Clone, Copy)]
pub struct Object<'a> {
    node: Node<'a>,
    len: u32,
}

impl<'a> Object<'a> {
    pub fn len(self) -> usize {
        self.len as usize
    }

    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    pub fn members(self) -> Members<'a> {
        Members::of(self.node)
    }

    /// The value of the member named `name`: a scan of a short object, a search of a wide one.
    pub fn get(self, name: &str) -> Option<Node<'a>> {
        if self.len <= SCANNED {
            return self.members().find(|(k, _)| *k == name).map(|(_, v)| v);
        }
        let doc = self.node.doc;
        let index = doc.wide.get_or_init(|| WideIndex::of(doc));
        let at = index.find(doc, self.node.at, self.len, name)?;
        Some(Node { doc, at })
    }

    pub fn contains_key(self, name: &str) -> bool {
        self.get(name).is_some()
    }
}

/// The members of an [`Object`], name and value.
#[derive(Clone)]
pub struct Members<'a> {
    doc: &'a Doc<'a>,
    at: u32,
    end: u32,
}

impl<'a> Members<'a> {
    /// The members of the object `node` (its entry's members, whatever its `len` says).
    fn of(node: Node<'a>) -> Members<'a> {
        Members {
            doc: node.doc,
            at: node.at + 1,
            end: node.end(),
        }
    }

    /// The next member not shadowed: its name's position, its name, its value.
    fn next_at(&mut self) -> Option<(u32, &'a str, Node<'a>)> {
        while self.at < self.end {
            let position = self.at;
            let value = Node {
                doc: self.doc,
                at: position + 1,
            };
            self.at = value.end();
            if let Entry::Str(span) = self.doc.entries[position as usize] {
                return Some((position, self.doc.str(span), value));
            }
        }
        None
    }

    /// Each member's name with the position of its entry.
    fn with_positions(mut self) -> impl Iterator<Item = (u32, &'a str)> {
        std::iter::from_fn(move || self.next_at().map(|(position, name, _)| (position, name)))
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, Node<'a>);

    fn next(&mut self) -> Option<(&'a str, Node<'a>)> {
        self.next_at().map(|(_, name, value)| (name, value))
    }
}

/// An array node.
#[derive(Clone, Copy)]
pub struct Array<'a> {
    node: Node<'a>,
    len: u32,
}

impl<'a> Array<'a> {
    pub fn len(self) -> usize {
        self.len as usize
    }

    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    pub fn items(self) -> Items<'a> {
        Items {
            doc: self.node.doc,
            at: self.node.at + 1,
            end: self.node.end(),
        }
    }

    /// Element `i`: a walk along a short array, a look-up in a wide one (an error in each of a
    /// list's many items is located by its index).
    pub fn get(self, i: usize) -> Option<Node<'a>> {
        if i >= self.len() {
            return None;
        }
        if self.len <= SCANNED {
            return self.items().nth(i);
        }
        let doc = self.node.doc;
        let index = doc.wide.get_or_init(|| WideIndex::of(doc));
        let at = index.item(self.node.at, i)?;
        Some(Node { doc, at })
    }
}

/// The elements of an [`Array`].
#[derive(Clone)]
pub struct Items<'a> {
    doc: &'a Doc<'a>,
    at: u32,
    end: u32,
}

impl<'a> Iterator for Items<'a> {
    type Item = Node<'a>;

    fn next(&mut self) -> Option<Node<'a>> {
        (self.at < self.end).then(|| {
            let node = Node {
                doc: self.doc,
                at: self.at,
            };
            self.at = node.end();
            node
        })
    }
}

fn len32(n: usize) -> u32 {
    // The text is at most `u32::MAX` bytes (checked in `parse`), and so is everything in it.
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Appends the nodes serde_json reads to the document, as it reads them.
struct Build<'b, 't> {
    doc: &'b mut Doc<'t>,
}

impl Build<'_, '_> {
    fn string(&mut self, s: &str, borrowed: bool) {
        let base = self.doc.text.as_ptr() as usize;
        let at = (s.as_ptr() as usize).wrapping_sub(base);
        let within = at
            .checked_add(s.len())
            .is_some_and(|e| e <= self.doc.text.len());
        let span = if borrowed && within {
            Span {
                start: len32(at),
                end: len32(at + s.len()),
                unescaped: false,
            }
        } else {
            let start = len32(self.doc.unescaped.len());
            self.doc.unescaped.push_str(s);
            Span {
                start,
                end: len32(self.doc.unescaped.len()),
                unescaped: true,
            }
        };
        self.doc.entries.push(Entry::Str(span));
    }

    fn next(&self) -> u32 {
        len32(self.doc.entries.len())
    }

    /// Shadow every member whose name a later member of the object at `at` repeats: the
    /// names sorted (by hash, name, then place), so that a wide object costs `n log n`.
    fn shadow_repeated_names(&mut self, at: u32) -> u32 {
        let doc: &Doc = self.doc;
        let mut names: Vec<(u64, &str, u32)> = Members::of(Node { doc, at })
            .with_positions()
            .map(|(position, name)| (name_hash(name.as_bytes()), name, position))
            .collect();
        names.sort_unstable();
        // Of a run of one name, each but the last in the object is shadowed.
        let shadowed: Vec<u32> = names
            .windows(2)
            .filter(|pair| pair[0].1 == pair[1].1)
            .map(|pair| pair[0].2)
            .collect();
        for position in &shadowed {
            self.doc.entries[*position as usize] = Entry::Shadowed;
        }
        len32(shadowed.len())
    }
}

impl<'de> DeserializeSeed<'de> for Build<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        self.doc.entries.push(Entry::Bool(b));
        Ok(())
    }

    fn visit_i64<E>(self, i: i64) -> Result<(), E> {
        // serde_json gives negative integers here, as `Number` holds them.
        self.doc.entries.push(match u64::try_from(i) {
            Ok(u) => Entry::PosInt(u),
            Err(_) => Entry::NegInt(i),
        });
        Ok(())
    }

    fn visit_u64<E>(self, u: u64) -> Result<(), E> {
        self.doc.entries.push(Entry::PosInt(u));
        Ok(())
    }

    fn visit_f64<E>(self, f: f64) -> Result<(), E> {
        // serde_json's `Value` turns a non-finite float into null; its parser never makes one.
        self.doc.entries.push(if f.is_finite() {
            Entry::Float(f)
        } else {
            Entry::Null
        });
        Ok(())
    }

    fn visit_borrowed_str<E>(mut self, s: &'de str) -> Result<(), E> {
        self.string(s, true);
        Ok(())
    }

    fn visit_str<E>(mut self, s: &str) -> Result<(), E> {
        self.string(s, false);
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.doc.entries.push(Entry::Null);
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        self.doc.entries.push(Entry::Null);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let at = len32(self.doc.entries.len());
        self.doc.entries.push(Entry::Array { len: 0, end: 0 });
        let mut len = 0u32;
        while seq.next_element_seed(Build { doc: self.doc })?.is_some() {
            len += 1;
        }
        let end = Build { doc: self.doc }.next();
        self.doc.entries[at as usize] = Entry::Array { len, end };
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<(), A::Error> {
        let at = len32(self.doc.entries.len());
        self.doc.entries.push(Entry::Object { len: 0, end: 0 });
        let mut len = 0u32;
        // A Bloom filter of the names seen (1,024 bits, two probes): a repeat is looked for
        // only when a name may have been seen, about one object in thirty at 30 members.
        let mut seen = [0u64; 16];
        let mut maybe_repeated = false;
        while access.next_key_seed(Build { doc: self.doc })?.is_some() {
            if let Some(Entry::Str(span)) = self.doc.entries.last() {
                let hash = name_hash(self.doc.str(*span).as_bytes());
                let mut present = true;
                for bit in [hash >> 54, (hash >> 44) & 1023] {
                    let (word, mask) = ((bit / 64) as usize, 1u64 << (bit % 64));
                    present &= seen[word] & mask != 0;
                    seen[word] |= mask;
                }
                maybe_repeated |= present;
            }
            access.next_value_seed(Build { doc: self.doc })?;
            len += 1;
        }
        let mut build = Build { doc: self.doc };
        let end = build.next();
        build.doc.entries[at as usize] = Entry::Object { len, end };
        if maybe_repeated {
            len -= build.shadow_repeated_names(at);
            build.doc.entries[at as usize] = Entry::Object { len, end };
        }
        Ok(())
    }
}

/// A quick hash of a member name, eight bytes at a time (FxHash's step): for the filter of
/// repeated names, never for anything a peer could profit from colliding.
fn name_hash(name: &[u8]) -> u64 {
    let mut hash = name.len() as u64;
    for chunk in name.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        hash = (hash.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    hash
}

#[cfg(test)]
mod tests;
