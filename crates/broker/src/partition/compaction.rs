//! Log compaction for topics whose `cleanup.policy` contains `compact`.
//!
//! One broker-wide task, [`run_cleaner`], like retention: it sleeps until the
//! earliest moment any compacted partition becomes due (the log says when:
//! `PartitionLog::cleaning_due_at`, from `min.cleanable.dirty.ratio`,
//! `max.compaction.lag.ms`, `min.compaction.lag.ms` and the tombstones'
//! delete horizons), cleans the due partitions one at a time on the blocking
//! pool, and computes the next moment. A roll (the only event that adds a
//! cleanable segment) and a config change wake it early; nothing polls.
//!
//! A round holds the partition's log lock only to plan it and, per group of
//! segments, for the short swap (a checkpoint write and three renames):
//! reading and rewriting the segments runs without it, so produce and fetch
//! go on meanwhile (see `kafgres_log::cleaner`).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kafgres_log::{CleanReport, CleanerConfig, LogError};
use kafgres_record::records::{parse_records, records_section};
use kafgres_record::{BatchHeader, DecompressLimit};

use super::{Housekeeping, Partition};

/// A topic's `cleanup.policy`: `delete` (the default), `compact`, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub compact: bool,
    pub delete: bool,
}

impl CleanupPolicy {
    /// Reads the policy; a value naming neither (CreateTopics stores values
    /// as given) reads as the default, `delete`.
    pub fn from_configs(configs: &BTreeMap<String, String>) -> CleanupPolicy {
        let items = configs.get("cleanup.policy").map(|v| crate::topic_config::list_items(v)).unwrap_or_default();
        let policy = CleanupPolicy {
            compact: items.iter().any(|i| i == "compact"),
            delete: items.iter().any(|i| i == "delete"),
        };
        if policy.compact || policy.delete {
            policy
        } else {
            CleanupPolicy { compact: false, delete: true }
        }
    }
}

/// The cleaner settings of a compacted topic (`None`: not compacted), Kafka's
/// defaults where unset or invalid.
pub fn cleaner_config(configs: &BTreeMap<String, String>) -> Option<CleanerConfig> {
    if !CleanupPolicy::from_configs(configs).compact {
        return None;
    }
    let defaults = CleanerConfig::default();
    let long = |name: &str, default: i64| configs.get(name).and_then(|v| v.trim().parse().ok()).unwrap_or(default);
    Some(CleanerConfig {
        delete_retention_ms: long("delete.retention.ms", defaults.delete_retention_ms).max(0),
        min_cleanable_dirty_ratio: configs
            .get("min.cleanable.dirty.ratio")
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|r| (0.0..=1.0).contains(r))
            .unwrap_or(defaults.min_cleanable_dirty_ratio),
        min_compaction_lag_ms: long("min.compaction.lag.ms", defaults.min_compaction_lag_ms).max(0),
        max_compaction_lag_ms: long("max.compaction.lag.ms", defaults.max_compaction_lag_ms).max(1),
        ..defaults
    })
}

/// Kafka's produce-time rule for compacted topics (`LogValidator`): every
/// record needs a key. Returns Kafka's message, answered with INVALID_RECORD
/// (87), when one has none. Compressed batches are decompressed under
/// `limit` (validation already did so once).
pub fn keyless_record_refusal(
    topic: &str,
    partition: i32,
    batches: &[u8],
    headers: &[BatchHeader],
    limit: DecompressLimit,
) -> Option<String> {
    let mut pos = 0;
    for header in headers {
        let batch = &batches[pos..pos + header.total_bytes()];
        pos += header.total_bytes();
        if header.is_control() {
            continue;
        }
        let keyless = records_section(batch, limit)
            .ok()
            .and_then(|section| parse_records(header, &section).ok().map(|r| r.iter().any(|r| r.key.is_none())))
            .unwrap_or(false);
        if keyless {
            return Some(format!(
                "Compacted topic cannot accept message without key in topic partition {topic}-{partition}."
            ));
        }
    }
    None
}

impl Partition {
    /// The bytes of the partition's segments (what compaction shrinks).
    pub fn log_size_bytes(&self) -> u64 {
        self.lock_log().size_bytes()
    }

    /// Whether this partition's topic is compacted.
    pub fn is_compacted(&self) -> bool {
        self.housekeeping.cleaner().is_some()
    }

    /// When the cleaner next has work here (`None`: the topic is not
    /// compacted, the cleaner failed here, or nothing is due before a roll).
    pub fn cleaning_due_at(&self, now_ms: i64) -> Option<i64> {
        if self.housekeeping.cleaner_failed.load(Ordering::Relaxed) {
            return None;
        }
        let config = self.housekeeping.cleaner()?;
        self.lock_log().cleaning_due_at(now_ms, &config)
    }

    /// Runs a cleaning round now (blocking: reads and writes segment files;
    /// the log lock is taken only to plan and to swap).
    pub fn clean(&self, now_ms: i64) -> Result<CleanReport, LogError> {
        let Some(config) = self.housekeeping.cleaner() else { return Ok(CleanReport::default()) };
        let result = kafgres_log::cleaner::clean(&self.log, now_ms, &config);
        if result.is_err() {
            self.housekeeping.cleaner_failed.store(true, Ordering::Relaxed);
        }
        result
    }
}

/// The broker's cleaner task. `partitions` lists the broker's partitions, or
/// `None` once the broker is gone, which ends the task.
pub async fn run_cleaner(partitions: impl Fn() -> Option<Vec<Arc<Partition>>>, housekeeping: Housekeeping) {
    loop {
        let next = {
            let Some(partitions) = partitions() else { return };
            let mut next: Option<i64> = None;
            for partition in &partitions {
                let now = crate::now_ms();
                match partition.cleaning_due_at(now) {
                    Some(at) if at <= now => {
                        let p = Arc::clone(partition);
                        match tokio::task::spawn_blocking(move || p.clean(crate::now_ms())).await {
                            Ok(Ok(report)) if report.segments_written > 0 => log::info!(
                                "compacted {}-{} below offset {}: {} → {} bytes, {} records removed",
                                partition.topic,
                                partition.index,
                                report.end_offset,
                                report.bytes_before,
                                report.bytes_after,
                                report.records_removed
                            ),
                            Ok(Ok(_)) => {}
                            Ok(Err(e)) => log::error!(
                                "compacting {}-{} failed: {e}; not retried until the broker restarts",
                                partition.topic,
                                partition.index
                            ),
                            Err(e) => log::error!("cleaner task failed: {e}"),
                        }
                        // Its next deadline is computed on the next pass.
                        next = Some(next.map_or(now, |n| n.min(now)));
                    }
                    Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
                    None => {}
                }
            }
            next
        };
        match next {
            None => housekeeping.cleaner_wake.notified().await,
            Some(at) => {
                let wait = Duration::from_millis((at - crate::now_ms()).max(0) as u64);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = housekeeping.cleaner_wake.notified() => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafgres_record::build::{encode_compressed_batch, NewRecord, ProducerStamp};
    use kafgres_record::validate_batches;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_policy_and_the_cleaner_settings_follow_the_topic_configs() {
        let delete = CleanupPolicy { compact: false, delete: true };
        assert_eq!(CleanupPolicy::from_configs(&configs(&[])), delete);
        assert_eq!(CleanupPolicy::from_configs(&configs(&[("cleanup.policy", "junk")])), delete);
        let both = CleanupPolicy::from_configs(&configs(&[("cleanup.policy", "compact, delete")]));
        assert_eq!(both, CleanupPolicy { compact: true, delete: true });
        assert!(cleaner_config(&configs(&[("cleanup.policy", "delete")])).is_none());
        let c = cleaner_config(&configs(&[
            ("cleanup.policy", "compact"),
            ("delete.retention.ms", "5"),
            ("min.cleanable.dirty.ratio", "0.1"),
            ("min.compaction.lag.ms", "junk"),
        ]))
        .unwrap();
        assert_eq!((c.delete_retention_ms, c.min_cleanable_dirty_ratio, c.min_compaction_lag_ms), (5, 0.1, 0));
    }

    #[test]
    fn a_record_without_a_key_is_refused_with_kafkas_message() {
        let limit = DecompressLimit { bytes_max: 1 << 20 };
        let record = |key: Option<&[u8]>| NewRecord {
            key: key.map(<[u8]>::to_vec),
            value: Some(b"v".to_vec()),
            headers: vec![],
            timestamp_ms: 0,
        };
        let mut bytes = encode_compressed_batch(&[record(Some(b"k"))], ProducerStamp::NONE, 0);
        bytes.extend(encode_compressed_batch(&[record(Some(b"k")), record(None)], ProducerStamp::NONE, 4));
        let headers = validate_batches(&bytes).unwrap().headers;
        assert_eq!(
            keyless_record_refusal("t", 3, &bytes, &headers, limit).as_deref(),
            Some("Compacted topic cannot accept message without key in topic partition t-3.")
        );
        assert_eq!(keyless_record_refusal("t", 3, &bytes, &headers[..1], limit), None);
    }
}
