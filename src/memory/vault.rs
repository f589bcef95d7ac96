//! The values of each resource's last read, held only where the operator asked for incidents
//! to keep them (`incidents.keep_values`): what a silent clear erased is taken from here, so
//! the responder gets it back without going to backups. The memory proper holds hashes and
//! never a value; this is apart from it so that nothing is kept when the option is off.
//! Bounded in bytes (`incidents.max_value_bytes`, the least recently read going first; a
//! resource larger than a sixteenth of it is not held) and in time (`memory.ttl_secs`: never
//! given back past it, and dropped at the next read held).

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use lru::LruCache;
use serde_json::Value;

use super::{Key, MAX_FIELDS};
use crate::incident::Lost;
use crate::json::Node;

pub struct Vault {
    max_bytes: usize,
    ttl: Duration,
    held: Mutex<Held>,
}

struct Held {
    reads: LruCache<Key, Read>,
    bytes: usize,
}

/// One read of a resource: its top-level fields' values.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Read {
    request_id: String,
    #[serde(with = "millis")]
    at: SystemTime,
    tool: Option<String>,
    fields: Vec<(String, Value)>,
    #[serde(skip)]
    bytes: usize,
}

/// A time as milliseconds since the epoch, for a read that goes to a shared store.
mod millis {
    use std::time::{Duration, SystemTime};

    pub fn serialize<S: serde::Serializer>(at: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        let ms = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        s.serialize_u64(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let ms = <u64 as serde::Deserialize>::deserialize(d)?;
        SystemTime::UNIX_EPOCH
            .checked_add(Duration::from_millis(ms))
            .ok_or_else(|| serde::de::Error::custom("a time past what the system can hold"))
    }
}

/// What the vault gives back for a write: the values, and the read's tool.
pub struct Recalled {
    pub lost: Vec<Lost>,
    pub tool: Option<String>,
}

impl Vault {
    pub fn new(max_bytes: usize, ttl: Duration) -> Vault {
        Vault {
            max_bytes,
            ttl,
            held: Mutex::new(Held {
                reads: LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }

    /// Hold the fields of a read of `key`'s resource (`body`, a JSON object), made by request
    /// `request_id` of tool `tool`; a body that is not an object, or too large, holds nothing
    /// (and the older read goes: it is not the last any more).
    pub fn keep(
        &self,
        key: &Key,
        (request_id, tool): (&str, Option<&str>),
        at: SystemTime,
        body: Node,
    ) {
        let read = Self::read(body, self.max_bytes / 16).map(|(fields, bytes)| Read {
            request_id: request_id.to_string(),
            at,
            tool: tool.map(str::to_string),
            fields,
            bytes: bytes + request_id.len() + key.path.len() + tool.map_or(0, str::len),
        });
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = held.reads.pop(key) {
            held.bytes -= old.bytes;
        }
        let Some(read) = read else {
            return;
        };
        held.bytes += read.bytes;
        held.reads.put(key.clone(), read);
        self.bound(&mut held, at);
    }

    /// Drop the least recently read while past the bytes, or read longer than `ttl` before
    /// `now` (the least recently read is the oldest: reads are kept in the order they came).
    fn bound(&self, held: &mut Held, now: SystemTime) {
        let expired = |r: &Read| now.duration_since(r.at).is_ok_and(|age| age > self.ttl);
        while held.bytes > self.max_bytes || held.reads.peek_lru().is_some_and(|(_, r)| expired(r))
        {
            let Some((_, old)) = held.reads.pop_lru() else {
                break;
            };
            held.bytes -= old.bytes;
        }
    }

    /// The fields of an object body with their bytes, or `None` past `max` bytes.
    fn read(body: Node, max: usize) -> Option<(Vec<(String, Value)>, usize)> {
        let object = body.as_object()?;
        let mut bytes = 0;
        let mut fields = Vec::with_capacity(object.len().min(MAX_FIELDS));
        for (name, value) in object.members().take(MAX_FIELDS) {
            let value = value.to_value();
            bytes += name.len() + serde_json::to_vec(&value).map_or(0, |v| v.len());
            if bytes > max {
                return None;
            }
            fields.push((name.to_string(), value));
        }
        Some((fields, bytes))
    }

    /// What read `read_request_id` of `key` showed in `fields` (read name, write name), named
    /// as the write names them; `None` unless that read is the one held, within its time.
    pub fn recall(
        &self,
        key: &Key,
        read_request_id: &str,
        fields: &[(&str, &str)],
        now: SystemTime,
    ) -> Option<Recalled> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let read = held.reads.get(key)?;
        let fresh = now.duration_since(read.at).is_ok_and(|age| age <= self.ttl);
        if read.request_id != read_request_id || !fresh {
            return None;
        }
        let value = |name: &str| read.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v);
        let lost = (fields.iter())
            .filter_map(|(read_name, write_name)| {
                let value = value(read_name)?.clone();
                let read_field = (read_name != write_name).then(|| read_name.to_string());
                Some(Lost {
                    field: write_name.to_string(),
                    read_field,
                    value,
                })
            })
            .collect();
        Some(Recalled {
            lost,
            tool: read.tool.clone(),
        })
    }

    /// The read held of `key`, as bytes for a store replicas share (to be sealed there).
    pub fn export(&self, key: &Key) -> Option<Vec<u8>> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        serde_json::to_vec(held.reads.get(key)?).ok()
    }

    /// A read another replica held of `key` (from [`Vault::export`]), kept unless this one
    /// holds a newer; bytes that do not hold together, or are too large, are refused.
    pub fn import(&self, key: &Key, bytes: &[u8]) -> bool {
        if bytes.len() + key.path.len() > self.max_bytes / 16 {
            return false;
        }
        let Ok(mut read) = serde_json::from_slice::<Read>(bytes) else {
            return false;
        };
        read.bytes = bytes.len() + key.path.len();
        if read.bytes > self.max_bytes / 16 || read.fields.len() > MAX_FIELDS {
            return false;
        }
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.reads.peek(key).is_some_and(|r| r.at >= read.at) {
            return true;
        }
        if let Some(old) = held.reads.pop(key) {
            held.bytes -= old.bytes;
        }
        let at = read.at;
        held.bytes += read.bytes;
        held.reads.put(key.clone(), read);
        self.bound(&mut held, at);
        true
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(path: &str) -> Key {
        Key {
            path: path.into(),
            scope: 1,
        }
    }

    fn keep(v: &Vault, k: &str, id: &str, at: SystemTime, body: &Value) {
        let text = body.to_string();
        let doc = crate::json::parse(text.as_bytes()).unwrap();
        v.keep(&key(k), (id, Some("get_channel")), at, doc.root());
    }

    #[test]
    fn the_last_read_gives_back_the_fields_as_the_write_names_them() {
        let v = Vault::new(1 << 20, Duration::from_secs(60));
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        keep(
            &v,
            "getChannel:7",
            "g1",
            t,
            &json!({"name": "a", "graphicsElements": [3, 7]}),
        );
        let fields = [("graphicsElements", "graphicsElementIds")];
        let got = v.recall(&key("getChannel:7"), "g1", &fields, t).unwrap();
        assert_eq!(
            got.lost,
            [Lost {
                field: "graphicsElementIds".into(),
                read_field: Some("graphicsElements".into()),
                value: json!([3, 7])
            }]
        );
        assert_eq!(got.tool.as_deref(), Some("get_channel"));
        // Another read, an expired one, or another resource: nothing.
        assert!(v.recall(&key("getChannel:7"), "g0", &fields, t).is_none());
        assert!(v.recall(&key("getChannel:8"), "g1", &fields, t).is_none());
        let late = t + Duration::from_secs(61);
        assert!(
            v.recall(&key("getChannel:7"), "g1", &fields, late)
                .is_none()
        );
    }

    #[test]
    fn a_read_another_replica_held_is_recalled_here_and_an_older_one_does_not_replace_a_newer() {
        let there = Vault::new(1 << 20, Duration::from_secs(60));
        let here = Vault::new(1 << 20, Duration::from_secs(60));
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        keep(&there, "c:7", "g1", t, &json!({"ids": [3, 7]}));
        let bytes = there.export(&key("c:7")).unwrap();
        assert!(here.import(&key("c:7"), &bytes));
        let got = here
            .recall(&key("c:7"), "g1", &[("ids", "ids")], t)
            .unwrap();
        assert_eq!(got.lost[0].value, json!([3, 7]));
        keep(
            &here,
            "c:7",
            "g2",
            t + Duration::from_secs(1),
            &json!({"ids": [1]}),
        );
        assert!(here.import(&key("c:7"), &bytes));
        let later = t + Duration::from_secs(2);
        assert!(
            here.recall(&key("c:7"), "g2", &[("ids", "ids")], later)
                .is_some()
        );
        assert!(!here.import(&key("c:7"), b"{not json"));
    }

    #[test]
    fn bounded_in_bytes_the_least_recently_read_going_first_and_a_huge_read_not_held() {
        let v = Vault::new(16 << 10, Duration::from_secs(60));
        let t = SystemTime::UNIX_EPOCH;
        for n in 0..100 {
            keep(
                &v,
                &format!("c:{n}"),
                "g",
                t,
                &json!({"ids": (0..150).collect::<Vec<_>>()}),
            );
            assert!(v.bytes() <= 16 << 10, "{}", v.bytes());
        }
        let fields = [("ids", "ids")];
        assert!(v.recall(&key("c:99"), "g", &fields, t).is_some());
        assert!(v.recall(&key("c:0"), "g", &fields, t).is_none());
        // Past a sixteenth of the bound: not held, and the older read of it goes too.
        keep(&v, "c:99", "g2", t, &json!({"big": "x".repeat(2 << 10)}));
        assert!(v.recall(&key("c:99"), "g", &fields, t).is_none());
        assert!(v.recall(&key("c:99"), "g2", &[("big", "big")], t).is_none());
    }
}
