//! What a name from traffic must be to be proposed: a query parameter's name, a request path,
//! a method, a response field's name. A client chooses all of them; one that no API could have
//! (whitespace, a line break, a quote, a control character, past the bound) is not proposed,
//! only counted, so that what an operator reviews holds only names an API could have. Quoting
//! is `yaml.rs`'s job: a fit name is quoted there all the same.

use crate::spec::METHODS;

/// Bytes a parameter or field name may have.
pub const MAX_NAME: usize = 128;
/// Bytes a request path may have.
pub const MAX_PATH: usize = 1024;

/// A query parameter's name: RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`) and the
/// ones real APIs put in names: `[` `]` (`filter[status]`, `ids[]`), `:` (`sort:desc`), `$`
/// (OData's `$top`), `@`. No whitespace, quote, `#`, `%` or control character; 1 to 128 bytes.
pub fn parameter(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~[]:$@".contains(&b))
}

/// A request path: `/`, then segments of RFC 3986 `pchar`s (unreserved, sub-delims, `:`, `@`,
/// and `%` with two hex digits), none empty but the last (`/`, `/a/`), none `.` or `..`; at
/// most 1,024 bytes. A segment the sidecar wrote as `*` (a value) is one.
pub fn path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    path.len() <= MAX_PATH
        && (segments.iter().enumerate()).all(|(i, s)| match *s {
            "" => i == last,
            "." | ".." => false,
            s => segment(s),
        })
}

fn segment(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let fit = match b[i] {
            b'%' => {
                let hex = |j: usize| b.get(j).is_some_and(u8::is_ascii_hexdigit);
                i += 2;
                hex(i - 1) && hex(i)
            }
            c => c.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&c),
        };
        if !fit {
            return false;
        }
        i += 1;
    }
    true
}

/// One of the eight methods an OpenAPI path item holds, in lowercase.
pub fn method(method: &str) -> Option<&'static str> {
    METHODS
        .iter()
        .find(|m| m.eq_ignore_ascii_case(method))
        .copied()
}

/// A top-level response field's name from its JSON pointer token (`~1` is `/`, `~0` is `~`):
/// 1 to 128 bytes, no control character or line break.
pub fn field(token: &str) -> Option<String> {
    let mut name = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        match (c, c == '~') {
            (_, true) => name.push(match chars.next()? {
                '0' => '~',
                '1' => '/',
                _ => return None,
            }),
            (c, false) if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                return None;
            }
            (c, false) => name.push(c),
        }
    }
    (1..=MAX_NAME).contains(&name.len()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_apis_use_are_fit_and_what_a_client_made_up_to_write_yaml_is_not() {
        let fit = [
            "page",
            "per_page",
            "filter[status]",
            "ids[]",
            "$top",
            "api-version",
            "a.b~c",
            "sort:desc",
            "@type",
        ];
        let unfit = [
            "",
            "a b",
            "a\rb",
            "a\u{85}b",
            "a\u{2028}b",
            "a\u{2029}b",
            "a\"b",
            "a'b",
            "a#b",
            "a: b",
            "a%0Db",
            "é",
            "a\tb",
        ];
        let long = "p".repeat(MAX_NAME + 1);
        let wrong: Vec<&str> = (fit.iter().filter(|n| !parameter(n)))
            .chain(
                unfit
                    .iter()
                    .chain([&long.as_str()])
                    .filter(|n| parameter(n)),
            )
            .copied()
            .collect();
        assert!(wrong.is_empty(), "judged wrongly: {wrong:?}");
    }

    #[test]
    fn a_path_is_segments_of_pchars_and_a_field_a_pointer_token_without_controls() {
        let fit = [
            "/",
            "/a/",
            "/v2/tasks/*/logs",
            "/a/%2F/b:c@d",
            "/it's(1),x=y;z",
        ];
        let unfit = [
            "",
            "a",
            "//a",
            "/a/../b",
            "/a/./b",
            "/a b",
            "/a\rb",
            "/{id}",
            "/a%zz",
            "/a%2",
            "/a#b",
            "/\"",
            "/a\u{2028}",
        ];
        let wrong: Vec<&str> = (fit.iter().filter(|p| !path(p)))
            .chain(unfit.iter().filter(|p| path(p)))
            .copied()
            .collect();
        assert!(wrong.is_empty(), "judged wrongly: {wrong:?}");
        assert!(path(&format!("/{}", "a".repeat(MAX_PATH - 1))));
        assert!(!path(&format!("/{}", "a".repeat(MAX_PATH))));
        assert_eq!(method("GET"), Some("get"));
        assert_eq!(method("PROPFIND"), None);
        assert_eq!(field("a~1b~0c").as_deref(), Some("a/b~c"));
        assert_eq!(field("it's \"x\"").as_deref(), Some("it's \"x\""));
        for token in ["", "a~2", "a~", "a\rb", "a\u{85}b", "a\u{2028}b"] {
            assert_eq!(field(token), None, "{token:?}");
        }
    }
}
