//! SASL/PLAIN (RFC 4616) checked against the role's SCRAM-SHA-256 verifier,
//! so a role has one password, the one Postgres stores. Served only on TLS
//! listeners (`SASL_SSL`): the password crosses the wire as sent.
//! Pure: the caller reads the credential and runs the (costly) check.
//!
//! The token is `[authzid] NUL authcid NUL passwd`; as Kafka's
//! `PlainSaslServer`, an authorization id must be empty or the user name.
//! The password is checked as PostgreSQL prepared it when it made the
//! verifier (`pg_saslprep`): SASLprep'd (RFC 4013: non-ASCII spaces mapped
//! to a space, NFKC) when it is UTF-8 that SASLprep accepts, else as typed,
//! so a non-ASCII password works with PLAIN as it does with SCRAM.

/// The mechanism name in SaslHandshake.
pub const MECHANISM: &str = "PLAIN";

/// A PLAIN token, split.
#[derive(PartialEq, Eq)]
pub struct PlainToken {
    pub username: String,
    pub password: Vec<u8>,
}

impl std::fmt::Debug for PlainToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainToken").field("username", &self.username).finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    #[error("a PLAIN token of {0} bytes (at most {max})", max = super::scram::MESSAGE_BYTES_MAX)]
    Oversize(usize),
    #[error("malformed PLAIN token: {0}")]
    Malformed(&'static str),
    #[error("authorization id {authzid:?} differs from the user name {username:?}")]
    AuthorizationId { authzid: String, username: String },
}

impl PlainToken {
    pub fn parse(token: &[u8]) -> Result<PlainToken, PlainError> {
        if token.len() > super::scram::MESSAGE_BYTES_MAX {
            return Err(PlainError::Oversize(token.len()));
        }
        let mut parts = token.splitn(3, |b| *b == 0);
        let (Some(authzid), Some(authcid), Some(password)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(PlainError::Malformed("expected authzid NUL username NUL password"));
        };
        let username =
            std::str::from_utf8(authcid).map_err(|_| PlainError::Malformed("the user name is not UTF-8"))?.to_owned();
        if username.is_empty() {
            return Err(PlainError::Malformed("empty user name"));
        }
        if password.is_empty() {
            return Err(PlainError::Malformed("empty password"));
        }
        if !authzid.is_empty() && authzid != authcid {
            return Err(PlainError::AuthorizationId {
                authzid: String::from_utf8_lossy(authzid).into_owned(),
                username,
            });
        }
        Ok(PlainToken { username, password: password.to_vec() })
    }

    /// The password as PostgreSQL's `pg_saslprep` prepares one: SASLprep'd
    /// if it is valid UTF-8 and SASLprep accepts it, else unchanged (invalid
    /// UTF-8, a prohibited or unassigned character, bad bidirectional text).
    pub fn prepared_password(&self) -> Vec<u8> {
        match std::str::from_utf8(&self.password).ok().map(stringprep::saslprep) {
            Some(Ok(prepared)) => prepared.into_owned().into_bytes(),
            _ => self.password.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_rfc_4616_tokens() {
        let t = PlainToken::parse(b"\0alice\0s3cret").unwrap();
        assert_eq!((t.username.as_str(), t.password.as_slice()), ("alice", &b"s3cret"[..]));
        let t = PlainToken::parse(b"alice\0alice\0pass\0with nul").unwrap();
        assert_eq!(t.password, b"pass\0with nul");
    }

    #[test]
    fn passwords_are_prepared_as_postgres_prepares_them() {
        let prepared = |password: &[u8]| {
            let mut token = b"\0alice\0".to_vec();
            token.extend_from_slice(password);
            PlainToken::parse(&token).unwrap().prepared_password()
        };
        // ASCII as typed (control characters too: pg_saslprep's ASCII path).
        assert_eq!(prepared(b"s3cret \t"), b"s3cret \t");
        // A no-break space maps to a space, a soft hyphen to nothing, NFKC composes and folds.
        assert_eq!(prepared("a\u{00A0}b\u{00AD}c".as_bytes()), b"a bc");
        assert_eq!(prepared("\u{2168}".as_bytes()), b"IX");
        assert_eq!(prepared("e\u{0301}".as_bytes()), "\u{00E9}".as_bytes());
        // Prohibited (a private-use character) or not UTF-8: as typed, as PostgreSQL falls back.
        assert_eq!(prepared("x\u{E000}".as_bytes()), "x\u{E000}".as_bytes());
        assert_eq!(prepared(b"\xff\xfe"), b"\xff\xfe");
    }

    #[test]
    fn refuses_malformed_and_impersonating_tokens() {
        assert!(matches!(PlainToken::parse(b"alice"), Err(PlainError::Malformed(_))));
        assert!(matches!(PlainToken::parse(b"\0\0pw"), Err(PlainError::Malformed(_))));
        assert!(matches!(PlainToken::parse(b"\0alice\0"), Err(PlainError::Malformed(_))));
        assert!(matches!(PlainToken::parse(b"\0\xff\0pw"), Err(PlainError::Malformed(_))));
        assert_eq!(
            PlainToken::parse(b"admin\0alice\0pw"),
            Err(PlainError::AuthorizationId { authzid: "admin".into(), username: "alice".into() })
        );
        assert!(matches!(PlainToken::parse(&vec![b'a'; 5000]), Err(PlainError::Oversize(5000))));
    }

    #[test]
    fn checks_the_password_against_the_scram_verifier() {
        // RFC 7677's example user, as Postgres would store the verifier.
        let salted = crate::sasl::scram::salted_password(b"pencil", b"salt-of-test", 4096);
        let verifier = {
            use base64::Engine;
            use hmac::{KeyInit, Mac};
            use sha2::Digest;
            let mac = |key: &[u8], data: &[u8]| {
                let mut m = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).unwrap();
                m.update(data);
                m.finalize().into_bytes().to_vec()
            };
            let b64 = base64::engine::general_purpose::STANDARD;
            let stored = sha2::Sha256::digest(mac(&salted, b"Client Key"));
            format!(
                "SCRAM-SHA-256$4096:{}${}:{}",
                b64.encode(b"salt-of-test"),
                b64.encode(stored),
                b64.encode(mac(&salted, b"Server Key"))
            )
        };
        let credential = crate::sasl::scram::ScramCredential::from_verifier(&verifier).unwrap();
        assert!(credential.matches_password(b"pencil"));
        assert!(!credential.matches_password(b"pencil "));
        assert!(!credential.matches_password(b""));
    }
}
