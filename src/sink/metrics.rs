//! The Prometheus metrics, named and labelled as `docs/metrics.md` lists them. Labels come from
//! the spec (operation ids, kinds) or fixed vocabularies; a name seen only in traffic (an unknown
//! query parameter) gets a label for the first N per operation, then `_other`.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::CounterWithExemplar;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use crate::finding::Finding;

/// What became of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Forwarded,
    Blocked,
    /// Not forwarded: the client's request could not be (an unreadable body, a bad target).
    ClientError,
    UpstreamError,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Forwarded => "forwarded",
            Outcome::Blocked => "blocked",
            Outcome::ClientError => "client_error",
            Outcome::UpstreamError => "upstream_error",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationOutcome {
    operation: Inline,
    outcome: &'static str,
    /// The status the client received.
    code: u16,
    #[prometheus(flatten)]
    api: ApiLabel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabels {
    kind: String,
    operation: String,
    severity: String,
    /// `client` (request kinds) or `server` (response kinds).
    blame: String,
    #[prometheus(flatten)]
    api: ApiLabel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ParamLabels {
    operation: String,
    param: String,
    #[prometheus(flatten)]
    api: ApiLabel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SilentLabels {
    operation: String,
    field: String,
    stage: String,
    #[prometheus(flatten)]
    api: ApiLabel,
}

/// driftwatch's reads before replace writes the memory had no view of: by operation (the
/// spec's, bounded) and what the read decided (`sink::ReadNote::outcome`, four values).
/// The series made at zero when the sidecar starts, one per outcome, have no operation.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct ReadLabels {
    operation: Option<String>,
    /// One of `READ_OUTCOMES`.
    outcome: &'static str,
    api: ApiLabel,
}

impl EncodeLabelSet for ReadLabels {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeLabel;
        if let Some(operation) = &self.operation {
            ("operation", operation.as_str()).encode(encoder.encode_label())?;
        }
        ("outcome", self.outcome).encode(encoder.encode_label())?;
        self.api.encode(encoder)
    }
}

/// The `outcome` label's values of `reads_before_write` (`sink::ReadNote::outcome`).
const READ_OUTCOMES: [&str; 4] = ["held", "nothing_held", "absent", "unusable"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BlockedLabels {
    operation: String,
    kind: String,
    #[prometheus(flatten)]
    api: ApiLabel,
}

/// A repair's series: `{operation, field, outcome}`. The series made at zero when the sidecar
/// starts, one per outcome, have neither operation nor field: no write has been repaired yet,
/// and a panel reads 0 instead of "no data".
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct RepairLabels {
    /// The write's operation and a field of its body, as the spec names it: bounded by the spec.
    write: Option<(String, String)>,
    /// One of `REPAIR_OUTCOMES`.
    outcome: &'static str,
    api: ApiLabel,
}

impl EncodeLabelSet for RepairLabels {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeLabel;
        if let Some((operation, field)) = &self.write {
            ("operation", operation.as_str()).encode(encoder.encode_label())?;
            ("field", field.as_str()).encode(encoder.encode_label())?;
        }
        ("outcome", self.outcome).encode(encoder.encode_label())?;
        self.api.encode(encoder)
    }
}

/// The `outcome` label's values of `repairs` (`proxy::record`): filled and forwarded, refused
/// instead, or answered 412 by the API.
const REPAIR_OUTCOMES: [&str; 3] = ["repaired", "refused", "precondition_failed"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Cause {
    cause: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: String,
    #[prometheus(flatten)]
    api: ApiLabel,
}

/// The `api` label: an `[[api]]` table's name, or no label at all for the one API of `[spec]`
/// (so that a sidecar of one API exports the series it always did). Names come from the
/// config, so the label is bounded.
#[derive(Clone, Debug, Hash, PartialEq, Eq, Default)]
pub struct ApiLabel(Option<std::sync::Arc<str>>);

impl ApiLabel {
    pub fn new(name: Option<&str>) -> ApiLabel {
        ApiLabel(name.map(std::sync::Arc::from))
    }

    /// The name, if the API has one.
    pub fn name(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl EncodeLabelSet for ApiLabel {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeLabel;
        match &self.0 {
            Some(name) => ("api", &**name).encode(encoder.encode_label()),
            None => Ok(()),
        }
    }
}

/// A label value held inline when it is short (up to 24 bytes, as most operation ids are), so
/// that counting a request, which looks its series up by value, makes no heap allocation.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Inline(compact_str::CompactString);

impl EncodeLabelValue for Inline {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        self.0.as_str().encode(encoder)
    }
}

/// A reason the code names (`audit_off`, `body_stalled`): counted on the request path without
/// making text.
/// What became of a span: `exported`, `dropped` (its queue was full) or `failed` (its batch's
/// export failed or timed out).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpanOutcome {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Why {
    reason: &'static str,
}

/// The `reason` label's values of `client_errors`.
const CLIENT_ERRORS: [&str; 8] = [
    "body_unreadable",
    "body_stalled",
    "bad_target",
    "transfer_encoding",
    "connect",
    "host",
    "no_api",
    "connect_target",
];

/// The `cause` label's values of `upstream_errors` (`proxy::upstream::cause`).
const UPSTREAM_CAUSES: [&str; 4] = ["connect", "tls", "timeout", "other"];

/// The `reason` label's values of `unaudited` besides the spec's (`Skipped::unaudited_reason`).
const UNAUDITED: [&str; 8] = [
    "body_too_large",
    "audit_off",
    "response_too_large",
    "response_undecodable",
    "response_client_gone",
    "response_upstream_failed",
    "response_queue_full",
    "response_sampled",
];

/// The `limit` label's values of bounds that are not a listener's.
const LIMITS: [&str; 5] = [
    "body_stall",
    "findings_per_request",
    "event_bytes",
    "spec_bytes",
    "list_items",
];

/// The `limit` label's values of a listener's bounds (`crate::listener`), each with the
/// `listener` label too.
const LISTENER_LIMITS: [&str; 6] = [
    "open_files",
    "memory",
    "connections",
    "header_read",
    "idle",
    "tls_handshake",
];

/// A bound's series: `{limit}`, and `{limit, listener}` for a listener's.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Limit {
    limit: String,
    listener: Option<&'static str>,
}

impl EncodeLabelSet for Limit {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeLabel;
        ("limit", self.limit.as_str()).encode(encoder.encode_label())?;
        if let Some(listener) = self.listener {
            ("listener", listener).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// Counts the hits of a listener's bounds: a handle on `driftwatch_limit_hits_total` that the
/// listeners share (`Metrics::limit_hits`).
#[derive(Clone)]
pub struct LimitHits(Family<Limit, Counter>);

impl LimitHits {
    pub fn hit(&self, limit: &str, listener: &'static str) {
        let series = Limit {
            limit: limit.into(),
            listener: Some(listener),
        };
        self.0.get_or_create(&series).inc();
    }

    /// Make `listener`'s series, at zero: an alert sees its first hit.
    pub fn register(&self, listener: &'static str) {
        for limit in LISTENER_LIMITS {
            let series = Limit {
                limit: limit.into(),
                listener: Some(listener),
            };
            let _ = self.0.get_or_create(&series);
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChangeClass {
    class: String,
    #[prometheus(flatten)]
    api: ApiLabel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoadResult {
    result: String,
    #[prometheus(flatten)]
    api: ApiLabel,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SpecLabels {
    revision: String,
    openapi: String,
    #[prometheus(flatten)]
    api: ApiLabel,
}

/// Label for requests that matched no operation.
pub const NO_OPERATION: &str = "_unknown";

pub struct Metrics {
    requests: Family<OperationOutcome, Counter>,
    findings: Family<FindingLabels, CounterWithExemplar<Exemplar>>,
    unknown_params: Family<ParamLabels, Counter>,
    blocked: Family<BlockedLabels, Counter>,
    repairs: Family<RepairLabels, Counter>,
    reads_before_write: Family<ReadLabels, Counter>,
    upstream_errors: Family<Cause, Counter>,
    client_errors: Family<Why, Counter>,
    unaudited: Family<Why, Counter>,
    limit_hits: Family<Limit, Counter>,
    /// `limit_hits{limit="body_stall"}`, held by every body that can stall.
    body_stalls: Counter,
    audit_errors: Counter,
    events_dropped: Counter,
    trace_spans: Family<SpanOutcome, Counter>,
    responses_done: Counter,
    audit_duration: Histogram,
    upstream_duration: Histogram,
    spec_info: Family<SpecLabels, Gauge>,
    spec_operations: Family<ApiLabel, Gauge>,
    spec_reloads: Family<LoadResult, Counter>,
    spec_changes: Family<ChangeClass, Gauge>,
    spec_warnings: Family<Reason, Gauge>,
    silent_clears: Family<SilentLabels, CounterWithExemplar<Exemplar>>,
    memory_entries: Gauge,
    memory_evictions: Counter,
    in_flight: Gauge,
    unrouted_share: Family<ApiLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// Each API's `spec_info` series, to take out when its revision changes.
    spec_now: Mutex<HashMap<ApiLabel, SpecLabels>>,
    /// Unknown parameter names given a label so far, per operation.
    param_labels: Mutex<HashMap<(ApiLabel, String), HashSet<String>>>,
    param_label_limit: usize,
}

impl Metrics {
    /// Register every metric in `registry` (prefix `driftwatch_`), in this order: the
    /// requests, what went wrong, the work done, the spec and the memory.
    pub fn new(registry: &mut Registry, param_label_limit: usize) -> Metrics {
        let mut m = Metrics {
            requests: Family::default(),
            findings: Family::default(),
            unknown_params: Family::default(),
            blocked: Family::default(),
            repairs: Family::default(),
            reads_before_write: Family::default(),
            upstream_errors: Family::default(),
            client_errors: Family::default(),
            unaudited: Family::default(),
            limit_hits: Family::default(),
            body_stalls: Counter::default(),
            audit_errors: Counter::default(),
            events_dropped: Counter::default(),
            trace_spans: Family::default(),
            responses_done: Counter::default(),
            audit_duration: Histogram::new(exponential_buckets(1e-6, 4.0, 10)),
            upstream_duration: Histogram::new(exponential_buckets(1e-4, 4.0, 10)),
            spec_info: Family::default(),
            spec_operations: Family::default(),
            spec_reloads: Family::default(),
            spec_changes: Family::default(),
            spec_warnings: Family::default(),
            silent_clears: Family::default(),
            memory_entries: Gauge::default(),
            memory_evictions: Counter::default(),
            in_flight: Gauge::default(),
            unrouted_share: Family::default(),
            spec_now: Mutex::default(),
            param_labels: Mutex::new(HashMap::new()),
            param_label_limit,
        };
        registry.register_collector(Box::new(super::process::Process));
        let r = registry.sub_registry_with_prefix("driftwatch");
        m.register_requests(r);
        m.register_errors(r);
        m.register_work(r);
        m.register_spec(r);
        m
    }

    fn register_requests(&self, r: &mut Registry) {
        r.register(
            "build",
            "The build serving (value 1): its version and source revision",
            Info::new([
                ("version", env!("CARGO_PKG_VERSION")),
                ("revision", env!("BUILD_REVISION")),
            ]),
        );
        r.register(
            "requests_in_flight",
            "Requests received and not yet answered",
            self.in_flight.clone(),
        );
        r.register(
            "requests",
            "Requests seen, by operation and outcome",
            self.requests.clone(),
        );
        r.register(
            "findings",
            "Findings, by kind, operation, severity and blame (client: the request drifted; server: the response did)",
            self.findings.clone(),
        );
        r.register("unknown_query_params", "Unknown query parameters, by operation and name (first N names per operation, then _other)", self.unknown_params.clone());
        r.register(
            "blocked",
            "Requests refused in enforce mode, by operation and the kind that blocked them",
            self.blocked.clone(),
        );
        r.register(
            "reads_before_write",
            "Replace writes whose resource driftwatch read just before the write, the memory having no view of it (enforce.read_before_write), by operation and outcome: held (an omitted field held a value), nothing_held, absent (404 or 410), unusable (the read failed or was not the resource)",
            self.reads_before_write.clone(),
        );
        for outcome in READ_OUTCOMES {
            let _ = self.reads_before_write.get_or_create(&ReadLabels {
                operation: None,
                outcome,
                api: ApiLabel::default(),
            });
        }
        r.register(
            "repairs",
            "Fields of replace writes filled from a fresh read in enforce mode (repair), by operation, field and outcome: repaired, refused (the write was refused instead), precondition_failed (the API answered 412 to the If-Match)",
            self.repairs.clone(),
        );
        for outcome in REPAIR_OUTCOMES {
            let _ = self.repairs.get_or_create(&RepairLabels {
                write: None,
                outcome,
                api: ApiLabel::default(),
            });
        }
    }

    /// What went wrong, each reason's series made at zero (an alert sees the first hit).
    fn register_errors(&mut self, r: &mut Registry) {
        r.register(
            "upstream_errors",
            "Requests the upstream could not answer, by cause",
            self.upstream_errors.clone(),
        );
        for cause in UPSTREAM_CAUSES {
            let _ = self.upstream_errors.get_or_create(&Cause {
                cause: cause.into(),
            });
        }
        r.register(
            "client_errors",
            "Requests driftwatch answered with a 4xx of its own (not forwarded), by reason",
            self.client_errors.clone(),
        );
        for reason in CLIENT_ERRORS {
            let _ = self.client_errors.get_or_create(&Why { reason });
        }
        r.register(
            "unaudited",
            "Requests forwarded without a body audit, and responses whose body was not read, by reason",
            self.unaudited.clone(),
        );
        let spec_reasons = crate::contract::Skipped::ALL.map(|r| r.unaudited_reason());
        for reason in UNAUDITED.iter().chain(&spec_reasons) {
            let _ = self.unaudited.get_or_create(&Why { reason });
        }
        r.register(
            "limit_hits",
            "Times a bound on what a peer can make driftwatch hold was reached, by limit",
            self.limit_hits.clone(),
        );
        // A fixed vocabulary, so every series exists at zero (an alert sees the first hit).
        for limit in LIMITS {
            let _ = self.limit_hits.get_or_create(&Limit {
                limit: limit.into(),
                listener: None,
            });
        }
        let body_stalls = Limit {
            limit: "body_stall".into(),
            listener: None,
        };
        self.body_stalls = self.limit_hits.get_or_create(&body_stalls).clone();
    }

    fn register_work(&self, r: &mut Registry) {
        r.register(
            "audit_errors",
            "Internal audit failures (the request was forwarded)",
            self.audit_errors.clone(),
        );
        r.register(
            "responses_checked",
            "Responses whose work after the last byte (audit, memory) has finished",
            self.responses_done.clone(),
        );
        r.register(
            "events_dropped",
            "Audit events dropped because the event writer fell behind",
            self.events_dropped.clone(),
        );
        r.register(
            "trace_spans",
            "Spans for OpenTelemetry export, by outcome: exported, dropped (queue full), failed",
            self.trace_spans.clone(),
        );
        self.span_counts();
        r.register(
            "audit_duration_seconds",
            "Time spent auditing a request",
            self.audit_duration.clone(),
        );
        r.register(
            "upstream_duration_seconds",
            "Time until the upstream's response headers",
            self.upstream_duration.clone(),
        );
    }

    fn register_spec(&self, r: &mut Registry) {
        r.register(
            "spec_info",
            "The spec in force (value 1), by revision and OpenAPI version",
            self.spec_info.clone(),
        );
        r.register(
            "spec_operations",
            "Operations in the spec in force",
            self.spec_operations.clone(),
        );
        r.register(
            "spec_reloads",
            "Spec loads since start, by result (success, error); the load at start is the first",
            self.spec_reloads.clone(),
        );
        r.register(
            "spec_changes",
            "Changes the last reload brought, by class (breaking, hazard, info)",
            self.spec_changes.clone(),
        );
        r.register(
            "spec_warnings",
            "Parts of the spec in force skipped or weakened at load (lenient load), by reason",
            self.spec_warnings.clone(),
        );
        r.register(
            "silent_clears",
            "Replace writes that omit a field, by stage: omitted, at_risk (it held a value at the last GET), confirmed (it was erased)",
            self.silent_clears.clone(),
        );
        r.register(
            "unrouted_share",
            "Share of the last window of 100 audited requests that routed to no operation (near 1: a wrong base path or spec version)",
            self.unrouted_share.clone(),
        );
        r.register(
            "memory_entries",
            "Resources remembered from GET responses",
            self.memory_entries.clone(),
        );
        r.register(
            "memory_evictions",
            "Remembered resources dropped to keep the memory bound, since start",
            self.memory_evictions.clone(),
        );
    }

    /// The share of the last closed window of requests that routed nowhere.
    pub fn unrouted_share(&self, api: &ApiLabel, share: f64) {
        self.unrouted_share.get_or_create(api).set(share);
    }

    pub fn request(
        &self,
        api: &ApiLabel,
        operation: &str,
        outcome: Outcome,
        status: http::StatusCode,
    ) {
        let labels = OperationOutcome {
            operation: Inline(operation.into()),
            outcome: outcome.as_str(),
            code: status.as_u16(),
            api: api.clone(),
        };
        self.requests.get_or_create(&labels).inc();
    }

    /// Count `finding`; `exemplar` names the request (and its trace) for OpenMetrics scrapes.
    pub fn finding(
        &self,
        api: &ApiLabel,
        operation: &str,
        finding: &Finding,
        exemplar: Option<&Exemplar>,
    ) {
        let labels = FindingLabels {
            kind: finding.kind.as_str().into(),
            operation: operation.into(),
            severity: finding.severity.as_str().into(),
            blame: finding.blame.as_str().into(),
            api: api.clone(),
        };
        let counter = self.findings.get_or_create(&labels);
        counter.inc_by(1, exemplar.cloned(), None);
        let stage = match finding.kind {
            crate::finding::Kind::OmittedOnReplace => Some("omitted"),
            crate::finding::Kind::SilentClearRisk => Some("at_risk"),
            crate::finding::Kind::SilentClear => Some("confirmed"),
            _ => None,
        };
        if let Some(stage) = stage {
            let field = finding.field.trim_start_matches('/').to_string();
            let counter = self.silent_clears.get_or_create(&SilentLabels {
                operation: operation.into(),
                field,
                stage: stage.into(),
                api: api.clone(),
            });
            counter.inc_by(1, exemplar.cloned(), None);
        }
        if finding.kind == crate::finding::Kind::UnknownQueryParam {
            let param = self.param_label(api, operation, &finding.field);
            self.unknown_params
                .get_or_create(&ParamLabels {
                    operation: operation.into(),
                    param,
                    api: api.clone(),
                })
                .inc();
        }
    }

    fn param_label(&self, api: &ApiLabel, operation: &str, name: &str) -> String {
        if name.len() > super::labels::MAX_VALUE_BYTES {
            return "_other".into();
        }
        let mut seen = self.param_labels.lock().unwrap_or_else(|e| e.into_inner());
        let names = seen
            .entry((api.clone(), operation.to_string()))
            .or_default();
        if names.contains(name)
            || (names.len() < self.param_label_limit && names.insert(name.to_string()))
        {
            name.to_string()
        } else {
            "_other".into()
        }
    }

    pub fn blocked(&self, api: &ApiLabel, operation: &str, kind: &str) {
        self.blocked
            .get_or_create(&BlockedLabels {
                operation: operation.into(),
                kind: kind.into(),
                api: api.clone(),
            })
            .inc();
    }

    /// One field of a repaired (or refused) write.
    pub fn repair(&self, api: &ApiLabel, operation: &str, field: &str, outcome: &'static str) {
        self.repairs
            .get_or_create(&RepairLabels {
                write: Some((operation.into(), field.into())),
                outcome,
                api: api.clone(),
            })
            .inc();
    }

    pub fn read_before_write(&self, api: &ApiLabel, operation: &str, outcome: &'static str) {
        self.reads_before_write
            .get_or_create(&ReadLabels {
                operation: Some(operation.into()),
                outcome,
                api: api.clone(),
            })
            .inc();
    }

    pub fn upstream_error(&self, cause: &str) {
        self.upstream_errors
            .get_or_create(&Cause {
                cause: cause.into(),
            })
            .inc();
    }

    pub fn client_error(&self, reason: &'static str) {
        self.client_errors.get_or_create(&Why { reason }).inc();
    }

    pub fn unaudited(&self, reason: &'static str) {
        self.unaudited.get_or_create(&Why { reason }).inc();
    }

    /// The counter a stalled body increments (a reference to the series, cloned per body).
    pub fn body_stalls(&self) -> Counter {
        self.body_stalls.clone()
    }

    /// A bound that is not a listener's was reached (`LIMITS`).
    pub fn limit_hit(&self, limit: &str) {
        self.limit_hits
            .get_or_create(&Limit {
                limit: limit.into(),
                listener: None,
            })
            .inc();
    }

    /// The listeners' handle on the same counter.
    pub fn limit_hits(&self) -> LimitHits {
        LimitHits(self.limit_hits.clone())
    }

    /// The exporter's counters, each series made at zero.
    pub fn span_counts(&self) -> crate::telemetry::SpanCounts {
        let series = |outcome| {
            self.trace_spans
                .get_or_create(&SpanOutcome { outcome })
                .clone()
        };
        crate::telemetry::SpanCounts {
            exported: series("exported"),
            dropped: series("dropped"),
            failed: series("failed"),
        }
    }

    pub fn audit_error(&self) {
        self.audit_errors.inc();
    }

    pub fn response_checked(&self) {
        self.responses_done.inc();
    }

    pub fn event_dropped(&self) {
        self.events_dropped.inc();
    }

    pub fn audit_seconds(&self, seconds: f64) {
        self.audit_duration.observe(seconds);
    }

    pub fn upstream_seconds(&self, seconds: f64) {
        self.upstream_duration.observe(seconds);
    }

    /// The memory's size, and its evictions since start. Serving threads report at once, so
    /// the counter takes the largest total seen (a read-then-add would count twice).
    pub fn memory(&self, entries: usize, evictions: u64) {
        self.memory_entries.set(entries as i64);
        self.memory_evictions
            .inner()
            .fetch_max(evictions, std::sync::atomic::Ordering::Relaxed);
    }

    /// Count a request in flight until the returned guard is dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }

    /// Create, at zero, the series the paging alerts watch, for every replace write and each
    /// of its declared body fields: Prometheus's `increase()` cannot see a counter's first
    /// increment if the series is born at 1, and a first silent clear must page.
    pub fn prepare(&self, api: &ApiLabel, contract: &crate::contract::Contract) {
        use crate::contract::WriteSemantics;
        for op in contract
            .operations()
            .iter()
            .filter(|op| op.write == WriteSemantics::Replace)
        {
            for p in op.body_properties().iter().filter(|p| !p.read_only) {
                for stage in ["omitted", "at_risk", "confirmed"] {
                    let _ = self.silent_clears.get_or_create(&SilentLabels {
                        operation: op.id.clone(),
                        field: p.name.clone(),
                        stage: stage.into(),
                        api: api.clone(),
                    });
                }
            }
            let hazard = crate::finding::Kind::ReplaceWillDropField;
            let _ = self.findings.get_or_create(&FindingLabels {
                kind: hazard.as_str().into(),
                operation: op.id.clone(),
                severity: hazard.default_severity().as_str().into(),
                blame: hazard.blame().as_str().into(),
                api: api.clone(),
            });
        }
    }

    /// The warnings of the revision in force, by reason (set once its whole-document checks
    /// have run, and again when a schema fails to compile at its first use).
    pub fn spec_warnings(&self, api: &ApiLabel, contract: &crate::contract::Contract) {
        for (reason, n) in crate::contract::count_by_reason(&contract.warnings()) {
            self.spec_warnings
                .get_or_create(&Reason {
                    reason: reason.as_str().into(),
                    api: api.clone(),
                })
                .set(n as i64);
        }
    }

    /// The changes of the last reload, by class.
    pub fn spec_changes(&self, api: &ApiLabel, breaking: usize, hazard: usize, info: usize) {
        for (class, n) in [("breaking", breaking), ("hazard", hazard), ("info", info)] {
            self.spec_changes
                .get_or_create(&ChangeClass {
                    class: class.into(),
                    api: api.clone(),
                })
                .set(n as i64);
        }
    }

    /// Count a load of the spec (at start, or a reload); both results are exported from the
    /// start so that `increase()` sees the first error.
    pub fn spec_loaded(&self, api: &ApiLabel, ok: bool) {
        for result in ["success", "error"] {
            let counter = self.spec_reloads.get_or_create(&LoadResult {
                result: result.into(),
                api: api.clone(),
            });
            if (result == "success") == ok {
                counter.inc();
            }
        }
    }

    /// The revision in force for `api`, in place of its last one.
    pub fn spec(&self, api: &ApiLabel, revision: &str, openapi: &str, operations: usize) {
        let labels = SpecLabels {
            revision: revision.into(),
            openapi: openapi.into(),
            api: api.clone(),
        };
        let mut now = self.spec_now.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = now.insert(api.clone(), labels.clone()) {
            self.spec_info.remove(&old);
        }
        self.spec_info.get_or_create(&labels).set(1);
        self.spec_operations
            .get_or_create(api)
            .set(operations as i64);
    }
}

/// A request in flight: counted in `driftwatch_requests_in_flight` until dropped.
pub struct InFlight<'m>(&'m Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The registry in Prometheus's classic text format (what `promtool check metrics` accepts).
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, registry);
    out
}

/// The registry in the OpenMetrics text format, which carries exemplars (Prometheus asks for
/// it with `Accept: application/openmetrics-text`).
pub fn encode_openmetrics(registry: &Registry) -> String {
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

/// An exemplar's labels: the trace and the request of a counter's latest increment.
pub type Exemplar = Vec<(String, String)>;

/// Runes an exemplar's label set may hold in all (OpenMetrics): names and values together.
const EXEMPLAR_RUNES: usize = 128;

/// The exemplar of request `request_id`, in trace `trace_id` when sampled: the request id is
/// cut to what OpenMetrics allows beside the trace id (a client chooses its request ids).
pub fn exemplar(trace_id: Option<String>, request_id: &str) -> Exemplar {
    let mut labels = Vec::with_capacity(2);
    let mut room = EXEMPLAR_RUNES - "request_id".len();
    if let Some(trace) = trace_id {
        room -= "trace_id".len() + trace.chars().count();
        labels.push(("trace_id".to_string(), trace));
    }
    // A length in bytes bounds the one in characters: most ids are kept whole at once.
    let request = match request_id.len() <= room {
        true => request_id.to_string(),
        false => request_id.chars().take(room).collect(),
    };
    labels.push(("request_id".to_string(), request));
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Kind, Location};

    /// Serving threads report the memory's eviction total in any order: the counter follows
    /// the largest, never the sum of reports, and never goes back.
    #[test]
    fn the_eviction_counter_follows_the_memorys_total_whatever_the_order_of_reports() {
        let mut registry = Registry::default();
        let m = Metrics::new(&mut registry, 2);
        for (reported, counted) in [(5, 5), (4, 5), (5, 5), (7, 7)] {
            m.memory(3, reported);
            assert_eq!(
                m.memory_evictions.get(),
                counted,
                "after a report of {reported}"
            );
        }
        assert!(encode(&registry).contains("driftwatch_memory_evictions_total 7\n"));
    }

    #[test]
    fn a_silent_clear_carries_its_trace_and_request_as_an_exemplar_in_openmetrics_only() {
        let mut registry = Registry::default();
        let m = Metrics::new(&mut registry, 2);
        let api = ApiLabel::default();
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736".to_string();
        let f = Finding::new(Kind::SilentClear, Location::Body, "/graphicsElementIds");
        m.finding(
            &api,
            "updateChannel",
            &f,
            Some(&exemplar(Some(trace.clone()), "p1")),
        );
        let open = encode_openmetrics(&registry);
        let line = (open.lines())
            .find(|l| l.starts_with("driftwatch_silent_clears_total{") && l.contains("confirmed"))
            .unwrap_or_else(|| panic!("{open}"));
        assert!(
            line.ends_with(&format!(
                " 1 # {{trace_id=\"{trace}\",request_id=\"p1\"}} 1.0"
            )),
            "{line}"
        );
        assert!(open.ends_with("# EOF\n"));
        assert!(
            !encode(&registry).contains("trace_id"),
            "0.0.4 has no exemplars"
        );
        // A client's long request id is cut to what OpenMetrics allows beside the trace id.
        let long = exemplar(Some(trace), &"r".repeat(500));
        let runes: usize = long
            .iter()
            .map(|(k, v)| k.chars().count() + v.chars().count())
            .sum();
        assert_eq!(runes, 128);
        assert_eq!(
            exemplar(None, "p1"),
            [("request_id".to_string(), "p1".to_string())]
        );
    }

    #[test]
    fn unknown_parameter_labels_are_bounded_per_operation() {
        let mut registry = Registry::default();
        let m = Metrics::new(&mut registry, 2);
        let api = ApiLabel::default();
        for name in ["a", "b", "c", "a", "d"] {
            m.finding(
                &api,
                "listX",
                &Finding::new(Kind::UnknownQueryParam, Location::Query, name),
                None,
            );
        }
        m.finding(
            &api,
            "listY",
            &Finding::new(Kind::UnknownQueryParam, Location::Query, "c"),
            None,
        );
        let text = encode(&registry);
        let line = |op: &str, p: &str| {
            format!("driftwatch_unknown_query_params_total{{operation=\"{op}\",param=\"{p}\"}}")
        };
        assert!(
            text.contains(&format!("{} 2\n", line("listX", "a"))),
            "{text}"
        );
        assert!(text.contains(&format!("{} 1\n", line("listX", "b"))));
        assert!(text.contains(&format!("{} 2\n", line("listX", "_other"))));
        assert!(text.contains(&format!("{} 1\n", line("listY", "c"))));
        assert!(!text.contains(&line("listX", "c")));
    }
}
