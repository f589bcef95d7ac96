//! Which argument fills which path parameter. A path parameter's name never goes on the wire,
//! so a tool's `project_id` filling `{id}` is no drift; comparing names made it one (90 false
//! alarms over seven real catalogs). An argument is bound where the map binds it, where its name
//! is the parameter's, or where the tool's own arguments show it: the best shared name tokens
//! (`project_id` for `{id}`, `subscription` for `{subscription_exposed_id}`), where the word of
//! the collection before a parameter counts as one of its tokens (`project_id`, not `issue_id`,
//! for the `{id}` of `/projects/{id}/...`), the only one left, or the required arguments in the
//! template's order. Each binding says how it was made.

use serde::Serialize;

/// One argument filling one path parameter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Binding {
    pub argument: String,
    pub parameter: String,
    /// `map`, `name`, `tokens`, `only_one_left` or `order`.
    pub by: &'static str,
}

/// An argument no other place took: its name and whether the tool requires it.
pub struct Loose<'a> {
    pub name: &'a str,
    pub required: bool,
}

/// Bind `params` (the template's, in order, none filled yet) to `loose` arguments; `mapped` is
/// the map's `bind` (argument to parameter); `collections` the collection word before each
/// parameter that has one ([`collections`]). Returns the bindings; unbound parameters stay
/// unfilled (the caller reports them missing).
pub fn bind(
    params: &[&str],
    collections: &[(String, String)],
    loose: &[Loose],
    mapped: &std::collections::BTreeMap<String, String>,
) -> Vec<Binding> {
    let mut out: Vec<Binding> = Vec::new();
    let open = |out: &[Binding], p: &str| !out.iter().any(|b| b.parameter == p);
    let free = |out: &[Binding], a: &str| !out.iter().any(|b| b.argument == a);
    let add = |out: &mut Vec<Binding>, a: &str, p: &str, by| {
        out.push(Binding {
            argument: a.to_string(),
            parameter: p.to_string(),
            by,
        })
    };
    for (a, p) in mapped {
        if params.contains(&p.as_str()) && loose.iter().any(|l| l.name == a) {
            add(&mut out, a, p, "map");
        }
    }
    for p in params {
        if open(&out, p) && free(&out, p) && loose.iter().any(|l| l.name == *p) {
            add(&mut out, p, p, "name");
        }
    }
    // Shared tokens, best pair first; a tie for a parameter is left to the rules below.
    while let Some((p, a)) = best_by_tokens(params, collections, loose, &out) {
        add(&mut out, a, p, "tokens");
    }
    let left_params: Vec<&str> = params.iter().copied().filter(|p| open(&out, p)).collect();
    let left_args: Vec<&Loose> = loose.iter().filter(|l| free(&out, l.name)).collect();
    if let ([p], [a]) = (left_params.as_slice(), left_args.as_slice()) {
        add(&mut out, a.name, p, "only_one_left");
        return out;
    }
    let required: Vec<&&Loose> = left_args.iter().filter(|l| l.required).collect();
    if !left_params.is_empty() && required.len() == left_params.len() {
        for (p, a) in left_params.iter().zip(required) {
            add(&mut out, a.name, p, "order");
        }
    }
    out
}

/// The open parameter and free argument that share the most name tokens, unless another
/// argument shares as many with that parameter.
fn best_by_tokens<'a>(
    params: &[&'a str],
    collections: &[(String, String)],
    loose: &[Loose<'a>],
    out: &[Binding],
) -> Option<(&'a str, &'a str)> {
    let open = |p: &str| !out.iter().any(|b| b.parameter == p);
    let free = |a: &str| !out.iter().any(|b| b.argument == a);
    let mut best: Option<(usize, &str, &str)> = None;
    let mut tied = false;
    for p in params.iter().filter(|p| open(p)) {
        for l in loose.iter().filter(|l| free(l.name)) {
            let collection = (collections.iter()).find_map(|(q, c)| (q == p).then_some(c));
            let score = shared_tokens(l.name, p, collection.map(String::as_str));
            match best {
                _ if score == 0 => {}
                Some((b, bp, _)) if score == b && bp == *p => tied = true,
                Some((b, ..)) if score <= b => {}
                _ => {
                    best = Some((score, p, l.name));
                    tied = false;
                }
            }
        }
    }
    best.filter(|_| !tied).map(|(_, p, a)| (p, a))
}

/// Name tokens: split on `_`, `-`, `.` and lower-to-upper case changes, lowercased.
pub fn tokens(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            prev_lower = false;
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            continue;
        }
        if c.is_uppercase() && prev_lower && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The tokens argument `a` shares with parameter `b`, the parameter's collection word among
/// them.
fn shared_tokens(a: &str, b: &str, collection: Option<&str>) -> usize {
    let mut b = tokens(b);
    b.extend(collection.map(String::from));
    b.dedup();
    tokens(a).iter().filter(|t| b.contains(t)).count()
}

/// Each path parameter right after a literal segment, with that segment's word in the
/// singular (`{id}` of `/projects/{id}` is a `project`'s).
pub fn collections(template: &str) -> Vec<(String, String)> {
    let segments: Vec<&str> = template.split('/').collect();
    (segments.windows(2))
        .filter_map(|w| {
            let name = w[1].strip_prefix('{')?.strip_suffix('}')?;
            (!w[0].is_empty() && !w[0].contains('{'))
                .then(|| (name.to_string(), singular(&w[0].to_lowercase())))
        })
        .collect()
}

/// `projects` to `project`, `repositories` to `repository`; a word not in the plural as is.
fn singular(word: &str) -> String {
    match word.strip_suffix("ies") {
        Some(stem) => format!("{stem}y"),
        None if word.ends_with('s') && !word.ends_with("ss") => word[..word.len() - 1].into(),
        None => word.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(params: &[&str], args: &[(&str, bool)], mapped: &[(&str, &str)]) -> Vec<String> {
        let loose: Vec<Loose> = args
            .iter()
            .map(|(name, required)| Loose {
                name,
                required: *required,
            })
            .collect();
        let mapped = mapped
            .iter()
            .map(|(a, p)| (a.to_string(), p.to_string()))
            .collect();
        bind(params, &[], &loose, &mapped)
            .into_iter()
            .map(|b| format!("{}>{}:{}", b.argument, b.parameter, b.by))
            .collect()
    }

    #[test]
    fn names_then_tokens_then_the_only_one_left_then_order() {
        assert_eq!(
            run(
                &["id"],
                &[("project_id", true), ("source_branch", true)],
                &[]
            ),
            ["project_id>id:tokens"]
        );
        assert_eq!(
            run(&["subscription_exposed_id"], &[("subscription", true)], &[]),
            ["subscription>subscription_exposed_id:tokens"]
        );
        assert_eq!(
            run(
                &["owner", "repo"],
                &[("owner", true), ("repository", true)],
                &[]
            ),
            ["owner>owner:name", "repository>repo:only_one_left"]
        );
        assert_eq!(
            run(&["a", "b"], &[("x", true), ("y", true), ("z", false)], &[]),
            ["x>a:order", "y>b:order"]
        );
        assert_eq!(
            run(&["id"], &[("project_id", true)], &[("project_id", "id")]),
            ["project_id>id:map"]
        );
        assert_eq!(tokens("pageSize"), ["page", "size"]);
        assert_eq!(tokens("API-get-user"), ["api", "get", "user"]);
    }

    #[test]
    fn a_tie_is_not_guessed_from_tokens() {
        assert_eq!(
            run(
                &["id", "other"],
                &[("project_id", false), ("issue_id", false)],
                &[]
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_collection_before_a_bare_id_names_its_argument() {
        let collections = collections("/projects/{id}/repository/files/{file_path}");
        assert_eq!(
            collections,
            [
                ("id".to_string(), "project".to_string()),
                ("file_path".to_string(), "file".to_string())
            ]
        );
        let loose = [
            Loose {
                name: "issue_id",
                required: false,
            },
            Loose {
                name: "project_id",
                required: true,
            },
        ];
        let found = bind(&["id"], &collections, &loose, &Default::default());
        assert_eq!(found[0].argument, "project_id");
        assert_eq!(found[0].by, "tokens");
        assert_eq!(singular("repositories"), "repository");
        assert_eq!(singular("address"), "address");
    }
}
