//! The one type of stream the proxy serves HTTP on.

use tokio::io::{AsyncRead, AsyncWrite};

/// A connection the proxy serves HTTP on: plain, TLS, or TLS inside a `CONNECT` tunnel, behind
/// one type, so that hyper's server (HTTP/1.1 and HTTP/2) is compiled once rather than once
/// per kind of stream: unboxed, the three kinds made the image's binary 0.26 MB larger
/// (scripts/docker-build: 27.40 against 27.14 MB). A call through the box per read or write
/// is nothing beside the system call it makes (scripts/bench-forward, docs/benchmarks.md).
pub trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

pub type Stream = Box<dyn Io>;
