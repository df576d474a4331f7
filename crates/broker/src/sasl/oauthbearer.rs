//! SASL/OAUTHBEARER (RFC 7628) as Kafka's `OAuthBearerSaslServer` speaks it:
//! the client's one message carries a bearer token (a JWT, checked by
//! `crate::oauth`), optionally an authorization id and extensions.
//!
//! ```text
//! client: n,[a=<authzid>],\x01auth=Bearer <token>\x01[<key>=<value>\x01]*\x01
//! server: (empty)                          the token is valid: authenticated
//!      or {"status":"invalid_token"}       then the client sends \x01 and is
//!                                          answered SASL_AUTHENTICATION_FAILED
//! ```
//!
//! A message that does not parse fails at once. Extensions are checked for
//! form (Kafka's `[A-Za-z]+` keys, printable values, `auth` reserved) and
//! otherwise ignored, as Kafka's default validator ignores them.

pub const MECHANISM: &str = "OAUTHBEARER";

/// The control-A separator of the message, and the client's whole answer
/// to the server's error.
pub const SEPARATOR: u8 = 0x01;

/// What the server sends back for a token it refuses (RFC 7628 §3.2.2,
/// Kafka's `jsonErrorResponse` without scope or OpenID configuration).
pub const INVALID_TOKEN_CHALLENGE: &str = r#"{"status":"invalid_token"}"#;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientMessageError {
    #[error("Invalid OAUTHBEARER client first message")]
    Malformed,
    #[error("Invalid OAUTHBEARER client first message: 'auth' not specified")]
    NoAuth,
    #[error("Invalid OAUTHBEARER client first message: invalid 'auth' format")]
    BadAuth,
    #[error("Invalid scheme in OAUTHBEARER client first message: {0}")]
    Scheme(String),
    #[error("Extension name {0} is invalid")]
    ExtensionName(String),
}

/// The client's first (and only) message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    pub token: String,
    /// The role the client asks to be (`a=`), if any.
    pub authorization_id: Option<String>,
}

impl ClientFirst {
    pub fn parse(message: &[u8]) -> Result<ClientFirst, ClientMessageError> {
        let text = std::str::from_utf8(message).map_err(|_| ClientMessageError::Malformed)?;
        let rest = text.strip_prefix("n,").ok_or(ClientMessageError::Malformed)?;
        let (authzid, rest) = rest.split_once(',').ok_or(ClientMessageError::Malformed)?;
        let authorization_id = match authzid {
            "" => None,
            a => Some(sasl_name(a.strip_prefix("a=").ok_or(ClientMessageError::Malformed)?)?),
        };
        // \x01 kvpairs \x01, each pair ending in \x01.
        let sep = SEPARATOR as char;
        let pairs = rest.strip_prefix(sep).and_then(|r| r.strip_suffix(sep)).ok_or(ClientMessageError::Malformed)?;
        let mut auth = None;
        if !pairs.is_empty() {
            let pairs = pairs.strip_suffix(sep).ok_or(ClientMessageError::Malformed)?;
            for pair in pairs.split(sep) {
                let (key, value) = pair.split_once('=').ok_or(ClientMessageError::Malformed)?;
                let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic());
                let value_ok =
                    !value.is_empty() && value.bytes().all(|b| matches!(b, 0x21..=0x7e | b' ' | b'\t' | b'\r' | b'\n'));
                if !key_ok || !value_ok {
                    return Err(ClientMessageError::Malformed);
                }
                if key == "auth" {
                    if auth.is_some() {
                        return Err(ClientMessageError::ExtensionName(key.to_owned()));
                    }
                    auth = Some(value);
                }
            }
        }
        let auth = auth.ok_or(ClientMessageError::NoAuth)?;
        let (scheme, token) = auth.split_once(' ').ok_or(ClientMessageError::BadAuth)?;
        let token = token.trim_start_matches(' ');
        let scheme_ok = !scheme.is_empty() && scheme.chars().all(|c| c.is_alphanumeric() || c == '_');
        let token_ok = !token.is_empty() && token.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !scheme_ok || !token_ok {
            return Err(ClientMessageError::BadAuth);
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(ClientMessageError::Scheme(scheme.chars().take(64).collect()));
        }
        Ok(ClientFirst { token: token.to_owned(), authorization_id })
    }
}

/// A GS2 saslname: ASCII without `,` and `=` but for `=2C` and `=3D`.
fn sasl_name(raw: &str) -> Result<String, ClientMessageError> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("=2C") {
            out.push(',');
            rest = after;
        } else if let Some(after) = rest.strip_prefix("=3D") {
            out.push('=');
            rest = after;
        } else if c.is_ascii() && c != '=' && c != ',' && c != '\0' {
            out.push(c);
            rest = &rest[1..];
        } else {
            return Err(ClientMessageError::Malformed);
        }
    }
    if out.is_empty() {
        return Err(ClientMessageError::Malformed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_token_authzid_and_skips_extensions() {
        let first = ClientFirst::parse(b"n,,\x01auth=Bearer eyJ.abc-_.x9\x01\x01").unwrap();
        assert_eq!(first, ClientFirst { token: "eyJ.abc-_.x9".into(), authorization_id: None });
        let first = ClientFirst::parse(b"n,a=app=2Cx=3Dy,\x01traceId=1 2\x01auth=bearer  tok\x01\x01").unwrap();
        assert_eq!(first, ClientFirst { token: "tok".into(), authorization_id: Some("app,x=y".into()) });
    }

    #[test]
    fn refuses_what_kafka_refuses() {
        let cases: &[(&[u8], ClientMessageError)] = &[
            (b"", ClientMessageError::Malformed),
            (b"y,,\x01auth=Bearer t\x01\x01", ClientMessageError::Malformed),
            (b"n,,auth=Bearer t", ClientMessageError::Malformed),
            (b"n,,\x01auth=Bearer t\x01", ClientMessageError::Malformed),
            (b"n,,\x01\x01", ClientMessageError::NoAuth),
            (b"n,,\x01x=1\x01\x01", ClientMessageError::NoAuth),
            (b"n,,\x01auth=Bearer\x01\x01", ClientMessageError::BadAuth),
            (b"n,,\x01auth=Bearer a+b\x01\x01", ClientMessageError::BadAuth),
            (b"n,,\x01auth=Basic abc\x01\x01", ClientMessageError::Scheme("Basic".into())),
            (b"n,a=,\x01auth=Bearer t\x01\x01", ClientMessageError::Malformed),
            (b"n,a=x=y,\x01auth=Bearer t\x01\x01", ClientMessageError::Malformed),
            (b"n,,\x01k1=v\x01auth=Bearer t\x01\x01", ClientMessageError::Malformed),
            (b"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01", ClientMessageError::ExtensionName("auth".into())),
            (b"n,,\x01auth=Bearer t\xff\x01\x01", ClientMessageError::Malformed),
        ];
        for (message, want) in cases {
            assert_eq!(ClientFirst::parse(message).as_ref(), Err(want), "{:?}", String::from_utf8_lossy(message));
        }
    }
}
