//! The in-memory registry of topics and their open partitions.
//!
//! Built at startup from the catalog's topic records; a topic enters it only
//! after the catalog has stored it durably. The registry lock is never held
//! across an `.await` or any I/O.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafgres_log::{LogConfig, LogError, PartitionLog};
use uuid::Uuid;

use crate::catalog::TopicRecord;
use crate::config::BrokerConfig;
use crate::partition::Partition;

/// Kafka's limit on topic name length.
pub const TOPIC_NAME_CHARS_MAX: usize = 249;

pub struct Topic {
    pub id: Uuid,
    pub name: String,
    pub partitions: Vec<Arc<Partition>>,
    pub configs: BTreeMap<String, String>,
}

impl Topic {
    /// Opens (recovering if needed) every partition log of a catalog topic.
    pub fn open(record: &TopicRecord, config: &BrokerConfig, now_ms: i64) -> Result<Topic, LogError> {
        let log_config = LogConfig { segment_bytes_max: config.segment_bytes_max, ..LogConfig::default() };
        let mut partitions = Vec::with_capacity(record.partition_count.max(0) as usize);
        for index in 0..record.partition_count {
            let dir = partition_dir(&config.log_dir, &record.name, index);
            let (log, reports) = PartitionLog::open(&dir, log_config, now_ms)?;
            for r in reports.iter().filter(|r| r.truncated_bytes > 0) {
                log::warn!(
                    "recovered {}-{index}: cut {} bytes ({})",
                    record.name,
                    r.truncated_bytes,
                    r.truncation_reason.as_deref().unwrap_or("?")
                );
            }
            partitions.push(Partition::start(record.name.clone(), index, log, config.flush_policy));
        }
        Ok(Topic { id: record.topic_id, name: record.name.clone(), partitions, configs: record.configs.clone() })
    }

    pub fn partition(&self, index: i32) -> Option<&Arc<Partition>> {
        usize::try_from(index).ok().and_then(|i| self.partitions.get(i))
    }
}

/// Where a partition's segments live: `<log_dir>/<topic>-<partition>`, as in Kafka.
pub fn partition_dir(log_dir: &Path, topic: &str, index: i32) -> PathBuf {
    log_dir.join(format!("{topic}-{index}"))
}

#[derive(Default)]
pub struct TopicRegistry {
    by_name: HashMap<String, Arc<Topic>>,
    by_id: HashMap<Uuid, Arc<Topic>>,
}

impl TopicRegistry {
    pub fn insert(&mut self, topic: Topic) -> Arc<Topic> {
        let topic = Arc::new(topic);
        self.by_name.insert(topic.name.clone(), Arc::clone(&topic));
        self.by_id.insert(topic.id, Arc::clone(&topic));
        topic
    }

    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.by_name.get(name).cloned()
    }

    pub fn get_by_id(&self, id: &Uuid) -> Option<Arc<Topic>> {
        self.by_id.get(id).cloned()
    }

    /// All topics, sorted by name (Metadata answers in a stable order).
    pub fn all(&self) -> Vec<Arc<Topic>> {
        let mut topics: Vec<_> = self.by_name.values().cloned().collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        topics
    }

    /// A registered topic whose name equals `name` once '.' and '_' are treated
    /// alike (Kafka refuses such pairs: their metric names collide).
    pub fn colliding(&self, name: &str) -> Option<String> {
        let key = name.replace('.', "_");
        self.by_name.keys().find(|n| n.as_str() != name && n.replace('.', "_") == key).cloned()
    }
}

/// Why a topic name is refused (Kafka's `Topic.validate`).
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name cannot be \"{name}\""));
    }
    if name.len() > TOPIC_NAME_CHARS_MAX {
        return Err(format!("topic name is {} characters long, the limit is {TOPIC_NAME_CHARS_MAX}", name.len()));
    }
    if let Some(bad) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(format!("topic name {name:?} contains {bad:?}; only ASCII letters, digits, '.', '_' and '-' are allowed"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name(".").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("bad name!").is_err());
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
    }
}
