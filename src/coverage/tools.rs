//! The operations each tool reached. Tool names are text a peer chooses: each is cut to
//! [`NAME_MAX`] bytes as events cut it, and only the first [`TOOLS_KEPT`] names are kept apart;
//! the requests of the rest are counted together, with the operations they reached.

use std::collections::HashMap;
use std::sync::Mutex;

/// Tool names kept apart, as `driftwatch_tool_requests` labels them.
pub const TOOLS_KEPT: usize = 256;
/// Bytes of a tool name kept, as an event keeps them.
pub const NAME_MAX: usize = 256;

pub(super) struct Tools {
    table: Mutex<Table>,
    operations: usize,
}

#[derive(Default)]
pub(super) struct Table {
    index: HashMap<Box<str>, usize>,
    pub tools: Vec<Reach>,
    /// The tools past [`TOOLS_KEPT`], together.
    pub other: Reach,
}

#[derive(Default, Clone)]
pub(super) struct Reach {
    pub requests: u64,
    /// One bit per operation of the contract, by index.
    pub operations: Vec<u64>,
    pub name: Box<str>,
}

impl Reach {
    fn new(name: Box<str>, operations: usize) -> Reach {
        Reach {
            requests: 0,
            operations: vec![0; operations.div_ceil(64)],
            name,
        }
    }

    fn add(&mut self, op: usize) {
        self.requests += 1;
        if let Some(word) = self.operations.get_mut(op / 64) {
            *word |= 1 << (op % 64);
        }
    }

    /// The indices of the operations reached, in order.
    pub fn reached(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.operations.len() * 64).filter(|i| self.operations[i / 64] & (1 << (i % 64)) != 0)
    }
}

impl Tools {
    pub fn new(operations: usize) -> Tools {
        Tools {
            table: Mutex::new(Table {
                other: Reach::new("".into(), operations),
                ..Table::default()
            }),
            operations,
        }
    }

    /// A request of `tool` reached operation `op`.
    pub fn reached(&self, tool: &str, op: usize) {
        let cut;
        let tool = match tool.len() > NAME_MAX {
            true => {
                cut = crate::finding::shorten(tool, NAME_MAX);
                cut.as_str()
            }
            false => tool,
        };
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let t = &mut *table;
        let at = match t.index.get(tool) {
            Some(at) => Some(*at),
            None if t.tools.len() < TOOLS_KEPT => {
                t.tools.push(Reach::new(tool.into(), self.operations));
                t.index.insert(tool.into(), t.tools.len() - 1);
                Some(t.tools.len() - 1)
            }
            None => None,
        };
        match at {
            Some(at) => t.tools[at].add(op),
            None => t.other.add(op),
        }
    }

    /// A copy of the table, for a report.
    pub fn snapshot(&self) -> (Vec<Reach>, Reach) {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        (table.tools.clone(), table.other.clone())
    }
}
