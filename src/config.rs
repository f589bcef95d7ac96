//! The config as written: the shape of `config/driftwatch.toml`, with its defaults. It is the
//! raw input of [`crate::settings`], which layers file, environment and flags (flags > env >
//! file), checks every value and makes it typed; nothing past that step reads a `Config`. An
//! unknown key anywhere is an error naming it: a typo must not leave a default in force.

mod layers;
mod otel;

pub use layers::{ConfigError, Flag, Layers, Origin, Origins};
pub use otel::Notes as OtelNotes;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use crate::contract::WriteSemantics;
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
    pub incidents: IncidentsConfig,
    pub mcp: McpConfig,
    pub forward: ForwardConfig,
    pub telemetry: TelemetryConfig,
    /// One table per API (`[[api]]`); none: the one API of `[spec]` and `proxy.upstream`.
    pub api: Vec<ApiConfig>,
}

/// What the proxy listener takes: origin-form requests for one API (`reverse`, the default),
/// or `CONNECT` and absolute-form requests from clients that honour `HTTPS_PROXY` (`forward`).
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProxyKind {
    #[default]
    Reverse,
    Forward,
}

impl ProxyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyKind::Reverse => "reverse",
            ProxyKind::Forward => "forward",
        }
    }
}

/// What the forward proxy does with a host no API serves.
#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UnknownHosts {
    /// Pass its bytes on untouched, counted by host.
    #[default]
    Tunnel,
    /// Answer 403.
    Refuse,
}

impl UnknownHosts {
    pub fn as_str(self) -> &'static str {
        match self {
            UnknownHosts::Tunnel => "tunneled",
            UnknownHosts::Refuse => "refused (403)",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ForwardConfig {
    /// Where the CA that signs intercepted hosts' certificates lives: `ca.pem` and `ca.key`,
    /// made on first start (the key mode 0600), or put there by the operator.
    pub ca_dir: PathBuf,
    pub unknown_hosts: UnknownHosts,
    /// PEM CA certificates trusted for the APIs' own certificates, besides the webpki roots:
    /// the same setting as `upstream_tls.ca_file` (either may be set, not both).
    pub upstream_ca_file: Option<PathBuf>,
    /// Tunneled hosts named in `driftwatch_tunnels_total` at most; the rest count as `_other`.
    pub host_labels: usize,
    /// `host:port` a tunnel may reach although it resolves to a loopback, link-local or
    /// unspecified address, or to one of driftwatch's own listeners (denied otherwise).
    pub tunnel_allow: Vec<String>,
}

/// OpenTelemetry traces, exported over OTLP/HTTP (protobuf); off until an endpoint is set.
/// The standard `OTEL_*` variables set these keys too, below `DRIFTWATCH_TELEMETRY_*`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// The collector's base URL; traces go to its `/v1/traces` (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub endpoint: Option<String>,
    /// The whole URL traces go to, taken as it is (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
    pub traces_endpoint: Option<String>,
    /// Headers sent with every export, such as a collector's API key
    /// (`OTEL_EXPORTER_OTLP_HEADERS`, `key=value,...`). Never logged.
    pub headers: BTreeMap<String, String>,
    /// `service.name` of every span (`OTEL_SERVICE_NAME`).
    pub service_name: String,
    /// More resource attributes (`OTEL_RESOURCE_ATTRIBUTES`, `key=value,...`).
    pub resource_attributes: BTreeMap<String, String>,
    /// `always_on`, `always_off`, `traceidratio` and their `parentbased_` forms
    /// (`OTEL_TRACES_SAMPLER`).
    pub sampler: String,
    /// The ratio of `traceidratio` samplers (`OTEL_TRACES_SAMPLER_ARG`).
    pub sampler_arg: Option<f64>,
    /// Whether a forwarded request carries driftwatch's span as its `traceparent`: `always`
    /// (replacing the client's), `when_absent`, `never` (`OTEL_PROPAGATORS` without
    /// `tracecontext`).
    pub propagation: String,
    /// `otlp`, or `none` to export nothing with an endpoint set, as a pod-wide
    /// `OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true` asks.
    pub exporter: String,
    /// `none` or `gzip` (`OTEL_EXPORTER_OTLP_COMPRESSION`): a collector across a paid or
    /// slow link gets a tenth of the bytes.
    pub compression: String,
    /// A PEM CA file trusted for the collector besides webpki's roots, for a collector behind
    /// a private CA (`OTEL_EXPORTER_OTLP_CERTIFICATE`).
    pub certificate: Option<PathBuf>,
    /// PEM client certificate chain and key for a collector that asks for mutual TLS
    /// (`OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`, `OTEL_EXPORTER_OTLP_CLIENT_KEY`).
    pub client_certificate: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    /// Spans waiting for export at most; past it a span is dropped and counted.
    pub queue_size: usize,
    /// Spans in one export at most.
    pub batch_size: usize,
    /// How long a span waits for its batch to fill before it is sent anyway.
    pub export_interval_ms: u64,
    /// One export within this, retries included; past it the batch is dropped and counted.
    pub export_timeout_ms: u64,
}

impl Default for TelemetryConfig {
    fn default() -> TelemetryConfig {
        TelemetryConfig {
            endpoint: None,
            traces_endpoint: None,
            headers: BTreeMap::new(),
            service_name: "driftwatch".into(),
            resource_attributes: BTreeMap::new(),
            sampler: "parentbased_always_on".into(),
            sampler_arg: None,
            propagation: "when_absent".into(),
            exporter: "otlp".into(),
            compression: "none".into(),
            certificate: None,
            client_certificate: None,
            client_key: None,
            queue_size: 2048,
            batch_size: 512,
            export_interval_ms: 1000,
            export_timeout_ms: 10_000,
        }
    }
}

impl Default for ForwardConfig {
    fn default() -> ForwardConfig {
        ForwardConfig {
            ca_dir: PathBuf::from("driftwatch-ca"),
            unknown_hosts: UnknownHosts::Tunnel,
            upstream_ca_file: None,
            host_labels: 50,
            tunnel_allow: Vec::new(),
        }
    }
}

/// One API the sidecar audits: its spec, and the hosts (forward) or prefix (reverse) it serves.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// The `api` label of its metrics and events.
    pub name: String,
    /// A file path, or an `http(s)://` URL to fetch it from.
    pub spec: String,
    /// OpenAPI Overlay files applied in order to this API's spec (as `spec.overlays`).
    pub overlays: Vec<PathBuf>,
    /// Or several documents, each under its own base path (as `spec.documents`), instead of
    /// `spec`.
    pub documents: Vec<DocumentConfig>,
    /// `host:port` the forward proxy intercepts for this API (`host` alone: port 443).
    pub hosts: Vec<String>,
    /// Reverse mode: the path prefix that selects this API (taken off before routing and
    /// sending). Its `hosts` select it by `Host` there too.
    pub prefix: Option<String>,
    /// Where its requests go; in forward mode, by default the host the client asked for.
    pub upstream: Option<String>,
    pub base_path: Option<String>,
    pub write: HashMap<String, WriteSemantics>,
    /// Observe or enforce for this API, over `proxy.mode`.
    pub mode: Option<Mode>,
}

/// One document of an API made of several: its file and the path prefix it is served under.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentConfig {
    pub spec: PathBuf,
    pub base_path: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpecConfig {
    /// The OpenAPI document the traffic is audited against.
    pub path: Option<PathBuf>,
    /// Or a URL to fetch it from (the API's own `/openapi.json`), polled with If-None-Match.
    pub url: Option<String>,
    /// Or several documents served as one API, each under its own base path (an issue
    /// tracker's platform, agile and service-desk APIs on one host): docs/overlays.md.
    pub documents: Vec<DocumentConfig>,
    /// OpenAPI Overlay files (1.0 or 1.1) applied in order to the spec before it is compiled,
    /// at start and at every reload; an edit to one reloads (docs/overlays.md).
    pub overlays: Vec<PathBuf>,
    /// Path prefix stripped before routing, instead of the spec's `servers` URLs.
    pub base_path: Option<String>,
    /// Write semantics by operation id or `"PUT /path/{id}"`: replace, merge, create, additive.
    pub write: HashMap<String, WriteSemantics>,
    /// How often the spec file (or URL) is checked for a change to reload (0: never; SIGHUP
    /// and `POST /spec/reload` still reload).
    pub watch_interval_ms: u64,
    /// Refuse a spec with any part that cannot be compiled, instead of loading the rest with a
    /// warning per skipped part (the default, so real specs with a bad pattern still load).
    pub strict: bool,
    /// Bytes of the spec, and of each file a `$ref` names, at most (after gzip); a fetched
    /// spec too.
    pub max_bytes: u64,
    /// The directory `$ref`s to other files are confined to: by default the spec file's own,
    /// and none for a spec fetched from a URL.
    pub ref_root: Option<PathBuf>,
    /// `$ref`s followed in a row at most; one leading deeper is not followed (a `ref_depth`
    /// warning), so a spec cannot hold the loader with a chain of a million references.
    pub max_ref_depth: usize,
    /// Body and response validators kept compiled at most; past it the oldest is let go and
    /// compiled again when next needed (requests to many distinct operations cannot grow
    /// memory without a bound).
    pub max_compiled_schemas: usize,
}

impl Default for SpecConfig {
    fn default() -> SpecConfig {
        SpecConfig {
            path: None,
            url: None,
            documents: Vec::new(),
            overlays: Vec::new(),
            base_path: None,
            write: HashMap::new(),
            watch_interval_ms: 2_000,
            strict: false,
            max_bytes: crate::spec::DEFAULT_MAX_BYTES,
            ref_root: None,
            max_ref_depth: crate::contract::DEFAULT_MAX_REF_DEPTH,
            max_compiled_schemas: crate::contract::DEFAULT_MAX_COMPILED,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxyConfig {
    pub listen: SocketAddr,
    /// Where requests go: `http://host:port` or `https://host:port`, optionally with a path prefix.
    pub upstream: Option<String>,
    /// Observe or enforce. (`forward` or `reverse` here is read as `proxy.kind`.)
    pub mode: Mode,
    pub kind: ProxyKind,
    /// Keep the client's `Host` instead of the upstream's.
    pub preserve_host: bool,
    /// Add `X-Forwarded-For`, `X-Forwarded-Proto` and `X-Forwarded-Host`.
    pub forwarded_headers: bool,
    /// Forward header names with the case they were sent in, both ways (off: lowercase, as
    /// HTTP/2 and most proxies send them; a case map less per request and per response).
    pub preserve_header_case: bool,
    /// Add a compact `driftwatch-findings` header to forwarded responses, so an MCP server can
    /// show drift to its agent in observe mode too.
    pub report_header: bool,
    /// A new upstream connection, TCP and TLS; must be positive.
    pub connect_timeout_ms: u64,
    /// Until the upstream's response headers arrive; must be positive.
    pub request_timeout_ms: u64,
    /// How long SIGTERM/SIGINT waits for in-flight requests before exiting.
    pub drain_timeout_ms: u64,
    /// Client connections at most; past it a new connection is closed at once (counted).
    pub max_connections: usize,
    /// A client must send a whole request head within this, from the connection's start or,
    /// on an HTTP/1.1 keep-alive connection, from the end of the previous response (hyper's
    /// timer: an idle HTTP/1.1 connection is closed after this too); 0 turns it off.
    pub header_read_timeout_ms: u64,
    /// A client connection with no request in flight and no byte either way is closed after
    /// this; 0 turns it off.
    pub idle_timeout_ms: u64,
    /// A request or response body that sends nothing for this long is cut off: 408 for a
    /// client's, the connection for an upstream's; 0 turns it off.
    pub body_stall_timeout_ms: u64,
    /// Serving threads, each a single-threaded runtime accepting from the one listening socket
    /// with its own upstream pool: 0 is one per core; 1 serves everything on one thread.
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
    /// How many recent findings `/findings` keeps (whole events, oldest dropped first).
    pub recent_findings: usize,
    /// Bytes of events `/findings` keeps at most, as their JSON would weigh.
    pub recent_bytes: usize,
    /// A file holding a bearer token (a mounted Secret): when set, `/findings`, `/spec`,
    /// `/spec/diff` and `POST /spec/reload` need `Authorization: Bearer <token>`.
    pub token_file: Option<PathBuf>,
    /// Connections at most; past it a new one is closed at once (counted).
    pub max_connections: usize,
    /// A whole request head within this (0: off), as `proxy.header_read_timeout_ms`.
    pub header_read_timeout_ms: u64,
    /// A connection with no request in flight and no byte moved is closed after this (0: off).
    pub idle_timeout_ms: u64,
}

/// `driftwatch mcp`'s own listener and what an MCP message may hold before it is parsed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// Connections to the MCP listener at most; past it a new one is closed at once.
    pub max_connections: usize,
    /// A whole request head within this (0: off).
    pub header_read_timeout_ms: u64,
    /// A connection with no request in flight (an open SSE stream is one) and no byte moved
    /// is closed after this (0: off).
    pub idle_timeout_ms: u64,
    /// Sessions open at once at most; an `initialize` past it is refused (503, JSON-RPC).
    pub max_sessions: usize,
    /// A session with no request for this long is closed and freed.
    pub session_idle_timeout_ms: u64,
    /// Nesting of a JSON-RPC message at most, counted before it is parsed into values.
    pub max_message_depth: usize,
    /// JSON values (each object, array, string, number, ...) in one message at most: a 4 MiB
    /// body of empty arrays parsed into about 270 times its size before this bound.
    pub max_message_values: usize,
    /// Bytes of one message at most (HTTP body or stdio line).
    pub max_message_bytes: usize,
    /// `wrap`: a tool result whose request driftwatch refused says why, when the server's
    /// result does not.
    pub explain_refusals: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// `false` forwards everything unaudited (the pass-through baseline of the load benchmark).
    pub enabled: bool,
    /// Larger request bodies stream through unaudited (counted as `unaudited`).
    pub max_body: usize,
    /// Findings listed per request at most; past it, one finding says the rest were left out
    /// (counted in `driftwatch_limit_hits_total{limit="findings_per_request"}`).
    pub max_findings: usize,
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
    /// Say `missing_credentials` when a request carries no credential its operation's
    /// `security` accepts; `false` where a gateway or mesh behind driftwatch adds them.
    pub credentials: bool,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct EnforceConfig {
    /// Action per finding kind in enforce mode, over the default (block `error` and `critical`).
    pub kinds: HashMap<Kind, Action>,
    /// Action per operation id, then kind, over `kinds`.
    pub operations: HashMap<String, HashMap<Kind, Action>>,
    /// Read a replace write's resource just before the write where the memory has no view of
    /// it (after a restart, or a resource only ever listed), and decide on that read. Unset:
    /// on in enforce mode, off in observe mode.
    pub read_before_write: Option<bool>,
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
    /// Bytes of one event at most: past it the values go first, then the last findings
    /// (counted in `driftwatch_limit_hits_total{limit="event_bytes"}`).
    pub max_event_bytes: usize,
}

/// Silent clears as incidents (`/incidents`, `driftwatch incident`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IncidentsConfig {
    /// Incidents kept at most (the oldest go first); 0 keeps none.
    pub max: usize,
    /// Bytes of the incidents' JSON kept at most, values included.
    pub max_bytes: usize,
    /// Keep what each erased field held (from the resource's last read) and the request that
    /// restores it. Values of the API's data: off by default, and only with `admin.token_file`.
    pub keep_values: bool,
    /// Bytes of resources' read values held for that at most (least recently read go first);
    /// a resource larger than a sixteenth of it is not held.
    pub max_value_bytes: usize,
    /// Keep values only for these operations (the replace writes' ids); empty: every one.
    pub operations: Vec<String>,
    /// A file holding the secret (16 bytes or more, the same on every replica) that seals
    /// incidents and their values in the store replicas share (`memory.backend = "redis"`).
    pub seal_key_file: Option<PathBuf>,
}

impl Default for IncidentsConfig {
    fn default() -> IncidentsConfig {
        IncidentsConfig {
            max: 500,
            max_bytes: 8 << 20,
            keep_values: false,
            max_value_bytes: 32 << 20,
            operations: Vec::new(),
            seal_key_file: None,
        }
    }
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
    /// A file holding the secret that keys the value and credential hashes, so that replicas
    /// agree; unset: a random key per process.
    pub hash_key_file: Option<PathBuf>,
    /// Where the memory lives: this process (`local`), or a Redis or Valkey that replicas
    /// share (`redis`), with this process's memory in front as cache and fallback.
    pub backend: MemoryBackend,
    /// `redis://[user:password@]host:port[/db]`, `rediss://` for TLS, or
    /// `redis+unix:///path`.
    pub redis_url: Option<String>,
    /// A file holding the store's password (a mounted Secret); it overrides the URL's.
    pub redis_password_file: Option<PathBuf>,
    /// PEM CA certificates that a `rediss://` store's certificate is checked against; unset:
    /// the system's roots.
    pub redis_ca_file: Option<PathBuf>,
    /// Prefix of every key driftwatch writes in the store.
    pub redis_key_prefix: String,
    /// Milliseconds a replace write waits, at most, for the store's copy of its resource.
    pub redis_deadline_ms: u64,
}

#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MemoryBackend {
    #[default]
    Local,
    Redis,
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
            hash_key_file: None,
            backend: MemoryBackend::Local,
            redis_url: None,
            redis_password_file: None,
            redis_ca_file: None,
            redis_key_prefix: "driftwatch:".into(),
            redis_deadline_ms: 5,
        }
    }
}

impl Default for ProxyConfig {
    fn default() -> ProxyConfig {
        ProxyConfig {
            listen: ([127, 0, 0, 1], 8080).into(),
            upstream: None,
            mode: Mode::Observe,
            kind: ProxyKind::Reverse,
            preserve_host: false,
            forwarded_headers: true,
            preserve_header_case: true,
            report_header: false,
            connect_timeout_ms: 2_000,
            request_timeout_ms: 30_000,
            drain_timeout_ms: 10_000,
            max_connections: 10_000,
            header_read_timeout_ms: 30_000,
            idle_timeout_ms: 120_000,
            body_stall_timeout_ms: 30_000,
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
            recent_bytes: 16 << 20,
            token_file: None,
            max_connections: 64,
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 120_000,
        }
    }
}

impl Default for McpConfig {
    fn default() -> McpConfig {
        McpConfig {
            max_connections: 1_000,
            header_read_timeout_ms: 30_000,
            idle_timeout_ms: 600_000,
            max_sessions: 1_000,
            session_idle_timeout_ms: 600_000,
            max_message_depth: 64,
            max_message_values: 100_000,
            max_message_bytes: 4 << 20,
            explain_refusals: true,
        }
    }
}

impl Default for AuditConfig {
    fn default() -> AuditConfig {
        AuditConfig {
            enabled: true,
            max_body: 1 << 20,
            max_findings: crate::contract::DEFAULT_MAX_FINDINGS,
            unknown_param_labels: 20,
            max_response_body: 1 << 20,
            response_sample_rate: 1.0,
            credentials: true,
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
            max_event_bytes: 256 << 10,
        }
    }
}

/// Sections of the file, for mapping `DRIFTWATCH_SECTION_KEY` to `[section] key`.
pub(crate) const SECTIONS: [&str; 12] = [
    "telemetry",
    "forward",
    "upstream_tls",
    "spec",
    "proxy",
    "admin",
    "audit",
    "enforce",
    "events",
    "memory",
    "mcp",
    "incidents",
];
