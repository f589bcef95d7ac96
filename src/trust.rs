//! What a client of the forward proxy must be told to send its requests through it and to
//! trust its CA: one table of the variables each runtime reads, written two ways, as the
//! environment `wrap` gives the server it starts, and as the guide `driftwatch ca` prints for
//! an operator who sets up the container by hand.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// What a variable is set to.
#[derive(Clone, Copy)]
enum Value {
    /// The proxy's URL.
    Proxy,
    /// The CA certificate alone (added to the runtime's roots).
    Ca,
    /// The CA and the system's roots (the variable replaces the roots: hosts driftwatch
    /// tunnels must still verify).
    Bundle,
    /// `1`.
    On,
}

/// Each variable, its value, and who reads it: Node (axios; fetch from Node 24 with
/// `NODE_USE_ENV_PROXY`), Python (httpx, requests) and Go.
const VARIABLES: [(&str, Value, &str); 8] = [
    ("HTTPS_PROXY", Value::Proxy, "every runtime"),
    ("HTTP_PROXY", Value::Proxy, "every runtime"),
    ("https_proxy", Value::Proxy, "every runtime"),
    ("http_proxy", Value::Proxy, "every runtime"),
    (
        "NODE_USE_ENV_PROXY",
        Value::On,
        "Node 24 and later: its own fetch honours HTTPS_PROXY",
    ),
    (
        "NODE_EXTRA_CA_CERTS",
        Value::Ca,
        "Node (added to Node's roots)",
    ),
    ("SSL_CERT_FILE", Value::Bundle, "Python (httpx) and Go"),
    ("REQUESTS_CA_BUNDLE", Value::Bundle, "Python (requests)"),
];

/// The variables set to `proxy`, `ca` and `bundle`.
fn variables(
    proxy: &str,
    ca: &str,
    bundle: &str,
) -> impl Iterator<Item = (&'static str, String, &'static str)> {
    VARIABLES.iter().map(move |&(name, value, who)| {
        let value = match value {
            Value::Proxy => proxy,
            Value::Ca => ca,
            Value::Bundle => bundle,
            Value::On => "1",
        };
        (name, value.to_string(), who)
    })
}

/// The guide `driftwatch ca` prints on stderr, for a certificate saved at `cert` and a proxy
/// at `proxy`.
pub fn guide(cert: &str, proxy: &str) -> String {
    let (ca, bundle) = ("/etc/driftwatch/ca.pem", "/etc/driftwatch/bundle.pem");
    let mut out = format!(
        "# The certificate above is driftwatch's forward proxy CA ({cert}). In the MCP server's\n\
         # container, with it saved as {ca}:\n"
    );
    for (name, value, who) in variables(proxy, ca, bundle) {
        out.push_str(&format!("#   {:<46} {who}\n", format!("{name}={value}")));
    }
    out.push_str(&format!(
        "# axios reads HTTPS_PROXY itself. SSL_CERT_FILE and REQUESTS_CA_BUNDLE replace the roots,\n\
         # so give them a bundle of the system's roots and this CA (tunneled hosts keep their own\n\
         # certificates):\n\
         #   cat /etc/ssl/certs/ca-certificates.crt {ca} > {bundle}\n"
    ));
    out
}

/// What `wrap` tells the server it starts to trust: the CA, and a bundle of it with the
/// system's roots, written to a directory of this process's own (0700) under the temp dir and
/// removed when dropped. Never into `ca_dir`, which is often a read-only Secret mount.
pub struct Trust {
    ca: PathBuf,
    dir: PathBuf,
    bundle: PathBuf,
}

impl Trust {
    /// The bundle of `ca_dir`'s `ca.pem` and the system's roots, written.
    pub fn write(ca_dir: &Path) -> anyhow::Result<Trust> {
        let ca = ca_dir.join("ca.pem");
        let mut bundle = std::fs::read(&ca).with_context(|| format!("{}", ca.display()))?;
        const SYSTEM_ROOTS: [&str; 3] = [
            "/etc/ssl/certs/ca-certificates.crt",
            "/etc/pki/tls/certs/ca-bundle.crt",
            "/etc/ssl/cert.pem",
        ];
        if let Some(roots) = SYSTEM_ROOTS.iter().find_map(|p| std::fs::read(p).ok()) {
            bundle.push(b'\n');
            bundle.extend(roots);
        }
        let dir = std::env::temp_dir().join(format!("driftwatch-wrap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&dir)
            .with_context(|| format!("{}", dir.display()))?;
        let path = dir.join("bundle.pem");
        std::fs::write(&path, bundle).with_context(|| format!("{}", path.display()))?;
        Ok(Trust {
            ca,
            dir,
            bundle: path,
        })
    }

    /// The environment of a server whose requests go through the proxy at `proxy`.
    pub fn environment(&self, proxy: &str) -> Vec<(String, String)> {
        let ca = self.ca.display().to_string();
        let bundle = self.bundle.display().to_string();
        variables(proxy, &ca, &bundle)
            .map(|(name, value, _)| (name.to_string(), value))
            .collect()
    }
}

impl Drop for Trust {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guide_and_the_environment_name_the_same_variables() {
        let guide = guide("/dir/ca.pem", "http://127.0.0.1:8080");
        for (name, _, _) in VARIABLES {
            assert!(guide.contains(&format!("{name}=")), "{name}: {guide}");
        }
        assert!(
            guide.contains("NODE_EXTRA_CA_CERTS=/etc/driftwatch/ca.pem"),
            "{guide}"
        );
        assert!(
            guide.contains("SSL_CERT_FILE=/etc/driftwatch/bundle.pem"),
            "{guide}"
        );
        let env: Vec<_> = variables("http://p", "c.pem", "b.pem")
            .map(|(n, v, _)| (n, v))
            .collect();
        assert!(env.contains(&("HTTPS_PROXY", "http://p".into())));
        assert!(env.contains(&("NODE_EXTRA_CA_CERTS", "c.pem".into())));
        assert!(env.contains(&("REQUESTS_CA_BUNDLE", "b.pem".into())));
        assert!(env.contains(&("NODE_USE_ENV_PROXY", "1".into())));
    }
}
