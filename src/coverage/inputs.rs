//! Which declared inputs a request sends: its parameters by location, and the top-level
//! properties of its JSON body. Read for coverage only, so cheaply: query keys as
//! `form_urlencoded` gives them (no allocation unless a key is encoded), a body's top-level keys
//! through serde with every value skipped unbuilt, and nothing at all once every input of the
//! operation has been seen.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::Flags;
use crate::contract::{Operation, Param, Style};
use crate::finding::Location;
use crate::request::RequestView;

/// Mark the parameters of `op` that `request` sends: path parameters always (the route matched
/// them), headers and cookies by name, query keys by name, as `name[...]` (deepObject) or as a
/// property of an exploded object parameter.
pub(super) fn mark_params(op: &Operation, request: &RequestView, seen: &Flags) {
    let mut query = false;
    for (i, p) in op.params.iter().enumerate() {
        if seen.is_seen(i) {
            continue;
        }
        let sent = match p.location {
            Location::Path => true,
            Location::Header => request.headers.get(&p.name).is_some(),
            Location::Cookie => has_cookie(request, &p.name),
            Location::Query => {
                query = true;
                false
            }
            Location::Body | Location::Response => false,
        };
        if sent {
            seen.mark(i);
        }
    }
    let Some(q) = request.query.filter(|_| query) else {
        return;
    };
    for (key, _) in form_urlencoded::parse(q.as_bytes()) {
        for (i, p) in op.params.iter().enumerate() {
            if p.location == Location::Query && !seen.is_seen(i) && sends(p, &key) {
                seen.mark(i);
            }
        }
    }
}

/// Whether query key `key` carries parameter `p`.
fn sends(p: &Param, key: &str) -> bool {
    if key == p.name {
        return true;
    }
    match p.style {
        Style::DeepObject => key
            .strip_prefix(p.name.as_str())
            .is_some_and(|rest| rest.starts_with('[')),
        Style::Form if p.explode => p.properties.iter().any(|(name, _)| name == key),
        _ => false,
    }
}

fn has_cookie(request: &RequestView, name: &str) -> bool {
    let Some(cookies) = request.headers.get("cookie") else {
        return false;
    };
    cookies
        .split(';')
        .any(|c| c.split_once('=').map_or(c, |(k, _)| k).trim() == name)
}

/// Mark the top-level properties of `op`'s JSON body that `request`'s body sends. A body sent
/// with a `Content-Encoding` or a media type that is not JSON is not read; neither is one that
/// is not a JSON object. Reading stops once every property has been seen.
pub(super) fn mark_properties(
    op: &Operation,
    request: &RequestView,
    seen: &Flags,
    by_name: &[u32],
) {
    let Some(body) = request.body.filter(|b| !b.is_empty()) else {
        return;
    };
    let json = request.content_type().is_none_or(|ct| ct.contains("json"));
    let encoded = request
        .headers
        .get("content-encoding")
        .is_some_and(|e| !e.trim().eq_ignore_ascii_case("identity"));
    if !json || encoded {
        return;
    }
    let properties = op.body_properties();
    let find = |key: &str| {
        by_name
            .binary_search_by(|i| properties[*i as usize].name.as_str().cmp(key))
            .ok()
            .map(|at| by_name[at] as usize)
    };
    let mark = |key: &str| {
        if let Some(i) = find(key) {
            seen.mark(i);
        }
        !seen.all_seen()
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    // An error (not JSON, not an object, or stopped early) leaves what was marked.
    let _ = de.deserialize_map(TopKeys(mark));
}

/// Visits a JSON object's keys, skipping each value unbuilt; the closure says whether to go on.
struct TopKeys<F>(F);

impl<'de, F: FnMut(&str) -> bool> Visitor<'de> for TopKeys<F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key_seed(Key)? {
            if !(self.0)(&key) {
                return Ok(());
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

/// A key, borrowed from the body unless it holds escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_string()))
    }
}
