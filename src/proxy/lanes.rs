//! Serving threads: `proxy.workers` of them (0: one per core), each a single-threaded runtime
//! with its own upstream connections (`pool`). The accepting thread is one of them and hands each new
//! connection, in turn, to the next; the thread that gets a connection serves it start to end
//! (read, audit, send upstream, answer, response audit), with no hand-over between threads
//! per request. One multi-threaded runtime spent half as much CPU again per request, in
//! cross-thread wake-ups and work stealing, and drove pooled upstream connections from other
//! workers than the one that made them (docs/benchmarks.md, session 9). Handing connections
//! round-robin, rather than letting every thread accept from the socket, spreads them evenly
//! however few there are: with a shared socket, 16 connections measured all on one thread.

use std::sync::Arc;

use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use super::Sidecar;
use super::connection::{Accepting, Handed, drain, spawn_connection};
use super::error::StartError;
use super::pool::Pools;

/// The other serving threads, as the accepting thread sees them.
pub(super) struct Lanes {
    /// One per other thread; dropped to tell them to stop.
    queues: Vec<mpsc::UnboundedSender<Handed>>,
    /// Each says here when its thread has drained.
    finished: Vec<oneshot::Receiver<()>>,
    /// Whose turn the next connection is: 0 is the accepting thread.
    next: usize,
}

impl Lanes {
    /// Start the serving threads besides the caller's.
    pub fn start(s: &Arc<Sidecar>, accepting: &Accepting) -> Result<Lanes, StartError> {
        let threads = s.settings.proxy.serving_threads();
        let mut lanes = Lanes {
            queues: Vec::with_capacity(threads),
            finished: Vec::with_capacity(threads),
            next: 0,
        };
        for thread in 1..threads {
            let failed = |source| StartError::Threads { thread, source };
            let pool = Arc::new(super::pool::pools(&s.settings, &s.apis)?);
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(failed)?;
            let (queue, handed) = mpsc::unbounded_channel();
            let (done, finished) = oneshot::channel();
            let (s, accepting) = (s.clone(), accepting.clone());
            std::thread::Builder::new()
                .name(format!("driftwatch-serve-{thread}"))
                .spawn(move || {
                    runtime.block_on(async move {
                        let graceful = GracefulShutdown::new();
                        serve_handed(handed, &s, &pool, &accepting, &graceful).await;
                        drain(&s, graceful).await;
                    });
                    let _ = done.send(());
                })
                .map_err(failed)?;
            lanes.queues.push(queue);
            lanes.finished.push(finished);
        }
        Ok(lanes)
    }

    /// Give `handed` to the thread whose turn it is; back to the caller when that is the
    /// caller itself (or the thread is gone). A queue holds at most `proxy.max_connections`
    /// connections, since each carries its place.
    pub fn hand(&mut self, handed: Handed<TcpStream>) -> Option<Handed<TcpStream>> {
        let turn = self.next;
        self.next = (self.next + 1) % (self.queues.len() + 1);
        if turn == 0 {
            return Some(handed);
        }
        let Handed {
            stream,
            peer,
            place,
        } = handed;
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(e) => {
                tracing::debug!(%peer, "cannot hand a connection to a serving thread: {e}");
                return None;
            }
        };
        let back = self.queues[turn - 1]
            .send(Handed {
                stream,
                peer,
                place,
            })
            .err()?
            .0;
        let stream = TcpStream::from_std(back.stream).ok()?;
        Some(Handed {
            stream,
            peer,
            place: back.place,
        })
    }

    /// Tell the other threads to stop, and wait until each has drained.
    pub async fn stop(self) {
        drop(self.queues);
        for finished in self.finished {
            let _ = finished.await;
        }
    }
}

/// A serving thread: serve each connection handed to it until the accepting thread stops.
async fn serve_handed(
    mut handed: mpsc::UnboundedReceiver<Handed>,
    s: &Arc<Sidecar>,
    pool: &Arc<Pools>,
    accepting: &Accepting,
    graceful: &GracefulShutdown,
) {
    while let Some(Handed {
        stream,
        peer,
        place,
    }) = handed.recv().await
    {
        match TcpStream::from_std(stream) {
            Ok(stream) => {
                let here = Handed {
                    stream,
                    peer,
                    place,
                };
                spawn_connection(s, pool, here, accepting, graceful);
            }
            Err(e) => tracing::debug!(%peer, "a serving thread cannot take a connection: {e}"),
        }
    }
}
