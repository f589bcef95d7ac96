//! One `Config` value for the sidecar, built once from the config file, then flags, then
//! `DRIFTWATCH_*` environment variables (each overriding the one before), and validated before
//! anything starts. An unknown key anywhere is an error naming it: a typo in a config file must
//! not silently leave a default in force. Every key is documented in `config/driftwatch.toml`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::finding::Kind;
use crate::policy::{Action, Mode};

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub spec: SpecConfig,
    pub proxy: ProxyConfig,
    pub upstream_tls: UpstreamTlsConfig,
    pub admin: AdminConfig,
    pub audit: AuditConfig,
    pub enforce: EnforceConfig,
    pub events: EventsConfig,
    pub memory: MemoryConfig,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpecConfig {
    /// The OpenAPI document the traffic is audited against.
    pub path: Option<PathBuf>,
    /// Or a URL to fetch it from (the API's own `/openapi.json`), polled with If-None-Match.
    pub url: Option<String>,
    /// Path prefix stripped before routing, instead of the spec's `servers` URLs.
    pub base_path: Option<String>,
    /// Write semantics by operation id or `"PUT /path/{id}"`: replace, merge, create, additive.
    pub write: HashMap<String, String>,
    /// How often the spec file (or URL) is checked for a change to reload (0: never; SIGHUP
    /// and `POST /spec/reload` still reload).
    pub watch_interval_ms: u64,
    /// Refuse a spec with any part that cannot be compiled, instead of loading the rest with a
    /// warning per skipped part (the default, so real specs with a bad pattern still load).
    pub strict: bool,
}

impl Default for SpecConfig {
    fn default() -> SpecConfig {
        SpecConfig {
            path: None,
            url: None,
            base_path: None,
            write: HashMap::new(),
            watch_interval_ms: 2_000,
            strict: false,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxyConfig {
    pub listen: SocketAddr,
    /// Where requests go: `http://host:port` or `https://host:port`, optionally with a path prefix.
    pub upstream: Option<String>,
    pub mode: Mode,
    /// Keep the client's `Host` instead of the upstream's.
    pub preserve_host: bool,
    /// Add `X-Forwarded-For`, `X-Forwarded-Proto` and `X-Forwarded-Host`.
    pub forwarded_headers: bool,
    /// Add a compact `driftwatch-findings` header to forwarded responses, so an MCP server can
    /// show drift to its agent in observe mode too.
    pub report_header: bool,
    pub connect_timeout_ms: u64,
    /// Until the upstream's response headers arrive.
    pub request_timeout_ms: u64,
    /// How long SIGTERM/SIGINT waits for in-flight requests before exiting.
    pub drain_timeout_ms: u64,
    /// Runtime threads: 0 is one per core; 1 runs everything on one thread (measured about 5 %
    /// more throughput than two threads when the sidecar shares 2 cores with its neighbours).
    pub workers: usize,
    /// PEM certificate chain and key: serve TLS on the listener.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamTlsConfig {
    /// Extra PEM CA certificates trusted besides the webpki roots. Certificates are always verified.
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate chain and key, for upstreams that require mutual TLS.
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// `/metrics`, `/healthz`, `/readyz`, `/findings`, `/spec`. Keep it on loopback or a pod IP.
    pub listen: SocketAddr,
    /// How many recent findings `/findings` keeps.
    pub recent_findings: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// `false` forwards everything unaudited (the pass-through baseline of the load benchmark).
    pub enabled: bool,
    /// Larger request bodies stream through unaudited (counted as `unaudited`).
    pub max_body: usize,
    /// Unknown query parameter names get their own metric label for the first N per
    /// operation, then `_other`; the full name is always in the event log.
    pub unknown_param_labels: usize,
    /// Response bodies up to this many bytes (decoded) are copied and read, after the last
    /// byte went to the client: for the response audit and for silent-clear memory.
    pub max_response_body: usize,
    /// Share of responses whose body is audited (0.0 to 1.0), to bound the cost on hot
    /// endpoints; status and media type are checked on every response. Memory reads are
    /// never sampled.
    pub response_sample_rate: f64,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct EnforceConfig {
    /// Action per finding kind in enforce mode, over the default (block `error` and `critical`).
    pub kinds: HashMap<String, Action>,
    /// Action per operation id, then kind, over `kinds`.
    pub operations: HashMap<String, HashMap<String, Action>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventsConfig {
    /// `stdout`, `none`, or a file path to append JSON lines to.
    pub output: String,
    /// The header naming the MCP tool that made the request.
    pub tool_header: String,
    pub request_id_header: String,
    /// Headers never logged, besides Authorization, Cookie, Set-Cookie, Proxy-Authorization.
    pub secret_headers: Vec<String>,
    /// Log body and parameter values in events. Off: only names and types.
    pub log_values: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Remember GET responses of resources that have a replace write (silent-clear detection).
    pub enabled: bool,
    /// Resources remembered at most (least recently used dropped first).
    pub max_entries: usize,
    /// Seconds a remembered GET stays valid.
    pub ttl_secs: u64,
    /// The header whose value scopes memory per credential, so two users never share it.
    pub scope_header: String,
    /// Per operation id: write field name to read field name where the models differ,
    /// e.g. `updateChannel = { graphicsElementIds = "graphicsElements" }`.
    pub field_map: HashMap<String, HashMap<String, String>>,
    /// The GET that shows a replace write's resource where their path templates differ:
    /// write (id or `"PUT /path/{id}"`) to read (id or `"GET /path/{id}"`); path parameter
    /// values are matched in order.
    pub resources: HashMap<String, String>,
}

impl Default for MemoryConfig {
    fn default() -> MemoryConfig {
        MemoryConfig {
            enabled: true,
            max_entries: 10_000,
            ttl_secs: 3_600,
            scope_header: "authorization".into(),
            field_map: HashMap::new(),
            resources: HashMap::new(),
        }
    }
}

impl Default for ProxyConfig {
    fn default() -> ProxyConfig {
        ProxyConfig {
            listen: ([127, 0, 0, 1], 8080).into(),
            upstream: None,
            mode: Mode::Observe,
            preserve_host: false,
            forwarded_headers: true,
            report_header: false,
            connect_timeout_ms: 2_000,
            request_timeout_ms: 30_000,
            drain_timeout_ms: 10_000,
            workers: 0,
            tls_cert: None,
            tls_key: None,
        }
    }
}

impl Default for AdminConfig {
    fn default() -> AdminConfig {
        AdminConfig {
            listen: ([127, 0, 0, 1], 9090).into(),
            recent_findings: 1_000,
        }
    }
}

impl Default for AuditConfig {
    fn default() -> AuditConfig {
        AuditConfig {
            enabled: true,
            max_body: 1 << 20,
            unknown_param_labels: 20,
            max_response_body: 1 << 20,
            response_sample_rate: 1.0,
        }
    }
}

impl Default for EventsConfig {
    fn default() -> EventsConfig {
        EventsConfig {
            output: "stdout".into(),
            tool_header: "x-mcp-tool".into(),
            request_id_header: "x-request-id".into(),
            secret_headers: Vec::new(),
            log_values: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: {reason}")]
    Invalid { origin: String, reason: String },
}

fn invalid(origin: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        origin: origin.into(),
        reason: reason.into(),
    }
}

/// Sections of the file, for mapping `DRIFTWATCH_SECTION_KEY` to `[section] key`.
const SECTIONS: [&str; 8] = [
    "upstream_tls",
    "spec",
    "proxy",
    "admin",
    "audit",
    "enforce",
    "events",
    "memory",
];

impl Config {
    /// The choices the contract takes from the config: base path, write semantics, linked reads.
    pub fn contract_options(&self) -> crate::contract::ContractOptions {
        crate::contract::ContractOptions {
            base_path: self.spec.base_path.clone(),
            write_overrides: self
                .spec
                .write
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), crate::contract::WriteSemantics::parse(v)?)))
                .collect(),
            read_for: self.memory.resources.clone(),
            strict: self.spec.strict,
        }
    }

    /// Build the config: `file` (if any), then `flags` (`("proxy.listen", "127.0.0.1:8080")`),
    /// then `env` (`DRIFTWATCH_PROXY_LISTEN=...`), then validate.
    pub fn load(
        file: Option<&Path>,
        flags: &[(&str, String)],
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let mut table = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
                    file: path.into(),
                    source,
                })?;
                toml::from_str::<toml::Table>(&text)
                    .map_err(|e| invalid(path.display().to_string(), e.to_string()))?
            }
            None => toml::Table::new(),
        };
        for (key, value) in flags {
            let (section, name) = key.split_once('.').unwrap_or(("proxy", key));
            set(
                &mut table,
                section,
                name,
                toml::Value::String(value.clone()),
            );
        }
        for (name, value) in env {
            let Some(rest) = name.strip_prefix("DRIFTWATCH_") else {
                continue;
            };
            let rest = rest.to_ascii_lowercase();
            let section = SECTIONS.iter().find(|s| rest.starts_with(&format!("{s}_")));
            let Some(section) = section else {
                return Err(invalid(
                    format!("environment variable {name}"),
                    "unknown setting: expected DRIFTWATCH_<SECTION>_<KEY>, e.g. DRIFTWATCH_PROXY_UPSTREAM",
                ));
            };
            set(
                &mut table,
                section,
                &rest[section.len() + 1..],
                scalar(&value),
            );
        }
        let origin = file
            .map(|f| f.display().to_string())
            .unwrap_or_else(|| "configuration".into());
        let config = Config::deserialize(toml::Value::Table(table))
            .map_err(|e| invalid(&origin, e.to_string()))?;
        config
            .validate()
            .map_err(|reason| invalid(origin, reason))?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        for (name, action) in self
            .enforce
            .kinds
            .iter()
            .chain(self.enforce.operations.values().flatten())
        {
            match Kind::parse(name) {
                None => return Err(format!("enforce: unknown finding kind `{name}`")),
                Some(kind)
                    if kind.blame() == crate::finding::Blame::Server
                        && *action == Action::Block =>
                {
                    return Err(format!(
                        "enforce: `{name}` is found on responses, which have already gone to the client: response findings never block"
                    ));
                }
                Some(_) => {}
            }
        }
        for (op, semantics) in &self.spec.write {
            if crate::contract::WriteSemantics::parse(semantics).is_none() {
                return Err(format!(
                    "spec.write.\"{op}\": `{semantics}` is not one of replace, merge, create, additive"
                ));
            }
        }
        if self.proxy.tls_cert.is_some() != self.proxy.tls_key.is_some() {
            return Err("proxy: tls_cert and tls_key go together".into());
        }
        if self.upstream_tls.client_cert.is_some() != self.upstream_tls.client_key.is_some() {
            return Err("upstream_tls: client_cert and client_key go together".into());
        }
        if self.spec.path.is_some() && self.spec.url.is_some() {
            return Err("spec: set path or url, not both".into());
        }
        if self.audit.max_body == 0 {
            return Err("audit.max_body must be positive".into());
        }
        if !(0.0..=1.0).contains(&self.audit.response_sample_rate) {
            return Err("audit.response_sample_rate must be between 0.0 and 1.0".into());
        }
        Ok(())
    }
}

fn set(table: &mut toml::Table, section: &str, key: &str, value: toml::Value) {
    let entry = table
        .entry(section.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(t) = entry {
        t.insert(key.to_string(), value);
    }
}

/// An environment value as TOML (`true`, `5`, `["a"]`), else as a plain string.
fn scalar(value: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("driftwatch-config-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn file_then_flags_then_env() {
        let file = write(
            "a.toml",
            "[proxy]\nlisten = \"127.0.0.1:1000\"\nupstream = \"http://a\"\nmode = \"enforce\"\n[audit]\nmax_body = 10\n",
        );
        let flags = [("proxy.listen", "127.0.0.1:2000".to_string())];
        let env = [
            (
                "DRIFTWATCH_PROXY_LISTEN".to_string(),
                "127.0.0.1:3000".to_string(),
            ),
            ("DRIFTWATCH_AUDIT_MAX_BODY".into(), "20".into()),
            ("HOME".into(), "/root".into()),
        ];
        let c = Config::load(Some(&file), &flags, env).unwrap();
        assert_eq!(c.proxy.listen, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(
            (c.proxy.mode, c.audit.max_body, c.proxy.upstream.as_deref()),
            (Mode::Enforce, 20, Some("http://a"))
        );
        let c = Config::load(Some(&file), &flags, []).unwrap();
        assert_eq!(c.proxy.listen, "127.0.0.1:2000".parse().unwrap());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let file = write("b.toml", "[proxy]\nlisten_addr = \"127.0.0.1:1\"\n");
        let e = Config::load(Some(&file), &[], []).unwrap_err().to_string();
        assert!(e.contains("unknown field `listen_addr`"), "{e}");
        let e = Config::load(None, &[], [("DRIFTWATCH_PROXI_LISTEN".into(), "x".into())])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("environment variable DRIFTWATCH_PROXI_LISTEN: unknown setting"),
            "{e}"
        );
        let file = write(
            "c.toml",
            "[enforce.kinds]\nunknown_query_parameter = \"block\"\n",
        );
        let e = Config::load(Some(&file), &[], []).unwrap_err().to_string();
        assert!(
            e.ends_with("enforce: unknown finding kind `unknown_query_parameter`"),
            "{e}"
        );
        let file = write(
            "d.toml",
            "[enforce.kinds]\nunknown_query_param = \"stop\"\n",
        );
        let e = Config::load(Some(&file), &[], []).unwrap_err().to_string();
        assert!(e.contains("unknown variant `stop`"), "{e}");
    }

    #[test]
    fn every_section_of_the_documented_config_is_reachable_from_the_environment() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/driftwatch.toml");
        let table: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut sections: Vec<&str> = table.keys().map(String::as_str).collect();
        sections.sort();
        let mut known = SECTIONS.to_vec();
        known.sort();
        assert_eq!(sections, known);
        let env = [("DRIFTWATCH_MEMORY_MAX_ENTRIES".to_string(), "5".to_string())];
        assert_eq!(Config::load(None, &[], env).unwrap().memory.max_entries, 5);
    }

    #[test]
    fn the_documented_example_config_is_valid_and_equals_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/driftwatch.toml");
        let c = Config::load(Some(&path), &[], []).unwrap();
        let d = Config::default();
        assert_eq!(format!("{:?}", c.proxy), format!("{:?}", d.proxy));
        assert_eq!(format!("{:?}", c.audit), format!("{:?}", d.audit));
        assert_eq!(format!("{:?}", c.admin), format!("{:?}", d.admin));
        assert_eq!(format!("{:?}", c.events), format!("{:?}", d.events));
        assert_eq!(format!("{:?}", c.memory), format!("{:?}", d.memory));
    }
}
