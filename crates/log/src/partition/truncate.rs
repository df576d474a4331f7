//! Truncating the end of the log: a follower cutting the batches its leader
//! never had (the leader epoch history says where they diverge).
//!
//! [`PartitionLog::truncate_to`] removes every batch whose last offset is at
//! or past the requested offset. It plans the cut from the indexes and a few
//! batch headers, then runs this protocol (the same shape as the cleaner's
//! swap):
//!
//! 1. **commit point**: `log-truncation` (`offset E`, `segment_base B`,
//!    `position P`: the new end, the segment that will be the last, and its
//!    new length) is written by the atomic checkpoint protocol;
//! 2. the segments after B leave the list and their files are unlinked,
//!    newest first, indexes before the `.log`;
//! 3. B's `.log` and indexes are cut (at P, and after the last kept entry)
//!    and fdatasynced with a final time entry;
//! 4. the producer snapshots past E are unlinked; the directory is fsynced;
//! 5. the cleaner checkpoint is lowered to E if it was past it, the leader
//!    epoch history loses its entries starting at or past E (both stored
//!    atomically: a stale one would describe offsets that new appends reuse);
//! 6. the producer state is rebuilt (the newest snapshot at or below E plus
//!    the headers after it), and a snapshot and the recovery point are
//!    written at E (B is durable up to P with its indexes);
//! 7. `log-truncation` is removed and the directory fsynced.
//!
//! Opening finishes a truncation whose `log-truncation` exists before
//! anything else reads the segments: it unlinks every segment with a base
//! past B, cuts B's `.log` to P (fdatasync), unlinks the snapshots past E,
//! lowers the cleaner checkpoint, cuts the leader epoch history at E, then
//! removes the file; recovery then opens
//! the segments as after any crash (B's index files are checked against the
//! recovery point, which by then is at or below E, or unusable and a full
//! scan follows). So a crash before step 1 is durable leaves the old log,
//! and one after it the truncated log (less any unflushed tail recovery
//! cuts, as after any crash): always a prefix of the old log, never a hole,
//! never a segment that does not follow on. A failure from step 1 on makes
//! the log refuse writes until it is reopened, which finishes the job.
//!
//! Readers: batches cut from B are gone from its file at step 3, so a
//! read planned before the truncation that covers them comes back short.
//! The caller passes its high watermark as `end_offset_min`, so nothing a
//! reader bounded by it may read is cut.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use super::{OpenReport, PartitionLog};
use crate::checkpoint::{decode_offsets, encode_offsets, read_whole, write_atomically};
use crate::cleaner::CleanerState;
use crate::epochs::LeaderEpochHistory;
use crate::error::LogError;
use crate::producer::{snapshot_file_name, SNAPSHOT_SUFFIX};
use crate::segment::{index_file_name, segment_file_name, time_index_file_name, SegmentMark, LOG_SUFFIX};
use crate::storage::Storage;

/// A truncation between its commit point and its end (see the module doc).
pub const TRUNCATION_FILE: &str = "log-truncation";
const TRUNCATION_KEYS: [&str; 3] = ["offset", "segment_base", "position"];

/// Where a truncation cuts.
#[derive(Debug)]
struct Cut {
    /// The segments from this index on are deleted.
    first_deleted: usize,
    /// The last kept segment's state after the cut; `None` when it is kept
    /// whole (the cut fell at the start of the segment after it).
    mark: Option<SegmentMark>,
    /// The new log end: the end of the last batch kept.
    new_end: i64,
    /// The last kept segment and its length after the cut.
    segment_base: i64,
    position: u64,
}

impl PartitionLog {
    /// Removes every batch whose last offset is at or past `offset`: the new
    /// log end is the start of the batch holding `offset`, `offset` itself at
    /// a batch boundary, or the end of the batch before a gap holding it (a
    /// compacted leader's). Durable before it returns; crash-safe at every
    /// step (module doc). Returns the new log end; `offset` at or past the
    /// log end changes nothing.
    ///
    /// Refused with [`LogError::TruncationRefused`], nothing changed, when
    /// `offset` is below the log start, or the new end would be below the
    /// log start (a batch straddles it) or below `end_offset_min`. The log
    /// does not know the high watermark: the caller passes it (or the log
    /// start, to allow anything) as `end_offset_min`, and afterwards lowers
    /// its own positions (high watermark, durable end) to the new end.
    pub fn truncate_to(&mut self, offset: i64, end_offset_min: i64) -> Result<i64, LogError> {
        self.refuse_if_failed()?;
        let log_end = self.next_offset();
        if offset >= log_end {
            return Ok(log_end);
        }
        let log_start = self.log_start_offset;
        let refused = |new_end| LogError::TruncationRefused { requested: offset, new_end, log_start, end_offset_min };
        if offset < log_start {
            return Err(refused(offset));
        }
        let cut = self.plan_cut(offset)?;
        let new_end = cut.new_end;
        if new_end < log_start.max(end_offset_min) {
            return Err(refused(new_end));
        }
        log::warn!(
            "{}: truncating the log from its end {log_end} to {new_end} (requested {offset}), deleting {} segment(s)",
            self.dir.display(),
            self.segments.len() - cut.first_deleted
        );
        self.or_fail("truncating the log", |log| log.apply_cut(cut))?;
        Ok(new_end)
    }

    fn plan_cut(&self, offset: i64) -> Result<Cut, LogError> {
        let i = self.segments.partition_point(|s| s.next_offset <= offset);
        let segment = &self.segments[i.min(self.segments.len() - 1)];
        let missing = || LogError::BadBatch {
            path: segment.path.clone(),
            position: 0,
            reason: format!("no batch holds offset {offset}, below the segment's end {}", segment.next_offset),
        };
        let position = segment.position_of(offset)?.ok_or_else(missing)?;
        if position == 0 && i > 0 {
            // Segment i goes whole; keeping it empty would leave the log end
            // at its base, which may be past `offset` (a gap before it).
            let kept = &self.segments[i - 1];
            return Ok(Cut {
                first_deleted: i,
                mark: None,
                new_end: kept.next_offset,
                segment_base: kept.base_offset,
                position: kept.size_bytes,
            });
        }
        let mark = segment.mark_at(position)?;
        Ok(Cut {
            first_deleted: i + 1,
            new_end: mark.next_offset(),
            mark: Some(mark),
            segment_base: segment.base_offset,
            position,
        })
    }

    /// Steps 1–7 of the module doc.
    fn apply_cut(&mut self, cut: Cut) -> Result<(), LogError> {
        let storage = Arc::clone(&self.storage);
        let dir = self.dir.clone();
        let new_end = cut.new_end;
        let plan = encode_offsets(&[
            (TRUNCATION_KEYS[0], new_end),
            (TRUNCATION_KEYS[1], cut.segment_base),
            (TRUNCATION_KEYS[2], cut.position as i64),
        ]);
        write_atomically(&storage, &dir, TRUNCATION_FILE, &plan)?;
        let later: Vec<_> = self.segments.drain(cut.first_deleted..).collect();
        for segment in later.iter().rev() {
            remove_segment_files(&storage, &dir, segment.base_offset)?;
        }
        let active = self.active_mut();
        if let Some(mark) = cut.mark {
            active.roll_back(mark)?;
        }
        active.flush_all()?;
        let (gone, kept): (Vec<i64>, Vec<i64>) = self.snapshots.iter().partition(|o| **o > new_end);
        for offset in gone {
            remove_file(&storage, &dir.join(snapshot_file_name(offset)))?;
        }
        self.snapshots = kept;
        storage.sync_dir(&dir).map_err(LogError::io(&dir))?;
        if self.cleaner.note_truncation(new_end) {
            self.cleaner.store(&storage, &dir)?;
        }
        if self.epochs.truncate_from_end(new_end) {
            self.epochs.store(&storage, &dir)?;
        }
        self.rebuild_producers(self.snapshots.clone(), &mut OpenReport::default())?;
        self.write_checkpoints()?;
        remove_file(&storage, &dir.join(TRUNCATION_FILE))?;
        storage.sync_dir(&dir).map_err(LogError::io(&dir))
    }
}

/// Finishes, at open, a truncation a crash interrupted after its commit
/// point (module doc); returns the end it truncated to.
pub(crate) fn finish_interrupted_truncation(storage: &Arc<dyn Storage>, dir: &Path) -> Result<Option<i64>, LogError> {
    let path = dir.join(TRUNCATION_FILE);
    let Some(bytes) = read_whole(storage, &path, 4096)? else { return Ok(None) };
    let plan = decode_offsets(&path, &bytes, &TRUNCATION_KEYS)
        .and_then(|v| Some((v[0], v[1], u64::try_from(v[2]).ok()?)))
        .filter(|(end, base, _)| *end >= *base && *base >= 0);
    let Some((end, base, position)) = plan else {
        // Written atomically, so only outside damage gets here; without the
        // plan, recovery keeps what follows on and deletes what does not.
        log::error!("{}: an interrupted truncation cannot be finished; recovering as after a crash", path.display());
        remove_file(storage, &path)?;
        return Ok(None);
    };
    log::warn!("{}: finishing a truncation to offset {end} that a crash interrupted", dir.display());
    let names = storage.list_dir(dir).map_err(LogError::io(dir))?;
    let number = |name: &str, suffix: &str| name.strip_suffix(suffix).and_then(|n| n.parse::<i64>().ok());
    let mut later: Vec<i64> = names.iter().filter_map(|n| number(n, LOG_SUFFIX)).filter(|b| *b > base).collect();
    later.sort_unstable_by(|a, b| b.cmp(a));
    for b in later {
        remove_segment_files(storage, dir, b)?;
    }
    let log_path = dir.join(segment_file_name(base));
    match storage.open(&log_path, false) {
        Ok(file) => {
            if file.len().map_err(LogError::io(&log_path))? > position {
                file.set_len(position).map_err(LogError::io(&log_path))?;
                file.sync_data().map_err(LogError::io(&log_path))?;
            }
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(LogError::Io { path: log_path, source: e }),
    }
    for offset in names.iter().filter_map(|n| number(n, SNAPSHOT_SUFFIX)).filter(|o| *o > end) {
        remove_file(storage, &dir.join(snapshot_file_name(offset)))?;
    }
    let mut cleaner = CleanerState::load(storage, dir)?;
    if cleaner.note_truncation(end) {
        cleaner.store(storage, dir)?;
    }
    // As the truncation itself would have: an epoch starting at the new end
    // goes too (opening alone keeps one there). Missing or damaged, the
    // history is rebuilt by opening anyway.
    if let Some(mut epochs) = LeaderEpochHistory::load(storage, dir)? {
        if epochs.truncate_from_end(end) {
            epochs.store(storage, dir)?;
        }
    }
    storage.sync_dir(dir).map_err(LogError::io(dir))?;
    remove_file(storage, &path)?;
    storage.sync_dir(dir).map_err(LogError::io(dir))?;
    Ok(Some(end))
}

/// Unlinks a segment's files, indexes first so that a `.log` never loses its
/// indexes while it remains. Unlike retention's best-effort removal, a
/// failure is an error: a segment left behind past the cut would come back
/// as a hole.
fn remove_segment_files(storage: &Arc<dyn Storage>, dir: &Path, base_offset: i64) -> Result<(), LogError> {
    for name in [index_file_name(base_offset), time_index_file_name(base_offset), segment_file_name(base_offset)] {
        remove_file(storage, &dir.join(name))?;
    }
    Ok(())
}

fn remove_file(storage: &Arc<dyn Storage>, path: &Path) -> Result<(), LogError> {
    match storage.remove(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::Io { path: path.to_path_buf(), source: e }),
    }
}
