//! The OTLP exporter's HTTP client: hyper's, already in the tree for the upstream, so export
//! adds no second HTTP stack. A collector is not an upstream: it gets webpki's roots, plus the
//! CA `telemetry.certificate` names (a collector behind a private CA), and its own client
//! certificate if any, never the API's. The files are read once, when the settings are
//! checked, so that one that cannot be read is said before anything starts. Its connect is
//! bounded here; the whole export, body included, by the exporter (`export`,
//! `telemetry.export_timeout_ms`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A collector's answer is a small protobuf; more than this is not read.
const MAX_ANSWER: usize = 64 << 10;

#[derive(Debug, Clone)]
pub struct Hyper {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

/// Why an exchange with the collector gave no answer.
pub type HttpError = Box<dyn std::error::Error + Send + Sync>;

impl Hyper {
    pub fn new(connect_timeout: Duration, tls: &rustls::ClientConfig) -> Hyper {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls.clone())
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Hyper {
            client: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(60))
                .build(connector),
        }
    }

    /// Send `request`; the answer, its body read (at most `MAX_ANSWER`).
    pub async fn send(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let response = self.client.request(request.map(Full::new)).await?;
        let (parts, body) = response.into_parts();
        let body = Limited::new(body, MAX_ANSWER).collect().await?.to_bytes();
        Ok(Response::from_parts(parts, body))
    }
}

/// The collector's TLS: webpki's roots and the certificates of `ca`, a client certificate
/// chain and key if given; or which file could not be used, and why.
pub fn tls(
    ca: Option<&Path>,
    client: Option<(&Path, &Path)>,
) -> Result<Arc<rustls::ClientConfig>, (&'static str, String)> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(ca) = ca {
        for cert in certs(ca).map_err(|e| ("certificate", e))? {
            roots.add(cert).map_err(|e| {
                let why = format!("{}: not a usable CA certificate: {e}", ca.display());
                ("certificate", why)
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ("certificate", e.to_string()))?
        .with_root_certificates(roots);
    let Some((cert, key)) = client else {
        return Ok(Arc::new(builder.with_no_client_auth()));
    };
    let chain = certs(cert).map_err(|e| ("client_certificate", e))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| ("client_key", format!("{}: {e}", key.display())))?;
    let tls = builder.with_client_auth_cert(chain, key).map_err(|e| {
        let why = format!("{} and its key: {e}", cert.display());
        ("client_certificate", why)
    })?;
    Ok(Arc::new(tls))
}

/// The PEM certificates in `path`, at least one.
fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    match certs.is_empty() {
        true => Err(format!("{}: no PEM certificate in it", path.display())),
        false => Ok(certs),
    }
}
