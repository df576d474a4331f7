//! The common name (CN) of a certificate's subject, the role a client
//! certificate logs in as (as Postgres's `cert` authentication reads it).
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
/// Postgres's NAMEDATALEN - 1: a longer CN cannot be a role name.
const ROLE_NAME_BYTES_MAX: usize = 63;

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

/// The subject's first common name, as a role name.
pub fn common_name(certificate: &[u8]) -> Result<String, SubjectError> {
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
    while !subject.is_empty() {
        let (mut rdn, rest) = expect(subject, SET, "a subject part is not a set")?;
        subject = rest;
        while !rdn.is_empty() {
            let (attribute, rest) = expect(rdn, SEQUENCE, "a subject attribute is not a sequence")?;
            rdn = rest;
            let (oid, value) = expect(attribute, OID, "a subject attribute has no type")?;
            if oid == COMMON_NAME {
                let (tag, text, _) = tlv(value)?;
                return role_name(tag, text);
            }
        }
    }
    Err(SubjectError::NoCommonName)
}

fn role_name(tag: u8, text: &[u8]) -> Result<String, SubjectError> {
    // UTF8String, PrintableString, IA5String; T61 holds ASCII in practice.
    if !matches!(tag, 0x0c | 0x13 | 0x16 | 0x14) {
        return Err(SubjectError::BadCommonName("not a UTF-8, printable or IA5 string"));
    }
    let name = std::str::from_utf8(text).map_err(|_| SubjectError::BadCommonName("not UTF-8"))?;
    if name.is_empty() {
        return Err(SubjectError::BadCommonName("empty"));
    }
    if name.len() > ROLE_NAME_BYTES_MAX {
        return Err(SubjectError::BadCommonName("longer than a role name (63 bytes)"));
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
    fn a_subject_without_a_usable_cn_names_no_role() {
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::OrganizationName, "Kafgres");
        assert_eq!(common_name(&certificate_for(dn)), Err(SubjectError::NoCommonName));
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CommonName, "x".repeat(64));
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
    }
}
