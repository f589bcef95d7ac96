//! What signing as a supplied CA needs from its certificate: the subject name, written into
//! every leaf's issuer field byte for byte as the CA has it (clients match the two by bytes),
//! the subject key identifier, which the leaves' authority key identifier must repeat
//! (OpenSSL looks the issuer up by it), and whether clients will accept it as an issuer at
//! all (basicConstraints `cA`, its validity), so that a certificate that is not a CA, or has
//! expired, is refused at start rather than failing every intercepted call. Read by a DER walk of our own: rcgen reads them only
//! through x509-parser, which added 0.6 MB to the binary (measured: 26.59 to 27.21 MB) for
//! these two fields.

use rcgen::string::{BmpString, Ia5String, PrintableString, TeletexString, UniversalString};
use rcgen::{DistinguishedName, DnType, DnValue};

/// What a CA certificate says of itself.
pub(super) struct Subject {
    pub name: DistinguishedName,
    pub key_id: Option<Vec<u8>>,
    /// Its SubjectPublicKeyInfo, DER: the key file must hold this key's private half.
    pub public_key: Vec<u8>,
    /// basicConstraints says `cA: TRUE`.
    pub is_ca: bool,
    /// Its validity, as `notBefore` and `notAfter` say.
    pub valid: std::ops::RangeInclusive<time::OffsetDateTime>,
}

/// The subject name, key identifier (if the certificate has one) and public key.
pub(super) fn read(cert: &[u8]) -> Result<Subject, String> {
    let (_, certificate, _) = tlv(cert, 0x30)?;
    let (_, mut tbs, _) = tlv(certificate, 0x30)?;
    if tbs.first() == Some(&0xa0) {
        tbs = tlv(tbs, 0xa0)?.2; // version
    }
    let mut fields = Vec::new();
    for _ in 0..6 {
        // serial, signature, issuer, validity, subject, subjectPublicKeyInfo: whole TLVs
        let (_, _, rest) = any(tbs)?;
        fields.push(&tbs[..tbs.len() - rest.len()]);
        tbs = rest;
    }
    let name = name(tlv(fields[4], 0x30)?.1)?;
    let public_key = fields[5].to_vec();
    let valid = validity(tlv(fields[3], 0x30)?.1)?;
    let (mut key_id, mut is_ca) = (None, false);
    while !tbs.is_empty() {
        let (tag, contents, rest) = any(tbs)?;
        if tag == 0xa3 {
            let extensions = tlv(contents, 0x30)?.1;
            key_id = extension(extensions, &[0x55, 0x1d, 0x0e])?
                .map(|octets| tlv(octets, 0x04).map(|(_, id, _)| id.to_vec()))
                .transpose()?;
            is_ca = extension(extensions, &[0x55, 0x1d, 0x13])?
                .map(ca_flag)
                .transpose()?
                .unwrap_or(false);
        }
        tbs = rest;
    }
    Ok(Subject {
        name,
        key_id,
        public_key,
        is_ca,
        valid,
    })
}

/// basicConstraints' `cA` (a SEQUENCE whose first element, when a BOOLEAN, is it).
fn ca_flag(value: &[u8]) -> Result<bool, String> {
    let (_, constraints, _) = tlv(value, 0x30)?;
    match constraints.first() {
        Some(0x01) => Ok(tlv(constraints, 0x01)?.1 != [0]),
        _ => Ok(false),
    }
}

/// `notBefore` and `notAfter`: UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`).
fn validity(times: &[u8]) -> Result<std::ops::RangeInclusive<time::OffsetDateTime>, String> {
    let (from_tag, from, rest) = any(times)?;
    let (until_tag, until, _) = any(rest)?;
    Ok(moment(from_tag, from)?..=moment(until_tag, until)?)
}

fn moment(tag: u8, text: &[u8]) -> Result<time::OffsetDateTime, String> {
    let bad = || format!("a validity time driftwatch does not read ({tag:#04x})");
    let digits = text.strip_suffix(b"Z").ok_or_else(bad)?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let number = |range: std::ops::Range<usize>| -> Result<u32, String> {
        let part = digits.get(range).ok_or_else(bad)?;
        Ok(part.iter().fold(0, |a, d| a * 10 + u32::from(d - b'0')))
    };
    let (year, at) = match (tag, digits.len()) {
        // RFC 5280, 4.1.2.5.1: YY below 50 is 20YY.
        (0x17, 12) => (
            number(0..2).map(|y| if y < 50 { 2000 + y } else { 1900 + y })?,
            2,
        ),
        (0x18, 14) => (number(0..4)?, 4),
        _ => return Err(bad()),
    };
    let field = |i: usize| number(at + 2 * i..at + 2 * i + 2);
    let month =
        time::Month::try_from(u8::try_from(field(0)?).map_err(|_| bad())?).map_err(|_| bad())?;
    let date = time::Date::from_calendar_date(
        i32::try_from(year).map_err(|_| bad())?,
        month,
        u8::try_from(field(1)?).map_err(|_| bad())?,
    )
    .map_err(|_| bad())?;
    let [hour, minute, second] = [field(2)?, field(3)?, field(4)?].map(|v| v as u8);
    let clock = time::Time::from_hms(hour, minute, second).map_err(|_| bad())?;
    Ok(date.with_time(clock).assume_utc())
}

/// A Name: each RDN of one attribute, in order. rcgen keeps one value per attribute type and
/// no multi-valued RDN, so a name that has either is refused rather than re-encoded wrong.
fn name(mut rdns: &[u8]) -> Result<DistinguishedName, String> {
    let mut dn = DistinguishedName::new();
    let mut seen = Vec::new();
    while !rdns.is_empty() {
        let (_, set, rest) = tlv(rdns, 0x31)?;
        let (_, pair, more) = tlv(set, 0x30)?;
        if !more.is_empty() {
            return Err(
                "the subject has a multi-valued RDN, which driftwatch cannot sign as".into(),
            );
        }
        let (_, oid, value) = tlv(pair, 0x06)?;
        let arcs = arcs(oid)?;
        if seen.contains(&arcs) {
            return Err(format!(
                "the subject repeats attribute {arcs:?}, which driftwatch cannot sign as"
            ));
        }
        seen.push(arcs.clone());
        let (tag, text, _) = any(value)?;
        dn.push(DnType::CustomDnType(arcs), string(tag, text)?);
        rdns = rest;
    }
    Ok(dn)
}

fn string(tag: u8, bytes: &[u8]) -> Result<DnValue, String> {
    let text = || String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string());
    let bad = |e: rcgen::Error| e.to_string();
    Ok(match tag {
        0x0c => DnValue::Utf8String(text()?),
        0x13 => DnValue::PrintableString(PrintableString::try_from(text()?).map_err(bad)?),
        0x16 => DnValue::Ia5String(Ia5String::try_from(text()?).map_err(bad)?),
        0x14 => DnValue::TeletexString(TeletexString::try_from(text()?).map_err(bad)?),
        0x1e => DnValue::BmpString(BmpString::from_utf16be(bytes.to_vec()).map_err(bad)?),
        0x1c => {
            DnValue::UniversalString(UniversalString::from_utf32be(bytes.to_vec()).map_err(bad)?)
        }
        _ => return Err(format!("a subject attribute of ASN.1 type {tag:#04x}")),
    })
}

/// The value (inside its OCTET STRING) of the extension `oid`, if present.
fn extension<'a>(mut extensions: &'a [u8], oid: &[u8]) -> Result<Option<&'a [u8]>, String> {
    while !extensions.is_empty() {
        let (_, extension, rest) = tlv(extensions, 0x30)?;
        let (_, id, mut value) = tlv(extension, 0x06)?;
        if value.first() == Some(&0x01) {
            value = tlv(value, 0x01)?.2; // critical
        }
        if id == oid {
            return Ok(Some(tlv(value, 0x04)?.1));
        }
        extensions = rest;
    }
    Ok(None)
}

fn arcs(oid: &[u8]) -> Result<Vec<u64>, String> {
    let (&first, rest) = oid.split_first().ok_or("an empty OID")?;
    let mut arcs = match first {
        0..40 => vec![0, u64::from(first)],
        40..80 => vec![1, u64::from(first - 40)],
        _ => vec![2, u64::from(first - 80)],
    };
    let mut arc = 0u64;
    for &b in rest {
        arc = arc.checked_mul(128).ok_or("an OID arc too large")? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            arcs.push(arc);
            arc = 0;
        }
    }
    Ok(arcs)
}

/// One TLV whose tag must be `tag`: its tag, contents, and what follows it.
fn tlv(input: &[u8], tag: u8) -> Result<(u8, &[u8], &[u8]), String> {
    let read = any(input)?;
    match read.0 == tag {
        true => Ok(read),
        false => Err(format!(
            "expected ASN.1 tag {tag:#04x}, found {:#04x}",
            read.0
        )),
    }
}

/// One TLV of any (single-byte) tag, definite length.
pub(super) fn any(input: &[u8]) -> Result<(u8, &[u8], &[u8]), String> {
    let truncated = || "the certificate's DER is cut short".to_string();
    let (&tag, rest) = input.split_first().ok_or_else(truncated)?;
    let (&first, rest) = rest.split_first().ok_or_else(truncated)?;
    let (len, rest) = match first {
        0..=0x7f => (usize::from(first), rest),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let bytes = rest.get(..n).ok_or_else(truncated)?;
            let len = bytes.iter().fold(0usize, |a, b| a << 8 | usize::from(*b));
            (len, &rest[n..])
        }
        _ => return Err("a DER length driftwatch does not read".into()),
    };
    let contents = rest.get(..len).ok_or_else(truncated)?;
    Ok((tag, contents, &rest[len..]))
}

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyIdMethod, KeyPair};

    #[test]
    fn a_ca_reads_back_as_the_name_and_key_id_it_was_made_with() {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(
            DnType::CountryName,
            rcgen::DnValue::PrintableString("NL".try_into().unwrap()),
        );
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Ops");
        params
            .distinguished_name
            .push(DnType::CommonName, "Corp proxy CA é");
        params.key_identifier_method = KeyIdMethod::PreSpecified(vec![7; 20]);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let read = super::read(cert.der()).unwrap();
        assert_eq!(read.key_id, Some(vec![7; 20]));
        use rcgen::PublicKeyData;
        assert_eq!(read.public_key, key.subject_public_key_info());
        let values: Vec<String> = read.name.iter().map(|(_, v)| format!("{v:?}")).collect();
        // In the certificate's order: rcgen's default name starts with its CN.
        assert_eq!(
            values,
            [
                "Utf8String(\"Corp proxy CA é\")",
                "PrintableString(PrintableString(\"NL\"))",
                "Utf8String(\"Ops\")"
            ]
        );
        assert!(super::read(&cert.der()[..40]).is_err());
    }
}
