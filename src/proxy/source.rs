//! Where the spec comes from: a file, or a URL such as the API's own `/openapi.json`. A URL is
//! fetched with `If-None-Match` and the last `ETag`, so polling an unchanged spec costs a 304.
//! Fetching is I/O on the runtime; reading the document (parse, bundle, normalize) is CPU work
//! and is done where the caller compiles it, off the request path.

use crate::settings::SpecUrl;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;

use http::header::{ETAG, IF_NONE_MATCH};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::body::UpstreamBody;
use super::upstream::UpstreamClient;
use crate::revision::FetchError;
use crate::spec::{LoadOptions, Spec, SpecError, SpecFiles};

/// A spec document to read: a file, or the body fetched from a URL.
pub enum Source {
    File(PathBuf),
    Fetched {
        url: String,
        body: Bytes,
    },
    /// Several files served as one API, each with its base path.
    Documents(Vec<(PathBuf, String)>),
}

impl Source {
    /// Read the document (blocking: call it off the runtime's worker threads while serving).
    pub fn read(&self, options: &LoadOptions) -> Result<Spec, SpecError> {
        match self {
            Source::File(path) => Spec::load_with(path, options),
            // The URL names the document in errors; its extension (if any) picks JSON or YAML.
            Source::Fetched { url, body } => Spec::parse_with(Path::new(url), body, options),
            Source::Documents(docs) => Spec::load_documents(docs, options),
        }
    }

    /// The revision the document would load as now, if it bundles the files and takes the
    /// overlays of `files` (the revision in force's): hashed, not parsed (`None`: a file
    /// cannot be read).
    pub fn revision_now(&self, files: &SpecFiles, options: &LoadOptions) -> Option<String> {
        let max = options.max_bytes;
        match self {
            Source::File(path) => crate::spec::file_revision_now(path, files, max),
            Source::Fetched { body, .. } => crate::spec::revision_now(body, files, max),
            // The first document is the one whose own bytes start the hash; the others are
            // hashed with its bundled files, in order.
            Source::Documents(docs) => crate::spec::file_revision_now(&docs.first()?.0, files, max),
        }
    }
}

/// A fetched document and its `ETag`, or `None` when the server answered 304 Not Modified.
pub type Fetched = Option<(Source, Option<String>)>;

/// GET `url`, conditional on `etag`: the whole answer within `timeout`, its body within
/// `max_bytes` (a document that never ends is cut off, not held).
pub async fn fetch(
    client: &UpstreamClient,
    timeout: Duration,
    spec_url: &SpecUrl,
    etag: Option<&str>,
    max_bytes: u64,
) -> Result<Fetched, FetchError> {
    let url = &spec_url.uri.to_string();
    // What errors and the spec's own messages name it by: a key in its query is masked.
    let shown = &crate::settings::url_shown(url);
    let basic = spec_url.basic.as_ref();
    let within = fetch_within(client, (url, shown), basic, etag, max_bytes);
    tokio::time::timeout(timeout, within)
        .await
        .map_err(|_| FetchError::Timeout {
            url: shown.into(),
            ms: timeout.as_millis(),
        })?
}

/// A GET of `url` (`shown` in errors), with the URL's credentials and, when known, its last
/// `ETag`.
fn conditional_get(
    (url, shown): (&str, &str),
    basic: Option<&http::HeaderValue>,
    etag: Option<&str>,
) -> Result<Request<UpstreamBody>, FetchError> {
    let mut request = Request::get(url);
    if let Some(basic) = basic {
        request = request.header(http::header::AUTHORIZATION, basic);
    }
    if let Some(tag) = etag {
        request = request.header(IF_NONE_MATCH, tag);
    }
    request
        .body(UpstreamBody::Buffered {
            data: None,
            trailers: None,
            exact: true,
        })
        .map_err(|e| FetchError::Url {
            url: shown.into(),
            reason: e.to_string(),
        })
}

async fn fetch_within(
    client: &UpstreamClient,
    (url, shown): (&str, &str),
    basic: Option<&http::HeaderValue>,
    etag: Option<&str>,
    max_bytes: u64,
) -> Result<Fetched, FetchError> {
    let request = conditional_get((url, shown), basic, etag)?;
    let response = client
        .request(request)
        .await
        .map_err(|e| FetchError::Unreachable {
            url: shown.into(),
            reason: e.to_string(),
        })?;
    match response.status() {
        StatusCode::NOT_MODIFIED => return Ok(None),
        StatusCode::OK => {}
        status => {
            let url = shown.into();
            return Err(FetchError::Status { url, status });
        }
    }
    let tag = response
        .headers()
        .get(ETAG)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let limit = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    let body = Limited::new(response.into_body(), limit)
        .collect()
        .await
        .map_err(|e| match e.is::<LengthLimitError>() {
            true => FetchError::TooLarge {
                url: shown.into(),
                max: max_bytes,
            },
            false => FetchError::Body {
                url: shown.into(),
                reason: e.to_string(),
            },
        })?
        .to_bytes();
    let url = shown.to_string();
    Ok(Some((Source::Fetched { url, body }, tag)))
}
