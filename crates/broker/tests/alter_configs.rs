//! IncrementalAlterConfigs, AlterConfigs, DescribeLogDirs and
//! OffsetForLeaderEpoch over the wire.

mod common;

use common::*;
use kafgres_wire::error_code;
use kafka_protocol::messages::{
    AlterConfigsRequest, DescribeLogDirsRequest, IncrementalAlterConfigsRequest, OffsetForLeaderEpochRequest,
};
use kafka_protocol::protocol::StrBytes;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// An IncrementalAlterConfigs resource: (name, operation, value) per config.
fn incremental_resource(
    resource_type: i8,
    name: &str,
    configs: &[(&str, i8, Option<&str>)],
) -> kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    AlterConfigsResource::default().with_resource_type(resource_type).with_resource_name(s(name)).with_configs(
        configs
            .iter()
            .map(|(k, op, v)| {
                AlterableConfig::default().with_name(s(k)).with_config_operation(*op).with_value(v.map(s))
            })
            .collect(),
    )
}

/// Sends one IncrementalAlterConfigs (v1) and returns (error code, message) per resource.
async fn incremental(
    client: &mut Client,
    validate_only: bool,
    resources: Vec<kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource>,
) -> Vec<(i16, Option<String>)> {
    let request = IncrementalAlterConfigsRequest::default().with_resources(resources).with_validate_only(validate_only);
    let response = client.call(1, &request).await;
    response.responses.iter().map(|r| (r.error_code, r.error_message.as_ref().map(|m| m.to_string()))).collect()
}

async fn set_one(client: &mut Client, topic: &str, name: &str, value: &str) -> i16 {
    incremental(client, false, vec![incremental_resource(2, topic, &[(name, SET, Some(value))])]).await[0].0
}

fn map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_alter_sets_and_deletes_and_survives_a_restart() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "tuned", 2).await;

    let answers = incremental(
        &mut client,
        false,
        vec![incremental_resource(
            2,
            "tuned",
            &[("retention.ms", SET, Some("3600000")), ("cleanup.policy", APPEND, Some("compact"))],
        )],
    )
    .await;
    assert_eq!(answers, vec![(0, None)]);
    let expected = map(&[("cleanup.policy", "delete,compact"), ("retention.ms", "3600000")]);
    assert_eq!(topic_configs(&mut client, "tuned").await, expected, "DescribeConfigs shows the overrides");
    assert_eq!(broker.catalog.topics()[0].configs, expected, "stored in the catalog");

    // DELETE goes back to the default.
    let answers =
        incremental(&mut client, false, vec![incremental_resource(2, "tuned", &[("cleanup.policy", DELETE, None)])])
            .await;
    assert_eq!(answers, vec![(0, None)]);
    assert_eq!(topic_configs(&mut client, "tuned").await, map(&[("retention.ms", "3600000")]));

    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    let mut client = broker.client().await;
    assert_eq!(
        topic_configs(&mut client, "tuned").await,
        map(&[("retention.ms", "3600000")]),
        "the altered configs survive a restart"
    );
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_only_checks_and_writes_nothing() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "checked", 1).await;
    let resource = || incremental_resource(2, "checked", &[("retention.ms", SET, Some("1000"))]);
    assert_eq!(incremental(&mut client, true, vec![resource()]).await, vec![(0, None)]);
    assert!(topic_configs(&mut client, "checked").await.is_empty(), "nothing applied");
    assert!(broker.catalog.topics()[0].configs.is_empty(), "nothing stored");
    let bad = incremental_resource(2, "checked", &[("retention.ms", SET, Some("soon"))]);
    assert_eq!(incremental(&mut client, true, vec![bad]).await[0].0, 40, "validation still refuses bad values");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_alterations_get_kafkas_error_codes() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "guarded", 1).await;
    let answers = incremental(
        &mut client,
        false,
        vec![
            incremental_resource(2, "absent", &[("retention.ms", SET, Some("1000"))]),
            incremental_resource(2, "guarded", &[("no.such.config", SET, Some("1"))]),
        ],
    )
    .await;
    assert_eq!(answers[0], (error_code::UNKNOWN_TOPIC_OR_PARTITION, Some("The topic 'absent' does not exist.".into())));
    assert_eq!(answers[1], (error_code::INVALID_CONFIG, Some("Unknown topic config name: no.such.config".into())));

    // (changes, expected code, expected message)
    type Case = (Vec<(&'static str, i8, Option<&'static str>)>, i16, &'static str);
    let cases: Vec<Case> = vec![
        (
            vec![("retention.ms", SET, Some("abc"))],
            40,
            "Invalid value abc for configuration retention.ms: Not a number of type LONG",
        ),
        (
            vec![("retention.ms", APPEND, Some("1"))],
            40,
            "Can't APPEND to key retention.ms because its type is not LIST.",
        ),
        (vec![("retention.ms", SET, None)], 42, "Null value not supported for : retention.ms"),
        (
            vec![("retention.ms", SET, Some("1")), ("retention.ms", DELETE, None)],
            42,
            "Error due to duplicate config keys",
        ),
        (vec![("retention.ms", 7, Some("1"))], 42, "Unknown alter config operation type 7"),
        (
            vec![("message.timestamp.type", SET, Some("Whenever"))],
            40,
            "Invalid value Whenever for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime",
        ),
    ];
    for (configs, code, message) in cases {
        let answers = incremental(&mut client, false, vec![incremental_resource(2, "guarded", &configs)]).await;
        assert_eq!(answers, vec![(code, Some(message.to_owned()))], "{configs:?}");
    }
    assert!(topic_configs(&mut client, "guarded").await.is_empty(), "no refused change was applied");

    // A resource named twice: both refused.
    let twice = || incremental_resource(2, "guarded", &[("retention.ms", SET, Some("1000"))]);
    let answers = incremental(&mut client, false, vec![twice(), twice()]).await;
    assert!(answers.iter().all(|a| a.0 == 42), "{answers:?}");

    // A broker config Kafgres cannot change at runtime is refused per resource, never a dropped connection.
    let answers = incremental(
        &mut client,
        false,
        vec![
            incremental_resource(4, "1", &[("auto.create.topics.enable", SET, Some("false"))]),
            incremental_resource(4, "", &[]),
            incremental_resource(4, "7", &[("log.retention.ms", SET, Some("1000"))]),
            incremental_resource(8, "1", &[("kafka.server", SET, Some("DEBUG"))]),
        ],
    )
    .await;
    let codes: Vec<i16> = answers.iter().map(|a| a.0).collect();
    assert_eq!(codes, vec![42, 0, 42, 42]);
    assert_eq!(answers[0].1.as_deref(), Some("Cannot update these configs dynamically: [auto.create.topics.enable]"));
    assert_eq!(answers[2].1.as_deref(), Some("Unexpected broker id, expected 1, but received 7"));
    // Clearing what is not set (as the reassignment tool does) is a no-op; a SET of a static config with it is
    // still refused.
    for (changes, code) in [
        (vec![("leader.replication.throttled.rate", DELETE, None), ("log.retention.ms", DELETE, None)], 0),
        (vec![("leader.replication.throttled.rate", DELETE, None), ("num.partitions", SET, Some("3"))], 42),
    ] {
        let answers = incremental(&mut client, false, vec![incremental_resource(4, "1", &changes)]).await;
        assert_eq!(answers[0].0, code, "{changes:?}: {answers:?}");
    }
    assert!(broker.catalog.broker_configs().is_empty(), "nothing stored");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_configs_replaces_the_whole_override_set() {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "replaced", 1).await;
    assert_eq!(set_one(&mut client, "replaced", "retention.ms", "1000").await, 0);
    let resource = |configs: &[(&str, Option<&str>)]| {
        AlterConfigsResource::default().with_resource_type(2).with_resource_name(s("replaced")).with_configs(
            configs.iter().map(|(k, v)| AlterableConfig::default().with_name(s(k)).with_value(v.map(s))).collect(),
        )
    };
    let call = |configs: Vec<AlterConfigsResource>, validate_only: bool| {
        AlterConfigsRequest::default().with_resources(configs).with_validate_only(validate_only)
    };
    let r = client.call(2, &call(vec![resource(&[("max.message.bytes", Some("500"))])], false)).await;
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(topic_configs(&mut client, "replaced").await, map(&[("max.message.bytes", "500")]));

    // The new max.message.bytes applies to the next produce.
    let p = produce(&mut client, 9, "replaced", 0, -1, batch(&records("big", 20))).await;
    assert_eq!(p.error_code, error_code::MESSAGE_TOO_LARGE, "MESSAGE_TOO_LARGE under the altered limit");

    let r = client.call(0, &call(vec![resource(&[("segment.ms", None)])], false)).await;
    assert_eq!(r.responses[0].error_code, error_code::INVALID_REQUEST, "a null value");
    let r = client.call(1, &call(vec![resource(&[("retention.ms", Some("-5"))])], false)).await;
    assert_eq!(r.responses[0].error_code, error_code::INVALID_CONFIG, "below retention.ms's minimum");
    let r = client.call(1, &call(vec![resource(&[])], true)).await;
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(topic_configs(&mut client, "replaced").await.len(), 1, "validate_only changed nothing");
    let r = client.call(1, &call(vec![resource(&[])], false)).await;
    assert_eq!(r.responses[0].error_code, 0);
    assert!(topic_configs(&mut client, "replaced").await.is_empty(), "an empty set removes every override");
    let p = produce(&mut client, 9, "replaced", 0, -1, batch(&records("big", 20))).await;
    assert_eq!(p.error_code, 0, "back to the broker's limit");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lowered_retention_takes_effect_at_once() {
    use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
    use kafka_protocol::messages::CreateTopicsRequest;
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    // Small segments (CreateTopics stores segment.bytes as given), default retention.
    let topic = creatable("shrinking", 1, 1)
        .with_configs(vec![CreatableTopicConfig::default().with_name(s("segment.bytes")).with_value(Some(s("1000")))]);
    assert_eq!(client.call(7, &CreateTopicsRequest::default().with_topics(vec![topic])).await.topics[0].error_code, 0);
    // Stamped now, so the default retention.ms (7 days) deletes nothing.
    let now = kafgres_broker::now_ms();
    for i in 0..30 {
        let fresh: Vec<_> = records(&format!("r{i}"), 1)
            .into_iter()
            .map(|r| kafgres_record::build::NewRecord { timestamp_ms: now, ..r })
            .collect();
        produce(&mut client, 9, "shrinking", 0, -1, batch(&fresh)).await;
    }
    assert_eq!(list_offset(&mut client, 7, "shrinking", 0, -2).await.offset, 0, "nothing deleted yet");
    assert_eq!(set_one(&mut client, "shrinking", "retention.bytes", "1000").await, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut earliest = 0;
    while earliest == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        earliest = list_offset(&mut client, 7, "shrinking", 0, -2).await.offset;
    }
    assert!(earliest > 0, "retention.bytes applied without waiting for another roll");
    assert!(earliest < 30, "the active segment stays");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_log_dirs_reports_partition_sizes() {
    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "sized", 2).await;
    create_topic(&mut client, "other", 1).await;
    produce(&mut client, 9, "sized", 1, -1, batch(&records("x", 5))).await;

    let files_bytes = |partition: i32| -> i64 {
        std::fs::read_dir(broker.dir.path().join(format!("sized-{partition}")))
            .expect("partition dir")
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len() as i64)
            .sum()
    };
    // The first flush is followed by a recovery-point checkpoint, written in
    // the background: wait until the files stop changing.
    let mut settled = (files_bytes(0), files_bytes(1));
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let now = (files_bytes(0), files_bytes(1));
        if now == settled {
            break;
        }
        settled = now;
    }
    let request = DescribeLogDirsRequest::default().with_topics(Some(vec![
        DescribableLogDirTopic::default().with_topic(name("sized")).with_partitions(vec![0, 1, 9]),
        DescribableLogDirTopic::default().with_topic(name("absent")).with_partitions(vec![0]),
    ]));
    for version in 1..=4 {
        let r = client.call(version, &request).await;
        assert_eq!(r.results.len(), 1);
        let dir = &r.results[0];
        assert_eq!(dir.error_code, 0);
        assert_eq!(dir.log_dir.as_str(), broker.dir.path().display().to_string());
        assert_eq!(dir.topics.len(), 1, "unknown topics and partitions are left out");
        let sizes: Vec<(i32, i64, i64, bool)> = dir.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.partition_size, p.offset_lag, p.is_future_key))
            .collect();
        assert_eq!(sizes, vec![(0, files_bytes(0), 0, false), (1, files_bytes(1), 0, false)]);
        assert!(sizes[1].1 > sizes[0].1, "the written partition is larger");
        if version >= 4 {
            assert!(dir.total_bytes > 0 && dir.usable_bytes > 0 && dir.usable_bytes <= dir.total_bytes);
        } else {
            assert_eq!((dir.total_bytes, dir.usable_bytes), (-1, -1));
        }
    }
    let all = client.call(4, &DescribeLogDirsRequest::default().with_topics(None)).await;
    let mut names: Vec<String> = all.results[0].topics.iter().map(|t| t.name.0.to_string()).collect();
    names.sort();
    assert_eq!(names, vec!["other", "sized"], "null asks for every topic");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_for_leader_epoch_answers_epoch_zero() {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
    use kafka_protocol::messages::BrokerId;
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "epochs", 1).await;
    produce(&mut client, 9, "epochs", 0, -1, batch(&records("e", 3))).await;
    let partition = |index: i32, current: i32, epoch: i32| {
        OffsetForLeaderPartition::default()
            .with_partition(index)
            .with_current_leader_epoch(current)
            .with_leader_epoch(epoch)
    };
    let request = OffsetForLeaderEpochRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        OffsetForLeaderTopic::default().with_topic(name("epochs")).with_partitions(vec![
            partition(0, 0, 0),
            partition(0, -1, 0),
            partition(0, 0, 3),
            partition(0, -1, -1),
            partition(0, 1, 0),
            partition(0, -3, 0),
            partition(5, 0, 0),
        ]),
        OffsetForLeaderTopic::default().with_topic(name("absent")).with_partitions(vec![partition(0, 0, 0)]),
    ]);
    for version in 2..=4 {
        let r = client.call(version, &request).await;
        let answers: Vec<Vec<(i16, i32, i32, i64)>> = r
            .topics
            .iter()
            .map(|t| t.partitions.iter().map(|p| (p.error_code, p.partition, p.leader_epoch, p.end_offset)).collect())
            .collect();
        assert_eq!(
            answers,
            vec![
                vec![
                    (0, 0, 0, 3),
                    (0, 0, 0, 3),
                    (0, 0, -1, -1),
                    (0, 0, -1, -1),
                    (75, 0, -1, -1),
                    (74, 0, -1, -1),
                    (3, 5, -1, -1),
                ],
                vec![(3, 0, -1, -1)],
            ],
            "v{version}"
        );
    }
    broker.broker.shutdown().await;
}

// ---------------------------------------------------------------- dynamic broker configs

const SUBTRACT: i8 = 3;
const BROKER: i8 = 4;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

/// One described config: value, source, read-only, synonyms as (name, value, source).
type Described = (Option<String>, i8, bool, Vec<(String, Option<String>, i8)>);

/// DescribeConfigs (v4, with synonyms) of a resource: every config by name, or the error.
async fn describe(
    client: &mut Client,
    resource_type: i8,
    name: &str,
) -> Result<std::collections::BTreeMap<String, Described>, (i16, Option<String>)> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::DescribeConfigsRequest;
    let request = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configuration_keys(None)])
        .with_include_synonyms(true);
    let response = client.call(4, &request).await;
    let result = &response.results[0];
    if result.error_code != 0 {
        return Err((result.error_code, result.error_message.as_ref().map(|m| m.to_string())));
    }
    Ok(result
        .configs
        .iter()
        .map(|c| {
            let synonyms = c
                .synonyms
                .iter()
                .map(|s| (s.name.to_string(), s.value.as_ref().map(|v| v.to_string()), s.source))
                .collect();
            (c.name.to_string(), (c.value.as_ref().map(|v| v.to_string()), c.config_source, c.read_only, synonyms))
        })
        .collect())
}

fn synonym(name: &str, value: &str, source: i8) -> (String, Option<String>, i8) {
    (name.to_owned(), Some(value.to_owned()), source)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_broker_configs_are_set_deleted_appended_described_and_survive_a_restart() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "defaults", 1).await;
    let answers = incremental(
        &mut client,
        false,
        vec![
            incremental_resource(BROKER, "1", &[("log.retention.ms", SET, Some("3600000"))]),
            incremental_resource(
                BROKER,
                "",
                &[("max.connections", SET, Some("50")), ("log.cleanup.policy", APPEND, Some("compact"))],
            ),
        ],
    )
    .await;
    assert_eq!(answers, vec![(0, None), (0, None)]);
    assert_eq!(
        broker.catalog.broker_configs(),
        vec![
            (-1, map(&[("log.cleanup.policy", "delete,compact"), ("max.connections", "50")])),
            (1, map(&[("log.retention.ms", "3600000")])),
        ],
        "stored before the answer"
    );
    assert_eq!(broker.broker.context().config.live.connections_max(), 50, "in force");

    let configs = describe(&mut client, BROKER, "1").await.expect("described");
    assert_eq!(
        configs["log.retention.ms"],
        (
            Some("3600000".into()),
            DYNAMIC_BROKER_CONFIG,
            false,
            vec![synonym("log.retention.ms", "3600000", DYNAMIC_BROKER_CONFIG)]
        )
    );
    assert_eq!(
        configs["max.connections"],
        (
            Some("50".into()),
            DYNAMIC_DEFAULT_BROKER_CONFIG,
            false,
            vec![
                synonym("max.connections", "50", DYNAMIC_DEFAULT_BROKER_CONFIG),
                synonym("max.connections", "1000", STATIC_BROKER_CONFIG),
                synonym("max.connections", "2147483647", DEFAULT_CONFIG),
            ]
        )
    );
    assert!(configs["num.partitions"].2, "a config Kafka cannot change dynamically stays read-only");
    // The cluster default lists only what is set there, as Kafka answers it.
    let defaults = describe(&mut client, BROKER, "").await.expect("described");
    assert_eq!(defaults.keys().collect::<Vec<_>>(), ["log.cleanup.policy", "max.connections"]);
    assert_eq!(defaults["max.connections"].1, DYNAMIC_DEFAULT_BROKER_CONFIG);
    // Topics without an override take the dynamic defaults, sourced as Kafka sources them.
    let topic = describe(&mut client, 2, "defaults").await.expect("described");
    assert_eq!(topic["retention.ms"].0.as_deref(), Some("3600000"));
    assert_eq!(topic["retention.ms"].1, DYNAMIC_BROKER_CONFIG);
    assert_eq!(
        topic["cleanup.policy"].3,
        vec![
            synonym("log.cleanup.policy", "delete,compact", DYNAMIC_DEFAULT_BROKER_CONFIG),
            synonym("log.cleanup.policy", "delete", DEFAULT_CONFIG),
        ]
    );

    // SUBTRACT, then DELETE back to the static and default values.
    let answers = incremental(
        &mut client,
        false,
        vec![
            incremental_resource(BROKER, "1", &[("log.retention.ms", DELETE, None)]),
            incremental_resource(BROKER, "", &[("log.cleanup.policy", SUBTRACT, Some("delete"))]),
        ],
    )
    .await;
    assert_eq!(answers, vec![(0, None), (0, None)]);
    let configs = describe(&mut client, BROKER, "1").await.expect("described");
    assert_eq!(configs["log.retention.ms"], (None, DEFAULT_CONFIG, false, vec![]), "unset again: no value");
    assert_eq!(configs["log.cleanup.policy"].0.as_deref(), Some("compact"));
    assert_eq!(broker.catalog.broker_configs().len(), 1, "the broker's row set is gone");

    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    let mut client = broker.client().await;
    let configs = describe(&mut client, BROKER, "1").await.expect("described");
    assert_eq!(configs["max.connections"].0.as_deref(), Some("50"), "loaded at start");
    assert_eq!(configs["log.cleanup.policy"].1, DYNAMIC_DEFAULT_BROKER_CONFIG);
    assert_eq!(broker.broker.context().config.live.connections_max(), 50, "in force after the restart");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_broker_value_beats_the_default_and_a_lowered_per_ip_limit_refuses_the_next_connection() {
    use kafka_protocol::messages::ApiVersionsRequest;
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let set = |name: &'static str, value: &'static str| {
        incremental_resource(BROKER, name, &[]).with_configs(vec![
            kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig::default()
                .with_name(s("max.connections.per.ip"))
                .with_config_operation(SET)
                .with_value(Some(s(value))),
        ])
    };
    assert_eq!(incremental(&mut client, false, vec![set("", "5"), set("1", "2")]).await, vec![(0, None), (0, None)]);
    let configs = describe(&mut client, BROKER, "1").await.expect("described");
    assert_eq!(
        configs["max.connections.per.ip"],
        (
            Some("2".into()),
            DYNAMIC_BROKER_CONFIG,
            false,
            vec![
                synonym("max.connections.per.ip", "2", DYNAMIC_BROKER_CONFIG),
                synonym("max.connections.per.ip", "5", DYNAMIC_DEFAULT_BROKER_CONFIG),
                synonym("max.connections.per.ip", "2147483647", DEFAULT_CONFIG),
            ]
        )
    );
    // This client and one more from 127.0.0.1; the third is closed unanswered.
    let mut second = broker.client().await;
    assert_eq!(second.call(2, &ApiVersionsRequest::default()).await.error_code, 0);
    let mut third = broker.client().await;
    assert!(third.try_call(2, &ApiVersionsRequest::default()).await.is_err(), "over max.connections.per.ip");
    // An override for another loopback address lets it open more than the default allows.
    let overrides =
        incremental_resource(BROKER, "1", &[("max.connections.per.ip.overrides", SET, Some("127.0.0.2:3"))]);
    assert_eq!(incremental(&mut client, false, vec![overrides]).await, vec![(0, None)]);
    let mut others = Vec::new();
    for _ in 0..3 {
        let mut other = Client::connect_from("127.0.0.2".parse().expect("address"), broker.addr()).await;
        assert_eq!(other.call(2, &ApiVersionsRequest::default()).await.error_code, 0);
        others.push(other);
    }
    let mut fourth = Client::connect_from("127.0.0.2".parse().expect("address"), broker.addr()).await;
    assert!(fourth.try_call(2, &ApiVersionsRequest::default()).await.is_err(), "over its override");
    // Deleting the broker's value falls back to the default's 5.
    let delete = incremental_resource(BROKER, "1", &[("max.connections.per.ip", DELETE, None)]);
    assert_eq!(incremental(&mut client, false, vec![delete]).await, vec![(0, None)]);
    let mut again = broker.client().await;
    assert_eq!(again.call(2, &ApiVersionsRequest::default()).await.error_code, 0, "under the default's limit");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_dynamic_broker_configs_get_kafkas_errors_and_validate_only_stores_nothing() {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    // (resource name, changes, expected code, expected message)
    type Case = (&'static str, Vec<(&'static str, i8, Option<&'static str>)>, i16, &'static str);
    let cases: Vec<Case> = vec![
        (
            "1",
            vec![("max.connections", SET, Some("abc"))],
            42,
            "Invalid value abc for configuration max.connections: Not a number of type INT",
        ),
        (
            "",
            vec![("log.retention.ms", SET, Some("-5"))],
            42,
            "Invalid value -5 for configuration log.retention.ms: Value must be at least -1",
        ),
        (
            "1",
            vec![("log.cleanup.policy", SET, Some("sometimes"))],
            42,
            "Invalid value sometimes for configuration log.cleanup.policy: String must be one of: compact, delete",
        ),
        ("1", vec![("max.connections", APPEND, Some("1"))], 40, "Config value append is not allowed for config key: max.connections"),
        (
            "1",
            vec![("max.connections.per.ip", SET, Some("0"))],
            42,
            "requirement failed: max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set.",
        ),
        (
            "1",
            vec![("max.connections.per.ip.overrides", SET, Some("localhost:5"))],
            42,
            "max.connections.per.ip.overrides contains invalid addresses : localhost",
        ),
        (
            "1",
            vec![("connections.max.idle.ms", SET, Some("1000")), ("socket.request.max.bytes", SET, Some("1000"))],
            42,
            "Cannot update these configs dynamically: [connections.max.idle.ms, socket.request.max.bytes]",
        ),
        ("abc", vec![("max.connections", SET, Some("1"))], 42, "Node id must be an integer, but it is: abc"),
        ("1", vec![("max.connections", 9, Some("1"))], 42, "Unknown operations type 9"),
    ];
    for (name, configs, code, message) in cases {
        let answers = incremental(&mut client, false, vec![incremental_resource(BROKER, name, &configs)]).await;
        assert_eq!(answers, vec![(code, Some(message.to_owned()))], "{name:?} {configs:?}");
    }
    assert!(broker.catalog.broker_configs().is_empty(), "no refused change was stored");

    // validate_only checks and stores nothing.
    let resource = || incremental_resource(BROKER, "1", &[("max.connections", SET, Some("10"))]);
    assert_eq!(incremental(&mut client, true, vec![resource()]).await, vec![(0, None)]);
    assert!(broker.catalog.broker_configs().is_empty(), "validate_only stored nothing");
    assert_eq!(broker.broker.context().config.live.connections_max(), 1000, "validate_only applied nothing");
    let bad = incremental_resource(BROKER, "1", &[("max.connections", SET, Some("-1"))]);
    assert_eq!(incremental(&mut client, true, vec![bad]).await[0].0, 42, "validation still refuses bad values");

    // AlterConfigs replaces the resource's whole set (what kafka-configs --alter sends for brokers).
    let resource = |name: &str, configs: &[(&str, &str)]| {
        AlterConfigsResource::default().with_resource_type(BROKER).with_resource_name(s(name)).with_configs(
            configs.iter().map(|(k, v)| AlterableConfig::default().with_name(s(k)).with_value(Some(s(v)))).collect(),
        )
    };
    let call = |resources: Vec<AlterConfigsResource>, validate_only: bool| {
        AlterConfigsRequest::default().with_resources(resources).with_validate_only(validate_only)
    };
    let r = client
        .call(2, &call(vec![resource("1", &[("max.connections", "10"), ("log.retention.bytes", "99")])], false))
        .await;
    assert_eq!(r.responses[0].error_code, 0, "{:?}", r.responses[0].error_message);
    assert_eq!(
        broker.catalog.broker_configs(),
        vec![(1, map(&[("log.retention.bytes", "99"), ("max.connections", "10")]))]
    );
    let r = client.call(2, &call(vec![resource("1", &[("max.connections", "20")])], true)).await;
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(broker.broker.context().config.live.connections_max(), 10, "validate_only");
    let r = client.call(2, &call(vec![resource("1", &[("num.partitions", "3")])], false)).await;
    assert_eq!(
        (r.responses[0].error_code, r.responses[0].error_message.as_ref().map(|m| m.to_string())),
        (42, Some("Cannot update these configs dynamically: [num.partitions]".into()))
    );
    let r = client.call(2, &call(vec![resource("1", &[])], false)).await;
    assert_eq!(r.responses[0].error_code, 0);
    assert!(broker.catalog.broker_configs().is_empty(), "an empty set removes every dynamic config");
    assert_eq!(broker.broker.context().config.live.connections_max(), 1000, "back to the static value");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_dynamic_values_and_topic_defaults_apply_to_produce() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "bounded", 1).await;
    create_topic(&mut client, "roomy", 1).await;
    assert_eq!(set_one(&mut client, "roomy", "max.message.bytes", "1000000").await, 0);
    let answers = incremental(
        &mut client,
        false,
        vec![incremental_resource(
            BROKER,
            "",
            &[("message.max.bytes", SET, Some("500")), ("max.connections", SET, Some("40"))],
        )],
    )
    .await;
    assert_eq!(answers, vec![(0, None)]);
    let p = produce(&mut client, 9, "bounded", 0, -1, batch(&records("big", 20))).await;
    assert_eq!(p.error_code, error_code::MESSAGE_TOO_LARGE, "the dynamic message.max.bytes applies");
    let p = produce(&mut client, 9, "roomy", 0, -1, batch(&records("big", 20))).await;
    assert_eq!(p.error_code, 0, "a topic's own max.message.bytes beats it");

    // A reload (SIGHUP) brings new static settings; the dynamic max.connections stays over them.
    let live = std::sync::Arc::clone(&broker.broker.context().config.live);
    let reloaded =
        kafgres_broker::settings::Reloadable { connections_max: 900, ..live.statics().expect("statics after start") };
    broker.broker.reload(&reloaded);
    assert_eq!(live.connections_max(), 40, "a reload does not undo a dynamic value");
    let delete =
        incremental_resource(BROKER, "", &[("max.connections", DELETE, None), ("message.max.bytes", DELETE, None)]);
    assert_eq!(incremental(&mut client, false, vec![delete]).await, vec![(0, None)]);
    assert_eq!(live.connections_max(), 900, "the reloaded static value once the dynamic one is gone");
    let p = produce(&mut client, 9, "bounded", 0, -1, batch(&records("big", 20))).await;
    assert_eq!(p.error_code, 0, "back to the broker's message.max.bytes");
    broker.broker.shutdown().await;
}
