//! A traditional private key (PKCS #1 RSA, SEC1 EC: what `openssl genrsa` and `openssl ecparam
//! -genkey` write) wrapped as PKCS #8 (RFC 5958), the one form rcgen reads with ring. The key's
//! bytes are carried inside unchanged; only the algorithm identifier around them is written,
//! by hand because it is a few fixed bytes (no ASN.1 crate is a direct dependency).

/// rsaEncryption (1.2.840.113549.1.1.1) with its NULL parameters.
const RSA: &[u8] = &[
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
];
/// id-ecPublicKey (1.2.840.10045.2.1).
const EC: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

pub(super) fn from_pkcs1(rsa: &[u8]) -> Vec<u8> {
    wrap(RSA, rsa)
}

/// An ECPrivateKey names its curve in `[0] parameters`; PKCS #8 names it in the algorithm.
pub(super) fn from_sec1(ec: &[u8]) -> Result<Vec<u8>, String> {
    let curve = named_curve(ec).ok_or(
        "an EC PRIVATE KEY without its named curve ([0] parameters): write it with `openssl pkcs8 -topk8 -nocrypt`",
    )?;
    let mut algorithm = EC.to_vec();
    algorithm.extend_from_slice(curve);
    Ok(wrap(&algorithm, ec))
}

/// SEQUENCE { INTEGER 0, SEQUENCE { algorithm }, OCTET STRING { key } }.
fn wrap(algorithm: &[u8], key: &[u8]) -> Vec<u8> {
    let mut body = vec![0x02, 0x01, 0x00];
    body.extend(der(0x30, algorithm));
    body.extend(der(0x04, key));
    der(0x30, &body)
}

/// The curve's OID (a whole TLV) in an ECPrivateKey's `[0]`.
fn named_curve(ec: &[u8]) -> Option<&[u8]> {
    // The DER reader the CA certificate is read with.
    let tlv = |input| super::issuer::any(input).ok();
    let (0x30, mut fields, _) = tlv(ec)? else {
        return None;
    };
    for _ in 0..2 {
        fields = tlv(fields)?.2; // version, privateKey
    }
    match tlv(fields)? {
        (0xa0, oid, _) if oid.first() == Some(&0x06) => Some(oid),
        _ => None,
    }
}

fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
    let len = contents.len();
    let mut out = vec![tag];
    match len {
        0..=0x7f => out.push(len as u8),
        0x80..=0xff => out.extend([0x81, len as u8]),
        0x100..=0xffff => out.extend([0x82, (len >> 8) as u8, len as u8]),
        _ => out.extend([0x83, (len >> 16) as u8, (len >> 8) as u8, len as u8]),
    }
    out.extend_from_slice(contents);
    out
}
