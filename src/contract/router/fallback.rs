//! A segment matcher for the templates matchit refuses as ambiguous beside others (a parameter
//! with a suffix next to a bare one, `/v1/{name}:cancel` and `/v1/{name}`), and for those with
//! a parameter whose value may hold `/` anywhere in the path (GitHub's `x-multi-segment`
//! `/repos/{owner}/{repo}/branches/{branch}/protection`; matchit's catch-all only ends a
//! route). Real specs have a few of the first kind at most, so a linear scan is enough; it runs
//! only when matchit's answer may be beaten by a more concrete template, or found nothing.

/// How concrete a template is, compared segment by segment from the left: a literal segment
/// beats one with a parameter, and a parameter segment with more literal text (`{q}.atom`)
/// beats one with less (`{q}`). OpenAPI: concrete paths are matched before templated ones.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Specificity(Vec<usize>);

impl Specificity {
    /// Of a normalized template (`/a/{p2}.json`).
    pub fn of(normalized: &str) -> Specificity {
        Specificity(
            normalized
                .split('/')
                .map(|segment| match Segment::parse(segment) {
                    Segment::Literal(_) => usize::MAX,
                    Segment::Param { prefix, suffix } => prefix.len() + suffix.len(),
                    Segment::Span => 0,
                })
                .collect(),
        )
    }
}

#[derive(Debug)]
enum Segment {
    Literal(String),
    /// One parameter with the literal text around it (normalization merged compound ones).
    Param {
        prefix: String,
        suffix: String,
    },
    /// A whole-segment parameter whose value may hold `/`: one segment or more.
    Span,
}

impl Segment {
    fn parse(segment: &str) -> Segment {
        match segment.split_once('{') {
            None => Segment::Literal(segment.to_string()),
            Some((prefix, rest)) => Segment::Param {
                prefix: prefix.to_string(),
                suffix: rest.split_once('}').map_or("", |(_, s)| s).to_string(),
            },
        }
    }
}

#[derive(Debug)]
pub(super) struct Fallback {
    segments: Vec<Segment>,
    /// The table entry it routes to.
    pub entry: usize,
    pub rank: Specificity,
}

/// Ways tried to lay a path's segments on a template's spanning parameters before giving up:
/// a template has two of them at most in real specs, and a path from the network may have
/// thousands of segments.
const SPAN_TRIES: usize = 256;

impl Fallback {
    pub fn new(normalized: &str, entry: usize) -> Fallback {
        Fallback::spanning(normalized, &[], entry)
    }

    /// A template whose whole-segment parameters at the segment positions `spans` may take
    /// several segments.
    pub fn spanning(normalized: &str, spans: &[usize], entry: usize) -> Fallback {
        Fallback {
            segments: normalized
                .split('/')
                .enumerate()
                .map(|(n, text)| match Segment::parse(text) {
                    Segment::Param { prefix, suffix }
                        if prefix.is_empty() && suffix.is_empty() && spans.contains(&n) =>
                    {
                        Segment::Span
                    }
                    segment => segment,
                })
                .collect(),
            entry,
            rank: Specificity::of(normalized),
        }
    }

    /// The parameter values when `path` (trailing slash trimmed) matches, else `None`. Like
    /// matchit, a parameter never matches an empty value or crosses a `/`, except a spanning
    /// one, which takes whole segments, as few as fit.
    pub fn matches<'p>(&self, path: &'p str) -> Option<Vec<&'p str>> {
        let mut values = Vec::new();
        let mut tries = SPAN_TRIES;
        lay(&self.segments, path, Some(path), &mut values, &mut tries).then_some(values)
    }
}

/// Match `segments` against `rest` (the path from a segment start; `None` once it is used up),
/// pushing the values; backtracks over the lengths a [`Segment::Span`] may take.
fn lay<'p>(
    segments: &[Segment],
    path: &'p str,
    rest: Option<&'p str>,
    values: &mut Vec<&'p str>,
    tries: &mut usize,
) -> bool {
    let Some((segment, later)) = segments.split_first() else {
        return rest.is_none();
    };
    let Some(rest) = rest else { return false };
    let (part, after) = match rest.split_once('/') {
        Some((part, after)) => (part, Some(after)),
        None => (rest, None),
    };
    match segment {
        Segment::Literal(text) if text == part => lay(later, path, after, values, tries),
        Segment::Literal(_) => false,
        Segment::Param { prefix, suffix } => {
            let Some(value) = part
                .strip_prefix(prefix.as_str())
                .and_then(|v| v.strip_suffix(suffix.as_str()))
                .filter(|v| !v.is_empty())
            else {
                return false;
            };
            values.push(value);
            if lay(later, path, after, values, tries) {
                return true;
            }
            values.pop();
            false
        }
        Segment::Span => {
            let start = rest.as_ptr() as usize - path.as_ptr() as usize;
            let mut end = start + part.len();
            let mut after = after;
            loop {
                if *tries == 0 {
                    return false;
                }
                *tries -= 1;
                let value = &path[start..end];
                if value.split('/').any(str::is_empty) {
                    return false;
                }
                values.push(value);
                if lay(later, path, after, values, tries) {
                    return true;
                }
                values.pop();
                let Some(next) = after else { return false };
                let part = next.split('/').next().unwrap_or(next);
                end += 1 + part.len();
                after = next.split_once('/').map(|(_, a)| a);
            }
        }
    }
}

/// Whether `path` starts with the literal segments before the first parameter of `template`,
/// one at least (false for a template without a parameter, or starting with one: `/{scope}`
/// would fit any path): a cheap filter before matching segment by segment.
pub(super) fn literal_start_fits(template: &str, path: &str) -> bool {
    let Some(open) = template.find('{') else {
        return false;
    };
    let start = &template[..template[..open].rfind('/').map_or(0, |s| s + 1)];
    start.len() > 1 && path.starts_with(start)
}

/// The parameter values of `path` under a normalized template, parsed as it goes (no
/// allocation unless it matches): for the rare scan of a method's templates.
pub(super) fn match_template<'p>(template: &str, path: &'p str) -> Option<Vec<&'p str>> {
    let mut values = Vec::new();
    let mut parts = path.split('/');
    for segment in template.split('/') {
        let part = parts.next()?;
        match segment.split_once('{') {
            None if segment == part => {}
            None => return None,
            Some((prefix, rest)) => {
                let suffix = rest.split_once('}').map_or("", |(_, s)| s);
                let value = part.strip_prefix(prefix)?.strip_suffix(suffix)?;
                if value.is_empty() {
                    return None;
                }
                values.push(value);
            }
        }
    }
    parts.next().is_none().then_some(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_match_with_their_literal_text_and_rank_by_it() {
        let f = Fallback::new("/v1/{p2}:cancel", 0);
        assert_eq!(f.matches("/v1/op:cancel"), Some(vec!["op"]));
        assert_eq!(f.matches("/v1/:cancel"), None);
        assert_eq!(f.matches("/v1/op"), None);
        assert_eq!(f.matches("/v1/op:cancel/x"), None);
        assert_eq!(
            match_template("/v1/{p2}:cancel", "/v1/op:cancel"),
            Some(vec!["op"])
        );
        assert_eq!(match_template("/v1/{p2}:cancel", "/v1/op"), None);
        assert_eq!(match_template("/v1/{p2}", "/v1/op/x"), None);
        assert!(Specificity::of("/v1/{p2}:cancel") > Specificity::of("/v1/{p2}"));
        assert!(Specificity::of("/v1/list") > Specificity::of("/v1/{p2}:cancel"));
        assert!(Specificity::of("/a/{p1}/b") < Specificity::of("/a/x/{p2}"));
    }

    #[test]
    fn a_spanning_parameter_takes_whole_segments_as_few_as_fit() {
        let f = Fallback::spanning("/r/{p2}/b/{p4}/protection", &[4], 0);
        assert_eq!(
            f.matches("/r/o/b/feat/x/protection"),
            Some(vec!["o", "feat/x"])
        );
        assert_eq!(f.matches("/r/o/b/main/protection"), Some(vec!["o", "main"]));
        assert_eq!(f.matches("/r/o/b/protection"), None);
        assert_eq!(f.matches("/r/o/b/feat//protection"), None);
        assert_eq!(f.matches("/r/o/b/feat/x"), None);
        // Only the spanning parameter crosses a `/`.
        assert_eq!(f.matches("/r/o/p/b/feat/protection"), None);
        let tail = Fallback::spanning("/c/{p2}", &[2], 0);
        assert_eq!(
            tail.matches("/c/docs/a/README.md"),
            Some(vec!["docs/a/README.md"])
        );
        let two = Fallback::spanning("/{p1}/x/{p3}/y", &[1, 3], 0);
        assert_eq!(two.matches("/a/b/x/c/x/d/y"), Some(vec!["a/b", "c/x/d"]));
        // A hostile path gives up within the bound instead of trying every split.
        let deep = format!("/{}", vec!["a"; 5000].join("/"));
        assert_eq!(two.matches(&deep), None);
    }
}
