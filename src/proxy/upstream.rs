//! The connection to the API: a pooled hyper client over plain TCP or rustls (webpki roots plus
//! an optional CA file, always verified, optional client certificate), with a connect timeout.
//! Also where upstream failures are classified, so `/metrics` can say why requests failed.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::body::UpstreamBody;
use crate::config::Config;

pub type UpstreamClient = Client<HttpsConnector<HttpConnector>, UpstreamBody>;

/// Where requests go: scheme and authority, and a path prefix prepended to every request path.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub scheme: String,
    pub authority: http::uri::Authority,
    pub prefix: String,
}

impl Upstream {
    pub fn parse(url: &str) -> anyhow::Result<Upstream> {
        let uri: Uri = url
            .parse()
            .map_err(|e| anyhow::anyhow!("upstream `{url}` is not a URL: {e}"))?;
        let scheme = uri.scheme_str().unwrap_or_default().to_string();
        anyhow::ensure!(
            scheme == "http" || scheme == "https",
            "upstream `{url}` must start with http:// or https://"
        );
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("upstream `{url}` has no host"))?;
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

pub fn client(config: &Config) -> anyhow::Result<UpstreamClient> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_millis(config.proxy.connect_timeout_ms)));
    let tls = client_tls(config)?;
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .build(https))
}

fn client_tls(config: &Config) -> anyhow::Result<rustls::ClientConfig> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(ca) = &config.upstream_tls.ca_file {
        for cert in read_certs(ca)? {
            roots.add(cert).map_err(|e| {
                anyhow::anyhow!("{}: not a usable CA certificate: {e}", ca.display())
            })?;
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    let tls = match (
        &config.upstream_tls.client_cert,
        &config.upstream_tls.client_key,
    ) {
        (Some(cert), Some(key)) => {
            builder.with_client_auth_cert(read_certs(cert)?, read_key(key)?)?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(tls)
}

pub fn read_certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow::anyhow!("{}: cannot read PEM certificates: {e}", path.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "{}: no PEM certificate in it",
        path.display()
    );
    Ok(certs)
}

pub fn read_key(path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| anyhow::anyhow!("{}: cannot read a PEM private key: {e}", path.display()))
}

/// Why an upstream request failed, as the `cause` label: `connect`, `tls`, `timeout`, `other`.
pub fn cause(error: &hyper_util::client::legacy::Error) -> &'static str {
    let chain = chain(error);
    if chain
        .iter()
        .any(|e| e.downcast_ref::<rustls::Error>().is_some())
    {
        "tls"
    } else if chain.iter().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
    }) {
        "timeout"
    } else if error.is_connect() {
        "connect"
    } else {
        "other"
    }
}

/// The innermost error's message (`invalid peer certificate: UnknownIssuer`, `Connection
/// refused`): the part an operator can act on.
pub fn root_cause(error: &hyper_util::client::legacy::Error) -> String {
    chain(error)
        .last()
        .map(|e| e.to_string())
        .unwrap_or_else(|| error.to_string())
}

/// The error and its sources, looking inside `io::Error`s (whose `source()` skips the error
/// they wrap).
fn chain<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> Vec<&'e (dyn std::error::Error + 'static)> {
    let mut out = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        out.push(e);
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    out
}
