//! The two byte streams between the client and the server, passed on unchanged. Each line is
//! read (within `mcp.max_message_bytes`) before it is passed on, so a call is known to be in
//! flight before the server can act on it, and over when its answer reaches the client. A
//! line past the bound is passed on as it comes, unread and never held, skimmed for the ids of
//! the answers it holds, whose calls it ends.
//!
//! Each direction is a thread of its own doing blocking reads and writes: tokio's stdin and
//! stdout hand every read and write to its blocking pool, a thread hand-off each way per
//! message, which measured 0.17-0.22 ms per tool call at p50 (scripts/bench-wrap).

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, ExitStatus};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

use super::live::Live;
use crate::mcp::calls::Calls;
use crate::mcp::message::{Limits, Refused, Skim};
use crate::mcp::relay::Session;

/// What [`lines`] hands its reader: a whole line within the bound, or, at the end of one past
/// it (passed on unread), the ids of the answers its skim found.
enum Line<'a> {
    Read(&'a [u8]),
    Unread(Option<Vec<Value>>),
}

/// The relay's two threads: the client's stdin to the server, the server's stdout to the
/// client.
pub struct Relayed {
    to_client: JoinHandle<()>,
}

pub fn both(
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    calls: Arc<Calls>,
    live: Arc<Live>,
    limits: Limits,
    explain: bool,
) -> std::io::Result<Relayed> {
    let session = Arc::new(Mutex::new(Session::new(0, limits, explain)));
    let (client_side, client_calls) = (session.clone(), calls.clone());
    let spawn = |name: &str| std::thread::Builder::new().name(name.into());
    // Never joined: it blocks on stdin until the client closes it or the process ends.
    spawn("wrap-to-server").spawn(move || {
        let Some(stdin) = stdin else { return };
        let read = move |line: Line<'_>| {
            let mut s = client_side.lock().unwrap_or_else(|e| e.into_inner());
            match line {
                // A request's `params._meta` may now name driftwatch's span.
                Line::Read(line) => s.from_client(&client_calls, line),
                Line::Unread(_) => None,
            }
        };
        if let Err(e) = lines(std::io::stdin().lock(), stdin, limits.bytes, read) {
            tracing::debug!("the client's stream to the server ended: {e}");
        }
    })?;
    let to_client = spawn("wrap-to-client").spawn(move || {
        let Some(stdout) = stdout else { return };
        let read = move |line: Line<'_>| {
            let mut s = session.lock().unwrap_or_else(|e| e.into_inner());
            let line = match line {
                Line::Read(line) => line,
                Line::Unread(answered) => {
                    // It ends the calls it answers; it may have been a catalog.
                    if s.unread(&calls, answered) {
                        live.unreadable(&Refused::Bytes(limits.bytes));
                    }
                    return None;
                }
            };
            let answered = s.from_server(&calls, line);
            drop(s);
            if let Some(list) = answered.listed {
                live.listed(list);
            }
            if let Some(refused) = &answered.unread_list {
                live.unreadable(refused);
            }
            answered.rewritten
        };
        if let Err(e) = lines(stdout, std::io::stdout().lock(), limits.bytes, read) {
            tracing::debug!("the server's stream to the client ended: {e}");
        }
    })?;
    Ok(Relayed { to_client })
}

/// Wait for the server to exit, then for the last of its output to reach the client: its exit
/// status is wrap's. On SIGTERM or SIGINT the server is stopped and `None` comes back: wrap
/// was asked to stop, and exits 0 once drained.
pub async fn until_exit(
    child: Child,
    relayed: Option<Relayed>,
    stop: impl std::future::Future<Output = ()>,
) -> Option<ExitStatus> {
    let child = Arc::new(Mutex::new(child));
    let exited = {
        let child = child.clone();
        async move {
            loop {
                if let Ok(Some(status)) = lock(&child).try_wait() {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let status = tokio::select! {
        status = exited => Some(status),
        () = stop => {
            stop_group(&child).await;
            tracing::info!("asked to stop: the MCP server is stopped, draining");
            None
        }
    };
    if let Some(relayed) = relayed {
        let _ = tokio::task::spawn_blocking(move || relayed.to_client.join()).await;
    }
    if let Some(s) = status {
        tracing::info!(%s, "the MCP server exited: draining");
    }
    status
}

/// How long the server's process group has to end on SIGTERM before it gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Stop the server and everything it started: it leads a process group of its own
/// (`spawn`), so `sh -c` or `npx` and the server they start as a grandchild all get SIGTERM,
/// then SIGKILL after [`STOP_GRACE`]. Killing the child alone left the grandchild running,
/// holding stdout open (wrap waited for the client) or its port (an orphan kept listening).
async fn stop_group(child: &Mutex<Child>) {
    use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};
    let group = Pid::from_raw(lock(child).id() as i32);
    let Some(group) = group else { return };
    let _ = kill_process_group(group, Signal::TERM);
    let started = std::time::Instant::now();
    // The group is gone once no process is left in it (ESRCH), the leader reaped or not.
    while started.elapsed() < STOP_GRACE {
        let _ = lock(child).try_wait();
        if test_kill_process_group(group).is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = kill_process_group(group, Signal::KILL);
    let _ = lock(child).wait();
}

fn lock(child: &Mutex<Child>) -> std::sync::MutexGuard<'_, Child> {
    child.lock().unwrap_or_else(|e| e.into_inner())
}

/// Copy `from` to `to`, handing each whole line of at most `bound` bytes to `read` before it
/// is written, and a longer one's skim at its end. The stream's bytes are written as they are,
/// whatever they hold, except a line `read` gives a replacement for (a refused call's answer
/// made to say why).
fn lines(
    mut from: impl Read,
    mut to: impl Write,
    bound: usize,
    mut read: impl FnMut(Line<'_>) -> Option<Vec<u8>>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 << 10];
    let mut line: Vec<u8> = Vec::new();
    // Inside a line past the bound: its bytes pass on unread until its end, skimmed.
    let mut passing: Option<Skim> = None;
    loop {
        let n = match from.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            to.write_all(&line)?;
            if let Some(skim) = passing {
                read(Line::Unread(skim.answered()));
            }
            return to.flush();
        }
        let mut chunk = &buf[..n];
        while let Some(end) = chunk.iter().position(|&b| b == b'\n') {
            let (head, rest) = chunk.split_at(end + 1);
            line.extend_from_slice(head);
            let unread = passing
                .take()
                .or_else(|| (line.len() > bound).then(Skim::default));
            match unread {
                Some(mut skim) => {
                    skim.feed(&line);
                    read(Line::Unread(skim.answered()));
                    to.write_all(&line)?;
                }
                None => match read(Line::Read(&line)) {
                    Some(replaced) => to.write_all(&replaced)?,
                    None => to.write_all(&line)?,
                },
            }
            line.clear();
            chunk = rest;
        }
        line.extend_from_slice(chunk);
        if passing.is_none() && line.len() > bound {
            passing = Some(Skim::default());
        }
        if let Some(skim) = &mut passing {
            skim.feed(&line);
            to.write_all(&line)?;
            line.clear();
        }
        to.flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that gives `n` bytes at a time: lines come in pieces.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(self.0.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn every_byte_passes_unchanged_and_only_lines_within_the_bound_are_read() {
        let long = "x".repeat(100);
        let answer = format!(r#"{{"result":{{"text":"{long}"}},"jsonrpc":"2.0","id":7}}"#);
        let input = format!("{{\"a\":1}}\n{long}\n\n{answer}\r\n{{\"b\":2}}\r\n{answer}");
        for piece in [3, 64 << 10] {
            let mut out = Vec::new();
            let mut seen = Vec::new();
            lines(Trickle(input.as_bytes(), piece), &mut out, 50, |l| {
                seen.push(match l {
                    Line::Read(l) => String::from_utf8_lossy(l).into_owned(),
                    Line::Unread(ids) => format!("(unread: {ids:?})"),
                });
                None
            })
            .unwrap();
            assert_eq!(out, input.as_bytes());
            let seven = "(unread: Some([Number(7)]))";
            assert_eq!(
                seen,
                [
                    "{\"a\":1}\n",
                    "(unread: None)",
                    "\n",
                    seven,
                    "{\"b\":2}\r\n",
                    seven
                ],
                "{piece} bytes at a time"
            );
        }
    }
}
