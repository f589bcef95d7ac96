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
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use lru::LruCache;
use serde_json::Value;

use crate::finding::Evidence;

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

#[derive(Clone, Debug)]
pub struct FieldState {
    pub name: String,
    pub empty: bool,
    pub hash: u64,
}

/// A resource as its last GET showed it.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub request_id: String,
    pub at: SystemTime,
    pub fields: Vec<FieldState>,
}

impl Snapshot {
    pub fn field(&self, name: &str) -> Option<&FieldState> {
        self.fields.iter().find(|f| f.name == name)
    }
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

    /// A hash of a value (its canonical JSON text), to compare without keeping the value.
    pub fn value(&self, value: &Value) -> u64 {
        let mut h = HashWriter(self.hasher());
        // Serialized straight into the hasher: no string per field. Writing to it cannot fail.
        let _ = serde_json::to_writer(&mut h, value);
        h.0.finish()
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
    resources: Mutex<LruCache<Key, Snapshot>>,
    pending: Mutex<LruCache<Key, Pending>>,
    ttl: Duration,
    evictions: AtomicU64,
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
        }
    }

    /// Record the top-level fields of a GET's JSON object body.
    pub fn remember(&self, key: Key, request_id: &str, at: SystemTime, body: &Value) {
        let Value::Object(map) = body else { return };
        let fields = map
            .iter()
            .take(MAX_FIELDS)
            .map(|(name, value)| FieldState {
                name: name.clone(),
                empty: is_empty(value),
                hash: self.hash_key.value(value),
            })
            .collect();
        let snapshot = Snapshot {
            request_id: request_id.to_string(),
            at,
            fields,
        };
        let mut resources = self.resources.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((evicted, _)) = resources.push(key.clone(), snapshot)
            && evicted != key
        {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The last snapshot of `key`, unless older than the TTL at `now`.
    pub fn recall(&self, key: &Key, now: SystemTime) -> Option<Snapshot> {
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

/// `null`, `""`, `[]` and `{}` are empty: what a full replace leaves behind.
pub fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Feeds serialized bytes to a hasher.
struct HashWriter(siphasher::sip::SipHasher13);

impl std::io::Write for HashWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
            key("/c/7", 1),
            "r1",
            t,
            &json!({"ids": [3, 7], "name": "", "n": 0, "o": {}}),
        );
        let s = m.recall(&key("/c/7", 1), t).unwrap();
        let states: Vec<(&str, bool)> = s
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.empty))
            .collect();
        assert_eq!(
            states,
            [("ids", false), ("name", true), ("n", false), ("o", true)]
        );
        assert_eq!(
            s.field("ids").unwrap().hash,
            m.hash_key.value(&json!([3, 7]))
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
    fn the_bound_holds_while_100000_distinct_resources_are_read() {
        let m = Memory::new(10_000, Duration::from_secs(3600), HashKey::random());
        let t = SystemTime::now();
        let body =
            json!({"id": 1, "name": "Retro TV", "graphicsElementIds": [3, 7], "watermarkId": null});
        for i in 0..100_000 {
            m.remember(key(&format!("/api/v1/channels/{i}"), 1), "r", t, &body);
            assert!(m.len() <= 10_000);
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.evictions(), 90_000);
        let wide: serde_json::Map<String, Value> =
            (0..1000).map(|i| (format!("f{i}"), json!(i))).collect();
        m.remember(key("/wide", 1), "r", t, &Value::Object(wide));
        assert_eq!(
            m.recall(&key("/wide", 1), t).unwrap().fields.len(),
            MAX_FIELDS
        );
    }

    #[test]
    fn hashes_are_keyed_per_process_or_by_a_shared_secret() {
        let value = json!("1234");
        let (a, b) = (HashKey::random(), HashKey::random());
        assert_ne!(a.value(&value), b.value(&value), "two processes disagree");
        assert_ne!(a.scope(Some("Bearer x")), b.scope(Some("Bearer x")));
        let (c, d) = (
            HashKey::from_secret(b"shared"),
            HashKey::from_secret(b"shared"),
        );
        assert_eq!(
            c.value(&value),
            d.value(&value),
            "replicas with one secret agree"
        );
        assert_ne!(
            c.value(&value),
            HashKey::from_secret(b"other").value(&value)
        );
        // The unkeyed hash the evidence carried before: equal everywhere, so guessable.
        let mut unkeyed = std::collections::hash_map::DefaultHasher::new();
        std::io::Write::write_all(
            &mut HashWriterStd(&mut unkeyed),
            value.to_string().as_bytes(),
        )
        .unwrap();
        assert_ne!(a.value(&value), unkeyed.finish());
        assert_eq!(
            format!("{a:?}"),
            "HashKey(secret)",
            "Debug never prints the key"
        );
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
