//! The shared memory store's metrics (`memory.backend = "redis"`): whether it answers, the
//! reads and writes done without it, its size, how long a write waited for it.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Op {
    op: &'static str,
}

/// `driftwatch_memory_store_fallbacks_total{op}`, shared by the request path and the writer.
#[derive(Clone, Default)]
pub struct Fallbacks(Family<Op, Counter>);

impl Fallbacks {
    pub fn count(&self, op: &'static str) {
        self.0.get_or_create(&Op { op }).inc();
    }
}

/// The shared memory store's metrics, registered only with `memory.backend = "redis"`.
pub struct StoreMetrics {
    pub up_gauge: Gauge,
    pub fallbacks: Fallbacks,
    pub entries: Gauge,
    pub recall_seconds: Histogram,
    pub restarts: Counter,
}

impl StoreMetrics {
    pub fn register(registry: &mut Registry) -> StoreMetrics {
        let m = StoreMetrics {
            up_gauge: Gauge::default(),
            fallbacks: Fallbacks::default(),
            entries: Gauge::default(),
            recall_seconds: Histogram::new(exponential_buckets(5e-5, 2.0, 10)),
            restarts: Counter::default(),
        };
        let r = registry.sub_registry_with_prefix("driftwatch");
        r.register(
            "memory_store_up",
            "Whether the memory store replicas share answers (1) or this replica uses its own memory (0)",
            m.up_gauge.clone(),
        );
        r.register(
            "memory_store_fallbacks",
            "Memory reads and writes done without the shared store (down, slow or full queue), by op: recall (a write's read), remember (a GET's snapshot), leave (a write's pending clear), lessons (a write's read of its operation's lessons), learn (a lesson)",
            m.fallbacks.0.clone(),
        );
        for op in ["recall", "remember", "leave", "lessons", "learn"] {
            let _ = m.fallbacks.0.get_or_create(&Op { op });
        }
        r.register(
            "memory_store_writer_restarts",
            "Times the store's writer panicked and was started again (a bug; the batch it held fell back)",
            m.restarts.clone(),
        );
        r.register(
            "memory_store_entries",
            "Entries in the shared store's index (resources and pending clears), as of the last write",
            m.entries.clone(),
        );
        r.register(
            "memory_store_recall_seconds",
            "Time a replace write waited for the shared store's copy of its resource",
            m.recall_seconds.clone(),
        );
        m
    }
}
