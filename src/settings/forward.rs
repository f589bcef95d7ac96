//! The forward proxy's settings, and `[[api]]` read into the one API the sidecar serves.
//!
//! An `[[api]]` table says what `[spec]` and `proxy.upstream` say, plus the hosts a forward
//! proxy intercepts for it; it is folded into those keys before they are checked, so that one
//! path checks a spec source and an upstream however they were given. Without `[[api]]`, a
//! forward proxy intercepts the upstream's own host: `--upstream https://api.github.com` in
//! forward mode audits what the client sends to `api.github.com:443`.

use std::path::PathBuf;

use crate::config::{Config, ConfigError, UnknownHosts};

use super::{Fail, Upstream};

#[derive(Debug, Clone)]
pub struct ForwardSettings {
    pub ca_dir: PathBuf,
    pub unknown_hosts: UnknownHosts,
    /// The hosts whose TLS is ended here and whose requests are audited.
    pub hosts: Vec<HostPort>,
    pub host_labels: usize,
}

/// A host and port as a `CONNECT` names it: the host lowercased, an IPv6 address without its
/// brackets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl HostPort {
    /// `host:port`, `host` (port `default`), `[v6]:port` or `[v6]`; `None` when it is none.
    pub fn parse(text: &str, default: u16) -> Option<HostPort> {
        let authority: http::uri::Authority = text.parse().ok()?;
        if authority.as_str().contains('@') {
            return None;
        }
        let host = authority.host();
        let host = host.strip_prefix('[').unwrap_or(host);
        let host = host.strip_suffix(']').unwrap_or(host);
        Some(HostPort {
            host: host.to_ascii_lowercase(),
            port: authority.port_u16().unwrap_or(default),
        })
    }

    /// The upstream's host and port.
    pub fn of(upstream: &Upstream) -> HostPort {
        let default = match upstream.scheme.as_str() {
            "https" => 443,
            _ => 80,
        };
        HostPort::parse(upstream.authority.as_str(), default)
            .expect("an upstream's authority is a host and port")
    }
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.host.contains(':') {
            true => write!(f, "[{}]:{}", self.host, self.port),
            false => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// `c` with its one `[[api]]` read into `[spec]` and `proxy.upstream`, and
/// `forward.upstream_ca_file` into `upstream_tls.ca_file`; the hosts the forward proxy
/// intercepts come back beside it.
pub(super) fn fold(c: &Config, fail: &Fail<'_>) -> Result<(Config, Vec<String>), ConfigError> {
    let mut c = c.clone();
    if let Some(file) = c.forward.upstream_ca_file.take() {
        if c.upstream_tls.ca_file.as_ref().is_some_and(|f| *f != file) {
            return Err(fail(
                "forward.upstream_ca_file",
                "is the same setting as upstream_tls.ca_file: set one of them".into(),
            ));
        }
        c.upstream_tls.ca_file = Some(file);
    }
    let apis = std::mem::take(&mut c.api);
    let Some(api) = apis.first() else {
        return Ok((c, Vec::new()));
    };
    if apis.len() > 1 {
        return Err(fail(
            "api",
            format!(
                "{} [[api]] tables: one sidecar serves one API so far (several are issue 37's \
                 next step); run one sidecar per API",
                apis.len()
            ),
        ));
    }
    let set_twice = |key: &str| fail(key, "is set both here and in [[api]]: set it once".into());
    if api.spec.is_empty() {
        return Err(fail("api.spec", "is empty: a spec file path or URL".into()));
    }
    if c.spec.path.is_some() || c.spec.url.is_some() {
        return Err(set_twice("spec.path"));
    }
    match api.spec.starts_with("http://") || api.spec.starts_with("https://") {
        true => c.spec.url = Some(api.spec.clone()),
        false => c.spec.path = Some(PathBuf::from(&api.spec)),
    }
    if api.base_path.is_some() {
        if c.spec.base_path.is_some() {
            return Err(set_twice("spec.base_path"));
        }
        c.spec.base_path = api.base_path.clone();
    }
    c.spec.write.extend(api.write.clone());
    if let Some(upstream) = &api.upstream {
        if c.proxy.upstream.is_some() {
            return Err(set_twice("proxy.upstream"));
        }
        c.proxy.upstream = Some(upstream.clone());
    }
    if c.proxy.upstream.is_none()
        && let Some(first) = api.hosts.first().and_then(|h| HostPort::parse(h, 443))
    {
        // The host as the client named it; `Host` gets no default port.
        c.proxy.upstream = Some(match first.port {
            443 => format!("https://{}", first.to_string().trim_end_matches(":443")),
            _ => format!("https://{first}"),
        });
    }
    if api.prefix.is_some() {
        return Err(fail(
            "api.prefix",
            "selects one API among several, which one sidecar does not serve yet".into(),
        ));
    }
    Ok((c, api.hosts.clone()))
}

/// The forward proxy's settings: the hosts named, else the upstream's.
pub(super) fn forward(
    c: &Config,
    hosts: &[String],
    upstream: Option<&Upstream>,
    fail: &Fail<'_>,
) -> Result<ForwardSettings, ConfigError> {
    let mut parsed = Vec::with_capacity(hosts.len());
    for text in hosts {
        let host = HostPort::parse(text, 443)
            .ok_or_else(|| fail("api.hosts", format!("`{text}` is not a host[:port]")))?;
        parsed.push(host);
    }
    if parsed.is_empty() {
        parsed.extend(upstream.map(HostPort::of));
    }
    Ok(ForwardSettings {
        ca_dir: c.forward.ca_dir.clone(),
        unknown_hosts: c.forward.unknown_hosts,
        hosts: parsed,
        host_labels: c.forward.host_labels,
    })
}

#[cfg(test)]
mod tests {
    use super::HostPort;

    #[test]
    fn host_ports_are_read_as_connect_names_them() {
        let hp = |h: &str, p| HostPort {
            host: h.into(),
            port: p,
        };
        assert_eq!(
            HostPort::parse("API.github.com", 443),
            Some(hp("api.github.com", 443))
        );
        assert_eq!(
            HostPort::parse("api.test:8443", 443),
            Some(hp("api.test", 8443))
        );
        assert_eq!(HostPort::parse("[::1]:9", 443), Some(hp("::1", 9)));
        assert_eq!(
            HostPort::parse("[::1]:9", 443).unwrap().to_string(),
            "[::1]:9"
        );
        assert_eq!(HostPort::parse("user:pw@host", 443), None);
        assert_eq!(HostPort::parse("a b", 443), None);
    }
}
