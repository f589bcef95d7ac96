//! Request routing on method + path template. matchit does the matching (static segments beat
//! parameters); parameter names are normalized by position (`{p0}`, `{p1}`) before insertion,
//! so `/a/{id}` for GET and `/a/{aId}` for PUT share one route instead of conflicting.

use matchit::Router as Matcher;

#[derive(Debug, Default)]
pub struct Router {
    matcher: Matcher<usize>,
    /// One entry per distinct normalized template: the operations routed there.
    entries: Vec<Vec<Slot>>,
    /// The normalized template of each entry, to find it again at insertion.
    templates: Vec<String>,
}

#[derive(Debug)]
struct Slot {
    method: String,
    index: usize,
    template: String,
    /// A segment holds several parameters (`{base}...{head}`); such a slot may share its
    /// route with a plain one (`{basehead}`) and wins when its separators are in the path.
    compound: bool,
}

/// What the router found for a request.
#[derive(Debug)]
pub enum Routed<'r, 'p> {
    /// The operation index and the raw (still percent-encoded) path parameter values in order.
    Found(usize, Vec<&'p str>),
    /// The path is known, the method is not; the allowed methods.
    MethodNotAllowed(Vec<&'r str>),
    NotFound,
}

/// Why a template could not be routed.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("{method} {template} is declared twice (as `{first}` too)")]
    Duplicate {
        method: String,
        template: String,
        first: String,
    },
    #[error("path template {template} cannot be routed: {reason}")]
    Template { template: String, reason: String },
}

impl Router {
    /// Add operation `index` under `method` and `template`; `describe` names an operation
    /// index for the duplicate error.
    pub fn insert(
        &mut self,
        method: &str,
        template: &str,
        index: usize,
        describe: impl Fn(usize) -> String,
    ) -> Result<(), RouteError> {
        let normalized = normalize_template(template);
        let entry = match self.templates.iter().position(|t| *t == normalized) {
            Some(entry) => entry,
            None => {
                let entry = self.entries.len();
                self.matcher
                    .insert(normalized.clone(), entry)
                    .map_err(|e| RouteError::Template {
                        template: template.to_string(),
                        reason: e.to_string(),
                    })?;
                self.templates.push(normalized);
                self.entries.push(Vec::new());
                entry
            }
        };
        let compound = template.split('/').any(|s| s.matches('{').count() > 1);
        let slots = &mut self.entries[entry];
        if let Some(first) = slots
            .iter()
            .find(|s| s.method == method && s.compound == compound)
        {
            return Err(RouteError::Duplicate {
                method: method.into(),
                template: template.into(),
                first: describe(first.index),
            });
        }
        slots.push(Slot {
            method: method.to_string(),
            index,
            template: template.to_string(),
            compound,
        });
        Ok(())
    }

    /// Route a raw request path (no query string, base path already stripped).
    pub fn route<'r, 'p>(&'r self, method: &str, path: &'p str) -> Routed<'r, 'p> {
        let path = trim_trailing_slash(path);
        let Ok(matched) = self.matcher.at(path) else {
            return Routed::NotFound;
        };
        let slots = &self.entries[*matched.value];
        let compound = slots
            .iter()
            .filter(|s| s.method == method && s.compound)
            .find_map(|s| {
                let values = split_compound(&s.template, path)?;
                Some(Routed::Found(s.index, values))
            });
        if let Some(found) = compound {
            return found;
        }
        match slots.iter().find(|s| s.method == method && !s.compound) {
            Some(slot) => {
                Routed::Found(slot.index, matched.params.iter().map(|(_, v)| v).collect())
            }
            None => {
                let mut allowed: Vec<&str> = slots.iter().map(|s| s.method.as_str()).collect();
                allowed.dedup();
                Routed::MethodNotAllowed(allowed)
            }
        }
    }
}

pub(crate) fn trim_trailing_slash(path: &str) -> &str {
    if path.len() > 1 {
        path.trim_end_matches('/')
    } else {
        path
    }
}

/// `/a/{id}/b/{name}.json/` to `/a/{p0}/b/{p1}.json`. matchit allows one parameter per
/// segment, so a compound segment (`{base}...{head}`) becomes one parameter, split afterwards
/// by [`split_compound`].
pub fn normalize_template(template: &str) -> String {
    let mut out = String::with_capacity(template.len());
    for (n, segment) in trim_trailing_slash(template).split('/').enumerate() {
        if n > 0 {
            out.push('/');
        }
        match segment.matches('{').count() {
            0 => out.push_str(segment),
            1 => {
                let open = segment.find('{').unwrap_or(0);
                let close = segment.find('}').unwrap_or(segment.len() - 1);
                out.push_str(&segment[..open]);
                out.push_str(&format!("{{p{n}}}"));
                out.push_str(&segment[close + 1..]);
            }
            _ => out.push_str(&format!("{{p{n}}}")),
        }
    }
    if out.is_empty() { "/".into() } else { out }
}

/// Values of the parameters of `template` in `path`, for templates with compound segments;
/// `None` when a separator of the template is not in the path.
fn split_compound<'p>(template: &str, path: &'p str) -> Option<Vec<&'p str>> {
    let mut values = Vec::new();
    for (segment, mut value) in trim_trailing_slash(template)
        .split('/')
        .zip(trim_trailing_slash(path).split('/'))
    {
        let mut rest = segment;
        while let Some(open) = rest.find('{') {
            value = value.strip_prefix(&rest[..open])?;
            let close = rest[open..].find('}').map_or(rest.len() - 1, |c| c + open);
            rest = &rest[close + 1..];
            let literal = &rest[..rest.find('{').unwrap_or(rest.len())];
            let end = match literal.is_empty() {
                true => value.len(),
                false => value.find(literal)?,
            };
            values.push(&value[..end]);
            value = &value[end..];
        }
    }
    Some(values)
}

/// The parameter names of a template in order of appearance.
pub(crate) fn template_params(template: &str) -> Vec<String> {
    template
        .split('{')
        .skip(1)
        .filter_map(|s| s.split_once('}'))
        .map(|(name, _)| name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(routes: &[(&str, &str)]) -> Router {
        let mut r = Router::default();
        for (i, (m, t)) in routes.iter().enumerate() {
            r.insert(m, t, i, |i| i.to_string()).unwrap();
        }
        r
    }

    #[test]
    fn literal_segments_beat_parameters_and_names_coexist() {
        let r = router(&[
            ("GET", "/a/{id}"),
            ("PUT", "/a/{aId}"),
            ("GET", "/a/new"),
            ("GET", "/a/{id}/b/"),
        ]);
        assert!(matches!(r.route("GET", "/a/7"), Routed::Found(0, v) if v == ["7"]));
        assert!(matches!(r.route("PUT", "/a/7/"), Routed::Found(1, v) if v == ["7"]));
        assert!(matches!(r.route("GET", "/a/new"), Routed::Found(2, _)));
        assert!(matches!(r.route("GET", "/a/7/b"), Routed::Found(3, _)));
        assert!(
            matches!(r.route("DELETE", "/a/7"), Routed::MethodNotAllowed(m) if m == ["GET", "PUT"])
        );
        assert!(matches!(r.route("GET", "/b"), Routed::NotFound));
    }

    #[test]
    fn a_compound_segment_shares_its_route_with_a_plain_one() {
        let r = router(&[("GET", "/c/{basehead}"), ("GET", "/c/{base}...{head}")]);
        assert!(
            matches!(r.route("GET", "/c/main...dev"), Routed::Found(1, v) if v == ["main", "dev"])
        );
        assert!(matches!(r.route("GET", "/c/main"), Routed::Found(0, v) if v == ["main"]));
    }

    #[test]
    fn duplicates_are_refused() {
        let mut r = router(&[("GET", "/a/{id}")]);
        let e = r
            .insert("GET", "/a/{other}", 1, |i| format!("op{i}"))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "GET /a/{other} is declared twice (as `op0` too)"
        );
    }

    #[test]
    fn template_helpers() {
        assert_eq!(
            normalize_template("/a/{id}/b/{name}.json/"),
            "/a/{p2}/b/{p4}.json"
        );
        assert_eq!(normalize_template("/c/{base}...{head}"), "/c/{p2}");
        assert_eq!(
            split_compound("/c/{base}...{head}/d/{x}", "/c/main...dev/d/7").unwrap(),
            ["main", "dev", "7"]
        );
        assert_eq!(split_compound("/c/{base}...{head}", "/c/main"), None);
        assert_eq!(template_params("/a/{id}/b/{name}.json"), ["id", "name"]);
    }
}
