//! How deep `$ref`s nest, and where a reference leads deeper than the bound
//! (`spec.max_ref_depth`). jsonschema's compile grows with the square of a chain of references
//! (it copies the set of references in progress at each one: 20,000 nested schemas took 3.6 s to
//! load, 40,000 took 36 s), so a spec of a few megabytes, fetched from a URL, could hold the
//! loader for hours. Real specs nest little: the deepest of the 2,639 APIs.guru documents is
//! Stripe's, 37 references. A reference past the bound is not followed (it checks nothing), and
//! the first one on the way in is said as a warning.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::spec::local_refs;

/// A `$ref` whose target leads deeper than the bound.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct TooDeep {
    /// Pointer of the object that holds the `$ref`.
    pub at: String,
    /// References followed in a row from here, this one included.
    pub depth: usize,
    /// Whether the reference sits outside every target that is itself too deep: the way in,
    /// the one to warn about (the others are cut without a word, so that a chain of 40,000 gives
    /// one warning, not 40,000).
    pub entry: bool,
}

/// Every local `$ref` of `doc` whose target leads more than `max` references deep.
pub(super) fn too_deep(doc: &Value, max: usize) -> Vec<TooDeep> {
    let refs = local_refs(doc);
    let depths = depths(doc, refs.iter().map(|(_, target)| target.as_str()));
    let deep = |target: &str| depths.get(target).is_some_and(|&d| d > max);
    refs.iter()
        .filter(|(_, target)| deep(target))
        .map(|(at, target)| TooDeep {
            at: at.clone(),
            depth: depths[target.as_str()],
            entry: !ancestors(at).any(deep),
        })
        .collect()
}

/// `pointer` and each pointer above it, up to the document's root (`""`).
fn ancestors(pointer: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(pointer);
    std::iter::from_fn(move || {
        let this = next?;
        next = this.rsplit_once('/').map(|(parent, _)| parent);
        Some(this)
    })
}

/// One target on the walk's path: the targets its own subtree refers to, how many of them
/// were taken, and the deepest depth found below it so far.
struct Frame {
    target: String,
    next: Vec<String>,
    taken: usize,
    below: usize,
}

/// The depth of each target reached from `starts`: the references followed in a row from one
/// that names it (1, plus the deepest of the targets its subtree refers to). A reference back
/// to a target on the walk's own path counts nothing: that is a recursive schema, which
/// jsonschema compiles once. Each target is walked once, without recursion (a chain can be
/// longer than any stack).
fn depths<'a>(doc: &Value, starts: impl Iterator<Item = &'a str>) -> HashMap<String, usize> {
    let frame = |target: &str| Frame {
        target: target.to_string(),
        next: doc
            .pointer(target)
            .map(local_refs)
            .map_or_else(Vec::new, |refs| refs.into_iter().map(|(_, t)| t).collect()),
        taken: 0,
        below: 0,
    };
    let mut depth: HashMap<String, usize> = HashMap::new();
    let mut on_path: HashSet<String> = HashSet::new();
    for start in starts {
        if depth.contains_key(start) {
            continue;
        }
        on_path.insert(start.to_string());
        let mut path = vec![frame(start)];
        while let Some(top) = path.last_mut() {
            let Some(next) = top.next.get(top.taken) else {
                let done = path.pop().expect("the path's last frame");
                on_path.remove(&done.target);
                let d = done.below + 1;
                if let Some(parent) = path.last_mut() {
                    parent.below = parent.below.max(d);
                }
                depth.insert(done.target, d);
                continue;
            };
            top.taken += 1;
            if let Some(&d) = depth.get(next) {
                top.below = top.below.max(d);
            } else if on_path.insert(next.clone()) {
                let next = frame(next);
                path.push(next);
            }
        }
    }
    depth
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `n` schemas, each holding a property that refers to the next, the last an object.
    fn chain(n: usize) -> Value {
        let mut schemas = serde_json::Map::new();
        for i in 0..n {
            schemas.insert(
                format!("S{i}"),
                json!({"type": "object", "properties": {"next": {"$ref": format!("#/components/schemas/S{}", i + 1)}}}),
            );
        }
        schemas.insert(format!("S{n}"), json!({"type": "object"}));
        json!({
            "paths": {"/x": {"put": {"requestBody": {"content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/S0"}
            }}}}}},
            "components": {"schemas": schemas}
        })
    }

    #[test]
    fn a_chain_within_the_bound_is_left_alone() {
        // From the body's schema: to S0, then S0 to S1, and on to S10: 11 in a row.
        assert!(too_deep(&chain(10), 11).is_empty());
        assert_eq!(
            too_deep(&chain(10), 10),
            [TooDeep {
                at: "/paths/~1x/put/requestBody/content/application~1json/schema".into(),
                depth: 11,
                entry: true,
            }]
        );
    }

    #[test]
    fn a_long_chain_is_cut_where_it_goes_too_deep_and_said_once() {
        let cut = too_deep(&chain(20_000), 256);
        // Every reference more than 256 from the end: the body's, and S0's to S19,743's
        // (S19,744's to S20,000 is 256 in a row). The walk has no recursion, so no chain
        // length reaches the stack.
        assert_eq!(cut.len(), 1 + 19_744);
        assert_eq!(cut.iter().filter(|c| c.entry).count(), 1);
        let cut_at = |i: usize| {
            let at = format!("/components/schemas/S{i}/properties/next");
            cut.iter().any(|c| c.at == at)
        };
        assert!(cut_at(19_743));
        assert!(!cut_at(19_744));
    }

    #[test]
    fn a_cycle_adds_only_its_own_length() {
        // A tree (a node's children are nodes) and two schemas that refer to each other.
        let doc = json!({"components": {"schemas": {
            "Node": {"properties": {"children": {"items": {"$ref": "#/components/schemas/Node"}}}},
            "A": {"properties": {"b": {"$ref": "#/components/schemas/B"}}},
            "B": {"properties": {"a": {"$ref": "#/components/schemas/A"}, "n": {"$ref": "#/components/schemas/Node"}}}
        }}});
        let depths = depths(&doc, ["/components/schemas/A"].into_iter());
        assert_eq!(depths["/components/schemas/Node"], 1);
        assert_eq!(depths["/components/schemas/B"], 2);
        assert_eq!(depths["/components/schemas/A"], 3);
        assert!(too_deep(&doc, 3).is_empty());
    }
}
