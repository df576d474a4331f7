//! Bearer tokens for SASL/OAUTHBEARER: JSON Web Tokens signed by an identity
//! provider whose public keys (a JWKS) are in a file, validated as Kafka's
//! broker validates them (`BrokerJwtValidator` with
//! `sasl.oauthbearer.jwks.endpoint.url=file:…`).
//!
//! A token is accepted when: it is a compact JWS (three base64url parts);
//! its `alg` is one of RS/PS 256/384/512, ES256, ES384 or EdDSA (never
//! `none`, never an HMAC: the broker holds no shared secret), it carries no
//! `crit` header; its signature verifies with a key of the set (the one its
//! `kid` names, or any key of the algorithm's type when it names none); it
//! has `exp` (not past, give or take the clock skew), `iat`, the subject
//! claim (`sub` by default) as a non-empty string; `nbf`, when present, is
//! not in the future; `iss` is the expected issuer and `aud` holds one of the
//! expected audiences when those are set; a scope claim, when present, is a
//! string or a list of non-empty strings.
//!
//! The key file is read again when its size, modification time or inode
//! changes (checked at each validation: one `stat`), so a rotated key set
//! applies without a reload; a file that cannot be read or parsed keeps the
//! keys read before, with the error returned to the host to log.
//!
//! Owns no role policy: what subject maps to which role is `crate::ident`'s.

pub mod jwks;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use base64::Engine;
use ring::signature::{self, UnparsedPublicKey};
use serde_json::Value;

pub use jwks::{Jwk, Jwks, JwksError, PublicKey};

/// Kafka's `sasl.oauthbearer.*` broker settings, as `kafgres.oauthbearer_*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthSettings {
    /// The JSON Web Key Set (Kafka's `jwks.endpoint.url` as a `file:` URL).
    pub jwks_file: PathBuf,
    /// `iss` must equal it, when set.
    pub expected_issuer: Option<String>,
    /// `aud` must hold one of them, when any.
    pub expected_audience: Vec<String>,
    /// The claim naming the principal (`sub`).
    pub sub_claim_name: String,
    /// The claim holding the scopes (`scope`), checked for form only.
    pub scope_claim_name: String,
    /// Allowed difference between the broker's clock and the issuer's.
    pub clock_skew_s: u64,
}

/// A validated token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    /// The subject claim's value (not yet a role).
    pub subject: String,
    pub expires_at_ms: i64,
    pub scopes: Vec<String>,
}

/// Why a token was refused (for the log; the client hears only
/// `invalid_token`, as from Kafka).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is not a compact JWS: {0}")]
    Malformed(String),
    #[error("the token's algorithm {0:?} is not accepted")]
    Algorithm(String),
    #[error("no key of the key set verifies the token ({0})")]
    Signature(String),
    #[error("the token's claims are refused: {0}")]
    Claims(String),
    #[error("the key set {path} could not be used: {what}")]
    Keys { path: PathBuf, what: String },
}

/// Validates tokens against the settings and the key file.
#[derive(Debug)]
pub struct TokenValidator {
    settings: OAuthSettings,
    keys: Mutex<Option<LoadedKeys>>,
}

#[derive(Debug)]
struct LoadedKeys {
    stamp: FileStamp,
    jwks: Arc<Jwks>,
}

/// What tells a replaced file from the one read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    inode: u64,
}

impl TokenValidator {
    /// Reads the key file once, so that a wrong path or a bad set is known
    /// when the setting is applied rather than at the first login.
    pub fn new(settings: OAuthSettings) -> Result<TokenValidator, TokenError> {
        let validator = TokenValidator { settings, keys: Mutex::new(None) };
        validator.keys()?;
        Ok(validator)
    }

    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// The key set, read again if the file changed. A file that changed
    /// into something unusable keeps the keys read before (the error is
    /// returned only when there are none).
    fn keys(&self) -> Result<Arc<Jwks>, TokenError> {
        let path = &self.settings.jwks_file;
        let fail = |what: String| TokenError::Keys { path: path.clone(), what };
        let mut loaded = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let stamp = match std::fs::metadata(path) {
            Ok(meta) => {
                use std::os::unix::fs::MetadataExt;
                FileStamp { len: meta.len(), modified: meta.modified().ok(), inode: meta.ino() }
            }
            Err(e) => {
                return match loaded.as_ref() {
                    Some(keys) => {
                        log::warn!(
                            "the OAUTHBEARER key set {} cannot be read ({e}); the keys read before stay",
                            path.display()
                        );
                        Ok(Arc::clone(&keys.jwks))
                    }
                    None => Err(fail(e.to_string())),
                }
            }
        };
        if let Some(keys) = loaded.as_ref().filter(|k| k.stamp == stamp) {
            return Ok(Arc::clone(&keys.jwks));
        }
        let read = std::fs::read(path).map_err(|e| e.to_string()).and_then(|bytes| {
            if bytes.len() > JWKS_FILE_BYTES_MAX {
                return Err(format!("larger than {JWKS_FILE_BYTES_MAX} bytes"));
            }
            Jwks::parse(&bytes).map_err(|e| e.to_string())
        });
        match (read, loaded.as_mut()) {
            (Ok(jwks), _) => {
                let jwks = Arc::new(jwks);
                if loaded.is_some() {
                    log::info!("the OAUTHBEARER key set {} was read again ({} keys)", path.display(), jwks.keys.len());
                }
                *loaded = Some(LoadedKeys { stamp, jwks: Arc::clone(&jwks) });
                Ok(jwks)
            }
            (Err(what), Some(keys)) => {
                log::warn!(
                    "the OAUTHBEARER key set {} changed but cannot be used ({what}); the keys read before stay",
                    path.display()
                );
                // Not read again until it changes once more.
                keys.stamp = stamp;
                Ok(Arc::clone(&keys.jwks))
            }
            (Err(what), None) => Err(fail(what)),
        }
    }

    /// Validates `token` at `now_ms` (milliseconds since the epoch).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, TokenError> {
        let jws = CompactJws::parse(token)?;
        let jwks = self.keys()?;
        jws.verify(&jwks)?;
        self.check_claims(&jws.claims, now_ms)
    }

    fn check_claims(&self, claims: &serde_json::Map<String, Value>, now_ms: i64) -> Result<ValidToken, TokenError> {
        let refuse = |what: String| Err(TokenError::Claims(what));
        let skew_ms = (self.settings.clock_skew_s as i64).saturating_mul(1000);
        let time = |name: &str| -> Result<Option<i64>, TokenError> {
            match claims.get(name) {
                None => Ok(None),
                Some(value) => value
                    .as_f64()
                    .filter(|s| s.is_finite())
                    .map(|seconds| Some((seconds * 1000.0) as i64))
                    .ok_or_else(|| TokenError::Claims(format!("\"{name}\" is not a NumericDate"))),
            }
        };
        let Some(expires_at_ms) = time("exp")? else { return refuse("no expiration time (\"exp\")".into()) };
        if now_ms >= expires_at_ms.saturating_add(skew_ms) {
            return refuse(format!("expired at {expires_at_ms} ms, now is {now_ms} ms"));
        }
        if time("iat")?.is_none() {
            return refuse("no issued-at time (\"iat\")".into());
        }
        if let Some(not_before_ms) = time("nbf")? {
            if now_ms.saturating_add(skew_ms) < not_before_ms {
                return refuse(format!("not valid before {not_before_ms} ms, now is {now_ms} ms"));
            }
        }
        if let Some(issuer) = &self.settings.expected_issuer {
            if claims.get("iss").and_then(Value::as_str) != Some(issuer.as_str()) {
                return refuse(format!("the issuer (\"iss\") is not {issuer:?}"));
            }
        }
        if !self.settings.expected_audience.is_empty() {
            let audiences: Vec<&str> = match claims.get("aud") {
                Some(Value::String(one)) => vec![one.as_str()],
                Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !audiences.iter().any(|a| self.settings.expected_audience.iter().any(|e| e == a)) {
                return refuse(format!("the audience (\"aud\") holds none of {:?}", self.settings.expected_audience));
            }
        }
        let sub_claim = &self.settings.sub_claim_name;
        let subject = match claims.get(sub_claim) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(_) => return refuse(format!("the subject claim \"{sub_claim}\" is not a non-empty string")),
            None => return refuse(format!("no subject claim \"{sub_claim}\"")),
        };
        let scope_claim = &self.settings.scope_claim_name;
        let scopes = match claims.get(scope_claim) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(one)) => vec![one.clone()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            Some(_) => Vec::new(),
        };
        if scopes.iter().any(|s| s.trim().is_empty()) {
            return refuse(format!("the scope claim \"{scope_claim}\" holds an empty scope"));
        }
        Ok(ValidToken { subject, expires_at_ms, scopes })
    }
}

/// A key set larger than this is not a key set (a provider's has a handful of keys).
const JWKS_FILE_BYTES_MAX: usize = 1 << 20;

/// A decoded compact JWS: header, claims, and what was signed.
struct CompactJws<'a> {
    alg: String,
    kid: Option<String>,
    signed: &'a [u8],
    signature: Vec<u8>,
    claims: serde_json::Map<String, Value>,
}

impl<'a> CompactJws<'a> {
    fn parse(token: &'a str) -> Result<CompactJws<'a>, TokenError> {
        let malformed = |what: &str| TokenError::Malformed(what.to_owned());
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed("not three parts separated by dots"));
        };
        let decode = |part: &str, what: &str| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|e| TokenError::Malformed(format!("the {what} is not base64url: {e}")))
        };
        let header: Value = serde_json::from_slice(&decode(header, "header")?)
            .map_err(|e| TokenError::Malformed(format!("the header is not JSON: {e}")))?;
        let claims = match serde_json::from_slice(&decode(payload, "payload")?) {
            Ok(Value::Object(claims)) => claims,
            Ok(_) => return Err(malformed("the claims are not a JSON object")),
            Err(e) => return Err(TokenError::Malformed(format!("the claims are not JSON: {e}"))),
        };
        let alg = header.get("alg").and_then(Value::as_str).ok_or_else(|| malformed("the header has no \"alg\""))?;
        if header.get("crit").is_some() {
            return Err(malformed("the header has critical extensions (\"crit\"), which are not understood"));
        }
        Ok(CompactJws {
            alg: alg.to_owned(),
            kid: header.get("kid").and_then(Value::as_str).map(str::to_owned),
            signed: &token.as_bytes()[..token.len() - signature.len() - 1],
            signature: decode(signature, "signature")?,
            claims,
        })
    }

    /// Checks the signature with the key `kid` names, or with each key of
    /// the algorithm's type.
    fn verify(&self, jwks: &Jwks) -> Result<(), TokenError> {
        let algorithm = Algorithm::named(&self.alg).ok_or_else(|| TokenError::Algorithm(self.alg.clone()))?;
        let candidates: Vec<&Jwk> = jwks
            .keys
            .iter()
            .filter(|k| self.kid.is_none() || k.kid == self.kid)
            .filter(|k| k.alg.as_deref().is_none_or(|a| a == self.alg))
            .collect();
        if candidates.is_empty() {
            return Err(TokenError::Signature(match &self.kid {
                Some(kid) => format!("no key has kid {kid:?}"),
                None => "the set has no key".into(),
            }));
        }
        let mut tried = 0;
        for jwk in candidates {
            if let Some(verified) = algorithm.verify(&jwk.key, self.signed, &self.signature) {
                tried += 1;
                if verified {
                    return Ok(());
                }
            }
        }
        Err(TokenError::Signature(match tried {
            0 => format!("no key of the set is for {}", self.alg),
            n => format!("the signature does not verify with {n} key(s) for {}", self.alg),
        }))
    }
}

#[derive(Debug, Clone, Copy)]
enum Algorithm {
    RsaPkcs1(&'static signature::RsaParameters),
    RsaPss(&'static signature::RsaParameters),
    EcP256,
    EcP384,
    Ed25519,
}

impl Algorithm {
    fn named(alg: &str) -> Option<Algorithm> {
        Some(match alg {
            "RS256" => Algorithm::RsaPkcs1(&signature::RSA_PKCS1_2048_8192_SHA256),
            "RS384" => Algorithm::RsaPkcs1(&signature::RSA_PKCS1_2048_8192_SHA384),
            "RS512" => Algorithm::RsaPkcs1(&signature::RSA_PKCS1_2048_8192_SHA512),
            "PS256" => Algorithm::RsaPss(&signature::RSA_PSS_2048_8192_SHA256),
            "PS384" => Algorithm::RsaPss(&signature::RSA_PSS_2048_8192_SHA384),
            "PS512" => Algorithm::RsaPss(&signature::RSA_PSS_2048_8192_SHA512),
            "ES256" => Algorithm::EcP256,
            "ES384" => Algorithm::EcP384,
            "EdDSA" => Algorithm::Ed25519,
            _ => return None,
        })
    }

    /// `None`: the key is not of this algorithm's type.
    fn verify(self, key: &PublicKey, message: &[u8], sig: &[u8]) -> Option<bool> {
        let ok = match (self, key) {
            (Algorithm::RsaPkcs1(params) | Algorithm::RsaPss(params), PublicKey::Rsa { n, e }) => {
                signature::RsaPublicKeyComponents { n, e }.verify(params, message, sig).is_ok()
            }
            (Algorithm::EcP256, PublicKey::EcP256(point)) => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point).verify(message, sig).is_ok()
            }
            (Algorithm::EcP384, PublicKey::EcP384(point)) => {
                UnparsedPublicKey::new(&signature::ECDSA_P384_SHA384_FIXED, point).verify(message, sig).is_ok()
            }
            (Algorithm::Ed25519, PublicKey::Ed25519(x)) => {
                UnparsedPublicKey::new(&signature::ED25519, x).verify(message, sig).is_ok()
            }
            _ => return None,
        };
        Some(ok)
    }
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
