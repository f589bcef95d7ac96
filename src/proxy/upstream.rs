//! How driftwatch reaches the API: the connector (plain TCP or rustls with webpki roots plus an
//! optional CA file, always verified, optional client certificate; a connect timeout) that each
//! serving thread's `pool` connects with, and hyper-util's pooled client on it for fetching
//! `spec.url`. Also where upstream failures are classified, so `/metrics` can say why requests
//! failed.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::body::UpstreamBody;
use super::error::StartError;
use crate::settings::Settings;

pub type UpstreamClient = Client<HttpsConnector<HttpConnector>, UpstreamBody>;

/// The client that fetches the spec from `spec.url` (any host); requests go upstream through
/// each serving thread's `Pool`.
pub fn client(settings: &Settings) -> Result<UpstreamClient, StartError> {
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .http1_preserve_header_case(settings.proxy.preserve_header_case)
        .build(connector(settings)?))
}

/// Plain TCP or rustls, within `proxy.connect_timeout_ms`, without Nagle's delay.
pub fn connector(settings: &Settings) -> Result<HttpsConnector<HttpConnector>, StartError> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(settings.proxy.connect_timeout));
    let tls = client_tls(settings)?;
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http))
}

fn client_tls(settings: &Settings) -> Result<rustls::ClientConfig, StartError> {
    let config = &settings.upstream_tls;
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(ca) = &config.ca_file {
        for cert in read_certs(ca)? {
            roots.add(cert).map_err(|e| StartError::Certificates {
                file: ca.clone(),
                reason: format!("not a usable CA certificate: {e}"),
            })?;
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    let tls = match (&config.client_cert, &config.client_key) {
        (Some(cert), Some(key)) => {
            builder.with_client_auth_cert(read_certs(cert)?, read_key(key)?)?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(tls)
}

pub fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, StartError> {
    let failed = |reason: String| StartError::Certificates {
        file: path.into(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| failed(e.to_string()))?;
    if certs.is_empty() {
        return Err(failed("no PEM certificate in it".into()));
    }
    Ok(certs)
}

pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, StartError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| StartError::Key {
        file: path.into(),
        reason: e.to_string(),
    })
}
