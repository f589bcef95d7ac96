//! A path's shape: where a request went, without the values it carries (ids, tokens, names), for
//! findings, events and logs. A segment the spec writes literally somewhere is kept, and so is an
//! API version (`v2`, or a number where the spec writes one after the same word: `/api/2/`
//! against `/api/3/`). Any other segment is masked as `*`, unless the spec's templates, followed
//! from the start of the path, show that place holds words only: there a word (`ai-configs`,
//! `stop`) names the endpoint the client meant, which an operator needs to see, and no template
//! puts a value there. A place some template gives a parameter is a value's, and is masked, and
//! so is a place past the end of every template (a branch name after `git/refs/{ref}`).

use std::collections::{HashMap, HashSet};

/// The templates (base paths before them), segment by segment.
#[derive(Debug, Default)]
pub struct Shapes {
    /// Every segment literal in some template or base path.
    literals: HashSet<String>,
    /// Literal segments some template follows with a number (`api` in `/rest/api/3/...`).
    before_numbers: HashSet<String>,
    nodes: Vec<Node>,
}

#[derive(Debug, Default)]
struct Node {
    literal: HashMap<String, usize>,
    param: Option<usize>,
}

impl Shapes {
    pub fn new<'a>(templates: impl Iterator<Item = &'a str>, base_paths: &[String]) -> Shapes {
        let mut shapes = Shapes {
            nodes: vec![Node::default()],
            ..Shapes::default()
        };
        let bases: Vec<&str> = match base_paths.is_empty() {
            true => vec![""],
            false => std::iter::once("")
                .chain(base_paths.iter().map(String::as_str))
                .collect(),
        };
        for template in templates {
            for base in &bases {
                shapes.insert(&format!("{base}{template}"));
            }
        }
        shapes
    }

    fn insert(&mut self, template: &str) {
        let mut at = 0;
        let mut previous: Option<&str> = None;
        for segment in template.split('/').filter(|s| !s.is_empty()) {
            let param = segment.contains(['{', '}']);
            if !param {
                self.literals.insert(segment.to_string());
                if let Some(p) = previous.filter(|_| segment.bytes().all(|b| b.is_ascii_digit())) {
                    self.before_numbers.insert(p.to_string());
                }
            }
            previous = (!param).then_some(segment);
            let next = self.nodes.len();
            let node = &mut self.nodes[at];
            let child = match param {
                true => *node.param.get_or_insert(next),
                false => *node.literal.entry(segment.to_string()).or_insert(next),
            };
            if child == next {
                self.nodes.push(Node::default());
            }
            at = child;
        }
    }

    /// `path` (its query left out) with every segment that may be a value written `*`.
    pub fn of(&self, path: &str) -> String {
        let path = path.split(['?', '#']).next().unwrap_or("");
        let mut shape = String::with_capacity(path.len().min(256));
        // The places in the templates the path is at so far; none once it left them all.
        let (mut at, mut next): (Vec<usize>, Vec<usize>) = (vec![0], Vec::new());
        let mut previous_kept: Option<&str> = None;
        for (i, segment) in path.split('/').enumerate() {
            if i > 0 {
                shape.push('/');
            }
            if segment.is_empty() {
                continue;
            }
            // Words only: some template has a word here, and none a parameter. Past the end of
            // every template (`git/refs/{ref}` then `heads/main`) nothing is known, and a
            // branch name is a value.
            let words_only = at.iter().all(|n| self.nodes[*n].param.is_none())
                && at.iter().any(|n| !self.nodes[*n].literal.is_empty());
            let kept = self.literals.contains(segment)
                || is_version(segment)
                || (segment.len() <= 3
                    && segment.bytes().all(|b| b.is_ascii_digit())
                    && previous_kept.is_some_and(|p| self.before_numbers.contains(p)))
                || (words_only && is_word(segment));
            match kept {
                true => shape.push_str(segment),
                false => shape.push('*'),
            }
            previous_kept = kept.then_some(segment);
            next.clear();
            for n in &at {
                let node = &self.nodes[*n];
                next.extend(
                    node.literal
                        .get(segment)
                        .copied()
                        .into_iter()
                        .chain(node.param),
                );
            }
            next.sort_unstable();
            next.dedup();
            std::mem::swap(&mut at, &mut next);
        }
        shape
    }
}

/// A word, as endpoint names are: letters, with `-` or `_` between them, 2 to 40 bytes.
fn is_word(segment: &str) -> bool {
    (2..=40).contains(&segment.len())
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_')
        && segment
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic())
}

/// An API version segment (`v4`, `v2.1`, `v1beta2`): no value, and the likeliest reason a
/// whole API's traffic routes nowhere (GitLab's v4 traffic against its v3 spec), so a path's
/// shape keeps it.
fn is_version(segment: &str) -> bool {
    let Some(rest) = segment.strip_prefix(['v', 'V']) else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let tail = &rest[digits..];
    digits > 0
        && digits <= 3
        && (tail.is_empty()
            || tail.strip_prefix('.').is_some_and(|t| {
                !t.is_empty() && t.len() <= 3 && t.bytes().all(|b| b.is_ascii_digit())
            })
            || ["alpha", "beta"].iter().any(|w| {
                tail.strip_prefix(w)
                    .is_some_and(|t| t.len() <= 2 && t.bytes().all(|b| b.is_ascii_digit()))
            }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_masked_and_the_words_that_name_an_endpoint_kept() {
        let shapes = Shapes::new(
            [
                "/projects/{projectKey}/environments",
                "/projects/{projectKey}/flags/{flagKey}",
                "/pipelines/{uuid}/stopPipeline",
                "/rest/api/3/search",
                "/channels/{id}",
            ]
            .into_iter(),
            &["/api/v2".to_string()],
        );
        // The client's endpoint is not in the spec: its word is kept, the values are not.
        assert_eq!(
            shapes.of("/api/v2/projects/acme/ai-configs/cfg-1?x=1"),
            "/api/v2/projects/*/ai-configs/*"
        );
        assert_eq!(shapes.of("/pipelines/9f2c/stop"), "/pipelines/*/stop");
        // Another version of the API, after the word the spec follows with its version.
        assert_eq!(shapes.of("/rest/api/2/search"), "/rest/api/2/search");
        // A place a template gives a parameter holds a value, word or not.
        assert_eq!(shapes.of("/channels/alice"), "/channels/*");
        assert_eq!(
            shapes.of("/api/v2/projects/alice/environments"),
            "/api/v2/projects/*/environments"
        );
        // Off the templates, only the spec's words and versions are kept.
        // At the start every template has a word: a word there names an endpoint.
        assert_eq!(shapes.of("/users/alice/7"), "/users/*/*");
        assert_eq!(shapes.of("/7/alice"), "/*/*");
        assert_eq!(shapes.of("/v4/channels/tok_9f2"), "/v4/channels/*");
        assert_eq!(shapes.of("/projects/7/8"), "/projects/*/*");
        // Past the end of every template nothing is known: a branch name is a value.
        let refs = Shapes::new(["/repos/{owner}/{repo}/git/refs/{ref}"].into_iter(), &[]);
        assert_eq!(
            refs.of("/repos/o/r/git/refs/heads/main"),
            "/repos/*/*/git/refs/*/*"
        );
    }
}
