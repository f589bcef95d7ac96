//! The sidecar's settings as one validated value, built once at start from the layered config
//! (`config`: file < env < flags): header names are `HeaderName`s, times are `Duration`s, the
//! upstream is a parsed URL, enforce actions are typed maps in a [`Policy`]. Every invalid value
//! is refused here, naming its key and the source that set it; nothing downstream parses,
//! checks or edits a setting again.

mod apis;
mod telemetry;
mod upstream;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;

pub use apis::{ApiSettings, ForwardSettings, HostPort};
pub use telemetry::{Compression, Export, Propagation, Root, Sampler, TelemetrySettings};
pub use upstream::{Upstream, shown as url_shown};

use crate::config::{
    AdminConfig, AuditConfig, Config, ConfigError, Layers, MemoryBackend, Origins,
    UpstreamTlsConfig,
};
use crate::contract::{ContractOptions, WriteSemantics};
use crate::finding::Blame;
use crate::listener::Bounds;
use crate::memory::HashKey;
use crate::policy::{Action, Policy};
use crate::sink::EventOutput;
use crate::spec::{LoadOptions, RefRoot};

#[derive(Debug, Clone)]
pub struct Settings {
    pub proxy: ProxySettings,
    pub upstream_tls: UpstreamTlsConfig,
    pub admin: AdminConfig,
    pub audit: AuditConfig,
    pub events: EventSettings,
    pub memory: MemorySettings,
    pub incidents: IncidentSettings,
    /// `DRIFTWATCH_` variables left out as Kubernetes service links; `serve` says so once.
    pub service_links: Vec<String>,
    /// The token `admin.token_file` holds, if set.
    pub admin_token: Option<crate::admin::Token>,
    /// The admin listener's bounds.
    pub admin_bounds: Bounds,
    pub mcp: McpSettings,
    /// The forward proxy's CA and unknown hosts (read when `proxy.kind` is forward).
    pub forward: ForwardSettings,
    /// Every API served: each `[[api]]`, or the one of `[spec]` and `proxy.upstream`; never
    /// empty. Each has its own spec, upstream and policy.
    pub apis: Vec<ApiSettings>,
    /// OpenTelemetry traces: off unless `[telemetry]` names a collector.
    pub telemetry: TelemetrySettings,
}

/// `driftwatch mcp`'s listener and the bounds on a message before it is parsed.
#[derive(Debug, Clone)]
pub struct McpSettings {
    pub bounds: Bounds,
    pub max_sessions: usize,
    pub session_idle_timeout: Duration,
    /// `max_message_depth`, `max_message_values` and `max_message_bytes`.
    pub messages: crate::mcp::message::Limits,
    /// `wrap`: a refused call's result says why (`mcp.explain_refusals`).
    pub explain_refusals: bool,
}

impl ProxySettings {
    /// The proxy listener's bounds.
    pub fn bounds(&self) -> Bounds {
        Bounds {
            listener: "proxy",
            max_connections: self.max_connections,
            header_read: self.header_read_timeout,
            idle: self.idle_timeout,
        }
    }

    /// How many serving threads `proxy.workers` asks for: 0 is one per core.
    pub fn serving_threads(&self) -> usize {
        match self.workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

/// Where the spec comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecSource {
    /// Given by the caller (the demo's embedded spec).
    Embedded,
    File(PathBuf),
    /// Without its credentials, which are sent as `Authorization: Basic`.
    Url(SpecUrl),
    /// Several files served as one API, each with the base path it is served under.
    Documents(Vec<(PathBuf, String)>),
}

/// `spec.url`, with its `user:password@` taken out: the URL is what logs, errors, `/spec` and
/// `serve --check` show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecUrl {
    pub uri: http::Uri,
    pub basic: Option<http::HeaderValue>,
}

#[derive(Debug, Clone)]
pub struct SpecSettings {
    pub source: SpecSource,
    /// What the contract takes from the config: base path, write semantics, linked reads.
    pub contract: ContractOptions,
    /// How often the source is checked for a change (`None`: never; SIGHUP still reloads).
    pub watch_interval: Option<Duration>,
    /// What reading the spec may read: bytes, and where `$ref`s to files may point.
    pub load: LoadOptions,
}

#[derive(Debug, Clone)]
pub struct ProxySettings {
    pub listen: SocketAddr,
    pub kind: crate::config::ProxyKind,
    pub preserve_host: bool,
    pub forwarded_headers: bool,
    pub preserve_header_case: bool,
    pub report_header: bool,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub drain_timeout: Duration,
    pub max_connections: usize,
    /// `None`: off.
    pub header_read_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub body_stall_timeout: Option<Duration>,
    /// Serving threads (0: one per core); see `proxy::run`.
    pub workers: usize,
    /// PEM certificate chain and key for TLS on the listener.
    pub tls: Option<(PathBuf, PathBuf)>,
}

#[derive(Debug, Clone)]
pub struct EventSettings {
    pub output: EventOutput,
    pub tool_header: HeaderName,
    pub request_id_header: HeaderName,
    /// Headers never logged, besides the built-in credential headers.
    pub secret_headers: Vec<HeaderName>,
    pub log_values: bool,
    pub max_event_bytes: usize,
}

#[derive(Debug, Clone)]
pub struct MemorySettings {
    pub enabled: bool,
    pub max_entries: usize,
    pub ttl: Duration,
    pub scope_header: HeaderName,
    /// Per operation id: write field name to read field name.
    pub field_map: HashMap<String, HashMap<String, String>>,
    /// Keys the value and credential hashes (`memory.hash_key_file`, else random).
    pub hash_key: HashKey,
    /// The store replicas share (`memory.backend = "redis"`), if any.
    pub shared: Option<SharedStore>,
}

/// `[incidents]`, with the seal its key file makes.
#[derive(Debug, Clone)]
pub struct IncidentSettings {
    pub max: usize,
    pub max_bytes: usize,
    pub keep_values: bool,
    pub max_value_bytes: usize,
    pub operations: Vec<String>,
    /// Seals what incidents put in the store replicas share (`incidents.seal_key_file`).
    pub seal: Option<Arc<crate::memory::seal::Seal>>,
}

/// A Redis or Valkey that replicas share the memory through.
#[derive(Clone)]
pub struct SharedStore {
    pub url: redis::ConnectionInfo,
    /// The URL as the operator may see it: its password left out.
    pub shown: String,
    pub key_prefix: String,
    pub deadline: Duration,
    /// PEM roots for a `rediss://` store (`memory.redis_ca_file`); `None`: the system's.
    pub ca: Option<Vec<u8>>,
}

impl std::fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedStore")
            .field("url", &self.shown)
            .field("key_prefix", &self.key_prefix)
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl Default for Settings {
    fn default() -> Settings {
        let defaults = Config::default();
        Settings::check(&defaults, &Origins::default()).expect("the defaults are valid")
    }
}

impl Settings {
    /// Layer file, environment and flags, then check and type every value.
    pub fn load(layers: Layers<'_>) -> Result<Settings, ConfigError> {
        let (config, origins) = layers.merge()?;
        Settings::check(&config, &origins)
    }

    /// Check a config built in code (tests, the demo): every key's origin is the default.
    pub fn from_config(config: &Config) -> Result<Settings, ConfigError> {
        Settings::check(config, &Origins::default())
    }

    /// The first API's upstream: the one API of the commands that serve one (`mcp`, `demo`).
    pub fn upstream(&self) -> Result<&Upstream, ConfigError> {
        self.apis[0].upstream()
    }

    /// Every section checked and typed; the first error names its key and where it was set.
    fn check(c: &Config, origins: &Origins) -> Result<Settings, ConfigError> {
        let fail = |key: &str, reason: String| ConfigError::Invalid {
            key: key.into(),
            origin: origins.of(key),
            reason,
        };
        let raw = c;
        let c = &apis::first(raw, &fail)?;
        positive(c, &fail)?;
        // The API of `[spec]` and `proxy.upstream`, when there is no `[[api]]`.
        let only = ApiSettings {
            name: None,
            spec: spec(c, &fail)?,
            upstream: upstream(c, &fail)?,
            per_host: Vec::new(),
            hosts: Vec::new(),
            prefix: None,
            policy: policy(c, &fail)?,
        };
        pair(
            "upstream_tls.client_cert",
            (&c.upstream_tls.client_cert, &c.upstream_tls.client_key),
            "client_cert and client_key",
            &fail,
        )?;
        Ok(Settings {
            apis: apis::apis(raw, &only, &fail)?,
            forward: apis::forward(c, &fail)?,
            proxy: proxy(c, &fail)?,
            upstream_tls: c.upstream_tls.clone(),
            admin: c.admin.clone(),
            audit: c.audit.clone(),
            events: events(c, &fail)?,
            memory: memory(c, &fail)?,
            incidents: incidents(c, &fail)?,
            service_links: origins.service_links().to_vec(),
            admin_token: admin_token(c, &fail)?,
            admin_bounds: bounds(
                "admin",
                c.admin.max_connections,
                c.admin.header_read_timeout_ms,
                c.admin.idle_timeout_ms,
            ),
            mcp: mcp(c),
            telemetry: telemetry::telemetry(c, origins, &fail)?,
        })
    }
}

/// `name` as a header name, or why it is none.
fn header(key: &str, name: &str, fail: &Fail<'_>) -> Result<HeaderName, ConfigError> {
    HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| fail(key, format!("`{name}` is not a valid header name")))
}

/// Two files that go together (a certificate and its key): both, or neither.
fn pair(
    key: &str,
    (a, b): (&Option<PathBuf>, &Option<PathBuf>),
    what: &str,
    fail: &Fail<'_>,
) -> Result<Option<(PathBuf, PathBuf)>, ConfigError> {
    match (a, b) {
        (Some(a), Some(b)) => Ok(Some((a.clone(), b.clone()))),
        (None, None) => Ok(None),
        _ => Err(fail(key, format!("{what} go together"))),
    }
}

/// The counts and timeouts that must not be zero, and the sample rate within 0 to 1.
fn positive(c: &Config, fail: &Fail<'_>) -> Result<(), ConfigError> {
    // Zero is not "off" here: every request would time out at once (a 504 each).
    for (key, ms) in [
        ("proxy.request_timeout_ms", c.proxy.request_timeout_ms),
        ("proxy.connect_timeout_ms", c.proxy.connect_timeout_ms),
    ] {
        if ms == 0 {
            return Err(fail(
                key,
                "must be positive (no request could wait for the API)".into(),
            ));
        }
    }
    let positive = [
        ("proxy.max_connections", c.proxy.max_connections),
        ("admin.max_connections", c.admin.max_connections),
        ("mcp.max_connections", c.mcp.max_connections),
        ("mcp.max_sessions", c.mcp.max_sessions),
        ("mcp.max_message_depth", c.mcp.max_message_depth),
        ("mcp.max_message_values", c.mcp.max_message_values),
        ("mcp.max_message_bytes", c.mcp.max_message_bytes),
        (
            "mcp.session_idle_timeout_ms",
            usize::try_from(c.mcp.session_idle_timeout_ms).unwrap_or(usize::MAX),
        ),
        ("audit.max_body", c.audit.max_body),
        ("spec.max_ref_depth", c.spec.max_ref_depth),
        ("spec.max_compiled_schemas", c.spec.max_compiled_schemas),
        ("audit.max_findings", c.audit.max_findings),
    ];
    for (key, value) in positive {
        if value == 0 {
            return Err(fail(key, "must be positive".into()));
        }
    }
    if !(0.0..=1.0).contains(&c.audit.response_sample_rate) {
        return Err(fail(
            "audit.response_sample_rate",
            "must be between 0.0 and 1.0".into(),
        ));
    }
    Ok(())
}

/// `proxy.upstream`, parsed; `None` where no proxy runs (`check`).
fn upstream(c: &Config, fail: &Fail<'_>) -> Result<Option<Upstream>, ConfigError> {
    c.proxy
        .upstream
        .as_ref()
        .map(|url| Upstream::parse(url).map_err(|e| fail("proxy.upstream", e.to_string())))
        .transpose()
}

/// The `[proxy]` section: its listener, timeouts and bounds.
fn proxy(c: &Config, fail: &Fail<'_>) -> Result<ProxySettings, ConfigError> {
    Ok(ProxySettings {
        listen: c.proxy.listen,
        kind: c.proxy.kind,
        preserve_host: c.proxy.preserve_host,
        forwarded_headers: c.proxy.forwarded_headers,
        preserve_header_case: c.proxy.preserve_header_case,
        report_header: c.proxy.report_header,
        connect_timeout: Duration::from_millis(c.proxy.connect_timeout_ms),
        request_timeout: Duration::from_millis(c.proxy.request_timeout_ms),
        drain_timeout: Duration::from_millis(c.proxy.drain_timeout_ms),
        max_connections: c.proxy.max_connections,
        header_read_timeout: millis(c.proxy.header_read_timeout_ms),
        idle_timeout: millis(c.proxy.idle_timeout_ms),
        body_stall_timeout: millis(c.proxy.body_stall_timeout_ms),
        workers: c.proxy.workers,
        tls: pair(
            "proxy.tls_cert",
            (&c.proxy.tls_cert, &c.proxy.tls_key),
            "tls_cert and tls_key",
            fail,
        )?,
    })
}

/// The `[events]` section.
fn events(c: &Config, fail: &Fail<'_>) -> Result<EventSettings, ConfigError> {
    let events = EventSettings {
        output: EventOutput::parse(&c.events.output),
        tool_header: header("events.tool_header", &c.events.tool_header, fail)?,
        request_id_header: header(
            "events.request_id_header",
            &c.events.request_id_header,
            fail,
        )?,
        secret_headers: (c.events.secret_headers.iter())
            .map(|h| header("events.secret_headers", h, fail))
            .collect::<Result<_, _>>()?,
        log_values: c.events.log_values,
        max_event_bytes: c.events.max_event_bytes,
    };
    if events.max_event_bytes < MIN_EVENT_BYTES {
        return Err(fail(
            "events.max_event_bytes",
            format!("must be at least {MIN_EVENT_BYTES} (an event's head)"),
        ));
    }
    Ok(events)
}

/// The `[memory]` section.
fn memory(c: &Config, fail: &Fail<'_>) -> Result<MemorySettings, ConfigError> {
    Ok(MemorySettings {
        enabled: c.memory.enabled,
        max_entries: c.memory.max_entries,
        ttl: Duration::from_secs(c.memory.ttl_secs),
        scope_header: header("memory.scope_header", &c.memory.scope_header, fail)?,
        field_map: c.memory.field_map.clone(),
        hash_key: hash_key(c, fail)?,
        shared: shared_store(c, fail)?,
    })
}

/// The `[mcp]` section: the gateway's listener and the bounds of a message.
fn mcp(c: &Config) -> McpSettings {
    McpSettings {
        bounds: bounds(
            "mcp",
            c.mcp.max_connections,
            c.mcp.header_read_timeout_ms,
            c.mcp.idle_timeout_ms,
        ),
        max_sessions: c.mcp.max_sessions,
        session_idle_timeout: Duration::from_millis(c.mcp.session_idle_timeout_ms),
        messages: crate::mcp::message::Limits {
            depth: c.mcp.max_message_depth,
            values: c.mcp.max_message_values,
            bytes: c.mcp.max_message_bytes,
        },
        explain_refusals: c.mcp.explain_refusals,
    }
}

/// The hash key from `memory.hash_key_file`, or a random one.
fn hash_key(c: &Config, fail: &Fail<'_>) -> Result<HashKey, ConfigError> {
    let Some(path) = &c.memory.hash_key_file else {
        return Ok(HashKey::random());
    };
    Ok(HashKey::from_secret(&secret_file(
        "memory.hash_key_file",
        path,
        fail,
    )?))
}

/// The shared store of `memory.backend = "redis"`: its URL checked, its password read.
fn shared_store(c: &Config, fail: &Fail<'_>) -> Result<Option<SharedStore>, ConfigError> {
    use redis::IntoConnectionInfo;
    let m = &c.memory;
    if m.backend == MemoryBackend::Local {
        return Ok(None);
    }
    let Some(url) = &m.redis_url else {
        return Err(fail(
            "memory.redis_url",
            "memory.backend = \"redis\" needs the store's URL (redis://host:6379)".into(),
        ));
    };
    if m.hash_key_file.is_none() {
        return Err(fail(
            "memory.hash_key_file",
            "replicas sharing a memory must share its hash key: give each the same secret file"
                .into(),
        ));
    }
    if m.redis_deadline_ms == 0 {
        return Err(fail("memory.redis_deadline_ms", "must be positive".into()));
    }
    let mut parsed = url::Url::parse(url).map_err(|e| fail("memory.redis_url", e.to_string()))?;
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("****"));
    }
    let shown = parsed.to_string();
    let mut info = url
        .as_str()
        .into_connection_info()
        .map_err(|e| fail("memory.redis_url", format!("{shown}: {e}")))?;
    if let Some(path) = &m.redis_password_file {
        let password = secret_file("memory.redis_password_file", path, fail)?;
        let password = String::from_utf8(password)
            .map_err(|_| fail("memory.redis_password_file", "is not UTF-8 text".into()))?;
        let redis = info.redis_settings().clone().set_password(password);
        info = info.set_redis_settings(redis);
    }
    let ca = match &m.redis_ca_file {
        None => None,
        Some(_) if !url.starts_with("rediss://") => {
            return Err(fail(
                "memory.redis_ca_file",
                "checks a TLS store's certificate: memory.redis_url must be rediss://".into(),
            ));
        }
        Some(path) => Some(
            std::fs::read(path)
                .map_err(|e| fail("memory.redis_ca_file", format!("{}: {e}", path.display())))?,
        ),
    };
    Ok(Some(SharedStore {
        url: info,
        shown,
        key_prefix: m.redis_key_prefix.clone(),
        deadline: Duration::from_millis(m.redis_deadline_ms),
        ca,
    }))
}

/// `[incidents]`: values are kept only behind the admin token, which guards `/incidents`, and
/// leave the process for a shared store only sealed.
fn incidents(c: &Config, fail: &Fail<'_>) -> Result<IncidentSettings, ConfigError> {
    let i = &c.incidents;
    if i.keep_values && c.admin.token_file.is_none() {
        return Err(fail(
            "incidents.keep_values",
            "kept values are served only behind the admin token: set admin.token_file too".into(),
        ));
    }
    let shared = c.memory.backend == crate::config::MemoryBackend::Redis;
    if i.keep_values && shared && i.seal_key_file.is_none() {
        return Err(fail(
            "incidents.keep_values",
            "with memory.backend = \"redis\", kept values go to the store sealed: set incidents.seal_key_file (the same secret on every replica)".into(),
        ));
    }
    let seal = match &i.seal_key_file {
        Some(path) => {
            let secret = secret_file("incidents.seal_key_file", path, fail)?;
            Some(Arc::new(crate::memory::seal::Seal::new(&secret)))
        }
        None => None,
    };
    Ok(IncidentSettings {
        max: i.max,
        max_bytes: i.max_bytes,
        keep_values: i.keep_values,
        max_value_bytes: i.max_value_bytes,
        operations: i.operations.clone(),
        seal,
    })
}

/// The bearer token from `admin.token_file`, if set.
fn admin_token(c: &Config, fail: &Fail<'_>) -> Result<Option<crate::admin::Token>, ConfigError> {
    let Some(path) = &c.admin.token_file else {
        return Ok(None);
    };
    let secret = secret_file("admin.token_file", path, fail)?;
    Ok(Some(crate::admin::Token::new(&secret)))
}

/// A secret a file holds (a mounted Secret): its bytes, trailing whitespace aside, at least 16.
fn secret_file(key: &str, path: &Path, fail: &Fail<'_>) -> Result<Vec<u8>, ConfigError> {
    let mut secret =
        std::fs::read(path).map_err(|e| fail(key, format!("{}: {e}", path.display())))?;
    secret.truncate(secret.trim_ascii_end().len());
    if secret.len() < 16 {
        return Err(fail(
            key,
            format!("{}: the secret must be at least 16 bytes", path.display()),
        ));
    }
    Ok(secret)
}

/// A bound in milliseconds, 0 for none.
fn millis(ms: u64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms))
}

/// A listener's bounds from its section's three keys (a timeout of 0 is off).
fn bounds(listener: &'static str, max_connections: usize, header_ms: u64, idle_ms: u64) -> Bounds {
    Bounds {
        listener,
        max_connections,
        header_read: millis(header_ms),
        idle: millis(idle_ms),
    }
}

/// An event's head (path, headers, error) fits in this, its peer text being cut.
const MIN_EVENT_BYTES: usize = 8192;

type Fail<'a> = dyn Fn(&str, String) -> ConfigError + 'a;

/// No upstream where a proxy needs one: where it can be set.
fn missing_upstream() -> ConfigError {
    ConfigError::Missing {
        key: "proxy.upstream".into(),
        how: "pass --upstream, set proxy.upstream or DRIFTWATCH_PROXY_UPSTREAM, or an [[api]]'s upstream".into(),
    }
}

fn spec(c: &Config, fail: &Fail<'_>) -> Result<SpecSettings, ConfigError> {
    let source = match documents(c, fail)? {
        Some(documents) => documents,
        None => one_document(c, fail)?,
    };
    let write: HashMap<String, WriteSemantics> = c.spec.write.clone();
    spec_settings(c, source, write)
}

/// `spec.documents`, checked: alone (no path, url or base_path beside it), each base path a
/// path.
fn documents(c: &Config, fail: &Fail<'_>) -> Result<Option<SpecSource>, ConfigError> {
    if c.spec.documents.is_empty() {
        return Ok(None);
    }
    let key = "spec.documents";
    if c.spec.path.is_some() || c.spec.url.is_some() || c.spec.base_path.is_some() {
        let why = "names the spec's files and their base paths: set it instead of spec.path, spec.url and spec.base_path";
        return Err(fail(key, why.into()));
    }
    let mut out = Vec::with_capacity(c.spec.documents.len());
    for d in &c.spec.documents {
        if !d.base_path.starts_with('/') {
            let why = format!(
                "base_path `{}` must start with `/` (`/rest/agile/1.0`)",
                d.base_path
            );
            return Err(fail(key, why));
        }
        out.push((d.spec.clone(), d.base_path.clone()));
    }
    Ok(Some(SpecSource::Documents(out)))
}

fn one_document(c: &Config, fail: &Fail<'_>) -> Result<SpecSource, ConfigError> {
    Ok(match (&c.spec.path, &c.spec.url) {
        (Some(_), Some(_)) => {
            return Err(fail(
                "spec.url",
                "set spec.path or spec.url, not both".into(),
            ));
        }
        (Some(path), None) => SpecSource::File(path.clone()),
        (None, Some(url)) => {
            let uri = url
                .parse::<http::Uri>()
                .ok()
                .filter(|u| matches!(u.scheme_str(), Some("http" | "https")))
                .ok_or_else(|| {
                    let shown = upstream::shown(url);
                    fail("spec.url", format!("`{shown}` is not an http(s) URL"))
                })?;
            let upstream::Credentialed { uri, basic } = upstream::Credentialed::split(uri);
            SpecSource::Url(SpecUrl { uri, basic })
        }
        (None, None) => SpecSource::Embedded,
    })
}

fn spec_settings(
    c: &Config,
    source: SpecSource,
    write: HashMap<String, WriteSemantics>,
) -> Result<SpecSettings, ConfigError> {
    Ok(SpecSettings {
        contract: ContractOptions {
            base_path: c.spec.base_path.clone(),
            write_overrides: write,
            read_for: c.memory.resources.clone(),
            strict: c.spec.strict,
            max_findings: c.audit.max_findings,
            max_ref_depth: c.spec.max_ref_depth,
            lazy: true,
            max_compiled: c.spec.max_compiled_schemas,
            credentials: c.audit.credentials,
        },
        watch_interval: millis(c.spec.watch_interval_ms),
        load: LoadOptions {
            max_bytes: c.spec.max_bytes,
            refs: match (&c.spec.ref_root, &source) {
                (Some(dir), _) => RefRoot::Dir(dir.clone()),
                (None, SpecSource::Url(_)) => RefRoot::Refused,
                (None, _) => RefRoot::SpecDir,
            },
            overlays: c.spec.overlays.clone(),
        },
        source,
    })
}

/// The enforce tables as a policy; a response kind cannot block (its answer has gone out).
fn policy(c: &Config, fail: &Fail<'_>) -> Result<Policy, ConfigError> {
    let by_kind = c.enforce.kinds.iter().map(|(k, a)| ("enforce.kinds", k, a));
    let by_operation = c
        .enforce
        .operations
        .values()
        .flatten()
        .map(|(k, a)| ("enforce.operations", k, a));
    for (key, kind, action) in by_kind.chain(by_operation) {
        if kind.blame() == Blame::Server && *action == Action::Block {
            return Err(fail(
                key,
                format!(
                    "`{kind}` is found on responses, which have already gone to the client: response findings never block"
                ),
            ));
        }
        if *action == Action::Repair && !Action::repairs(*kind) {
            return Err(fail(
                key,
                format!(
                    "`repair` fills the fields a replace write omits: it is for `silent_clear_risk` and `omitted_on_replace`, not `{kind}`"
                ),
            ));
        }
    }
    let policy = Policy::new(
        c.proxy.mode,
        c.enforce.kinds.clone(),
        c.enforce.operations.clone(),
    );
    Ok(policy.reading_before_writes(c.enforce.read_before_write))
}

#[cfg(test)]
mod tests;
