//! The name a client certificate gives its holder, as PostgreSQL's `cert`
//! authentication reads it: the subject's common name (CN, `clientname=CN`)
//! or the whole distinguished name in RFC 2253 form (`clientname=DN`), the
//! name that Kafka's SSL principals also start from.
//!
//! A small DER walk over what rustls already verified: Certificate ->
//! tbsCertificate -> (version, serial, signature, issuer, validity) ->
//! subject, a sequence of sets of (OID, string). Malformed input is an
//! error, never a panic.

/// Why a certificate names no role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubjectError {
    #[error("the certificate is not well-formed DER ({0})")]
    Malformed(&'static str),
    #[error("the certificate's subject is empty")]
    EmptySubject,
    #[error("the certificate's subject has no common name (CN)")]
    NoCommonName,
    #[error("the certificate's common name is not a valid role name ({0})")]
    BadCommonName(&'static str),
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const VERSION: u8 = 0xa0;
/// 2.5.4.3, id-at-commonName.
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

/// One TLV: (tag, content, what follows it).
fn tlv(input: &[u8]) -> Result<(u8, &[u8], &[u8]), SubjectError> {
    let [tag, first, rest @ ..] = input else {
        return Err(SubjectError::Malformed("truncated header"));
    };
    let (len, rest) = match *first {
        n if n < 0x80 => (n as usize, rest),
        0x81..=0x84 => {
            let bytes = (*first & 0x7f) as usize;
            if rest.len() < bytes {
                return Err(SubjectError::Malformed("truncated length"));
            }
            let len = rest[..bytes].iter().fold(0usize, |acc, b| (acc << 8) | *b as usize);
            (len, &rest[bytes..])
        }
        _ => return Err(SubjectError::Malformed("unsupported length form")),
    };
    if rest.len() < len {
        return Err(SubjectError::Malformed("content shorter than its length"));
    }
    Ok((*tag, &rest[..len], &rest[len..]))
}

fn expect<'a>(input: &'a [u8], want: u8, what: &'static str) -> Result<(&'a [u8], &'a [u8]), SubjectError> {
    match tlv(input)? {
        (tag, content, rest) if tag == want => Ok((content, rest)),
        _ => Err(SubjectError::Malformed(what)),
    }
}

/// One relative distinguished name: its (attribute type OID, value TLV) pairs.
type Rdn<'a> = Vec<(&'a [u8], &'a [u8])>;

/// The subject of a certificate: its relative distinguished names, each a
/// set of (attribute type OID, string TLV), in certificate order.
fn subject(certificate: &[u8]) -> Result<Vec<Rdn<'_>>, SubjectError> {
    let (cert, _) = expect(certificate, SEQUENCE, "not a certificate")?;
    let (mut tbs, _) = expect(cert, SEQUENCE, "no tbsCertificate")?;
    if tbs.first() == Some(&VERSION) {
        tbs = tlv(tbs)?.2;
    }
    // serialNumber, signature, issuer, validity: skipped.
    for _ in 0..4 {
        tbs = tlv(tbs)?.2;
    }
    let (mut subject, _) = expect(tbs, SEQUENCE, "no subject")?;
    let mut rdns = Vec::new();
    while !subject.is_empty() {
        let (mut rdn, rest) = expect(subject, SET, "a subject part is not a set")?;
        subject = rest;
        let mut attributes = Vec::new();
        while !rdn.is_empty() {
            let (attribute, rest) = expect(rdn, SEQUENCE, "a subject attribute is not a sequence")?;
            rdn = rest;
            let (oid, value) = expect(attribute, OID, "a subject attribute has no type")?;
            tlv(value)?;
            attributes.push((oid, value));
        }
        rdns.push(attributes);
    }
    Ok(rdns)
}

/// The subject's first common name (a role name, or a name a map turns
/// into one: `crate::ident`).
pub fn common_name(certificate: &[u8]) -> Result<String, SubjectError> {
    for (oid, value) in subject(certificate)?.into_iter().flatten() {
        if oid == COMMON_NAME {
            let (tag, text, _) = tlv(value)?;
            return common_name_text(tag, text);
        }
    }
    Err(SubjectError::NoCommonName)
}

/// The subject as an RFC 2253 string, last RDN first (`CN=app,O=Example,C=DE`),
/// as OpenSSL's `XN_FLAG_RFC2253` writes it for PostgreSQL's `clientname=DN`:
/// attribute types by their short names (a dotted OID otherwise), special
/// characters escaped with a backslash, control characters and bytes above
/// 0x7F as `\XX`, values of string types OpenSSL does not print as `#` and
/// their DER in hex.
pub fn distinguished_name(certificate: &[u8]) -> Result<String, SubjectError> {
    let rdns = subject(certificate)?;
    if rdns.is_empty() {
        return Err(SubjectError::EmptySubject);
    }
    let mut out = String::new();
    for (i, rdn) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, (oid, value)) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            let known = attribute_name(oid);
            match known {
                Some(name) => out.push_str(name),
                None => out.push_str(&dotted_oid(oid)),
            }
            out.push('=');
            let (tag, text, _) = tlv(value)?;
            match (known, string_value(tag, text)) {
                (Some(_), Some(bytes)) => escape_rfc2253(&bytes, &mut out),
                _ => {
                    out.push('#');
                    for b in *value {
                        out.push_str(&format!("{b:02X}"));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// OpenSSL's short names for the attribute types subjects use.
fn attribute_name(oid: &[u8]) -> Option<&'static str> {
    Some(match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x04] => "SN",
        [0x55, 0x04, 0x05] => "serialNumber",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x09] => "street",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        [0x55, 0x04, 0x0c] => "title",
        [0x55, 0x04, 0x2a] => "GN",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID",
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => "emailAddress",
        _ => return None,
    })
}

fn dotted_oid(oid: &[u8]) -> String {
    let mut arcs: Vec<u64> = Vec::new();
    let mut value: u64 = 0;
    for b in oid {
        value = (value << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        }
    }
    arcs.iter().map(u64::to_string).collect::<Vec<_>>().join(".")
}

/// The UTF-8 bytes of a string value, or `None` for a type printed as hex.
fn string_value(tag: u8, text: &[u8]) -> Option<Vec<u8>> {
    match tag {
        // UTF8String, PrintableString, IA5String, NumericString.
        0x0c | 0x13 | 0x16 | 0x12 => Some(text.to_vec()),
        // T61String and VisibleString: one byte a character.
        0x14 | 0x1a => Some(text.iter().map(|&b| b as char).collect::<String>().into_bytes()),
        // BMPString: UCS-2, big-endian.
        0x1e if text.len().is_multiple_of(2) => {
            let units = text.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]));
            Some(char::decode_utf16(units).collect::<Result<String, _>>().ok()?.into_bytes())
        }
        _ => None,
    }
}

fn escape_rfc2253(value: &[u8], out: &mut String) {
    let last = value.len().saturating_sub(1);
    for (i, &b) in value.iter().enumerate() {
        match b {
            b',' | b'+' | b'"' | b'\\' | b'<' | b'>' | b';' => {
                out.push('\\');
                out.push(b as char);
            }
            b'#' if i == 0 => out.push_str("\\#"),
            b' ' if i == 0 || i == last => out.push_str("\\ "),
            0x00..=0x1f | 0x7f..=0xff => out.push_str(&format!("\\{b:02X}")),
            _ => out.push(b as char),
        }
    }
}

fn common_name_text(tag: u8, text: &[u8]) -> Result<String, SubjectError> {
    // UTF8String, PrintableString, IA5String; T61 holds ASCII in practice.
    if !matches!(tag, 0x0c | 0x13 | 0x16 | 0x14) {
        return Err(SubjectError::BadCommonName("not a UTF-8, printable or IA5 string"));
    }
    let name = std::str::from_utf8(text).map_err(|_| SubjectError::BadCommonName("not UTF-8"))?;
    if name.is_empty() {
        return Err(SubjectError::BadCommonName("empty"));
    }
    if name.contains('\0') {
        return Err(SubjectError::BadCommonName("contains NUL"));
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate_for(subject: rcgen::DistinguishedName) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = subject;
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn reads_the_common_name_among_other_subject_parts() {
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "DE");
        dn.push(rcgen::DnType::OrganizationName, "Kafgres");
        dn.push(rcgen::DnType::CommonName, "app_writer");
        assert_eq!(common_name(&certificate_for(dn)).unwrap(), "app_writer");
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CommonName, "rôle");
        assert_eq!(common_name(&certificate_for(dn)).unwrap(), "rôle");
    }

    #[test]
    fn the_distinguished_name_is_written_as_rfc_2253_last_part_first() {
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "DE");
        dn.push(rcgen::DnType::OrganizationName, "Kafgres, Inc.");
        dn.push(rcgen::DnType::OrganizationalUnitName, "#ops");
        dn.push(rcgen::DnType::CommonName, "app writer ");
        assert_eq!(
            distinguished_name(&certificate_for(dn)).unwrap(),
            "CN=app writer\\ ,OU=\\#ops,O=Kafgres\\, Inc.,C=DE"
        );
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CommonName, "rôle");
        dn.push(rcgen::DnType::CustomDnType(vec![1, 3, 6, 1, 4, 1, 99999, 1]), "x");
        assert_eq!(distinguished_name(&certificate_for(dn)).unwrap(), "1.3.6.1.4.1.99999.1=#0C0178,CN=r\\C3\\B4le");
    }

    #[test]
    fn a_subject_without_a_usable_cn_names_no_role() {
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::OrganizationName, "Kafgres");
        assert_eq!(common_name(&certificate_for(dn)), Err(SubjectError::NoCommonName));
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CommonName, "");
        assert!(matches!(common_name(&certificate_for(dn)), Err(SubjectError::BadCommonName(_))));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CommonName, "app");
        let der = certificate_for(dn);
        for len in 0..der.len() {
            let _ = common_name(&der[..len]);
        }
        for i in 0..der.len().min(400) {
            let mut flipped = der.clone();
            flipped[i] ^= 0xff;
            let _ = common_name(&flipped);
        }
        assert!(common_name(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(common_name(&[]).is_err());
        for len in 0..der.len() {
            let _ = distinguished_name(&der[..len]);
        }
    }
}
