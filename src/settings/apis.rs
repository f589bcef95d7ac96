//! The APIs the sidecar serves, and the forward proxy's settings.
//!
//! An `[[api]]` table says what `[spec]` and `proxy.upstream` say for one API, plus the hosts
//! it serves and the prefix that selects it; each is read by folding it into a copy of those
//! keys, so that one path checks a spec source, an upstream and a policy however they were
//! given. Without `[[api]]`, the one API is `[spec]`'s and `proxy.upstream`'s, unnamed, and a
//! forward proxy intercepts the upstream's own host: `--upstream https://api.github.com` in
//! forward mode audits what the client sends to `api.github.com:443`. The first API is also
//! what the one-API commands (`check`, `mcp`) read as `Settings::spec`.

use std::path::PathBuf;

use crate::config::{ApiConfig, Config, ConfigError, ProxyKind, UnknownHosts};
use crate::policy::Policy;

use super::{Fail, SpecSettings, Upstream};

#[derive(Debug, Clone)]
pub struct ForwardSettings {
    pub ca_dir: PathBuf,
    pub unknown_hosts: UnknownHosts,
    pub host_labels: usize,
    /// What a tunnel may reach although the policy denies it (`crate::proxy::tunnel`).
    pub tunnel_allow: Vec<HostPort>,
}

/// One API the sidecar serves.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    /// `[[api]]`'s name, the `api` label of its metrics and events; `None` for the one API of
    /// `[spec]` and `proxy.upstream`, whose metrics carry no `api` label, as before.
    pub name: Option<String>,
    pub spec: SpecSettings,
    /// `None` only where no proxy runs (`check`).
    pub upstream: Option<Upstream>,
    /// A forward API of several hosts and no `upstream` of its own: each host's, by the
    /// position of the host in `hosts`, so that a request goes to the host it was sent to.
    /// Empty otherwise: every request goes to `upstream`.
    pub per_host: Vec<Upstream>,
    /// Forward: the hosts whose TLS is ended here. Reverse: the `Host` values that select it.
    pub hosts: Vec<HostPort>,
    /// Reverse: the path prefix that selects it, taken off before routing and sending.
    pub prefix: Option<String>,
    pub policy: Policy,
}

impl ApiSettings {
    /// Where its requests go; an error naming how to set it where no proxy could run without.
    pub fn upstream(&self) -> Result<&Upstream, ConfigError> {
        self.upstream.as_ref().ok_or_else(super::missing_upstream)
    }
}

/// A host and port as a `CONNECT` names it, in one canonical spelling: a name lowercased
/// (IDNA to ASCII) and without its trailing dot, an IPv4 address dotted-decimal whatever way it
/// was written (`127.1`, `2130706433`, `0x7f.0.0.1` and `127.000.000.001` are `127.0.0.1`, as
/// the WHATWG URL standard and `inet_aton` read them), an IPv6 address without its brackets and
/// an IPv4-mapped one as its IPv4. Two spellings of one host are one `HostPort`, so no spelling
/// of an intercepted host is tunneled unaudited.
/// The longest host a `HostPort` holds: a DNS name's 253 bytes, or an IPv6 address.
const MAX_HOST_BYTES: usize = 255;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

impl HostPort {
    /// `host:port`, `host` (port `default`), `[v6]:port` or `[v6]`; `None` when it is none,
    /// or when its port is not one (`:0`, `:65536`, `:-1`): never read as the default.
    pub fn parse(text: &str, default: u16) -> Option<HostPort> {
        let authority: http::uri::Authority = text.parse().ok()?;
        if authority.as_str().contains('@') {
            return None;
        }
        let raw = authority.host();
        // No DNS name is longer (RFC 1035); a longer one is no host (64 KB names made every
        // scrape 3.2 MB).
        if raw.len() > MAX_HOST_BYTES {
            return None;
        }
        let rest = &authority.as_str()[raw.len()..];
        let port = match rest.strip_prefix(':') {
            None | Some("") => default,
            Some(digits) if digits.len() <= 5 && digits.bytes().all(|b| b.is_ascii_digit()) => {
                digits.parse::<u16>().ok().filter(|p| *p != 0)?
            }
            Some(_) => return None,
        };
        Some(HostPort {
            host: canonical_host(raw)?,
            port,
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

/// `raw` (as an authority writes it, an IPv6 address in brackets) in its one spelling.
fn canonical_host(raw: &str) -> Option<String> {
    match url::Host::parse(raw).ok()? {
        url::Host::Domain(name) => {
            let name = name.strip_suffix('.').unwrap_or(&name);
            (!name.is_empty() && !name.ends_with('.')).then(|| name.to_string())
        }
        url::Host::Ipv4(v4) => Some(v4.to_string()),
        url::Host::Ipv6(v6) => Some(match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        }),
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

/// `c` with `forward.upstream_ca_file` read into `upstream_tls.ca_file`, and its first
/// `[[api]]` (if any) into `[spec]` and `proxy.upstream`.
pub(super) fn first(c: &Config, fail: &Fail<'_>) -> Result<Config, ConfigError> {
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
    match c.api.first().cloned() {
        Some(api) => {
            let several = c.api.len() > 1;
            fold(&c, &api, several, fail)
        }
        None => Ok(c),
    }
}

/// `c` (already `first`'s) as one API's: its spec, base path, writes, upstream and mode. With
/// `several` APIs, `proxy.upstream` is every API's default; with one, it is set once.
fn fold(
    c: &Config,
    api: &ApiConfig,
    several: bool,
    fail: &Fail<'_>,
) -> Result<Config, ConfigError> {
    let mut c = c.clone();
    let set_twice = |key: &str| fail(key, "is set both here and in [[api]]: set it once".into());
    if c.spec.path.is_some() || c.spec.url.is_some() || !c.spec.documents.is_empty() {
        return Err(set_twice("spec.path"));
    }
    match (api.spec.is_empty(), api.documents.is_empty()) {
        (true, true) => {
            let why = "is empty: a spec file path or URL (or `documents`)";
            return Err(fail("api.spec", why.into()));
        }
        (false, false) => {
            let why = "and api.documents are both set: one spec, or several documents";
            return Err(fail("api.spec", why.into()));
        }
        (true, false) => c.spec.documents = api.documents.clone(),
        (false, true) if api.spec.starts_with("http://") || api.spec.starts_with("https://") => {
            c.spec.url = Some(api.spec.clone())
        }
        (false, true) => c.spec.path = Some(PathBuf::from(&api.spec)),
    }
    if !api.overlays.is_empty() {
        if !c.spec.overlays.is_empty() {
            return Err(set_twice("spec.overlays"));
        }
        c.spec.overlays = api.overlays.clone();
    }
    if api.base_path.is_some() {
        if c.spec.base_path.is_some() {
            return Err(set_twice("spec.base_path"));
        }
        c.spec.base_path = api.base_path.clone();
    }
    c.spec.write.extend(api.write.clone());
    if let Some(mode) = api.mode {
        c.proxy.mode = mode;
    }
    match &api.upstream {
        Some(_) if !several && c.proxy.upstream.is_some() => {
            return Err(set_twice("proxy.upstream"));
        }
        Some(upstream) => c.proxy.upstream = Some(upstream.clone()),
        None => {
            if let Some(first) = api.hosts.first().and_then(|h| HostPort::parse(h, 443)) {
                c.proxy.upstream = Some(host_url(&first));
            }
        }
    }
    Ok(c)
}

/// The upstream URL of a host a client asked for: https, and `Host` without a default port.
fn host_url(host: &HostPort) -> String {
    match host.port {
        443 => format!("https://{}", host.to_string().trim_end_matches(":443")),
        _ => format!("https://{host}"),
    }
}

/// Each host's own upstream, for a forward API of several hosts that names no `upstream`.
fn per_host(
    api: &ApiConfig,
    hosts: &[HostPort],
    kind: ProxyKind,
    fail: &Fail<'_>,
) -> Result<Vec<Upstream>, ConfigError> {
    if kind != ProxyKind::Forward || api.upstream.is_some() || hosts.len() < 2 {
        return Ok(Vec::new());
    }
    let parse =
        |h: &HostPort| Upstream::parse(&host_url(h)).map_err(|e| fail("api.hosts", e.to_string()));
    hosts.iter().map(parse).collect()
}

/// Every API: each `[[api]]` table, or the one of `[spec]` and `proxy.upstream` (`only`,
/// already checked into `spec`, `upstream` and `policy` by the caller).
pub(super) fn apis(
    c: &Config,
    only: &ApiSettings,
    fail: &Fail<'_>,
) -> Result<Vec<ApiSettings>, ConfigError> {
    if c.api.is_empty() {
        let mut only = only.clone();
        if c.proxy.kind == ProxyKind::Forward {
            only.hosts.extend(only.upstream.as_ref().map(HostPort::of));
        }
        return Ok(vec![only]);
    }
    let base = self::first(
        &Config {
            api: Vec::new(),
            ..c.clone()
        },
        fail,
    )?;
    let several = c.api.len() > 1;
    let mut apis = Vec::with_capacity(c.api.len());
    for api in &c.api {
        let ci = fold(&base, api, several, fail)?;
        let upstream = match &ci.proxy.upstream {
            Some(url) => {
                Some(Upstream::parse(url).map_err(|e| fail("api.upstream", e.to_string()))?)
            }
            None => None,
        };
        let hosts = hosts(&api.hosts, fail)?;
        apis.push(ApiSettings {
            name: Some(name(&api.name, fail)?),
            spec: super::spec(&ci, fail)?,
            upstream,
            per_host: per_host(api, &hosts, c.proxy.kind, fail)?,
            hosts,
            prefix: prefix(api.prefix.as_deref(), fail)?,
            policy: super::policy(&ci, fail)?,
        });
    }
    distinct(&apis, c.proxy.kind, fail)?;
    Ok(apis)
}

/// A name fit for a label value and a log line.
fn name(name: &str, fail: &Fail<'_>) -> Result<String, ConfigError> {
    let fits = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
    match !name.is_empty() && name.len() <= 64 && name.bytes().all(fits) {
        true => Ok(name.to_string()),
        false => Err(fail(
            "api.name",
            format!("`{name}`: 1 to 64 letters, digits, `_`, `-` or `.` (it is the `api` label)"),
        )),
    }
}

fn hosts(texts: &[String], fail: &Fail<'_>) -> Result<Vec<HostPort>, ConfigError> {
    texts
        .iter()
        .map(|text| {
            HostPort::parse(text, 443)
                .ok_or_else(|| fail("api.hosts", format!("`{text}` is not a host[:port]")))
        })
        .collect()
}

/// `/github/` as `/github`; a prefix must start with `/`.
fn prefix(text: Option<&str>, fail: &Fail<'_>) -> Result<Option<String>, ConfigError> {
    let Some(text) = text else { return Ok(None) };
    let trimmed = text.trim_end_matches('/');
    match text.starts_with('/') && !trimmed.is_empty() {
        true => Ok(Some(trimmed.to_string())),
        false => Err(fail(
            "api.prefix",
            format!("`{text}` must start with `/` and name a path"),
        )),
    }
}

/// Each request must find one API: names, hosts and prefixes distinct; in forward mode every
/// API names its hosts; in reverse mode at most one API is selected by neither.
fn distinct(apis: &[ApiSettings], kind: ProxyKind, fail: &Fail<'_>) -> Result<(), ConfigError> {
    let mut names = std::collections::HashSet::new();
    let mut hosts = std::collections::HashSet::new();
    let mut prefixes = std::collections::HashSet::new();
    let mut unselected = 0;
    for api in apis {
        let name = api.name.as_deref().unwrap_or_default();
        if !names.insert(name) {
            return Err(fail("api.name", format!("`{name}` names two APIs")));
        }
        for host in &api.hosts {
            if !hosts.insert(host) {
                return Err(fail("api.hosts", format!("`{host}` is served by two APIs")));
            }
        }
        if let Some(prefix) = &api.prefix
            && !prefixes.insert(prefix)
        {
            return Err(fail("api.prefix", format!("`{prefix}` selects two APIs")));
        }
        unselected += usize::from(api.hosts.is_empty() && api.prefix.is_none());
        if kind == ProxyKind::Forward && api.hosts.is_empty() {
            return Err(fail(
                "api.hosts",
                format!(
                    "API `{name}` names no hosts: a forward proxy finds an API by the host asked for"
                ),
            ));
        }
    }
    if kind == ProxyKind::Reverse && apis.len() > 1 && unselected > 1 {
        return Err(fail(
            "api.prefix",
            "several APIs have neither a prefix nor hosts: give each a prefix (or Host names), one at most without".into(),
        ));
    }
    Ok(())
}

/// The forward proxy's settings.
pub(super) fn forward(c: &Config, fail: &Fail<'_>) -> Result<ForwardSettings, ConfigError> {
    let allow = |text: &String| {
        HostPort::parse(text, 443).ok_or_else(|| {
            fail(
                "forward.tunnel_allow",
                format!("`{text}` is not a host[:port]"),
            )
        })
    };
    Ok(ForwardSettings {
        ca_dir: c.forward.ca_dir.clone(),
        unknown_hosts: c.forward.unknown_hosts,
        host_labels: c.forward.host_labels,
        tunnel_allow: c
            .forward
            .tunnel_allow
            .iter()
            .map(allow)
            .collect::<Result<_, _>>()?,
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

    /// Every spelling of one host is that host (issue 49: `127.1` was tunneled unaudited
    /// where `127.0.0.1` was intercepted), and a port that is none is no default.
    #[test]
    fn every_spelling_of_a_host_is_one_host_and_a_bad_port_is_refused() {
        let loopback = Some(HostPort {
            host: "127.0.0.1".into(),
            port: 443,
        });
        for spelling in [
            "127.0.0.1",
            "127.1",
            "2130706433",
            "0x7f.0.0.1",
            "0x7f000001",
            "127.000.000.001",
            "0177.0.0.1",
            "127.0.0.1.",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]",
        ] {
            assert_eq!(HostPort::parse(spelling, 443), loopback, "{spelling}");
            let with_port = format!("{spelling}:443");
            assert_eq!(HostPort::parse(&with_port, 80), loopback, "{with_port}");
        }
        let named = HostPort::parse("API.Test.:8443", 443).unwrap();
        assert_eq!((named.host.as_str(), named.port), ("api.test", 8443));
        assert_eq!(HostPort::parse("[0:0::1]", 443).unwrap().host, "::1");
        for bad in [
            "api.test:99999",
            "api.test:65536",
            "api.test:-1",
            "api.test:0",
            "api.test:44x",
            "api.test:000443",
            "api.test..",
            &format!("{}.test", "a".repeat(300)),
        ] {
            assert_eq!(HostPort::parse(bad, 443), None, "{bad}");
        }
    }
}
