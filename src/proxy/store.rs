//! The silent-clear memory shared by replicas (`memory.backend = "redis"`): a Redis or Valkey
//! holds each resource's last GET and each write's pending clear, so a GET through one replica
//! arms the write through another, and the next GET anywhere confirms the clear. This
//! process's memory stays in front, as cache and as fallback.
//!
//! The request path waits on the store once, for a replace write that omits fields, and for at
//! most `memory.redis_deadline_ms`. Everything else (a GET's snapshot, a write's pending clear)
//! is queued to one task that sends what has gathered as one pipeline, in order. When the store
//! fails, the sidecar goes on with its own memory, counts each fallback, says so once per change
//! of state, and a probe each quiet second finds it down or back. The bound holds in the store too:
//! every entry expires with `memory.ttl_secs`, and an index (a sorted set by time) keeps at most
//! `memory.max_entries` of them, dropping the oldest, in the same script that writes one.
//! Keys are keyed hashes of the resource and credential scope: the store sees neither.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use redis::aio::ConnectionManager;
use tokio::sync::mpsc;

use crate::memory::{HashKey, Key, Pending, Snapshot};
use crate::settings::{MemorySettings, SharedStore};

/// Jobs waiting for the writer at most; past it they are counted as fallbacks and dropped.
const QUEUE: usize = 4096;
/// Jobs sent in one pipeline at most.
const BATCH: usize = 256;
/// How long one pipeline of writes may take before the store counts as down.
const WRITE_TIMEOUT: Duration = Duration::from_millis(500);
/// Time between probes while the store is down.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The trim every write ends with, as a Lua function: index entries past their TTL leave,
/// then the oldest past the capacity go with their keys. Returns the entries left.
const TRIM: &str = r"
local function trim()
  local ttl, now, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - ttl)
  local n = redis.call('ZCARD', KEYS[3])
  if n > cap then
    local old = redis.call('ZPOPMIN', KEYS[3], n - cap)
    for i = 1, #old, 2 do redis.call('DEL', old[i]) end
    n = cap
  end
  return n
end";

/// KEYS: snapshot, pending, index. ARGV: snapshot bytes, TTL ms, now ms, capacity. Keeps the
/// snapshot and takes the resource's pending clear.
const REMEMBER: &str = r"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], KEYS[1])
local pending = redis.call('GET', KEYS[2])
if pending then
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[3], KEYS[2])
end";

/// KEYS: pending, snapshot (unused), index. ARGV: pending bytes, TTL ms, now ms, capacity.
const LEAVE: &str = r"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], KEYS[1])
local pending = false";

/// A script: its body, then the trim; it answers `{pending clear or nil, entries}`.
fn script(body: &str) -> redis::Script {
    redis::Script::new(&format!("{TRIM}\n{body}\nreturn {{pending, trim()}}"))
}

/// What a confirmed clear found through the store is handed to: the GET's own context records
/// it as the local path would.
pub type OnPending = Box<dyn FnOnce(Pending, &Snapshot) + Send>;

enum Job {
    /// A GET's snapshot; the pending clear of another replica's write comes back to `then`,
    /// unless it is the one this replica already took (`took`, a write's request id).
    Remember {
        id: u128,
        snapshot: Arc<Snapshot>,
        took: Option<String>,
        then: OnPending,
    },
    /// A write's pending clear; `then` runs once it is stored (this replica forgets its own
    /// copy, so the clear is confirmed once, wherever the next GET goes).
    Leave {
        id: u128,
        pending: Pending,
        then: Box<dyn FnOnce() + Send>,
    },
}

impl Job {
    /// The fallback counter's label for this job.
    fn op(&self) -> &'static str {
        match self {
            Job::Remember { .. } => "remember",
            Job::Leave { .. } => "leave",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Op {
    op: &'static str,
}

/// What `/readyz` and the metrics say of the store.
pub struct Health {
    up: AtomicBool,
    /// Where the store is, and why it was last found down.
    detail: Mutex<String>,
    shown: String,
    up_gauge: Gauge,
}

impl Health {
    /// One line for `/readyz`: still ready either way, observe mode never stops traffic.
    pub fn line(&self) -> String {
        let detail = self.detail.lock().unwrap_or_else(|e| e.into_inner());
        match self.up.load(Ordering::Relaxed) {
            true => format!("memory store: up ({})", self.shown),
            false => format!(
                "memory store: down ({}), using this replica's memory: {detail}",
                self.shown
            ),
        }
    }

    fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Record the store as up or down; a change of state is logged once.
    fn set(&self, up: bool, why: &str) {
        if self.up.swap(up, Ordering::Relaxed) == up {
            return;
        }
        self.up_gauge.set(i64::from(up));
        match up {
            true => tracing::info!(store = self.shown, "memory store reachable again"),
            false => {
                *self.detail.lock().unwrap_or_else(|e| e.into_inner()) = why.to_string();
                tracing::warn!(
                    store = self.shown,
                    error = why,
                    "memory store unreachable; using this replica's memory until it is back"
                );
            }
        }
    }
}

pub struct Store {
    conn: ConnectionManager,
    jobs: mpsc::Sender<Job>,
    /// Jobs queued and not yet written (or given up on), for the drain to wait on.
    queued: Arc<AtomicUsize>,
    pub health: Arc<Health>,
    names: Names,
    deadline: Duration,
    fallbacks: Family<Op, Counter>,
    recall_seconds: Histogram,
}

/// How keys are named in the store.
#[derive(Clone)]
struct Names {
    prefix: String,
    hash_key: HashKey,
}

impl Names {
    fn snapshot(&self, id: u128) -> String {
        format!("{}s:{id:032x}", self.prefix)
    }
    fn pending(&self, id: u128) -> String {
        format!("{}p:{id:032x}", self.prefix)
    }
    fn index(&self) -> String {
        format!("{}index", self.prefix)
    }
}

impl Store {
    /// Connect lazily (the store may come up after the sidecar) and start the writer. Needs a
    /// tokio runtime: the writer and the connection's driver run on it.
    pub fn start(
        shared: &SharedStore,
        memory: &MemorySettings,
        registry: &mut Registry,
    ) -> redis::RedisResult<Store> {
        let client = redis::Client::open(shared.url.clone())?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200))
            .set_connection_timeout(Some(Duration::from_secs(1)))
            .set_response_timeout(Some(WRITE_TIMEOUT));
        let conn = ConnectionManager::new_lazy_with_config(client, config)?;
        let Metrics {
            up_gauge,
            fallbacks,
            entries,
            recall_seconds,
        } = Metrics::register(registry);
        let health = Arc::new(Health {
            up: AtomicBool::new(true),
            detail: Mutex::default(),
            shown: shared.shown.clone(),
            up_gauge,
        });
        health.up_gauge.set(1);
        let names = Names {
            prefix: shared.key_prefix.clone(),
            hash_key: memory.hash_key,
        };
        let (jobs, queue) = mpsc::channel(QUEUE);
        let queued = Arc::new(AtomicUsize::new(0));
        let writer = Writer {
            conn: conn.clone(),
            queued: queued.clone(),
            health: health.clone(),
            names: names.clone(),
            fallbacks: fallbacks.clone(),
            entries,
            ttl_ms: u64::try_from(memory.ttl.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
            capacity: memory.max_entries.max(1),
            remember: script(REMEMBER),
            leave: script(LEAVE),
        };
        tokio::spawn(writer.run(queue));
        Ok(Store {
            conn,
            jobs,
            queued,
            health,
            names,
            deadline: shared.deadline,
            fallbacks,
            recall_seconds,
        })
    }

    /// The store's copy of `key`'s last GET, waited for until the deadline at most. `None` when
    /// it has none, or is down or late (counted: the write is compared with this replica's
    /// memory alone).
    pub async fn recall(&self, key: &Key) -> Option<Snapshot> {
        if !self.health.is_up() {
            self.fallback("recall");
            return None;
        }
        let name = self.names.snapshot(self.names.hash_key.store_id(key));
        let mut conn = self.conn.clone();
        let started = Instant::now();
        let mut get = redis::cmd("GET");
        let read = get.arg(&name).query_async::<Option<Vec<u8>>>(&mut conn);
        let answer = tokio::time::timeout(self.deadline, read).await;
        self.recall_seconds.observe(started.elapsed().as_secs_f64());
        match answer {
            Ok(Ok(bytes)) => bytes.and_then(|b| Snapshot::decode(&b)),
            Ok(Err(e)) => {
                self.health.set(false, &e.to_string());
                self.fallback("recall");
                None
            }
            Err(_) => {
                self.fallback("recall");
                None
            }
        }
    }

    /// Queue a GET's snapshot for the store; `then` gets a pending clear another replica left.
    pub fn remember(
        &self,
        key: &Key,
        snapshot: Arc<Snapshot>,
        took: Option<String>,
        then: OnPending,
    ) {
        let id = self.names.hash_key.store_id(key);
        self.queue(
            "remember",
            Job::Remember {
                id,
                snapshot,
                took,
                then,
            },
        );
    }

    /// Queue a write's pending clear for the store, so the next GET on any replica confirms
    /// it; `then` runs once it is stored.
    pub fn leave(&self, key: &Key, pending: Pending, then: Box<dyn FnOnce() + Send>) {
        let id = self.names.hash_key.store_id(key);
        self.queue("leave", Job::Leave { id, pending, then });
    }

    fn queue(&self, op: &'static str, job: Job) {
        self.queued.fetch_add(1, Ordering::SeqCst);
        if !self.health.is_up() || self.jobs.try_send(job).is_err() {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            self.fallback(op);
        }
    }

    fn fallback(&self, op: &'static str) {
        self.fallbacks.get_or_create(&Op { op }).inc();
    }

    /// Resolve once every queued job was written (or given up on): the drain waits for it, so
    /// a replica's last GETs reach the store before it exits.
    pub async fn flushed(&self) {
        while self.queued.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// The store's own metrics, registered only with `memory.backend = "redis"`.
struct Metrics {
    up_gauge: Gauge,
    fallbacks: Family<Op, Counter>,
    entries: Gauge,
    recall_seconds: Histogram,
}

impl Metrics {
    fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            up_gauge: Gauge::default(),
            fallbacks: Family::default(),
            entries: Gauge::default(),
            recall_seconds: Histogram::new(exponential_buckets(5e-5, 2.0, 10)),
        };
        let r = registry.sub_registry_with_prefix("driftwatch");
        r.register(
            "memory_store_up",
            "Whether the memory store replicas share answers (1) or this replica uses its own memory (0)",
            m.up_gauge.clone(),
        );
        r.register(
            "memory_store_fallbacks",
            "Memory reads and writes done without the shared store (down, slow or full queue), by op: recall (a write's read), remember (a GET's snapshot), leave (a write's pending clear)",
            m.fallbacks.clone(),
        );
        for op in ["recall", "remember", "leave"] {
            let _ = m.fallbacks.get_or_create(&Op { op });
        }
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

/// The one task that writes to the store, in the order jobs were queued.
struct Writer {
    conn: ConnectionManager,
    queued: Arc<AtomicUsize>,
    health: Arc<Health>,
    names: Names,
    fallbacks: Family<Op, Counter>,
    entries: Gauge,
    ttl_ms: u64,
    capacity: usize,
    remember: redis::Script,
    leave: redis::Script,
}

impl Writer {
    async fn run(mut self, mut queue: mpsc::Receiver<Job>) {
        let mut batch = Vec::with_capacity(BATCH);
        let mut last_probe = Instant::now();
        loop {
            if !self.health.is_up() {
                // Jobs are counted and dropped while the store is down (see `Store::queue`);
                // a probe each second finds it again.
                while let Ok(job) = queue.try_recv() {
                    self.fallbacks.get_or_create(&Op { op: job.op() }).inc();
                    self.queued.fetch_sub(1, Ordering::SeqCst);
                }
                tokio::time::sleep(PROBE_EVERY.saturating_sub(last_probe.elapsed())).await;
                last_probe = Instant::now();
                self.probe().await;
                continue;
            }
            // A quiet second is a probe's: the store's state is known without traffic.
            tokio::select! {
                got = queue.recv_many(&mut batch, BATCH) => if got == 0 { return },
                () = tokio::time::sleep(PROBE_EVERY) => {
                    self.probe().await;
                    continue;
                }
            }
            let jobs = std::mem::take(&mut batch);
            let written = jobs.len();
            self.write(jobs).await;
            self.queued.fetch_sub(written, Ordering::SeqCst);
        }
    }

    async fn probe(&mut self) {
        let command = redis::cmd("PING");
        let ping = command.query_async::<String>(&mut self.conn);
        match tokio::time::timeout(WRITE_TIMEOUT, ping).await {
            Ok(Ok(_)) => self.health.set(true, ""),
            Ok(Err(e)) => self.health.set(false, &e.to_string()),
            Err(_) => self.health.set(false, "no answer to PING"),
        }
    }

    /// One pipeline for the batch; its answers handed out in order. A store that lost its
    /// scripts (restarted) is given them again, once.
    async fn write(&mut self, jobs: Vec<Job>) {
        let pipe = self.pipeline(&jobs);
        let mut answer = self.send(&pipe).await;
        if let Err(e) = &answer
            && e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
        {
            for script in [&self.remember, &self.leave] {
                let _ = script.prepare_invoke().load_async(&mut self.conn).await;
            }
            answer = self.send(&pipe).await;
        }
        match answer {
            Ok(answers) => self.hand_out(jobs, answers),
            Err(e) => {
                self.health.set(false, &e.to_string());
                for job in &jobs {
                    self.fallbacks.get_or_create(&Op { op: job.op() }).inc();
                }
            }
        }
    }

    /// The batch as one `EVALSHA` per job, in order.
    fn pipeline(&self, jobs: &[Job]) -> redis::Pipeline {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut pipe = redis::pipe();
        for job in jobs {
            let (script, keys, bytes) = match job {
                Job::Remember { id, snapshot, .. } => (
                    &self.remember,
                    [self.names.snapshot(*id), self.names.pending(*id)],
                    snapshot.encode(),
                ),
                Job::Leave { id, pending, .. } => (
                    &self.leave,
                    [self.names.pending(*id), self.names.snapshot(*id)],
                    pending.encode(),
                ),
            };
            pipe.cmd("EVALSHA")
                .arg(script.get_hash())
                .arg(3)
                .arg(&keys[0])
                .arg(&keys[1])
                .arg(self.names.index())
                .arg(bytes)
                .arg(self.ttl_ms)
                .arg(now)
                .arg(self.capacity);
        }
        pipe
    }

    /// Each job's answer to its own: a pending clear another replica left goes to the GET that
    /// found it; a stored pending clear lets this replica forget its copy.
    fn hand_out(&self, jobs: Vec<Job>, answers: Vec<(Option<Vec<u8>>, i64)>) {
        for (job, (pending, entries)) in jobs.into_iter().zip(answers) {
            self.entries.set(entries);
            match job {
                Job::Remember {
                    snapshot,
                    took,
                    then,
                    ..
                } => {
                    let pending = pending.as_deref().and_then(Pending::decode);
                    if let Some(pending) = pending
                        && took.as_deref() != Some(pending.write_request_id.as_str())
                    {
                        then(pending, &snapshot);
                    }
                }
                Job::Leave { then, .. } => then(),
            }
        }
    }

    async fn send(
        &mut self,
        pipe: &redis::Pipeline,
    ) -> redis::RedisResult<Vec<(Option<Vec<u8>>, i64)>> {
        match tokio::time::timeout(WRITE_TIMEOUT, pipe.query_async(&mut self.conn)).await {
            Ok(answer) => answer,
            Err(_) => Err((redis::ErrorKind::Io, "no answer within 500 ms").into()),
        }
    }
}
