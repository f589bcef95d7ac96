//! What the traffic exercised of the contract: per operation, the requests routed to it, its
//! declared parameters, top-level body properties and response codes seen and never seen; per
//! tool, the operations it reached. Pure (no sockets, no clock) and shared by `check --coverage`
//! and the sidecar's `/coverage`, which fill the same value and say it in the same shape.
//! Everything is counters and flags laid out from the contract, so memory grows with the spec,
//! not with traffic, and a request costs a few atomic operations (see `Coverage::request`).

mod inputs;
mod report;
pub(crate) mod tools;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

pub use report::{
    Declared, Exercised, Named, OtherTools, ParamName, Report, Responses, Seen, ToolReach, Totals,
};
pub use tools::{NAME_MAX, TOOLS_KEPT};

use crate::audit::SentProperties;
use crate::contract::{Contract, Operation};
use crate::request::RequestView;

/// What the traffic exercised of one contract. `Sync`: the sidecar's requests and `check`'s
/// threads record into one value.
pub struct Coverage {
    ops: Box<[OpCoverage]>,
    /// Requests no operation of the contract was found for.
    unrouted: AtomicU64,
    tools: tools::Tools,
}

/// One operation's counters, each indexed as the contract lists what it counts.
struct OpCoverage {
    requests: AtomicU64,
    /// By index in [`Operation::params`].
    params: Flags,
    /// By index in [`Operation::body_properties`] (readOnly ones marked seen from the start).
    properties: Flags,
    /// Indices of the body properties sorted by name: a sent key is found by binary search, so
    /// a body of many keys costs a log per key, not a scan of the schema.
    by_name: Box<[u32]>,
    /// Answers per declared response (by index in its `responses.declared`).
    responses: Box<[AtomicU64]>,
    /// Statuses 100 to 999 answered that no declared response covers, one bit each.
    undeclared: [AtomicU64; STATUS_WORDS],
}

/// Statuses 100..=999 as bits.
const STATUS_WORDS: usize = 900usize.div_ceil(64);

/// Seen flags, and how many are still unseen: once none is, a request skips the work.
struct Flags {
    seen: Box<[AtomicBool]>,
    unseen: AtomicUsize,
}

impl Flags {
    fn new(n: usize) -> Flags {
        Flags {
            seen: (0..n).map(|_| AtomicBool::new(false)).collect(),
            unseen: AtomicUsize::new(n),
        }
    }

    fn mark(&self, i: usize) {
        if let Some(flag) = self.seen.get(i)
            && !flag.load(Relaxed)
            && !flag.swap(true, Relaxed)
        {
            self.unseen.fetch_sub(1, Relaxed);
        }
    }

    fn is_seen(&self, i: usize) -> bool {
        self.seen.get(i).is_some_and(|f| f.load(Relaxed))
    }

    fn all_seen(&self) -> bool {
        self.unseen.load(Relaxed) == 0
    }
}

impl OpCoverage {
    fn new(op: &Operation) -> OpCoverage {
        let properties = op.body_properties();
        let mut by_name: Vec<u32> = (0..properties.len() as u32).collect();
        by_name.sort_by(|a, b| {
            properties[*a as usize]
                .name
                .cmp(&properties[*b as usize].name)
        });
        // A readOnly property is never expected in a request: seen from the start, not listed.
        let properties_flags = Flags::new(properties.len());
        for (i, _) in properties.iter().enumerate().filter(|(_, p)| p.read_only) {
            properties_flags.mark(i);
        }
        OpCoverage {
            requests: AtomicU64::new(0),
            params: Flags::new(op.params.len()),
            properties: properties_flags,
            by_name: by_name.into(),
            responses: (op.responses.declared.iter())
                .map(|_| AtomicU64::new(0))
                .collect(),
            undeclared: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Coverage {
    /// Nothing exercised yet of `contract`'s operations.
    pub fn new(contract: &Contract) -> Coverage {
        let ops = contract.operations();
        Coverage {
            ops: ops.iter().map(OpCoverage::new).collect(),
            unrouted: AtomicU64::new(0),
            tools: tools::Tools::new(ops.len()),
        }
    }

    /// A request routed to `op` (of the contract this was made from): counted, and the
    /// declared parameters and top-level JSON body properties it sends marked seen. Once all
    /// of an operation's are seen, its requests are only counted. `sent`: the properties the
    /// audit found in the body (its [`Audit::sent_properties`]); without them the body is
    /// read here.
    ///
    /// [`Audit::sent_properties`]: crate::audit::Audit::sent_properties
    pub fn request(&self, op: &Operation, request: &RequestView, sent: Option<&SentProperties>) {
        let Some(c) = self.ops.get(op.index) else {
            return;
        };
        c.requests.fetch_add(1, Relaxed);
        if !c.params.all_seen() {
            inputs::mark_params(op, request, &c.params);
        }
        if c.properties.all_seen() {
            return;
        }
        match sent {
            Some(sent) => sent.indices().for_each(|i| c.properties.mark(i)),
            None => inputs::mark_properties(op, request, &c.properties, &c.by_name),
        }
    }

    /// A request no operation was found for.
    pub fn unrouted(&self) {
        self.unrouted.fetch_add(1, Relaxed);
    }

    /// The API answered a request to `op` with `status`: its declared response (exact code,
    /// then range, then `default`) counted, or the status kept as undeclared.
    pub fn response(&self, op: &Operation, status: u16) {
        let Some(c) = self.ops.get(op.index) else {
            return;
        };
        let declared = &op.responses.declared;
        match op.responses.for_status(status) {
            Some(r) => {
                let i = declared.iter().position(|d| std::ptr::eq(d, r));
                if let Some(n) = i.and_then(|i| c.responses.get(i)) {
                    n.fetch_add(1, Relaxed);
                }
            }
            None if (100..=999).contains(&status) => {
                let bit = usize::from(status - 100);
                c.undeclared[bit / 64].fetch_or(1 << (bit % 64), Relaxed);
            }
            None => {}
        }
    }

    /// A request to `op` was made by a call of `tool` (a name the agent chose: cut to 256
    /// bytes, and past the first 256 names counted together).
    pub fn tool(&self, op: &Operation, tool: &str) {
        if op.index < self.ops.len() {
            self.tools.reached(tool, op.index);
        }
    }

    /// What was exercised so far, said against `contract` (the one this was made from) and its
    /// `revision`.
    pub fn report(&self, contract: &Contract, revision: &str) -> Report {
        report::of(self, contract, revision)
    }
}

impl std::fmt::Debug for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coverage")
            .field("operations", &self.ops.len())
            .field("unrouted", &self.unrouted.load(Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests;
