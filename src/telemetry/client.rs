//! The OTLP exporter's HTTP client: hyper's, already in the tree for the upstream, so export
//! adds no second HTTP stack. A collector is not an upstream: it gets webpki's roots and no
//! client certificate of the API's. Its connect is bounded here; the whole export, body
//! included, by the exporter (`export`, `telemetry.export_timeout_ms`).

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// A collector's answer is a small protobuf; more than this is not read.
const MAX_ANSWER: usize = 64 << 10;

#[derive(Debug, Clone)]
pub struct Hyper {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

/// Why an exchange with the collector gave no answer.
pub type HttpError = Box<dyn std::error::Error + Send + Sync>;

impl Hyper {
    pub fn new(connect_timeout: Duration) -> Result<Hyper, rustls::Error> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(Hyper {
            client: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(60))
                .build(connector),
        })
    }

    /// Send `request`; the answer, its body read (at most `MAX_ANSWER`).
    pub async fn send(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let response = self.client.request(request.map(Full::new)).await?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, MAX_ANSWER).collect().await?.to_bytes();
        Ok(Response::from_parts(parts, body))
    }
}
