//! Content codings a body may travel in (gzip, deflate, br): decoded for reading only, never
//! for forwarding, and never past a bound, so a small compressed body cannot grow into a large
//! one. Shared by the request audit and the response copy.

use std::io::Read;

/// Why a body could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum Undecoded {
    /// An encoding driftwatch does not read, or bytes that are not in it.
    Undecodable,
    /// Decoded, it would pass the limit.
    TooLarge,
}

/// Decode a body by its `Content-Encoding`, reading at most `limit` decoded bytes (a
/// compressed body cannot grow past the bound).
pub fn decode(encoding: Option<&str>, bytes: Vec<u8>, limit: usize) -> Result<Vec<u8>, Undecoded> {
    let mut out = Vec::new();
    let cap = limit as u64 + 1;
    let read = match encoding.map(|e| e.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("identity") => return Ok(bytes),
        Some("gzip") | Some("x-gzip") => flate2::read::GzDecoder::new(&bytes[..])
            .take(cap)
            .read_to_end(&mut out),
        Some("deflate") => {
            let zlib = flate2::read::ZlibDecoder::new(&bytes[..])
                .take(cap)
                .read_to_end(&mut out);
            if zlib.is_err() {
                out.clear();
                flate2::read::DeflateDecoder::new(&bytes[..])
                    .take(cap)
                    .read_to_end(&mut out)
            } else {
                zlib
            }
        }
        Some("br") => brotli::Decompressor::new(&bytes[..], 4096)
            .take(cap)
            .read_to_end(&mut out),
        Some(_) => return Err(Undecoded::Undecodable),
    };
    match read {
        Err(_) => Err(Undecoded::Undecodable),
        Ok(_) if out.len() > limit => Err(Undecoded::TooLarge),
        Ok(_) => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn gzip_deflate_and_brotli_copies_decode() {
        let text = br#"{"graphicsElementIds":[3,7]}"#;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text).unwrap();
        assert_eq!(
            decode(Some("gzip"), gz.finish().unwrap(), 1024).unwrap(),
            text
        );
        let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zl.write_all(text).unwrap();
        assert_eq!(
            decode(Some("deflate"), zl.finish().unwrap(), 1024).unwrap(),
            text
        );
        let mut br = Vec::new();
        brotli::CompressorWriter::new(&mut br, 4096, 5, 22)
            .write_all(text)
            .unwrap();
        assert_eq!(decode(Some("br"), br, 1024).unwrap(), text);
        assert_eq!(decode(None, text.to_vec(), 1024).unwrap(), text);
        assert_eq!(
            decode(Some("zstd"), text.to_vec(), 1024),
            Err(Undecoded::Undecodable)
        );
        assert_eq!(
            decode(Some("gzip"), text.to_vec(), 1024),
            Err(Undecoded::Undecodable),
            "not gzip at all"
        );
        let big = vec![b'a'; 10_000];
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&big).unwrap();
        assert_eq!(
            decode(Some("gzip"), gz.finish().unwrap(), 1024),
            Err(Undecoded::TooLarge),
            "decoded size is bounded"
        );
    }
}
