//! The shape of the source that a reviewer would otherwise have to re-check by hand: the request
//! path stays in short functions, and the modules that once imported each other do not.

use std::path::Path;

/// Every `.rs` file under `rel` (a directory of `src/`), as paths relative to the root.
fn files_under(rel: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut dirs = vec![root.join(rel)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap();
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out
}

fn source(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `(name, lines)` of every `fn` in rustfmt-formatted `text`: from its signature to the `}`
/// at its own indentation.
fn functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let signature = trimmed
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ")
            .trim_start_matches("async ");
        let Some(rest) = signature.strip_prefix("fn ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{indent}}}");
        if let Some(end) = lines[i..].iter().position(|l| *l == close) {
            out.push((name, end + 1));
        }
    }
    out
}

/// A file's text without its `#[cfg(test)]` module (which may use anything) and comments.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let lines = text
        .lines()
        .map(|l| match l.trim_start().starts_with("//") {
            true => "",
            false => l,
        });
    lines.collect::<Vec<_>>().join("\n")
}

/// Functions the 60-line rule leaves alone: the demo's story, told step by step.
const STORIES: [(&str, &str); 2] = [
    ("src/cli/demo.rs", "story"),
    ("src/cli/demo/mcp_act.rs", "mcp_act"),
];

#[test]
fn no_function_in_the_source_is_over_60_lines() {
    let mut long = std::collections::BTreeMap::new();
    let mut seen = 0;
    // A `tests.rs` is a test module of its own.
    for file in files_under("src")
        .into_iter()
        .filter(|f| !f.ends_with("/tests.rs"))
    {
        for (name, lines) in functions(&code(&source(&file))) {
            seen += 1;
            if lines > 60 && !STORIES.contains(&(file.as_str(), name.as_str())) {
                long.insert((file.clone(), name), lines);
            }
        }
    }
    assert!(
        seen > 1000,
        "the scan found only {seen} functions: it is not reading the source"
    );
    let long: Vec<String> = (long.iter())
        .map(|((file, name), lines)| format!("{file}: {name} has {lines} lines"))
        .collect();
    assert!(long.is_empty(), "{} over 60 lines: {long:#?}", long.len());
}

/// A module path (`["proxy", "late"]`) for each file under `src/`.
fn modules() -> std::collections::BTreeMap<Vec<String>, String> {
    let mut out = std::collections::BTreeMap::new();
    for file in files_under("src") {
        let rel = file
            .strip_prefix("src/")
            .unwrap()
            .strip_suffix(".rs")
            .unwrap();
        let path: Vec<String> = match rel {
            "lib" | "main" => Vec::new(),
            _ => rel.split('/').map(String::from).collect(),
        };
        out.insert(path, file);
    }
    out
}

/// The paths a `use` tree names: `super::{a, b::{C, D}}` is `super::a`, `super::b::C`, ...
fn use_paths(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let mut depth = 0;
    let mut part = String::new();
    let mut parts = Vec::new();
    for c in tree.chars().filter(|c| !c.is_whitespace()) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut part));
                continue;
            }
            _ => {}
        }
        part.push(c);
    }
    parts.push(part);
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        match part
            .split_once("::{")
            .or_else(|| part.strip_prefix('{').map(|p| ("", p)))
        {
            Some((head, rest)) => {
                let inner = rest.strip_suffix('}').unwrap_or(rest);
                let joined = match (prefix.is_empty(), head.is_empty()) {
                    (true, _) => head.to_string(),
                    (false, true) => prefix.to_string(),
                    (false, false) => format!("{prefix}::{head}"),
                };
                use_paths(inner, &joined, out);
            }
            None => {
                let path = part.split(" as ").next().unwrap_or(&part).to_string();
                let path = path.split("as").next().unwrap_or(&path).to_string();
                out.push(match prefix.is_empty() {
                    true => path,
                    false => format!("{prefix}::{path}"),
                });
            }
        }
    }
}

/// Every path starting `crate::`, `super::` or `self::` in `code`: in `use` trees, and written
/// out in the code; and each child module named bare (`late::Late`).
fn paths_in(code: &str, children: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(end) = rest.find(';') {
            use_paths(&rest[..end], "", &mut out);
        }
    }
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    for token in code.split(|c: char| !word(c)) {
        let starts = ["crate::", "super::", "self::"];
        if starts.iter().any(|s| token.starts_with(s)) {
            out.push(token.trim_end_matches(':').to_string());
        } else if let Some((head, _)) = token.split_once("::")
            && children.contains(&head)
        {
            out.push(format!("self::{}", token.trim_end_matches(':')));
        }
    }
    out
}

/// The file a path leads to from module `from`: the deepest module file it names.
fn target(
    files: &std::collections::BTreeMap<Vec<String>, String>,
    from: &[String],
    path: &str,
) -> Option<Vec<String>> {
    let mut segments = path.split("::");
    let mut base: Vec<String> = match segments.next()? {
        "crate" => Vec::new(),
        "self" => from.to_vec(),
        "super" => from[..from.len().checked_sub(1)?].to_vec(),
        _ => return None,
    };
    let mut rest: Vec<&str> = segments.collect();
    while rest.first() == Some(&"super") {
        base.pop();
        rest.remove(0);
    }
    let floor = base.len();
    base.extend(rest.iter().map(|s| s.to_string()));
    (floor..=base.len())
        .rev()
        .map(|n| base[..n].to_vec())
        .find(|m| files.contains_key(m))
}

/// The import graph between files of `src/`: file A uses file B when A names an item of B. A
/// module may use its ancestors (they declare it, and hold what their children share); every
/// other arrow counts.
fn imports() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let files = modules();
    let mut graph = std::collections::BTreeMap::new();
    for (module, file) in &files {
        let children: Vec<&str> = (files.keys())
            .filter(|k| k.len() == module.len() + 1 && k.starts_with(module))
            .map(|k| k.last().unwrap().as_str())
            .collect();
        let mut uses = std::collections::BTreeSet::new();
        for path in paths_in(&code(&source(file)), &children) {
            let Some(to) = target(&files, module, &path) else {
                continue;
            };
            let ancestor = to.len() < module.len() && module.starts_with(&to);
            if to != *module && !ancestor {
                uses.insert(files[&to].clone());
            }
        }
        graph.insert(file.clone(), uses);
    }
    graph
}

/// The circles of `graph`: its strongly connected components of more than one file (Tarjan).
fn circles(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        index: std::collections::HashMap<&'g str, (usize, usize)>,
        stack: Vec<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) -> usize {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            let mut low = n;
            for w in &self.graph[v] {
                low = match self.index.get(w.as_str()) {
                    None => low.min(self.visit(w)),
                    Some(&(i, _)) if self.stack.contains(&w.as_str()) => low.min(i),
                    Some(_) => low,
                };
            }
            self.index.insert(v, (n, low));
            if low == n {
                let at = self.stack.iter().rposition(|x| *x == v).unwrap();
                let component: Vec<String> = self.stack.drain(at..).map(String::from).collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
            low
        }
    }
    let mut walk = Walk {
        graph,
        index: Default::default(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_files_of_the_source_import_each_other_in_a_circle() {
    let graph = imports();
    let arrows: usize = graph.values().map(|u| u.len()).sum();
    assert!(
        arrows > 300,
        "the scan found only {arrows} imports: it is not reading the source"
    );
    // The scan sees a circle where there is one: two files of this test's own making.
    let mut made = std::collections::BTreeMap::new();
    made.insert("a".to_string(), ["b".to_string()].into());
    made.insert("b".to_string(), ["a".to_string()].into());
    assert_eq!(circles(&made).len(), 1);
    let found = circles(&graph);
    assert!(found.is_empty(), "{} circles: {found:#?}", found.len());
}

#[test]
fn config_and_policy_admin_and_proxy_do_not_import_each_other() {
    let mut problems = Vec::new();
    for (file, forbidden) in [
        ("src/policy.rs", "crate::config"),
        ("src/admin.rs", "crate::proxy"),
        ("src/proxy.rs", "crate::admin"),
    ] {
        if source(file).contains(forbidden) {
            problems.push(format!("{file} uses {forbidden}"));
        }
    }
    for file in files_under("src/proxy") {
        if source(&file).contains("crate::admin") {
            problems.push(format!("{file} uses crate::admin"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
