//! A path template's shape: the one spelling of `/items/{id}` and `/items/{itemId}` that the
//! router matches by, and that tells two templates apart or the same. Its own file because
//! both the contract (routing) and the spec (merging several documents) compare templates, and
//! neither may import the other.

/// The path without its trailing slashes (`/` stays `/`).
pub(crate) fn trim_trailing_slash(path: &str) -> &str {
    if path.len() > 1 {
        path.trim_end_matches('/')
    } else {
        path
    }
}

/// `/a/{id}/b/{name}.json/` to `/a/{p2}/b/{p4}.json`. matchit allows one parameter per
/// segment, so a compound segment (`{base}...{head}`, `f(a={a},b={b})`) becomes one parameter
/// with the segment's outer literal text (`f(a={p2})`), split afterwards by the router.
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
            // Several parameters in one segment: one parameter for matchit, keeping the literal
            // text around them so that OData's `f(a={a},b={b})` and `/{id}` stay apart.
            _ => {
                let open = segment.find('{').unwrap_or(0);
                let close = segment.rfind('}').map_or(segment.len(), |c| c + 1);
                out.push_str(&segment[..open]);
                out.push_str(&format!("{{p{n}}}"));
                out.push_str(&segment[close..]);
            }
        }
    }
    if out.is_empty() { "/".into() } else { out }
}
