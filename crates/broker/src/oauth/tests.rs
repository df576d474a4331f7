//! Tokens signed here with ring (RSA from a test key made with openssl,
//! EC and Ed25519 generated per test) and checked at a fixed "now".

use super::*;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair};

/// A 2048-bit RSA key for tests only (PKCS#8, `openssl genpkey`).
const RSA_KEY_PEM: &str = include_str!("test-rsa-key.pem");

const NOW_MS: i64 = 1_800_000_000_000;
const NOW_S: i64 = NOW_MS / 1000;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

pub(crate) enum Signer {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

impl Signer {
    pub(crate) fn rsa() -> Signer {
        let body: String = RSA_KEY_PEM.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = base64::engine::general_purpose::STANDARD.decode(body).unwrap();
        Signer::Rsa(RsaKeyPair::from_pkcs8(&der).unwrap())
    }

    pub(crate) fn ec() -> Signer {
        let rng = SystemRandom::new();
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        Signer::Ec(EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap())
    }

    pub(crate) fn ed() -> Signer {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        Signer::Ed(Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap())
    }

    /// This key as a JWK entry.
    pub(crate) fn jwk(&self, kid: &str) -> Value {
        match self {
            Signer::Rsa(key) => {
                let (n, e) = rsa_public_components(key.public().as_ref());
                serde_json::json!({"kty": "RSA", "kid": kid, "use": "sig", "n": b64(&n), "e": b64(&e)})
            }
            Signer::Ec(key) => {
                let point = key.public_key().as_ref();
                serde_json::json!({"kty": "EC", "crv": "P-256", "kid": kid, "x": b64(&point[1..33]), "y": b64(&point[33..])})
            }
            Signer::Ed(key) => {
                serde_json::json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(key.public_key().as_ref())})
            }
        }
    }

    fn alg(&self, rsa_alg: &str) -> String {
        match self {
            Signer::Rsa(_) => rsa_alg.to_owned(),
            Signer::Ec(_) => "ES256".into(),
            Signer::Ed(_) => "EdDSA".into(),
        }
    }

    /// A token with this header and these claims, signed by this key.
    pub(crate) fn token_with(&self, header: Value, claims: &Value) -> String {
        let signed = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
        let rng = SystemRandom::new();
        let alg = header["alg"].as_str().unwrap_or("RS256");
        let signature = match self {
            Signer::Rsa(key) => {
                let padding: &dyn signature::RsaEncoding = match alg {
                    "PS256" => &signature::RSA_PSS_SHA256,
                    "RS512" => &signature::RSA_PKCS1_SHA512,
                    _ => &signature::RSA_PKCS1_SHA256,
                };
                let mut sig = vec![0; key.public().modulus_len()];
                key.sign(padding, &rng, signed.as_bytes(), &mut sig).unwrap();
                sig
            }
            Signer::Ec(key) => key.sign(&rng, signed.as_bytes()).unwrap().as_ref().to_vec(),
            Signer::Ed(key) => key.sign(signed.as_bytes()).as_ref().to_vec(),
        };
        format!("{signed}.{}", b64(&signature))
    }

    pub(crate) fn token(&self, kid: &str, claims: &Value) -> String {
        self.token_with(serde_json::json!({"alg": self.alg("RS256"), "kid": kid, "typ": "JWT"}), claims)
    }
}

/// n and e of a DER RSAPublicKey (SEQUENCE { INTEGER n, INTEGER e }).
fn rsa_public_components(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
    fn tlv(input: &[u8]) -> (&[u8], &[u8]) {
        let (len, header) = match input[1] {
            n if n < 0x80 => (n as usize, 2),
            n => {
                let bytes = (n & 0x7f) as usize;
                (input[2..2 + bytes].iter().fold(0usize, |a, b| (a << 8) | *b as usize), 2 + bytes)
            }
        };
        (&input[header..header + len], &input[header + len..])
    }
    let (seq, _) = tlv(der);
    let (n, rest) = tlv(seq);
    let (e, _) = tlv(rest);
    let strip = |x: &[u8]| x.iter().skip_while(|b| **b == 0).copied().collect::<Vec<u8>>();
    (strip(n), strip(e))
}

pub(crate) fn write_jwks(dir: &std::path::Path, keys: &[Value]) -> PathBuf {
    let path = dir.join("jwks.json");
    std::fs::write(&path, serde_json::json!({ "keys": keys }).to_string()).unwrap();
    path
}

fn settings(jwks_file: PathBuf) -> OAuthSettings {
    OAuthSettings {
        jwks_file,
        expected_issuer: None,
        expected_audience: Vec::new(),
        sub_claim_name: "sub".into(),
        scope_claim_name: "scope".into(),
        clock_skew_s: 30,
    }
}

fn claims(sub: &str) -> Value {
    serde_json::json!({"sub": sub, "iat": NOW_S - 10, "exp": NOW_S + 600})
}

#[test]
fn tokens_of_each_key_type_are_accepted_with_their_subject() {
    let dir = tempfile::tempdir().unwrap();
    let (rsa, ec, ed) = (Signer::rsa(), Signer::ec(), Signer::ed());
    let path = write_jwks(dir.path(), &[rsa.jwk("r"), ec.jwk("e"), ed.jwk("d")]);
    let validator = TokenValidator::new(settings(path)).unwrap();
    for (signer, kid) in [(&rsa, "r"), (&ec, "e"), (&ed, "d")] {
        let token = validator.validate(&signer.token(kid, &claims("app_writer")), NOW_MS).unwrap();
        assert_eq!(token.subject, "app_writer");
        assert_eq!(token.expires_at_ms, (NOW_S + 600) * 1000);
    }
    for alg in ["PS256", "RS512"] {
        let token = rsa.token_with(serde_json::json!({"alg": alg, "kid": "r"}), &claims("x"));
        assert_eq!(validator.validate(&token, NOW_MS).unwrap().subject, "x", "{alg}");
    }
    // No kid: every key of the algorithm's type is tried.
    let token = ec.token_with(serde_json::json!({"alg": "ES256"}), &claims("nokid"));
    assert_eq!(validator.validate(&token, NOW_MS).unwrap().subject, "nokid");
}

#[test]
fn a_signature_by_another_key_or_altered_claims_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (trusted, stranger) = (Signer::ec(), Signer::ec());
    let validator = TokenValidator::new(settings(write_jwks(dir.path(), &[trusted.jwk("k")]))).unwrap();
    let forged = stranger.token("k", &claims("admin"));
    assert!(matches!(validator.validate(&forged, NOW_MS), Err(TokenError::Signature(_))));
    // Claims swapped under a valid signature.
    let good = trusted.token("k", &claims("reader"));
    let mut parts: Vec<&str> = good.split('.').collect();
    let swapped = b64(claims("admin").to_string().as_bytes());
    parts[1] = &swapped;
    assert!(matches!(validator.validate(&parts.join("."), NOW_MS), Err(TokenError::Signature(_))));
    let unknown_kid = trusted.token("other", &claims("reader"));
    assert!(matches!(validator.validate(&unknown_kid, NOW_MS), Err(TokenError::Signature(_))));
}

#[test]
fn none_hmac_and_critical_headers_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = Signer::ec();
    let validator = TokenValidator::new(settings(write_jwks(dir.path(), &[key.jwk("k")]))).unwrap();
    let body = b64(claims("admin").to_string().as_bytes());
    let none = format!("{}.{body}.", b64(br#"{"alg":"none"}"#));
    assert_eq!(validator.validate(&none, NOW_MS), Err(TokenError::Algorithm("none".into())));
    let hmac = format!("{}.{body}.{}", b64(br#"{"alg":"HS256","kid":"k"}"#), b64(b"sig"));
    assert_eq!(validator.validate(&hmac, NOW_MS), Err(TokenError::Algorithm("HS256".into())));
    let crit = key.token_with(serde_json::json!({"alg": "ES256", "kid": "k", "crit": ["exp"]}), &claims("a"));
    assert!(matches!(validator.validate(&crit, NOW_MS), Err(TokenError::Malformed(_))));
    // An RSA-typed algorithm against an EC key: no key for it.
    let mixed = key.token_with(serde_json::json!({"alg": "RS256", "kid": "k"}), &claims("a"));
    assert!(matches!(validator.validate(&mixed, NOW_MS), Err(TokenError::Signature(_))));
}

#[test]
fn time_claims_are_checked_with_the_clock_skew() {
    let dir = tempfile::tempdir().unwrap();
    let key = Signer::ed();
    let validator = TokenValidator::new(settings(write_jwks(dir.path(), &[key.jwk("k")]))).unwrap();
    let check = |claims: Value| validator.validate(&key.token("k", &claims), NOW_MS);
    assert!(check(serde_json::json!({"sub": "a", "iat": NOW_S, "exp": NOW_S - 20})).is_ok(), "within the skew");
    assert!(matches!(
        check(serde_json::json!({"sub": "a", "iat": NOW_S, "exp": NOW_S - 31})),
        Err(TokenError::Claims(_))
    ));
    assert!(matches!(check(serde_json::json!({"sub": "a", "iat": NOW_S})), Err(TokenError::Claims(_))), "no exp");
    assert!(matches!(check(serde_json::json!({"sub": "a", "exp": NOW_S + 60})), Err(TokenError::Claims(_))), "no iat");
    assert!(matches!(check(serde_json::json!({"sub": "a", "iat": NOW_S, "exp": "soon"})), Err(TokenError::Claims(_))));
    let nbf = |offset: i64| serde_json::json!({"sub": "a", "iat": NOW_S, "exp": NOW_S + 60, "nbf": NOW_S + offset});
    assert!(check(nbf(20)).is_ok());
    assert!(matches!(check(nbf(40)), Err(TokenError::Claims(_))));
    assert!(check(serde_json::json!({"sub": "a", "iat": NOW_S, "exp": (NOW_S + 60) as f64 + 0.5})).is_ok());
}

#[test]
fn issuer_audience_subject_and_scope_follow_the_settings() {
    let dir = tempfile::tempdir().unwrap();
    let key = Signer::ec();
    let mut s = settings(write_jwks(dir.path(), &[key.jwk("k")]));
    s.expected_issuer = Some("https://idp.example".into());
    s.expected_audience = vec!["kafka".into(), "kafgres".into()];
    s.sub_claim_name = "client_id".into();
    let validator = TokenValidator::new(s).unwrap();
    let base = serde_json::json!({"iat": NOW_S, "exp": NOW_S + 60, "iss": "https://idp.example",
                                   "aud": ["other", "kafgres"], "client_id": "billing", "scope": ["a", "b"]});
    let check = |edit: &dyn Fn(&mut Value)| {
        let mut claims = base.clone();
        edit(&mut claims);
        validator.validate(&key.token("k", &claims), NOW_MS)
    };
    let token = check(&|_| {}).unwrap();
    assert_eq!((token.subject.as_str(), token.scopes.len()), ("billing", 2));
    assert!(check(&|c| c["aud"] = "kafka".into()).is_ok());
    assert!(check(&|c| c["scope"] = "one two".into()).is_ok());
    for (what, edit) in [
        ("another issuer", &(|c: &mut Value| c["iss"] = "https://evil.example".into()) as &dyn Fn(&mut Value)),
        ("no issuer", &|c: &mut Value| drop(c.as_object_mut().unwrap().remove("iss"))),
        ("another audience", &|c: &mut Value| c["aud"] = serde_json::json!(["other"])),
        ("no audience", &|c: &mut Value| drop(c.as_object_mut().unwrap().remove("aud"))),
        ("no subject", &|c: &mut Value| drop(c.as_object_mut().unwrap().remove("client_id"))),
        ("blank subject", &|c: &mut Value| c["client_id"] = " ".into()),
        ("numeric subject", &|c: &mut Value| c["client_id"] = 7.into()),
        ("empty scope", &|c: &mut Value| c["scope"] = serde_json::json!(["a", ""])),
    ] {
        assert!(matches!(check(edit), Err(TokenError::Claims(_))), "{what}");
    }
}

#[test]
fn malformed_tokens_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let key = Signer::ec();
    let validator = TokenValidator::new(settings(write_jwks(dir.path(), &[key.jwk("k")]))).unwrap();
    let good = key.token("k", &claims("a"));
    for bad in ["", ".", "..", "a.b.c", "a.b.c.d", "e30.e30.", "e30.W10.", "!!.!!.!!"] {
        assert!(validator.validate(bad, NOW_MS).is_err(), "{bad:?}");
    }
    for len in 0..good.len() {
        assert!(validator.validate(&good[..len], NOW_MS).is_err());
    }
}

#[test]
fn a_rotated_key_file_applies_and_a_broken_one_keeps_the_old_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (Signer::ec(), Signer::ed());
    let path = write_jwks(dir.path(), &[old.jwk("old")]);
    let validator = TokenValidator::new(settings(path.clone())).unwrap();
    assert!(validator.validate(&old.token("old", &claims("a")), NOW_MS).is_ok());
    // Rotation: written under another name and renamed over, as a deploy tool does.
    let staging = dir.path().join("staged");
    std::fs::create_dir(&staging).unwrap();
    let staged = write_jwks(&staging, &[new.jwk("new")]);
    std::fs::rename(&staged, &path).unwrap();
    assert!(validator.validate(&new.token("new", &claims("a")), NOW_MS).is_ok());
    assert!(validator.validate(&old.token("old", &claims("a")), NOW_MS).is_err());
    std::fs::write(&path, b"{ half written").unwrap();
    assert!(validator.validate(&new.token("new", &claims("a")), NOW_MS).is_ok(), "the keys read before stay");
    std::fs::remove_file(&path).unwrap();
    assert!(validator.validate(&new.token("new", &claims("a")), NOW_MS).is_ok(), "a missing file keeps them too");
    // A validator made with no usable file says so at once.
    assert!(matches!(TokenValidator::new(settings(dir.path().join("absent.json"))), Err(TokenError::Keys { .. })));
}
