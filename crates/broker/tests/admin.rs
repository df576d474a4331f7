//! DeleteTopics, CreatePartitions and DescribeCluster over the wire.

mod common;

use common::*;
use kafgres_wire::error_code;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{CreatePartitionsRequest, DeleteTopicsRequest, DescribeClusterRequest};

async fn delete_by_name(client: &mut Client, version: i16, topic: &str) -> i16 {
    let request = DeleteTopicsRequest::default().with_topic_names(vec![name(topic)]);
    let response = client.call(version, &request).await;
    response.responses[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_topics_are_gone_and_a_recreated_topic_starts_empty() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let old_id = create_topic(&mut client, "doomed", 2).await;
    let p = produce(&mut client, 9, "doomed", 0, -1, batch(&records("old", 3))).await;
    assert_eq!((p.error_code, p.base_offset), (0, 0));

    assert_eq!(delete_by_name(&mut client, 5, "doomed").await, 0);
    assert!(broker.catalog.topics().is_empty(), "the catalog row is gone");
    assert_eq!(delete_by_name(&mut client, 5, "doomed").await, 3, "UNKNOWN_TOPIC_OR_PARTITION the second time");
    let p = produce(&mut client, 9, "doomed", 0, -1, batch(&records("late", 1))).await;
    assert_eq!(p.error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION, "produce to a deleted topic");

    let new_id = create_topic(&mut client, "doomed", 1).await;
    assert_ne!(new_id, old_id);
    let p = produce(&mut client, 9, "doomed", 0, -1, batch(&records("new", 1))).await;
    assert_eq!((p.error_code, p.base_offset), (0, 0), "the new topic does not inherit the old records");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_by_id_at_v6_and_unknown_ids() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "by-id", 1).await;
    let request = DeleteTopicsRequest::default().with_topics(vec![
        DeleteTopicState::default().with_topic_id(id),
        DeleteTopicState::default().with_topic_id(uuid::Uuid::new_v4()),
        DeleteTopicState::default().with_name(Some(name("nope"))),
    ]);
    let response = client.call(6, &request).await;
    let codes: Vec<i16> = response.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, 100, 3]);
    assert_eq!(response.responses[0].name, Some(name("by-id")), "the answer names the deleted topic");
    broker.broker.shutdown().await;
}

/// A deletion whose directory rename failed leaves the old directory behind
/// while the broker runs; the next topic of that name must not serve it.
/// (At startup such a directory is a stray and is removed: tests/log_dir.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_partition_directories_of_a_recreated_name_are_set_aside() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "reborn", 1).await;
    produce(&mut client, 9, "reborn", 0, -1, batch(&records("old", 4))).await;
    let live = broker.dir.path().join("reborn-0");
    let kept = broker.dir.path().join("kept-copy");
    std::fs::create_dir(&kept).expect("mkdir");
    for entry in std::fs::read_dir(&live).expect("partition dir").flatten() {
        match std::fs::copy(entry.path(), kept.join(entry.file_name())) {
            Ok(_) => {}
            // A checkpoint's temporary file, renamed by the broker since it was listed.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("copy {}: {e}", entry.path().display()),
        }
    }
    assert_eq!(delete_by_name(&mut client, 5, "reborn").await, 0);
    // What the failed rename would have left: the old topic's directory.
    std::fs::rename(&kept, &live).expect("put the old directory back");
    create_topic(&mut client, "reborn", 1).await;
    assert_eq!(broker.log_end("reborn", 0), 0, "starts empty");
    let set_aside: Vec<_> = std::fs::read_dir(broker.dir.path())
        .expect("log dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("reborn-0.stale-") && n.ends_with("-delete"))
        .collect();
    assert_eq!(set_aside.len(), 1, "the old directory is set aside: {set_aside:?}");
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    // Removed in the background once the broker has started.
    let remaining = || {
        std::fs::read_dir(broker.dir.path())
            .expect("log dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with("-delete"))
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while remaining() > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(remaining(), 0, "set-aside directories are removed at startup");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_grows_a_topic_and_keeps_its_data() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "growing", 1).await;
    produce(&mut client, 9, "growing", 0, -1, batch(&records("a", 2))).await;
    let grow = |count: i32, validate_only: bool| {
        CreatePartitionsRequest::default()
            .with_topics(vec![CreatePartitionsTopic::default().with_name(name("growing")).with_count(count)])
            .with_validate_only(validate_only)
            .with_timeout_ms(10_000)
    };
    let code = |r: kafka_protocol::messages::CreatePartitionsResponse| r.results[0].error_code;
    assert_eq!(code(client.call(3, &grow(3, true)).await), 0);
    assert_eq!(broker.catalog.topics()[0].partition_count, 1, "validate_only changes nothing");
    assert_eq!(code(client.call(3, &grow(3, false)).await), 0);
    assert_eq!(broker.catalog.topics()[0].partition_count, 3);
    // Kafka's messages; none for an unknown topic.
    let answer = |r: kafka_protocol::messages::CreatePartitionsResponse| {
        (r.results[0].error_code, r.results[0].error_message.as_ref().map(|m| m.to_string()))
    };
    assert_eq!(answer(client.call(3, &grow(3, false)).await), (37, Some("Topic already has 3 partition(s).".into())));
    assert_eq!(
        answer(client.call(3, &grow(2, false)).await),
        (37, Some("The topic growing currently has 3 partition(s); 2 would not be an increase.".into()))
    );
    let unknown = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default().with_name(name("absent")).with_count(2)]);
    assert_eq!(answer(client.call(3, &unknown).await), (3, None));

    let p = produce(&mut client, 9, "growing", 2, -1, batch(&records("new", 1))).await;
    assert_eq!((p.error_code, p.base_offset), (0, 0), "the new partition takes records");
    assert_eq!(broker.log_end("growing", 0), 2, "the old partition kept its records");
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    assert_eq!(broker.log_end("growing", 2), 1, "three partitions after a restart");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_cluster_names_this_broker() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    for version in 0..=2 {
        let response = client.call(version, &DescribeClusterRequest::default().with_endpoint_type(1)).await;
        assert_eq!(response.error_code, 0);
        assert_eq!(response.cluster_id.as_str(), "kafgres-test-cluster");
        assert_eq!(response.controller_id.0, 1);
        assert_eq!(response.brokers.len(), 1);
        assert_eq!(response.brokers[0].port, i32::from(broker.addr().port()));
    }
    // Without an authorizer, Kafka answers every cluster operation when asked.
    let asked =
        DescribeClusterRequest::default().with_endpoint_type(1).with_include_cluster_authorized_operations(true);
    assert_eq!(client.call(1, &asked).await.cluster_authorized_operations, 8096);
    let not_asked = DescribeClusterRequest::default().with_endpoint_type(1);
    assert_eq!(client.call(1, &not_asked).await.cluster_authorized_operations, i32::MIN);
    let response = client.call(1, &DescribeClusterRequest::default().with_endpoint_type(2)).await;
    assert_eq!(response.error_code, error_code::UNSUPPORTED_ENDPOINT_TYPE, "UNSUPPORTED_ENDPOINT_TYPE for controllers");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_configs_reports_overrides_and_defaults_with_sources() {
    use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::{CreateTopicsRequest, DescribeConfigsRequest};
    use kafka_protocol::protocol::StrBytes;

    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let topic = creatable("configured", 1, 1).with_configs(vec![CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("retention.ms"))
        .with_value(Some(StrBytes::from_static_str("1000")))]);
    let created = client.call(7, &CreateTopicsRequest::default().with_topics(vec![topic])).await;
    assert_eq!(created.topics[0].error_code, 0);

    let resource = |kind: i8, name: &'static str, keys: Option<Vec<&'static str>>| {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_static_str(name))
            .with_configuration_keys(keys.map(|k| k.into_iter().map(StrBytes::from_static_str).collect()))
    };
    let request = DescribeConfigsRequest::default().with_include_synonyms(true).with_resources(vec![
        resource(2, "configured", Some(vec!["retention.ms", "segment.bytes"])),
        resource(2, "configured", None),
        resource(2, "absent", None),
        resource(4, "1", Some(vec!["num.partitions"])),
    ]);
    let response = client.call(4, &request).await;
    let [picked, all, absent, broker_cfg] = &response.results[..] else { panic!("four results") };
    let summary: Vec<(String, Option<String>, i8, i8)> = picked
        .configs
        .iter()
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()), c.config_source, c.config_type))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("retention.ms".into(), Some("1000".into()), 1, 5),
            ("segment.bytes".into(), Some("1073741824".into()), 5, 3),
        ]
    );
    // As Kafka: the override alone (log.retention.ms has no default of its
    // own), and the broker's default under its own name.
    let synonyms = |c: &kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult| {
        c.synonyms.iter().map(|s| (s.name.to_string(), s.source)).collect::<Vec<_>>()
    };
    assert_eq!(synonyms(&picked.configs[0]), vec![("retention.ms".into(), 1)]);
    assert_eq!(synonyms(&picked.configs[1]), vec![("log.segment.bytes".into(), 5)]);
    assert_eq!(all.configs.len(), kafgres_broker::topic_config::TOPIC_CONFIGS.len());
    assert_eq!(absent.error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(broker_cfg.configs.len(), 1);
    assert_eq!(broker_cfg.configs[0].value.as_ref().map(|v| v.to_string()), Some("1".into()));
    assert!(broker_cfg.configs[0].read_only);
    assert_eq!(broker_cfg.configs[0].config_source, 5, "Kafka's default is a DEFAULT_CONFIG");
    assert_eq!(absent.error_message, None, "Kafka sends no message for an unknown topic");

    // An unknown topic config is refused at creation.
    let bad = creatable("misconfigured", 1, 1).with_configs(vec![CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("no.such.config"))
        .with_value(Some(StrBytes::from_static_str("1")))]);
    let refused = client.call(7, &CreateTopicsRequest::default().with_topics(vec![bad])).await;
    assert_eq!(refused.topics[0].error_code, error_code::INVALID_CONFIG);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_log_start() {
    use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    use kafka_protocol::messages::DeleteRecordsRequest;

    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "trimmed", 1).await;
    for i in 0..5 {
        produce(&mut client, 9, "trimmed", 0, -1, batch(&records(&format!("r{i}"), 2))).await;
    }
    let delete = |offset: i64| {
        DeleteRecordsRequest::default().with_timeout_ms(10_000).with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name("trimmed"))
            .with_partitions(vec![DeleteRecordsPartition::default().with_partition_index(0).with_offset(offset)])])
    };
    let answer = |r: kafka_protocol::messages::DeleteRecordsResponse| {
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.low_watermark)
    };
    assert_eq!(answer(client.call(2, &delete(4)).await), (0, 4));
    assert_eq!(answer(client.call(2, &delete(11)).await).0, 1, "past the high watermark: OFFSET_OUT_OF_RANGE");
    assert_eq!(list_offset(&mut client, 7, "trimmed", 0, -2).await.offset, 4, "earliest is the new log start");
    assert_eq!(
        fetch(&mut client, 11, TopicRef::Name("trimmed"), 0, 2, 1 << 20).await.error_code,
        error_code::OFFSET_OUT_OF_RANGE,
        "reads below it are out of range"
    );
    let from4 = fetch(&mut client, 11, TopicRef::Name("trimmed"), 0, 4, 1 << 20).await;
    assert_eq!(from4.error_code, 0);
    assert_eq!(from4.log_start_offset, 4);
    assert_eq!(answer(client.call(2, &delete(-1)).await), (0, 10), "-1 deletes up to the high watermark");

    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    let mut client = broker.client().await;
    assert_eq!(list_offset(&mut client, 7, "trimmed", 0, -2).await.offset, 10, "the log start survives a restart");
    broker.broker.shutdown().await;
}

/// Creates a topic with the given configs (CreateTopics v7).
async fn create_configured(client: &mut Client, topic: &str, configs: &[(&'static str, &'static str)]) {
    use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
    use kafka_protocol::messages::CreateTopicsRequest;
    use kafka_protocol::protocol::StrBytes;
    let configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str(k))
                .with_value(Some(StrBytes::from_static_str(v)))
        })
        .collect();
    let created = client
        .call(7, &CreateTopicsRequest::default().with_topics(vec![creatable(topic, 1, 1).with_configs(configs)]))
        .await;
    assert_eq!(created.topics[0].error_code, 0);
}

/// Polls the earliest offset until `done` holds or 10 s pass.
async fn earliest_until(client: &mut Client, topic: &str, done: impl Fn(i64) -> bool) -> i64 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let earliest = list_offset(client, 7, topic, 0, -2).await.offset;
        if done(earliest) || std::time::Instant::now() > deadline {
            return earliest;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_size_deletes_old_segments_after_rolls() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_configured(&mut client, "bounded", &[("segment.bytes", "1000"), ("retention.bytes", "2000")]).await;
    for i in 0..30 {
        produce(&mut client, 9, "bounded", 0, -1, batch(&records(&format!("b{i}"), 1))).await;
    }
    let earliest = earliest_until(&mut client, "bounded", |e| e > 0).await;
    assert!(earliest > 0, "old segments are deleted once the log exceeds retention.bytes");
    let topic = broker.broker.context().topics.get("bounded").expect("topic");
    let due = topic.partitions[0].retention_due_at();
    assert!(due.is_none_or(|at| at > kafgres_broker::now_ms()), "nothing is left due");
    assert_eq!(fetch(&mut client, 11, TopicRef::Name("bounded"), 0, earliest, 1 << 20).await.error_code, 0);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_time_deletes_expired_segments() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_configured(&mut client, "expiring", &[("segment.bytes", "1000"), ("retention.ms", "60000")]).await;
    // Records stamped in 1970 are long expired; the active segment never is.
    let old: Vec<_> = (0..3)
        .map(|i| kafgres_record::build::NewRecord { timestamp_ms: 1_000 + i, ..records("old", 1).remove(0) })
        .collect();
    for _ in 0..10 {
        produce(&mut client, 9, "expiring", 0, -1, batch(&old)).await;
    }
    let earliest = earliest_until(&mut client, "expiring", |e| e > 0).await;
    assert!(earliest > 0, "expired segments are deleted");
    assert!(earliest < 30, "the active segment stays");
    broker.broker.shutdown().await;
}

/// DescribeTopicPartitions pages: every topic in name order when none is
/// named, unknown names answered UNKNOWN_TOPIC_OR_PARTITION, and a partition
/// limit that cuts a topic gives a cursor the next request resumes from.
#[tokio::test]
async fn describe_topic_partitions_pages_with_a_cursor() {
    use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
    use kafka_protocol::messages::DescribeTopicPartitionsRequest;
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "pages-b", 3).await;
    create_topic(&mut client, "pages-a", 2).await;

    let all = client.call(0, &DescribeTopicPartitionsRequest::default().with_response_partition_limit(100)).await;
    let listed: Vec<(String, usize)> = all
        .topics
        .iter()
        .map(|t| (t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(), t.partitions.len()))
        .collect();
    assert_eq!(listed, [("pages-a".to_string(), 2), ("pages-b".to_string(), 3)]);
    assert!(all.next_cursor.is_none());

    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![
            TopicRequest::default().with_name(name("pages-b")),
            TopicRequest::default().with_name(name("nope")),
            TopicRequest::default().with_name(name("pages-a")),
        ])
        .with_response_partition_limit(3);
    let first = client.call(0, &request).await;
    let codes: Vec<i16> = first.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, [3, 0, 0], "in name order: nope, pages-a, pages-b");
    let counts: Vec<usize> = first.topics.iter().map(|t| t.partitions.len()).collect();
    assert_eq!(counts, [0, 2, 1], "three partitions in all, pages-b cut after its first");
    let cursor = first.next_cursor.clone().expect("a cursor");
    assert_eq!((cursor.topic_name.to_string(), cursor.partition_index), ("pages-b".to_string(), 1));

    let rest = client
        .call(
            0,
            &request.clone().with_cursor(Some(
                Cursor::default().with_topic_name(cursor.topic_name).with_partition_index(cursor.partition_index),
            )),
        )
        .await;
    assert_eq!(rest.topics.len(), 1);
    let indexes: Vec<i32> = rest.topics[0].partitions.iter().map(|p| p.partition_index).collect();
    assert_eq!(indexes, [1, 2]);
    assert!(rest.next_cursor.is_none());
}
