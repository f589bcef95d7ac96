//! The two byte streams between the client and the server, passed on unchanged. Each line is
//! read (within `mcp.max_message_bytes`) before it is passed on, so a call is known to be in
//! flight before the server can act on it, and over when its answer reaches the client. A
//! line past the bound is passed on as it comes, unread and never held.

use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::task::JoinHandle;

use super::live::Live;
use crate::mcp::calls::Calls;
use crate::mcp::message::Limits;
use crate::mcp::relay::Session;

/// The relay's two tasks: the client's stdin to the server, the server's stdout to the client.
pub struct Relayed {
    to_server: JoinHandle<()>,
    to_client: JoinHandle<()>,
}

pub fn both(
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    calls: Arc<Calls>,
    live: Arc<Live>,
    limits: Limits,
) -> Relayed {
    let session = Arc::new(Mutex::new(Session::new(0, limits)));
    let (client_side, client_calls) = (session.clone(), calls.clone());
    let to_server = tokio::spawn(async move {
        let Some(stdin) = stdin else { return };
        let read = move |line: &[u8]| {
            let mut s = client_side.lock().unwrap_or_else(|e| e.into_inner());
            s.from_client(&client_calls, line);
        };
        if let Err(e) = lines(tokio::io::stdin(), stdin, limits.bytes, read).await {
            tracing::debug!("the client's stream to the server ended: {e}");
        }
    });
    let to_client = tokio::spawn(async move {
        let Some(stdout) = stdout else { return };
        let read = move |line: &[u8]| {
            let listed = {
                let mut s = session.lock().unwrap_or_else(|e| e.into_inner());
                s.from_server(&calls, line)
            };
            if let Some(list) = listed {
                live.listed(list);
            }
        };
        if let Err(e) = lines(stdout, tokio::io::stdout(), limits.bytes, read).await {
            tracing::debug!("the server's stream to the client ended: {e}");
        }
    });
    Relayed {
        to_server,
        to_client,
    }
}

/// Wait for the server to exit, then for the last of its output to reach the client: its exit
/// status is wrap's. On SIGTERM or SIGINT the server is stopped and `None` comes back: wrap
/// was asked to stop, and exits 0 once drained.
pub async fn until_exit(
    child: &mut tokio::process::Child,
    relayed: Option<Relayed>,
) -> Option<ExitStatus> {
    let status = tokio::select! {
        status = child.wait() => status.ok(),
        () = super::super::serve::shutdown_signal() => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            tracing::info!("asked to stop: the MCP server is stopped, draining");
            None
        }
    };
    if let Some(relayed) = relayed {
        let _ = relayed.to_client.await;
        relayed.to_server.abort();
    }
    if let Some(s) = status {
        tracing::info!(%s, "the MCP server exited: draining");
    }
    status
}

/// Copy `from` to `to`, handing each whole line of at most `bound` bytes to `read` before it
/// is written. The stream's bytes are written as they are, whatever they hold.
async fn lines<R, W>(
    mut from: R,
    mut to: W,
    bound: usize,
    mut read: impl FnMut(&[u8]),
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 64 << 10];
    let mut line: Vec<u8> = Vec::new();
    // Inside a line past the bound: its bytes pass on unread until its end.
    let mut passing = false;
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            to.write_all(&line).await?;
            return to.flush().await;
        }
        let mut chunk = &buf[..n];
        while let Some(end) = chunk.iter().position(|&b| b == b'\n') {
            let (head, rest) = chunk.split_at(end + 1);
            if std::mem::take(&mut passing) {
                to.write_all(head).await?;
            } else {
                line.extend_from_slice(head);
                if line.len() <= bound {
                    read(&line);
                }
                to.write_all(&line).await?;
                line.clear();
            }
            chunk = rest;
        }
        if passing {
            to.write_all(chunk).await?;
        } else {
            line.extend_from_slice(chunk);
            if line.len() > bound {
                to.write_all(&line).await?;
                line.clear();
                passing = true;
            }
        }
        to.flush().await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_byte_passes_unchanged_and_only_lines_within_the_bound_are_read() {
        let long = "x".repeat(100);
        let input = format!("{{\"a\":1}}\n{long}\n\n{{\"b\":2}}\r\ntail");
        let mut out = Vec::new();
        let mut seen = Vec::new();
        lines(input.as_bytes(), &mut out, 50, |l| {
            seen.push(String::from_utf8_lossy(l).into_owned())
        })
        .await
        .unwrap();
        assert_eq!(out, input.as_bytes());
        assert_eq!(seen, ["{\"a\":1}\n", "\n", "{\"b\":2}\r\n"]);
    }
}
