//! The sidecar's incidents, served at `/incidents`: each silent clear's story joined from the
//! events that tell it (see [`crate::incident`]). Bounded twice, as `/findings` is: by
//! incidents (`incidents.max`) and by the bytes of their JSON (`incidents.max_bytes`), the
//! oldest going first; kept values go once `memory.ttl_secs` has passed since the read that
//! showed them (at the next incident told or asked for), the incident staying.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::incident::{Incident, Kept, Query, Told, What};

pub struct Incidents {
    max: usize,
    max_bytes: usize,
    /// How long kept values stay.
    ttl: Duration,
    ring: Mutex<Ring>,
}

#[derive(Default)]
struct Ring {
    /// Each incident with its weight in bytes, oldest first.
    incidents: VecDeque<(Incident, usize)>,
    bytes: usize,
}

impl Incidents {
    pub fn new(max: usize, max_bytes: usize, ttl: Duration) -> Incidents {
        Incidents {
            max,
            max_bytes,
            ttl,
            ring: Mutex::new(Ring::default()),
        }
    }

    /// Open the incident `told` names, or add to it.
    pub fn tell(&self, told: Told, kept: Option<Kept>) {
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        self.expire(&mut ring, told.step.at);
        let found = (ring.incidents.iter()).position(|(i, _)| i.id == told.write_request_id);
        let mut incident = match found.and_then(|at| ring.incidents.remove(at)) {
            Some((mut incident, bytes)) => {
                ring.bytes -= bytes;
                incident.add(told, kept);
                incident
            }
            // Fields shown surviving a write no incident tells of: nothing to say.
            None if told.step.what == What::Survived => return,
            None => Incident::open(told, kept),
        };
        if self.max == 0 {
            return;
        }
        let mut bytes = incident.weight();
        if bytes > self.max_bytes && incident.kept.take().is_some() {
            // Its values pass the bound: the story is kept without them.
            bytes = incident.weight();
        }
        if bytes > self.max_bytes {
            return;
        }
        ring.incidents.push_back((incident, bytes));
        ring.bytes += bytes;
        while ring.incidents.len() > self.max || ring.bytes > self.max_bytes {
            let Some((_, bytes)) = ring.incidents.pop_front() else {
                break;
            };
            ring.bytes -= bytes;
        }
    }

    /// Matching incidents, the most recently changed first; kept values past their time are
    /// dropped first.
    pub fn query(&self, q: &Query, now: SystemTime) -> Vec<Incident> {
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        self.expire(&mut ring, now);
        (ring.incidents.iter().rev())
            .map(|(i, _)| i)
            .filter(|i| i.matches(q))
            .take(q.limit.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    /// Drop the values read longer than `ttl` before `now`.
    fn expire(&self, ring: &mut Ring, now: SystemTime) {
        let Some(oldest) = now.checked_sub(self.ttl) else {
            return;
        };
        let mut freed = 0;
        for (incident, bytes) in ring.incidents.iter_mut() {
            let read = incident.timeline.first().map(|s| s.at);
            if incident.kept.is_some() && read.is_some_and(|at| at < oldest) {
                incident.kept = None;
                let now_bytes = incident.weight();
                freed += bytes.saturating_sub(now_bytes);
                *bytes = now_bytes;
            }
        }
        ring.bytes -= freed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incident::{About, Lost, State, Step};
    use serde_json::json;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn step(what: What, id: &str, s: u64) -> Step {
        Step {
            at: at(s),
            what,
            request_id: id.into(),
            operation: None,
            tool: Some(format!("tool-{id}")),
            trace_id: None,
            status: Some(200),
            fields: vec!["graphicsElementIds".into()],
        }
    }

    fn told(write: &str, what: What, id: &str, s: u64, read: Option<Step>) -> Told {
        Told {
            write_request_id: write.into(),
            step: step(what, id, s),
            read,
            about: About {
                api: None,
                operation: "updateChannel".into(),
                method: "PUT".into(),
                path: format!("/api/channels/{write}"),
                path_template: "/api/channels/{id}".into(),
                spec_revision: "r1".into(),
                mode: "observe".into(),
            },
        }
    }

    fn kept() -> Kept {
        let lost = vec![Lost {
            field: "graphicsElementIds".into(),
            read_field: None,
            value: json!([3, 7]),
        }];
        Kept::new(
            lost,
            ("PUT", "/api/channels/7", Some(&json!({"name": "n"}))),
            None,
        )
    }

    #[test]
    fn the_write_and_its_confirmation_are_one_incident_in_order() {
        let ring = Incidents::new(10, 1 << 20, Duration::from_secs(600));
        let read = step(What::Read, "g1", 1);
        ring.tell(told("w1", What::Write, "w1", 2, Some(read)), Some(kept()));
        let open = ring.query(&Query::default(), at(3));
        assert_eq!(open[0].state, State::AtRisk);
        ring.tell(told("w1", What::ReadAfter, "g2", 5, None), None);
        let all = ring.query(&Query::default(), at(6));
        assert_eq!(all.len(), 1);
        let i = &all[0];
        assert_eq!(i.state, State::Cleared);
        assert_eq!(i.tool.as_deref(), Some("tool-w1"));
        let story: Vec<(What, &str)> = (i.timeline.iter())
            .map(|s| (s.what, s.request_id.as_str()))
            .collect();
        assert_eq!(
            story,
            [
                (What::Read, "g1"),
                (What::Write, "w1"),
                (What::ReadAfter, "g2")
            ]
        );
        assert_eq!(i.kept.as_ref().unwrap().lost[0].value, json!([3, 7]));
    }

    #[test]
    fn fields_shown_surviving_close_the_incident_without_a_restore_and_open_none() {
        let ring = Incidents::new(10, 1 << 20, Duration::from_secs(600));
        ring.tell(told("w9", What::Survived, "g9", 1, None), None);
        assert!(ring.query(&Query::default(), at(2)).is_empty());
        ring.tell(
            told("w1", What::Write, "w1", 2, Some(step(What::Read, "g1", 1))),
            Some(kept()),
        );
        ring.tell(told("w1", What::Survived, "g2", 5, None), None);
        let i = &ring.query(&Query::default(), at(6))[0];
        assert_eq!(i.state, State::Survived);
        let kept = i.kept.as_ref().unwrap();
        assert!(kept.restore.is_none() && !kept.lost.is_empty(), "{kept:?}");
        // The id of any request of the story finds it.
        let by_read = Query {
            id: Some("g2".into()),
            ..Query::default()
        };
        assert_eq!(ring.query(&by_read, at(6)).len(), 1);
    }

    #[test]
    fn a_confirmation_first_opens_the_incident_the_write_then_completes() {
        let ring = Incidents::new(10, 1 << 20, Duration::from_secs(600));
        ring.tell(
            told(
                "w1",
                What::ReadAfter,
                "g2",
                5,
                Some(step(What::Read, "g1", 1)),
            ),
            None,
        );
        assert_eq!(ring.query(&Query::default(), at(6))[0].tool, None);
        ring.tell(told("w1", What::Write, "w1", 2, None), None);
        let i = &ring.query(&Query::default(), at(6))[0];
        assert_eq!(
            (i.state, i.tool.as_deref()),
            (State::Cleared, Some("tool-w1"))
        );
        assert_eq!(i.timeline.len(), 3);
    }

    #[test]
    fn bounded_by_count_and_bytes_the_oldest_going_first_and_values_by_time() {
        let ring = Incidents::new(2, 1 << 20, Duration::from_secs(60));
        for (n, w) in ["w1", "w2", "w3"].iter().enumerate() {
            ring.tell(
                told(w, What::Write, w, n as u64, Some(step(What::Read, "g", 0))),
                Some(kept()),
            );
        }
        let ids: Vec<String> = (ring.query(&Query::default(), at(10)).into_iter())
            .map(|i| i.id)
            .collect();
        assert_eq!(ids, ["w3", "w2"]);
        // A minute after the read, the values go and the story stays.
        let later = ring.query(&Query::default(), at(61));
        assert!(later.iter().all(|i| i.kept.is_none()), "{later:?}");
        assert_eq!(later.len(), 2);

        let small = Incidents::new(100, 1500, Duration::from_secs(60));
        for n in 0..20 {
            let w = format!("w{n}");
            small.tell(told(&w, What::Write, &w, n, None), None);
        }
        let kept_bytes: usize = (small.query(&Query::default(), at(30)).iter())
            .map(Incident::weight)
            .sum();
        assert!(kept_bytes <= 1500, "{kept_bytes}");
    }

    #[test]
    fn filters_by_id_operation_field_tool_and_since() {
        let ring = Incidents::new(10, 1 << 20, Duration::from_secs(600));
        ring.tell(told("w1", What::Write, "w1", 1, None), None);
        ring.tell(told("w2", What::Write, "w2", 9, None), None);
        let ids = |q: Query| -> Vec<String> {
            ring.query(&q, at(10)).into_iter().map(|i| i.id).collect()
        };
        assert_eq!(
            ids(Query {
                id: Some("w1".into()),
                ..Query::default()
            }),
            ["w1"]
        );
        assert_eq!(
            ids(Query {
                tool: Some("tool-w2".into()),
                ..Query::default()
            }),
            ["w2"]
        );
        assert_eq!(
            ids(Query {
                since: Some(at(5)),
                ..Query::default()
            }),
            ["w2"]
        );
        assert_eq!(
            ids(Query {
                field: Some("other".into()),
                ..Query::default()
            }),
            Vec::<String>::new()
        );
        assert_eq!(
            ids(Query {
                operation: Some("updateChannel".into()),
                limit: Some(1),
                ..Query::default()
            }),
            ["w2"]
        );
    }
}
