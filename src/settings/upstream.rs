//! The upstream's URL, parsed once: scheme, authority and a path prefix prepended to every
//! request path, so the request path only joins them.

use http::Uri;

#[derive(Debug, Clone)]
pub struct Upstream {
    pub scheme: String,
    pub authority: http::uri::Authority,
    pub prefix: String,
}

#[derive(Debug, thiserror::Error)]
pub enum UpstreamUrlError {
    #[error("`{0}` is not a URL: {1}")]
    NotUrl(String, http::uri::InvalidUri),
    #[error("`{0}` must start with http:// or https://")]
    Scheme(String),
    #[error("`{0}` has no host")]
    NoHost(String),
}

impl Upstream {
    pub fn parse(url: &str) -> Result<Upstream, UpstreamUrlError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| UpstreamUrlError::NotUrl(url.into(), e))?;
        let scheme = uri.scheme_str().unwrap_or_default().to_string();
        if scheme != "http" && scheme != "https" {
            return Err(UpstreamUrlError::Scheme(url.into()));
        }
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| UpstreamUrlError::NoHost(url.into()))?;
        let prefix = uri.path().trim_end_matches('/').to_string();
        Ok(Upstream {
            scheme,
            authority,
            prefix,
        })
    }

    /// The upstream URI for a raw path-and-query, kept byte for byte.
    pub fn uri(&self, path_and_query: &str) -> Result<Uri, http::Error> {
        Uri::builder()
            .scheme(self.scheme.as_str())
            .authority(self.authority.clone())
            .path_and_query(format!("{}{path_and_query}", self.prefix))
            .build()
    }
}
