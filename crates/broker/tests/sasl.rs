//! SASL/SCRAM-SHA-256 over the wire: a broker with `kafgres.authentication =
//! scram-sha-256`, credentials in a MemoryCatalog computed here from a
//! password (as PostgreSQL computes its verifiers), and a SCRAM client
//! written in this file.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes};
use common::scram::*;
use common::*;
use kafgres_broker::sasl::{Authentication, AUTHENTICATION_FAILED_MESSAGE};
use kafgres_broker::{Broker, BrokerConfig, MemoryCatalog};
use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

// ---------------------------------------------------------------- harness

async fn scram_broker() -> TestBroker {
    // Failed logins are held 1 ms (doubling per failure): these tests fail many.
    scram_broker_with_delay(1).await
}

async fn scram_broker_with_delay(failed_authentication_delay_ms: u64) -> TestBroker {
    scram_broker_with(|config| config.failed_authentication_delay_ms = failed_authentication_delay_ms).await
}

async fn scram_broker_with(tweak: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = Arc::new(MemoryCatalog::default());
    catalog.set_scram_credential("alice", Some(scram_credential("pencil", b"0123456789abcdef")));
    catalog.set_scram_credential("app,one=two", Some(scram_credential("s3cret", b"fedcba9876543210")));
    let mut config = BrokerConfig {
        authentication: Authentication::scram_sha_256_random(),
        failed_authentication_delay_ms: 1,
        ..BrokerConfig::for_tests(dir.path().to_path_buf())
    };
    tweak(&mut config);
    let broker = Broker::start(config, catalog.clone(), catalog.snapshot()).await.expect("broker starts");
    TestBroker { dir, catalog, broker }
}

async fn handshake(client: &mut Client, version: i16, mechanism: &str) -> SaslHandshakeResponse {
    let request = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into()));
    client.call(version, &request).await
}

async fn authenticate(client: &mut Client, version: i16, token: &str) -> SaslAuthenticateResponse {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token.to_owned()));
    client.call(version, &request).await
}

/// The whole exchange with SaslAuthenticate at `version`; the final answer.
async fn login(client: &mut Client, version: i16, user: &str, password: &str) -> SaslAuthenticateResponse {
    let response = handshake(client, 1, "SCRAM-SHA-256").await;
    assert_eq!(response.error_code, 0);
    assert_eq!(response.mechanisms, vec![StrBytes::from_static_str("SCRAM-SHA-256")]);
    let (mut scram, first) = ScramClient::new(user, password);
    let server_first = authenticate(client, version, &first).await;
    assert_eq!(server_first.error_code, 0, "{:?}", server_first.error_message);
    let server_first = String::from_utf8(server_first.auth_bytes.to_vec()).expect("utf-8");
    let (_, _, last) = scram.respond(&server_first);
    let response = authenticate(client, version, &last).await;
    if response.error_code == 0 {
        scram.verify(std::str::from_utf8(&response.auth_bytes).expect("utf-8"));
    }
    response
}

async fn metadata_works(client: &mut Client) {
    let response = client.call(12, &metadata_request(None, false)).await;
    assert_eq!(response.brokers.len(), 1);
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn a_role_logs_in_with_its_password_and_then_is_served() {
    let broker = scram_broker().await;
    let mut client = broker.client().await;
    // ApiVersions is answered before authentication, and lists both SASL APIs.
    let versions = client.call(3, &ApiVersionsRequest::default()).await;
    let range = |key: ApiKey| {
        versions.api_keys.iter().find(|k| k.api_key == key as i16).map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(range(ApiKey::SaslHandshake), Some((0, 1)));
    assert_eq!(range(ApiKey::SaslAuthenticate), Some((0, 2)));

    let done = login(&mut client, 2, "alice", "pencil").await;
    assert_eq!((done.error_code, done.session_lifetime_ms), (0, 0));
    assert_eq!(done.error_message, None);
    metadata_works(&mut client).await;
    let listed = broker.broker.context().config.metrics.connections.snapshot();
    assert!(listed.iter().any(|c| c.principal.as_deref() == Some("alice")), "{listed:?}");

    // Once authenticated, SASL requests are out of place (Kafka's answer).
    assert_eq!(handshake(&mut client, 1, "SCRAM-SHA-256").await.error_code, error_code::ILLEGAL_SASL_STATE);
    let again = authenticate(&mut client, 2, "n,,n=alice,r=x").await;
    assert_eq!(again.error_code, error_code::ILLEGAL_SASL_STATE);
    metadata_works(&mut client).await;
}

/// KIP-368 with `connections.max.reauth.ms`: the session's lifetime is in
/// SaslAuthenticate; a re-authentication before its end renews it, as the
/// same role and mechanism only; a request after its end closes the
/// connection.
#[tokio::test]
async fn sessions_end_unless_re_authenticated_as_the_same_role() {
    const LIFETIME_MS: u64 = 800;
    let broker = scram_broker_with(|config| config.connections_max_reauth_ms = LIFETIME_MS).await;
    let mut client = broker.client().await;
    let done = login(&mut client, 2, "alice", "pencil").await;
    assert_eq!((done.error_code, done.session_lifetime_ms), (0, LIFETIME_MS as i64));
    metadata_works(&mut client).await;
    // Renewed before the end, twice across what the first session allowed.
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(LIFETIME_MS / 2)).await;
        let renewed = login(&mut client, 2, "alice", "pencil").await;
        assert_eq!((renewed.error_code, renewed.session_lifetime_ms), (0, LIFETIME_MS as i64));
        metadata_works(&mut client).await;
    }

    // Another role is refused, in Kafka's words, and the connection closes.
    let switched = login(&mut client, 2, "app,one=two", "s3cret").await;
    assert_eq!(switched.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        switched.error_message.as_deref(),
        Some("Cannot change principals during re-authentication from User:alice: User:app,one=two")
    );
    assert!(client.try_call(12, &metadata_request(None, false)).await.is_err(), "closed");

    // Another mechanism is refused too.
    let mut client = broker.client().await;
    assert_eq!(login(&mut client, 2, "alice", "pencil").await.error_code, 0);
    assert_eq!(handshake(&mut client, 1, "PLAIN").await.error_code, error_code::UNSUPPORTED_SASL_MECHANISM);
    assert!(client.try_call(12, &metadata_request(None, false)).await.is_err(), "closed");

    // A session left to end: its next request closes the connection.
    let mut client = broker.client().await;
    assert_eq!(login(&mut client, 2, "alice", "pencil").await.error_code, 0);
    tokio::time::sleep(Duration::from_millis(LIFETIME_MS + 200)).await;
    assert!(client.try_call(12, &metadata_request(None, false)).await.is_err(), "the session ended");
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn every_sasl_authenticate_version_works_and_escaped_names_are_decoded() {
    let broker = scram_broker().await;
    for version in 0..=2 {
        let mut client = broker.client().await;
        let done = login(&mut client, version, "app,one=two", "s3cret").await;
        assert_eq!(done.error_code, 0, "v{version}: {:?}", done.error_message);
        metadata_works(&mut client).await;
    }
}

#[tokio::test]
async fn a_wrong_password_and_an_unknown_user_fail_alike() {
    let broker = scram_broker().await;
    let mut answers = Vec::new();
    for (user, password) in [("alice", "pencil2"), ("mallory", "pencil")] {
        let mut client = broker.client().await;
        let failed = login(&mut client, 2, user, password).await;
        assert_eq!(failed.error_code, error_code::SASL_AUTHENTICATION_FAILED, "{user}");
        assert_eq!(failed.error_message.as_deref(), Some(AUTHENTICATION_FAILED_MESSAGE), "{user}");
        assert!(failed.auth_bytes.is_empty());
        client.expect_closed().await;
        answers.push((failed.error_code, failed.error_message));
    }
    assert_eq!(answers[0], answers[1]);

    // The unknown user's salt and iterations look real and do not change
    // between attempts (a random salt each time would give it away).
    let mut seen = Vec::new();
    for _ in 0..2 {
        let mut client = broker.client().await;
        assert_eq!(handshake(&mut client, 1, "SCRAM-SHA-256").await.error_code, 0);
        let (mut scram, first) = ScramClient::new("mallory", "x");
        let server_first = authenticate(&mut client, 2, &first).await;
        assert_eq!(server_first.error_code, 0);
        let (salt, iterations, _) = scram.respond(std::str::from_utf8(&server_first.auth_bytes).expect("utf-8"));
        assert_eq!((salt.len(), iterations), (16, 4096));
        seen.push(salt);
    }
    assert_eq!(seen[0], seen[1]);
}

#[tokio::test]
async fn a_password_change_applies_to_the_next_connection() {
    let broker = scram_broker().await;
    let mut before = broker.client().await;
    assert_eq!(login(&mut before, 2, "alice", "pencil").await.error_code, 0);
    broker.catalog.set_scram_credential("alice", Some(scram_credential("new-pencil", b"another salt 123")));
    let mut old = broker.client().await;
    assert_eq!(login(&mut old, 2, "alice", "pencil").await.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    let mut new = broker.client().await;
    assert_eq!(login(&mut new, 2, "alice", "new-pencil").await.error_code, 0);
    // A connection authenticated before the change stays (no re-authentication).
    metadata_works(&mut before).await;
    // A dropped role (or one that lost LOGIN) cannot authenticate.
    broker.catalog.set_scram_credential("alice", None);
    let mut dropped = broker.client().await;
    assert_eq!(login(&mut dropped, 2, "alice", "new-pencil").await.error_code, error_code::SASL_AUTHENTICATION_FAILED);
}

#[tokio::test]
async fn requests_before_authentication_close_the_connection() {
    let broker = scram_broker().await;
    // Before the handshake.
    let mut client = broker.client().await;
    client.send(12, &metadata_request(None, false)).await;
    client.expect_closed().await;
    // Between the handshake and the end of the exchange.
    let mut client = broker.client().await;
    assert_eq!(handshake(&mut client, 1, "SCRAM-SHA-256").await.error_code, 0);
    client.send(3, &ApiVersionsRequest::default()).await;
    client.expect_closed().await;
    let mut client = broker.client().await;
    assert_eq!(handshake(&mut client, 1, "SCRAM-SHA-256").await.error_code, 0);
    let (_, first) = ScramClient::new("alice", "pencil");
    assert_eq!(authenticate(&mut client, 2, &first).await.error_code, 0);
    client.send(12, &metadata_request(None, false)).await;
    client.expect_closed().await;
    // SaslAuthenticate before the handshake.
    let mut client = broker.client().await;
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"n,,n=alice,r=x"));
    client.send(2, &request).await;
    client.expect_closed().await;
    // The frame limit before authentication is 512 KiB, not kafgres.max_frame_bytes.
    let mut client = broker.client().await;
    client.send_raw(&(1i32 << 20).to_be_bytes()).await;
    client.expect_closed().await;
}

#[tokio::test]
async fn an_unsupported_mechanism_is_refused_with_the_enabled_ones() {
    let broker = scram_broker().await;
    for mechanism in ["PLAIN", "SCRAM-SHA-512", "scram-sha-256", ""] {
        let mut client = broker.client().await;
        let response = handshake(&mut client, 1, mechanism).await;
        assert_eq!(response.error_code, error_code::UNSUPPORTED_SASL_MECHANISM, "{mechanism}");
        assert_eq!(response.mechanisms, vec![StrBytes::from_static_str("SCRAM-SHA-256")]);
        client.expect_closed().await;
    }
}

#[tokio::test]
async fn hostile_tokens_fail_authentication_and_close() {
    let broker = scram_broker().await;
    let oversize = format!("n,,n=alice,r={}", "a".repeat(10_000));
    for first in ["", "y,,n=alice,r=abc", "n,,n=al=ice,r=abc", "garbage", oversize.as_str(), "n,,m=x,n=alice,r=a"] {
        let mut client = broker.client().await;
        assert_eq!(handshake(&mut client, 1, "SCRAM-SHA-256").await.error_code, 0);
        let failed = authenticate(&mut client, 2, first).await;
        assert_eq!(failed.error_code, error_code::SASL_AUTHENTICATION_FAILED, "{first:.40}");
        assert_eq!(failed.error_message.as_deref(), Some(AUTHENTICATION_FAILED_MESSAGE));
        client.expect_closed().await;
    }
    // A final message with another nonce, or a bad proof.
    let tampers: [fn(String) -> String; 2] =
        [|m| m.replace("c=biws,r=fyko", "c=biws,r=FYKO"), |m| m.replacen(",p=", ",p=AAAA", 1)];
    for tamper in tampers {
        let mut client = broker.client().await;
        assert_eq!(handshake(&mut client, 1, "SCRAM-SHA-256").await.error_code, 0);
        let (mut scram, first) = ScramClient::new("alice", "pencil");
        let server_first = authenticate(&mut client, 2, &first).await;
        let (_, _, last) = scram.respond(std::str::from_utf8(&server_first.auth_bytes).expect("utf-8"));
        let failed = authenticate(&mut client, 2, &tamper(last)).await;
        assert_eq!(failed.error_code, error_code::SASL_AUTHENTICATION_FAILED);
        client.expect_closed().await;
    }
}

/// SaslHandshake v0: the tokens follow as bare length-prefixed frames.
#[tokio::test]
async fn a_v0_handshake_exchanges_bare_tokens() {
    let broker = scram_broker().await;
    let mut client = broker.client().await;
    let response = handshake(&mut client, 0, "SCRAM-SHA-256").await;
    assert_eq!(response.error_code, 0);
    let (mut scram, first) = ScramClient::new("alice", "pencil");
    let server_first = bare_token(&mut client, &first).await;
    let (_, _, last) = scram.respond(std::str::from_utf8(&server_first).expect("utf-8"));
    let server_final = bare_token(&mut client, &last).await;
    scram.verify(std::str::from_utf8(&server_final).expect("utf-8"));
    metadata_works(&mut client).await;

    // A bad proof in v0 has no error answer: the connection closes.
    let mut client = broker.client().await;
    assert_eq!(handshake(&mut client, 0, "SCRAM-SHA-256").await.error_code, 0);
    let (mut scram, first) = ScramClient::new("alice", "wrong");
    let server_first = bare_token(&mut client, &first).await;
    let (_, _, last) = scram.respond(std::str::from_utf8(&server_first).expect("utf-8"));
    let mut frame = Vec::new();
    frame.put_i32(last.len() as i32);
    frame.put_slice(last.as_bytes());
    client.send_raw(&frame).await;
    client.expect_closed().await;
}

async fn bare_token(client: &mut Client, token: &str) -> Bytes {
    let mut frame = Vec::new();
    frame.put_i32(token.len() as i32);
    frame.put_slice(token.as_bytes());
    client.send_raw(&frame).await;
    client.read_frame().await
}

#[tokio::test]
async fn without_authentication_sasl_requests_are_in_an_illegal_state() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let response = handshake(&mut client, 1, "SCRAM-SHA-256").await;
    assert_eq!(response.error_code, error_code::ILLEGAL_SASL_STATE);
    assert!(response.mechanisms.is_empty());
    let response = authenticate(&mut client, 1, "n,,n=alice,r=abc").await;
    assert_eq!(response.error_code, error_code::ILLEGAL_SASL_STATE);
    metadata_works(&mut client).await;
    // Nothing gates the first request.
    let mut client = broker.client().await;
    metadata_works(&mut client).await;
}

#[tokio::test]
async fn failed_logins_are_answered_later_and_later() {
    // Kafka's connection.failed.authentication.delay.ms, doubled for every
    // failure of the address or the role within a minute.
    let broker = scram_broker_with_delay(100).await;
    let mut took = Vec::new();
    for _ in 0..3 {
        let mut client = broker.client().await;
        let started = std::time::Instant::now();
        let response = login(&mut client, 2, "alice", "wrong").await;
        took.push(started.elapsed());
        assert_eq!(response.error_code, error_code::SASL_AUTHENTICATION_FAILED);
        client.expect_closed().await;
    }
    let ms: Vec<u128> = took.iter().map(|d| d.as_millis()).collect();
    assert!(ms[0] >= 100 && ms[1] >= 200 && ms[2] >= 400, "answered after {ms:?} ms");
    // The right password still logs in (a success is never held).
    let mut client = broker.client().await;
    assert_eq!(login(&mut client, 2, "alice", "pencil").await.error_code, 0);
    metadata_works(&mut client).await;
}

// ------------------------------------------------- user SCRAM credentials (KIP-554)

fn upsertion(
    user: &str,
    password: &str,
    mechanism: i8,
) -> alter_user_scram_credentials_request::ScramCredentialUpsertion {
    let salt = b"salt of the test";
    alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
        .with_name(StrBytes::from_string(user.into()))
        .with_mechanism(mechanism)
        .with_iterations(4096)
        .with_salt(Bytes::from_static(salt))
        .with_salted_password(Bytes::copy_from_slice(&salted_password(password, salt, 4096)))
}

fn deletion(user: &str) -> alter_user_scram_credentials_request::ScramCredentialDeletion {
    alter_user_scram_credentials_request::ScramCredentialDeletion::default()
        .with_name(StrBytes::from_string(user.into()))
        .with_mechanism(1)
}

async fn alter_credentials(
    client: &mut Client,
    deletions: Vec<alter_user_scram_credentials_request::ScramCredentialDeletion>,
    upsertions: Vec<alter_user_scram_credentials_request::ScramCredentialUpsertion>,
) -> Vec<(String, i16)> {
    let request = AlterUserScramCredentialsRequest::default().with_deletions(deletions).with_upsertions(upsertions);
    let response = client.call(0, &request).await;
    let mut results: Vec<(String, i16)> = response.results.iter().map(|r| (r.user.to_string(), r.error_code)).collect();
    results.sort();
    results
}

#[tokio::test]
async fn user_scram_credentials_are_the_roles_passwords() {
    let broker = scram_broker().await;
    let identity = |role: &str, superuser: bool| kafgres_broker::acl::Identity {
        role: role.into(),
        superuser,
        ..Default::default()
    };
    broker.catalog.set_identity(identity("alice", true));
    broker.catalog.set_identity(identity("bob", false)); // a role without a password
    let mut admin = broker.client().await;
    assert_eq!(login(&mut admin, 2, "alice", "pencil").await.error_code, 0);

    // A superuser gives bob a password: a salted one, computed by the client.
    let set = alter_credentials(&mut admin, vec![], vec![upsertion("bob", "bob-secret", 1)]).await;
    assert_eq!(set, [("bob".to_owned(), error_code::NONE)]);
    let mut bob = broker.client().await;
    assert_eq!(login(&mut bob, 2, "bob", "bob-secret").await.error_code, 0);
    let described = admin
        .call(
            0,
            &DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                describe_user_scram_credentials_request::UserName::default()
                    .with_name(StrBytes::from_static_str("bob")),
                describe_user_scram_credentials_request::UserName::default()
                    .with_name(StrBytes::from_static_str("nobody")),
            ])),
        )
        .await;
    type Described = (String, i16, Vec<(i8, i32)>);
    let found: Vec<Described> = described
        .results
        .iter()
        .map(|r| {
            (r.user.to_string(), r.error_code, r.credential_infos.iter().map(|c| (c.mechanism, c.iterations)).collect())
        })
        .collect();
    assert_eq!(
        found,
        [("bob".to_owned(), 0, vec![(1, 4096)]), ("nobody".to_owned(), error_code::RESOURCE_NOT_FOUND, vec![])]
    );

    // bob may change his own password, not alice's.
    let own = alter_credentials(&mut bob, vec![], vec![upsertion("bob", "bob-2", 1), upsertion("alice", "x", 1)]).await;
    assert_eq!(
        own,
        [("alice".to_owned(), error_code::CLUSTER_AUTHORIZATION_FAILED), ("bob".to_owned(), error_code::NONE)]
    );
    let mut alice_again = broker.client().await;
    assert_eq!(login(&mut alice_again, 2, "alice", "pencil").await.error_code, 0);
    let mut bob_again = broker.client().await;
    assert_eq!(login(&mut bob_again, 2, "bob", "bob-2").await.error_code, 0);

    // No role, SCRAM-SHA-512, a salted password of the wrong size: refused, nothing stored.
    let mut short = upsertion("bob", "y", 1);
    short.salted_password = Bytes::from_static(b"too short");
    let refused =
        alter_credentials(&mut admin, vec![], vec![upsertion("nobody", "x", 1), upsertion("carol", "x", 2)]).await;
    assert_eq!(
        refused,
        [
            ("carol".to_owned(), error_code::UNSUPPORTED_SASL_MECHANISM),
            ("nobody".to_owned(), error_code::RESOURCE_NOT_FOUND),
        ]
    );
    assert_eq!(alter_credentials(&mut admin, vec![], vec![short]).await[0].1, error_code::UNACCEPTABLE_CREDENTIAL);

    // Deleting bob's credential removes his password: he can no longer log in.
    let deleted = alter_credentials(&mut admin, vec![deletion("bob")], vec![]).await;
    assert_eq!(deleted, [("bob".to_owned(), error_code::NONE)]);
    let mut gone = broker.client().await;
    assert_eq!(login(&mut gone, 2, "bob", "bob-2").await.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    let again = alter_credentials(&mut admin, vec![deletion("bob")], vec![]).await;
    assert_eq!(again, [("bob".to_owned(), error_code::RESOURCE_NOT_FOUND)]);
}
