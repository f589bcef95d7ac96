//! The list of a spec's writes with their semantics and why, for `serve --check` and
//! `check --writes`: what a replace finding rests on, readable before any traffic.

use std::collections::BTreeMap;
use std::io::Write;

use crate::contract::{Contract, WriteSemantics};
use crate::memory::survival::{Survival, taught};

/// One line of counts, then one line per write: `PUT /a/{id}  replace: why`.
pub fn list(contract: &Contract, out: &mut dyn Write) -> std::io::Result<()> {
    let writes: Vec<_> = contract
        .operations()
        .iter()
        .filter(|op| op.write != WriteSemantics::None)
        .collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for op in &writes {
        *counts.entry(op.write.as_str()).or_default() += 1;
    }
    let counts: Vec<String> = counts.iter().map(|(w, n)| format!("{n} {w}")).collect();
    writeln!(out, "  writes    {}: {}", writes.len(), counts.join(", "))?;
    for op in writes {
        writeln!(
            out,
            "    {} {}  {}: {}",
            op.method,
            op.template,
            op.write.as_str(),
            op.write_reason
        )?;
    }
    Ok(())
}

/// What the writes' own answers taught, one line per replace write they taught anything:
/// `PUT /a/{id}  merge: ...` where every omitted field its answers showed survived.
pub fn learned(
    contract: &Contract,
    survival: &Survival,
    api: &str,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let taught = taught(contract, survival, api);
    if taught.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  learned   {} writes, from their answers:",
        taught.len()
    )?;
    for (op, learned) in taught {
        writeln!(
            out,
            "    {} {}  {}: {}",
            op.method,
            op.template,
            learned.reading(),
            learned.why()
        )?;
    }
    Ok(())
}
