//! What a client speaks inside an intercepted `CONNECT`: TLS (its first byte opens a handshake
//! record, 0x16) or plain HTTP (a method's first letter). A client may tunnel `http://` through
//! a proxy as well as `https://`; before, TLS was always attempted and such a tunnel died.
//! The byte read to tell them apart is given back first, so either side reads the stream whole.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// A TLS record's content type for a handshake (RFC 8446, section 5.1).
const HANDSHAKE: u8 = 0x16;

/// A stream with its first byte read, and given back first.
pub(super) struct Sniffed<S> {
    first: Option<u8>,
    inner: S,
}

impl<S: AsyncRead + Unpin> Sniffed<S> {
    /// Read the first byte of `inner`; `None` when it ends first.
    pub async fn read(mut inner: S) -> io::Result<Option<Sniffed<S>>> {
        let mut first = [0u8; 1];
        Ok(match inner.read(&mut first).await? {
            0 => None,
            _ => Some(Sniffed {
                first: Some(first[0]),
                inner,
            }),
        })
    }

    /// Whether the client opened a TLS handshake.
    pub fn is_tls(&self) -> bool {
        self.first == Some(HANDSHAKE)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Sniffed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() > 0
            && let Some(byte) = self.first.take()
        {
            buf.put_slice(&[byte]);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Sniffed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn the_sniffed_byte_is_read_first_and_an_empty_buffer_takes_nothing() {
        let sniffed = super::Sniffed::read(&b"\x16rest"[..])
            .await
            .unwrap()
            .unwrap();
        assert!(sniffed.is_tls());
        let mut sniffed = sniffed;
        let mut empty = [0u8; 0];
        assert_eq!(sniffed.read(&mut empty).await.unwrap(), 0);
        let mut all = Vec::new();
        sniffed.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"\x16rest");
        let plain = super::Sniffed::read(&b"GET /"[..]).await.unwrap().unwrap();
        assert!(!plain.is_tls());
        assert!(super::Sniffed::read(&b""[..]).await.unwrap().is_none());
    }
}
