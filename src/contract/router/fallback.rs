//! A segment matcher for the templates matchit refuses as ambiguous beside others (a parameter
//! with a suffix next to a bare one, `/v1/{name}:cancel` and `/v1/{name}`). Real specs have a
//! few of these at most, so a linear scan is enough; it runs only when matchit's answer may be
//! beaten by a more concrete template.

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

impl Fallback {
    pub fn new(normalized: &str, entry: usize) -> Fallback {
        Fallback {
            segments: normalized.split('/').map(Segment::parse).collect(),
            entry,
            rank: Specificity::of(normalized),
        }
    }

    /// The parameter values when `path` (trailing slash trimmed) matches, else `None`. Like
    /// matchit, a parameter never matches an empty value or crosses a `/`.
    pub fn matches<'p>(&self, path: &'p str) -> Option<Vec<&'p str>> {
        let mut values = Vec::new();
        let mut parts = path.split('/');
        for segment in &self.segments {
            let part = parts.next()?;
            match segment {
                Segment::Literal(text) if text == part => {}
                Segment::Literal(_) => return None,
                Segment::Param { prefix, suffix } => {
                    let value = part.strip_prefix(prefix.as_str())?;
                    let value = value.strip_suffix(suffix.as_str())?;
                    if value.is_empty() {
                        return None;
                    }
                    values.push(value);
                }
            }
        }
        parts.next().is_none().then_some(values)
    }
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
}
