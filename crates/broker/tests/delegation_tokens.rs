//! Delegation tokens (KIP-48) over the wire: a broker with SCRAM-SHA-256
//! authentication, the authorizer on and a token secret, its roles in a
//! MemoryCatalog; the token APIs with Kafka 4.4's error codes, and SCRAM
//! logins with `tokenauth=true` that act as the token's owner.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use bytes::Bytes;
use common::scram::ScramClient;
use common::*;
use hmac::{Hmac, KeyInit, Mac};
use kafgres_broker::acl::{AclBinding, Identity, Operation, PatternType, Permission, ResourceType};
use kafgres_broker::delegation::TokenSettings;
use kafgres_broker::sasl::{Authentication, AUTHENTICATION_FAILED_MESSAGE};
use kafgres_broker::{Broker, BrokerConfig, MemoryCatalog};
use kafgres_wire::error_code;
use kafka_protocol::messages::create_delegation_token_request::CreatableRenewers;
use kafka_protocol::messages::describe_delegation_token_request::DescribeDelegationTokenOwner;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const SECRET: &str = "the-token-secret";
const EXPIRY_TIME_MS: i64 = 60_000;
const MAX_LIFETIME_MS: i64 = 600_000;

fn settings(secret: Option<&str>) -> TokenSettings {
    TokenSettings {
        secret_key: secret.map(str::to_owned),
        max_lifetime_ms: MAX_LIFETIME_MS,
        expiry_time_ms: EXPIRY_TIME_MS,
    }
}

/// A broker whose roles are alice, bob, carol and eve (passwords
/// `<role>-pw`) and the superuser admin.
async fn token_broker(secret: Option<&str>) -> TestBroker {
    token_broker_with(secret, |_| {}).await
}

async fn token_broker_with(secret: Option<&str>, tweak: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
    let dir = tempfile::tempdir().expect("tempdir");
    let catalog = Arc::new(MemoryCatalog::default());
    for (i, role) in ["alice", "bob", "carol", "eve", "admin"].iter().enumerate() {
        let salt = format!("salt-of-role-{i:04}");
        catalog.set_scram_credential(role, Some(scram_credential(&format!("{role}-pw"), salt.as_bytes())));
    }
    catalog.set_identity(Identity { role: "admin".into(), superuser: true, ..Identity::default() });
    start(dir, catalog, secret, tweak).await
}

async fn start(
    dir: tempfile::TempDir,
    catalog: Arc<MemoryCatalog>,
    secret: Option<&str>,
    tweak: impl FnOnce(&mut BrokerConfig),
) -> TestBroker {
    let mut config = BrokerConfig {
        authentication: Authentication::scram_sha_256_random(),
        failed_authentication_delay_ms: 1,
        authorizer_enabled: true,
        delegation_tokens: settings(secret),
        ..BrokerConfig::for_tests(dir.path().to_path_buf())
    };
    tweak(&mut config);
    let broker = Broker::start(config, catalog.clone(), catalog.snapshot()).await.expect("broker starts");
    TestBroker { dir, catalog, broker }
}

/// A SCRAM-SHA-256 exchange; the first answer that failed, else the last.
async fn scram_login(client: &mut Client, user: &str, password: &str, extensions: &str) -> SaslAuthenticateResponse {
    let handshake = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256"));
    assert_eq!(client.call(1, &handshake).await.error_code, 0);
    let (mut scram, first) = ScramClient::with_extensions(user, password, extensions);
    let authenticate = |token: String| SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let server_first = client.call(2, &authenticate(first)).await;
    if server_first.error_code != 0 {
        return server_first;
    }
    let (_, _, last) = scram.respond(std::str::from_utf8(&server_first.auth_bytes).expect("utf-8"));
    let done = client.call(2, &authenticate(last)).await;
    if done.error_code == 0 {
        scram.verify(std::str::from_utf8(&done.auth_bytes).expect("utf-8"));
    }
    done
}

async fn as_role(broker: &TestBroker, role: &str) -> Client {
    let mut client = broker.client().await;
    let done = scram_login(&mut client, role, &format!("{role}-pw"), "").await;
    assert_eq!(done.error_code, 0, "{role} logs in: {:?}", done.error_message);
    client
}

/// A connection logged in with a token (its id and base64 HMAC).
async fn with_token(broker: &TestBroker, token_id: &str, hmac: &[u8]) -> (Client, SaslAuthenticateResponse) {
    let mut client = broker.client().await;
    let done = scram_login(&mut client, token_id, &BASE64.encode(hmac), ",tokenauth=true").await;
    (client, done)
}

fn user(kind: &str, name: &str) -> (StrBytes, StrBytes) {
    (StrBytes::from_string(kind.into()), StrBytes::from_string(name.into()))
}

fn create(owner: Option<&str>, renewers: &[(&str, &str)], max_lifetime_ms: i64) -> CreateDelegationTokenRequest {
    let renewers = renewers
        .iter()
        .map(|(kind, name)| {
            let (kind, name) = user(kind, name);
            CreatableRenewers::default().with_principal_type(kind).with_principal_name(name)
        })
        .collect();
    // No owner: the fields' defaults (empty, which v1 and v2 carry implicitly).
    let (owner_type, owner_name) = owner.map_or_else(Default::default, |o| user("User", o));
    CreateDelegationTokenRequest::default()
        .with_owner_principal_type(Some(owner_type))
        .with_owner_principal_name(Some(owner_name))
        .with_renewers(renewers)
        .with_max_lifetime_ms(max_lifetime_ms)
}

fn renew(hmac: &[u8], period_ms: i64) -> RenewDelegationTokenRequest {
    RenewDelegationTokenRequest::default().with_hmac(Bytes::copy_from_slice(hmac)).with_renew_period_ms(period_ms)
}

fn expire(hmac: &[u8], period_ms: i64) -> ExpireDelegationTokenRequest {
    ExpireDelegationTokenRequest::default()
        .with_hmac(Bytes::copy_from_slice(hmac))
        .with_expiry_time_period_ms(period_ms)
}

fn describe(owners: Option<&[&str]>) -> DescribeDelegationTokenRequest {
    DescribeDelegationTokenRequest::default().with_owners(owners.map(|owners| {
        owners
            .iter()
            .map(|o| {
                let (kind, name) = user("User", o);
                DescribeDelegationTokenOwner::default().with_principal_type(kind).with_principal_name(name)
            })
            .collect()
    }))
}

fn described_ids(response: &DescribeDelegationTokenResponse) -> Vec<String> {
    response.tokens.iter().map(|t| t.token_id.to_string()).collect()
}

/// Kafka's HMAC of a token: HmacSHA512 of its id under the secret.
fn kafka_hmac(token_id: &str) -> Vec<u8> {
    let mut mac = <Hmac<sha2::Sha512> as KeyInit>::new_from_slice(SECRET.as_bytes()).expect("any key length");
    mac.update(token_id.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

fn allow(principal: &str, resource_type: ResourceType, name: &str, operation: Operation) -> AclBinding {
    AclBinding {
        resource_type,
        resource_name: name.into(),
        pattern_type: PatternType::Literal,
        principal: format!("User:{principal}"),
        host: "*".into(),
        operation,
        permission: Permission::Allow,
    }
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn without_a_secret_every_token_api_answers_disabled() {
    let broker = token_broker(None).await;
    let mut alice = as_role(&broker, "alice").await;
    let created = alice.call(3, &create(None, &[], -1)).await;
    assert_eq!(created.error_code, error_code::DELEGATION_TOKEN_AUTH_DISABLED);
    assert_eq!((created.principal_name.as_str(), created.token_requester_principal_name.as_str()), ("alice", "alice"));
    assert_eq!(alice.call(2, &renew(b"hmac", -1)).await.error_code, error_code::DELEGATION_TOKEN_AUTH_DISABLED);
    assert_eq!(alice.call(2, &expire(b"hmac", -1)).await.error_code, error_code::DELEGATION_TOKEN_AUTH_DISABLED);
    assert_eq!(alice.call(3, &describe(None)).await.error_code, error_code::DELEGATION_TOKEN_AUTH_DISABLED);
    // And a token login fails like an unknown token's.
    let (_, done) = with_token(&broker, "some-token-id", b"hmac").await;
    assert_eq!(done.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn create_describe_renew_and_expire_with_kafkas_rules_and_codes() {
    let broker = token_broker(Some(SECRET)).await;
    let mut alice = as_role(&broker, "alice").await;
    let created = alice.call(3, &create(None, &[("User", "bob")], -1)).await;
    assert_eq!(created.error_code, 0);
    assert_eq!((created.principal_type.as_str(), created.principal_name.as_str()), ("User", "alice"));
    assert_eq!(created.token_requester_principal_name.as_str(), "alice");
    assert_eq!(created.expiry_timestamp_ms, created.issue_timestamp_ms + EXPIRY_TIME_MS);
    assert_eq!(created.max_timestamp_ms, created.issue_timestamp_ms + MAX_LIFETIME_MS);
    let id = created.token_id.to_string();
    assert_eq!(id.len(), 22, "a base64 UUID, as Kafka's: {id}");
    assert_eq!(created.hmac.to_vec(), kafka_hmac(&id));
    let hmac = created.hmac.to_vec();
    let stored = broker.catalog.delegation_tokens();
    assert_eq!(stored.len(), 1);
    assert_eq!((stored[0].owner.as_str(), stored[0].renewers.clone()), ("alice", vec!["bob".to_owned()]));

    // A shorter lifetime caps both timestamps; a longer one is cut to the setting.
    let short = alice.call(2, &create(None, &[], 30_000)).await;
    assert_eq!(
        (short.max_timestamp_ms, short.expiry_timestamp_ms),
        (short.issue_timestamp_ms + 30_000, short.issue_timestamp_ms + 30_000)
    );
    let long = alice.call(1, &create(None, &[], MAX_LIFETIME_MS * 10)).await;
    assert_eq!(long.max_timestamp_ms, long.issue_timestamp_ms + MAX_LIFETIME_MS);

    // Describe: null owners is every visible token, an empty list none.
    let all = alice.call(3, &describe(None)).await;
    assert_eq!(all.error_code, 0);
    assert_eq!(all.tokens.len(), 3);
    let token = all.tokens.iter().find(|t| t.token_id.as_str() == id).expect("described");
    assert_eq!(token.hmac.to_vec(), hmac);
    assert_eq!(token.renewers.iter().map(|r| r.principal_name.to_string()).collect::<Vec<_>>(), vec!["bob"]);
    assert_eq!(token.token_requester_principal_name.as_str(), "alice");
    assert_eq!(token.expiry_timestamp, created.expiry_timestamp_ms);
    for version in 1..=2 {
        let earlier = alice.call(version, &describe(None)).await;
        assert_eq!(described_ids(&earlier), described_ids(&all), "v{version}");
        assert!(earlier.tokens.iter().all(|t| t.token_requester_principal_name.is_empty()), "v3 adds the requester");
    }
    assert!(alice.call(3, &describe(Some(&[]))).await.tokens.is_empty());
    assert_eq!(described_ids(&alice.call(3, &describe(Some(&["bob"]))).await), vec![id.clone()], "bob renews it");
    // A renewer sees it; another role only with an ACL; a superuser always.
    let mut bob = as_role(&broker, "bob").await;
    assert_eq!(described_ids(&bob.call(3, &describe(None)).await), vec![id.clone()]);
    let mut eve = as_role(&broker, "eve").await;
    assert!(eve.call(3, &describe(None)).await.tokens.is_empty());
    broker.broker.context().acls.add(&[allow("eve", ResourceType::DelegationToken, &id, Operation::Describe)]);
    assert_eq!(described_ids(&eve.call(3, &describe(None)).await), vec![id.clone()]);
    broker.broker.context().acls.add(&[allow("eve", ResourceType::User, "User:alice", Operation::DescribeTokens)]);
    assert_eq!(eve.call(3, &describe(None)).await.tokens.len(), 3);
    let mut admin = as_role(&broker, "admin").await;
    assert_eq!(admin.call(3, &describe(Some(&["alice"]))).await.tokens.len(), 3);

    // Renew: by its HMAC, the owner or a renewer only.
    assert_eq!(eve.call(2, &renew(&hmac, -1)).await.error_code, error_code::DELEGATION_TOKEN_OWNER_MISMATCH);
    assert_eq!(alice.call(2, &renew(b"not an hmac", -1)).await.error_code, error_code::DELEGATION_TOKEN_NOT_FOUND);
    let before = kafgres_broker::now_ms();
    let renewed = bob.call(2, &renew(&hmac, 5_000)).await;
    assert_eq!(renewed.error_code, 0);
    assert!((before + 5_000..=kafgres_broker::now_ms() + 5_000).contains(&renewed.expiry_timestamp_ms));
    let renewed = alice.call(1, &renew(&hmac, EXPIRY_TIME_MS * 100)).await;
    assert!(renewed.expiry_timestamp_ms <= kafgres_broker::now_ms() + EXPIRY_TIME_MS, "at most the expiry time");
    assert_eq!(
        broker.catalog.delegation_tokens().iter().find(|t| t.token_id == id).expect("stored").expiry_ms,
        renewed.expiry_timestamp_ms
    );

    // Expire: a period moves the expiry (never past the max); a negative one removes it.
    let moved = alice.call(2, &expire(&hmac, 30_000)).await;
    assert_eq!(moved.error_code, 0);
    assert!(moved.expiry_timestamp_ms <= kafgres_broker::now_ms() + 30_000);
    assert_eq!(eve.call(2, &expire(&hmac, -1)).await.error_code, error_code::DELEGATION_TOKEN_OWNER_MISMATCH);
    let gone = bob.call(2, &expire(&hmac, -1)).await;
    assert_eq!((gone.error_code, gone.expiry_timestamp_ms), (0, -1), "Kafka answers the period itself");
    assert!(broker.catalog.delegation_tokens().iter().all(|t| t.token_id != id));
    assert!(!described_ids(&admin.call(3, &describe(None)).await).contains(&id));
    assert_eq!(alice.call(2, &renew(&hmac, -1)).await.error_code, error_code::DELEGATION_TOKEN_NOT_FOUND);
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn a_token_for_another_owner_needs_create_tokens_on_that_user() {
    let broker = token_broker(Some(SECRET)).await;
    let mut carol = as_role(&broker, "carol").await;
    let refused = carol.call(3, &create(Some("alice"), &[], -1)).await;
    assert_eq!(refused.error_code, error_code::DELEGATION_TOKEN_AUTHORIZATION_FAILED);
    assert_eq!((refused.principal_name.as_str(), refused.token_requester_principal_name.as_str()), ("alice", "carol"));
    // Naming itself as the owner needs nothing.
    assert_eq!(carol.call(3, &create(Some("carol"), &[], -1)).await.error_code, 0);

    broker.broker.context().acls.add(&[allow("carol", ResourceType::User, "User:alice", Operation::CreateTokens)]);
    let created = carol.call(3, &create(Some("alice"), &[], -1)).await;
    assert_eq!(created.error_code, 0);
    assert_eq!((created.principal_name.as_str(), created.token_requester_principal_name.as_str()), ("alice", "carol"));
    // The requester sees it (Kafka's ownerOrRenewer counts it) but may not renew it.
    let mut carol_sees = carol.call(3, &describe(Some(&["alice"]))).await;
    assert_eq!(described_ids(&carol_sees), vec![created.token_id.to_string()]);
    carol_sees = carol.call(3, &describe(None)).await;
    assert_eq!(carol_sees.tokens.len(), 2);
    assert_eq!(carol.call(2, &renew(&created.hmac, -1)).await.error_code, error_code::DELEGATION_TOKEN_OWNER_MISMATCH);

    // Principals other than users cannot own or renew tokens.
    let group_renewer = carol.call(3, &create(None, &[("Group", "g")], -1)).await;
    assert_eq!(group_renewer.error_code, error_code::INVALID_PRINCIPAL_TYPE);
    let mut admin = as_role(&broker, "admin").await;
    assert_eq!(admin.call(3, &create(Some("bob"), &[], -1)).await.error_code, 0, "a superuser may");
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn a_token_logs_in_as_its_owner_and_may_not_manage_tokens() {
    let broker = token_broker(Some(SECRET)).await;
    let mut alice = as_role(&broker, "alice").await;
    let created = alice.call(3, &create(None, &[], -1)).await;
    assert_eq!(created.error_code, 0);
    let id = created.token_id.to_string();
    broker.broker.context().acls.add(&[allow("alice", ResourceType::Topic, "jobs", Operation::Create)]);

    let (mut job, done) = with_token(&broker, &id, &created.hmac).await;
    assert_eq!(done.error_code, 0, "{:?}", done.error_message);
    let listed = broker.broker.context().config.metrics.connections.snapshot();
    assert!(listed.iter().filter(|c| c.principal.as_deref() == Some("alice")).count() >= 2, "{listed:?}");
    // Alice's ACLs apply: she may create "jobs", not "other".
    let topics = |name: &str| CreateTopicsRequest::default().with_topics(vec![creatable(name, 1, 1)]);
    assert_eq!(job.call(5, &topics("jobs")).await.topics[0].error_code, 0);
    assert_eq!(job.call(5, &topics("other")).await.topics[0].error_code, error_code::TOPIC_AUTHORIZATION_FAILED);
    // A token's connection may not create, renew, expire or describe tokens.
    let refused = job.call(3, &create(None, &[], -1)).await;
    assert_eq!(refused.error_code, error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED);
    assert_eq!(
        job.call(2, &renew(&created.hmac, -1)).await.error_code,
        error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    );
    assert_eq!(
        job.call(2, &expire(&created.hmac, -1)).await.error_code,
        error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    );
    assert_eq!(job.call(3, &describe(None)).await.error_code, error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED);

    // The wrong HMAC, an unknown id, or a token id without tokenauth: refused in Kafka's words.
    let (_, wrong) = with_token(&broker, &id, &kafka_hmac("another id")).await;
    assert_eq!(wrong.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    assert_eq!(wrong.error_message.as_deref(), Some(AUTHENTICATION_FAILED_MESSAGE));
    let (_, unknown) = with_token(&broker, "no-such-token-id", &created.hmac).await;
    assert_eq!(unknown.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    assert_eq!(unknown.error_message.as_deref(), Some(AUTHENTICATION_FAILED_MESSAGE));
    let mut client = broker.client().await;
    let plain = scram_login(&mut client, &id, &BASE64.encode(&created.hmac), "").await;
    assert_eq!(plain.error_code, error_code::SASL_AUTHENTICATION_FAILED, "a token id is not a role");

    // Expired by its owner: no more logins.
    assert_eq!(alice.call(2, &expire(&created.hmac, -1)).await.error_code, 0);
    let (_, after) = with_token(&broker, &id, &created.hmac).await;
    assert_eq!(after.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn an_expired_token_is_removed_at_its_expiry_and_cannot_log_in() {
    // Long enough for a debug build's two logins on a busy machine.
    const LIFETIME_MS: i64 = 2_000;
    let broker = token_broker(Some(SECRET)).await;
    let mut alice = as_role(&broker, "alice").await;
    let kept = alice.call(3, &create(None, &[], -1)).await;
    let created = alice.call(3, &create(None, &[], LIFETIME_MS)).await;
    assert_eq!((kept.error_code, created.error_code), (0, 0));
    let id = created.token_id.to_string();
    let (_, done) = with_token(&broker, &id, &created.hmac).await;
    assert_eq!(done.error_code, 0, "valid before its expiry");

    // The deadline task removes it once past its expiry, from the catalog too.
    let deadline = Instant::now() + Duration::from_secs(10);
    while broker.catalog.delegation_tokens().iter().any(|t| t.token_id == id) {
        assert!(Instant::now() < deadline, "the expired token was not removed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(kafgres_broker::now_ms() > created.expiry_timestamp_ms, "not before its expiry");
    let (_, after) = with_token(&broker, &id, &created.hmac).await;
    assert_eq!(after.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    assert_eq!(alice.call(2, &renew(&created.hmac, -1)).await.error_code, error_code::DELEGATION_TOKEN_NOT_FOUND);
    assert_eq!(
        described_ids(&alice.call(3, &describe(None)).await),
        vec![kept.token_id.to_string()],
        "the other stays"
    );
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn tokens_survive_a_restart() {
    let broker = token_broker(Some(SECRET)).await;
    let mut alice = as_role(&broker, "alice").await;
    let created = alice.call(3, &create(None, &[("User", "bob")], -1)).await;
    assert_eq!(created.error_code, 0);
    drop(alice);
    let (dir, catalog) = broker.shutdown().await;

    let broker = start(dir, catalog, Some(SECRET), |_| {}).await;
    let (_, done) = with_token(&broker, &created.token_id, &created.hmac).await;
    assert_eq!(done.error_code, 0, "{:?}", done.error_message);
    let mut bob = as_role(&broker, "bob").await;
    let described = bob.call(3, &describe(None)).await;
    assert_eq!(described_ids(&described), vec![created.token_id.to_string()]);
    assert_eq!(described.tokens[0].hmac, created.hmac);
    assert_eq!(described.tokens[0].expiry_timestamp, created.expiry_timestamp_ms);
    broker.broker.shutdown().await;
}

/// KIP-368: with `connections.max.reauth.ms`, a token's session ends at the
/// token's expiry at the latest (Kafka's SCRAM server gives it as the
/// credential's lifetime).
#[tokio::test]
async fn a_tokens_session_ends_with_the_token() {
    const LIFETIME_MS: i64 = 5_000;
    let broker = token_broker_with(Some(SECRET), |config| config.connections_max_reauth_ms = 3_600_000).await;
    let mut alice = as_role(&broker, "alice").await;
    let created = alice.call(3, &create(None, &[], LIFETIME_MS)).await;
    assert_eq!(created.error_code, 0);
    let (_, done) = with_token(&broker, &created.token_id, &created.hmac).await;
    assert_eq!(done.error_code, 0);
    assert!((1..=LIFETIME_MS).contains(&done.session_lifetime_ms), "{}", done.session_lifetime_ms);
    broker.broker.shutdown().await;
}
