//! The enforce act's last step: a restart. The agent read channel 7 before this sidecar
//! started (its memory is empty), then sends the stale rename. driftwatch does not decide on
//! what its memory happens to hold: it reads the channel itself just before the write, sees
//! `graphicsElementIds` holding a value, and refuses the write.

use std::io::Write;

use super::{Narrator, expect, scrape, stage};
use crate::demo::agent::Agent;
use crate::policy::Mode;

pub(super) async fn restart_act(out: &mut (dyn Write + Send)) -> anyhow::Result<bool> {
    let restarted = stage(Mode::Enforce).await?;
    let mut n = Narrator {
        out,
        stage: &restarted,
        before: scrape(restarted.admin).await?,
    };
    n.title(
        "4. driftwatch restarted (its memory is empty); the agent sends the channel it read before",
    )?;
    let read_before = Agent::new(format!("http://{}", restarted.api))
        .get_channel()
        .await?;
    let mut agent = Agent::new(format!("http://{}", restarted.proxy));
    let (put, _) = agent
        .rename_channel(&read_before.body, "Retro TV HD")
        .await?;
    let mut ok = n.refused(&put, 409)?;
    writeln!(
        n.out,
        "               (no GET through this sidecar: it read channel 7 itself just before the write)\n"
    )?;
    let after = agent.get_channel().await?;
    let list = &after.body["graphicsElementIds"];
    n.call(&after, &format!("graphicsElementIds {list}  <- intact"))?;
    ok &= expect(
        n.out,
        *list == serde_json::json!([3, 7]),
        "after a restart, enforce mode still keeps graphicsElementIds",
    )?;
    n.metrics().await?;
    Ok(ok)
}
