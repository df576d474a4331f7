//! Topic-level configuration names Kafka 4.x accepts.
//!
//! CreateTopics refuses any other name with INVALID_CONFIG, as Kafka does.
//! Values are stored as given; which of them the broker acts on is listed in
//! docs/configuration.md (segment.bytes so far; the rest are kept for
//! DescribeConfigs and later features).

/// Every topic config name of Kafka 4.x (`TopicConfig`, `LogConfig`).
pub const TOPIC_CONFIG_NAMES: &[&str] = &[
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
];

/// Checks config names; the error is Kafka's message for an unknown name.
pub fn validate_topic_config_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
    for name in names {
        if !TOPIC_CONFIG_NAMES.contains(&name) {
            return Err(format!("Unknown topic config name: {name}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_pass_and_unknown_fail() {
        assert!(validate_topic_config_names(["retention.ms", "segment.bytes"]).is_ok());
        assert_eq!(
            validate_topic_config_names(["retention.ms", "no.such.config"]),
            Err("Unknown topic config name: no.such.config".into())
        );
    }
}
