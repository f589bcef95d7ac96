//! Where a tunnel may go. A forward proxy tunnels hosts no API serves (`forward.unknown_hosts
//! = "tunnel"`), and a client chooses them: left open, a `CONNECT 127.0.0.1:6379` reaches the
//! host's own services, `169.254.169.254:80` the cloud's metadata, and the sidecar's admin
//! port its reload. So the host is resolved once, here, each address checked, and the checked
//! address dialed (no second lookup for a DNS answer to change between check and dial). A
//! loopback, link-local or unspecified address, or one of driftwatch's own listeners, is
//! denied unless `forward.tunnel_allow` names the `host:port`; a denial is a 403.

use std::net::{IpAddr, SocketAddr};

use tokio::net::TcpStream;

use super::Sidecar;
use crate::settings::HostPort;

/// Why a tunnel was not opened.
#[derive(Debug)]
pub(super) enum NotOpened {
    /// The policy denies every address the host resolves to: the client's to change, or the
    /// operator's to allow.
    Denied(String),
    /// The host could not be resolved or reached.
    Unreachable(String),
}

/// A connection to `host` for a tunnel, within `proxy.connect_timeout_ms`.
pub(super) async fn dial(s: &Sidecar, host: &HostPort) -> Result<TcpStream, NotOpened> {
    let timeout = s.settings.proxy.connect_timeout;
    let late =
        || NotOpened::Unreachable(format!("no connection within {} ms", timeout.as_millis()));
    let opened = tokio::time::timeout(timeout, async {
        let found = tokio::net::lookup_host((host.host.as_str(), host.port))
            .await
            .map_err(|e| NotOpened::Unreachable(e.to_string()))?;
        let allowed = s.settings.forward.tunnel_allow.contains(host);
        let own = [s.settings.proxy.listen, s.settings.admin.listen];
        let (open, denied): (Vec<SocketAddr>, Vec<SocketAddr>) =
            found.partition(|to| allowed || !denied(*to, &own));
        let mut last = match denied.first() {
            Some(to) => NotOpened::Denied(format!(
                "{host} resolves to {}, a loopback, link-local or unspecified address or driftwatch's own listener, which a tunnel does not reach: name it in forward.tunnel_allow to allow it",
                to.ip()
            )),
            None => NotOpened::Unreachable("the host has no address".into()),
        };
        for to in open {
            match TcpStream::connect(to).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(e) => last = NotOpened::Unreachable(e.to_string()),
            }
        }
        Err(last)
    })
    .await;
    opened.unwrap_or_else(|_| Err(late()))
}

/// Whether the policy denies a tunnel to `to`.
fn denied(to: SocketAddr, own: &[SocketAddr]) -> bool {
    let ip = to.ip().to_canonical();
    let local = match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.is_unspecified(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    };
    local
        || own
            .iter()
            .any(|o| o.port() == to.port() && o.ip().to_canonical() == ip)
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_link_local_unspecified_and_own_listeners_are_denied() {
        let own = ["10.0.0.5:9090".parse().unwrap()];
        let denied = |to: &str| super::denied(to.parse().unwrap(), &own);
        for to in [
            "127.0.0.1:6379",
            "127.9.9.9:1",
            "[::1]:443",
            "[::ffff:127.0.0.1]:443",
            "169.254.169.254:80",
            "[fe80::1]:80",
            "0.0.0.0:80",
            "[::]:80",
            "10.0.0.5:9090",
        ] {
            assert!(denied(to), "{to}");
        }
        for to in ["10.0.0.5:443", "93.184.216.34:443", "[2606:4700::1]:443"] {
            assert!(!denied(to), "{to}");
        }
    }
}
