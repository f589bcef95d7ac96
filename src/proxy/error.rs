//! What goes wrong on the request path, and whose fault it is (pingora's `ErrorSource`): the
//! client sent something that cannot be forwarded, or the upstream failed. (driftwatch's own
//! failures, an audit that panicked or an event queue that was full, never fail a request: they
//! are counted and the request goes on.) The problem+json answer, the outcome and `cause` labels, and the log line all come from
//! one `ProxyError`, so they cannot disagree.

use http::StatusCode;

/// Who must act: the agent's client, or the API's operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Client,
    Upstream,
}

impl Fault {
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Client => "client",
            Fault::Upstream => "upstream",
        }
    }
}

impl From<super::stall::BodyError> for ProxyError {
    fn from(e: super::stall::BodyError) -> ProxyError {
        match e {
            super::stall::BodyError::Peer(e) => ProxyError::BodyUnreadable(e.to_string()),
            super::stall::BodyError::Stalled(after) => ProxyError::BodyStalled(after),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("the request body could not be read: {0}")]
    BodyUnreadable(String),
    #[error("the request body sent nothing for {} ms", .0.as_millis())]
    BodyStalled(std::time::Duration),
    #[error("the request target cannot be forwarded: {0}")]
    BadTarget(http::Error),
    #[error("{}", .0.detail())]
    Unforwardable(Unforwardable),
    /// `cause` is the `driftwatch_upstream_errors_total` label: connect, tls or other.
    #[error("driftwatch could not reach the upstream {authority}: {cause} error: {reason}")]
    Unreachable {
        authority: String,
        cause: &'static str,
        reason: String,
        /// The span's `error.type`: `connection_refused`, `connection_reset`, `tls`, or
        /// `_OTHER` (the conventions' fallback).
        error_type: &'static str,
    },
    #[error("the upstream {authority} did not answer within {ms} ms")]
    Timeout { authority: String, ms: u128 },
}

impl ProxyError {
    pub fn fault(&self) -> Fault {
        match self {
            ProxyError::BodyUnreadable(_)
            | ProxyError::BodyStalled(_)
            | ProxyError::BadTarget(_)
            | ProxyError::Unforwardable(_) => Fault::Client,
            ProxyError::Unreachable { .. } | ProxyError::Timeout { .. } => Fault::Upstream,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ProxyError::BodyUnreadable(_)
            | ProxyError::BadTarget(_)
            | ProxyError::Unforwardable(_) => StatusCode::BAD_REQUEST,
            ProxyError::BodyStalled(_) => StatusCode::REQUEST_TIMEOUT,
            ProxyError::Unreachable { .. } => StatusCode::BAD_GATEWAY,
            ProxyError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    pub fn title(&self) -> &'static str {
        match self {
            ProxyError::BodyUnreadable(_) => "Bad request body",
            ProxyError::BodyStalled(_) => "Request body stalled",
            ProxyError::BadTarget(_) => "Bad request target",
            ProxyError::Unforwardable(_) => "Request not forwarded",
            ProxyError::Unreachable { .. } => "Upstream unreachable",
            ProxyError::Timeout { .. } => "Upstream timeout",
        }
    }

    /// The `reason` label of a client's fault; `None` for an upstream's.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            ProxyError::BodyUnreadable(_) => Some("body_unreadable"),
            ProxyError::BodyStalled(_) => Some("body_stalled"),
            ProxyError::BadTarget(_) => Some("bad_target"),
            ProxyError::Unforwardable(why) => Some(why.as_str()),
            ProxyError::Unreachable { .. } | ProxyError::Timeout { .. } => None,
        }
    }

    /// A span's `error.type` for it: low in cardinality, as the conventions ask.
    pub fn error_type(&self) -> &'static str {
        match self {
            ProxyError::Unreachable { error_type, .. } => error_type,
            ProxyError::Timeout { .. } => "timeout",
            _ => self.reason().unwrap_or("_OTHER"),
        }
    }

    /// The `cause` label of an upstream failure; `None` for a client's.
    pub fn cause(&self) -> Option<&'static str> {
        match self {
            ProxyError::Unreachable { cause, .. } => Some(cause),
            ProxyError::Timeout { .. } => Some("timeout"),
            _ => None,
        }
    }
}

/// Why the sidecar could not be assembled at start: each names the file or setting to fix.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Settings(#[from] crate::config::ConfigError),
    #[error("{}: cannot read PEM certificates: {reason}", file.display())]
    Certificates {
        file: std::path::PathBuf,
        reason: String,
    },
    #[error("{}: cannot read a PEM private key: {reason}", file.display())]
    Key {
        file: std::path::PathBuf,
        reason: String,
    },
    #[error("TLS setup: {0}")]
    Tls(#[from] rustls::Error),
    /// The system refused a serving thread, its runtime or a handle on the listening socket
    /// (out of threads or descriptors): lower `proxy.workers` or raise the limits.
    #[error("cannot start serving thread {thread} of proxy.workers: {source}")]
    Threads {
        thread: usize,
        source: std::io::Error,
    },
    /// The shared memory store's URL cannot make a client (a TLS URL without TLS support, a
    /// bad address): fix `memory.redis_url`. A store that is down is no error: the sidecar
    /// starts on its own memory and connects when the store is back.
    #[error("memory.redis_url `{url}`: {reason}")]
    Store { url: String, reason: String },
    #[error("telemetry: {0}")]
    Telemetry(#[from] crate::telemetry::TelemetryError),
    #[error("events.output `{output}`: {source}")]
    Events {
        output: crate::sink::EventOutput,
        source: std::io::Error,
    },
    /// The forward proxy's CA cannot be read or made: fix `forward.ca_dir` or what is in it.
    #[error("forward.ca_dir: {0}")]
    Ca(#[from] super::ca::CaError),
}

/// Why a request is not forwarded as it stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unforwardable {
    TransferEncoding,
    Connect,
    Host,
}

impl Unforwardable {
    /// The `reason` label of `driftwatch_client_errors_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Unforwardable::TransferEncoding => "transfer_encoding",
            Unforwardable::Connect => "connect",
            Unforwardable::Host => "host",
        }
    }

    pub fn detail(self) -> &'static str {
        match self {
            Unforwardable::TransferEncoding => {
                "Transfer-Encoding other than a single `chunked` is not forwarded: send the body with Content-Length or chunked, and a Content-Encoding for gzip"
            }
            Unforwardable::Connect => {
                "CONNECT is not forwarded: driftwatch proxies the API's resources, not tunnels"
            }
            Unforwardable::Host => {
                "an HTTP/1.1 request needs exactly one Host header (RFC 9112, section 3.2)"
            }
        }
    }
}
