//! TLS listeners over the wire: certificates made here with rcgen (a CA, a
//! server certificate for 127.0.0.1, client certificates whose CN is a
//! role), a rustls client, and the broker's SSL and SASL_SSL listeners next
//! to its PLAINTEXT one.

mod common;

use std::sync::Arc;

use common::tls::*;
use common::*;
use kafgres_broker::acl::{AclBinding, Identity, Operation, PatternType, Permission, ResourceType};
use kafgres_broker::listener::SecurityProtocol;
use kafgres_broker::tls::ClientAuth;
use kafgres_broker::{BrokerConfig, MemoryCatalog};
use kafgres_wire::error_code;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn an_ssl_listener_serves_beside_plaintext_and_advertises_its_own_port() {
    let ca = Ca::new("server CA");
    let files = server_files(&ca, None, ClientAuth::None);
    let broker = start(Arc::default(), Some(files.settings.clone()), &[SecurityProtocol::Ssl]).await;
    let ssl = tls_addr(&broker, SecurityProtocol::Ssl);
    assert_ne!(ssl, broker.addr());

    let mut tls = connect_tls(ssl, client_config(&ca, None)).await.expect("TLS handshake");
    assert_eq!(api_versions(&mut tls).await.expect("ApiVersions over TLS").error_code, 0);
    create_topic(&mut tls, "secure", 1).await;
    let meta = tls.call(12, &metadata_request(Some(&["secure"]), false)).await;
    assert_eq!(meta.brokers.len(), 1);
    assert_eq!(meta.brokers[0].port, i32::from(ssl.port()), "Metadata on the SSL listener names the SSL port");
    let mut plain = broker.client().await;
    let meta = plain.call(12, &metadata_request(Some(&["secure"]), false)).await;
    assert_eq!(meta.brokers[0].port, i32::from(broker.addr().port()), "and the PLAINTEXT one its own");

    // Records produced in plain text come back through TLS intact: the
    // fetch's file ranges are read and encrypted, not sent with sendfile.
    let written: Vec<_> = (0..200).map(|i| records(&format!("r{i}-{}", "x".repeat(3000)), 3)).collect();
    for batch_records in &written {
        let response = produce(&mut plain, 9, "secure", 0, -1, batch(batch_records)).await;
        assert_eq!(response.error_code, 0);
    }
    let mut got = Vec::new();
    let mut offset = 0;
    while offset < 600 {
        let partition = fetch(&mut tls, 12, TopicRef::Name("secure"), 0, offset, 16 << 20).await;
        assert_eq!(partition.error_code, 0);
        let through_tcp = fetch(&mut plain, 12, TopicRef::Name("secure"), 0, offset, 16 << 20).await;
        assert_eq!(partition.records, through_tcp.records, "TLS and TCP fetches differ at {offset}");
        let decoded = decode_records(&partition.records.clone().unwrap_or_default());
        assert!(!decoded.is_empty(), "fetch at {offset} returned nothing");
        offset = decoded.last().map(|(o, _)| o + 1).expect("records");
        got.extend(decoded);
    }
    let want: Vec<_> = written.iter().enumerate().flat_map(|(i, r)| expected(r, i as i64 * 3)).collect();
    assert_eq!(got, want);

    // A plain-text client on the TLS port gets no Kafka answer.
    let mut confused = Client::connect(ssl).await;
    assert!(api_versions(&mut confused).await.is_err());
    assert!(DescribeConfigsAnswer::advertised_listeners(&mut plain)
        .await
        .contains(&format!("SSL://127.0.0.1:{}", ssl.port())));
    broker.shutdown().await;
}

struct DescribeConfigsAnswer;

impl DescribeConfigsAnswer {
    async fn advertised_listeners(client: &mut Client) -> String {
        let resource = describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("advertised.listeners")]));
        let response = client.call(4, &DescribeConfigsRequest::default().with_resources(vec![resource])).await;
        response.results[0].configs[0].value.as_ref().map(|v| v.to_string()).unwrap_or_default()
    }
}

#[tokio::test]
async fn required_client_certificates_name_the_role_the_authorizer_checks() {
    let server_ca = Ca::new("server CA");
    let client_ca = Ca::new("client CA");
    let files = server_files(&server_ca, Some(&client_ca), ClientAuth::Required);
    let catalog: Arc<MemoryCatalog> = Arc::default();
    catalog.set_identity(Identity { role: "reader".into(), member_of: vec!["readers".into()], ..Identity::default() });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    config.tls = Some(files.settings.clone());
    config.extra_listeners = vec![listener(SecurityProtocol::Ssl)];
    let broker = TestBroker::start_with(dir, Arc::clone(&catalog), config).await;
    let mut admin = broker.client().await;
    for topic in ["visible", "hidden"] {
        create_topic(&mut admin, topic, 1).await;
    }
    broker.broker.context().acls.set_enabled(true);
    broker.broker.context().acls.replace(vec![AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: "visible".into(),
        pattern_type: PatternType::Literal,
        principal: "User:readers".into(),
        host: "*".into(),
        operation: Operation::Describe,
        permission: Permission::Allow,
    }]);
    let ssl = tls_addr(&broker, SecurityProtocol::Ssl);

    // No certificate: the handshake (or the first read after it) fails.
    let without = connect_tls(ssl, client_config(&server_ca, None)).await;
    if let Ok(mut client) = without {
        assert!(api_versions(&mut client).await.is_err(), "a client without a certificate was served");
    }
    // A certificate from another CA: refused the same way.
    let stranger_ca = Ca::new("stranger CA");
    let (cert, key) = stranger_ca.issue("reader", false);
    if let Ok(mut client) = connect_tls(ssl, client_config(&server_ca, Some((&cert, &key)))).await {
        assert!(api_versions(&mut client).await.is_err(), "a certificate of an unknown CA was accepted");
    }
    // CN=reader: a member of `readers`, so it sees the topic granted to the group role only.
    let (cert, key) = client_ca.issue("reader", false);
    let mut reader = connect_tls(ssl, client_config(&server_ca, Some((&cert, &key)))).await.expect("handshake");
    let meta = reader.call(12, &metadata_request(None, false)).await;
    let names: Vec<String> = meta.topics.iter().filter_map(|t| t.name.as_ref().map(|n| n.to_string())).collect();
    assert_eq!(names, vec!["visible".to_owned()]);
    let live = broker.broker.context().config.metrics.connections.snapshot();
    assert!(
        live.iter().any(|c| c.principal.as_deref() == Some("reader")),
        "the connection table shows the certificate's role: {live:?}"
    );
    // CN=nobody: no such role, so the connection is closed before any answer.
    let (cert, key) = client_ca.issue("nobody", false);
    if let Ok(mut client) = connect_tls(ssl, client_config(&server_ca, Some((&cert, &key)))).await {
        assert!(api_versions(&mut client).await.is_err(), "a certificate naming no role was served");
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn requested_client_certificates_let_a_client_without_one_in_as_anonymous() {
    let server_ca = Ca::new("server CA");
    let client_ca = Ca::new("client CA");
    let files = server_files(&server_ca, Some(&client_ca), ClientAuth::Requested);
    let broker = start(Arc::default(), Some(files.settings.clone()), &[SecurityProtocol::Ssl]).await;
    let ssl = tls_addr(&broker, SecurityProtocol::Ssl);
    let mut anonymous = connect_tls(ssl, client_config(&server_ca, None)).await.expect("handshake");
    assert_eq!(api_versions(&mut anonymous).await.expect("served").error_code, 0);
    let live = broker.broker.context().config.metrics.connections.snapshot();
    assert!(live.iter().all(|c| c.principal.is_none()), "{live:?}");
    broker.shutdown().await;
}

#[tokio::test]
async fn sasl_plain_over_tls_checks_the_scram_verifier_and_is_refused_in_plain_text() {
    let ca = Ca::new("server CA");
    let files = server_files(&ca, None, ClientAuth::None);
    let catalog: Arc<MemoryCatalog> = Arc::default();
    catalog.set_scram_credential("alice", Some(scram_credential("wonderland", b"a salt of sixteen")));
    let broker = start(
        Arc::clone(&catalog),
        Some(files.settings.clone()),
        &[SecurityProtocol::SaslSsl, SecurityProtocol::SaslPlaintext],
    )
    .await;
    let sasl_ssl = tls_addr(&broker, SecurityProtocol::SaslSsl);

    let mut client = connect_tls(sasl_ssl, client_config(&ca, None)).await.expect("handshake");
    let handshake = sasl_handshake(&mut client, "PLAIN").await;
    assert_eq!(handshake.error_code, 0);
    let offered: Vec<String> = handshake.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(offered, vec!["SCRAM-SHA-256".to_owned(), "PLAIN".to_owned()]);
    let answer = sasl_authenticate(&mut client, b"\0alice\0wonderland").await.expect("answered");
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    assert_eq!(api_versions(&mut client).await.expect("served after login").error_code, 0);
    let live = broker.broker.context().config.metrics.connections.snapshot();
    assert!(live.iter().any(|c| c.principal.as_deref() == Some("alice")), "{live:?}");

    let mut wrong = connect_tls(sasl_ssl, client_config(&ca, None)).await.expect("handshake");
    assert_eq!(sasl_handshake(&mut wrong, "PLAIN").await.error_code, 0);
    let answer = sasl_authenticate(&mut wrong, b"\0alice\0looking-glass").await.expect("answered");
    assert_eq!(answer.error_code, error_code::SASL_AUTHENTICATION_FAILED);
    assert_eq!(answer.error_message.as_deref(), Some("Authentication failed: Invalid username or password"));
    wrong.expect_closed().await;

    // SCRAM-SHA-512 cannot be backed by a Postgres verifier: refused, with the list.
    let mut sha512 = connect_tls(sasl_ssl, client_config(&ca, None)).await.expect("handshake");
    let refused = sasl_handshake(&mut sha512, "SCRAM-SHA-512").await;
    assert_eq!(refused.error_code, error_code::UNSUPPORTED_SASL_MECHANISM);

    // On SASL_PLAINTEXT, PLAIN is not offered: the password would cross in clear.
    let mut cleartext = Client::connect(tls_addr(&broker, SecurityProtocol::SaslPlaintext)).await;
    let refused = sasl_handshake(&mut cleartext, "PLAIN").await;
    assert_eq!(refused.error_code, error_code::UNSUPPORTED_SASL_MECHANISM);
    let offered: Vec<String> = refused.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(offered, vec!["SCRAM-SHA-256".to_owned()]);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_reload_serves_the_new_certificate_and_keeps_established_connections() {
    let old_ca = Ca::new("old CA");
    let files = server_files(&old_ca, None, ClientAuth::None);
    let broker = start(Arc::default(), Some(files.settings.clone()), &[SecurityProtocol::Ssl]).await;
    let ssl = tls_addr(&broker, SecurityProtocol::Ssl);
    let mut established = connect_tls(ssl, client_config(&old_ca, None)).await.expect("handshake");
    assert_eq!(api_versions(&mut established).await.expect("served").error_code, 0);

    let new_ca = Ca::new("new CA");
    let renewed = server_files(&new_ca, None, ClientAuth::None);
    assert!(broker.broker.reload_tls(renewed.settings.clone()).expect("reloads"));
    // New handshakes get the new certificate: a client trusting only the old CA fails.
    assert!(connect_tls(ssl, client_config(&old_ca, None)).await.is_err());
    let mut fresh = connect_tls(ssl, client_config(&new_ca, None)).await.expect("the new certificate");
    assert_eq!(api_versions(&mut fresh).await.expect("served").error_code, 0);
    assert_eq!(api_versions(&mut established).await.expect("still served").error_code, 0);

    // A broken reload keeps what is in use.
    let mut broken = renewed.settings.clone();
    broken.key_file = broken.cert_file.clone();
    assert!(broker.broker.reload_tls(broken).is_err());
    let mut again = connect_tls(ssl, client_config(&new_ca, None)).await.expect("still the new certificate");
    assert_eq!(api_versions(&mut again).await.expect("served").error_code, 0);
    broker.shutdown().await;
}

/// A TLS listener without a usable certificate: bound, but every
/// connection is dropped without a byte of Kafka (never plain text).
async fn assert_refuses_every_connection(broker: &TestBroker, ca: &Ca) {
    let addr = tls_addr(broker, SecurityProtocol::Ssl);
    assert!(connect_tls(addr, client_config(ca, None)).await.is_err(), "no TLS handshake");
    let mut plain = Client::connect(addr).await;
    assert!(api_versions(&mut plain).await.is_err(), "no plain-text answer either");
}

#[tokio::test]
async fn half_configured_tls_refuses_every_connection_never_plain_text_until_a_reload_fixes_it() {
    let ca = Ca::new("server CA");
    // A TLS listener and no certificate: bound, refusing; the primary serves.
    let broker = start(Arc::default(), None, &[SecurityProtocol::Ssl, SecurityProtocol::Plaintext]).await;
    assert_refuses_every_connection(&broker, &ca).await;
    assert_eq!(api_versions(&mut broker.client().await).await.expect("primary serves").error_code, 0);
    let mut extra = Client::connect(tls_addr(&broker, SecurityProtocol::Plaintext)).await;
    assert_eq!(api_versions(&mut extra).await.expect("the other listener serves").error_code, 0);
    // The files fixed and reloaded: served, no restart.
    let files = server_files(&ca, None, ClientAuth::None);
    assert!(broker.broker.reload_tls(files.settings.clone()).expect("loads"));
    let addr = tls_addr(&broker, SecurityProtocol::Ssl);
    let mut client = connect_tls(addr, client_config(&ca, None)).await.expect("handshake after the reload");
    assert_eq!(api_versions(&mut client).await.expect("served").error_code, 0);
    broker.shutdown().await;

    // A key file that is not a key: refusing, and a reload with the same bad files changes nothing.
    let mut files = server_files(&ca, None, ClientAuth::None);
    files.settings.key_file = files.settings.cert_file.clone();
    let broker = start(Arc::default(), Some(files.settings.clone()), &[SecurityProtocol::Ssl]).await;
    assert_refuses_every_connection(&broker, &ca).await;
    assert!(broker.broker.reload_tls(files.settings.clone()).is_err());
    assert_refuses_every_connection(&broker, &ca).await;
    broker.shutdown().await;

    // Client certificates required without a CA file: refusing.
    let files = server_files(&ca, None, ClientAuth::Required);
    let broker = start(Arc::default(), Some(files.settings.clone()), &[SecurityProtocol::Ssl]).await;
    assert_refuses_every_connection(&broker, &ca).await;
    broker.shutdown().await;
}

#[tokio::test]
async fn sasl_ssl_never_asks_for_a_client_certificate_as_kafka_ignores_ssl_client_auth_there() {
    let ca = Ca::new("CA");
    let files = server_files(&ca, Some(&ca), ClientAuth::Required);
    let catalog: Arc<MemoryCatalog> = Arc::default();
    catalog.set_scram_credential("alice", Some(scram_credential("wonderland", b"a salt of sixteen")));
    let broker =
        start(catalog, Some(files.settings.clone()), &[SecurityProtocol::Ssl, SecurityProtocol::SaslSsl]).await;
    // SSL: a certificate is required.
    let ssl = tls_addr(&broker, SecurityProtocol::Ssl);
    let refused = match connect_tls(ssl, client_config(&ca, None)).await {
        Ok(mut client) => api_versions(&mut client).await.is_err(),
        Err(_) => true,
    };
    assert!(refused, "SSL without a client certificate");
    // SASL_SSL: SASL decides; no certificate is asked for.
    let sasl_ssl = tls_addr(&broker, SecurityProtocol::SaslSsl);
    let mut client = connect_tls(sasl_ssl, client_config(&ca, None)).await.expect("handshake without a certificate");
    assert_eq!(sasl_handshake(&mut client, "PLAIN").await.error_code, 0);
    let answer = sasl_authenticate(&mut client, b"\0alice\0wonderland").await.expect("answered");
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    assert_eq!(api_versions(&mut client).await.expect("served").error_code, 0);
    broker.shutdown().await;
}

/// Produces of 60 KB to 2 MB that arrive in pieces of every size, with pauses between
/// them (cut anywhere, TLS records included), is answered on TCP and on TLS,
/// and its records are all stored: the wake threshold the connection sets
/// while a body arrives (`kafgres_broker::wake_threshold`) never waits for
/// bytes that are not coming, whatever the TLS session holds below the
/// reader when the client pauses.
#[tokio::test]
async fn a_large_request_trickling_in_is_answered_on_tcp_and_on_tls() {
    let ca = Ca::new("server CA");
    let files = server_files(&ca, None, ClientAuth::None);
    let broker = start(Arc::default(), Some(files.settings.clone()), &[SecurityProtocol::Ssl]).await;
    let mut plain = broker.client().await;
    create_topic(&mut plain, "trickled", 1).await;
    let tcp = Client::connect(trickling_proxy(broker.addr()).await).await;
    let tls_proxy = trickling_proxy(tls_addr(&broker, SecurityProtocol::Ssl)).await;
    let tls = connect_tls(tls_proxy, client_config(&ca, None)).await.expect("TLS through the proxy");
    let mut stored = Vec::new();
    for (transport, mut client) in [("TCP", tcp), ("TLS", tls)] {
        // Frames of 2 MB down to 60 KB, so their last bytes meet the
        // pauses at every point of a TLS record.
        for (i, count) in [700, 331, 250, 170, 113, 97, 61, 43, 29, 23, 20].into_iter().enumerate() {
            let records = records(&format!("{transport}{i}-{}", "z".repeat(3000 + 37 * i)), count);
            let correlation_id = client.next_correlation_id();
            // Batches under the 1 MB a batch may have.
            let blob: Vec<u8> = records.chunks(100).flat_map(batch).collect();
            let request = produce_request("trickled", 0, -1, blob);
            let frame = request_frame(kafgres_wire::ApiKey::Produce, 9, correlation_id, &request);
            client.send_raw(&frame).await;
            let response = client.try_receive::<ProduceRequest>(9, correlation_id).await;
            let response = response
                .unwrap_or_else(|e| panic!("a produce of {} bytes trickled over {transport}: {e}", frame.len()));
            let partition = &response.responses[0].partition_responses[0];
            assert_eq!(partition.error_code, 0, "over {transport}");
            stored.extend(expected(&records, stored.len() as i64));
        }
    }
    let mut got = Vec::new();
    while got.len() < stored.len() {
        let partition = fetch(&mut plain, 12, TopicRef::Name("trickled"), 0, got.len() as i64, 64 << 20).await;
        let decoded = decode_records(&partition.records.clone().unwrap_or_default());
        assert!(!decoded.is_empty(), "nothing fetched at {}", got.len());
        got.extend(decoded);
    }
    assert_eq!(got, stored);
    broker.shutdown().await;
}

/// A proxy to `target` that passes the client's bytes on in pieces of every
/// size, pausing after each, and the answers unchanged.
async fn trickling_proxy(target: std::net::SocketAddr) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const PIECES: [usize; 8] = [1, 7, 100, 5_000, 16_384, 16_411, 70_000, 300_000];
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
    let addr = listener.local_addr().expect("proxy address");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(broker) = tokio::net::TcpStream::connect(target).await else { return };
            let (mut from_client, mut to_client) = client.into_split();
            let (mut from_broker, mut to_broker) = broker.into_split();
            tokio::spawn(async move { tokio::io::copy(&mut from_broker, &mut to_client).await });
            tokio::spawn(async move {
                let mut buf = vec![0u8; 300_000];
                for want in PIECES.into_iter().cycle() {
                    let n = match from_client.read(&mut buf[..want]).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if to_broker.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                }
            });
        }
    });
    addr
}
