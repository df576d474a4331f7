//! Building librdkafka clients with the benchmark's defaults, and making sure
//! the topic exists.
//!
//! Every client starts from the same settings (bootstrap servers, no
//! idempotence, a bounded message timeout), then the workload's own, then the
//! user's `--set key=value` pairs, which win. The full list goes to stderr so
//! a result can always be reproduced.

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::{ClientConfig, FromClientConfig};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::BaseProducer;
use rdkafka::types::RDKafkaErrorCode;

use crate::cli::Common;
use crate::error::BenchError;

/// How long one metadata or offsets request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long topic creation waits for the topic to show up with leaders.
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A point in time after which a workload stops waiting, whatever it was
/// doing, and reports what it has. Every loop checks one.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(pub Instant);

impl Deadline {
    pub fn after(span: Duration) -> Deadline {
        Deadline(Instant::now() + span)
    }

    pub fn passed(&self) -> bool {
        Instant::now() >= self.0
    }

    pub fn remaining(&self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }
}

/// Settings shared by every client.
fn base_config(common: &Common) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &common.bootstrap);
    config
}

fn apply_user_settings(config: &mut ClientConfig, common: &Common) {
    for (key, value) in &common.settings {
        config.set(key, value);
    }
}

fn describe(role: &str, config: &ClientConfig) {
    let mut pairs: Vec<_> = config.config_map().iter().collect();
    pairs.sort();
    let pairs: Vec<String> = pairs.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    eprintln!("kafgres-bench: {role} config: {}", pairs.join(" "));
}

/// A producer with `acks`, the given `linger.ms` (None keeps librdkafka's
/// default) and a message timeout, then the user's settings.
pub fn producer(
    common: &Common,
    acks: &str,
    linger_ms: Option<u32>,
    message_timeout: Duration,
    quiet: bool,
) -> Result<BaseProducer, BenchError> {
    producer_with(common, acks, linger_ms, message_timeout, &[], quiet)
}

/// [`producer`] with the workload's own extra settings (`workload_settings`),
/// applied before the user's, which still win.
pub fn producer_with(
    common: &Common,
    acks: &str,
    linger_ms: Option<u32>,
    message_timeout: Duration,
    workload_settings: &[(&str, String)],
    quiet: bool,
) -> Result<BaseProducer, BenchError> {
    let mut config = base_config(common);
    config
        .set("acks", acks)
        // Plain produce on every broker alike (no InitProducerId, no
        // sequence numbers): librdkafka's default, stated here so a reader
        // need not know that.
        .set("enable.idempotence", "false")
        .set("message.timeout.ms", message_timeout.as_millis().to_string());
    if let Some(linger_ms) = linger_ms {
        config.set("linger.ms", linger_ms.to_string());
    }
    for (key, value) in workload_settings {
        config.set(*key, value);
    }
    apply_user_settings(&mut config, common);
    if !quiet {
        describe("producer", &config);
    }
    BaseProducer::from_config(&config).map_err(|source| BenchError::ClientCreation { role: "producer", source })
}

/// A consumer for `assign()` only. librdkafka refuses `assign()` without a
/// `group.id`, so a throwaway one is set; nothing joins a group or commits
/// (no FindCoordinator, JoinGroup or OffsetCommit is needed from the broker).
pub fn consumer(common: &Common) -> Result<BaseConsumer, BenchError> {
    let mut config = base_config(common);
    config
        .set("group.id", format!("kafgres-bench-unused-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        // An out-of-range start is an error, never a silent jump.
        .set("auto.offset.reset", "error");
    apply_user_settings(&mut config, common);
    describe("consumer", &config);
    BaseConsumer::from_config(&config).map_err(|source| BenchError::ClientCreation { role: "consumer", source })
}

/// An admin client with the common settings and the user's.
pub fn admin(common: &Common) -> Result<AdminClient<DefaultClientContext>, BenchError> {
    let mut config = base_config(common);
    apply_user_settings(&mut config, common);
    AdminClient::from_config(&config).map_err(|source| BenchError::ClientCreation { role: "admin", source })
}

/// Admin request options bounded by [`REQUEST_TIMEOUT`].
pub fn admin_options() -> AdminOptions {
    AdminOptions::new().request_timeout(Some(REQUEST_TIMEOUT)).operation_timeout(Some(REQUEST_TIMEOUT))
}

/// With `--create-partitions P`: creates `topic` with P partitions and
/// replication factor 1 unless it exists, then waits until its metadata shows
/// every partition with a leader. Without it, does nothing.
pub fn ensure_topic(common: &Common, topic: &str) -> Result<(), BenchError> {
    match common.create_partitions {
        Some(partition_count) => create_topic_if_missing(common, topic, partition_count),
        None => Ok(()),
    }
}

/// Creates `topic` with `partition_count` partitions and replication factor 1
/// unless it exists, then waits until every partition has a leader.
pub fn create_topic_if_missing(common: &Common, topic: &str, partition_count: i32) -> Result<(), BenchError> {
    let admin = admin(common)?;
    let mut new_topic = NewTopic::new(topic, partition_count, TopicReplication::Fixed(1));
    for (key, value) in &common.topic_configs {
        new_topic = new_topic.set(key, value);
    }
    let results = futures_executor::block_on(admin.create_topics([&new_topic], &admin_options()))
        .map_err(|source| BenchError::client(format!("CreateTopics for {topic}"), source))?;
    for result in results {
        match result {
            Ok(name) => eprintln!(
                "kafgres-bench: created topic {name} with {partition_count} partitions{}",
                describe_topic_configs(&common.topic_configs)
            ),
            Err((name, RDKafkaErrorCode::TopicAlreadyExists)) => {
                eprintln!("kafgres-bench: topic {name} already exists; kept as it is")
            }
            Err((name, code)) => return Err(BenchError::TopicCreation { topic: name, code }),
        }
    }
    wait_for_leaders(&admin, topic)
}

fn describe_topic_configs(configs: &[(String, String)]) -> String {
    if configs.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(" and config {}", pairs.join(" "))
}

fn wait_for_leaders(admin: &AdminClient<DefaultClientContext>, topic: &str) -> Result<(), BenchError> {
    let deadline = Deadline::after(TOPIC_READY_TIMEOUT);
    loop {
        let metadata = admin
            .inner()
            .fetch_metadata(Some(topic), REQUEST_TIMEOUT.min(deadline.remaining().max(Duration::from_millis(1))))
            .map_err(|source| BenchError::client(format!("Metadata for {topic}"), source))?;
        let ready = metadata.topics().iter().find(|t| t.name() == topic).is_some_and(|t| {
            t.error().is_none()
                && !t.partitions().is_empty()
                && t.partitions().iter().all(|p| p.error().is_none() && p.leader() >= 0)
        });
        if ready {
            return Ok(());
        }
        if deadline.passed() {
            return Err(BenchError::Topic {
                topic: topic.to_string(),
                reason: format!("no leader for every partition within {}s", TOPIC_READY_TIMEOUT.as_secs()),
            });
        }
        // Metadata is a request/response round trip, not an event to block
        // on; a short pause between attempts keeps this from hammering.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The partitions of `topic` and, for each, its [low, high) watermarks, i.e.
/// the offsets of the first record and one past the last.
pub fn partition_watermarks(consumer: &BaseConsumer, topic: &str) -> Result<Vec<(i32, i64, i64)>, BenchError> {
    let metadata = consumer
        .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
        .map_err(|source| BenchError::client(format!("Metadata for {topic}"), source))?;
    let topic_metadata = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or_else(|| BenchError::Topic { topic: topic.to_string(), reason: "not in the metadata".into() })?;
    if let Some(err) = topic_metadata.error() {
        return Err(BenchError::Topic {
            topic: topic.to_string(),
            reason: format!("{} (create it with --create-partitions P)", RDKafkaErrorCode::from(err)),
        });
    }
    let mut partitions: Vec<i32> = topic_metadata.partitions().iter().map(|p| p.id()).collect();
    partitions.sort_unstable();
    if partitions.is_empty() {
        return Err(BenchError::Topic { topic: topic.to_string(), reason: "has no partitions".into() });
    }
    partitions
        .into_iter()
        .map(|p| {
            let (low, high) = consumer
                .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
                .map_err(|source| BenchError::client(format!("ListOffsets for {topic}[{p}]"), source))?;
            Ok((p, low, high))
        })
        .collect()
}
