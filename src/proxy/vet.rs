//! What the proxy would have to reinterpret to forward is refused before anything is read
//! (RFC 9112 and 9110): a `Transfer-Encoding` other than one `chunked` (hyper decodes the
//! chunks and would send the rest up as plain bytes, a `gzip` coding lost), `CONNECT` (its
//! target is an authority, not a resource of the API), and HTTP/1.1 without exactly one
//! `Host` (any version with two). Each is a 400 problem+json, counted by reason.

use http::header::{HOST, TRANSFER_ENCODING};
use http::request::Parts;
use http::{Method, Version};

use super::error::{ProxyError, Unforwardable};

pub(super) fn vet(parts: &Parts) -> Result<(), ProxyError> {
    let refuse = |why| Err(ProxyError::Unforwardable(why));
    if parts.method == Method::CONNECT {
        return refuse(Unforwardable::Connect);
    }
    let mut codings = parts.headers.get_all(TRANSFER_ENCODING).iter();
    if let Some(first) = codings.next() {
        let single_chunked = first
            .as_bytes()
            .trim_ascii()
            .eq_ignore_ascii_case(b"chunked");
        if !single_chunked || codings.next().is_some() {
            return refuse(Unforwardable::TransferEncoding);
        }
    }
    let hosts = parts.headers.get_all(HOST).iter().count();
    if hosts > 1 || (hosts == 0 && parts.version == Version::HTTP_11) {
        return refuse(Unforwardable::Host);
    }
    Ok(())
}
