//! Where the spec comes from: a file, or a URL such as the API's own `/openapi.json`. A URL is
//! fetched with `If-None-Match` and the last `ETag`, so polling an unchanged spec costs a 304.

use std::path::Path;
use std::time::Duration;

use http::header::{ETAG, IF_NONE_MATCH};
use http::{Request, StatusCode};
use http_body_util::BodyExt;

use super::body::UpstreamBody;
use super::upstream::UpstreamClient;
use crate::config::Config;
use crate::spec::Spec;

/// A fetched spec and its `ETag`, or `None` when the server answered 304 Not Modified.
pub type Fetched = Option<(Spec, Option<String>)>;

/// GET `url` (conditional on `etag`) and parse the document.
pub async fn fetch(
    client: &UpstreamClient,
    config: &Config,
    url: &str,
    etag: Option<&str>,
) -> Result<Fetched, String> {
    let mut request = Request::get(url);
    if let Some(tag) = etag {
        request = request.header(IF_NONE_MATCH, tag);
    }
    let request = request
        .body(UpstreamBody::Buffered {
            data: None,
            trailers: None,
            exact: true,
        })
        .map_err(|e| format!("{url}: not a URL driftwatch can fetch: {e}"))?;
    let timeout = Duration::from_millis(config.proxy.request_timeout_ms);
    let response = tokio::time::timeout(timeout, client.request(request))
        .await
        .map_err(|_| format!("{url}: no answer within {} ms", timeout.as_millis()))?
        .map_err(|e| format!("{url}: {e}"))?;
    match response.status() {
        StatusCode::NOT_MODIFIED => return Ok(None),
        StatusCode::OK => {}
        other => return Err(format!("{url}: answered {other}")),
    }
    let tag = response
        .headers()
        .get(ETAG)
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("{url}: reading the body: {e}"))?
        .to_bytes();
    // The URL names the document in errors; its extension (if any) picks JSON or YAML.
    let spec = Spec::parse(Path::new(url), &bytes).map_err(|e| e.to_string())?;
    Ok(Some((spec, tag)))
}
