//! What the audit sees of an HTTP request: borrowed views only, so the proxy can audit a
//! request without copying it and the offline checker can build one from a recorded line.

/// Header lookup by lowercase name; implemented for the proxy's header map and for recorded
/// header lists, so the audit core needs no HTTP crate.
pub trait Headers {
    /// The first value of header `name` (given in lowercase), if present and valid text.
    fn get(&self, name: &str) -> Option<&str>;
}

impl Headers for [(String, String)] {
    fn get(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl Headers for Vec<(String, String)> {
    fn get(&self, name: &str) -> Option<&str> {
        Headers::get(self.as_slice(), name)
    }
}

/// One HTTP request, as received.
#[derive(Clone, Copy)]
pub struct RequestView<'a> {
    pub method: &'a str,
    /// The raw path, still percent-encoded, without the query string.
    pub path: &'a str,
    /// The raw query string without `?`, still encoded.
    pub query: Option<&'a str>,
    pub headers: &'a dyn Headers,
    /// The body bytes, if any were sent (and buffered).
    pub body: Option<&'a [u8]>,
}

impl<'a> RequestView<'a> {
    /// Split a request target (`/a/b?x=1`, or an absolute URL) into path and query.
    pub fn new(
        method: &'a str,
        target: &'a str,
        headers: &'a dyn Headers,
        body: Option<&'a [u8]>,
    ) -> Self {
        let target = strip_origin(target);
        let target = target.split_once('#').map_or(target, |(t, _)| t);
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (target, None),
        };
        RequestView {
            method,
            path: if path.is_empty() { "/" } else { path },
            query,
            headers,
            body,
        }
    }

    pub fn content_type(&self) -> Option<&'a str> {
        self.headers.get("content-type")
    }
}

/// `https://api.example.com/a?x` to `/a?x`.
fn strip_origin(target: &str) -> &str {
    match target.split_once("://") {
        Some((scheme, rest)) if !scheme.contains('/') => rest.find('/').map_or("/", |i| &rest[i..]),
        _ => target,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_into_path_and_query() {
        let h: Vec<(String, String)> = vec![("Content-Type".into(), "application/json".into())];
        let r = RequestView::new("GET", "https://x.test/api/a?b=1&c", &h, None);
        assert_eq!((r.path, r.query), ("/api/a", Some("b=1&c")));
        let r = RequestView::new("GET", "/api/a", &h, None);
        assert_eq!((r.path, r.query), ("/api/a", None));
        let r = RequestView::new("GET", "https://x.test", &h, None);
        assert_eq!(r.path, "/");
        assert_eq!(r.content_type(), Some("application/json"));
    }
}
