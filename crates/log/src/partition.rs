//! A partition's ordered segments: append, roll, flush and checkpoint.
//! The leader's appends live in `partition/append.rs`, a follower's and the
//! leader epoch history in `partition/replica.rs`, truncation of the end in
//! `partition/truncate.rs`, opening in `partition/open.rs`, reads in
//! `partition/read.rs`, retention in [`crate::retention`].
//!
//! Appends write to the page cache only. Durability is the caller's explicit
//! step: [`PartitionLog::end_position`] names the bytes written so far and
//! [`PartitionLog::unflushed_files`] the files a flush must fdatasync to make
//! them durable; the broker runs that outside any lock (group commit) and then
//! treats everything up to the position as durable. [`PartitionLog::flush`]
//! does the same under `&mut self`, for callers without a lock to avoid.
//!
//! A roll makes the old segment durable with its indexes before the new one
//! exists, then writes a producer snapshot and the recovery point, so at most
//! the active segment needs scanning after a crash (see [`crate::recovery`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafgres_record::BatchHeader;

use crate::checkpoint::write_atomically;
use crate::epochs::LeaderEpochHistory;
use crate::error::LogError;
use crate::producer::{snapshot_file_name, AbortedTxn, ProducerStateMap, SequenceCheck};
use crate::recovery::{write_recovery_point, ScanReport};
use crate::segment::Segment;
use crate::storage::{FileStorage, Storage, StorageFile};

mod append;
mod open;
mod read;
mod replica;
mod truncate;

pub use truncate::TRUNCATION_FILE;

/// Per-partition storage settings (Kafka's topic configs of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would grow past this
    /// (at most i32::MAX, as in Kafka: index positions are 32-bit).
    pub segment_bytes_max: u64,
    /// `segment.ms`: roll when the active segment is older than this.
    pub segment_age_ms_max: i64,
    /// `index.interval.bytes`: bytes between sparse index entries.
    pub index_interval_bytes: u64,
    /// Kafka's `producer.id.expiration.ms`: idempotent producers idle this
    /// long are dropped from the producer state at the next snapshot.
    pub producer_id_expiration_ms: i64,
    /// How far ahead of its end an active segment holding at least this
    /// much keeps its blocks allocated (see `Segment::reserve_ahead`); 0:
    /// never.
    pub reserve_ahead_bytes: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes_max: 1 << 30,
            segment_age_ms_max: 7 * 24 * 3600 * 1000,
            index_interval_bytes: 4096,
            producer_id_expiration_ms: 24 * 3600 * 1000,
            reserve_ahead_bytes: crate::segment::RESERVE_AHEAD_BYTES,
        }
    }
}

/// The largest segment: positions in the offset index are u32, and Kafka
/// bounds `segment.bytes` by i32.
pub const SEGMENT_BYTES_LIMIT: u64 = i32::MAX as u64;

/// The most one stored compressed batch is inflated to when the log looks
/// inside it (timestamp lookups; the cleaner's default cap): batches were held
/// to `max.message.bytes` when produced, so only a damaged or hostile file
/// comes near it.
pub const STORED_BATCH_DECOMPRESSED_BYTES_MAX: usize = 256 << 20;

/// A point in the log: the offset of the next record and the byte where it
/// starts in the segment that will hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogPosition {
    pub offset: i64,
    pub segment_base: i64,
    pub byte_pos: u64,
}

/// The offsets an append assigned and the log end after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    pub base_offset: i64,
    pub last_offset: i64,
    pub end: LogPosition,
}

/// A byte range of one segment file holding whole batches (the last one may be
/// cut short by the byte limit, as in Kafka; clients drop a partial last batch).
/// The handle keeps the file readable even if retention deletes the segment
/// meanwhile.
#[derive(Debug, Clone)]
pub struct ReadSlice {
    pub file: Option<Arc<dyn StorageFile>>,
    pub path: PathBuf,
    pub position: u64,
    pub len: u64,
}

impl ReadSlice {
    pub fn empty() -> ReadSlice {
        ReadSlice { file: None, path: PathBuf::new(), position: 0, len: 0 }
    }

    /// Copies the range into memory.
    pub fn read_to_vec(&self) -> Result<Vec<u8>, LogError> {
        let Some(file) = &self.file else { return Ok(Vec::new()) };
        let mut buf = vec![0u8; self.len as usize];
        file.read_exact_at(&mut buf, self.position).map_err(LogError::io(&self.path))?;
        Ok(buf)
    }
}

/// What opening a partition did (see [`crate::recovery`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// One report per segment kept, oldest first.
    pub segments: Vec<ScanReport>,
    /// The recovery point that was used; `None` means every segment was scanned.
    pub recovery_point: Option<LogPosition>,
    /// Why a recovery point that was found could not be used.
    pub recovery_point_ignored: Option<String>,
    /// Segments deleted at open: below the log start offset (an interrupted
    /// retention), or after a segment that recovery cut.
    pub deleted_segments: Vec<i64>,
    /// The producer snapshot the producer state started from, and the batch
    /// headers read after it.
    pub producer_snapshot: Option<i64>,
    pub producer_batches_scanned: u64,
    /// A cleaner swap that a crash interrupted after its commit point and
    /// that opening finished: `(base, end)` of the segments it replaced.
    pub swap_completed: Option<(i64, i64)>,
    /// A truncation that a crash interrupted after its commit point and that
    /// opening finished: the end it truncated to.
    pub truncation_completed: Option<i64>,
    /// The leader epoch history was missing or damaged and was rebuilt from
    /// the batch headers.
    pub leader_epochs_rebuilt: bool,
}

impl OpenReport {
    pub fn truncated_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.truncated_bytes).sum()
    }

    /// Segment bytes read to recover (0 for a cleanly closed log).
    pub fn scanned_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.scanned_bytes).sum()
    }
}

#[derive(Debug)]
pub struct PartitionLog {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    config: LogConfig,
    segments: Vec<Segment>,
    log_start_offset: i64,
    producers: ProducerStateMap,
    /// The last recovery point written.
    recovery_point: Option<LogPosition>,
    failed: Option<String>,
    /// Offsets of the producer snapshot files present, ascending.
    snapshots: Vec<i64>,
    /// The clock of the latest append (or of opening): what producer-id
    /// expiry measures idleness against, so it follows the caller's clock.
    clock_ms: i64,
    /// Log compaction's progress (see [`crate::cleaner`]).
    pub(crate) cleaner: crate::cleaner::CleanerState,
    /// Which leader epoch wrote which offsets (see [`crate::epochs`]).
    epochs: LeaderEpochHistory,
}

impl PartitionLog {
    /// Opens (or creates) the partition in `dir` on the real file system.
    pub fn open(dir: &Path, config: LogConfig, now_ms: i64) -> Result<(PartitionLog, OpenReport), LogError> {
        PartitionLog::open_with(FileStorage::shared(), dir, config, now_ms)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Changes the settings of a live log (a topic's configs were altered).
    /// They apply from the next append on: the active segment rolls by the new
    /// limits, segments already written keep their size.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The offset the next appended record gets (Kafka's log end offset).
    pub fn next_offset(&self) -> i64 {
        self.active().next_offset
    }

    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size_bytes).sum()
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The last recovery point written (see [`crate::recovery`]).
    pub fn recovery_point(&self) -> Option<LogPosition> {
        self.recovery_point
    }

    /// Why the log refuses writes, if it does.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Idempotent-producer state as of the log end.
    pub fn producer_state(&self) -> &ProducerStateMap {
        &self.producers
    }

    /// Checks a batch about to be appended against the producer state; the
    /// caller holds the log for both the check and the append.
    pub fn check_sequence(&self, header: &BatchHeader) -> SequenceCheck {
        self.producers.check_sequence(header)
    }

    /// Advances the log start (the caller made it durable first), and the
    /// leader epoch history with it. Storing the history is best effort: a
    /// stale file only holds entries below the durable log start, which
    /// opening drops again.
    pub(crate) fn set_log_start_offset(&mut self, offset: i64) {
        self.log_start_offset = offset.min(self.next_offset());
        self.producers.evict_below(self.log_start_offset);
        if self.epochs.truncate_from_start(self.log_start_offset) {
            if let Err(e) = self.epochs.store(&self.storage, &self.dir) {
                log::warn!("{}: storing the leader epoch history failed ({e}); opening redoes it", self.dir.display());
            }
        }
    }

    /// Removes the `n` oldest segments from the list (never the active one).
    pub(crate) fn take_oldest_segments(&mut self, n: usize) -> Vec<Segment> {
        let n = n.min(self.segments.len() - 1);
        self.segments.drain(..n).collect()
    }

    /// Replaces the segments at `range` (never the active one) with
    /// `segment` and returns them (a compaction swap).
    pub(crate) fn replace_segments(&mut self, range: std::ops::Range<usize>, segment: Segment) -> Vec<Segment> {
        assert!(range.end < self.segments.len(), "a compaction swap never replaces the active segment");
        self.segments.splice(range, std::iter::once(segment)).collect()
    }

    /// Makes the log refuse writes (a step that left the files in a state
    /// only reopening resolves failed).
    pub(crate) fn mark_failed(&mut self, what: &str, e: &LogError) {
        log::error!("{}: {what} failed ({e}); the log refuses writes until reopened", self.dir.display());
        self.failed = Some(format!("{what}: {e}"));
    }

    fn active(&self) -> &Segment {
        self.segments.last().expect("a partition log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments.last_mut().expect("a partition log always has an active segment")
    }

    pub fn end_position(&self) -> LogPosition {
        let active = self.active();
        LogPosition { offset: active.next_offset, segment_base: active.base_offset, byte_pos: active.size_bytes }
    }

    fn refuse_if_failed(&self) -> Result<(), LogError> {
        match &self.failed {
            Some(reason) => Err(LogError::Failed { dir: self.dir.clone(), reason: reason.clone() }),
            None => Ok(()),
        }
    }

    /// Runs `step`; if it fails, the log refuses writes from then on.
    pub(crate) fn or_fail<T>(
        &mut self,
        what: &str,
        step: impl FnOnce(&mut Self) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        let result = step(self);
        if let Err(e) = &result {
            log::error!("{}: {what} failed ({e}); the log refuses writes until reopened", self.dir.display());
            self.failed = Some(format!("{what}: {e}"));
        }
        result
    }

    /// The offset below which no transaction is open: `read_committed`
    /// readers stop here (or at the high watermark, if lower).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producers.first_unstable_offset()
    }

    /// The aborted transactions overlapping offsets `[from, to)`.
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        self.producers.aborted_between(from, to)
    }

    /// Starts a new segment at the log end. The old one is made durable with
    /// its indexes first, then the new files and their directory entries,
    /// then a producer snapshot and the recovery point at the new segment.
    /// An empty active segment is not rolled (the new one would have its name).
    pub fn roll(&mut self, now_ms: i64) -> Result<(), LogError> {
        if self.active().size_bytes == 0 {
            return self.refuse_if_failed();
        }
        self.roll_at(self.next_offset(), now_ms)
    }

    /// [`Self::roll`] with the new segment starting at `base` (at or past the
    /// log end): a follower's segment starts at the first batch it receives,
    /// which may lie past the end after a gap a compacted leader left.
    fn roll_at(&mut self, base: i64, now_ms: i64) -> Result<(), LogError> {
        self.refuse_if_failed()?;
        let active = self.active();
        if base < active.next_offset || base <= active.base_offset {
            // Two segments with one base offset would share their files.
            return Err(LogError::BadAppend(format!(
                "a segment rolled at offset {base} would not follow the active one ({} to {})",
                active.base_offset, active.next_offset
            )));
        }
        self.or_fail("rolling a segment", |log| {
            log.active_mut().flush_all()?;
            log.active_mut().seal();
            let mut segment = Segment::open(&log.storage, &log.dir, base, now_ms)?;
            // Leftovers of an earlier life of this base offset must not
            // shadow the new segment.
            segment.clear_leftovers()?;
            log.segments.push(segment);
            log.storage.sync_dir(&log.dir).map_err(LogError::io(&log.dir))?;
            log.write_checkpoints()
        })
    }

    /// The files holding bytes written after `since`, which a flush must
    /// fdatasync to make everything up to [`Self::end_position`] durable.
    /// (Segments rolled since were fsynced by the roll; listing them again
    /// costs one cheap fdatasync of a clean file.) The active segment is
    /// always listed: after [`Self::truncate_to`] a `since` taken before may
    /// name a segment past the new end.
    pub fn unflushed_files(&self, since: LogPosition) -> Vec<(Arc<dyn StorageFile>, PathBuf)> {
        let from = since.segment_base.min(self.active().base_offset);
        self.segments.iter().filter(|s| s.base_offset >= from).map(|s| (Arc::clone(s.file()), s.path.clone())).collect()
    }

    /// Makes everything appended so far durable (fdatasync of the active
    /// segment; older ones were synced at their roll) and returns the
    /// position it covers. A failure leaves the log refusing writes: after a
    /// failed fdatasync the kernel may have dropped the dirty pages.
    pub fn flush(&mut self) -> Result<LogPosition, LogError> {
        self.refuse_if_failed()?;
        let end = self.end_position();
        self.or_fail("flushing", |log| {
            let active = log.active();
            active.file().sync_data().map_err(LogError::io(&active.path))
        })?;
        Ok(end)
    }

    /// Flushes the active segment with its indexes and writes a producer
    /// snapshot and the recovery point at the log end, so the next open
    /// reads no segment data. Called at clean close; the broker may also call
    /// it periodically to bound recovery after a crash (it costs about five
    /// fsyncs).
    pub fn checkpoint(&mut self) -> Result<LogPosition, LogError> {
        self.refuse_if_failed()?;
        self.or_fail("checkpointing", |log| {
            log.active_mut().flush_all()?;
            log.write_checkpoints()?;
            Ok(log.end_position())
        })
    }

    /// Writes the producer snapshot and the recovery point at the log end;
    /// the active segment must have been flushed with its indexes.
    fn write_checkpoints(&mut self) -> Result<(), LogError> {
        let end = self.end_position();
        let expired = self.producers.expire_idle(self.clock_ms, self.config.producer_id_expiration_ms);
        if expired > 0 {
            log::info!("{}: forgot {expired} idle producer id(s) (producer.id.expiration.ms)", self.dir.display());
        }
        let snapshot = self.producers.encode_snapshot(end.offset);
        write_atomically(&self.storage, &self.dir, &snapshot_file_name(end.offset), &snapshot)?;
        write_recovery_point(&self.storage, &self.dir, end)?;
        self.recovery_point = Some(end);
        if self.snapshots.last() != Some(&end.offset) {
            self.snapshots.push(end.offset);
        }
        self.prune_snapshots();
        Ok(())
    }

    /// Keeps the two newest producer snapshots (one to fall back on if the
    /// newest is damaged); removing the others is best effort.
    fn prune_snapshots(&mut self) {
        while self.snapshots.len() > SNAPSHOTS_KEPT {
            let offset = self.snapshots.remove(0);
            let path = self.dir.join(snapshot_file_name(offset));
            if let Err(e) = self.storage.remove(&path) {
                log::warn!("cannot remove {}: {e}", path.display());
            }
        }
    }
}

const SNAPSHOTS_KEPT: usize = 2;

/// fsyncs a directory of the real file system so that file creations and
/// renames in it are durable (for callers outside the log's storage).
pub fn sync_dir(dir: &Path) -> Result<(), LogError> {
    FileStorage.sync_dir(dir).map_err(LogError::io(dir))
}

#[cfg(test)]
mod tests;
