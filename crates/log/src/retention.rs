//! Deleting old data: `retention.ms`, `retention.bytes` and DeleteRecords.
//!
//! Only whole segments are deleted, oldest first, never the active one. The
//! log start offset is the first offset a reader may ask for; it is kept in
//! `log-start-offset-checkpoint` (atomic write, see [`crate::checkpoint`]).
//!
//! Deleting is ordered so a crash at any point is harmless:
//! 1. the new log start offset is made durable (checkpoint file);
//! 2. the segments leave the in-memory list (new reads cannot find them);
//! 3. their files are unlinked (indexes first, the `.log` last) and the
//!    directory is fsynced.
//!
//! A crash after step 1 leaves files below the durable log start; the next
//! open deletes every segment that ends at or below it before anything
//! else. A fetch that planned a read before step 2 holds an
//! `Arc<dyn StorageFile>`: on Linux an unlinked file stays readable through
//! open descriptors until the last one closes, and the in-memory storage
//! behaves the same, so such a fetch completes with the old bytes.
//!
//! Time retention uses each segment's largest record timestamp (from its
//! time index): a segment is deleted when `now - largest > retention.ms`.
//! Segments without any timestamp (all -1) are never deleted by time.
//! Size retention deletes the oldest segments while the log stays at or
//! above `retention.bytes` without them (Kafka's rule). Neither runs on a
//! timer here: the broker calls [`PartitionLog::apply_retention`] when it
//! likes.

use std::path::Path;
use std::sync::Arc;

use crate::checkpoint::{decode_offsets, encode_offsets, read_whole, write_atomically, LOG_START_FILE};
use crate::error::LogError;
use crate::partition::PartitionLog;
use crate::segment::{index_file_name, segment_file_name, time_index_file_name};
use crate::storage::Storage;

/// Kafka's topic configs; -1 means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionConfig {
    pub retention_ms: i64,
    pub retention_bytes: i64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig { retention_ms: 7 * 24 * 3600 * 1000, retention_bytes: -1 }
    }
}

/// Why a segment was deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// Entirely below the log start offset (DeleteRecords).
    LogStart,
    Time,
    Size,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeletedSegment {
    pub base_offset: i64,
    pub size_bytes: u64,
    pub reason: DeleteReason,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub deleted: Vec<DeletedSegment>,
    pub log_start_offset: i64,
}

impl RetentionReport {
    pub fn deleted_bytes(&self) -> u64 {
        self.deleted.iter().map(|d| d.size_bytes).sum()
    }
}

impl PartitionLog {
    /// Deletes the old segments that the log start offset, `retention.ms` or
    /// `retention.bytes` no longer keep.
    pub fn apply_retention(&mut self, now_ms: i64, config: &RetentionConfig) -> Result<RetentionReport, LogError> {
        self.apply_retention_holding(now_ms, config, i64::MAX)
    }

    /// [`Self::apply_retention`], keeping every segment whose base offset is
    /// `hold_from` or later (not archived yet) and those after it.
    pub fn apply_retention_holding(
        &mut self,
        now_ms: i64,
        config: &RetentionConfig,
        hold_from: i64,
    ) -> Result<RetentionReport, LogError> {
        let held = self.segments().iter().position(|s| s.base_offset() >= hold_from);
        let closed = self.segments().len() - 1;
        let candidates = &self.segments()[..held.map_or(closed, |h| h.min(closed))];
        let mut reasons = Vec::new();
        let mut excess = self.size_bytes() as i64 - config.retention_bytes;
        for (i, segment) in candidates.iter().enumerate() {
            let next_base = self.segments()[i + 1].base_offset();
            let reason = if next_base <= self.log_start_offset() {
                DeleteReason::LogStart
            } else if config.retention_ms >= 0
                && segment.max_timestamp_ms() >= 0
                && now_ms.saturating_sub(segment.max_timestamp_ms()) > config.retention_ms
            {
                DeleteReason::Time
            } else if config.retention_bytes >= 0 && excess - segment.size_bytes() as i64 >= 0 {
                DeleteReason::Size
            } else {
                break;
            };
            excess -= segment.size_bytes() as i64;
            reasons.push(reason);
        }
        let deleted = self.delete_oldest(&reasons)?;
        Ok(RetentionReport { deleted, log_start_offset: self.log_start_offset() })
    }

    /// DeleteRecords: makes `offset` the log start (if it is later), durably,
    /// and deletes the segments entirely below it. The caller bounds `offset`
    /// by the high watermark; past the log end it is `OffsetOutOfRange`.
    /// Returns the new log start offset (the low watermark).
    pub fn delete_records(&mut self, offset: i64) -> Result<i64, LogError> {
        self.delete_records_holding(offset, i64::MAX)
    }

    /// [`Self::delete_records`], leaving the files of segments whose base
    /// offset is `hold_from` or later: the log start moves all the same,
    /// and retention deletes them once they are no longer held.
    pub fn delete_records_holding(&mut self, offset: i64, hold_from: i64) -> Result<i64, LogError> {
        let log_end = self.next_offset();
        if offset > log_end || offset < 0 {
            return Err(LogError::OffsetOutOfRange { requested: offset, log_start: self.log_start_offset(), log_end });
        }
        if offset > self.log_start_offset() {
            write_log_start(self.storage(), self.dir(), offset)?;
            self.set_log_start_offset(offset);
        }
        let below = self
            .segments()
            .windows(2)
            .take_while(|w| w[1].base_offset() <= offset && w[0].base_offset() < hold_from)
            .count();
        self.delete_oldest(&vec![DeleteReason::LogStart; below])?;
        Ok(self.log_start_offset())
    }

    /// Deletes the `reasons.len()` oldest segments (never the active one) in
    /// the order described in the module doc.
    fn delete_oldest(&mut self, reasons: &[DeleteReason]) -> Result<Vec<DeletedSegment>, LogError> {
        if reasons.is_empty() {
            return Ok(Vec::new());
        }
        let new_first = self.segments()[reasons.len()].base_offset();
        if new_first > self.log_start_offset() {
            write_log_start(self.storage(), self.dir(), new_first)?;
            self.set_log_start_offset(new_first);
        }
        let removed = self.take_oldest_segments(reasons.len());
        let storage = Arc::clone(self.storage());
        let dir = self.dir().to_path_buf();
        let mut deleted = Vec::with_capacity(removed.len());
        for (segment, reason) in removed.into_iter().zip(reasons) {
            log::info!(
                "{}: deleting segment {} ({} bytes, {reason:?})",
                dir.display(),
                segment.base_offset(),
                segment.size_bytes()
            );
            remove_segment_files(&storage, &dir, segment.base_offset());
            deleted.push(DeletedSegment {
                base_offset: segment.base_offset(),
                size_bytes: segment.size_bytes(),
                reason: *reason,
            });
        }
        // Not needed for correctness (a resurrected file is below the
        // durable log start and deleted at open), only to free the space for
        // good before reporting it freed.
        storage.sync_dir(&dir).map_err(LogError::io(&dir))?;
        Ok(deleted)
    }
}

/// Unlinks a segment's files, indexes first so that a `.log` never loses its
/// indexes while it remains; failures are logged (the next open retries).
pub(crate) fn remove_segment_files(storage: &Arc<dyn Storage>, dir: &Path, base_offset: i64) {
    for name in [index_file_name(base_offset), time_index_file_name(base_offset), segment_file_name(base_offset)] {
        let path = dir.join(name);
        match storage.remove(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("cannot remove {}: {e}", path.display()),
        }
    }
}

const LOG_START_KEYS: [&str; 1] = ["log_start_offset"];

/// The durable log start offset, if one was ever written. A damaged file
/// reads as none: the log then starts at its first segment, which may
/// expose records DeleteRecords had hidden but never loses any.
pub(crate) fn read_log_start(storage: &Arc<dyn Storage>, dir: &Path) -> Result<Option<i64>, LogError> {
    let path = dir.join(LOG_START_FILE);
    let Some(bytes) = read_whole(storage, &path, 4096)? else { return Ok(None) };
    Ok(decode_offsets(&path, &bytes, &LOG_START_KEYS).map(|v| v[0]))
}

fn write_log_start(storage: &Arc<dyn Storage>, dir: &Path, offset: i64) -> Result<(), LogError> {
    write_atomically(storage, dir, LOG_START_FILE, &encode_offsets(&[(LOG_START_KEYS[0], offset)]))
}
