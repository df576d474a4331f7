//! Keeping a partition's log tidy without a periodic tick.
//!
//! - **Compaction** (`cleanup.policy=compact`): the cleaner task of
//!   [`super::compaction`], woken the same way.
//! - **Retention** (`retention.ms`, `retention.bytes`; only for topics whose
//!   `cleanup.policy` contains `delete`): one broker-wide task,
//!   [`run_retention`], sleeps until the earliest moment any partition's oldest
//!   segment becomes deletable, applies retention to the partitions that are
//!   due, and computes the next moment. A roll (the only event that makes a new
//!   segment deletable) and topic creation wake it early.
//! - **Recovery point**: after a flush, once the durable end is more than
//!   [`RECOVERY_CHECKPOINT_BYTES`] past the last recovery point, the log is
//!   checkpointed, so recovery after a crash rescans at most that much of the
//!   active segment however large it grows. Driven by bytes written, not time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafgres_log::retention::{RetentionConfig, RetentionReport};
use kafgres_log::{CleanerConfig, LogError};
use tokio::sync::Notify;

use super::Partition;

/// Bytes flushed past the recovery point before it is moved forward.
pub const RECOVERY_CHECKPOINT_BYTES: u64 = 64 << 20;

/// The broker-wide retention and cleaner services' handle, shared by every
/// partition.
#[derive(Debug, Clone, Default)]
pub struct Housekeeping {
    retention_wake: Arc<Notify>,
    pub(super) cleaner_wake: Arc<Notify>,
    /// Segment archiving: the command in force and its task's wake-up.
    pub archive: Arc<crate::archive::Archive>,
}

impl Housekeeping {
    /// Wakes the retention and cleaner tasks (a topic was created, a segment
    /// rolled, configs changed).
    pub fn wake(&self) {
        self.retention_wake.notify_one();
        self.cleaner_wake.notify_one();
        self.archive.wake();
    }
}

pub(super) struct PartitionHousekeeping {
    service: Housekeeping,
    /// The topic's retention settings; replaced when its configs are altered.
    retention: Mutex<RetentionConfig>,
    /// Set when applying retention failed: the partition is left alone until
    /// the broker restarts instead of being retried in a loop.
    retention_failed: AtomicBool,
    /// The topic's cleaner settings if it is compacted; replaced with its configs.
    cleaner: Mutex<Option<CleanerConfig>>,
    /// Like `retention_failed`, for the cleaner.
    pub(super) cleaner_failed: AtomicBool,
}

impl PartitionHousekeeping {
    pub(super) fn new(service: &Housekeeping, configs: &BTreeMap<String, String>) -> PartitionHousekeeping {
        PartitionHousekeeping {
            service: service.clone(),
            retention: Mutex::new(retention_config(configs)),
            retention_failed: AtomicBool::new(false),
            cleaner: Mutex::new(super::compaction::cleaner_config(configs)),
            cleaner_failed: AtomicBool::new(false),
        }
    }

    pub(super) fn cleaner(&self) -> Option<CleanerConfig> {
        *self.cleaner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn wake(&self) {
        self.service.wake();
    }

    pub(super) fn archive(&self) -> &crate::archive::Archive {
        &self.service.archive
    }

    fn retention(&self) -> RetentionConfig {
        *self.retention.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the topic's new retention and cleaner settings and wakes both
    /// tasks, so a shorter retention deletes (or a new `compact` policy
    /// cleans) at once rather than at the next roll.
    pub(super) fn set_retention(&self, configs: &BTreeMap<String, String>) {
        *self.retention.lock().unwrap_or_else(|p| p.into_inner()) = retention_config(configs);
        *self.cleaner.lock().unwrap_or_else(|p| p.into_inner()) = super::compaction::cleaner_config(configs);
        self.service.wake();
    }
}

/// The topic's retention settings, Kafka's defaults where unset or invalid.
/// A topic whose `cleanup.policy` lacks `delete` (`compact` alone) deletes
/// nothing by time or size (only below the log start, DeleteRecords).
pub fn retention_config(configs: &BTreeMap<String, String>) -> RetentionConfig {
    if !super::compaction::CleanupPolicy::from_configs(configs).delete {
        return RetentionConfig { retention_ms: -1, retention_bytes: -1 };
    }
    let defaults = RetentionConfig::default();
    let number = |name: &str, default: i64| configs.get(name).and_then(|v| v.parse().ok()).unwrap_or(default);
    RetentionConfig {
        retention_ms: number("retention.ms", defaults.retention_ms),
        retention_bytes: number("retention.bytes", defaults.retention_bytes),
    }
}

impl Partition {
    /// When retention next has something to delete here: the same rules as
    /// `PartitionLog::apply_retention` for its oldest segment, so a partition
    /// reported due is always changed by applying it.
    pub fn retention_due_at(&self) -> Option<i64> {
        if self.housekeeping.retention_failed.load(Ordering::Relaxed) {
            return None;
        }
        let config = self.housekeeping.retention();
        let log = self.lock_log();
        let segments = log.segments();
        if segments.len() < 2 {
            return None; // the active segment is never deleted
        }
        let oldest = &segments[0];
        if oldest.base_offset() >= self.archive_hold() {
            return None; // not archived yet: the archiver wakes retention when it is
        }
        let by_start = (segments[1].base_offset() <= log.log_start_offset()).then_some(i64::MIN);
        let by_size = (config.retention_bytes >= 0
            && log.size_bytes() as i64 - config.retention_bytes - oldest.size_bytes() as i64 >= 0)
            .then_some(i64::MIN);
        let by_time = (config.retention_ms >= 0 && oldest.max_timestamp_ms() >= 0)
            .then(|| oldest.max_timestamp_ms().saturating_add(config.retention_ms).saturating_add(1));
        [by_start, by_size, by_time].into_iter().flatten().min()
    }

    /// Applies retention now (blocking: deletes files, writes a checkpoint).
    pub fn apply_retention(&self, now_ms: i64) -> Result<RetentionReport, LogError> {
        let config = self.housekeeping.retention();
        let hold = self.archive_hold();
        let result = self.lock_log().apply_retention_holding(now_ms, &config, hold);
        if result.is_err() {
            self.housekeeping.retention_failed.store(true, Ordering::Relaxed);
        }
        result
    }

    /// Moves the recovery point forward when enough has been flushed past it.
    pub(super) async fn checkpoint_if_due(self: &Arc<Self>) {
        let due = {
            let log = self.lock_log();
            let end = log.end_position();
            match log.recovery_point() {
                Some(point) if point.segment_base == end.segment_base => {
                    end.byte_pos.saturating_sub(point.byte_pos) >= RECOVERY_CHECKPOINT_BYTES
                }
                // A roll checkpoints by itself; a missing point is written now.
                Some(_) => false,
                None => true,
            }
        };
        if !due {
            return;
        }
        let partition = Arc::clone(self);
        match tokio::task::spawn_blocking(move || partition.lock_log().checkpoint()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => log::warn!("checkpointing {}-{} failed: {e}", self.topic, self.index),
            Err(e) => log::warn!("checkpoint task for {}-{} failed: {e}", self.topic, self.index),
        }
    }
}

/// The broker's retention task. `partitions` lists the broker's partitions, or
/// `None` once the broker is gone, which ends the task.
pub async fn run_retention(partitions: impl Fn() -> Option<Vec<Arc<Partition>>>, housekeeping: Housekeeping) {
    loop {
        let next = {
            let Some(partitions) = partitions() else { return };
            let now = crate::now_ms();
            let mut next: Option<i64> = None;
            for partition in &partitions {
                match partition.retention_due_at() {
                    Some(at) if at <= now => {
                        let p = Arc::clone(partition);
                        match tokio::task::spawn_blocking(move || p.apply_retention(crate::now_ms())).await {
                            Ok(Ok(report)) if !report.deleted.is_empty() => log::info!(
                                "retention deleted {} segments ({} bytes) of {}-{}; log start is now {}",
                                report.deleted.len(),
                                report.deleted_bytes(),
                                partition.topic,
                                partition.index,
                                report.log_start_offset
                            ),
                            Ok(Ok(_)) => {}
                            Ok(Err(e)) => {
                                log::error!("retention on {}-{} failed: {e}", partition.topic, partition.index)
                            }
                            Err(e) => log::error!("retention task failed: {e}"),
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
            None => housekeeping.retention_wake.notified().await,
            Some(at) => {
                let wait = Duration::from_millis((at - crate::now_ms()).max(0) as u64);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = housekeeping.retention_wake.notified() => {}
                }
            }
        }
    }
}
