//! Log compaction (Kafka's `cleanup.policy=compact`): the closed segments
//! are rewritten so that each key keeps only its latest record.
//!
//! # What is cleaned
//!
//! The log splits at two offsets, as in Kafka's `LogCleaner`:
//!
//! ```text
//!  log start          first dirty offset        first uncleanable offset     log end
//!  |---- clean section ----|------ dirty section ------|---- uncleanable ----|
//!                          (cleaner checkpoint)         (active segment, or the first
//!                                                        segment younger than
//!                                                        min.compaction.lag.ms)
//! ```
//!
//! A round builds an offset map (key → latest offset) over the dirty
//! section, then rewrites every segment below the first uncleanable offset
//! (clean and dirty), in groups of consecutive segments whose total size
//! fits `segment.bytes`, each group into one segment named after its first.
//! A record is kept iff it is the latest for its key in the map (a key the
//! map does not hold is kept), except that a tombstone (null value) goes once
//! its batch's delete horizon has passed. Records without a key are kept
//! (Kafka's cleaner drops them; a compacted topic refuses them at produce
//! time, so only records written before the topic became compacted have
//! none). Transactional batches and transaction markers are kept whole and
//! left out of the offset map (Kafka drops aborted records and, later, the
//! markers; here a transactional record neither goes nor makes an older
//! record go, which never loses a committed value). Nothing at or past the
//! first unstable offset (an open transaction) is cleaned. The active
//! segment is never read or rewritten.
//!
//! # What a rewritten batch looks like (Kafka's `MemoryRecords.filterTo`)
//!
//! A batch whose records all stay is copied byte for byte. Otherwise it is
//! rebuilt with its base offset, lastOffsetDelta, leader epoch, producer
//! fields and codec (recompressed with it), the records kept (their offset
//! deltas unchanged, so offsets have gaps), a new count, timestamps and CRC.
//! A batch left without records disappears, unless it is the last batch of
//! an idempotent producer still in the producer state: then its header
//! stays (0 records, same offsets) so the producer's sequence survives.
//! Tombstones follow KIP-534: the first time a batch is rewritten with a
//! tombstone in it, it gets a delete horizon (now + `delete.retention.ms`,
//! stored in its base timestamp with attribute bit 0x40); a later round
//! after the horizon drops its tombstones. A batch the cleaner cannot
//! decompress (over the cap) is kept whole; one whose offsets do not follow
//! the batches before it (a base offset damaged on disk: the CRC does not
//! cover it, and closed segments are trusted unread) stops the round with an
//! error, nothing swapped. Segments and batches keep their
//! offsets, so a segment may end below the next one's base and batches may
//! be separated by gaps (recovery accepts both, see [`crate::recovery`]).
//!
//! # When (the broker decides; see [`PartitionLog::cleaning_due_at`])
//!
//! Cleaning is worth it when the dirty section is more than
//! `min.cleanable.dirty.ratio` of the clean plus dirty bytes, when a dirty
//! segment's first record is older than `max.compaction.lag.ms`, or when a
//! kept tombstone's delete horizon has passed.
//!
//! # Crash safety (the swap protocol)
//!
//! Each group is swapped in by these steps; the first three run without the
//! caller's lock (see [`clean`]):
//! 1. write the group's output to `<base>.log.cleaned`, `<base>.index.cleaned`,
//!    `<base>.timeindex.cleaned`, fdatasync the three, fsync the directory;
//! 2. under the lock, check the group's segments are still the log's (else
//!    drop the output: retention got there first);
//! 3. **commit point**: write `cleaner-swap` (`base`, `end`: the group
//!    replaces every segment with a base offset in `[base, end)`) by the
//!    atomic checkpoint protocol;
//! 4. rename the three `.cleaned` files over `<base>.*` and replace the
//!    group's segments in memory with the new one (end of the lock);
//! 5. unlink the other segments of the group (indexes first), fsync the
//!    directory, remove `cleaner-swap`, fsync the directory.
//!
//! Opening a partition first finishes a swap whose `cleaner-swap` exists
//! (renames whatever `.cleaned` files remain, unlinks the segments in
//! `(base, end)`), then deletes any `.cleaned` file left (a crash before
//! step 3: the old segments are intact). So a crash at any point leaves
//! either the old group or the new one, never both and never neither. A
//! failure from step 3 on makes the log refuse writes until it is reopened
//! (which finishes the swap). Readers that planned a read of an old segment
//! hold its file handle: renames and unlinks do not invalidate it (see
//! [`crate::storage`]), so a fetch in flight completes with the old bytes.
//!
//! # The cleaner checkpoint
//!
//! `cleaner-offset-checkpoint` (text, atomic, like the other checkpoints):
//! `first_dirty_offset N` and `delete_horizon_ms H` (the earliest delete
//! horizon of a tombstone kept in the clean section, -1 for none). Written
//! after a round's swaps. Missing or damaged, it reads as "everything is
//! dirty": the next round recleans, which is safe.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::checkpoint::{decode_offsets, encode_offsets, read_whole, write_atomically};
use crate::error::LogError;
use crate::partition::PartitionLog;
use crate::segment::{index_file_name, segment_file_name, time_index_file_name, Segment};
use crate::storage::{Storage, StorageFile};

mod filter;
mod swap;

pub(crate) use swap::finish_interrupted_swap;

/// Kafka's name for the same thing (one file per partition here).
pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// The swap in progress, from its commit point to its end.
pub const SWAP_FILE: &str = "cleaner-swap";
/// Suffix of the files a cleaning round is writing.
pub const CLEANED_SUFFIX: &str = ".cleaned";

const CHECKPOINT_KEYS: [&str; 2] = ["first_dirty_offset", "delete_horizon_ms"];

/// Kafka's topic configs for compaction, plus the cleaner's own bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CleanerConfig {
    /// `delete.retention.ms`: how long a tombstone outlives the round that
    /// first rewrote its batch.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: a segment whose newest record is younger
    /// stays uncleanable (and so does everything after it).
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty segment whose first record is older
    /// makes cleaning due whatever the ratio.
    pub max_compaction_lag_ms: i64,
    /// The most key bytes the offset map holds (Kafka's
    /// `log.cleaner.dedupe.buffer.size`); a round whose dirty section has
    /// more stops at a segment boundary and the next round goes on. The
    /// first dirty segment is always taken whole (its keys are bounded by
    /// its size).
    pub offset_map_bytes_max: u64,
    /// The most one compressed batch may decompress to; a larger one is
    /// kept as it is.
    pub batch_decompressed_bytes_max: usize,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            delete_retention_ms: 24 * 3600 * 1000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            offset_map_bytes_max: 128 << 20,
            batch_decompressed_bytes_max: crate::partition::STORED_BATCH_DECOMPRESSED_BYTES_MAX,
        }
    }
}

/// The cleaner's progress in a partition (the checkpoint, in memory).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanerState {
    /// Offsets below this have been through a round.
    pub first_dirty_offset: i64,
    /// The earliest delete horizon of a tombstone kept below it.
    pub delete_horizon_ms: Option<i64>,
    /// A round is between its plan and its end (not persisted).
    in_progress: bool,
    /// Truncations of the log's end so far (not persisted): a round planned
    /// before one swaps nothing in and does not adopt its end offset.
    truncations: u64,
}

impl CleanerState {
    pub(crate) fn load(storage: &Arc<dyn Storage>, dir: &Path) -> Result<CleanerState, LogError> {
        let path = dir.join(CLEANER_CHECKPOINT_FILE);
        let Some(bytes) = read_whole(storage, &path, 4096)? else { return Ok(CleanerState::default()) };
        Ok(decode_offsets(&path, &bytes, &CHECKPOINT_KEYS).map_or_else(CleanerState::default, |v| CleanerState {
            first_dirty_offset: v[0],
            delete_horizon_ms: (v[1] >= 0).then_some(v[1]),
            in_progress: false,
            truncations: 0,
        }))
    }

    /// The log's end was cut back to `end`: offsets at or past it will be
    /// new, uncleaned data. Returns whether the checkpoint must be stored
    /// again (it was past `end`).
    pub(crate) fn note_truncation(&mut self, end: i64) -> bool {
        self.truncations += 1;
        let past = self.first_dirty_offset > end;
        if past {
            self.first_dirty_offset = end;
        }
        past
    }

    pub(crate) fn store(&self, storage: &Arc<dyn Storage>, dir: &Path) -> Result<(), LogError> {
        let bytes = encode_offsets(&[
            (CHECKPOINT_KEYS[0], self.first_dirty_offset),
            (CHECKPOINT_KEYS[1], self.delete_horizon_ms.unwrap_or(-1)),
        ]);
        write_atomically(storage, dir, CLEANER_CHECKPOINT_FILE, &bytes)
    }
}

/// What a round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// The dirty section cleaned: `[first dirty, end)`; `end` is the new
    /// first dirty offset.
    pub first_dirty_offset: i64,
    pub end_offset: i64,
    /// Distinct keys in the offset map.
    pub keys: usize,
    /// Segments replaced, and by how many new ones.
    pub segments_replaced: usize,
    pub segments_written: usize,
    /// Groups dropped because retention removed their segments meanwhile.
    pub groups_abandoned: usize,
    pub records_removed: u64,
    pub tombstones_removed: u64,
    /// Bytes of the rewritten groups before and after.
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// How a cleaning round reaches the log: briefly, for each step that needs
/// it. A broker passes the `Mutex` it keeps the log in, so the rewrite runs
/// without the lock; a caller that owns the log passes `&mut PartitionLog`.
pub trait LogAccess {
    fn with_log<R>(&mut self, f: impl FnOnce(&mut PartitionLog) -> R) -> R;
}

impl LogAccess for &mut PartitionLog {
    fn with_log<R>(&mut self, f: impl FnOnce(&mut PartitionLog) -> R) -> R {
        f(self)
    }
}

impl LogAccess for &Mutex<PartitionLog> {
    fn with_log<R>(&mut self, f: impl FnOnce(&mut PartitionLog) -> R) -> R {
        f(&mut self.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// One closed segment as the plan saw it.
#[derive(Debug, Clone)]
struct SegmentRef {
    base: i64,
    /// The following segment's base offset.
    next_base: i64,
    size_bytes: u64,
    file: Arc<dyn StorageFile>,
    path: PathBuf,
    created_ms: i64,
}

/// What a round works on, taken under the lock; the segments are closed, so
/// their files do not change (retention may unlink them: the handles stay
/// readable).
#[derive(Debug)]
struct Plan {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    /// The segments below the first uncleanable offset.
    segments: Vec<SegmentRef>,
    /// The first segment holding dirty offsets.
    dirty_from: usize,
    first_dirty_offset: i64,
    /// Producer id → offset of its last batch (Kafka keeps that batch's
    /// header even when every record in it goes).
    producer_last_offsets: HashMap<i64, i64>,
    segment_bytes_max: u64,
    index_interval_bytes: u64,
    /// [`CleanerState::truncations`] when the round was planned.
    truncations: u64,
}

/// The split of the log described in the module doc.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sections {
    first_dirty_offset: i64,
    /// Index of the first segment holding dirty offsets.
    dirty_from: usize,
    /// Index of the first uncleanable segment.
    uncleanable_from: usize,
    clean_bytes: u64,
    dirty_bytes: u64,
    /// When the first segment held back by `min.compaction.lag.ms` is old enough.
    lag_ends_ms: Option<i64>,
}

impl PartitionLog {
    /// The cleaner's progress.
    pub fn cleaner_state(&self) -> CleanerState {
        self.cleaner
    }

    fn sections(&self, now_ms: i64, config: &CleanerConfig) -> Sections {
        let segments = self.segments();
        let first_base = segments[0].base_offset();
        let mut first_dirty_offset = self.cleaner.first_dirty_offset.max(self.log_start_offset()).max(first_base);
        if first_dirty_offset > self.next_offset() {
            first_dirty_offset = first_base;
        }
        let dirty_from = segments.partition_point(|s| s.base_offset() <= first_dirty_offset).saturating_sub(1);
        // Never the active segment, nor one the recovery point does not
        // cover (it was fsynced with its indexes at its roll).
        let mut limit = segments.len() - 1;
        if let Some(point) = self.recovery_point() {
            limit = limit.min(segments.partition_point(|s| s.base_offset() < point.segment_base));
        }
        if let Some(unstable) = self.first_unstable_offset() {
            // The segment holding it and everything after stay dirty.
            limit = limit.min(segments.partition_point(|s| s.base_offset() <= unstable).saturating_sub(1));
        }
        let mut uncleanable_from = limit.max(dirty_from);
        let mut lag_ends_ms = None;
        if config.min_compaction_lag_ms > 0 {
            for (i, s) in segments.iter().enumerate().take(limit).skip(dirty_from) {
                let newest = s.max_timestamp_ms();
                if newest >= 0 && now_ms.saturating_sub(newest) < config.min_compaction_lag_ms {
                    uncleanable_from = i;
                    lag_ends_ms = Some(newest.saturating_add(config.min_compaction_lag_ms));
                    break;
                }
            }
        }
        let bytes = |r: Range<usize>| segments[r].iter().map(|s| s.size_bytes()).sum::<u64>();
        Sections {
            first_dirty_offset,
            dirty_from,
            uncleanable_from,
            clean_bytes: bytes(0..dirty_from),
            dirty_bytes: bytes(dirty_from..uncleanable_from),
            lag_ends_ms,
        }
    }

    /// When a cleaning round would next be worth running (see the module
    /// doc): `Some(t)` with `t <= now_ms` means now, a later `t` is the
    /// next moment something becomes due without another roll, `None`
    /// means not until a segment rolls. A log that refuses writes is never due.
    pub fn cleaning_due_at(&self, now_ms: i64, config: &CleanerConfig) -> Option<i64> {
        if self.failure().is_some() || self.cleaner.in_progress {
            return None;
        }
        let s = self.sections(now_ms, config);
        let mut next: Option<i64> = None;
        let mut consider = |at: i64| next = Some(next.map_or(at, |n: i64| n.min(at)));
        if s.dirty_bytes > 0 {
            let ratio = s.dirty_bytes as f64 / (s.clean_bytes + s.dirty_bytes) as f64;
            if ratio > config.min_cleanable_dirty_ratio {
                return Some(now_ms);
            }
            if config.max_compaction_lag_ms < i64::MAX {
                // The time index's first entry is the first batch's max timestamp.
                let earliest = self.segments()[s.dirty_from..s.uncleanable_from]
                    .iter()
                    .filter_map(|seg| seg.time_index().first().map(|e| e.timestamp_ms))
                    .filter(|ts| *ts >= 0)
                    .min();
                if let Some(ts) = earliest {
                    consider(ts.saturating_add(config.max_compaction_lag_ms));
                }
            }
        }
        if let Some(horizon) = self.cleaner.delete_horizon_ms.filter(|_| s.uncleanable_from > 0) {
            // A tombstone is kept while now < its horizon.
            consider(horizon);
        }
        if let Some(at) = s.lag_ends_ms {
            consider(at);
        }
        next.map(|at| at.max(now_ms))
    }

    /// Runs a cleaning round now, whatever [`Self::cleaning_due_at`] says
    /// (for callers that own the log; a broker uses [`clean`] with its lock).
    pub fn clean(&mut self, now_ms: i64, config: &CleanerConfig) -> Result<CleanReport, LogError> {
        clean(self, now_ms, config)
    }

    fn plan_cleaning(&mut self, now_ms: i64, config: &CleanerConfig) -> Result<Option<Plan>, LogError> {
        if let Some(reason) = self.failure() {
            return Err(LogError::Failed { dir: self.dir().to_path_buf(), reason: reason.to_string() });
        }
        if self.cleaner.in_progress {
            return Ok(None);
        }
        let s = self.sections(now_ms, config);
        if s.uncleanable_from == 0 {
            return Ok(None);
        }
        let all = self.segments();
        let segments = all[..s.uncleanable_from]
            .iter()
            .zip(&all[1..])
            .map(|(seg, next)| SegmentRef {
                base: seg.base_offset(),
                next_base: next.base_offset(),
                size_bytes: seg.size_bytes(),
                file: Arc::clone(seg.file()),
                path: seg.path().to_path_buf(),
                created_ms: seg.created_ms,
            })
            .collect();
        let producer_last_offsets =
            self.producer_state().iter().filter_map(|(id, e)| e.last_offset().map(|o| (*id, o))).collect();
        self.cleaner.in_progress = true;
        Ok(Some(Plan {
            storage: Arc::clone(self.storage()),
            dir: self.dir().to_path_buf(),
            segments,
            dirty_from: s.dirty_from,
            first_dirty_offset: s.first_dirty_offset,
            producer_last_offsets,
            segment_bytes_max: self.config().segment_bytes_max,
            index_interval_bytes: self.config().index_interval_bytes,
            truncations: self.cleaner.truncations,
        }))
    }
}

/// Runs one cleaning round on the log behind `log`, holding it only to plan,
/// to swap each group in, and to record the result (see the module doc).
pub fn clean(mut log: impl LogAccess, now_ms: i64, config: &CleanerConfig) -> Result<CleanReport, LogError> {
    let Some(plan) = log.with_log(|l| l.plan_cleaning(now_ms, config))? else { return Ok(CleanReport::default()) };
    let result = run(&mut log, &plan, now_ms, config);
    log.with_log(|l| {
        l.cleaner.in_progress = false;
        if l.cleaner.truncations != plan.truncations {
            // The end offset the round stored may be past the truncated end
            // (offsets that new appends reuse): store the lowered state again.
            if let Err(e) = l.cleaner.store(&plan.storage, &plan.dir) {
                log::warn!("{}: storing the cleaner checkpoint failed: {e}", plan.dir.display());
            }
        } else if let Ok((_, state)) = &result {
            l.cleaner.first_dirty_offset = state.first_dirty_offset;
            l.cleaner.delete_horizon_ms = state.delete_horizon_ms;
        }
    });
    result.map(|(report, _)| report)
}

fn run(
    log: &mut impl LogAccess,
    plan: &Plan,
    now_ms: i64,
    config: &CleanerConfig,
) -> Result<(CleanReport, CleanerState), LogError> {
    let map = filter::OffsetMap::build(plan, config)?;
    let mut report = CleanReport {
        first_dirty_offset: plan.first_dirty_offset,
        end_offset: map.end_offset,
        keys: map.len(),
        ..CleanReport::default()
    };
    let mut horizon: Option<i64> = None;
    for group in groups(plan, map.end_index) {
        let inputs = &plan.segments[group.clone()];
        let ctx = filter::Filter { plan, map: &map, now_ms, config };
        // A single segment is rewritten only if that changes something;
        // several are always merged.
        let dry = if group.len() == 1 { Some(ctx.run(inputs, None)?) } else { None };
        if let Some(stats) = &dry {
            if !stats.changed {
                horizon = min_option(horizon, stats.horizon_ms);
                continue;
            }
        }
        let mut output = Segment::create_with_suffix(&plan.storage, &plan.dir, inputs[0].base, CLEANED_SUFFIX, now_ms)?;
        let written = ctx.run(inputs, Some(&mut output)).and_then(|stats| {
            output.flush_all()?;
            output.seal();
            plan.storage.sync_dir(&plan.dir).map_err(LogError::io(&plan.dir))?;
            Ok(stats)
        });
        let stats = match written {
            Ok(stats) => stats,
            Err(e) => {
                swap::remove_cleaned(&plan.storage, &plan.dir, inputs[0].base);
                return Err(e);
            }
        };
        let bytes_after = output.size_bytes();
        match swap::swap_in(log, plan, group.clone(), output)? {
            None => {
                report.groups_abandoned += 1;
                continue;
            }
            Some(replaced) => swap::finish_swap(log, plan, &replaced)?,
        }
        horizon = min_option(horizon, stats.horizon_ms);
        report.segments_replaced += group.len();
        report.segments_written += 1;
        report.records_removed += stats.records_removed;
        report.tombstones_removed += stats.tombstones_removed;
        report.bytes_before += inputs.iter().map(|s| s.size_bytes).sum::<u64>();
        report.bytes_after += bytes_after;
    }
    let state =
        CleanerState { first_dirty_offset: map.end_offset, delete_horizon_ms: horizon, ..CleanerState::default() };
    state.store(&plan.storage, &plan.dir)?;
    if report.segments_written > 0 {
        log::info!(
            "{}: compacted offsets below {}: {} segment(s) into {}, {} → {} bytes, {} record(s) removed ({} tombstones)",
            plan.dir.display(),
            report.end_offset,
            report.segments_replaced,
            report.segments_written,
            report.bytes_before,
            report.bytes_after,
            report.records_removed,
            report.tombstones_removed
        );
    }
    Ok((report, state))
}

/// Consecutive segments below `end` whose sizes add up to at most
/// `segment.bytes` and whose offsets fit one segment's u32 relative offsets
/// (Kafka's `groupSegmentsBySize`).
fn groups(plan: &Plan, end: usize) -> Vec<Range<usize>> {
    let segments = &plan.segments[..end];
    let mut out = Vec::new();
    let mut i = 0;
    while i < segments.len() {
        let start = i;
        let mut bytes = segments[i].size_bytes;
        i += 1;
        while i < segments.len()
            && bytes + segments[i].size_bytes <= plan.segment_bytes_max
            && segments[i].next_base - segments[start].base <= i64::from(u32::MAX)
        {
            bytes += segments[i].size_bytes;
            i += 1;
        }
        out.push(start..i);
    }
    out
}

fn min_option(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The names of a segment's three files, index files first.
fn segment_names(base: i64) -> [String; 3] {
    [index_file_name(base), time_index_file_name(base), segment_file_name(base)]
}

#[cfg(test)]
mod tests;
