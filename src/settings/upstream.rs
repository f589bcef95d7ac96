//! The upstream's URL, parsed once: scheme, authority and a path prefix prepended to every
//! request path, so the request path only joins them.

use http::Uri;
use http::uri::{PathAndQuery, Scheme};

#[derive(Debug, Clone)]
pub struct Upstream {
    pub scheme: Scheme,
    /// Host and port, never the URL's credentials: it is shown in logs, 502 bodies and
    /// `serve --check`, and sent as `Host`.
    pub authority: http::uri::Authority,
    /// The authority as the `Host` header the upstream gets (unless `proxy.preserve_host`),
    /// made once rather than per request. (An authority is always header text.)
    pub host: Option<http::HeaderValue>,
    pub prefix: String,
    /// The URL's `user:password@`, as the `Authorization: Basic` a request without one gets
    /// (what curl and other clients do with a URL's credentials); marked sensitive.
    pub basic: Option<http::HeaderValue>,
}

/// A URL's credentials taken out of it: what is left to show and to connect to, and the
/// `Authorization: Basic` they make.
pub struct Credentialed {
    pub uri: Uri,
    pub basic: Option<http::HeaderValue>,
}

impl Credentialed {
    /// `uri` without its `user:password@`, if it has one.
    pub fn split(uri: Uri) -> Credentialed {
        let Some((userinfo, host)) = uri.authority().and_then(|a| a.as_str().rsplit_once('@'))
        else {
            return Credentialed { uri, basic: None };
        };
        use base64::Engine;
        let decoded = percent_encoding::percent_decode_str(userinfo).decode_utf8_lossy();
        let token = base64::engine::general_purpose::STANDARD.encode(decoded.as_bytes());
        let basic = http::HeaderValue::from_str(&format!("Basic {token}"))
            .ok()
            .map(|mut v| {
                v.set_sensitive(true);
                v
            });
        let mut parts = uri.clone().into_parts();
        parts.authority = host.parse().ok();
        let uri = Uri::from_parts(parts).unwrap_or(uri);
        Credentialed { uri, basic }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UpstreamUrlError {
    #[error("`{0}` is not a URL: {1}")]
    NotUrl(String, http::uri::InvalidUri),
    #[error("`{0}` must start with http:// or https://")]
    Scheme(String),
    #[error("`{0}` has no host")]
    NoHost(String),
    #[error(
        "`{0}` has a query, and an upstream's query is never sent: the upstream is the API's \
         base URL, each request's target is the client's own; remove it (a key the API needs \
         comes with the client's requests, or for `driftwatch mcp` by --header)"
    )]
    Query(String),
}

/// `url` as it may be shown: a password and the query's values are masked, the fragment left
/// out (for a URL that does not even parse). A key may sit in either: `?api_key=…`.
pub fn shown(url: &str) -> String {
    let url = url.split_once('#').map_or(url, |(before, _)| before);
    let Some((before, query)) = url.split_once('?') else {
        return without_password(url);
    };
    let masked: Vec<String> = (query.split('&'))
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) => format!("{key}=****"),
            None => pair.to_string(),
        })
        .collect();
    format!("{}?{}", without_password(before), masked.join("&"))
}

/// `url` with the password of its `user:password@` masked.
fn without_password(url: &str) -> String {
    match url.split_once("://").and_then(|(scheme, rest)| {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (userinfo, _) = rest[..end].rsplit_once('@')?;
        Some((scheme, userinfo))
    }) {
        Some((scheme, userinfo)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            url.replacen(
                &format!("{scheme}://{userinfo}@"),
                &format!("{scheme}://{user}:****@"),
                1,
            )
        }
        None => url.to_string(),
    }
}

impl Upstream {
    /// Plain `http://` to a host past loopback: what a request carries crosses the network in
    /// clear text.
    pub fn plain_beyond_loopback(&self) -> bool {
        let host = self.authority.host().trim_matches(['[', ']']);
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        self.scheme != Scheme::HTTPS && !loopback
    }

    pub fn parse(url: &str) -> Result<Upstream, UpstreamUrlError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| UpstreamUrlError::NotUrl(shown(url), e))?;
        let Credentialed { uri, basic } = Credentialed::split(uri);
        let url = &shown(url);
        let scheme = match uri.scheme() {
            Some(s) if *s == Scheme::HTTP || *s == Scheme::HTTPS => s.clone(),
            _ => return Err(UpstreamUrlError::Scheme(url.into())),
        };
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| UpstreamUrlError::NoHost(url.into()))?;
        if uri.query().is_some() {
            return Err(UpstreamUrlError::Query(url.into()));
        }
        let prefix = uri.path().trim_end_matches('/').to_string();
        let host = http::HeaderValue::from_str(authority.as_str()).ok();
        Ok(Upstream {
            scheme,
            authority,
            host,
            prefix,
            basic,
        })
    }

    /// The request target sent upstream (origin-form: the API's connection is made to its
    /// authority), kept byte for byte behind the prefix. Without a prefix the request's own,
    /// already parsed, is reused: no text is made or parsed again.
    pub fn target(&self, path_and_query: Option<&PathAndQuery>) -> Result<Uri, http::Error> {
        let path_and_query = match (self.prefix.is_empty(), path_and_query) {
            (true, Some(p)) => p.clone(),
            (true, None) => PathAndQuery::from_static("/"),
            (false, p) => {
                let p = p.map_or("/", PathAndQuery::as_str);
                PathAndQuery::try_from(format!("{}{p}", self.prefix))?
            }
        };
        let mut parts = http::uri::Parts::default();
        parts.path_and_query = Some(path_and_query);
        Ok(Uri::from_parts(parts)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(upstream: &str, request: &str) -> String {
        let request: Uri = request.parse().unwrap();
        let upstream = Upstream::parse(upstream).unwrap();
        upstream
            .target(request.path_and_query())
            .unwrap()
            .to_string()
    }

    #[test]
    fn the_request_target_goes_up_byte_for_byte_in_origin_form_behind_the_prefix() {
        let odd = "/a%2Fb/./c?x=1&x=%20&y";
        assert_eq!(target("http://api.test:8080", odd), odd);
        assert_eq!(target("https://api.test/base/", odd), format!("/base{odd}"));
        assert_eq!(target("http://api.test", "/"), "/");
        assert_eq!(target("http://api.test/v2", "http://client.test"), "/v2/");
        assert!(matches!(
            Upstream::parse("ftp://api.test"),
            Err(UpstreamUrlError::Scheme(_))
        ));
    }

    #[test]
    fn a_urls_credentials_are_taken_out_and_masked_where_shown() {
        let up = Upstream::parse("https://u%40x:p%3Aw@api.test:8443/v1").unwrap();
        assert_eq!(up.authority.as_str(), "api.test:8443");
        assert_eq!(up.host.unwrap(), "api.test:8443");
        let basic = up.basic.unwrap();
        assert!(basic.is_sensitive());
        // base64 of "u@x:p:w"
        assert_eq!(basic, "Basic dUB4OnA6dw==");
        assert!(Upstream::parse("http://api.test").unwrap().basic.is_none());
        assert_eq!(shown("ftp://u:secret@h/x"), "ftp://u:****@h/x");
        assert_eq!(
            shown("http://h/a@b"),
            "http://h/a@b",
            "an @ in the path is no userinfo"
        );
        let e = Upstream::parse("ftp://u:secret@h").unwrap_err().to_string();
        assert!(!e.contains("secret"), "{e}");
    }

    #[test]
    fn a_query_is_refused_on_an_upstream_and_its_values_masked_wherever_a_url_is_shown() {
        // The query was dropped without a word: a key in it never reached the API.
        let e = Upstream::parse("https://u:pw@api.test/v1?api_key=s3cret&v=2")
            .unwrap_err()
            .to_string();
        assert!(e.contains("has a query"), "{e}");
        assert!(
            e.contains("https://u:****@api.test/v1?api_key=****&v=****"),
            "{e}"
        );
        assert!(!e.contains("s3cret") && !e.contains("pw@"), "{e}");
        assert!(Upstream::parse("https://api.test/v1?").is_err());
        // A spec URL's query is sent (its fetch needs it) and masked where shown.
        assert_eq!(
            shown("ht tp://h/x?token=abc#frag"),
            "ht tp://h/x?token=****"
        );
        assert_eq!(shown("https://h/x?flag&t=a=b"), "https://h/x?flag&t=****");
        assert_eq!(shown("https://h/x#k=v"), "https://h/x");
    }
}
