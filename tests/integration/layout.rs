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

#[test]
fn no_function_in_the_proxy_is_over_60_lines() {
    let mut files = files_under("src/proxy");
    files.push("src/proxy.rs".into());
    let mut long = Vec::new();
    let mut seen = 0;
    for file in &files {
        for (name, lines) in functions(&source(file)) {
            seen += 1;
            if lines > 60 {
                long.push(format!("{file}: {name} has {lines} lines"));
            }
        }
    }
    assert!(
        seen > 40,
        "the scan found only {seen} functions: it is not reading the proxy"
    );
    assert!(long.is_empty(), "{long:#?}");
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
