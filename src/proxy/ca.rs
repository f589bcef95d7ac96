//! The forward proxy's certificate authority: `ca.pem` and `ca.key` in `forward.ca_dir`, made
//! on first start (the directory 0700, the key 0600) or put there by the operator, and the leaf
//! certificate it signs for each host it intercepts, minted on first use and kept.
//!
//! Only hosts an API serves are ever intercepted, so the leaves kept are bounded by the
//! config. A leaf gets its own key (never the CA's), a random serial, an IP SAN for an IP
//! host (clients send no SNI for one, so the host comes from the `CONNECT` authority) and a
//! DNS SAN otherwise. The CA's key is read into rcgen's `KeyPair` and never written anywhere
//! else: `Ca`'s `Debug` shows the certificate's path alone, and no error holds key bytes.

mod issuer;
mod pkcs8;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyIdMethod, KeyPair, KeyUsagePurpose, PublicKeyData, SerialNumber,
};
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use time::OffsetDateTime;

/// A leaf is made again after this, well inside its validity.
const LEAF_REFRESH: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long a leaf is valid (and how far back, for clocks behind ours).
const LEAF_DAYS: i64 = 30;
/// A made CA's validity.
const CA_DAYS: i64 = 3650;

pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    cert: CertificateDer<'static>,
    cert_pem: String,
    path: PathBuf,
    leaves: Mutex<HashMap<String, Leaf>>,
}

struct Leaf {
    config: Arc<ServerConfig>,
    made: Instant,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").field("cert", &self.path).finish()
    }
}

/// Why the CA cannot be used: the operator's to mend (the directory, or what is in it).
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Unusable { path: PathBuf, reason: String },
    #[error("cannot make a certificate for `{host}`: {reason}")]
    Leaf { host: String, reason: String },
}

/// A `ca.pem` or `ca.key` larger than this is refused unread: a CA and its chain are a few
/// KiB, and a 300 MB file was read whole.
const MAX_PEM_BYTES: u64 = 1 << 20;
/// How long a start that finds `ca.key` without `ca.pem` waits for another process (a second
/// replica, a second `wrap`) that is making the pair to finish it.
const MAKING_WAIT: Duration = Duration::from_secs(5);

impl Ca {
    /// The CA in `dir`: read if `ca.pem` and `ca.key` are there, else made and written. Two
    /// processes starting together on an empty `dir` end with the same CA: the key is put in
    /// place whole by a link that only one of them can make, the certificate after it by a
    /// rename, and the other reads what the first wrote.
    pub fn open(dir: &Path) -> Result<Ca, CaError> {
        let (cert, key) = (dir.join("ca.pem"), dir.join("ca.key"));
        match Ca::inspect(dir)? {
            Some(ca) => Ok(ca),
            None => match Ca::make(dir, &cert, &key)? {
                Some(ca) => Ok(ca),
                None => Ca::read(&cert, &key, MAKING_WAIT),
            },
        }
    }

    /// The CA in `dir` if there is one, read and checked, writing nothing (`serve --check`);
    /// `None` when neither file is there yet.
    pub fn inspect(dir: &Path) -> Result<Option<Ca>, CaError> {
        let (cert, key) = (dir.join("ca.pem"), dir.join("ca.key"));
        match (cert.exists(), key.exists()) {
            (false, false) => Ok(None),
            (true, false) => Err(unusable(&key, "is missing beside ca.pem")),
            (_, true) => Ca::read(&cert, &key, MAKING_WAIT).map(Some),
        }
    }

    /// The CA certificate, PEM: what clients are told to trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Where the CA certificate is.
    pub fn cert_path(&self) -> &Path {
        &self.path
    }

    /// The TLS config that presents `host`'s leaf: kept, or minted now.
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, CaError> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(leaf) = leaves.get(host)
            && leaf.made.elapsed() < LEAF_REFRESH
        {
            return Ok(leaf.config.clone());
        }
        let config = Arc::new(self.mint(host).map_err(|reason| CaError::Leaf {
            host: host.to_string(),
            reason,
        })?);
        let made = Instant::now();
        leaves.insert(
            host.to_string(),
            Leaf {
                config: config.clone(),
                made,
            },
        );
        Ok(config)
    }

    fn mint(&self, host: &str) -> Result<ServerConfig, String> {
        let text = |e: rcgen::Error| e.to_string();
        let mut params = CertificateParams::new(vec![host.to_string()]).map_err(text)?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(serial());
        let now = OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(LEAF_DAYS);
        let key = KeyPair::generate().map_err(text)?;
        let leaf = params.signed_by(&key, &self.issuer).map_err(text)?;
        let chain = vec![leaf.der().clone(), self.cert.clone()];
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(chain, der)
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }

    /// The pair as the operator (or an earlier start) left it, waiting up to `wait` for a
    /// `ca.pem` that another process making the pair has not renamed into place yet.
    fn read(cert: &Path, key: &Path, wait: Duration) -> Result<Ca, CaError> {
        let started = Instant::now();
        while !cert.exists() && started.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !cert.exists() {
            return Err(unusable(cert, "is missing beside ca.key"));
        }
        let cert_pem = read_bounded(cert)?;
        let key_pem = read_bounded(key)?;
        warn_if_readable(key);
        let signing = signing_key(key, &key_pem)?;
        let der: CertificateDer<'static> =
            rustls_pki_types::pem::PemObject::from_pem_slice(cert_pem.as_bytes())
                .map_err(|e| unusable(cert, &format!("not a PEM certificate: {e}")))?;
        let subject = issuer::read(&der)
            .map_err(|e| unusable(cert, &format!("not a CA certificate driftwatch reads: {e}")))?;
        usable_as_issuer(cert, &subject)?;
        if subject.public_key != signing.subject_public_key_info() {
            return Err(unusable(key, "is not the key of ca.pem beside it"));
        }
        let mut params = CertificateParams::default();
        params.distinguished_name = subject.name;
        params.key_identifier_method = subject
            .key_id
            .map_or(KeyIdMethod::Sha256, KeyIdMethod::PreSpecified);
        Ok(Ca::new(Issuer::new(params, signing), der, cert_pem, cert))
    }

    /// A new CA written into `dir`; `None` when another process put its key there first.
    fn make(dir: &Path, cert: &Path, key: &Path) -> Result<Option<Ca>, CaError> {
        create_private_dir(dir).map_err(io(dir))?;
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| unusable(cert, &e.to_string()))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params
            .distinguished_name
            .push(DnType::CommonName, "driftwatch forward proxy CA");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "driftwatch");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.serial_number = Some(serial());
        let now = OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(CA_DAYS);
        let signing = KeyPair::generate().map_err(|e| unusable(key, &e.to_string()))?;
        let made = params
            .self_signed(&signing)
            .map_err(|e| unusable(cert, &e.to_string()))?;
        // Each file is written whole under a name of this process's, then put in place: the
        // key by a link that fails if another process put its key there first (it then reads
        // that one), the certificate by a rename, after the key.
        let tag = format!("{}-{:08x}", std::process::id(), fastrand::u32(..));
        let ours = |path: &Path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            path.with_file_name(format!(".{name}.new-{tag}"))
        };
        let (key_new, cert_new) = (ours(key), ours(cert));
        write_private(&key_new, signing.serialize_pem().as_bytes()).map_err(io(&key_new))?;
        let placed = std::fs::hard_link(&key_new, key);
        let _ = std::fs::remove_file(&key_new);
        match placed {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
            Err(e) => return Err(io(key)(e)),
        }
        std::fs::write(&cert_new, made.pem()).map_err(io(&cert_new))?;
        std::fs::rename(&cert_new, cert).map_err(io(cert))?;
        tracing::info!(cert = %cert.display(), "made the forward proxy's CA");
        let der = made.der().clone();
        Ok(Some(Ca::new(
            Issuer::new(params, signing),
            der,
            made.pem(),
            cert,
        )))
    }

    fn new(
        issuer: Issuer<'static, KeyPair>,
        cert: CertificateDer<'static>,
        cert_pem: String,
        path: &Path,
    ) -> Ca {
        Ca {
            issuer,
            cert,
            cert_pem,
            path: path.to_path_buf(),
            leaves: Mutex::default(),
        }
    }
}

/// A PEM file of the CA, refused unread past [`MAX_PEM_BYTES`].
fn read_bounded(path: &Path) -> Result<String, CaError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(io(path))?;
    let mut text = String::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io(path))?;
    match text.len() as u64 > MAX_PEM_BYTES {
        true => Err(unusable(
            path,
            &format!("is larger than {MAX_PEM_BYTES} bytes: not a CA's PEM file"),
        )),
        false => Ok(text),
    }
}

/// The CA's key from its PEM: PKCS #8 (`BEGIN PRIVATE KEY`), or the traditional forms that
/// `openssl genrsa` and `openssl ecparam -genkey` write (`BEGIN RSA PRIVATE KEY`, `BEGIN EC
/// PRIVATE KEY`), wrapped as PKCS #8 for rcgen, which reads only that with ring.
fn signing_key(path: &Path, pem: &str) -> Result<KeyPair, CaError> {
    // Neither reader's message holds the key's bytes.
    let der = PrivateKeyDer::from_pem_slice(pem.as_bytes())
        .map_err(|e| unusable(path, &format!("not a PEM private key: {e}")))?;
    let pkcs8 = match &der {
        PrivateKeyDer::Pkcs8(key) => key.secret_pkcs8_der().to_vec(),
        PrivateKeyDer::Pkcs1(key) => pkcs8::from_pkcs1(key.secret_pkcs1_der()),
        PrivateKeyDer::Sec1(key) => {
            pkcs8::from_sec1(key.secret_sec1_der()).map_err(|reason| unusable(path, &reason))?
        }
        _ => {
            return Err(unusable(
                path,
                "a private key of a form driftwatch does not read",
            ));
        }
    };
    KeyPair::try_from(pkcs8.as_slice()).map_err(|e| {
        unusable(
            path,
            &format!("not a private key rcgen reads (RSA, ECDSA P-256 or P-384, Ed25519): {e}"),
        )
    })
}

/// Clients accept leaves only from a CA certificate that is in its validity.
fn usable_as_issuer(cert: &Path, subject: &issuer::Subject) -> Result<(), CaError> {
    let now = OffsetDateTime::now_utc();
    if !subject.is_ca {
        return Err(unusable(
            cert,
            "is not a CA certificate (its basicConstraints do not say cA): clients would refuse every leaf it signs",
        ));
    }
    if now > *subject.valid.end() {
        return Err(unusable(
            cert,
            &format!(
                "expired at {}: make or supply a new CA",
                subject.valid.end()
            ),
        ));
    }
    if now < *subject.valid.start() {
        return Err(unusable(
            cert,
            &format!("is not valid before {}", subject.valid.start()),
        ));
    }
    Ok(())
}

/// What a failed read or write of `path` becomes.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CaError {
    let path = path.to_path_buf();
    move |source| CaError::Io { path, source }
}

fn unusable(path: &Path, reason: &str) -> CaError {
    CaError::Unusable {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// A positive 16-byte serial, random as RFC 5280 asks.
fn serial() -> SerialNumber {
    let mut bytes: Vec<u8> = (0..16).map(|_| fastrand::u8(..)).collect();
    bytes[0] &= 0x7f;
    SerialNumber::from(bytes)
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Written only if nothing is there, readable by this user alone from its first byte.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}

/// A supplied key others can read is the operator's choice (a mounted Secret often is 0644),
/// said once rather than refused.
fn warn_if_readable(key: &Path) {
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(key) {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(key = %key.display(), "the CA key is readable by others than its owner");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ca;

    #[test]
    fn a_made_ca_is_read_back_and_signs_leaves_for_names_and_addresses() {
        let dir = std::env::temp_dir().join(format!("driftwatch-ca-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let made = Ca::open(&dir).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("ca.key"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let read = Ca::open(&dir).unwrap();
        assert_eq!(made.cert_pem(), read.cert_pem());
        assert!(read.server_config("api.test").is_ok());
        assert!(read.server_config("127.0.0.1").is_ok());
        assert!(!format!("{read:?}").contains("PRIVATE"));
        std::fs::remove_file(dir.join("ca.pem")).unwrap();
        assert!(
            Ca::open(&dir)
                .unwrap_err()
                .to_string()
                .contains("missing beside ca.key")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 49, defect 14: two processes starting on an empty `ca_dir` (two replicas, two
    /// wraps); the second exited 2 in 10-40 % of tries (`ca.key: File exists`, `ca.pem is
    /// missing`). Two threads opening the same empty directory at once both get the one CA.
    #[test]
    fn two_starts_on_an_empty_directory_end_with_one_ca() {
        let base = std::env::temp_dir().join(format!("driftwatch-ca-race-{}", std::process::id()));
        for round in 0..40 {
            let dir = base.join(round.to_string());
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
            let open = |dir: std::path::PathBuf, barrier: std::sync::Arc<std::sync::Barrier>| {
                std::thread::spawn(move || {
                    barrier.wait();
                    Ca::open(&dir).map(|ca| ca.cert_pem().to_string())
                })
            };
            let a = open(dir.clone(), barrier.clone());
            let b = open(dir.clone(), barrier);
            let (a, b) = (a.join().unwrap(), b.join().unwrap());
            let (a, b) = (
                a.unwrap_or_else(|e| panic!("round {round}: {e}")),
                b.unwrap_or_else(|e| panic!("round {round}: {e}")),
            );
            assert_eq!(a, b, "round {round}: one CA");
            let left: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(
                left.len(),
                2,
                "round {round}: only ca.pem and ca.key: {left:?}"
            );
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
}
