//! JSON Web Key Sets (RFC 7517): the public keys bearer tokens are signed
//! with, as an identity provider publishes them (`/.well-known/jwks.json`).
//!
//! Only signature keys ring can verify with are kept: RSA (2048 bits and
//! more, PKCS#1 v1.5 and PSS), EC on P-256 and P-384, and Ed25519. Keys for
//! encryption (`"use": "enc"`), symmetric keys and unknown key types are
//! skipped, as a verifier that cannot use them must; a set left with no key
//! is an error.

use base64::Engine;
use serde_json::Value;

/// What a JWK verifies signatures with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// An uncompressed point (`04 || x || y`) on P-256.
    EcP256(Vec<u8>),
    /// An uncompressed point on P-384.
    EcP384(Vec<u8>),
    Ed25519(Vec<u8>),
}

/// One usable key of a set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    pub kid: Option<String>,
    /// The algorithm the key is restricted to (`alg`), if it says.
    pub alg: Option<String>,
    pub key: PublicKey,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    #[error("not a JSON Web Key Set: {0}")]
    NotJson(String),
    #[error("not a JSON Web Key Set: no \"keys\" array")]
    NoKeys,
    #[error("key {index} of the set: {what}")]
    BadKey { index: usize, what: String },
    #[error("the set holds no signature key Kafgres can use (RSA, EC P-256/P-384, Ed25519)")]
    NoUsableKey,
}

/// The usable keys of a set, in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

impl Jwks {
    pub fn parse(json: &[u8]) -> Result<Jwks, JwksError> {
        let value: Value = serde_json::from_slice(json).map_err(|e| JwksError::NotJson(e.to_string()))?;
        let entries = value.get("keys").and_then(Value::as_array).ok_or(JwksError::NoKeys)?;
        let mut keys = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            if let Some(key) = jwk(entry).map_err(|what| JwksError::BadKey { index, what })? {
                keys.push(key);
            }
        }
        if keys.is_empty() {
            return Err(JwksError::NoUsableKey);
        }
        Ok(Jwks { keys })
    }
}

/// One entry: `Ok(None)` for a key that is not for us to use.
fn jwk(entry: &Value) -> Result<Option<Jwk>, String> {
    let text = |name: &str| entry.get(name).and_then(Value::as_str);
    let Some(kty) = text("kty") else { return Err("no \"kty\"".into()) };
    if text("use").is_some_and(|u| u != "sig") {
        return Ok(None);
    }
    let field = |name: &str| -> Result<Vec<u8>, String> {
        let encoded = text(name).ok_or_else(|| format!("no \"{name}\""))?;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded.trim_end_matches('='))
            .map_err(|e| format!("\"{name}\" is not base64url: {e}"))
    };
    let key = match (kty, text("crv")) {
        ("RSA", _) => PublicKey::Rsa { n: field("n")?, e: field("e")? },
        ("EC", Some(curve @ ("P-256" | "P-384"))) => {
            let (x, y) = (field("x")?, field("y")?);
            let size = if curve == "P-256" { 32 } else { 48 };
            if x.len() != size || y.len() != size {
                return Err(format!("an {curve} key's x and y are {size} bytes each"));
            }
            let point = [&[0x04][..], &x, &y].concat();
            if curve == "P-256" {
                PublicKey::EcP256(point)
            } else {
                PublicKey::EcP384(point)
            }
        }
        ("OKP", Some("Ed25519")) => {
            let x = field("x")?;
            if x.len() != 32 {
                return Err("an Ed25519 key is 32 bytes".into());
            }
            PublicKey::Ed25519(x)
        }
        // P-521, X25519, symmetric ("oct") and unknown types: not for verifying here.
        _ => return Ok(None),
    };
    Ok(Some(Jwk { kid: text("kid").map(str::to_owned), alg: text("alg").map(str::to_owned), key }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_signature_keys_it_can_use() {
        let set = br#"{"keys":[
            {"kty":"RSA","kid":"r1","alg":"RS256","use":"sig","n":"0vx7agoebGcQSuuPiLJXZptN","e":"AQAB"},
            {"kty":"RSA","kid":"enc","use":"enc","n":"AQAB","e":"AQAB"},
            {"kty":"oct","k":"c2VjcmV0"},
            {"kty":"EC","crv":"P-521","x":"AA","y":"AA"},
            {"kty":"OKP","crv":"Ed25519","kid":"ed","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
        ]}"#;
        let jwks = Jwks::parse(set).unwrap();
        let kids: Vec<_> = jwks.keys.iter().map(|k| k.kid.as_deref()).collect();
        assert_eq!(kids, [Some("r1"), Some("ed")]);
        assert!(matches!(jwks.keys[0].key, PublicKey::Rsa { ref e, .. } if e == &[1, 0, 1]));
        assert_eq!(jwks.keys[0].alg.as_deref(), Some("RS256"));
    }

    #[test]
    fn refuses_what_is_not_a_key_set() {
        assert!(matches!(Jwks::parse(b"not json"), Err(JwksError::NotJson(_))));
        assert_eq!(Jwks::parse(b"{}"), Err(JwksError::NoKeys));
        assert_eq!(Jwks::parse(br#"{"keys":[]}"#), Err(JwksError::NoUsableKey));
        assert_eq!(Jwks::parse(br#"{"keys":[{"kty":"oct","k":"AA"}]}"#), Err(JwksError::NoUsableKey));
        assert!(matches!(Jwks::parse(br#"{"keys":[{"n":"AA"}]}"#), Err(JwksError::BadKey { index: 0, .. })));
        assert!(matches!(
            Jwks::parse(br#"{"keys":[{"kty":"RSA","n":"!!","e":"AQAB"}]}"#),
            Err(JwksError::BadKey { .. })
        ));
        assert!(matches!(
            Jwks::parse(br#"{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}"#),
            Err(JwksError::BadKey { .. })
        ));
    }
}
