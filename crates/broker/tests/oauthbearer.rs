//! SASL/OAUTHBEARER and identity maps over the wire: a SASL_SSL listener, a
//! key set in a file, tokens signed here with ring (EC P-256), client
//! certificates mapped to roles through an ident map; Kafka's exchange
//! checked byte for byte (the `invalid_token` challenge, then the failure).

mod common;

use std::sync::Arc;

use base64::Engine;
use common::tls::*;
use common::*;
use kafgres_broker::ident::{CertificateName, IdentMaps, IdentityRules};
use kafgres_broker::listener::SecurityProtocol;
use kafgres_broker::oauth::{OAuthSettings, TokenValidator};
use kafgres_broker::tls::ClientAuth;
use kafgres_broker::{BrokerConfig, MemoryCatalog};
use kafgres_wire::error_code;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An identity provider's signing key.
struct Issuer {
    key: EcdsaKeyPair,
    kid: &'static str,
}

impl Issuer {
    fn new(kid: &'static str) -> Issuer {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).expect("key");
        Issuer { key, kid }
    }

    fn jwk(&self) -> serde_json::Value {
        let point = self.key.public_key().as_ref();
        serde_json::json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig",
                           "x": b64(&point[1..33]), "y": b64(&point[33..])})
    }

    /// A token for `sub`, expiring `ttl_s` from now (negative: already expired).
    fn token(&self, sub: &str, ttl_s: i64) -> String {
        let now = kafgres_broker::oauth::now_ms() / 1000;
        let header = serde_json::json!({"alg": "ES256", "kid": self.kid, "typ": "JWT"});
        let claims = serde_json::json!({"sub": sub, "iat": now, "exp": now + ttl_s, "iss": "https://idp.test"});
        let signed = format!("{}.{}", b64(header.to_string().as_bytes()), b64(claims.to_string().as_bytes()));
        let signature = self.key.sign(&SystemRandom::new(), signed.as_bytes()).expect("sign");
        format!("{signed}.{}", b64(signature.as_ref()))
    }
}

/// The client's OAUTHBEARER message, as Kafka's clients write it.
fn client_first(token: &str, authzid: Option<&str>) -> Vec<u8> {
    let authzid = authzid.map(|a| format!("a={a}")).unwrap_or_default();
    format!("n,{authzid},\x01auth=Bearer {token}\x01\x01").into_bytes()
}

fn rules(jwks_file: std::path::PathBuf, maps: &str, oauth_map: Option<&str>) -> IdentityRules {
    let settings = OAuthSettings {
        jwks_file,
        expected_issuer: Some("https://idp.test".into()),
        expected_audience: Vec::new(),
        sub_claim_name: "sub".into(),
        scope_claim_name: "scope".into(),
        clock_skew_s: 30,
    };
    IdentityRules {
        oauth: Some(Arc::new(TokenValidator::new(settings).expect("key set"))),
        oauth_map: oauth_map.map(str::to_owned),
        maps: IdentMaps::parse(maps).expect("maps"),
        ..IdentityRules::default()
    }
}

struct Setup {
    broker: TestBroker,
    ca: Ca,
    _files: ServerFiles,
    keys_dir: tempfile::TempDir,
}

impl Setup {
    async fn new(issuer: &Issuer, maps: &str, oauth_map: Option<&str>) -> Setup {
        Setup::with_reauth(issuer, maps, oauth_map, 0).await
    }

    /// `reauth_ms`: Kafka's `connections.max.reauth.ms`.
    async fn with_reauth(issuer: &Issuer, maps: &str, oauth_map: Option<&str>, reauth_ms: u64) -> Setup {
        let ca = Ca::new("server CA");
        let files = server_files(&ca, None, ClientAuth::None);
        let keys_dir = tempfile::tempdir().expect("tempdir");
        let jwks = keys_dir.path().join("jwks.json");
        std::fs::write(&jwks, serde_json::json!({"keys": [issuer.jwk()]}).to_string()).expect("write");
        let catalog: Arc<MemoryCatalog> = Arc::default();
        for role in ["app", "billing_ro"] {
            catalog.set_scram_credential(role, Some(scram_credential("unused", b"a salt of sixteen")));
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
        config.tls = Some(files.settings.clone());
        config.extra_listeners = vec![listener(SecurityProtocol::SaslSsl), listener(SecurityProtocol::SaslPlaintext)];
        config.identities = Arc::new(rules(jwks, maps, oauth_map));
        config.connections_max_reauth_ms = reauth_ms;
        let broker = TestBroker::start_with(dir, catalog, config).await;
        Setup { broker, ca, _files: files, keys_dir }
    }

    async fn sasl_ssl_client(&self) -> Client {
        let addr = tls_addr(&self.broker, SecurityProtocol::SaslSsl);
        connect_tls(addr, client_config(&self.ca, None)).await.expect("handshake")
    }

    fn principals(&self) -> Vec<String> {
        let live = self.broker.broker.context().config.metrics.connections.snapshot();
        live.into_iter().filter_map(|c| c.principal).collect()
    }
}

/// Handshake then one SaslAuthenticate: the answer.
async fn log_in(client: &mut Client, message: &[u8]) -> kafka_protocol::messages::SaslAuthenticateResponse {
    let handshake = sasl_handshake(client, "OAUTHBEARER").await;
    assert_eq!(handshake.error_code, 0, "OAUTHBEARER offered");
    sasl_authenticate(client, message).await.expect("answered")
}

#[tokio::test]
async fn a_valid_token_logs_in_as_its_subject_role() {
    let issuer = Issuer::new("k1");
    let setup = Setup::new(&issuer, "", None).await;
    let mut client = setup.sasl_ssl_client().await;
    let handshake = sasl_handshake(&mut client, "OAUTHBEARER").await;
    let offered: Vec<String> = handshake.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(offered, ["SCRAM-SHA-256", "PLAIN", "OAUTHBEARER"]);
    let answer = sasl_authenticate(&mut client, &client_first(&issuer.token("app", 600), None)).await.expect("answer");
    assert_eq!((answer.error_code, answer.auth_bytes.len()), (0, 0), "{:?}", answer.error_message);
    assert_eq!(api_versions(&mut client).await.expect("served after login").error_code, 0);
    assert!(setup.principals().contains(&"app".to_owned()), "{:?}", setup.principals());

    // The authorization id may name the subject itself.
    let mut again = setup.sasl_ssl_client().await;
    let answer = log_in(&mut again, &client_first(&issuer.token("app", 600), Some("app"))).await;
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    setup.broker.shutdown().await;
}

/// With `connections.max.reauth.ms`, a bearer token's session ends at the
/// token's expiry when that comes first (KIP-368), and the session is renewed
/// with a fresh token.
#[tokio::test]
async fn a_session_ends_no_later_than_its_token() {
    let issuer = Issuer::new("k1");
    let setup = Setup::with_reauth(&issuer, "", None, 3_600_000).await;
    let mut client = setup.sasl_ssl_client().await;
    let answer = log_in(&mut client, &client_first(&issuer.token("app", 600), None)).await;
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    assert!((590_000..=600_000).contains(&answer.session_lifetime_ms), "{}", answer.session_lifetime_ms);
    let renewed = log_in(&mut client, &client_first(&issuer.token("app", 1_200), None)).await;
    assert_eq!(renewed.error_code, 0, "{:?}", renewed.error_message);
    assert!((1_190_000..=1_200_000).contains(&renewed.session_lifetime_ms), "{}", renewed.session_lifetime_ms);
    assert_eq!(api_versions(&mut client).await.expect("served after the renewal").error_code, 0);
    setup.broker.shutdown().await;
}

#[tokio::test]
async fn a_refused_token_gets_kafkas_challenge_then_fails() {
    let (trusted, stranger) = (Issuer::new("k1"), Issuer::new("k1"));
    let setup = Setup::new(&trusted, "", None).await;
    for (what, token) in [
        ("another key", stranger.token("app", 600)),
        ("expired", trusted.token("app", -120)),
        ("garbage", "a.b.c".into()),
    ] {
        let mut client = setup.sasl_ssl_client().await;
        let answer = log_in(&mut client, &client_first(&token, None)).await;
        assert_eq!(answer.error_code, 0, "{what}: the refusal is a challenge first");
        assert_eq!(&answer.auth_bytes[..], br#"{"status":"invalid_token"}"#, "{what}");
        let failed = sasl_authenticate(&mut client, b"\x01").await.expect("answered");
        assert_eq!(failed.error_code, error_code::SASL_AUTHENTICATION_FAILED, "{what}");
        assert_eq!(failed.error_message.as_deref(), Some(r#"{"status":"invalid_token"}"#), "{what}");
        client.expect_closed().await;
    }
    setup.broker.shutdown().await;
}

#[tokio::test]
async fn subjects_without_a_role_and_foreign_authorization_ids_are_refused() {
    let issuer = Issuer::new("k1");
    let setup = Setup::new(&issuer, "", None).await;
    let mut nobody = setup.sasl_ssl_client().await;
    let answer = log_in(&mut nobody, &client_first(&issuer.token("no_such_role", 600), None)).await;
    assert_eq!(answer.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        answer.error_message.as_deref(),
        Some("Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER")
    );
    nobody.expect_closed().await;

    let mut impostor = setup.sasl_ssl_client().await;
    let answer = log_in(&mut impostor, &client_first(&issuer.token("app", 600), Some("billing_ro"))).await;
    assert_eq!(answer.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        answer.error_message.as_deref(),
        Some(
            "Authentication failed: Client requested an authorization id (billing_ro) that is different from the \
             token's principal name (app)"
        )
    );
    impostor.expect_closed().await;

    let mut malformed = setup.sasl_ssl_client().await;
    let answer = log_in(&mut malformed, b"n,,auth=Bearer x").await;
    assert_eq!(answer.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    malformed.expect_closed().await;
    setup.broker.shutdown().await;
}

#[tokio::test]
async fn an_ident_map_turns_subjects_into_roles_and_bounds_requested_ones() {
    let issuer = Issuer::new("k1");
    let maps = "tokens  0oa-billing   app\ntokens  0oa-billing   billing_ro\ntokens  /^svc-(.*)$  \\1\n";
    let setup = Setup::new(&issuer, maps, Some("tokens")).await;
    let cases = [
        ("0oa-billing", None, Some("app")),
        ("0oa-billing", Some("billing_ro"), Some("billing_ro")),
        ("svc-app", None, Some("app")),
        ("0oa-billing", Some("postgres"), None),
        ("app", None, None),
    ];
    for (subject, requested, want) in cases {
        let mut client = setup.sasl_ssl_client().await;
        let answer = log_in(&mut client, &client_first(&issuer.token(subject, 600), requested)).await;
        match want {
            Some(role) => {
                assert_eq!(answer.error_code, 0, "{subject} as {requested:?}: {:?}", answer.error_message);
                assert!(setup.principals().contains(&role.to_owned()));
            }
            None => assert_eq!(answer.error_code, error_code::SASL_AUTHENTICATION_FAILED, "{subject} as {requested:?}"),
        }
    }
    setup.broker.shutdown().await;
}

#[tokio::test]
async fn oauthbearer_is_not_offered_in_clear_text_or_without_keys_and_a_reload_applies_new_rules() {
    let issuer = Issuer::new("k1");
    let setup = Setup::new(&issuer, "", None).await;
    let mut cleartext = Client::connect(tls_addr(&setup.broker, SecurityProtocol::SaslPlaintext)).await;
    let refused = sasl_handshake(&mut cleartext, "OAUTHBEARER").await;
    assert_eq!(refused.error_code, error_code::UNSUPPORTED_SASL_MECHANISM);
    let offered: Vec<String> = refused.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(offered, ["SCRAM-SHA-256"]);

    // Logged in before the reload, this connection stays.
    let mut established = setup.sasl_ssl_client().await;
    assert_eq!(log_in(&mut established, &client_first(&issuer.token("app", 600), None)).await.error_code, 0);
    setup.broker.broker.reload_identities(IdentityRules::default());
    let mut after = setup.sasl_ssl_client().await;
    let refused = sasl_handshake(&mut after, "OAUTHBEARER").await;
    assert_eq!(refused.error_code, error_code::UNSUPPORTED_SASL_MECHANISM, "no key set: not offered");
    assert_eq!(api_versions(&mut established).await.expect("still served").error_code, 0);

    // And back, with a map this time.
    let jwks = setup.keys_dir.path().join("jwks.json");
    setup.broker.broker.reload_identities(rules(jwks, "t /^user-(.*)$ \\1\n", Some("t")));
    let mut mapped = setup.sasl_ssl_client().await;
    assert_eq!(log_in(&mut mapped, &client_first(&issuer.token("user-app", 600), None)).await.error_code, 0);
    setup.broker.shutdown().await;
}

#[tokio::test]
async fn a_client_certificate_goes_through_the_map_by_its_distinguished_name() {
    let ca = Ca::new("CA");
    let files = server_files(&ca, Some(&ca), ClientAuth::Required);
    let catalog: Arc<MemoryCatalog> = Arc::default();
    catalog.set_scram_credential("app", Some(scram_credential("unused", b"a salt of sixteen")));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    config.tls = Some(files.settings.clone());
    config.extra_listeners = vec![listener(SecurityProtocol::Ssl)];
    config.identities = Arc::new(IdentityRules {
        certificate_name: CertificateName::DistinguishedName,
        certificate_map: Some("certs".into()),
        maps: IdentMaps::parse("certs /^CN=([a-z_]+)\\.apps\\.example$ \\1\n").expect("maps"),
        ..IdentityRules::default()
    });
    let broker = TestBroker::start_with(dir, catalog, config).await;
    let addr = tls_addr(&broker, SecurityProtocol::Ssl);

    let (cert, key) = ca.issue("app.apps.example", false);
    let mut mapped = connect_tls(addr, client_config(&ca, Some((&cert, &key)))).await.expect("handshake");
    assert_eq!(api_versions(&mut mapped).await.expect("served").error_code, 0);
    let live = broker.broker.context().config.metrics.connections.snapshot();
    assert!(live.iter().any(|c| c.principal.as_deref() == Some("app")), "{live:?}");

    // A name the map does not cover, or one it maps to no role, is dropped.
    for cn in ["app", "nobody.apps.example"] {
        let (cert, key) = ca.issue(cn, false);
        let refused = match connect_tls(addr, client_config(&ca, Some((&cert, &key)))).await {
            Ok(mut client) => api_versions(&mut client).await.is_err(),
            Err(_) => true,
        };
        assert!(refused, "{cn} must be refused");
    }
    broker.shutdown().await;
}
