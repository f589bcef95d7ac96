//! An endpoint's template from the paths its events show (issue 66: Keycloak's token endpoint
//! came out `/realms/master/protocol/{param1}/{param2}`). Words stay literal; a place becomes
//! a parameter only where it holds a value: the sidecar's `*`, a number, a hash or UUID, a long
//! token of letters and digits, anything no word is, or words that differ between requests
//! whose paths are otherwise one. A parameter is named as the spec names that place where one
//! of its templates shares the path up to it, else for the collection before it
//! (`/users/{user_id}`), else `{id}`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Seen;
use crate::contract::BasePaths;

/// A path's places after the base path: a word kept as it is, or a value (`None`).
pub type Segments = Vec<Option<String>>;

/// An endpoint as proposed: its method, places, what was seen and on how many paths.
pub struct Group {
    pub method: String,
    pub segments: Segments,
    pub seen: Seen,
    pub paths: usize,
}

/// `path` after the spec's base path it is under; `None` when the spec has base paths and it
/// is under none (another endpoint of the same host, which this document does not describe).
pub fn relative<'p>(bases: &BasePaths, path: &'p str) -> Option<&'p str> {
    match bases.strip(path) {
        Some(rest) => Some(rest),
        None => (!bases.bound()).then_some(path),
    }
}

/// Each place of `path` (`/a/b`): a word, or a value.
pub fn segments(path: &str) -> Segments {
    let each = path.split('/').skip(1);
    each.map(|s| (!value_like(s)).then(|| s.to_string()))
        .collect()
}

/// A value rather than a word: the sidecar's `*`, a number, 8 or more hex digits with a digit
/// among them (a hash, an id), 12 or more characters with letters and digits (a token, a UUID),
/// or anything that is not a word (a letter, then letters, digits, `-`, `_`, `.`: `realms`,
/// `openid-connect`, `v2`, `export.json`).
fn value_like(s: &str) -> bool {
    let bytes = s.as_bytes();
    let digits = bytes.iter().filter(|b| b.is_ascii_digit()).count();
    let letters = bytes.iter().filter(|b| b.is_ascii_alphabetic()).count();
    let word = bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && (bytes.iter()).all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b));
    !s.is_empty()
        && (!word
            || (s.len() >= 8 && digits > 0 && bytes.iter().all(u8::is_ascii_hexdigit))
            || (s.len() >= 12 && digits > 0 && letters > 0))
}

/// The endpoints, one per method and places; then, while some paths of one method and length
/// differ only at one place between two words, in words or a word and a value, that place
/// holds a value and they are one endpoint (`/realms/master/x` and `/realms/test/x`: a member
/// of a collection). Not at the end, nor after a value or at the start: `/users/{id}/roles`
/// and `/users/{id}/groups`, `/users/{id}` and `/groups/{id}` are two endpoints each.
pub fn group<'a>(endpoints: impl Iterator<Item = (&'a str, &'a str, &'a Seen)>) -> Vec<Group> {
    let mut by: BTreeMap<(String, Segments), (Seen, usize)> = BTreeMap::new();
    for (method, path, seen) in endpoints {
        let entry = by.entry((method.to_string(), segments(path))).or_default();
        entry.0.merge(seen);
        entry.1 += 1;
    }
    while let Some(merged) = merge_once(&by) {
        by = merged;
    }
    let each = by.into_iter();
    each.map(|((method, segments), (seen, paths))| Group {
        method,
        segments,
        seen,
        paths,
    })
    .collect()
}

type Endpoints = BTreeMap<(String, Segments), (Seen, usize)>;

/// `by` with the endpoints that differ only at one place (the first where some do) made one;
/// `None` when no two do.
fn merge_once(by: &Endpoints) -> Option<Endpoints> {
    let longest = by.keys().map(|(_, s)| s.len()).max().unwrap_or(0);
    for i in 0..longest.saturating_sub(1) {
        let mut buckets: BTreeMap<(&str, Segments), usize> = BTreeMap::new();
        for (method, segments) in by.keys().filter(|(_, s)| between_words(s, i)) {
            let mut blank = segments.clone();
            blank[i] = None;
            *buckets.entry((method.as_str(), blank)).or_default() += 1;
        }
        if !buckets.values().any(|n| *n > 1) {
            continue;
        }
        let mut merged = Endpoints::new();
        for ((method, segments), (seen, paths)) in by {
            let mut blank = segments.clone();
            if between_words(segments, i) {
                blank[i] = None;
            }
            let many = buckets.get(&(method.as_str(), blank.clone())) > Some(&1);
            let key = (method.clone(), if many { blank } else { segments.clone() });
            let entry = merged.entry(key).or_default();
            entry.0.merge(seen);
            entry.1 += paths;
        }
        return Some(merged);
    }
    None
}

/// Whether place `i` of `segments` has a word before and after it.
fn between_words(segments: &Segments, i: usize) -> bool {
    let word = |j: usize| segments.get(j).is_some_and(Option::is_some);
    i > 0 && word(i - 1) && word(i + 1)
}

/// The template of `segments` and its parameters' names, each name once.
pub fn named(segments: &Segments, doc: &Value) -> (String, Vec<String>) {
    let paths = doc.get("paths").and_then(Value::as_object);
    let templates: Vec<Vec<&str>> = (paths.into_iter().flat_map(|p| p.keys()))
        .map(|t| t.split('/').skip(1).collect())
        .collect();
    let segments = &spec_places(segments, &templates);
    let mut names: Vec<String> = Vec::new();
    let mut out = Vec::with_capacity(segments.len());
    for (i, segment) in segments.iter().enumerate() {
        let Some(word) = segment else {
            let name =
                spec_name(&templates, segments, i).unwrap_or_else(|| collection(segments, i));
            let (mut unique, mut n) = (name.clone(), 1);
            while names.contains(&unique) {
                n += 1;
                unique = format!("{name}_{n}");
            }
            out.push(format!("{{{unique}}}"));
            names.push(unique);
            continue;
        };
        out.push(word.clone());
    }
    (format!("/{}", out.join("/")), names)
}

/// `segments` with a word made a value where the spec's templates that agree with the path up
/// to it have a parameter there and none has that word (`master` in `/master/users/{id}/x`
/// against `/{realm}/users/{user-id}`, as the sidecar's path shape masks it).
fn spec_places(segments: &Segments, templates: &[Vec<&str>]) -> Segments {
    let mut out = segments.clone();
    for i in 0..out.len() {
        let Some(word) = out[i].clone() else {
            continue;
        };
        out[i] = None;
        let literal = templates.iter().any(|t| agrees(t, &out, i) && t[i] == word);
        if literal || spec_name(templates, &out, i).is_none() {
            out[i] = Some(word);
        }
    }
    out
}

/// Whether template `t` agrees with `segments` on every place before `i` (the same words,
/// parameters where values are) and has a place `i`.
fn agrees(t: &[&str], segments: &Segments, i: usize) -> bool {
    t.len() > i
        && (0..i).all(|j| match (&segments[j], parameter(t[j])) {
            (None, Some(_)) => true,
            (Some(word), None) => word == t[j],
            _ => false,
        })
}

/// The name a template of the spec gives place `i`, where it has a parameter there and agrees
/// with `segments` on every place before it (the same words, parameters where values are).
fn spec_name(templates: &[Vec<&str>], segments: &Segments, i: usize) -> Option<String> {
    let fits = |t: &&Vec<&str>| agrees(t, segments, i) && segments[i].is_none();
    (templates.iter().filter(fits)).find_map(|t| parameter(t[i]).map(String::from))
}

/// `id` of a template's `{id}`.
fn parameter(segment: &str) -> Option<&str> {
    let name = segment.strip_prefix('{')?.strip_suffix('}')?;
    (!name.contains(['{', '}'])).then_some(name)
}

/// `user_id` for the place after `users`; `id` after a value or at the start.
fn collection(segments: &Segments, i: usize) -> String {
    let before = i.checked_sub(1).and_then(|j| segments[j].as_deref());
    let Some(word) = before.filter(|w| !w.is_empty()) else {
        return "id".to_string();
    };
    let word = word.to_ascii_lowercase().replace(['-', '.'], "_");
    let one = match () {
        _ if word.len() > 4 && word.ends_with("ies") => format!("{}y", &word[..word.len() - 3]),
        _ if word.ends_with("sses") => word[..word.len() - 2].to_string(),
        _ if word.len() > 2 && word.ends_with('s') && !word.ends_with("ss") => {
            word[..word.len() - 1].to_string()
        }
        _ => word,
    };
    format!("{one}_id")
}

/// A template with its parameters' names left out (`/t/{}`): two templates of one shape.
pub fn unnamed(template: &str) -> String {
    let segments = template.split('/');
    let each = segments.map(|s| match s.starts_with('{') && s.ends_with('}') {
        true => "{}",
        false => s,
    });
    each.collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn words_are_kept_and_values_named_for_their_collection_or_the_spec() {
        let words = [
            "realms",
            "openid-connect",
            "v2",
            "export.json",
            "oauth2",
            "deadbeef",
        ];
        let values = [
            "*",
            "1234",
            "9f86d081",
            "3f2b6c1e-8a4d-4e2f-9b1a-0c5d7e9f1a2b",
            "tok9A8b7C6d5E4f3",
            "alice@example.com",
            "a%20b",
            "2fa",
        ];
        let wrong: Vec<&str> = (words.iter().filter(|w| value_like(w)))
            .chain(values.iter().filter(|v| !value_like(v)))
            .copied()
            .collect();
        assert!(wrong.is_empty(), "judged wrongly: {wrong:?}");
        let empty = json!({});
        let of = |path: &str, doc: &Value| named(&segments(path), doc).0;
        assert_eq!(
            of("/v2/tasks/*/logs/*", &empty),
            "/v2/tasks/{task_id}/logs/{log_id}"
        );
        assert_eq!(
            of("/policies/7/entries/8/", &empty),
            "/policies/{policy_id}/entries/{entry_id}/"
        );
        assert_eq!(of("/*/*", &empty), "/{id}/{id_2}");
        let keycloak =
            json!({"paths": {"/{realm}/users/{user-id}": {}, "/{realm}/users/count": {}}});
        assert_eq!(
            of("/master/users/count/x", &keycloak),
            "/{realm}/users/count/x",
            "a word where the spec has a parameter is a value; one the spec has, a word"
        );
        let doc = json!({"paths": {"/t/{id}": {}}});
        assert_eq!(
            named(&segments("/t/*"), &doc),
            ("/t/{id}".to_string(), vec!["id".to_string()])
        );
    }
}
