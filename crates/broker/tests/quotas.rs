//! Client quotas over the wire: set with AlterClientQuotas, described, kept
//! by the catalog across a restart, and enforced as Kafka enforces them:
//! the answer carries the throttle time and the connection reads nothing
//! more until it has passed; a fetch already over its rate is answered
//! empty.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kafgres_wire::error_code;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const QUOTA: f64 = 100_000.0;

fn entry(kind: &'static str, name: Option<&str>, key: &'static str, value: Option<f64>) -> EntryData {
    EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(StrBytes::from_static_str(kind))
            .with_entity_name(name.map(|n| StrBytes::from_string(n.to_owned())))])
        .with_ops(vec![OpData::default()
            .with_key(StrBytes::from_static_str(key))
            .with_value(value.unwrap_or(0.0))
            .with_remove(value.is_none())])
}

async fn alter(client: &mut Client, entries: Vec<EntryData>) -> Vec<(i16, Option<String>)> {
    let response = client.call(1, &AlterClientQuotasRequest::default().with_entries(entries)).await;
    response.entries.iter().map(|e| (e.error_code, e.error_message.as_ref().map(|m| m.to_string()))).collect()
}

async fn describe(client: &mut Client) -> Vec<(Vec<(String, Option<String>)>, Vec<(String, f64)>)> {
    let response =
        client.call(1, &DescribeClientQuotasRequest::default().with_components(Vec::<ComponentData>::new())).await;
    assert_eq!(response.error_code, 0, "{:?}", response.error_message);
    response
        .entries
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let entity = e
                .entity
                .iter()
                .map(|c| (c.entity_type.to_string(), c.entity_name.as_ref().map(|n| n.to_string())))
                .collect();
            let values = e.values.iter().map(|v| (v.key.to_string(), v.value)).collect();
            (entity, values)
        })
        .collect()
}

/// A client whose header carries `client_id` (the harness sends its own).
async fn client_as(broker: &TestBroker, client_id: &str) -> (Client, String) {
    (broker.client().await, client_id.to_owned())
}

/// Sends `request` with `client_id` in its header; returns the response.
async fn call_as<R: kafka_protocol::protocol::Request>(
    client: &mut Client,
    client_id: &str,
    version: i16,
    request: &R,
) -> R::Response {
    use bytes::{Buf, BufMut, BytesMut};
    use kafka_protocol::protocol::Decodable;
    let key = api_key::<R>();
    let correlation_id = client.next_correlation_id();
    let mut body = BytesMut::new();
    request.encode(&mut body, version).expect("encodes");
    let flexible = key.request_header_version(version) >= 2;
    let mut frame = BytesMut::new();
    frame.put_i32((10 + client_id.len() + usize::from(flexible) + body.len()) as i32);
    frame.put_i16(key as i16);
    frame.put_i16(version);
    frame.put_i32(correlation_id);
    frame.put_i16(client_id.len() as i16);
    frame.put_slice(client_id.as_bytes());
    if flexible {
        frame.put_u8(0);
    }
    frame.put_slice(&body);
    client.send_raw(&frame).await;
    let mut response = client.read_frame().await;
    assert_eq!(response.get_i32(), correlation_id);
    if key.response_header_version(version) >= 1 {
        assert_eq!(response.get_u8(), 0);
    }
    R::Response::decode(&mut response, version).expect("decodes")
}

/// A produce of about `bytes` in one batch.
fn big_produce(topic: &str, bytes: usize) -> ProduceRequest {
    let chunk = 10_000;
    let values: Vec<_> = (0..bytes / chunk)
        .map(|i| kafgres_record::build::NewRecord {
            key: None,
            value: Some(vec![b'a' + (i % 26) as u8; chunk]),
            headers: Vec::new(),
            timestamp_ms: kafgres_broker::now_ms(),
        })
        .collect();
    produce_request(topic, 0, -1, batch(&values))
}

#[tokio::test]
async fn quotas_are_set_described_removed_and_survive_a_restart() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let results = alter(
        &mut client,
        vec![
            entry("user", Some("alice"), "producer_byte_rate", Some(1_048_576.0)),
            entry("client-id", None, "consumer_byte_rate", Some(2_097_152.0)),
            entry("user", Some("carol"), "request_percentage", Some(12.5)),
            entry("ip", Some("10.0.0.1"), "connection_creation_rate", Some(5.0)),
            entry("user", Some("bob"), "producer_byte_rate", Some(-3.0)),
            entry("user", Some("dave"), "request_percentage", Some(0.0)),
        ],
    )
    .await;
    assert_eq!((results[0].0, results[1].0, results[2].0, results[3].0), (0, 0, 0, 0));
    for (code, message) in &results[4..] {
        assert_eq!(*code, error_code::INVALID_REQUEST);
        assert!(message.as_deref().is_some_and(|m| m.contains("must be greater than 0")), "{message:?}");
    }
    let described = describe(&mut client).await;
    assert_eq!(
        described,
        vec![
            (vec![("ip".to_owned(), Some("10.0.0.1".to_owned()))], vec![("connection_creation_rate".to_owned(), 5.0)]),
            (vec![("client-id".to_owned(), None)], vec![("consumer_byte_rate".to_owned(), 2_097_152.0)]),
            (vec![("user".to_owned(), Some("alice".to_owned()))], vec![("producer_byte_rate".to_owned(), 1_048_576.0)]),
            (vec![("user".to_owned(), Some("carol".to_owned()))], vec![("request_percentage".to_owned(), 12.5)]),
        ]
    );

    // validate_only changes nothing.
    let request = AlterClientQuotasRequest::default()
        .with_entries(vec![entry("user", Some("carol"), "producer_byte_rate", Some(5.0))])
        .with_validate_only(true);
    assert_eq!(client.call(1, &request).await.entries[0].error_code, 0);
    assert_eq!(describe(&mut client).await.len(), 4);

    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    let mut client = broker.client().await;
    assert_eq!(describe(&mut client).await, described, "quotas are the catalog's, not the broker's memory");
    assert_eq!(alter(&mut client, vec![entry("user", Some("alice"), "producer_byte_rate", None)]).await[0].0, 0);
    assert_eq!(describe(&mut client).await.len(), 3);
    broker.shutdown().await;
}

/// ApiVersions' error code, or why no answer came (the connection was closed).
async fn ping(client: &mut Client) -> Result<i16, String> {
    client.try_call(2, &ApiVersionsRequest::default()).await.map(|r| r.error_code)
}

#[tokio::test]
async fn an_ip_quota_bounds_new_connections_from_its_address_and_the_default_from_each() {
    let broker = TestBroker::start().await;
    let mut admin = broker.client().await;
    // 1 connection per second for 127.0.0.2 (a burst of 10), written long-form: the 11th is refused at
    // accept; other addresses are not.
    let results = alter(&mut admin, vec![entry("ip", Some("127.0.0.2"), "connection_creation_rate", Some(1.0))]).await;
    assert_eq!(results[0], (0, None));
    for _ in 0..10 {
        let mut client = Client::connect_from("127.0.0.2".parse().expect("address"), broker.addr()).await;
        assert_eq!(ping(&mut client).await, Ok(0));
    }
    let mut refused = Client::connect_from("127.0.0.2".parse().expect("address"), broker.addr()).await;
    assert!(ping(&mut refused).await.is_err(), "closed unanswered");
    let mut other = Client::connect_from("127.0.0.3".parse().expect("address"), broker.addr()).await;
    assert_eq!(ping(&mut other).await, Ok(0));

    // The default ip entity: 1 per second (a burst of 10) for each other address.
    assert_eq!(alter(&mut admin, vec![entry("ip", None, "connection_creation_rate", Some(1.0))]).await[0].0, 0);
    for _ in 0..10 {
        let mut client = Client::connect_from("127.0.0.4".parse().expect("address"), broker.addr()).await;
        assert_eq!(ping(&mut client).await, Ok(0));
    }
    let mut eleventh = Client::connect_from("127.0.0.4".parse().expect("address"), broker.addr()).await;
    assert!(ping(&mut eleventh).await.is_err(), "over the default ip quota");
    let mut fresh = Client::connect_from("127.0.0.5".parse().expect("address"), broker.addr()).await;
    assert_eq!(ping(&mut fresh).await, Ok(0), "each address has its own rate");

    // Raised: 127.0.0.2 is let in again (its measured rate stays, the limit moves).
    assert_eq!(
        alter(&mut admin, vec![entry("ip", Some("127.0.0.2"), "connection_creation_rate", Some(100.0))]).await[0].0,
        0
    );
    let mut back = Client::connect_from("127.0.0.2".parse().expect("address"), broker.addr()).await;
    assert_eq!(ping(&mut back).await, Ok(0));
    broker.shutdown().await;
}

#[tokio::test]
async fn a_produce_over_its_rate_is_answered_with_a_throttle_and_the_connection_waits() {
    let broker = TestBroker::start().await;
    let mut admin = broker.client().await;
    create_topic(&mut admin, "limited", 1).await;
    let quota = QUOTA / 2.0;
    assert_eq!(
        alter(&mut admin, vec![entry("client-id", Some("slow"), "producer_byte_rate", Some(quota))]).await[0].0,
        0
    );

    // 550 kB in one request: 55 kB/s over the 10 s window against 50 kB/s,
    // 10% over, so a tenth of the window (about 1 s) to wait.
    let (mut slow, id) = client_as(&broker, "slow").await;
    let response = call_as(&mut slow, &id, 9, &big_produce("limited", 550_000)).await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0, "the records are written anyway");
    let throttle = response.throttle_time_ms;
    assert!((900..=1300).contains(&throttle), "throttle_time_ms = {throttle}");
    // The connection reads nothing more until the throttle has passed.
    let asked = Instant::now();
    let _ = call_as(&mut slow, &id, 3, &ApiVersionsRequest::default()).await;
    assert!(asked.elapsed() >= Duration::from_millis(throttle as u64 - 50), "answered after {:?}", asked.elapsed());

    // Another client id has no quota.
    let (mut fast, id) = client_as(&broker, "fast").await;
    let response = call_as(&mut fast, &id, 9, &big_produce("limited", 550_000)).await;
    assert_eq!(response.throttle_time_ms, 0);
    let counters: std::collections::HashMap<_, _> =
        broker.broker.context().config.metrics.counters().into_iter().collect();
    assert_eq!(counters["throttled_requests"], 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_fetch_over_its_rate_gets_no_records_only_the_time_to_wait() {
    let broker = TestBroker::start().await;
    let mut admin = broker.client().await;
    create_topic(&mut admin, "read-limited", 1).await;
    for _ in 0..2 {
        let response = admin.call(9, &big_produce("read-limited", 600_000)).await;
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    }
    assert_eq!(
        alter(&mut admin, vec![entry("client-id", Some("reader"), "consumer_byte_rate", Some(QUOTA))]).await[0].0,
        0
    );
    let (mut reader, id) = client_as(&broker, "reader").await;
    // Under its rate: the records come (1.2 MB, which puts it over).
    let first =
        call_as(&mut reader, &id, 12, &fetch_request(TopicRef::Name("read-limited"), 0, 0, 4 << 20, 0, 1)).await;
    assert_eq!(first.throttle_time_ms, 0);
    let fetched = first.responses[0].partitions[0].records.as_ref().map_or(0, |r| r.len());
    assert!(fetched > 1_100_000, "{fetched} bytes");
    // Over it now: an empty answer that says how long to back off.
    let second =
        call_as(&mut reader, &id, 12, &fetch_request(TopicRef::Name("read-limited"), 0, 0, 4 << 20, 0, 1)).await;
    assert!(second.throttle_time_ms > 0, "{second:?}");
    assert!(second.responses.is_empty());
    broker.shutdown().await;
}

#[tokio::test]
async fn a_client_over_its_request_percentage_is_throttled_in_any_answer() {
    let broker = TestBroker::start().await;
    let mut admin = broker.client().await;
    // A millionth of a percent of one thread: any request puts the client over.
    assert_eq!(
        alter(&mut admin, vec![entry("client-id", Some("busy"), "request_percentage", Some(1e-6))]).await[0].0,
        0
    );
    let (mut first, id) = client_as(&broker, "busy").await;
    let answer = call_as(&mut first, &id, 12, &metadata_request(None, false)).await;
    assert_eq!(answer.throttle_time_ms, 0, "nothing was measured before it");
    // The client id's rate is shared: its next connection is already over, in an
    // answer that is neither Produce nor Fetch; ApiVersions is exempt.
    let (mut second, id) = client_as(&broker, "busy").await;
    let versions = call_as(&mut second, &id, 3, &ApiVersionsRequest::default()).await;
    assert_eq!(versions.throttle_time_ms, 0, "ApiVersions is not throttled");
    let answer = call_as(&mut second, &id, 12, &metadata_request(None, false)).await;
    assert!(answer.throttle_time_ms > 0, "throttle_time_ms = {}", answer.throttle_time_ms);
    // Another client id has no such quota.
    let (mut other, id) = client_as(&broker, "idle").await;
    assert_eq!(call_as(&mut other, &id, 12, &metadata_request(None, false)).await.throttle_time_ms, 0);
    broker.shutdown().await;
}
