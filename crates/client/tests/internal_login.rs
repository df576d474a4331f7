//! `KAFGRES-INTERNAL`: the login of Kafgres's own clients, against a broker
//! that requires SCRAM and enforces ACLs. The internal superuser may do
//! everything; a login acting for a role is held to that role's ACLs; a
//! wrong secret is refused as a failed login.

mod common;

use common::*;
use kafgres_broker::sasl::Authentication;
use kafgres_client::{error_code, Client, ClientConfig, InternalLogin, PollWait};

const SECRET: &str = "6f1c0e3a9b2d4f8e7a6c5b4d3e2f1a0b";

fn secured() -> TestBroker {
    TestBroker::start_with(|config| {
        config.authentication = Authentication::scram_sha_256_random();
        config.authorizer_enabled = true;
        config.internal_secret = Some(SECRET.into());
        config.failed_authentication_delay_ms = 1;
    })
}

fn login(broker: &TestBroker, secret: &str, role: &str) -> Result<Client<PollWait>, kafgres_client::ClientError> {
    let config = ClientConfig {
        internal_login: Some(InternalLogin { secret: secret.into(), role: role.into() }),
        ..test_config()
    };
    Client::connect_with(broker.addr(), "kafgres-sql", PollWait, config)
}

#[test]
fn the_internal_superuser_may_do_everything() {
    let broker = secured();
    let mut client = login(&broker, SECRET, "").expect("logs in");
    client.create_topic("internal", 1, &[]).expect("creates a topic");
    let offset = client.produce("internal", 0, &records("i", 3)).expect("produces");
    assert_eq!(offset, 0);
}

#[test]
fn a_login_for_a_role_is_held_to_its_acls() {
    let broker = secured();
    login(&broker, SECRET, "").expect("superuser").create_topic("guarded", 1, &[]).expect("created");
    let mut app = login(&broker, SECRET, "app").expect("logs in as app");
    let refused = app.produce("guarded", 0, &records("a", 1)).expect_err("app has no ACL");
    assert_eq!(refused.kafka_code(), Some(error_code::TOPIC_AUTHORIZATION_FAILED), "{refused}");
}

#[test]
fn a_wrong_secret_is_a_failed_login() {
    let broker = secured();
    let refused = login(&broker, "not-the-secret", "").err().expect("refused");
    assert_eq!(refused.kafka_code(), Some(error_code::SASL_AUTHENTICATION_FAILED), "{refused}");
}

#[test]
fn without_authentication_the_internal_login_still_works() {
    let broker = TestBroker::start_with(|config| {
        config.authorizer_enabled = true;
        config.internal_secret = Some(SECRET.into());
    });
    let mut client = login(&broker, SECRET, "").expect("logs in on a PLAINTEXT listener");
    client.create_topic("plain", 1, &[]).expect("the internal superuser is allowed");
    // An anonymous client on the same listener is held to the ACLs (none).
    let mut anonymous = broker.client();
    let refused = anonymous.produce("plain", 0, &records("x", 1)).expect_err("anonymous has no ACL");
    assert_eq!(refused.kafka_code(), Some(error_code::TOPIC_AUTHORIZATION_FAILED));
}

#[test]
fn a_broker_without_a_secret_refuses_the_mechanism() {
    let broker = TestBroker::start_with(|config| config.authentication = Authentication::scram_sha_256_random());
    let refused = login(&broker, SECRET, "").err().expect("refused");
    assert_eq!(refused.kafka_code(), Some(error_code::UNSUPPORTED_SASL_MECHANISM), "{refused}");
}
