//! Request routing on method + path template. Each method has a table of its own, so a request
//! is matched among the templates that declare its method (`PUT /services/jira` reaches
//! `PUT /services/{slug}` when the concrete `/services/jira` declares only GET); one more table
//! of every template tells "method not allowed" from "not found".
//!
//! matchit does the matching (static segments beat parameters); parameter names are normalized
//! by position (`{p0}`, `{p1}`) before insertion, so `/a/{id}` for GET and `/a/{aId}` for PUT
//! share one route instead of conflicting. Templates matchit refuses (`/v1/{name}:cancel` beside
//! `/v1/{name}`, `/search/{q}.atom` beside `/search/{q}`) go to a segment matcher of our own
//! ([`fallback`]) that keeps OpenAPI's precedence: the more concrete template wins.

mod fallback;

pub use crate::template::normalize_template;
pub(crate) use crate::template::trim_trailing_slash;
use matchit::Router as Matcher;

use fallback::{Fallback, Specificity};

#[derive(Debug, Default)]
pub struct Router {
    /// One table per method (uppercase), in insertion order; a handful at most.
    by_method: Vec<(String, Table)>,
    /// Every template whatever its method, to name the allowed methods of a known path.
    any: Table,
}

/// Templates and the operations routed by them.
#[derive(Debug, Default)]
struct Table {
    matcher: Matcher<usize>,
    /// One entry per distinct normalized template: the operations routed there.
    entries: Vec<Vec<Slot>>,
    /// The normalized template of each entry, to find it again at insertion.
    templates: Vec<String>,
    /// Normalized template to entry: insertion stays linear for Microsoft Graph's 17,000 paths.
    index: std::collections::HashMap<String, usize>,
    /// Templates matchit refused, matched segment by segment (empty for most specs).
    fallback: Vec<Fallback>,
    /// Templates with a parameter whose value may hold `/` (`x-multi-segment`), matched
    /// segment by segment when nothing else fits (matchit routes their one-segment values).
    spanning: Vec<Fallback>,
    /// Entries by the number of `/` in their template: a path can only fit those of its own
    /// depth, so the scan of [`Router::matching`] reads no other.
    by_depth: Vec<Vec<usize>>,
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
        /// The operation index already routed there.
        first_index: usize,
    },
}

impl Router {
    /// Add operation `index` under `method` and `template`; the parameters named in `spanning`
    /// may hold `/`; `describe` names an operation index for the duplicate error.
    pub fn insert(
        &mut self,
        method: &str,
        template: &str,
        index: usize,
        spanning: &[String],
        describe: impl Fn(usize) -> String,
    ) -> Result<(), RouteError> {
        let position = self.by_method.iter().position(|(m, _)| m == method);
        let table = match position {
            Some(i) => &mut self.by_method[i].1,
            None => {
                self.by_method.push((method.to_string(), Table::default()));
                &mut self.by_method.last_mut().expect("just pushed").1
            }
        };
        let spans = span_positions(template, spanning);
        table.insert(method, template, index, &spans, &describe)?;
        self.any.insert(method, template, index, &spans, &describe)
    }

    /// Route a raw request path (no query string, base path already stripped).
    pub fn route<'r, 'p>(&'r self, method: &str, path: &'p str) -> Routed<'r, 'p> {
        let path = trim_trailing_slash(path);
        if let Some((_, table)) = self.by_method.iter().find(|(m, _)| m == method)
            && let Some((slots, values)) = table.lookup(path)
            && let Some(found) = found(slots, method, path, values)
        {
            return found;
        }
        match self.any.lookup(path) {
            Some((slots, _)) => {
                let mut allowed: Vec<&str> = slots.iter().map(|s| s.method.as_str()).collect();
                allowed.dedup();
                Routed::MethodNotAllowed(allowed)
            }
            None => Routed::NotFound,
        }
    }
}

impl Router {
    /// Every operation of `method` whose template `path` fits, with its parameter values, in
    /// the order declared: for a request the operation `routed` refuses (a concrete
    /// `/sites/{id}/zones/{zone}` beside `/sites/{id}/{kind}/count`). Compound templates are
    /// left out, and so are those `routed`'s template [`dominates`]: OpenAPI's concrete path
    /// beats its templated sibling whatever the query carries. A scan of the method's
    /// templates, so only run on a refused request.
    pub fn matching<'p>(
        &self,
        method: &str,
        path: &'p str,
        routed: usize,
    ) -> Vec<(usize, Vec<&'p str>)> {
        let path = trim_trailing_slash(path);
        let Some((_, table)) = self.by_method.iter().find(|(m, _)| m == method) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let same_depth = table
            .by_depth
            .get(slashes(path))
            .map_or(&[][..], Vec::as_slice);
        let one_segment = same_depth.iter().filter_map(|&entry| {
            Some((
                entry,
                fallback::match_template(&table.templates[entry], path)?,
            ))
        });
        // A spanning template whose values cross a `/`: the one-segment case is above.
        let spanning = table.spanning.iter().filter_map(|f| {
            let values = f.matches(path)?;
            values
                .iter()
                .any(|v| v.contains('/'))
                .then_some((f.entry, values))
        });
        let fits: Vec<(usize, Vec<&'p str>)> = one_segment.chain(spanning).collect();
        let routed_template = fits
            .iter()
            .find(|(entry, _)| table.entries[*entry].iter().any(|s| s.index == routed))
            .map(|(entry, _)| table.templates[*entry].as_str());
        for (entry, values) in &fits {
            if routed_template.is_some_and(|r| dominates(r, &table.templates[*entry])) {
                continue;
            }
            for slot in &table.entries[*entry] {
                if slot.method == method && !slot.compound {
                    out.push((slot.index, values.clone()));
                }
            }
        }
        out
    }

    /// For a path no template of `method` fits: the operation it would fit if a parameter the
    /// spec does not let span segments took several, and that parameter's place among the
    /// template's, with its value. A scan of the method's templates, so only run on an unrouted
    /// request.
    pub fn fits_with_slash<'p>(
        &self,
        method: &str,
        path: &'p str,
    ) -> Option<(usize, usize, &'p str)> {
        let path = trim_trailing_slash(path);
        let (_, table) = self.by_method.iter().find(|(m, _)| m == method)?;
        let depth = slashes(path);
        let mut best: Option<(Specificity, usize, Vec<&'p str>)> = None;
        for (entry, template) in table.templates.iter().enumerate() {
            if slashes(template) >= depth || !fallback::literal_start_fits(template, path) {
                continue;
            }
            let all: Vec<usize> = (0..=slashes(template)).collect();
            let Some(values) = Fallback::spanning(template, &all, entry).matches(path) else {
                continue;
            };
            let rank = Specificity::of(template);
            if best.as_ref().is_none_or(|(r, ..)| rank > *r) {
                best = Some((rank, entry, values));
            }
        }
        let (_, entry, values) = best?;
        let slot = table.entries[entry].iter().find(|s| s.method == method)?;
        let param = values.iter().position(|v| v.contains('/'))?;
        if self.goes_on_after(&table.templates[entry], param) {
            return None;
        }
        Some((slot.index, param, values[param]))
    }

    /// Whether some template (of any method) goes on past `template`'s `param`-th parameter
    /// with segments of its own (`/pipelines/{uuid}` and `/pipelines/{uuid}/stopPipeline`):
    /// then a path with segments after that parameter's place more likely names an endpoint
    /// the spec does not have (`/pipelines/{uuid}/stop`) than a value holding a `/`.
    fn goes_on_after(&self, template: &str, param: usize) -> bool {
        let segments: Vec<&str> = trim_trailing_slash(template).split('/').collect();
        let is_param = |s: &str| s.starts_with('{') && s.ends_with('}');
        let Some(at) = segments
            .iter()
            .enumerate()
            .filter(|(_, s)| is_param(s))
            .nth(param)
            .map(|(n, _)| n)
        else {
            return false;
        };
        let prefix = &segments[..=at];
        self.by_method
            .iter()
            .flat_map(|(_, table)| &table.templates)
            .any(|other| {
                let other: Vec<&str> = trim_trailing_slash(other).split('/').collect();
                other.len() > prefix.len()
                    && prefix
                        .iter()
                        .zip(&other)
                        .all(|(a, b)| a == b || (is_param(a) && is_param(b)))
            })
    }
}

/// The segment positions of the whole-segment parameters of `template` named in `spanning`.
fn span_positions(template: &str, spanning: &[String]) -> Vec<usize> {
    if spanning.is_empty() {
        return Vec::new();
    }
    trim_trailing_slash(template)
        .split('/')
        .enumerate()
        .filter(|(_, segment)| {
            segment
                .strip_prefix('{')
                .and_then(|s| s.strip_suffix('}'))
                .is_some_and(|name| spanning.iter().any(|s| s == name))
        })
        .map(|(n, _)| n)
        .collect()
}

/// Whether the normalized template `routed` is more concrete than `other`, which a path fits
/// too: at each segment the same, or more concrete (a literal over a parameter with literal
/// text beside it, either over a bare parameter), and more concrete at one at least
/// (`/accounts/relationships` over `/accounts/{p2}`). Neither dominates where each is more
/// concrete somewhere (`/sites/{p1}/zones/{p3}` and `/sites/{p1}/{p2}/count`).
pub(crate) fn dominates(routed: &str, other: &str) -> bool {
    if slashes(routed) != slashes(other) {
        return false;
    }
    let concreteness = |segment: &str| match segment.find('{') {
        None => 2,
        Some(0) if segment.ends_with('}') => 0,
        Some(_) => 1,
    };
    let mut more = false;
    for (r, o) in routed.split('/').zip(other.split('/')) {
        if r == o {
            continue;
        }
        match concreteness(r).cmp(&concreteness(o)) {
            std::cmp::Ordering::Greater => more = true,
            _ => return false,
        }
    }
    more
}

/// How many `/` a template or a path holds.
fn slashes(text: &str) -> usize {
    text.bytes().filter(|b| *b == b'/').count()
}

/// The operation among `slots` for `method`: a compound slot whose separators are in the path
/// first, then the plain one.
fn found<'r, 'p>(
    slots: &'r [Slot],
    method: &str,
    path: &'p str,
    values: Vec<&'p str>,
) -> Option<Routed<'r, 'p>> {
    let compound = slots
        .iter()
        .filter(|s| s.method == method && s.compound)
        .find_map(|s| Some(Routed::Found(s.index, split_compound(&s.template, path)?)));
    compound.or_else(|| {
        slots
            .iter()
            .find(|s| s.method == method && !s.compound)
            .map(|slot| Routed::Found(slot.index, values))
    })
}

impl Table {
    /// A template not seen before, as a new entry: in matchit, or segment by segment where
    /// matchit refuses it; by depth; by its normalized text. Its index.
    fn add_template(&mut self, normalized: String) -> usize {
        let entry = self.entries.len();
        // A parameter with literal text beside it (`{a}.vtex.com.br`) is also matched segment
        // by segment: matchit does not go back once it took such a segment, so
        // `/x.vtex.com.br/api/other` misses `/{a}.{b}.com.br/api/other` beside it.
        let partial = normalized
            .split('/')
            .any(|s| s.contains('{') && !(s.starts_with('{') && s.ends_with('}')));
        let refused = self
            .matcher
            .insert(matchit_form(&normalized), entry)
            .is_err();
        if refused || partial {
            self.fallback.push(Fallback::new(&normalized, entry));
        }
        let depth = slashes(&normalized);
        if self.by_depth.len() <= depth {
            self.by_depth.resize_with(depth + 1, Vec::new);
        }
        self.by_depth[depth].push(entry);
        self.index.insert(normalized.clone(), entry);
        self.templates.push(normalized);
        self.entries.push(Vec::new());
        entry
    }

    fn insert(
        &mut self,
        method: &str,
        template: &str,
        index: usize,
        spans: &[usize],
        describe: &impl Fn(usize) -> String,
    ) -> Result<(), RouteError> {
        let normalized = normalize_template(template);
        let entry = match self.index.get(&normalized) {
            Some(entry) => *entry,
            None => self.add_template(normalized),
        };
        if !spans.is_empty() && !self.spanning.iter().any(|f| f.entry == entry) {
            self.spanning
                .push(Fallback::spanning(&self.templates[entry], spans, entry));
        }
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
                first_index: first.index,
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

    /// The slots of the most concrete template matching `path`, with its parameter values.
    fn lookup<'p>(&self, path: &'p str) -> Option<(&[Slot], Vec<&'p str>)> {
        let matched = self.matcher.at(path).ok();
        if self.fallback.is_empty() && (matched.is_some() || self.spanning.is_empty()) {
            let matched = matched?;
            let values = matched.params.iter().map(|(_, v)| v).collect();
            return Some((&self.entries[*matched.value], values));
        }
        let mut best: Option<(Specificity, usize, Vec<&'p str>)> = matched.map(|m| {
            let entry = *m.value;
            let rank = Specificity::of(&self.templates[entry]);
            (rank, entry, m.params.iter().map(|(_, v)| v).collect())
        });
        best = most_concrete(&self.fallback, path, best);
        if best.is_none() {
            best = most_concrete(&self.spanning, path, None);
        }
        best.map(|(_, entry, values)| (self.entries[entry].as_slice(), values))
    }
}

/// The most concrete of `best` and the `candidates` that match `path`.
fn most_concrete<'p>(
    candidates: &[Fallback],
    path: &'p str,
    mut best: Option<(Specificity, usize, Vec<&'p str>)>,
) -> Option<(Specificity, usize, Vec<&'p str>)> {
    for candidate in candidates {
        let Some(values) = candidate.matches(path) else {
            continue;
        };
        if best
            .as_ref()
            .is_none_or(|(rank, ..)| candidate.rank > *rank)
        {
            best = Some((candidate.rank.clone(), candidate.entry, values));
        }
    }
    best
}

/// matchit reads `}}` as an escaped brace; in a normalized template every `{` opens a `{pN}`
/// parameter, so any other `}` is literal text and is escaped.
fn matchit_form(normalized: &str) -> String {
    let mut out = String::with_capacity(normalized.len());
    let mut in_param = false;
    for c in normalized.chars() {
        match c {
            '{' => in_param = true,
            '}' if in_param => in_param = false,
            '}' => out.push('}'),
            _ => {}
        }
        out.push(c);
    }
    out
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
            // Two parameters with nothing between them (`{id}{mediaTypeExtension}`): the only
            // ones in real specs are a name and its file extension, split at the last dot.
            let adjacent = literal.is_empty() && rest.starts_with('{');
            // Before the segment's last parameter, the separator's last occurrence: `{lat}.{format}`
            // on `71.441.json` is `71.441` and `json`.
            let after = &rest[literal.len()..];
            let last = after.matches('{').count() == 1;
            let suffix = after.rsplit_once('}').map_or("", |(_, s)| s);
            let end = match (literal.is_empty(), adjacent) {
                (true, true) => value.rfind('.').unwrap_or(value.len()),
                (true, false) => value.len(),
                (false, _) if last => value.strip_suffix(suffix)?.rfind(literal)?,
                (false, _) => value.find(literal)?,
            };
            values.push(&value[..end]);
            value = &value[end..];
        }
    }
    Some(values)
}

/// A key a template fixes after its path: `/a?type=list` or AWS's `/#X-Amz-Target=Svc.Op`.
/// Several operations may share the path and be told apart only by these keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteKey {
    pub name: String,
    /// `None` where the template leaves the value open (`?lat={lat}`, `?list`).
    pub value: Option<String>,
}

/// The template's path (what is routed) and the keys of its `?` or `#` part, if any.
pub(crate) fn split_route(template: &str) -> (&str, Vec<RouteKey>) {
    let Some(at) = template.find(['?', '#']) else {
        return (template, Vec::new());
    };
    let keys = template[at + 1..]
        .split(['&', '?', '#'])
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) => RouteKey {
                name: name.to_string(),
                value: (!value.contains('{')).then(|| value.to_string()),
            },
            None => RouteKey {
                name: pair.to_string(),
                value: None,
            },
        })
        .collect();
    let path = &template[..at];
    (if path.is_empty() { "/" } else { path }, keys)
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
            r.insert(m, t, i, &[], |i| i.to_string()).unwrap();
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
    fn a_method_the_concrete_path_lacks_falls_back_to_the_template_that_declares_it() {
        let r = router(&[("GET", "/services/jira"), ("PUT", "/services/{slug}")]);
        assert!(matches!(r.route("PUT", "/services/jira"), Routed::Found(1, v) if v == ["jira"]));
        assert!(matches!(
            r.route("GET", "/services/jira"),
            Routed::Found(0, _)
        ));
        // The near twin: no template declares DELETE, so it is still not allowed.
        assert!(
            matches!(r.route("DELETE", "/services/jira"), Routed::MethodNotAllowed(m) if m == ["GET"])
        );
    }

    #[test]
    fn templates_matchit_refuses_are_routed_by_the_more_concrete_one() {
        let r = router(&[
            ("GET", "/v1/{name}"),
            ("POST", "/v1/{name}:cancel"),
            ("GET", "/v1/{name}:wait"),
            ("GET", "/search/{q}"),
            ("GET", "/search/{q}.atom"),
            ("GET", "/{intermediatePath}/{authorizableId}.ks.html"),
            ("GET", "/{intermediatePath}/{authorizableId}"),
            ("GET", "/calls/getPstnCalls(fromDateTime={fromDateTime})"),
            ("GET", "/calls/{id}"),
            ("GET", "/calls/getDirectRoutingCalls(from={from},to={to})"),
        ]);
        assert!(matches!(r.route("GET", "/v1/ops"), Routed::Found(0, v) if v == ["ops"]));
        assert!(matches!(r.route("POST", "/v1/ops:cancel"), Routed::Found(1, v) if v == ["ops"]));
        assert!(matches!(r.route("GET", "/v1/ops:wait"), Routed::Found(2, v) if v == ["ops"]));
        assert!(matches!(
            r.route("GET", "/search/cats"),
            Routed::Found(3, _)
        ));
        assert!(
            matches!(r.route("GET", "/search/cats.atom"), Routed::Found(4, v) if v == ["cats"])
        );
        assert!(matches!(r.route("GET", "/a/b.ks.html"), Routed::Found(5, v) if v == ["a", "b"]));
        assert!(matches!(r.route("GET", "/a/b"), Routed::Found(6, v) if v == ["a", "b"]));
        assert!(matches!(
            r.route("GET", "/calls/getPstnCalls(fromDateTime=2026)"),
            Routed::Found(7, v) if v == ["2026"]
        ));
        assert!(matches!(r.route("GET", "/calls/7"), Routed::Found(8, _)));
        assert!(matches!(
            r.route("GET", "/calls/getDirectRoutingCalls(from=1,to=2)"),
            Routed::Found(9, v) if v == ["1", "2"]
        ));
        assert!(
            matches!(r.route("PUT", "/v1/ops:cancel"), Routed::MethodNotAllowed(m) if m == ["POST"])
        );
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
    fn a_multi_segment_parameter_routes_values_holding_slashes() {
        let mut r = Router::default();
        let branch = ["branch".to_string()];
        let path = ["path".to_string()];
        for (i, (m, t, spans)) in [
            ("GET", "/r/{o}/branches/{branch}", &branch[..]),
            ("GET", "/r/{o}/branches/{branch}/protection", &branch[..]),
            ("PUT", "/r/{o}/contents/{path}", &path[..]),
            ("GET", "/r/{o}/labels/{name}", &[][..]),
        ]
        .into_iter()
        .enumerate()
        {
            r.insert(m, t, i, spans, |i| i.to_string()).unwrap();
        }
        assert!(
            matches!(r.route("GET", "/r/o/branches/main"), Routed::Found(0, v) if v == ["o", "main"])
        );
        assert!(
            matches!(r.route("GET", "/r/o/branches/feat/x"), Routed::Found(0, v) if v == ["o", "feat/x"])
        );
        assert!(matches!(
            r.route("GET", "/r/o/branches/feat/x/protection"),
            Routed::Found(1, v) if v == ["o", "feat/x"]
        ));
        assert!(matches!(
            r.route("PUT", "/r/o/contents/docs/README.md"),
            Routed::Found(2, v) if v == ["o", "docs/README.md"]
        ));
        assert!(
            matches!(r.route("GET", "/r/o/contents/docs/README.md"), Routed::MethodNotAllowed(m) if m == ["PUT"])
        );
        // The near twin: a parameter the spec does not let span is still a single segment,
        // and the router says which template the path would fit.
        assert!(matches!(
            r.route("GET", "/r/o/labels/a/b"),
            Routed::NotFound
        ));
        assert_eq!(
            r.fits_with_slash("GET", "/r/o/labels/a/b"),
            Some((3, 1, "a/b"))
        );
        assert_eq!(r.fits_with_slash("GET", "/x/o/labels/a/b"), None);
        // Issue 50: where the spec goes on past the parameter (`/r/{o}/tags/{t}/commits`), a
        // path with a segment after it names an endpoint the spec lacks: no advice to escape.
        let with_more = router(&[
            ("GET", "/r/{o}/tags/{t}"),
            ("POST", "/r/{o}/tags/{t}/commits"),
            ("GET", "/r/{o}/labels/{l}"),
        ]);
        assert_eq!(with_more.fits_with_slash("GET", "/r/o/tags/v1/stop"), None);
        assert_eq!(
            with_more.fits_with_slash("GET", "/r/o/labels/a/b"),
            Some((2, 1, "a/b"))
        );
        assert_eq!(r.matching("GET", "/r/o/branches/feat/x", 0).len(), 1);
    }

    /// Issue 66: a template the routed one is more concrete than is no candidate for a request
    /// the routed operation refuses; where each is more concrete somewhere, both are.
    #[test]
    fn a_concrete_template_dominates_its_templated_sibling() {
        let dominance = [
            (
                "/api/v1/accounts/relationships",
                "/api/v1/accounts/{p4}",
                true,
            ),
            (
                "/api/v1/accounts/{p4}",
                "/api/v1/accounts/relationships",
                false,
            ),
            ("/search/{p2}.atom", "/search/{p2}", true),
            ("/user/packages", "/{p1}/{p2}", true),
            ("/sites/{p1}/zones/{p3}", "/sites/{p1}/{p2}/count", false),
            ("/sites/{p1}/{p2}/count", "/sites/{p1}/zones/{p3}", false),
            ("/a/{p2}", "/a/{p2}", false),
            ("/a/b/c", "/a/{p2}", false),
        ];
        let wrong: Vec<_> = dominance
            .iter()
            .filter(|(r, o, want)| dominates(r, o) != *want)
            .collect();
        assert!(wrong.is_empty(), "{wrong:?}");
        let r = router(&[
            ("GET", "/api/v1/accounts/relationships"),
            ("GET", "/api/v1/accounts/{id}"),
            ("GET", "/sites/{site}/zones/{zone}"),
            ("GET", "/sites/{site}/{kind}/count"),
        ]);
        let indices = |path, routed| -> Vec<usize> {
            r.matching("GET", path, routed)
                .iter()
                .map(|m| m.0)
                .collect()
        };
        assert_eq!(indices("/api/v1/accounts/relationships", 0), [0]);
        assert_eq!(indices("/api/v1/accounts/7", 1), [1]);
        assert_eq!(indices("/sites/s/zones/count", 2), [2, 3]);
    }

    #[test]
    fn duplicates_are_refused() {
        let mut r = router(&[("GET", "/a/{id}")]);
        let e = r
            .insert("GET", "/a/{other}", 1, &[], |i| format!("op{i}"))
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
        assert_eq!(normalize_template("/r/f(a={a},b={b})"), "/r/f(a={p2})");
        assert_eq!(
            split_compound("/c/{base}...{head}/d/{x}", "/c/main...dev/d/7").unwrap(),
            ["main", "dev", "7"]
        );
        assert_eq!(split_compound("/c/{base}...{head}", "/c/main"), None);
        assert_eq!(
            split_compound("/p/{id}{ext}", "/p/v1.2.json").unwrap(),
            ["v1.2", ".json"]
        );
        assert_eq!(split_compound("/p/{id}{ext}", "/p/x").unwrap(), ["x", ""]);
        let mut router = Router::default();
        for (i, t) in [
            "/{a}.vtex.com.br/api/orders",
            "/{a}.{env}.com.br/api/fulfil",
        ]
        .iter()
        .enumerate()
        {
            router.insert("POST", t, i, &[], |_| String::new()).unwrap();
        }
        assert!(matches!(
            router.route("POST", "/x.vtex.com.br/api/fulfil"),
            Routed::Found(1, _)
        ));
        assert_eq!(
            split_compound("/m/{lat}.{format}", "/m/71.441.json").unwrap(),
            ["71.441", "json"]
        );
        assert_eq!(
            split_compound("/m/{a}.{b}.html", "/m/1.5.x.html").unwrap(),
            ["1.5", "x"]
        );
        assert_eq!(template_params("/a/{id}/b/{name}.json"), ["id", "name"]);
        let (path, keys) = split_route("/#X-Amz-Target=Svc.Op&Version={v}");
        assert_eq!(path, "/");
        assert_eq!(keys[0].value.as_deref(), Some("Svc.Op"));
        assert_eq!((keys[1].name.as_str(), &keys[1].value), ("Version", &None));
        assert_eq!(split_route("/a").1, []);
    }
}
