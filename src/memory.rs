//! What each resource looked like at its last GET, so a replace write can be told apart as
//! "omitted a field" or "is about to erase data". Per top-level field only: present, empty,
//! and a hash of the value, never the value. Keyed by the resource (its GET operation and path
//! parameter values) and a credential scope, so two users never share memory. Bounded: an LRU of at most `capacity` entries, each
//! with at most `MAX_FIELDS` fields, dropped after `ttl`.
//!
//! The value and credential hashes are keyed ([`HashKey`]): a value hash in an event says
//! whether a field changed, and nothing to someone who hashes guesses of the value.

use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use lru::LruCache;

use crate::finding::Evidence;
use crate::json::Node;

pub mod seal;
pub mod survival;
pub mod vault;
mod wire;

/// Fields remembered per resource, at most: the bound must hold whatever a response carries.
pub const MAX_FIELDS: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The resource: the name of the GET that shows it and its path parameter values
    /// (`getChannel:7`; see `silent::resource_key`).
    pub path: String,
    /// A hash of the credential (`Authorization` or a configured header); 0 for none.
    pub scope: u64,
}

#[derive(Clone, Copy, Debug)]
pub struct FieldState {
    /// Where its name ends in [`Snapshot::names`] (it starts where the previous one ends).
    name_end: usize,
    pub empty: bool,
    pub hash: u64,
}

/// A resource as its last GET showed it.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub request_id: String,
    /// The tool call that made the request (`x-mcp-tool`, or the call `wrap` tied it to);
    /// empty when none is known.
    pub tool: String,
    pub at: SystemTime,
    /// Taken from a view that may leave fields out (an item of a list, a write's answer), not
    /// from the resource's own GET: a field it does not show is unknown, not absent.
    pub partial: bool,
    /// Every field's name, one after the other: one allocation for them all, where a `String`
    /// each made remembering a 31-field channel 31 allocations and 31 frees.
    names: String,
    fields: Vec<FieldState>,
}

thread_local! {
    /// The snapshot being taken on this thread, before it is kept.
    static TAKEN: std::cell::RefCell<Snapshot> = const { std::cell::RefCell::new(Snapshot::EMPTY) };
}

/// Bytes of names a thread's [`TAKEN`] keeps room for between snapshots.
const TAKEN_KEPT: usize = 64 << 10;

impl Snapshot {
    /// No fields, no request, no room: what a snapshot is filled from.
    const EMPTY: Snapshot = Snapshot {
        request_id: String::new(),
        tool: String::new(),
        at: SystemTime::UNIX_EPOCH,
        partial: false,
        names: String::new(),
        fields: Vec::new(),
    };

    /// Give back the room a very wide body left behind.
    fn shrink_past(&mut self, bytes: usize) {
        if self.names.capacity() > bytes {
            self.names = String::new();
        }
    }

    /// The fields of a GET's body, to be kept later (`check` hashes on its pool and keeps in
    /// order); `None` unless the body is an object.
    pub fn of(hash_key: &HashKey, body: Node) -> Option<Snapshot> {
        let mut snapshot = Snapshot::EMPTY;
        body.fill_fields(hash_key, &mut snapshot)
            .then_some(snapshot)
    }

    /// This snapshot made over from a GET's body, its buffers reused; `false` unless the body
    /// is an object.
    fn fill(&mut self, hash_key: &HashKey, seen: Seen<'_>, body: &impl Shown) -> bool {
        self.request_id.clear();
        self.request_id.push_str(seen.request_id);
        self.tool.clear();
        self.tool.push_str(seen.tool.unwrap_or_default());
        self.at = seen.at;
        self.partial = seen.partial;
        body.fill_fields(hash_key, self)
    }

    pub fn field(&self, name: &str) -> Option<&FieldState> {
        self.fields().find(|(n, _)| *n == name).map(|(_, f)| f)
    }

    /// Each field's name and state, in the order the body wrote them.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &FieldState)> {
        let mut start = 0;
        self.fields.iter().map(move |f| {
            let name = &self.names[start..f.name_end];
            start = f.name_end;
            (name, f)
        })
    }
}

/// A response body as the memory reads it: its top-level fields, parsed where the body lies
/// (the sidecar) or already taken on another thread (`check`'s pool).
pub trait Shown {
    /// How the body shows the field `name`: `Some(true)` empty (`null`, `""`, `[]` or `{}`:
    /// what a full replace leaves behind), `Some(false)` holding a value, `None` not at all.
    fn shows(&self, name: &str) -> Option<bool>;

    /// Whether the body shows the field `name` empty.
    fn shows_empty(&self, name: &str) -> bool {
        self.shows(name) == Some(true)
    }

    /// `snapshot`'s fields made over from the body's; `false` unless the body is an object.
    fn fill_fields(&self, hash_key: &HashKey, snapshot: &mut Snapshot) -> bool;
}

impl Shown for Node<'_> {
    fn shows(&self, name: &str) -> Option<bool> {
        self.as_object()
            .and_then(|o| o.get(name))
            .map(Node::is_empty)
    }

    fn fill_fields(&self, hash_key: &HashKey, snapshot: &mut Snapshot) -> bool {
        let Some(object) = self.as_object() else {
            return false;
        };
        let kept = || object.members().take(MAX_FIELDS);
        snapshot.names.clear();
        snapshot
            .names
            .reserve(kept().map(|(name, _)| name.len()).sum());
        snapshot.fields.clear();
        snapshot.fields.reserve(object.len().min(MAX_FIELDS));
        for (name, value) in kept() {
            snapshot.names.push_str(name);
            snapshot.fields.push(FieldState {
                name_end: snapshot.names.len(),
                empty: value.is_empty(),
                hash: hash_key.value(value),
            });
        }
        true
    }
}

impl Shown for Snapshot {
    fn shows(&self, name: &str) -> Option<bool> {
        self.field(name).map(|f| f.empty)
    }

    fn fill_fields(&self, _: &HashKey, snapshot: &mut Snapshot) -> bool {
        snapshot.names.clone_from(&self.names);
        snapshot.fields.clone_from(&self.fields);
        true
    }
}

/// Where and when a body showing a resource was seen.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    pub request_id: &'a str,
    /// The tool behind the request, when known (for the incident the read may begin).
    pub tool: Option<&'a str>,
    pub at: SystemTime,
    /// See [`Snapshot::partial`].
    pub partial: bool,
}

/// A forwarded write that omitted fields which held values: what to look for in the next
/// view of the resource.
#[derive(Clone, Debug)]
pub struct Pending {
    pub operation: String,
    pub write_request_id: String,
    /// (field name in the read model, field name in the write, evidence from the GET).
    pub fields: Vec<(String, String, Evidence)>,
}

/// The secret key of the value and credential hashes (SipHash-1-3, 128-bit key): random per
/// process by default, or derived from `memory.hash_key_file` so that replicas agree.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HashKey(u64, u64);

impl HashKey {
    /// A key from the OS's randomness (uuid's v4 generator), new in each process.
    pub fn random() -> HashKey {
        let bits = uuid::Uuid::new_v4().as_u128();
        HashKey((bits >> 64) as u64, bits as u64)
    }

    /// A key derived from a secret (its SHA-256), the same wherever the secret is.
    pub fn from_secret(secret: &[u8]) -> HashKey {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(secret);
        let half = |i: usize| u64::from_le_bytes(digest[i..i + 8].try_into().expect("8 bytes"));
        HashKey(half(0), half(8))
    }

    fn hasher(&self) -> siphasher::sip::SipHasher13 {
        siphasher::sip::SipHasher13::new_with_keys(self.0, self.1)
    }

    /// A hash of a value, to compare without keeping the value. It walks the value (a tag per
    /// node, then its contents) rather than serializing it: formatting numbers and escaping
    /// strings cost more than hashing them.
    pub fn value(&self, value: Node) -> u64 {
        let mut h = self.hasher();
        self.feed(value, &mut h);
        h.finish()
    }

    /// Feed `value` to `h`: a tag for each node, lengths before contents, so that no two
    /// different values feed the same bytes. A number is fed as the JSON number it is (`1` and
    /// `1.0` differ, as in the text). An object's members are hashed one by one and summed, so
    /// that the order a server writes them in does not count as a change.
    fn feed(&self, value: Node, h: &mut siphasher::sip::SipHasher13) {
        if let Some(s) = value.as_str() {
            h.write_u8(6);
            h.write_usize(s.len());
            h.write(s.as_bytes());
        } else if let Some(items) = value.as_array() {
            h.write_u8(7);
            h.write_usize(items.len());
            items.items().for_each(|v| self.feed(v, h));
        } else if let Some(members) = value.as_object() {
            let mut sum = 0u64;
            for (k, v) in members.members() {
                let mut m = self.hasher();
                m.write_usize(k.len());
                m.write(k.as_bytes());
                self.feed(v, &mut m);
                sum = sum.wrapping_add(m.finish());
            }
            h.write_u8(8);
            h.write_usize(members.len());
            h.write_u64(sum);
        } else if let Some(n) = value.as_number() {
            if let Some(u) = n.as_u64() {
                h.write_u8(3);
                h.write_u64(u);
            } else if let Some(i) = n.as_i64() {
                h.write_u8(4);
                h.write_i64(i);
            } else {
                h.write_u8(5);
                h.write_u64(n.as_f64().unwrap_or(f64::NAN).to_bits());
            }
        } else if let Some(b) = value.as_bool() {
            h.write_u8(1 + u8::from(b));
        } else {
            h.write_u8(0);
        }
    }

    /// The name of `key` in a shared store: a keyed 128-bit hash of the resource and its scope,
    /// so the store sees neither path values nor credentials, and every name has one length.
    pub fn store_id(&self, key: &Key) -> u128 {
        use siphasher::sip128::{Hasher128, SipHasher13};
        let mut h = SipHasher13::new_with_keys(self.0, self.1);
        h.write_u64(key.scope);
        h.write(key.path.as_bytes());
        h.finish128().as_u128()
    }

    /// The credential scope of a request: a hash of the credential header's value, 0 without
    /// one.
    pub fn scope(&self, credential: Option<&str>) -> u64 {
        credential.map_or(0, |c| {
            let mut h = self.hasher();
            c.hash(&mut h);
            h.finish().max(1)
        })
    }
}

impl std::fmt::Debug for HashKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HashKey(secret)")
    }
}

pub struct Memory {
    /// The key of every hash this memory makes.
    pub hash_key: HashKey,
    /// Shared so that a write's recall is a reference count, not a copy of every field.
    resources: Mutex<LruCache<Key, Arc<Snapshot>>>,
    pending: Mutex<LruCache<Key, Pending>>,
    ttl: Duration,
    evictions: AtomicU64,
    /// What replace writes' answers showed of the fields they omitted, per operation.
    pub survival: Arc<survival::Survival>,
}

impl Memory {
    pub fn new(capacity: usize, ttl: Duration, hash_key: HashKey) -> Memory {
        let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
        Memory {
            hash_key,
            resources: Mutex::new(LruCache::new(cap)),
            pending: Mutex::new(LruCache::new(cap)),
            ttl,
            evictions: AtomicU64::new(0),
            survival: Arc::default(),
        }
    }

    /// Record the top-level fields of the resource's own GET's JSON object body; see
    /// [`Memory::remember_seen`].
    pub fn remember(
        &self,
        key: &Key,
        request_id: &str,
        at: SystemTime,
        body: &impl Shown,
    ) -> Option<Arc<Snapshot>> {
        let seen = Seen {
            request_id,
            tool: None,
            at,
            partial: false,
        };
        self.remember_seen(key, seen, body)
    }

    /// Record the top-level fields of a JSON object body that shows the resource; the snapshot kept, for a
    /// shared store to keep too. The fields are hashed outside the lock (a value can be large),
    /// into buffers the thread reuses; a resource read again, whose last snapshot nobody else
    /// holds, trades buffers with it under the lock: an agent re-reads the same resources, and
    /// a new snapshot each time was five allocations and five frees (a sixth of the memory's
    /// cost).
    pub fn remember_seen(
        &self,
        key: &Key,
        seen: Seen<'_>,
        body: &impl Shown,
    ) -> Option<Arc<Snapshot>> {
        TAKEN.with_borrow_mut(|taken| {
            if !taken.fill(&self.hash_key, seen, body) {
                return None;
            }
            let snapshot = {
                let mut resources = self.resources.lock().unwrap_or_else(|e| e.into_inner());
                let reused = resources.get_mut(key).and_then(|held| {
                    std::mem::swap(Arc::get_mut(held)?, taken);
                    Some(held.clone())
                });
                reused.unwrap_or_else(|| {
                    let snapshot = Arc::new(taken.clone());
                    self.push(&mut resources, key.clone(), snapshot.clone());
                    snapshot
                })
            };
            taken.shrink_past(TAKEN_KEPT);
            Some(snapshot)
        })
    }

    /// Keep a snapshot another replica took (from a shared store), unless the one held here
    /// is newer: the latest GET of the resource is the one to compare a write with.
    pub fn offer(&self, key: Key, snapshot: Snapshot) {
        let at = snapshot.at;
        self.keep(key, Arc::new(snapshot), |held| {
            held.is_none_or(|h| h.at < at)
        });
    }

    /// Put `snapshot` in for `key` when `replaces` says so of the one held, under one lock.
    fn keep(
        &self,
        key: Key,
        snapshot: Arc<Snapshot>,
        replaces: impl FnOnce(Option<&Snapshot>) -> bool,
    ) {
        let mut resources = self.resources.lock().unwrap_or_else(|e| e.into_inner());
        if replaces(resources.peek(&key).map(|s| &**s)) {
            self.push(&mut resources, key, snapshot);
        }
    }

    /// Put `snapshot` in for `key` in the locked `resources`, counting a resource dropped to
    /// keep the bound.
    fn push(
        &self,
        resources: &mut LruCache<Key, Arc<Snapshot>>,
        key: Key,
        snapshot: Arc<Snapshot>,
    ) {
        if let Some((evicted, _)) = resources.push(key.clone(), snapshot)
            && evicted != key
        {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The last snapshot of `key`, unless older than the TTL at `now`.
    pub fn recall(&self, key: &Key, now: SystemTime) -> Option<Arc<Snapshot>> {
        let mut resources = self.resources.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = resources
            .get(key)
            .map(|s| now.duration_since(s.at).unwrap_or_default() <= self.ttl)?;
        if !fresh {
            resources.pop(key);
            return None;
        }
        resources.get(key).cloned()
    }

    pub fn expect_clear(&self, key: Key, pending: Pending) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(key, pending);
    }

    pub fn take_pending(&self, key: &Key) -> Option<Pending> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop(key)
    }

    /// Forget the pending clear of `write_request_id` on `key`, now that a shared store holds
    /// it: whichever replica sees the next GET confirms it, once.
    pub fn hand_over_pending(&self, key: &Key, write_request_id: &str) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending
            .peek(key)
            .is_some_and(|p| p.write_request_id == write_request_id)
        {
            pending.pop(key);
        }
    }

    /// Resources remembered now.
    pub fn len(&self) -> usize {
        self.resources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resources dropped to keep the bound, since start.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }
}

/// Tests hand the memory bodies written as `json!` values: each is parsed from its text, as
/// the sidecar parses a body.
#[cfg(test)]
impl Shown for serde_json::Value {
    fn shows(&self, name: &str) -> Option<bool> {
        let text = self.to_string();
        crate::json::parse(text.as_bytes())
            .unwrap()
            .root()
            .shows(name)
    }

    fn fill_fields(&self, hash_key: &HashKey, snapshot: &mut Snapshot) -> bool {
        let text = self.to_string();
        let doc = crate::json::parse(text.as_bytes()).unwrap();
        doc.root().fill_fields(hash_key, snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The hash of a value written as `json!`, parsed from its text.
    fn hash(k: &HashKey, value: &Value) -> u64 {
        let text = value.to_string();
        k.value(crate::json::parse(text.as_bytes()).unwrap().root())
    }

    fn key(path: &str, scope: u64) -> Key {
        Key {
            path: path.into(),
            scope,
        }
    }

    #[test]
    fn remembers_presence_emptiness_and_hashes_never_values() {
        let m = Memory::new(10, Duration::from_secs(60), HashKey::random());
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        m.remember(
            &key("/c/7", 1),
            "r1",
            t,
            &json!({"ids": [3, 7], "name": "", "n": 0, "o": {}, "": 1, "long name": null}),
        );
        let s = m.recall(&key("/c/7", 1), t).unwrap();
        let states: Vec<(&str, bool)> = s.fields().map(|(name, f)| (name, f.empty)).collect();
        assert_eq!(
            states,
            [
                ("ids", false),
                ("name", true),
                ("n", false),
                ("o", true),
                ("", false),
                ("long name", true)
            ]
        );
        assert_eq!(
            s.field("ids").unwrap().hash,
            hash(&m.hash_key, &json!([3, 7]))
        );
        assert!(
            m.recall(&key("/c/7", 2), t).is_none(),
            "another credential scope sees nothing"
        );
        assert!(
            m.recall(&key("/c/7", 1), t + Duration::from_secs(61))
                .is_none(),
            "expired"
        );
        assert!(m.recall(&key("/c/7", 1), t).is_none(), "and dropped");
    }

    #[test]
    fn a_resource_read_again_is_the_new_read_and_a_snapshot_still_held_is_left_as_it_was() {
        let m = Memory::new(10, Duration::from_secs(60), HashKey::random());
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let k = key("/c/7", 1);
        let fields = |s: &Snapshot| -> Vec<(String, bool, u64)> {
            s.fields()
                .map(|(n, f)| (n.to_string(), f.empty, f.hash))
                .collect()
        };
        let first = json!({"name": "a", "ids": [3], "extra": 1});
        let held = m.remember(&k, "g1", t, &first).unwrap();
        let held_fields = fields(&held);
        // Someone still holds the first snapshot (the store's writer, a recall): the second
        // read must not write over it.
        let second = json!({"ids": [], "name": "renamed"});
        let later = t + Duration::from_secs(1);
        m.remember(&k, "g2", later, &second).unwrap();
        assert_eq!((held.request_id.as_str(), held.at), ("g1", t));
        assert_eq!(fields(&held), held_fields);
        // Nobody holds the second: the third read reuses it, and shows only the third body.
        drop(held);
        let third = json!({"ids": [3, 7]});
        let last = t + Duration::from_secs(2);
        let kept = m.remember(&k, "g3", last, &third).unwrap();
        let recalled = m.recall(&k, last).unwrap();
        for s in [&kept, &recalled] {
            assert_eq!((s.request_id.as_str(), s.at), ("g3", last));
            assert_eq!(
                fields(s),
                vec![("ids".to_string(), false, hash(&m.hash_key, &json!([3, 7])))]
            );
        }
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn a_thread_keeps_no_more_than_its_bound_of_room_after_a_wide_body() {
        let m = Memory::new(10, Duration::from_secs(60), HashKey::random());
        let t = SystemTime::UNIX_EPOCH;
        let long = |c: char| c.to_string().repeat(1 << 16);
        let wide = json!({ long('a'): 1, long('b'): 2 });
        let s = m.remember(&key("/wide", 1), "r", t, &wide).unwrap();
        assert_eq!(s.fields().count(), 2, "the snapshot itself is whole");
        let room = TAKEN.with_borrow(|taken| taken.names.capacity());
        assert!(room <= TAKEN_KEPT, "{room} bytes kept");
        m.remember(&key("/narrow", 1), "r", t, &json!({"a": 1}));
        assert_eq!(m.recall(&key("/narrow", 1), t).unwrap().fields().count(), 1);
    }

    #[test]
    fn a_snapshot_from_the_store_replaces_an_older_one_never_a_newer_one() {
        let m = Memory::new(10, Duration::from_secs(60), HashKey::random());
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let other = Memory::new(10, Duration::from_secs(60), HashKey::random());
        let from_store = |id: &str, at| {
            let s = other
                .remember(&key("/c/7", 1), id, at, &json!({"ids": [3]}))
                .unwrap();
            Snapshot::decode(&s.encode()).unwrap()
        };
        m.remember(&key("/c/7", 1), "here", t, &json!({"ids": [3]}));
        m.offer(
            key("/c/7", 1),
            from_store("older", t - Duration::from_secs(5)),
        );
        assert_eq!(m.recall(&key("/c/7", 1), t).unwrap().request_id, "here");
        m.offer(
            key("/c/7", 1),
            from_store("newer", t + Duration::from_secs(5)),
        );
        assert_eq!(m.recall(&key("/c/7", 1), t).unwrap().request_id, "newer");
        m.offer(key("/c/8", 1), from_store("none held", t));
        assert_eq!(
            m.recall(&key("/c/8", 1), t).unwrap().request_id,
            "none held"
        );
    }

    #[test]
    fn the_bound_holds_while_100000_distinct_resources_are_read() {
        let m = Memory::new(10_000, Duration::from_secs(3600), HashKey::random());
        let t = SystemTime::now();
        let body =
            json!({"id": 1, "name": "Retro TV", "graphicsElementIds": [3, 7], "watermarkId": null});
        for i in 0..100_000 {
            m.remember(&key(&format!("/api/v1/channels/{i}"), 1), "r", t, &body);
            assert!(m.len() <= 10_000);
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.evictions(), 90_000);
        let wide: serde_json::Map<String, Value> =
            (0..1000).map(|i| (format!("f{i}"), json!(i))).collect();
        m.remember(&key("/wide", 1), "r", t, &Value::Object(wide));
        assert_eq!(
            m.recall(&key("/wide", 1), t).unwrap().fields().count(),
            MAX_FIELDS
        );
    }

    #[test]
    fn hashes_are_keyed_per_process_or_by_a_shared_secret() {
        let value = json!("1234");
        let (a, b) = (HashKey::random(), HashKey::random());
        assert_ne!(hash(&a, &value), hash(&b, &value), "two processes disagree");
        assert_ne!(a.scope(Some("Bearer x")), b.scope(Some("Bearer x")));
        let (c, d) = (
            HashKey::from_secret(b"shared"),
            HashKey::from_secret(b"shared"),
        );
        assert_eq!(
            hash(&c, &value),
            hash(&d, &value),
            "replicas with one secret agree"
        );
        assert_ne!(
            hash(&c, &value),
            hash(&HashKey::from_secret(b"other"), &value)
        );
        // The unkeyed hash the evidence carried before: equal everywhere, so guessable.
        let mut unkeyed = std::collections::hash_map::DefaultHasher::new();
        std::io::Write::write_all(
            &mut HashWriterStd(&mut unkeyed),
            value.to_string().as_bytes(),
        )
        .unwrap();
        assert_ne!(hash(&a, &value), unkeyed.finish());
        assert_eq!(
            format!("{a:?}"),
            "HashKey(secret)",
            "Debug never prints the key"
        );
    }

    #[test]
    fn value_hashes_tell_apart_what_the_json_text_tells_apart() {
        let k = HashKey::random();
        let pairs = [
            (json!(["a", "b"]), json!(["ab"])),
            (json!({"a": 1}), json!({"a": "1"})),
            (json!(1), json!(1.0)),
            (json!(-1), json!(18446744073709551615u64)),
            (json!(null), json!(false)),
            (json!({"ab": "c"}), json!({"a": "bc"})),
            (json!([[], []]), json!([[[]]])),
            (json!({"a": 1, "b": 2}), json!({"a": 2, "b": 1})),
        ];
        for (a, b) in pairs {
            assert_ne!(hash(&k, &a), hash(&k, &b), "{a} and {b}");
        }
        let channel = json!({"id": 7, "ids": [3, 7], "name": "Retro TV", "x": null, "f": 0.5});
        assert_eq!(hash(&k, &channel), hash(&k, &channel.clone()));
        let (a, b): (Value, Value) = (
            serde_json::from_str(r#"{"a": 1, "b": {"c": 2, "d": 3}}"#).unwrap(),
            serde_json::from_str(r#"{"b": {"d": 3, "c": 2}, "a": 1}"#).unwrap(),
        );
        assert_eq!(
            hash(&k, &a),
            hash(&k, &b),
            "members in another order are no change"
        );
    }

    /// The hash as releases before the parsed document computed it, walking a `Value`:
    /// replicas of two releases share one store during a rollout, so a field's hash must not
    /// change with the representation it was read from.
    fn hash_of_value(k: &HashKey, value: &Value, h: &mut siphasher::sip::SipHasher13) {
        match value {
            Value::Null => h.write_u8(0),
            Value::Bool(b) => h.write_u8(1 + u8::from(*b)),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    h.write_u8(3);
                    h.write_u64(u);
                } else if let Some(i) = n.as_i64() {
                    h.write_u8(4);
                    h.write_i64(i);
                } else {
                    h.write_u8(5);
                    h.write_u64(n.as_f64().unwrap_or(f64::NAN).to_bits());
                }
            }
            Value::String(s) => {
                h.write_u8(6);
                h.write_usize(s.len());
                h.write(s.as_bytes());
            }
            Value::Array(items) => {
                h.write_u8(7);
                h.write_usize(items.len());
                items.iter().for_each(|v| hash_of_value(k, v, h));
            }
            Value::Object(members) => {
                let mut sum = 0u64;
                for (name, v) in members {
                    let mut m = k.hasher();
                    m.write_usize(name.len());
                    m.write(name.as_bytes());
                    hash_of_value(k, v, &mut m);
                    sum = sum.wrapping_add(m.finish());
                }
                h.write_u8(8);
                h.write_usize(members.len());
                h.write_u64(sum);
            }
        }
    }

    #[test]
    fn a_value_hashes_as_it_did_when_bodies_were_parsed_into_values() {
        let k = HashKey::from_secret(b"rollout");
        let texts = [
            r#"{"id": 7, "ids": [3, 7], "name": "Retro \u00e9 TV", "x": null, "f": 0.5, "o": {"a": [{}], "b": true}}"#,
            r#"[-1, 18446744073709551615, -9223372036854775808, 1e300, 0, -0, 2.0]"#,
            r#"{"a": 1, "b": {"c": "", "d": [[], {}]}, "a": 2}"#,
            r#""""#,
            "false",
            "null",
        ];
        for text in texts {
            let value: Value = serde_json::from_str(text).unwrap();
            let mut h = k.hasher();
            hash_of_value(&k, &value, &mut h);
            let doc = crate::json::parse(text.as_bytes()).unwrap();
            assert_eq!(k.value(doc.root()), h.finish(), "{text}");
        }
    }

    struct HashWriterStd<'h>(&'h mut std::collections::hash_map::DefaultHasher);

    impl std::io::Write for HashWriterStd<'_> {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.write(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
