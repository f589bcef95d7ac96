//! The memory's entries as bytes, for a store that replicas share (`memory.backend = "redis"`).
//! JSON, so that `redis-cli GET` shows what is kept: field names, emptiness and keyed hashes,
//! never a value. A store is another process: what comes back is checked before use, and an
//! entry that does not hold together is refused (read as absent), never trusted to index a
//! string.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{FieldState, MAX_FIELDS, Pending, Snapshot};
use crate::finding::Evidence;

#[derive(Serialize, Deserialize)]
struct SnapshotWire<'a> {
    /// The GET's request id.
    #[serde(borrow)]
    r: Cow<'a, str>,
    /// When it was seen, in milliseconds since the epoch.
    t: u64,
    /// Every field's name, one after the other.
    #[serde(borrow)]
    n: Cow<'a, str>,
    /// Per field: where its name ends in `n`, whether it was empty, its value's hash.
    f: Vec<(usize, bool, u64)>,
    /// Taken from a view that may leave fields out (`Snapshot::partial`); absent for a GET's,
    /// as earlier releases wrote them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    p: bool,
    /// The tool behind the request; absent for none, as earlier releases wrote them.
    #[serde(default, borrow, skip_serializing_if = "str::is_empty")]
    u: Cow<'a, str>,
}

#[derive(Serialize, Deserialize)]
struct PendingWire<'a> {
    #[serde(borrow)]
    o: Cow<'a, str>,
    #[serde(borrow)]
    w: Cow<'a, str>,
    /// Per field: read name, write name, the GET's request id, its time (ms), the value hash.
    f: Vec<(String, String, String, u64, String)>,
    /// Per field, the GET's tool, where one is known; absent as earlier releases wrote them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    u: Vec<Option<String>>,
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The last millisecond of year 9999: RFC 3339, which findings and events write times in,
/// has no later one (humantime panics past it).
const LAST_MS: u64 = 253_402_300_799_999;

/// A time read back from the store, or `None` past what a finding can say.
fn time(ms: u64) -> Option<SystemTime> {
    (ms <= LAST_MS).then(|| SystemTime::UNIX_EPOCH + Duration::from_millis(ms))
}

impl Snapshot {
    pub fn encode(&self) -> Vec<u8> {
        let wire = SnapshotWire {
            r: Cow::Borrowed(&self.request_id),
            t: millis(self.at),
            n: Cow::Borrowed(&self.names),
            f: self
                .fields
                .iter()
                .map(|f| (f.name_end, f.empty, f.hash))
                .collect(),
            p: self.partial,
            u: Cow::Borrowed(&self.tool),
        };
        serde_json::to_vec(&wire).unwrap_or_default()
    }

    /// A snapshot from [`Snapshot::encode`]'s bytes; `None` if they are not one.
    pub fn decode(bytes: &[u8]) -> Option<Snapshot> {
        let wire: SnapshotWire = serde_json::from_slice(bytes).ok()?;
        let names = wire.n.into_owned();
        let mut start = 0;
        let mut fields = Vec::with_capacity(wire.f.len().min(MAX_FIELDS));
        for (name_end, empty, hash) in wire.f {
            let fits = start <= name_end && name_end <= names.len();
            if !fits || !names.is_char_boundary(name_end) || fields.len() == MAX_FIELDS {
                return None;
            }
            start = name_end;
            fields.push(FieldState {
                name_end,
                empty,
                hash,
            });
        }
        Some(Snapshot {
            request_id: wire.r.into_owned(),
            tool: wire.u.into_owned(),
            at: time(wire.t)?,
            partial: wire.p,
            names,
            fields,
        })
    }
}

impl Pending {
    pub fn encode(&self) -> Vec<u8> {
        let wire = PendingWire {
            o: Cow::Borrowed(&self.operation),
            w: Cow::Borrowed(&self.write_request_id),
            f: self
                .fields
                .iter()
                .map(|(read, write, e)| {
                    let (id, at) = (e.read_request_id.clone(), millis(e.read_at));
                    (read.clone(), write.clone(), id, at, e.value_hash.clone())
                })
                .collect(),
            u: match self.fields.iter().any(|(_, _, e)| e.read_tool.is_some()) {
                true => (self.fields.iter())
                    .map(|(_, _, e)| e.read_tool.clone())
                    .collect(),
                false => Vec::new(),
            },
        };
        serde_json::to_vec(&wire).unwrap_or_default()
    }

    /// A pending clear from [`Pending::encode`]'s bytes; `None` if they are not one.
    pub fn decode(bytes: &[u8]) -> Option<Pending> {
        let wire: PendingWire = serde_json::from_slice(bytes).ok()?;
        if wire.f.len() > MAX_FIELDS {
            return None;
        }
        let mut tools = wire.u.into_iter();
        let fields = wire
            .f
            .into_iter()
            .map(|(read, write, read_request_id, at, value_hash)| {
                let evidence = Evidence {
                    read_request_id,
                    read_at: time(at)?,
                    value_hash,
                    read_tool: tools.next().flatten(),
                    write_request_id: None,
                    read_before_write: false,
                };
                Some((read, write, evidence))
            })
            .collect::<Option<_>>()?;
        Some(Pending {
            operation: wire.o.into_owned(),
            write_request_id: wire.w.into_owned(),
            fields,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{HashKey, Key, Memory};
    use super::*;
    use serde_json::json;

    /// A store is another process: a time past year 9999 (which RFC 3339 cannot write, and
    /// which made every PUT to the resource panic) is refused like any entry that does not
    /// hold together.
    #[test]
    fn a_time_past_what_a_finding_can_say_is_refused() {
        let snapshot =
            |t: u64| format!(r#"{{"r":"g1","t":{t},"n":"ab","f":[[1,false,7],[2,true,0]]}}"#);
        let pending = |t: u64| format!(r#"{{"o":"op","w":"w1","f":[["a","a","g1",{t},"00ff"]]}}"#);
        for t in [LAST_MS + 1, u64::MAX] {
            assert!(Snapshot::decode(snapshot(t).as_bytes()).is_none(), "{t}");
            assert!(Pending::decode(pending(t).as_bytes()).is_none(), "{t}");
        }
        let last = Snapshot::decode(snapshot(LAST_MS).as_bytes()).unwrap();
        assert_eq!(
            humantime::format_rfc3339_millis(last.at).to_string(),
            "9999-12-31T23:59:59.999Z"
        );
        assert!(Pending::decode(pending(LAST_MS).as_bytes()).is_some());
    }

    #[test]
    fn a_snapshot_and_a_pending_clear_come_back_as_they_went_and_never_carry_a_value() {
        let m = Memory::new(4, Duration::from_secs(60), HashKey::random());
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_764_000_000_123);
        let body = json!({"name": "Retro TV", "ids": [3, 7], "ünï": "", "x": null});
        let key = Key {
            path: "getChannel:7".into(),
            scope: 9,
        };
        let seen = crate::memory::Seen {
            request_id: "g1",
            tool: Some("get_channel"),
            at,
            partial: false,
        };
        let snapshot = m.remember_seen(&key, seen, &body).unwrap();
        let bytes = snapshot.encode();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(!text.contains("Retro"), "no value in {text}");
        let back = Snapshot::decode(&bytes).unwrap();
        assert_eq!((back.request_id.as_str(), back.at), ("g1", at));
        assert_eq!(back.tool, "get_channel");
        // What earlier releases wrote (no tool) still reads.
        let old = Snapshot::decode(br#"{"r":"g","t":1,"n":"a","f":[[1,false,1]]}"#).unwrap();
        assert_eq!(old.tool, "");
        let fields = |s: &Snapshot| -> Vec<(String, bool, u64)> {
            s.fields()
                .map(|(n, f)| (n.to_string(), f.empty, f.hash))
                .collect()
        };
        assert_eq!(fields(&back), fields(&snapshot));

        let evidence = Evidence {
            read_request_id: "g1".into(),
            read_at: at,
            value_hash: "00ff".into(),
            read_tool: Some("get_channel".into()),
            write_request_id: None,
            read_before_write: false,
        };
        let pending = Pending {
            operation: "updateChannel".into(),
            write_request_id: "w1".into(),
            fields: vec![("ids".into(), "graphicsElementIds".into(), evidence.clone())],
        };
        let back = Pending::decode(&pending.encode()).unwrap();
        assert_eq!(
            (back.operation.as_str(), back.write_request_id.as_str()),
            ("updateChannel", "w1")
        );
        assert_eq!(back.fields, pending.fields);
        let old = br#"{"o":"op","w":"w1","f":[["a","a","g1",1,"00ff"]]}"#;
        assert_eq!(Pending::decode(old).unwrap().fields[0].2.read_tool, None);
    }

    #[test]
    fn entries_that_do_not_hold_together_are_refused() {
        let refused = [
            &br#"{"r":"g","t":1,"n":"ab","f":[[3,false,1]]}"#[..],
            br#"{"r":"g","t":1,"n":"ab","f":[[2,false,1],[1,false,2]]}"#,
            br#"{"r":"g","t":1,"n":"\u00e9","f":[[1,false,1]]}"#,
            br#"{"r":"g","t":1,"n":"ab"}"#,
            b"not json",
            b"",
        ];
        for bytes in refused {
            assert!(
                Snapshot::decode(bytes).is_none(),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        let wide = (1..=MAX_FIELDS + 1).map(|i| format!("[{i},false,0]"));
        let wide = format!(
            r#"{{"r":"g","t":1,"n":"{}","f":[{}]}}"#,
            "a".repeat(MAX_FIELDS + 1),
            wide.collect::<Vec<_>>().join(",")
        );
        assert!(
            Snapshot::decode(wide.as_bytes()).is_none(),
            "past MAX_FIELDS"
        );
        assert!(
            Snapshot::decode(br#"{"r":"g","t":1,"n":"ab","f":[[1,true,1],[2,false,2]]}"#).is_some()
        );
        assert!(Pending::decode(br#"{"o":"u","w":"w"}"#).is_none());
    }
}
