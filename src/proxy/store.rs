//! The silent-clear memory shared by replicas (`memory.backend = "redis"`): a Redis or Valkey
//! holds each resource's last GET and each write's pending clear, so a GET through one replica
//! arms the write through another, and the next GET anywhere confirms the clear. This
//! process's memory stays in front, as cache and as fallback.
//!
//! The request path waits on the store once, for a replace write that omits fields, and for at
//! most `memory.redis_deadline_ms`. Everything else (a GET's snapshot, a write's pending clear)
//! is queued to one writer, on a thread of its own, that sends what gathered as one pipeline
//! of plain commands, in order, a resource read many times in a batch written once. When the
//! store fails, the sidecar goes on with its own memory, counts each fallback, says so once per
//! change of state, and a probe each quiet second finds it down or back. The bound holds in
//! the store too: every entry expires with `memory.ttl_secs`, and an index (a sorted set by
//! time) keeps at most `memory.max_entries` of them, trimmed by a script that ends each batch
//! (so between two batches it may pass the bound by one batch, 1,024 entries at most). Keys are
//! keyed hashes of the resource and credential scope: the store sees neither.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use redis::aio::ConnectionManager;
use tokio::sync::mpsc;

use crate::memory::survival::Lesson;
use crate::memory::{HashKey, Key, Pending, Snapshot};
use crate::settings::{MemorySettings, SharedStore};
use crate::sink::{Fallbacks, StoreMetrics};

/// Jobs waiting for the writer at most; past it they are counted as fallbacks and dropped.
const QUEUE: usize = 4096;
/// Jobs sent in one pipeline at most.
const BATCH: usize = 1024;
/// The pause after each batch, so that under load the next one gathers what came meanwhile
/// (at most a thousand batches a second); an idle writer still takes a job the moment it
/// comes.
const GATHER: Duration = Duration::from_millis(1);
/// How long one pipeline of writes may take before the store counts as down.
const WRITE_TIMEOUT: Duration = Duration::from_millis(500);
/// Time between probes while the store is down.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The trim each batch ends with: the index (a sorted set of keys by time) keeps the newest
/// `capacity` entries, and the oldest past it go with their keys; expired ones are the oldest,
/// so they go first. KEYS: index. ARGV: capacity. Returns the entries left.
const TRIM: &str = r"
local cap = tonumber(ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
if n > cap then
  local old = redis.call('ZPOPMIN', KEYS[1], n - cap)
  for i = 1, #old, 2 do redis.call('DEL', old[i]) end
  n = cap
end
return n";

/// The incidents' trim: the index (a sorted set of incident ids by time) keeps the newest
/// `capacity`, and the oldest past it go with their stories and values. KEYS: index. ARGV:
/// capacity, the key prefix.
const TRIM_INCIDENTS: &str = r"
local cap = tonumber(ARGV[1])
local n = redis.call('ZCARD', KEYS[1])
if n > cap then
  local old = redis.call('ZPOPMIN', KEYS[1], n - cap)
  for i = 1, #old, 2 do redis.call('DEL', ARGV[2] .. 'i:' .. old[i], ARGV[2] .. 'iv:' .. old[i]) end
end
return 0";

/// Bytes of kept values and incidents' entries waiting for the writer at most: each may be
/// megabytes (a sixteenth of `incidents.max_value_bytes`), so the queue's count alone does
/// not bound them. Past it they are counted as fallbacks and dropped.
const QUEUED_BYTES: usize = 64 << 20;

/// What a confirmed clear found through the store is handed to: the GET's own context records
/// it as the local path would.
pub type OnPending = Box<dyn FnOnce(Pending, &Snapshot) + Send>;

enum Job {
    /// A GET's snapshot; the pending clear of another replica's write comes back to `then`,
    /// unless it is one this replica already took (`took`: writes' request ids).
    Remember {
        id: u128,
        snapshot: Arc<Snapshot>,
        took: Vec<String>,
        then: OnPending,
    },
    /// A write's pending clear; `then` runs once it is stored (this replica forgets its own
    /// copy, so the clear is confirmed once, wherever the next GET goes).
    Leave {
        id: u128,
        pending: Pending,
        then: Box<dyn FnOnce() + Send>,
    },
    /// What a write's answer taught of its operation (see [`crate::memory::survival`]).
    Learn { id: u128, lesson: Lesson },
    /// A read's values, sealed (`incidents.keep_values`): a write through another replica
    /// recalls them.
    Values { id: u128, sealed: Vec<u8> },
    /// One entry of an incident's story, and the values it kept (sealed), for `/incidents` on
    /// every replica.
    Told {
        id: u128,
        story: Vec<u8>,
        kept: Option<Vec<u8>>,
        max: usize,
        /// The entry may open the story (a write, a clear); else it only adds to one there is.
        opens: bool,
    },
}

impl Job {
    /// The fallback counter's label for this job.
    /// Bytes it holds that the queue's count does not bound (kept values, incidents).
    fn bytes(&self) -> usize {
        match self {
            Job::Values { sealed, .. } => sealed.len(),
            Job::Told { story, kept, .. } => story.len() + kept.as_ref().map_or(0, Vec::len),
            _ => 0,
        }
    }

    fn op(&self) -> &'static str {
        match self {
            Job::Remember { .. } => "remember",
            Job::Leave { .. } => "leave",
            Job::Learn { .. } => "learn",
            Job::Values { .. } => "values",
            Job::Told { .. } => "incident",
        }
    }
}

/// How long an incident's story is kept in the store (its values go with `memory.ttl_secs`).
const INCIDENT_TTL_MS: u64 = 7 * 24 * 3600 * 1000;
/// Entries of one incident's story kept in the store, the first ones (the write's among
/// them): as many as a story has steps (`incident::MAX_STEPS`).
const STORY_ENTRIES: i64 = 16;
/// How long `/incidents` waits on the store before answering from this replica's own.
const INCIDENTS_DEADLINE: Duration = Duration::from_secs(2);

/// An incident as the store holds it: its story's entries, and its kept values.
pub type StoredIncident = (Vec<Vec<u8>>, Option<Vec<u8>>);

/// How long an operation's lessons are kept in the store, renewed by each new one: they are the
/// API's behaviour, not a resource's state, and bounded by the spec (declared fields of replace
/// writes), not by `memory.max_entries`.
const LESSONS_TTL_MS: u64 = 30 * 24 * 3600 * 1000;

/// Why an entry read back was not used.
const REFUSED: &str =
    "an entry read back did not hold together (or held a time past year 9999) and was refused";

/// What `/readyz` and the metrics say of the store.
pub struct Health {
    up: AtomicBool,
    /// Where the store is, and why it was last found down.
    detail: Mutex<String>,
    /// The last operation that fell back while the store answered (a wrong key type, out of
    /// memory under `noeviction`, an entry refused), and when.
    degraded: Mutex<Option<(Instant, String)>>,
    shown: String,
    up_gauge: Gauge,
}

/// How long after its last fallback a store that answers is said to be degraded.
const DEGRADED_FOR: Duration = Duration::from_secs(60);

impl Health {
    /// One line for `/readyz`: still ready either way, observe mode never stops traffic.
    pub fn line(&self) -> String {
        let detail = self.detail.lock().unwrap_or_else(|e| e.into_inner());
        let degraded = self.degraded.lock().unwrap_or_else(|e| e.into_inner());
        let recent = degraded
            .as_ref()
            .filter(|(at, _)| at.elapsed() < DEGRADED_FOR);
        match (self.up.load(Ordering::Relaxed), recent) {
            (true, None) => format!("memory store: up ({})", self.shown),
            (true, Some((_, why))) => format!(
                "memory store: degraded ({}), it answers but operations fell back in the last minute: {why}",
                self.shown
            ),
            (false, _) => format!(
                "memory store: down ({}), using this replica's memory: {detail}",
                self.shown
            ),
        }
    }

    /// An operation failed on a store that answered: the store stays up (a PING would find
    /// it so at once), and `/readyz` says degraded for a minute.
    fn degrade(&self, why: &str) {
        let mut degraded = self.degraded.lock().unwrap_or_else(|e| e.into_inner());
        let first = degraded
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= DEGRADED_FOR);
        if first {
            tracing::warn!(
                store = self.shown,
                error = why,
                "memory store answers, but an operation fell back"
            );
        }
        *degraded = Some((Instant::now(), why.to_string()));
    }

    /// Down when the store cannot be reached; degraded when it answers with an error.
    fn failed(&self, error: &redis::RedisError) {
        let unreachable = error.is_io_error()
            || error.is_connection_dropped()
            || error.is_connection_refusal()
            || error.is_timeout();
        match unreachable {
            true => self.set(false, &error.to_string()),
            false => self.degrade(&error.to_string()),
        }
    }

    fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Record the store as up or down: a change of state is logged once, and while down the
    /// latest reason is what `/readyz` says (refused, then a password refused, ...).
    fn set(&self, up: bool, why: &str) {
        if !up {
            *self.detail.lock().unwrap_or_else(|e| e.into_inner()) = why.to_string();
        }
        if self.up.swap(up, Ordering::Relaxed) == up {
            return;
        }
        self.up_gauge.set(i64::from(up));
        match up {
            true => tracing::info!(store = self.shown, "memory store reachable again"),
            false => {
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
    /// The bytes of those jobs, bounded by [`QUEUED_BYTES`].
    queued_bytes: Arc<AtomicUsize>,
    pub health: Arc<Health>,
    names: Names,
    deadline: Duration,
    fallbacks: Fallbacks,
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
    /// The fields an operation's answers kept, and those they emptied (sets of field names).
    fn kept(&self, id: u128) -> String {
        format!("{}k:{id:032x}", self.prefix)
    }
    fn erased(&self, id: u128) -> String {
        format!("{}e:{id:032x}", self.prefix)
    }
    /// An operation's id in the store: a keyed hash of its name, as a resource's is.
    fn operation(&self, name: &str) -> u128 {
        let key = Key {
            path: name.to_string(),
            scope: 0,
        };
        self.hash_key.store_id(&key)
    }
    fn index(&self) -> String {
        format!("{}index", self.prefix)
    }
    /// A resource's last read's values, sealed.
    fn values(&self, id: u128) -> String {
        format!("{}v:{id:032x}", self.prefix)
    }
    /// An incident's story (a list of entries), and its kept values.
    fn story(&self, id: &str) -> String {
        format!("{}i:{id}", self.prefix)
    }
    fn story_values(&self, id: &str) -> String {
        format!("{}iv:{id}", self.prefix)
    }
    /// The resources whose read values are kept, by time (bounded as the snapshots are).
    fn values_index(&self) -> String {
        format!("{}vindex", self.prefix)
    }
    /// The incidents by the time they last changed (a sorted set of their ids).
    fn incidents(&self) -> String {
        format!("{}incidents", self.prefix)
    }
}

impl Store {
    /// Connect lazily (the store may come up after the sidecar) and start the writer on a
    /// thread of its own, with the connection's driver: encoding and sending a batch never
    /// holds up a serving thread.
    pub fn start(
        shared: &SharedStore,
        memory: &MemorySettings,
        metrics: StoreMetrics,
    ) -> std::io::Result<Store> {
        let (runtime, conn) = connect(shared)?;
        let StoreMetrics {
            up_gauge,
            fallbacks,
            entries,
            recall_seconds,
            restarts,
        } = metrics;
        let health = Arc::new(Health {
            up: AtomicBool::new(true),
            detail: Mutex::default(),
            degraded: Mutex::default(),
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
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        let writer = Writer {
            conn: conn.clone(),
            queued: queued.clone(),
            queued_bytes: queued_bytes.clone(),
            health: health.clone(),
            names: names.clone(),
            fallbacks: fallbacks.clone(),
            entries,
            ttl_ms: u64::try_from(memory.ttl.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
            capacity: memory.max_entries.max(1),
            trim: redis::Script::new(TRIM),
            trim_incidents: redis::Script::new(TRIM_INCIDENTS),
            restarts,
        };
        std::thread::Builder::new()
            .name("driftwatch-store".into())
            .spawn(move || writer.run_restarting(&runtime, queue))?;
        Ok(Store {
            conn,
            jobs,
            queued,
            queued_bytes,
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
            self.fallbacks.count("recall");
            return None;
        }
        let name = self.names.snapshot(self.names.hash_key.store_id(key));
        let mut conn = self.conn.clone();
        let started = Instant::now();
        let mut get = redis::cmd("GET");
        get.arg(&name);
        // A connection the store dropped (a restart, a failover) fails once, and the manager
        // connects again: the second try, within the same deadline, finds the store back.
        let read = async {
            match get.query_async::<Option<Vec<u8>>>(&mut conn).await {
                Err(e) if e.is_connection_dropped() || e.is_io_error() => {
                    get.query_async::<Option<Vec<u8>>>(&mut conn).await
                }
                answer => answer,
            }
        };
        let answer = self.within_deadline("recall", read).await;
        self.recall_seconds.observe(started.elapsed().as_secs_f64());
        let bytes = answer.flatten()?;
        let snapshot = Snapshot::decode(&bytes);
        if snapshot.is_none() {
            self.health.degrade(REFUSED);
            self.fallbacks.count("recall");
        }
        snapshot
    }

    /// `read`'s answer within the store's deadline; `None` when the store failed (marked as
    /// such) or was late, each counted as a fallback of `op`.
    async fn within_deadline<T>(
        &self,
        op: &'static str,
        read: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Option<T> {
        match tokio::time::timeout(self.deadline, read).await {
            Ok(Ok(answer)) => Some(answer),
            Ok(Err(e)) => {
                self.health.failed(&e);
                self.fallbacks.count(op);
                None
            }
            Err(_) => {
                self.fallbacks.count(op);
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
        let took = took.into_iter().collect();
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

    /// What the replicas have learned of `operation` (its answers' lessons), waited for until
    /// the deadline at most: `None` when the store has none, or is down or late (counted).
    pub async fn lessons(&self, operation: &str) -> Option<Lesson> {
        if !self.health.is_up() {
            self.fallbacks.count("lessons");
            return None;
        }
        let id = self.names.operation(operation);
        let mut pipe = redis::pipe();
        pipe.cmd("SMEMBERS").arg(self.names.kept(id));
        pipe.cmd("SMEMBERS").arg(self.names.erased(id));
        let mut conn = self.conn.clone();
        let read = pipe.query_async::<(Vec<String>, Vec<String>)>(&mut conn);
        let (kept, erased) = self.within_deadline("lessons", read).await?;
        if kept.is_empty() && erased.is_empty() {
            return None;
        }
        Some(Lesson {
            operation: operation.to_string(),
            // Bounded as the local memory is, whatever the store holds.
            kept: kept.into_iter().take(crate::memory::MAX_FIELDS).collect(),
            erased: erased.into_iter().take(crate::memory::MAX_FIELDS).collect(),
        })
    }

    /// Queue a lesson for the store, so every replica's writes of the operation are judged by
    /// it (enforce mode on one replica by what observe mode on another saw).
    pub fn learn(&self, lesson: Lesson) {
        let id = self.names.operation(&lesson.operation);
        self.queue("learn", Job::Learn { id, lesson });
    }

    /// Queue a write's pending clear for the store, so the next GET on any replica confirms
    /// it; `then` runs once it is stored.
    pub fn leave(&self, key: &Key, pending: Pending, then: Box<dyn FnOnce() + Send>) {
        let id = self.names.hash_key.store_id(key);
        self.queue("leave", Job::Leave { id, pending, then });
    }

    /// Queue a read's sealed values for the store.
    pub fn keep_values(&self, key: &Key, sealed: Vec<u8>) {
        let id = self.names.hash_key.store_id(key);
        self.queue("values", Job::Values { id, sealed });
    }

    /// The store's sealed values of `key`'s last read, waited for until the deadline at most.
    pub async fn recall_values(&self, key: &Key) -> Option<Vec<u8>> {
        if !self.health.is_up() {
            self.fallbacks.count("values");
            return None;
        }
        let name = self.names.values(self.names.hash_key.store_id(key));
        let mut conn = self.conn.clone();
        let mut get = redis::cmd("GET");
        get.arg(&name);
        let read = get.query_async::<Option<Vec<u8>>>(&mut conn);
        self.within_deadline("values", read).await.flatten()
    }

    /// Queue one entry of the story of the incident of write `write_request_id` (and the
    /// values it kept), keeping `max` incidents in the store at most.
    pub fn tell(
        &self,
        write_request_id: &str,
        (story, kept): (Vec<u8>, Option<Vec<u8>>),
        max: usize,
        opens: bool,
    ) {
        let id = self.names.operation(write_request_id);
        let job = Job::Told {
            id,
            story,
            kept,
            max,
            opens,
        };
        self.queue("incident", job);
    }

    /// The newest `limit` incidents the store holds, each its story's entries and kept values;
    /// `Err` with why when the store did not answer (`/incidents` then answers from this
    /// replica's own).
    pub async fn incidents(&self, limit: usize) -> Result<Vec<StoredIncident>, String> {
        let mut conn = self.conn.clone();
        let read = async {
            let ids: Vec<String> = redis::cmd("ZREVRANGE")
                .arg(self.names.incidents())
                .arg(0)
                .arg(limit.max(1) as i64 - 1)
                .query_async(&mut conn)
                .await?;
            let mut pipe = redis::pipe();
            for id in &ids {
                pipe.cmd("LRANGE").arg(self.names.story(id)).arg(0).arg(-1);
                pipe.cmd("GET").arg(self.names.story_values(id));
            }
            let answers: Vec<StoredIncident> = match ids.is_empty() {
                true => Vec::new(),
                false => {
                    let flat: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
                    pairs(flat)
                }
            };
            Ok::<_, redis::RedisError>(answers)
        };
        match tokio::time::timeout(INCIDENTS_DEADLINE, read).await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {INCIDENTS_DEADLINE:?}")),
        }
    }

    fn queue(&self, op: &'static str, job: Job) {
        let bytes = job.bytes();
        self.queued.fetch_add(1, Ordering::SeqCst);
        let before = self.queued_bytes.fetch_add(bytes, Ordering::SeqCst);
        let full = bytes > 0 && before + bytes > QUEUED_BYTES;
        if full || !self.health.is_up() || self.jobs.try_send(job).is_err() {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            self.queued_bytes.fetch_sub(bytes, Ordering::SeqCst);
            self.fallbacks.count(op);
        }
    }

    /// Resolve once every queued job was written (or given up on): the drain waits for it, so
    /// a replica's last GETs reach the store before it exits.
    pub async fn flushed(&self) {
        while self.queued.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// A pipeline's answers to LRANGE and GET, by two: each incident's entries and kept values
/// (what is not bytes is left out).
fn pairs(flat: Vec<redis::Value>) -> Vec<StoredIncident> {
    let bytes = |v: redis::Value| match v {
        redis::Value::BulkString(b) => Some(b),
        _ => None,
    };
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut flat = flat.into_iter();
    while let (Some(list), Some(kept)) = (flat.next(), flat.next()) {
        let entries = match list {
            redis::Value::Array(items) => items.into_iter().filter_map(bytes).collect(),
            _ => Vec::new(),
        };
        out.push((entries, bytes(kept)));
    }
    out
}

/// The writer's runtime, and a connection manager whose driver runs on it: lazy, so a store
/// that is down at start is no error (the sidecar starts on its own memory), and it connects
/// again by itself after a failure.
fn connect(shared: &SharedStore) -> std::io::Result<(tokio::runtime::Runtime, ConnectionManager)> {
    let client = match &shared.ca {
        Some(ca) => {
            let roots = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(ca.clone()),
            };
            redis::Client::build_with_tls(shared.url.clone(), roots)
        }
        None => redis::Client::open(shared.url.clone()),
    }
    .map_err(std::io::Error::other)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(200))
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(WRITE_TIMEOUT));
    let conn = {
        let _on = runtime.enter();
        ConnectionManager::new_lazy_with_config(client, config).map_err(std::io::Error::other)?
    };
    Ok((runtime, conn))
}

/// A batch with each resource's snapshots made one, the newest: under load one resource is
/// read many times between two writes, and only its last GET needs keeping. The merged job
/// keeps every write this replica took, and hands a pending clear to the newest GET. A
/// pending clear left between two GETs of the resource keeps them apart, so the order of the
/// take and the leave is the order they happened in.
fn coalesce(jobs: Vec<Job>) -> Vec<Job> {
    let mut out: Vec<Job> = Vec::with_capacity(jobs.len());
    let mut last: std::collections::HashMap<u128, usize> = std::collections::HashMap::new();
    let mut values: std::collections::HashMap<u128, usize> = std::collections::HashMap::new();
    for job in jobs {
        match job {
            Job::Remember {
                id,
                snapshot,
                took,
                then,
            } => match last.get(&id).map(|&i| &mut out[i]) {
                Some(Job::Remember {
                    snapshot: kept,
                    took: kept_took,
                    then: kept_then,
                    ..
                }) => {
                    *kept = snapshot;
                    kept_took.extend(took);
                    *kept_then = then;
                }
                _ => {
                    last.insert(id, out.len());
                    out.push(Job::Remember {
                        id,
                        snapshot,
                        took,
                        then,
                    });
                }
            },
            Job::Leave { id, .. } => {
                last.remove(&id);
                out.push(job);
            }
            Job::Values { id, .. } => match values.get(&id) {
                // A resource read twice in a batch: its last read's values alone.
                Some(&at) => out[at] = job,
                None => {
                    values.insert(id, out.len());
                    out.push(job);
                }
            },
            Job::Learn { .. } | Job::Told { .. } => out.push(job),
        }
    }
    out
}

/// Jobs taken off the queue, counted out of `queued` when dropped.
struct Written(Arc<AtomicUsize>, usize);

impl Drop for Written {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::SeqCst);
    }
}

/// The one task that writes to the store, in the order jobs were queued.
#[derive(Clone)]
struct Writer {
    conn: ConnectionManager,
    queued: Arc<AtomicUsize>,
    queued_bytes: Arc<AtomicUsize>,
    health: Arc<Health>,
    names: Names,
    fallbacks: Fallbacks,
    entries: Gauge,
    ttl_ms: u64,
    capacity: usize,
    trim: redis::Script,
    trim_incidents: redis::Script,
    restarts: Counter,
}

impl Writer {
    /// Run until the queue closes. A panic (a bug: what the store sends is checked, never
    /// trusted) ends only the batch it was in: the writer starts again, counted in
    /// `driftwatch_memory_store_writer_restarts_total`, instead of leaving every later GET
    /// unremembered for the life of the process.
    fn run_restarting(self, runtime: &tokio::runtime::Runtime, mut queue: mpsc::Receiver<Job>) {
        loop {
            let writer = self.clone();
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                runtime.block_on(writer.run(&mut queue));
            }));
            if ran.is_ok() {
                return;
            }
            self.restarts.inc();
            tracing::error!("the memory store's writer panicked; started again");
        }
    }

    async fn run(mut self, queue: &mut mpsc::Receiver<Job>) {
        let mut batch = Vec::with_capacity(BATCH);
        let mut last_probe = Instant::now();
        // The scripts loaded up front: a pipeline that found one missing is sent again, and
        // an incident's entry in it would be written twice.
        self.load_scripts().await;
        loop {
            if !self.health.is_up() {
                // Jobs are counted and dropped while the store is down (see `Store::queue`);
                // a probe each second finds it again.
                while let Ok(job) = queue.try_recv() {
                    self.fallbacks.count(job.op());
                    self.queued.fetch_sub(1, Ordering::SeqCst);
                    self.queued_bytes.fetch_sub(job.bytes(), Ordering::SeqCst);
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
            let bytes: usize = jobs.iter().map(Job::bytes).sum();
            self.queued_bytes.fetch_sub(bytes, Ordering::SeqCst);
            // Given back however the write ends, a panic included: the drain waits on it.
            let _done = Written(self.queued.clone(), written);
            self.write(jobs).await;
            // Let the next batch gather: a wake-up per GET cost more than the write itself.
            if written < BATCH {
                tokio::time::sleep(GATHER).await;
            }
        }
    }

    async fn load_scripts(&mut self) {
        for script in [self.trim.clone(), self.trim_incidents.clone()] {
            let invocation = script.prepare_invoke();
            let load = invocation.load_async(&mut self.conn);
            let _ = tokio::time::timeout(WRITE_TIMEOUT, load).await;
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

    /// One pipeline for the batch, its answers handed out in order, then the pending clears
    /// it found taken out of the store. A store that lost its script (restarted) is given it
    /// again, once.
    async fn write(&mut self, jobs: Vec<Job>) {
        let jobs = coalesce(jobs);
        let pipe = self.pipeline(&jobs);
        let mut answer = self.send(&pipe).await;
        if let Err(e) = &answer
            && e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
        {
            self.load_scripts().await;
            answer = self.send(&pipe).await;
        }
        let taken = match answer {
            Ok(answers) => self.hand_out(jobs, answers),
            Err(e) => {
                self.health.failed(&e);
                for job in &jobs {
                    self.fallbacks.count(job.op());
                }
                return;
            }
        };
        if !taken.is_empty() {
            let mut pipe = redis::pipe();
            pipe.cmd("DEL").arg(&taken).ignore();
            pipe.cmd("ZREM")
                .arg(self.names.index())
                .arg(&taken)
                .ignore();
            if let Err(e) = self.send_ignored(&pipe).await {
                self.health.failed(&e);
            }
        }
    }

    /// The batch as plain commands, in order: a snapshot is set (expiring with the memory's
    /// TTL), indexed by time, and its resource's pending clear read; a pending clear is set and
    /// indexed. One trim ends it, so the bound holds after every batch.
    fn pipeline(&self, jobs: &[Job]) -> redis::Pipeline {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let index = self.names.index();
        let mut pipe = redis::pipe();
        for job in jobs {
            let (key, bytes) = match job {
                Job::Remember { id, snapshot, .. } => (self.names.snapshot(*id), snapshot.encode()),
                Job::Leave { id, pending, .. } => (self.names.pending(*id), pending.encode()),
                Job::Learn { id, lesson } => {
                    self.lesson(&mut pipe, *id, lesson);
                    continue;
                }
                Job::Values { id, sealed } => {
                    let key = self.names.values(*id);
                    pipe.cmd("SET")
                        .arg(&key)
                        .arg(sealed)
                        .arg("PX")
                        .arg(self.ttl_ms)
                        .ignore();
                    pipe.cmd("ZADD")
                        .arg(self.names.values_index())
                        .arg(now)
                        .arg(&key)
                        .ignore();
                    continue;
                }
                Job::Told { .. } => {
                    self.told(&mut pipe, job, now);
                    continue;
                }
            };
            pipe.cmd("SET")
                .arg(&key)
                .arg(bytes)
                .arg("PX")
                .arg(self.ttl_ms)
                .ignore();
            pipe.cmd("ZADD").arg(&index).arg(now).arg(&key).ignore();
            if let Job::Remember { id, .. } = job {
                pipe.cmd("GET").arg(self.names.pending(*id));
            }
        }
        pipe.cmd("EVALSHA")
            .arg(self.trim.get_hash())
            .arg(1)
            .arg(&index)
            .arg(self.capacity);
        if jobs.iter().any(|j| matches!(j, Job::Values { .. })) {
            // Values have their own bound, so that keeping them takes no snapshot's place.
            (pipe.cmd("EVALSHA").arg(self.trim.get_hash()).arg(1))
                .arg(self.names.values_index())
                .arg(self.capacity)
                .ignore();
        }
        pipe
    }

    /// A lesson's commands, none answered: kept fields added to the operation's set and taken
    /// out of its erased set, emptied ones the other way round, both sets' lives renewed.
    fn lesson(&self, pipe: &mut redis::Pipeline, id: u128, lesson: &Lesson) {
        let (kept, erased) = (self.names.kept(id), self.names.erased(id));
        for (add, remove, fields) in [
            (&kept, &erased, &lesson.kept),
            (&erased, &kept, &lesson.erased),
        ] {
            if fields.is_empty() {
                continue;
            }
            pipe.cmd("SADD").arg(add).arg(fields).ignore();
            pipe.cmd("SREM").arg(remove).arg(fields).ignore();
        }
        for key in [&kept, &erased] {
            pipe.cmd("PEXPIRE").arg(key).arg(LESSONS_TTL_MS).ignore();
        }
    }

    /// An incident's entry, none answered: appended to its story (the first entries kept),
    /// its values set, the incident indexed by time, the oldest past `max` out of the index
    /// (their keys expire).
    fn told(&self, pipe: &mut redis::Pipeline, job: &Job, now: u64) {
        let Job::Told {
            id,
            story,
            kept,
            max,
            opens,
        } = job
        else {
            return;
        };
        let id = format!("{id:032x}");
        let list = self.names.story(&id);
        if !opens {
            pipe.cmd("RPUSHX").arg(&list).arg(story).ignore();
            return;
        }
        pipe.cmd("RPUSH").arg(&list).arg(story).ignore();
        pipe.cmd("LTRIM")
            .arg(&list)
            .arg(0)
            .arg(STORY_ENTRIES - 1)
            .ignore();
        pipe.cmd("PEXPIRE").arg(&list).arg(INCIDENT_TTL_MS).ignore();
        if let Some(kept) = kept {
            let values = self.names.story_values(&id);
            pipe.cmd("SET")
                .arg(values)
                .arg(kept)
                .arg("PX")
                .arg(self.ttl_ms)
                .ignore();
        }
        let index = self.names.incidents();
        pipe.cmd("ZADD").arg(&index).arg(now).arg(&id).ignore();
        pipe.cmd("PEXPIRE")
            .arg(&index)
            .arg(INCIDENT_TTL_MS)
            .ignore();
        (pipe
            .cmd("EVALSHA")
            .arg(self.trim_incidents.get_hash())
            .arg(1))
        .arg(&index)
        .arg(*max)
        .arg(&self.names.prefix)
        .ignore();
    }

    /// Each job's answer to its own: a pending clear another replica left goes to the GET that
    /// found it; a stored pending clear lets this replica forget its copy. Returns the keys of
    /// the pending clears found, to take out of the store.
    fn hand_out(&self, jobs: Vec<Job>, answers: Vec<redis::Value>) -> Vec<String> {
        let mut answers = answers.into_iter();
        let mut taken = Vec::new();
        for job in jobs {
            match job {
                Job::Remember {
                    id,
                    snapshot,
                    took,
                    then,
                } => {
                    let Some(redis::Value::BulkString(bytes)) = answers.next() else {
                        continue;
                    };
                    taken.push(self.names.pending(id));
                    let pending = Pending::decode(&bytes);
                    if pending.is_none() {
                        self.health.degrade(REFUSED);
                        self.fallbacks.count("remember");
                    }
                    if let Some(pending) = pending
                        && !took.contains(&pending.write_request_id)
                    {
                        then(pending, &snapshot);
                    }
                }
                Job::Leave { then, .. } => then(),
                Job::Learn { .. } | Job::Values { .. } | Job::Told { .. } => {}
            }
        }
        if let Some(redis::Value::Int(entries)) = answers.next() {
            self.entries.set(entries);
        }
        taken
    }

    async fn send_ignored(&mut self, pipe: &redis::Pipeline) -> redis::RedisResult<()> {
        match tokio::time::timeout(WRITE_TIMEOUT, pipe.query_async(&mut self.conn)).await {
            Ok(answer) => answer,
            Err(_) => Err((redis::ErrorKind::Io, "no answer within 500 ms").into()),
        }
    }

    async fn send(&mut self, pipe: &redis::Pipeline) -> redis::RedisResult<Vec<redis::Value>> {
        match tokio::time::timeout(WRITE_TIMEOUT, pipe.query_async(&mut self.conn)).await {
            Ok(answer) => answer,
            Err(_) => Err((redis::ErrorKind::Io, "no answer within 500 ms").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{HashKey, Memory};

    fn snapshot(request_id: &str) -> Arc<Snapshot> {
        let m = Memory::new(4, Duration::from_secs(60), HashKey::random());
        let key = Key {
            path: "getChannel:7".into(),
            scope: 1,
        };
        let body = serde_json::json!({"ids": [3]});
        m.remember(&key, request_id, SystemTime::now(), &body)
            .unwrap()
    }

    /// A job whose `then` writes its tag to `heard`.
    fn remember(id: u128, tag: &str, took: &[&str], heard: &Arc<Mutex<Vec<String>>>) -> Job {
        let (tag, heard) = (tag.to_string(), heard.clone());
        Job::Remember {
            id,
            snapshot: snapshot(&tag),
            took: took.iter().map(|t| t.to_string()).collect(),
            then: Box::new(move |_, _| heard.lock().unwrap().push(tag)),
        }
    }

    #[test]
    fn a_batch_keeps_each_resources_newest_get_and_never_moves_one_past_a_leave() {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let pending = Pending {
            operation: "updateChannel".into(),
            write_request_id: "w1".into(),
            fields: Vec::new(),
        };
        let leave = Job::Leave {
            id: 1,
            pending: pending.clone(),
            then: Box::new(|| {}),
        };
        let jobs = vec![
            remember(1, "g1", &[], &heard),
            remember(2, "h1", &[], &heard),
            remember(1, "g2", &["w0"], &heard),
            leave,
            remember(1, "g3", &[], &heard),
        ];
        let shape: Vec<(u128, String, Vec<String>)> = coalesce(jobs)
            .into_iter()
            .map(|job| match job {
                Job::Remember {
                    id,
                    snapshot,
                    took,
                    then,
                } => {
                    then(pending.clone(), &snapshot);
                    (id, snapshot.request_id.clone(), took)
                }
                Job::Leave { id, .. } => (id, "leave".into(), Vec::new()),
                Job::Learn { id, .. } | Job::Values { id, .. } | Job::Told { id, .. } => {
                    (id, "other".into(), Vec::new())
                }
            })
            .collect();
        let w0 = vec!["w0".to_string()];
        assert_eq!(
            shape,
            [
                (1, "g2".into(), w0),
                (2, "h1".into(), vec![]),
                (1, "leave".into(), vec![]),
                (1, "g3".into(), vec![])
            ]
        );
        assert_eq!(
            *heard.lock().unwrap(),
            ["g2", "h1", "g3"],
            "g1's then is dropped"
        );
    }
}
