//! The silent-clear memory shared by replicas (`memory.backend = "redis"`), against a real
//! `redis-server` on a free loopback port: two sidecars in front of one API, the GET through
//! one and the erasing PUT through the other; the store paused, killed and started again; and
//! the bound on what the store holds.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use driftwatch::config::{Config, MemoryBackend};
use driftwatch::policy::Mode;
use serde_json::{Value, json};

use super::sidecar::{Running, admin_get, config, raw, sample, scrape, start};
use super::silent_clears::{api_answering_204, demo_api, get, kinds_of, pair, put, stale_body};
use super::upstream::{self, Recorded};
use super::util::eventually;

/// A `redis-server` of its own: no persistence, loopback only, killed on drop.
pub struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        RedisServer::start_on(free_port())
    }

    fn start_on(port: u16) -> RedisServer {
        RedisServer::start_with(port, &["--port", &port.to_string()])
    }

    /// On `port`, with `args` (which say how it listens there).
    fn start_with(port: u16, args: &[&str]) -> RedisServer {
        let child = Command::new("redis-server")
            .args(args)
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (Debian's redis-server package; .ci/run installs it)");
        RedisServer { child, port }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub async fn client(&self) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.url()).unwrap();
        eventually("redis-server to answer", || async {
            client.get_multiplexed_async_connection().await.ok()
        })
        .await
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args([signal, &pid])
                .status()
                .unwrap()
                .success()
        );
    }

    fn kill(mut self) -> u16 {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.port
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    super::util::free_addr().port()
}

/// One secret file per test, so the replicas' hashes agree.
pub fn hash_key(test: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("driftwatch-{}-{test}.key", std::process::id()));
    std::fs::write(&path, "a secret the replicas share").unwrap();
    path
}

pub fn replica(api: SocketAddr, redis: &RedisServer, key: &Path, mode: Mode) -> Config {
    config(&format!("http://{api}"), |c| {
        c.memory.backend = MemoryBackend::Redis;
        c.memory.redis_url = Some(redis.url());
        c.memory.hash_key_file = Some(key.to_path_buf());
        c.proxy.mode = mode;
        // On a loaded 2-core CI runner Redis can take longer than the 5 ms default to answer,
        // and a recall past its deadline falls back by design: only the test of the deadline
        // itself keeps the default.
        c.memory.redis_deadline_ms = 2_000;
    })
}

async fn metric(dw: &Running, series: &str) -> f64 {
    sample(&scrape(dw.admin).await, series)
}

/// Wait until the replica's writes have left the store holding `n` entries.
pub async fn stored(dw: &Running, n: f64) {
    eventually(&format!("the store to hold {n} entries"), || async {
        (metric(dw, "driftwatch_memory_store_entries").await >= n).then_some(())
    })
    .await;
}

async fn store_up(dw: &Running, up: f64) {
    eventually(&format!("driftwatch_memory_store_up {up}"), || async {
        (metric(dw, "driftwatch_memory_store_up").await == up).then_some(())
    })
    .await;
}

/// A fresh `redis-server` and two replicas sharing it in front of `api`: A observes, B in
/// `b_mode`.
async fn two_replicas(
    api: SocketAddr,
    test: &str,
    b_mode: Mode,
) -> (RedisServer, Running, Running) {
    let redis = RedisServer::start();
    redis.client().await;
    let key = hash_key(test);
    let a = start(replica(api, &redis, &key, Mode::Observe)).await;
    let b = start(replica(api, &redis, &key, b_mode)).await;
    (redis, a, b)
}

/// The stale tool's PUT of what `read` showed, through `dw` as `auth`; the status.
async fn stale_put(dw: &Running, auth: &str, rid: &str, read: &Value) -> u16 {
    let body = stale_body(read);
    raw(dw.addr, &put("/api/v1/channels/7", auth, rid, &body))
        .await
        .status
}

/// Keys in the store, all of them.
async fn dbsize(conn: &redis::aio::MultiplexedConnection) -> usize {
    let mut conn = conn.clone();
    redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap()
}

/// Alice reads channel 7 through `a` (request `rid_get`) and, once the store holds it, writes
/// it back through `b` with the stale tool (request `rid_put`).
async fn get_here_put_there(
    a: &Running,
    b: &Running,
    (rid_get, rid_put): (&str, &str),
) -> (Value, u16) {
    let read = raw(a.addr, &get("/api/v1/channels/7", "Bearer alice", rid_get))
        .await
        .json();
    stored(a, 1.0).await;
    let status = stale_put(b, "Bearer alice", rid_put, &read).await;
    (read, status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_through_one_replica_arms_the_put_through_another() {
    let (_redis, a, b) = two_replicas(demo_api().await, "arms", Mode::Observe).await;
    let (read, status) = get_here_put_there(&a, &b, ("g1", "p1")).await;
    assert_eq!(read["graphicsElementIds"], json!([3, 7]));
    assert_eq!(status, 200, "observe mode forwards it");
    assert_eq!(
        kinds_of(b.admin, "p1", Some("silent_clear")).await,
        [
            pair("silent_clear_risk", "/graphicsElementIds"),
            pair("silent_clear", "/graphicsElementIds")
        ]
    );
    let events = admin_get(b.admin, "/findings?kind=silent_clear")
        .await
        .json();
    let evidence = &events["events"][0]["findings"][0]["evidence"];
    assert_eq!(
        (&evidence["read_request_id"], &evidence["write_request_id"]),
        (&json!("g1"), &json!("p1"))
    );
    // Another user's GET arms nothing: the credential scope is part of the store's key.
    let read = raw(a.addr, &get("/api/v1/channels/7", "Bearer bob", "g2"))
        .await
        .json();
    stored(&a, 2.0).await;
    stale_put(&b, "Bearer carol", "p2", &read).await;
    assert_eq!(
        kinds_of(b.admin, "p2", Some("omitted_on_replace")).await,
        [pair("omitted_on_replace", "/graphicsElementIds")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforce_on_the_other_replica_refuses_the_erasing_put_and_the_api_keeps_the_field() {
    let (_redis, a, b) = two_replicas(demo_api().await, "enforce", Mode::Enforce).await;
    let (_, status) = get_here_put_there(&a, &b, ("g1", "p1")).await;
    assert_eq!(status, 409);
    let after = raw(a.addr, &get("/api/v1/channels/7", "Bearer alice", "g2"))
        .await
        .json();
    assert_eq!(after["graphicsElementIds"], json!([3, 7]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_get_through_another_replica_confirms_the_clear_once() {
    let (_redis, a, b) = two_replicas(api_answering_204().await, "confirms", Mode::Observe).await;
    get_here_put_there(&a, &b, ("g1", "p1")).await;
    assert_eq!(
        kinds_of(b.admin, "p1", Some("silent_clear_risk")).await,
        [pair("silent_clear_risk", "/graphicsElementIds")]
    );
    // The pending clear is in the store (the snapshot and it).
    stored(&b, 2.0).await;
    raw(a.addr, &get("/api/v1/channels/7", "Bearer alice", "g2")).await;
    assert_eq!(
        kinds_of(a.admin, "g2", Some("silent_clear")).await,
        [pair("silent_clear", "/graphicsElementIds")]
    );
    let events = admin_get(a.admin, "/findings?kind=silent_clear")
        .await
        .json();
    let evidence = &events["events"][0]["findings"][0]["evidence"];
    assert_eq!(
        (&evidence["read_request_id"], &evidence["write_request_id"]),
        (&json!("g1"), &json!("p1"))
    );
    // B handed its copy over when the store took it: its own next GET confirms nothing again.
    raw(b.addr, &get("/api/v1/channels/7", "Bearer alice", "g3")).await;
    eventually("g3's response work", || async {
        (metric(&b, "driftwatch_responses_checked_total").await >= 2.0).then_some(())
    })
    .await;
    let confirmed = "driftwatch_silent_clears_total{operation=\"updateChannel\",field=\"graphicsElementIds\",stage=\"confirmed\"}";
    assert_eq!(
        (metric(&a, confirmed).await, metric(&b, confirmed).await),
        (1.0, 0.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_or_dead_store_delays_nothing_past_the_deadline_and_detection_resumes() {
    let redis = RedisServer::start();
    redis.client().await;
    let key = hash_key("outage");
    // An API whose channel 7 always holds its list: every write below finds it there.
    let channel = Value::Object(driftwatch::demo::api::seed());
    let responder = Arc::new(move |r: &Recorded| match r.method.as_str() {
        "GET" => (200, channel.to_string()),
        _ => (204, String::new()),
    });
    let api = upstream::start(responder, Duration::ZERO, None).await.addr;
    let a = start(replica(api, &redis, &key, Mode::Observe)).await;
    let b = start(replica(api, &redis, &key, Mode::Observe)).await;
    // C keeps the default deadline (5 ms), the one under test while the store is paused.
    let mut deadline = replica(api, &redis, &key, Mode::Observe);
    deadline.memory.redis_deadline_ms = 5;
    let c = start(deadline).await;
    let read = raw(a.addr, &get("/api/v1/channels/7", "Bearer alice", "g1"))
        .await
        .json();
    stored(&a, 1.0).await;

    // Paused: connected, never answering. The write waits for the deadline (5 ms), no longer.
    redis.signal("-STOP");
    let status = stale_put(&c, "Bearer alice", "p1", &read).await;
    assert_eq!(status, 204, "forwarded");
    assert_eq!(
        kinds_of(c.admin, "p1", Some("omitted_on_replace")).await,
        [pair("omitted_on_replace", "/graphicsElementIds")],
        "without the store, C has no GET to compare with"
    );
    let m = scrape(c.admin).await;
    let waits = sample(&m, "driftwatch_memory_store_recall_seconds_count");
    let within = sample(
        &m,
        "driftwatch_memory_store_recall_seconds_bucket{le=\"0.0256\"}",
    );
    assert_eq!(
        (waits, within),
        (1.0, 1.0),
        "the one read gave up within 25.6 ms"
    );
    assert_eq!(
        sample(&m, "driftwatch_memory_store_fallbacks_total{op=\"recall\"}"),
        1.0
    );
    redis.signal("-CONT");

    // Dead: A's next snapshot cannot be written; A says so and goes on.
    let port = redis.kill();
    raw(a.addr, &get("/api/v1/channels/7", "Bearer alice", "g2")).await;
    store_up(&a, 0.0).await;
    // B, with no traffic, finds it by its probe (each quiet second).
    store_up(&b, 0.0).await;
    assert!(
        metric(
            &a,
            "driftwatch_memory_store_fallbacks_total{op=\"remember\"}"
        )
        .await
            >= 1.0
    );
    let ready = admin_get(a.admin, "/readyz").await;
    assert_eq!(
        ready.status, 200,
        "still ready: observe mode never stops traffic"
    );
    let text = String::from_utf8(ready.body).unwrap();
    assert!(text.contains("memory store: down"), "{text}");
    // The same replica still remembers on its own.
    let read = raw(a.addr, &get("/api/v1/channels/7", "Bearer alice", "g3"))
        .await
        .json();
    eventually("g3's response work", || async {
        (metric(&a, "driftwatch_responses_checked_total").await >= 3.0).then_some(())
    })
    .await;
    let status = stale_put(&a, "Bearer alice", "p3", &read).await;
    assert_eq!(status, 204, "forwarded");
    assert_eq!(
        kinds_of(a.admin, "p3", Some("silent_clear_risk")).await,
        [pair("silent_clear_risk", "/graphicsElementIds")],
        "A compares with its own memory"
    );

    // Back: both replicas find it by themselves, and a GET through one arms the PUT through
    // the other again.
    let redis = RedisServer::start_on(port);
    let conn = redis.client().await;
    store_up(&a, 1.0).await;
    store_up(&b, 1.0).await;
    let text = String::from_utf8(admin_get(a.admin, "/readyz").await.body).unwrap();
    assert!(text.contains("memory store: up"), "{text}");
    let read = raw(a.addr, &get("/api/v1/channels/7", "Bearer alice", "g4"))
        .await
        .json();
    eventually("g4's snapshot in the new store", || async {
        (dbsize(&conn).await == 2).then_some(())
    })
    .await;
    stale_put(&b, "Bearer alice", "p4", &read).await;
    assert_eq!(
        kinds_of(b.admin, "p4", Some("silent_clear_risk")).await,
        [pair("silent_clear_risk", "/graphicsElementIds")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_holds_at_most_max_entries_and_neither_values_nor_paths() {
    let redis = RedisServer::start();
    let mut conn = redis.client().await;
    let key = hash_key("bound");
    let channel = Value::Object(driftwatch::demo::api::seed());
    let responder = Arc::new(move |_: &Recorded| (200, channel.to_string()));
    let api = upstream::start(responder, Duration::ZERO, None).await.addr;
    let mut cfg = replica(api, &redis, &key, Mode::Observe);
    cfg.memory.max_entries = 100;
    let a = start(cfg).await;
    for i in 0..300 {
        raw(
            a.addr,
            &get(&format!("/api/v1/channels/{i}"), "Bearer alice", "g"),
        )
        .await;
    }
    eventually("300 responses checked", || async {
        (metric(&a, "driftwatch_responses_checked_total").await >= 300.0).then_some(())
    })
    .await;
    eventually("the writer to catch up", || {
        let mut conn = conn.clone();
        async move {
            let len: usize = redis::cmd("ZCARD")
                .arg("driftwatch:index")
                .query_async(&mut conn)
                .await
                .unwrap();
            (len == 100 && dbsize(&conn).await == 101).then_some(())
        }
    })
    .await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    let name = regex::Regex::new("^driftwatch:(index|s:[0-9a-f]{32})$").unwrap();
    assert!(keys.iter().all(|k| name.is_match(k)), "{keys:?}");
    // Once at 100 the index stays at 100 while the writer still evicts the oldest: a key listed
    // a moment ago may be gone, so read whichever is there.
    let (value, ttl): (String, i64) = eventually("a snapshot read back", || {
        let mut conn = conn.clone();
        async move {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("driftwatch:s:*")
                .query_async(&mut conn)
                .await
                .ok()?;
            let some = keys.first()?;
            let mut read = redis::pipe();
            read.atomic().cmd("GET").arg(some).cmd("PTTL").arg(some);
            let (value, ttl): (Option<String>, i64) = read.query_async(&mut conn).await.ok()?;
            Some((value?, ttl))
        }
    })
    .await;
    assert!(
        !value.contains("Retro") && value.contains("graphicsElementIds"),
        "{value}"
    );
    assert!(
        ttl > 0 && ttl <= 3_600_000,
        "expires within memory.ttl_secs: {ttl}"
    );
}

/// The readiness line a replica gives, once its store state is `up`.
async fn ready_line(dw: &Running) -> String {
    let ready = admin_get(dw.admin, "/readyz").await;
    assert_eq!(ready.status, 200, "ready whatever the store does");
    String::from_utf8(ready.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_down_at_start_or_refusing_the_password_leaves_traffic_alone_until_it_answers() {
    let port = free_port();
    let api = demo_api().await;
    let url = format!("redis://127.0.0.1:{port}");
    let with = |password: Option<PathBuf>| {
        let url = url.clone();
        config(&format!("http://{api}"), move |c| {
            c.memory.backend = MemoryBackend::Redis;
            c.memory.redis_url = Some(url);
            c.memory.hash_key_file = Some(hash_key("auth"));
            c.memory.redis_password_file = password;
        })
    };
    // Nothing listens yet: the sidecar starts and serves, on its own memory.
    let a = start(with(None)).await;
    let resp = raw(a.addr, &get("/api/v1/channels/7", "Bearer alice", "g1")).await;
    assert_eq!(resp.status, 200);
    store_up(&a, 0.0).await;
    assert!(ready_line(&a).await.contains("memory store: down"));
    // The store comes up wanting a password A does not have: A stays down, and says why.
    let password = "a password of the store, long enough";
    let redis = RedisServer::start_with(
        port,
        &["--port", &port.to_string(), "--requirepass", password],
    );
    let secret = std::env::temp_dir().join(format!("driftwatch-{}-redis-pw", std::process::id()));
    std::fs::write(&secret, format!("{password}\n")).unwrap();
    let b = start(with(Some(secret))).await;
    raw(b.addr, &get("/api/v1/channels/7", "Bearer alice", "g2")).await;
    stored(&b, 1.0).await;
    assert_eq!(metric(&b, "driftwatch_memory_store_up").await, 1.0);
    eventually("A to say why the store refuses it", || async {
        let line = ready_line(&a).await.to_lowercase();
        (line.contains("down") && line.contains("auth")).then_some(())
    })
    .await;
    let client =
        redis::Client::open(format!("redis://:{password}@127.0.0.1:{}", redis.port)).unwrap();
    let conn = client.get_multiplexed_async_connection().await.unwrap();
    assert_eq!(dbsize(&conn).await, 2, "B's snapshot and the index");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_store_is_reached_through_rediss_with_its_ca_file_and_refused_without() {
    let pki = super::transport::pki("redis");
    let port = free_port();
    let (cert, key_pem, ca) = (
        pki.cert_pem.display().to_string(),
        pki.key_pem.display().to_string(),
        pki.ca_pem.display().to_string(),
    );
    let port_arg = port.to_string();
    let _redis = RedisServer::start_with(
        port,
        &[
            "--port",
            "0",
            "--tls-port",
            &port_arg,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key_pem,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            "no",
        ],
    );
    let api = demo_api().await;
    let key = hash_key("tls");
    let with = |ca_file: Option<PathBuf>| {
        let key = key.clone();
        config(&format!("http://{api}"), move |c| {
            c.memory.backend = MemoryBackend::Redis;
            c.memory.redis_url = Some(format!("rediss://localhost:{port}"));
            c.memory.hash_key_file = Some(key);
            c.memory.redis_ca_file = ca_file;
        })
    };
    let trusted = start(with(Some(pki.ca_pem.clone()))).await;
    eventually("the TLS store to answer", || async {
        raw(
            trusted.addr,
            &get("/api/v1/channels/7", "Bearer alice", "g1"),
        )
        .await;
        (metric(&trusted, "driftwatch_memory_store_entries").await >= 1.0).then_some(())
    })
    .await;
    assert_eq!(metric(&trusted, "driftwatch_memory_store_up").await, 1.0);
    let unknown_ca = start(with(None)).await;
    raw(
        unknown_ca.addr,
        &get("/api/v1/channels/7", "Bearer alice", "g2"),
    )
    .await;
    store_up(&unknown_ca, 0.0).await;
}

/// Every key of the store named like `pattern`, with its value.
async fn entries(conn: &redis::aio::MultiplexedConnection, pattern: &str) -> Vec<(String, String)> {
    let mut conn = conn.clone();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(pattern)
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut out = Vec::new();
    for key in keys {
        let value: String = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        out.push((key, value));
    }
    out
}

/// Issue 34, defect 5: what a store sends back is data, not trust. A snapshot whose time is
/// past year 9999 made every PUT to its resource an empty reply (a panic writing the finding's
/// time), and a pending clear with one killed the writer for the life of the process. Both are
/// now refused and counted as fallbacks, the PUT is answered, the writer goes on, and
/// `/readyz` says the store is degraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_read_back_with_a_time_past_year_9999_is_refused_and_counted() {
    let (redis, a, b) = two_replicas(demo_api().await, "far-future", Mode::Enforce).await;
    let conn = redis.client().await;
    let read = raw(a.addr, &get("/api/v1/channels/7", "Bearer alice", "g1"))
        .await
        .json();
    stored(&a, 1.0).await;
    let far = 253_402_300_800_000u64 + 1;
    let mut conn_w = conn.clone();
    let [(snapshot_key, snapshot)] = entries(&conn, "driftwatch:s:*").await.try_into().unwrap();
    let mut doctored: Value = serde_json::from_str(&snapshot).unwrap();
    doctored["t"] = json!(far);
    let () = redis::cmd("SET")
        .arg(&snapshot_key)
        .arg(doctored.to_string())
        .query_async(&mut conn_w)
        .await
        .unwrap();

    // The store's copy is refused, so B has no view of the channel: in enforce it reads the
    // channel itself before the write (issue 63) and refuses the erasing PUT on that read.
    let status = stale_put(&b, "Bearer alice", "p1", &read).await;
    assert_eq!(
        status, 409,
        "answered on driftwatch's own read, not an empty reply"
    );
    assert_eq!(
        metric(&b, "driftwatch_memory_store_fallbacks_total{op=\"recall\"}").await,
        1.0
    );
    assert!(
        ready_line(&b).await.contains("memory store: degraded"),
        "{}",
        ready_line(&b).await
    );

    // A pending clear for the same resource, with such a time: the next GET through A finds it.
    let pending_key = snapshot_key.replace(":s:", ":p:");
    let pending = json!({"o": "updateChannel", "w": "p0",
                         "f": [["graphicsElementIds", "graphicsElementIds", "g1", far, "00ff"]]});
    let () = redis::cmd("SET")
        .arg(&pending_key)
        .arg(pending.to_string())
        .query_async(&mut conn_w)
        .await
        .unwrap();
    raw(a.addr, &get("/api/v1/channels/7", "Bearer alice", "g2")).await;
    eventually("the pending clear refused", || async {
        (metric(
            &a,
            "driftwatch_memory_store_fallbacks_total{op=\"remember\"}",
        )
        .await
            == 1.0)
            .then_some(())
    })
    .await;
    // The writer is alive: another resource's GET still reaches the store.
    raw(a.addr, &get("/api/v1/channels/7", "Bearer bob", "g3")).await;
    eventually("the next GET stored", || async {
        (entries(&conn, "driftwatch:s:*").await.len() == 2).then_some(())
    })
    .await;
    assert_eq!(
        metric(&a, "driftwatch_memory_store_writer_restarts_total").await,
        0.0
    );
    assert_eq!(metric(&a, "driftwatch_memory_store_up").await, 1.0);
}

/// Issue 50: what one replica's answers taught (observe mode: the PUT's answer showed the
/// omitted field kept) is in the store, and a replica in enforce mode judges the next write by
/// it before sending: the write it refused before the lesson, it forwards after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lesson_one_replica_learned_lets_enforce_on_another_forward_the_write() {
    let api = super::silent_clears::api_that_keeps_omitted_fields().await;
    let (redis, a, b) = two_replicas(api, "lessons", Mode::Enforce).await;
    let conn = redis.client().await;
    let (_, status) = get_here_put_there(&a, &b, ("g1", "p1")).await;
    assert_eq!(status, 409, "nothing learned yet: the write is refused");
    // Through A, observing: the PUT's own answer shows `graphicsElementIds` still held.
    let read = raw(a.addr, &get("/api/v1/channels/7", "Bearer alice", "g2"))
        .await
        .json();
    stored(&a, 1.0).await;
    assert_eq!(stale_put(&a, "Bearer alice", "p2", &read).await, 200);
    let kept: Vec<String> = eventually("the lesson in the store", || {
        let mut conn = conn.clone();
        async move {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("driftwatch:k:*")
                .query_async(&mut conn)
                .await
                .ok()?;
            let key = keys.first()?;
            let kept: Vec<String> = redis::cmd("SMEMBERS")
                .arg(key)
                .query_async(&mut conn)
                .await
                .ok()?;
            (!kept.is_empty()).then_some(kept)
        }
    })
    .await;
    assert_eq!(kept, ["graphicsElementIds"]);
    let (_, status) = get_here_put_there(&a, &b, ("g3", "p3")).await;
    assert_eq!(
        status, 200,
        "B read A's lesson: the field survives omission"
    );
}
