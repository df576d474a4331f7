use super::*;

/// What `CREATE ROLE … PASSWORD` stores under `password_encryption = 'scram-sha-256'`.
fn verifier(password: &str, salt: &[u8], iterations: u32) -> String {
    let salted = salted_password(password.as_bytes(), salt, iterations);
    let stored: [u8; KEY_BYTES] = Sha256::digest(hmac(&salted, b"Client Key")).into();
    let server = hmac(&salted, b"Server Key");
    format!("SCRAM-SHA-256${iterations}:{}${}:{}", BASE64.encode(salt), BASE64.encode(stored), BASE64.encode(server))
}

/// The client side: the final message for a server-first message.
fn client_final(password: &str, client_first_bare: &str, server_first: &str, gs2: &str) -> String {
    client_final_prefixed(password, client_first_bare, server_first, gs2, "")
}

/// The same with `prefix` in front of the nonce (librdkafka < 2.6.1 repeats its client nonce).
fn client_final_prefixed(
    password: &str,
    client_first_bare: &str,
    server_first: &str,
    gs2: &str,
    prefix: &str,
) -> String {
    let mut nonce = "";
    let mut salt = Vec::new();
    let mut iterations = 0;
    for attribute in server_first.split(',') {
        match attribute.split_at(2) {
            ("r=", v) => nonce = v,
            ("s=", v) => salt = BASE64.decode(v).expect("salt"),
            ("i=", v) => iterations = v.parse().expect("iterations"),
            _ => {}
        }
    }
    let salted = salted_password(password.as_bytes(), &salt, iterations);
    let client_key = hmac(&salted, b"Client Key");
    let stored_key: [u8; KEY_BYTES] = Sha256::digest(client_key).into();
    let without_proof = format!("c={},r={prefix}{nonce}", BASE64.encode(gs2));
    let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
    let signature = hmac(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(signature).map(|(k, s)| k ^ s).collect();
    format!("{without_proof},p={}", BASE64.encode(proof))
}

const RFC_SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
const RFC_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const SECRET: &[u8] = b"mock secret of this test cluster";

fn rfc_credential() -> ScramCredential {
    let salt = BASE64.decode(RFC_SALT).expect("salt");
    ScramCredential::from_verifier(&verifier("pencil", &salt, 4096)).expect("verifier parses")
}

fn exchange(client_first: &str, credential: Option<ScramCredential>) -> Result<ServerExchange, ScramError> {
    Ok(ServerExchange::start(ClientFirst::parse(client_first.as_bytes())?, credential, SECRET, "SERVERNONCE"))
}

#[test]
fn rfc_7677_test_vector() {
    let client = ClientFirst::parse(RFC_CLIENT_FIRST.as_bytes()).expect("client-first parses");
    assert_eq!(client.username, "user");
    let server = ServerExchange::start(client, Some(rfc_credential()), SECRET, RFC_SERVER_NONCE);
    assert_eq!(
        server.server_first(),
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let client_final = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                        p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    let done = server.finish(client_final.as_bytes()).expect("the RFC's proof verifies");
    assert_eq!(done.server_final, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    assert_eq!(done.principal, "user");
}

#[test]
fn our_client_and_server_agree_and_a_wrong_password_fails() {
    let server = exchange("n,,n=alice,r=abc", Some(rfc_credential())).expect("starts");
    let good = client_final("pencil", "n=alice,r=abc", server.server_first(), "n,,");
    assert_eq!(server.finish(good.as_bytes()).expect("verifies").principal, "alice");
    let bad = client_final("pencil2", "n=alice,r=abc", server.server_first(), "n,,");
    assert_eq!(server.finish(bad.as_bytes()), Err(ScramError::WrongProof("alice".into())));
}

#[test]
fn a_repeated_client_nonce_is_accepted_as_kafka_does() {
    let server = exchange("n,,n=alice,r=abc", Some(rfc_credential())).expect("starts");
    let old_librdkafka = client_final_prefixed("pencil", "n=alice,r=abc", server.server_first(), "n,,", "abc");
    assert!(old_librdkafka.starts_with("c=biws,r=abcabcSERVERNONCE,"), "{old_librdkafka}");
    assert_eq!(server.finish(old_librdkafka.as_bytes()).expect("verifies").principal, "alice");
    let wrong = client_final_prefixed("pencil2", "n=alice,r=abc", server.server_first(), "n,,", "abc");
    assert_eq!(server.finish(wrong.as_bytes()), Err(ScramError::WrongProof("alice".into())));
    let truncated = client_final_prefixed("pencil", "n=alice,r=abc", "r=abcSERVERNONC,s=AAAA,i=1", "n,,", "");
    assert_eq!(server.finish(truncated.as_bytes()), Err(ScramError::WrongNonce));
}

#[test]
fn verifiers_parse_and_other_passwords_do_not() {
    let c = rfc_credential();
    assert_eq!((c.iterations, BASE64.encode(&c.salt)), (4096, RFC_SALT.to_owned()));
    // A verifier as PostgreSQL 15 writes it (salt of 16 bytes).
    let pg = "SCRAM-SHA-256$4096:X2k4ZGRvUmFZaTlmZmx3NQ==$\
              5Zqx8ZS9vpuWCOmWNyJZJ4vlzWmzdP3ltvShlPGsqmM=:S0pGDUjhnjV3sK4CrD+tC2dH8oGDTl0CaJsLf6H8NWg=";
    assert_eq!(ScramCredential::from_verifier(pg).map(|c| c.salt.len()), Some(16));
    for other in [
        "md5a3556571e93b0d20722ba62be61e8c2d",
        "pencil",
        "",
        "SCRAM-SHA-256$0:W22ZaJ0SNY7soEsUEjb6gQ==$AAAA:AAAA",
        "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$AAAA:AAAA", // keys of the wrong length
        "SCRAM-SHA-256$4096:!!!$5Zqx8ZS9vpuWCOmWNyJZJ4vlzWmzdP3ltvShlPGsqmM=:S0pGDUjhnjV3sK4CrD+tC2dH8oGDTl0CaJsLf6H8NWg=",
        "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==",
        "SCRAM-SHA-256$x:y$z:w",
    ] {
        assert_eq!(ScramCredential::from_verifier(other), None, "{other}");
    }
}

#[test]
fn roles_that_may_not_log_in_have_no_credential() {
    let salt = BASE64.decode(RFC_SALT).expect("salt");
    let v = verifier("pencil", &salt, 4096);
    assert!(ScramCredential::from_role(Some(&v), true, true).is_some());
    assert_eq!(ScramCredential::from_role(Some(&v), false, true), None, "NOLOGIN");
    assert_eq!(ScramCredential::from_role(Some(&v), true, false), None, "VALID UNTIL passed");
    assert_eq!(ScramCredential::from_role(None, true, true), None, "no password");
    assert_eq!(ScramCredential::from_role(Some("md5a3556571e93b0d20722ba62be61e8c2d"), true, true), None);
}

#[test]
fn an_unknown_user_gets_a_stable_mock_salt_and_fails_like_a_wrong_password() {
    let first = exchange("n,,n=nobody,r=abc", None).expect("starts");
    let again = exchange("n,,n=nobody,r=abc", None).expect("starts");
    assert_eq!(first.server_first(), again.server_first(), "same salt and iterations at every attempt");
    assert!(first.server_first().ends_with(",i=4096"));
    let other = exchange("n,,n=somebody,r=abc", None).expect("starts");
    assert_ne!(first.server_first(), other.server_first(), "salts differ per name");
    let attempt = client_final("anything", "n=nobody,r=abc", first.server_first(), "n,,");
    assert_eq!(first.finish(attempt.as_bytes()), Err(ScramError::UnknownUser("nobody".into())));
    // The mock salt has the length of a real one.
    let salt = first.server_first().split(",s=").nth(1).and_then(|s| s.split(',').next()).expect("salt");
    assert_eq!(BASE64.decode(salt).expect("base64").len(), 16);
}

#[test]
fn escaped_user_names_are_decoded() {
    assert_eq!(unescape_saslname("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
    assert_eq!(unescape_saslname("plain").as_deref(), Some("plain"));
    assert_eq!(unescape_saslname("é=3D").as_deref(), Some("é="));
    for bad in ["a=", "a=2", "a=2D", "a,b", "=", "=3"] {
        assert_eq!(unescape_saslname(bad), None, "{bad}");
    }
    let server = exchange("n,,n=app=2Cone=3Dtwo,r=xyz", Some(rfc_credential())).expect("starts");
    assert_eq!(server.username(), "app,one=two");
    let good = client_final("pencil", "n=app=2Cone=3Dtwo,r=xyz", server.server_first(), "n,,");
    assert_eq!(server.finish(good.as_bytes()).expect("verifies").principal, "app,one=two");
}

#[test]
fn an_authorization_id_must_name_the_user() {
    let server = exchange("n,a=alice,n=alice,r=abc", Some(rfc_credential())).expect("same name is fine");
    let good = client_final("pencil", "n=alice,r=abc", server.server_first(), "n,a=alice,");
    assert!(server.finish(good.as_bytes()).is_ok());
    // The channel binding echoed must be this GS2 header, not the plain one.
    let mismatched = client_final("pencil", "n=alice,r=abc", server.server_first(), "n,,");
    assert_eq!(server.finish(mismatched.as_bytes()), Err(ScramError::ChannelBindingMismatch));
    assert!(matches!(exchange("n,a=root,n=alice,r=abc", None), Err(ScramError::AuthorizationId { .. })));
}

#[test]
fn hostile_client_first_messages_are_refused() {
    let cases: &[(&[u8], ScramError)] = &[
        (b"y,,n=user,r=abc", ScramError::ChannelBinding),
        (b"p=tls-unique,,n=user,r=abc", ScramError::ChannelBinding),
        (b"x,,n=user,r=abc", ScramError::BadClientFirst("bad channel-binding flag")),
        (b"n,,m=ext,n=user,r=abc", ScramError::MandatoryExtension),
        (b"n,,n=user,r=abc,junk", ScramError::BadClientFirst("bad extension")),
        (b"n,,n=,r=abc", ScramError::BadClientFirst("bad user name")),
        (b"n,,n=us=er,r=abc", ScramError::BadClientFirst("bad user name")),
        (b"n,,n=us\0er,r=abc", ScramError::BadClientFirst("bad user name")),
        (b"n,,n=user,r=", ScramError::BadClientFirst("bad nonce")),
        (b"n,,n=user,r=a\x7fb", ScramError::BadClientFirst("bad nonce")),
        (b"n,,n=user", ScramError::BadClientFirst("bad nonce")),
        (b"n,,r=abc,n=user", ScramError::BadClientFirst("bad user name")),
        (b"n,,", ScramError::BadClientFirst("bad user name")),
        (b"n,", ScramError::BadClientFirst("no GS2 header")),
        (b"", ScramError::BadClientFirst("no GS2 header")),
        (b"n,b=x,n=user,r=abc", ScramError::BadClientFirst("bad authorization id")),
        (b"n,,n=us\xffer,r=abc", ScramError::BadClientFirst("not UTF-8")),
    ];
    for (message, expected) in cases {
        assert_eq!(ClientFirst::parse(message).as_ref(), Err(expected), "{}", String::from_utf8_lossy(message));
    }
    // Extensions Kafka clients may add are ignored, but for a delegation token's (KIP-48).
    assert!(!ClientFirst::parse(b"n,,n=user,r=abc,traceid=42,tokenauth=false").expect("parses").token_auth);
    assert!(ClientFirst::parse(b"n,,n=tokenid,r=abc,tokenauth=TRUE").expect("parses").token_auth);
    assert!(ClientFirst::parse(b"n,,n=tokenid,r=abc,tokenauth=true").expect("parses").token_auth);
    let huge = format!("n,,n=user,r={}", "a".repeat(MESSAGE_BYTES_MAX));
    assert_eq!(ClientFirst::parse(huge.as_bytes()), Err(ScramError::Oversize(huge.len())));
}

#[test]
fn hostile_client_final_messages_are_refused() {
    let server = exchange("n,,n=user,r=abc", Some(rfc_credential())).expect("starts");
    let good = client_final("pencil", "n=user,r=abc", server.server_first(), "n,,");
    let nonce = server.server_first().split(',').next().expect("r=").to_owned();
    let proof = good.rsplit_once(",p=").expect("proof").1.to_owned();
    let cases: Vec<(String, ScramError)> = vec![
        (format!("c=biws,r=abcOTHER,p={proof}"), ScramError::WrongNonce),
        (format!("c=biws,r=abc,p={proof}"), ScramError::WrongNonce),
        (format!("c=eSws,{nonce},p={proof}"), ScramError::ChannelBindingMismatch), // "y,,"
        (format!("c=biws,{nonce},p=!!notbase64"), ScramError::BadClientFinal("proof is not base64")),
        (format!("c=biws,{nonce},p=AAAA"), ScramError::BadClientFinal("proof of the wrong length")),
        (format!("c=!!,{nonce},p={proof}"), ScramError::BadClientFinal("channel binding is not base64")),
        (format!("{nonce},p={proof}"), ScramError::BadClientFinal("no channel binding")),
        (format!("c=biws,p={proof}"), ScramError::BadClientFinal("no nonce")),
        (format!("c=biws,{nonce}"), ScramError::BadClientFinal("no proof")),
        (format!("c=biws,{nonce},junk,p={proof}"), ScramError::BadClientFinal("bad extension")),
        (String::new(), ScramError::BadClientFinal("no proof")),
        ("c=biws,r=\u{0}".repeat(1000), ScramError::Oversize(10_000)),
    ];
    for (message, expected) in cases {
        assert_eq!(server.finish(message.as_bytes()), Err(expected), "{message:.80}");
    }
    // A final message made for another exchange (another server nonce) is refused.
    let fresh = ServerExchange::start(
        ClientFirst::parse(b"n,,n=user,r=abc").expect("parses"),
        Some(rfc_credential()),
        SECRET,
        "OTHERNONCE",
    );
    assert_eq!(fresh.finish(good.as_bytes()), Err(ScramError::WrongNonce));
    assert!(server.finish(&[0xff, 0xfe]).is_err());
    assert!(server.finish(good.as_bytes()).is_ok());
}

#[test]
fn credentials_never_show_their_keys() {
    let shown = format!("{:?}", rfc_credential());
    assert!(!shown.contains("stored") && !shown.contains("salt"), "{shown}");
}

#[test]
fn a_salted_password_makes_the_verifier_postgres_would_store() {
    let salt = BASE64.decode(RFC_SALT).expect("salt");
    let salted = salted_password(b"pencil", &salt, 4096);
    let credential = ScramCredential::from_salted_password(&salt, 4096, &salted).expect("a credential");
    assert_eq!(credential.to_verifier(), verifier("pencil", &salt, 4096));
    assert_eq!(ScramCredential::from_verifier(&credential.to_verifier()), Some(credential.clone()));
    assert!(credential.matches_password(b"pencil") && !credential.matches_password(b"pen"));
    // A SHA-512 digest's length, an empty salt, no iterations: no SCRAM-SHA-256 verifier.
    assert_eq!(ScramCredential::from_salted_password(&salt, 4096, &[0; 64]), None);
    assert_eq!(ScramCredential::from_salted_password(&[], 4096, &salted), None);
    assert_eq!(ScramCredential::from_salted_password(&salt, 0, &salted), None);
}
