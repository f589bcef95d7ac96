//! `driftwatch mcp --stdio`: stdin and stdout for rmcp, with each line held to the message
//! bounds before rmcp reads it. rmcp's own stdio transport reads a line of any length and
//! parses it into values (one 14.5 MB line took 3.86 GB); here a line longer than
//! `mcp.max_message_bytes` is skipped as it arrives, never held, and a line past any bound is
//! answered with a JSON-RPC error on stdout, between whole lines of rmcp's own output.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::Mutex;

use crate::mcp::message::{Limits, Refused, check};

/// What rmcp reads and writes; the tasks between them and stdin and stdout run until stdin
/// ends.
pub fn bounded(limits: Limits) -> (DuplexStream, DuplexStream) {
    relay(tokio::io::stdin(), tokio::io::stdout(), limits)
}

/// [`bounded`] over any reader and writer (the tests use their own).
pub(super) fn relay<R, W>(input: R, output: W, limits: Limits) -> (DuplexStream, DuplexStream)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_rmcp, rmcp_reads) = tokio::io::duplex(64 << 10);
    let (rmcp_writes, from_rmcp) = tokio::io::duplex(64 << 10);
    let output = Arc::new(Mutex::new(output));
    tokio::spawn(read_lines(input, to_rmcp, output.clone(), limits));
    tokio::spawn(write_lines(from_rmcp, output));
    (rmcp_reads, rmcp_writes)
}

/// Each line of `input` that is within `limits` goes to rmcp; each that is not is answered.
async fn read_lines<R, W>(
    input: R,
    mut to_rmcp: DuplexStream,
    output: Arc<Mutex<W>>,
    limits: Limits,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let Ok(buf) = input.fill_buf().await else {
            return;
        };
        if buf.is_empty() {
            break;
        }
        let (taken, ended) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let part = &buf[..taken - usize::from(ended)];
        if too_long || line.len() + part.len() > limits.bytes {
            too_long = true;
            line.clear();
        } else {
            line.extend_from_slice(part);
        }
        input.consume(taken);
        if ended {
            let message = std::mem::take(&mut line);
            if !pass(
                message,
                std::mem::take(&mut too_long),
                &mut to_rmcp,
                &output,
                limits,
            )
            .await
            {
                return;
            }
        }
    }
    if !line.is_empty() || too_long {
        pass(line, too_long, &mut to_rmcp, &output, limits).await;
    }
}

/// Hand one line to rmcp, or answer it; `false` once rmcp has gone.
async fn pass<W: AsyncWrite + Unpin>(
    mut line: Vec<u8>,
    too_long: bool,
    to_rmcp: &mut DuplexStream,
    output: &Mutex<W>,
    limits: Limits,
) -> bool {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    let verdict = match too_long {
        true => Err(Refused::Bytes(limits.bytes)),
        false if line.trim_ascii().is_empty() => return true,
        false => check(&line, limits),
    };
    match verdict {
        Ok(()) => {
            line.push(b'\n');
            to_rmcp.write_all(&line).await.is_ok()
        }
        Err(refused) => {
            tracing::warn!("an MCP message on stdin was refused: {refused}");
            let mut answer = refused.json_rpc().into_bytes();
            answer.push(b'\n');
            let mut out = output.lock().await;
            let _ = out.write_all(&answer).await;
            let _ = out.flush().await;
            true
        }
    }
}

/// rmcp's output, a whole line at a time, so that an answer never lands inside one.
async fn write_lines<W: AsyncWrite + Unpin>(from_rmcp: DuplexStream, output: Arc<Mutex<W>>) {
    let mut from_rmcp = BufReader::new(from_rmcp);
    let mut line = Vec::new();
    loop {
        line.clear();
        match from_rmcp.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let mut out = output.lock().await;
                if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    const LIMITS: Limits = Limits {
        depth: 8,
        values: 1000,
        bytes: 64,
    };

    /// What rmcp would read, and what stdout shows, for `input`.
    async fn through(input: &'static [u8]) -> (String, String) {
        let (stdout, mut shown) = tokio::io::duplex(1 << 20);
        let (mut rmcp_reads, rmcp_writes) = relay(input, stdout, LIMITS);
        let mut read = String::new();
        rmcp_reads.read_to_string(&mut read).await.unwrap();
        drop(rmcp_writes);
        let mut out = vec![0u8; 1 << 16];
        let n = tokio::time::timeout(std::time::Duration::from_millis(200), shown.read(&mut out))
            .await
            .unwrap_or(Ok(0))
            .unwrap();
        (read, String::from_utf8_lossy(&out[..n]).into_owned())
    }

    #[tokio::test]
    async fn lines_within_the_bounds_reach_rmcp_and_the_rest_are_answered() {
        let long: &'static [u8] = Box::leak(
            format!("{}\n", "[".repeat(200))
                .into_bytes()
                .into_boxed_slice(),
        );
        let input: &'static [u8] = Box::leak(
            [
                &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n\n"[..],
                long,
                b"[[[[[[[[[[]]]]]]]]]]\n{\"a\":\n{\"b\":1}",
            ]
            .concat()
            .into_boxed_slice(),
        );
        let (read, shown) = through(input).await;
        assert_eq!(
            read,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"b\":1}\n"
        );
        let codes: Vec<i64> = shown
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["error"]["code"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(
            codes,
            [-32600, -32600, -32700],
            "too long, too deep, not JSON: {shown}"
        );
    }
}
