//! CreateTopics v7 and Metadata v1, v9 (first flexible version) and v12:
//! creation rules and error codes as Kafka answers them, and what Metadata
//! reports about the broker and its topics.

mod common;

use common::{creatable, create_topic, metadata_request, name, Client, TestBroker};
use kafgres_wire::error_code;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{BrokerId, CreateTopicsRequest, MetadataResponse};
use uuid::Uuid;

async fn create(
    client: &mut Client,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    validate_only: bool,
) -> CreatableTopicResult {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![creatable(topic, partitions, replication_factor)])
        .with_validate_only(validate_only);
    let mut response = client.call(7, &request).await;
    assert_eq!(response.topics.len(), 1);
    let result = response.topics.remove(0);
    assert_eq!(result.name, name(topic));
    result
}

fn topic_names(response: &MetadataResponse) -> Vec<String> {
    response.topics.iter().map(|t| t.name.as_ref().map(|n| n.to_string()).unwrap_or_default()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_follows_kafka_rules() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;

    let created = create(&mut client, "orders", 3, 1, false).await;
    assert_eq!(created.error_code, 0, "{:?}", created.error_message);
    assert_ne!(created.topic_id, Uuid::nil());
    assert_eq!((created.num_partitions, created.replication_factor), (3, 1));
    let catalog = broker.catalog.topics();
    assert_eq!(catalog.len(), 1);
    assert_eq!(
        (catalog[0].name.as_str(), catalog[0].topic_id, catalog[0].partition_count),
        ("orders", created.topic_id, 3)
    );

    assert_eq!(create(&mut client, "orders", 3, 1, false).await.error_code, error_code::TOPIC_ALREADY_EXISTS);
    assert_eq!(create(&mut client, "rf3", 1, 3, false).await.error_code, error_code::INVALID_REPLICATION_FACTOR);
    assert_eq!(create(&mut client, "zero", 0, 1, false).await.error_code, error_code::INVALID_PARTITIONS);
    for bad in ["bad name", "", ".", "..", &"a".repeat(250)] {
        assert_eq!(
            create(&mut client, bad, 1, 1, false).await.error_code,
            error_code::INVALID_TOPIC_EXCEPTION,
            "INVALID_TOPIC_EXCEPTION for {bad:?}"
        );
    }
    // '.' and '_' collide in Kafka's metric names: "a.b" then "a_b" is refused.
    assert_eq!(create(&mut client, "a.b", 1, 1, false).await.error_code, 0);
    assert_eq!(
        create(&mut client, "a_b", 1, 1, false).await.error_code,
        error_code::INVALID_TOPIC_EXCEPTION,
        "collides with a.b"
    );
    // -1 partitions and -1 replication factor mean the broker defaults (KIP-464).
    let defaults = create(&mut client, "defaults", -1, -1, false).await;
    assert_eq!((defaults.error_code, defaults.num_partitions, defaults.replication_factor), (0, 1, 1));
    // A name listed twice in one request is refused as Kafka does.
    let twice = CreateTopicsRequest::default().with_topics(vec![creatable("twice", 1, 1), creatable("twice", 1, 1)]);
    let response = client.call(7, &twice).await;
    assert_eq!(response.topics.iter().map(|t| t.error_code).collect::<Vec<_>>(), vec![0, 42]);

    let validated = create(&mut client, "only-validated", 2, 1, true).await;
    assert_eq!((validated.error_code, validated.num_partitions), (0, 2));
    let listed = client.call(12, &metadata_request(Some(&["only-validated"]), false)).await;
    assert_eq!(listed.topics[0].error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION, "validate_only created nothing");
    assert!(!broker.catalog.topics().iter().any(|t| t.name == "only-validated"));
    broker.broker.shutdown().await;
}

fn check_broker(response: &MetadataResponse, version: i16, port: u16) {
    assert_eq!(response.brokers.len(), 1);
    let b = &response.brokers[0];
    assert_eq!((b.node_id, b.host.to_string(), b.port), (BrokerId(1), "127.0.0.1".to_owned(), i32::from(port)));
    assert_eq!(response.controller_id, BrokerId(1));
    if version >= 2 {
        assert_eq!(response.cluster_id.as_deref(), Some("kafgres-test-cluster"));
    }
}

fn check_topic(t: &MetadataResponseTopic, version: i16, topic: &str, id: Uuid, partitions: i32) {
    assert_eq!(t.error_code, 0, "{topic}");
    assert_eq!(t.name, Some(name(topic)));
    assert!(!t.is_internal);
    if version >= 10 {
        assert_eq!(t.topic_id, id, "the id CreateTopics returned");
    }
    assert_eq!(t.partitions.len(), partitions as usize);
    for (i, p) in t.partitions.iter().enumerate() {
        assert_eq!((p.error_code, p.partition_index, p.leader_id), (0, i as i32, BrokerId(1)));
        assert_eq!((p.replica_nodes.clone(), p.isr_nodes.clone()), (vec![BrokerId(1)], vec![BrokerId(1)]));
        if version >= 7 {
            assert_eq!(p.leader_epoch, 0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_describes_broker_and_topics() {
    let broker = TestBroker::start().await;
    let port = broker.addr().port();
    let mut client = broker.client().await;
    let orders = create_topic(&mut client, "orders", 3).await;
    let events = create_topic(&mut client, "events", 1).await;

    for version in [1i16, 9, 12] {
        // All topics (null list), sorted by name.
        let all = client.call(version, &metadata_request(None, true)).await;
        check_broker(&all, version, port);
        assert_eq!(topic_names(&all), ["events", "orders"], "v{version}");
        check_topic(&all.topics[0], version, "events", events, 1);
        check_topic(&all.topics[1], version, "orders", orders, 3);

        // An empty list means no topics (v1+).
        let none = client.call(version, &metadata_request(Some(&[]), true)).await;
        check_broker(&none, version, port);
        assert!(none.topics.is_empty(), "v{version}");

        let listed = client.call(version, &metadata_request(Some(&["orders"]), true)).await;
        assert_eq!(listed.topics.len(), 1);
        check_topic(&listed.topics[0], version, "orders", orders, 3);
    }

    // Unknown topic, auto-creation refused by the client (v4+ field).
    for version in [9i16, 12] {
        let refused = client.call(version, &metadata_request(Some(&["ghost"]), false)).await;
        assert_eq!(refused.topics.len(), 1);
        assert_eq!((refused.topics[0].error_code, refused.topics[0].name.clone()), (3, Some(name("ghost"))));
        assert!(refused.topics[0].partitions.is_empty());
    }
    assert!(broker.broker.context().topics.get("ghost").is_none());

    // Auto-creation allowed (v1 always allows it): created with 1 partition.
    for (version, topic) in [(1i16, "auto-v1"), (9, "auto-v9"), (12, "auto-v12")] {
        let created = client.call(version, &metadata_request(Some(&[topic]), true)).await;
        let id = broker.catalog.topics().into_iter().find(|t| t.name == topic).expect("in the catalog").topic_id;
        check_topic(&created.topics[0], version, topic, id, 1);
    }

    // Auto-creation of an invalid name: INVALID_TOPIC_EXCEPTION, nothing created.
    let invalid = client.call(12, &metadata_request(Some(&["bad name"]), true)).await;
    assert_eq!(invalid.topics[0].error_code, error_code::INVALID_TOPIC_EXCEPTION);

    // v12 by topic id: a known id is described, an unknown one is UNKNOWN_TOPIC_ID.
    let by_id = |id| MetadataRequestTopic::default().with_topic_id(id).with_name(None);
    let request = metadata_request(None, false).with_topics(Some(vec![by_id(orders), by_id(Uuid::from_u128(7))]));
    let response = client.call(12, &request).await;
    check_topic(&response.topics[0], 12, "orders", orders, 3);
    assert_eq!((response.topics[1].error_code, response.topics[1].topic_id), (100, Uuid::from_u128(7)));
    broker.broker.shutdown().await;
}

/// Kafka validates topic configs at creation: an unknown config name is
/// INVALID_CONFIG (40), and nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_topic_config_is_invalid_config() {
    use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
    use kafka_protocol::protocol::StrBytes;
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let config = CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("no.such.config"))
        .with_value(Some(StrBytes::from_static_str("1")));
    let topic = creatable("configured", 1, 1).with_configs(vec![config]);
    let response = client.call(7, &CreateTopicsRequest::default().with_topics(vec![topic])).await;
    assert_eq!(response.topics[0].error_code, error_code::INVALID_CONFIG, "{:?}", response.topics[0].error_message);
    assert!(broker.catalog.topics().is_empty());
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_replica_assignments_naming_this_broker_are_accepted() {
    use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let node = 1;
    let assigned = |partition: i32, brokers: &[i32]| {
        CreatableReplicaAssignment::default()
            .with_partition_index(partition)
            .with_broker_ids(brokers.iter().map(|b| BrokerId(*b)).collect())
    };
    let call = |topic: &str, partitions: i32, rf: i16, assignments: Vec<CreatableReplicaAssignment>| {
        CreateTopicsRequest::default().with_topics(vec![creatable(topic, partitions, rf).with_assignments(assignments)])
    };
    // What librdkafka's admin test sends: -1, -1 and one broker per partition.
    let ok = client.call(7, &call("assigned", -1, -1, vec![assigned(1, &[node]), assigned(0, &[node])])).await;
    let ok = &ok.topics[0];
    assert_eq!((ok.error_code, ok.num_partitions, ok.replication_factor), (0, 2, 1), "{:?}", ok.error_message);
    let cases = [
        (call("both", 2, -1, vec![assigned(0, &[node])]), 42, "a count and assignments"),
        (call("gap", -1, -1, vec![assigned(0, &[node]), assigned(2, &[node])]), 39, "not 0..n"),
        (call("other", -1, -1, vec![assigned(0, &[7])]), 39, "an unknown broker"),
        (call("twice", -1, -1, vec![assigned(0, &[node, node])]), 39, "a broker twice"),
        (call("none", -1, -1, vec![assigned(0, &[])]), 39, "no broker"),
    ];
    for (request, code, what) in cases {
        let answer = client.call(7, &request).await;
        assert_eq!(answer.topics[0].error_code, code, "{what}: {:?}", answer.topics[0].error_message);
    }
    broker.broker.shutdown().await;
}
