//! `driftwatch_tunnels_total{host, outcome}`: what the forward proxy did with each `CONNECT` or
//! absolute-form request to a host no API serves. The host comes from the client, so only the
//! first `forward.host_labels` hosts get a label of their own; the rest count as `_other`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::labels::BoundedLabel;

/// What became of a request for a host no API serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tunnel {
    /// Its bytes passed on untouched.
    Passed,
    /// `forward.unknown_hosts = "refuse"`: answered 403.
    Refused,
    /// The host could not be reached: answered 502.
    Failed,
}

impl Tunnel {
    fn as_str(self) -> &'static str {
        match self {
            Tunnel::Passed => "tunneled",
            Tunnel::Refused => "refused",
            Tunnel::Failed => "failed",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TunnelLabels {
    host: String,
    outcome: &'static str,
}

pub struct Tunnels {
    family: Family<TunnelLabels, Counter>,
    hosts: BoundedLabel,
}

impl Tunnels {
    pub fn new(registry: &mut Registry, limit: usize) -> Tunnels {
        let family = Family::<TunnelLabels, Counter>::default();
        registry.sub_registry_with_prefix("driftwatch").register(
            "tunnels",
            "Requests for hosts no API serves, by host (first forward.host_labels, then _other) and outcome: tunneled, refused, failed",
            family.clone(),
        );
        // `_other`'s series at zero from the start: a rate sees the first one.
        for outcome in [Tunnel::Passed, Tunnel::Refused, Tunnel::Failed] {
            let labels = TunnelLabels {
                host: "_other".into(),
                outcome: outcome.as_str(),
            };
            let _ = family.get_or_create(&labels);
        }
        Tunnels {
            family,
            hosts: BoundedLabel::new(limit),
        }
    }

    pub fn count(&self, host: &str, outcome: Tunnel) {
        let labels = TunnelLabels {
            host: self.hosts.of(host),
            outcome: outcome.as_str(),
        };
        self.family.get_or_create(&labels).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::{Tunnel, Tunnels};

    #[test]
    fn hosts_past_the_limit_count_as_other() {
        let mut registry = prometheus_client::registry::Registry::default();
        let tunnels = Tunnels::new(&mut registry, 2);
        for host in ["a:443", "b:443", "c:443", "a:443", "d:443"] {
            tunnels.count(host, Tunnel::Passed);
        }
        tunnels.count("e:443", Tunnel::Refused);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let line = |h: &str, o: &str, n: u32| {
            format!("driftwatch_tunnels_total{{host=\"{h}\",outcome=\"{o}\"}} {n}\n")
        };
        assert!(text.contains(&line("a:443", "tunneled", 2)), "{text}");
        assert!(text.contains(&line("b:443", "tunneled", 1)), "{text}");
        assert!(text.contains(&line("_other", "tunneled", 2)), "{text}");
        assert!(text.contains(&line("_other", "refused", 1)), "{text}");
    }
}
