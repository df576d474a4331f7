//! Opening a partition directory: finish an interrupted cleaner swap (see
//! [`crate::cleaner`]) and an interrupted truncation (`truncate.rs`), list
//! the files, finish an interrupted retention, recover segments by
//! [`crate::recovery`]'s decision table, load (or rebuild) the leader epoch
//! history, rebuild producer state, and write a fresh recovery point if
//! anything had to be scanned.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use kafgres_record::control::{marker_of, Marker, MARKER_PEEK_BYTES};
use kafgres_record::{BatchHeader, BATCH_HEADER_BYTES};

use super::truncate::finish_interrupted_truncation;
use super::{LogConfig, OpenReport, PartitionLog, SEGMENT_BYTES_LIMIT};
use crate::checkpoint::read_whole;
use crate::cleaner::{finish_interrupted_swap, CleanerState, CLEANED_SUFFIX};
use crate::epochs::LeaderEpochHistory;
use crate::error::LogError;
use crate::producer::{snapshot_file_name, ProducerStateMap, TxnEnd, SNAPSHOT_BYTES_MAX, SNAPSHOT_SUFFIX};
use crate::recovery::{open_segment, plan, read_recovery_point, SegmentOpen, SegmentPlan};
use crate::retention::{read_log_start, remove_segment_files};
use crate::segment::{Segment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};
use crate::storage::{Storage, TMP_SUFFIX};

/// What the directory listing holds, by kind.
#[derive(Default)]
struct Listing {
    bases: Vec<i64>,
    with_index: BTreeSet<i64>,
    with_time_index: BTreeSet<i64>,
    snapshots: Vec<i64>,
}

fn parse_base(name: &str, suffix: &str) -> Option<Option<i64>> {
    name.strip_suffix(suffix).map(|stem| stem.parse().ok().filter(|b: &i64| *b >= 0))
}

impl PartitionLog {
    /// Opens (or creates) the partition in `dir` on `storage`, recovering
    /// what a crash may have left (see [`crate::recovery`]).
    pub fn open_with(
        storage: Arc<dyn Storage>,
        dir: &Path,
        mut config: LogConfig,
        now_ms: i64,
    ) -> Result<(PartitionLog, OpenReport), LogError> {
        config.segment_bytes_max = config.segment_bytes_max.clamp(1, SEGMENT_BYTES_LIMIT);
        let mut report =
            OpenReport { swap_completed: finish_interrupted_swap(&storage, dir)?, ..OpenReport::default() };
        report.truncation_completed = finish_interrupted_truncation(&storage, dir)?;
        let listing = list(&storage, dir)?;
        let log_start = read_log_start(&storage, dir)?;
        let mut bases = listing.bases.clone();
        // Finish a retention that deleted segments logically (log start
        // checkpoint written) but crashed before unlinking all their files.
        if let Some(start) = log_start {
            while bases.len() > 1 && bases[1] <= start {
                remove_segment_files(&storage, dir, bases[0]);
                report.deleted_segments.push(bases.remove(0));
            }
        }
        let checkpoint = read_recovery_point(&storage, dir)?;
        let mut segments = Vec::with_capacity(bases.len().max(1));
        for &base in &bases {
            segments.push(Segment::open(&storage, dir, base, now_ms)?);
        }
        let lengths = segments
            .iter()
            .map(|s| s.file().len().map(|len| (s.base_offset, len)).map_err(LogError::io(&s.path)))
            .collect::<Result<Vec<_>, _>>()?;
        let (plans, ignored) = plan(&lengths, checkpoint);
        if let Some(why) = &ignored {
            log::warn!("{}: {why}; scanning every segment", dir.display());
        }
        report.recovery_point = checkpoint.filter(|_| ignored.is_none());
        report.recovery_point_ignored = ignored;
        let mut i = 0;
        while i < segments.len() {
            let next_base = segments.get(i + 1).map(|s| s.base_offset);
            let base = segments[i].base_offset;
            let present = listing.with_index.contains(&base) && listing.with_time_index.contains(&base);
            let scan = open_segment(&mut segments[i], plans[i], next_base, present, config.index_interval_bytes)?;
            let scanned = plans[i] != SegmentPlan::LoadIndexes;
            // A compacted segment may end below the next one's base; one
            // that was cut, or runs into the next one, does not follow on.
            let ends_in_range = next_base.is_none_or(|n| segments[i].next_offset <= n);
            let follows_on = ends_in_range && scan.truncated_bytes == 0;
            if !follows_on && scanned && next_base.is_some() {
                // The segments after a cut cannot be trusted to follow on.
                let cut_at = segments[i].next_offset;
                for later in segments.drain(i + 1..) {
                    log::warn!(
                        "{}: deleting segment {} after recovery cut segment {base} at offset {cut_at}",
                        dir.display(),
                        later.base_offset,
                    );
                    remove_segment_files(&storage, dir, later.base_offset);
                    report.deleted_segments.push(later.base_offset);
                }
            } else if !ends_in_range {
                log::error!(
                    "{}: segment {base} ends at offset {} but the next one starts at {:?}; offsets between are lost",
                    dir.display(),
                    segments[i].next_offset,
                    next_base
                );
            }
            report.segments.push(scan);
            i += 1;
        }
        if segments.is_empty() {
            let base = log_start.unwrap_or(0).max(0);
            segments.push(Segment::open(&storage, dir, base, now_ms)?);
            storage.sync_dir(dir).map_err(LogError::io(dir))?;
        }
        // Recovery scans noted every batch; only the last segment takes appends.
        let closed = segments.len() - 1;
        segments[..closed].iter_mut().for_each(Segment::seal);
        let first_base = segments[0].base_offset;
        let mut log = PartitionLog {
            storage,
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset: first_base,
            producers: ProducerStateMap::default(),
            recovery_point: report.recovery_point,
            failed: None,
            snapshots: Vec::new(),
            clock_ms: now_ms,
            cleaner: CleanerState::default(),
            epochs: LeaderEpochHistory::default(),
        };
        log.cleaner = CleanerState::load(&log.storage, dir)?;
        log.log_start_offset = log_start.unwrap_or(first_base).max(first_base).min(log.next_offset());
        let stored_epochs = log.load_epochs(&mut report)?;
        log.rebuild_producers(listing.snapshots, &mut report)?;
        if stored_epochs.as_ref() != Some(&log.epochs) && (stored_epochs.is_some() || log.latest_epoch().is_some()) {
            // Before any append: a stale history would describe offsets
            // that new appends reuse.
            log.epochs.store(&log.storage, dir)?;
        }
        // A new partition has nothing to recover (its first roll or close
        // writes the first recovery point).
        let fresh = report.segments.is_empty() && report.deleted_segments.is_empty();
        let clean = fresh
            || report.recovery_point.is_some()
                && report.deleted_segments.is_empty()
                && report.segments.iter().all(|s| s.how == SegmentOpen::Trusted || s.scanned_bytes == 0);
        if !clean {
            // What recovery kept is what readers will see: make it durable
            // now, with a recovery point, so a second crash cannot take back
            // records served after this one, nor rescan the same bytes.
            log.checkpoint()?;
        }
        Ok((log, report))
    }

    /// The leader epoch history from its file, or rebuilt from every batch
    /// header when the file is missing or damaged (or holds nothing while the
    /// log holds batches), cut to the log's extent; returns what the file
    /// held. The headers [`Self::rebuild_producers`] walks next add epochs
    /// the file does not know yet.
    fn load_epochs(&mut self, report: &mut OpenReport) -> Result<Option<LeaderEpochHistory>, LogError> {
        let stored = LeaderEpochHistory::load(&self.storage, &self.dir)?;
        self.epochs = stored.clone().unwrap_or_default();
        self.cut_epochs_to_log();
        if self.epochs.latest().is_none() && self.next_offset() > self.log_start_offset {
            let mut rebuilt = LeaderEpochHistory::default();
            let log_start = self.log_start_offset;
            self.walk_batches(log_start, |h, _| {
                rebuilt.observe(h.partition_leader_epoch, h.base_offset.max(log_start))
            })?;
            self.epochs = rebuilt;
            self.cut_epochs_to_log();
            report.leader_epochs_rebuilt = true;
        }
        Ok(stored)
    }

    /// Drops the entries of the leader epoch history the log does not cover.
    fn cut_epochs_to_log(&mut self) {
        // An entry starting at the log end describes an epoch that began and
        // wrote nothing yet (its batch lost to a crash, or DeleteRecords up
        // to the end): kept, as in memory. Past the end, it describes
        // batches recovery cut.
        self.epochs.truncate_from_end(self.next_offset().saturating_add(1));
        self.epochs.truncate_from_start(self.log_start_offset);
    }

    /// Producer state from the newest usable snapshot plus the batch headers
    /// after it (see [`crate::producer`]); the leader epoch history observes
    /// the same headers.
    pub(super) fn rebuild_producers(
        &mut self,
        mut snapshot_offsets: Vec<i64>,
        report: &mut OpenReport,
    ) -> Result<(), LogError> {
        let end = self.next_offset();
        snapshot_offsets.sort_unstable();
        let mut found: Option<(i64, ProducerStateMap)> = None;
        for &offset in snapshot_offsets.iter().rev() {
            let path = self.dir.join(snapshot_file_name(offset));
            if offset > end {
                // Written before a tail that recovery cut: describes records that are gone.
                let _ = self.storage.remove(&path);
                continue;
            }
            if found.is_some() {
                continue;
            }
            let Some(bytes) = read_whole(&self.storage, &path, SNAPSHOT_BYTES_MAX)? else { continue };
            match ProducerStateMap::decode_snapshot(&bytes) {
                Ok((at, state)) if at == offset => found = Some((at, state)),
                Ok((at, _)) => log::warn!("{}: says offset {at}; ignoring it", path.display()),
                Err(e) => log::warn!("{}: {e}; ignoring it", path.display()),
            }
        }
        self.snapshots = snapshot_offsets.into_iter().filter(|o| *o <= end).collect();
        report.producer_snapshot = found.as_ref().map(|f| f.0);
        let (from, state) = found.unwrap_or((self.log_start_offset, ProducerStateMap::default()));
        let mut producers = state;
        let mut scanned = 0u64;
        let mut epochs = std::mem::take(&mut self.epochs);
        let log_start = self.log_start_offset;
        self.walk_batches(from, |h, marker| {
            scanned += 1;
            if h.last_offset() >= log_start {
                epochs.observe(h.partition_leader_epoch, h.base_offset.max(log_start));
            }
            match marker {
                Some(Marker::Commit) => producers.record_marker(h, TxnEnd::Commit, 0),
                Some(Marker::Abort) => producers.record_marker(h, TxnEnd::Abort, 0),
                None => producers.record(h),
            }
        })?;
        self.epochs = epochs;
        producers.mark_all_seen(self.clock_ms);
        self.producers = producers;
        report.producer_batches_scanned = scanned;
        self.producers.evict_below(self.log_start_offset);
        Ok(())
    }

    /// Calls `visit` with the header of every batch whose last offset is at
    /// or after `from`, in order, reading headers only, and the transaction
    /// marker of each control batch (from the first bytes of its record).
    pub(crate) fn walk_batches(
        &self,
        from: i64,
        mut visit: impl FnMut(&BatchHeader, Option<Marker>),
    ) -> Result<(), LogError> {
        let first = self.segments.partition_point(|s| s.next_offset <= from);
        for segment in &self.segments[first..] {
            let mut position = segment.position_of(from.max(segment.base_offset))?.unwrap_or(segment.size_bytes);
            let mut head = [0u8; BATCH_HEADER_BYTES + MARKER_PEEK_BYTES];
            while position + BATCH_HEADER_BYTES as u64 <= segment.size_bytes {
                let (header_bytes, body) = head.split_at_mut(BATCH_HEADER_BYTES);
                segment.file().read_exact_at(header_bytes, position).map_err(LogError::io(&segment.path))?;
                let Ok(h) = BatchHeader::parse(header_bytes) else { break };
                if h.batch_length <= 0 {
                    break;
                }
                let mut marker = None;
                if h.is_control() {
                    let peek = h.total_bytes().saturating_sub(BATCH_HEADER_BYTES).min(MARKER_PEEK_BYTES);
                    let body = &mut body[..peek];
                    segment
                        .file()
                        .read_exact_at(body, position + BATCH_HEADER_BYTES as u64)
                        .map_err(LogError::io(&segment.path))?;
                    marker = marker_of(&h, body);
                }
                if h.last_offset() >= from {
                    visit(&h, marker);
                }
                position += h.total_bytes() as u64;
            }
        }
        Ok(())
    }
}

/// Lists `dir` (creating it if missing), removing leftovers that carry no
/// information: `.tmp` files of interrupted checkpoint writes, `.cleaned`
/// files of a cleaning that never reached its commit point, and index
/// files whose segment is gone. Files the log does not know are left alone.
fn list(storage: &Arc<dyn Storage>, dir: &Path) -> Result<Listing, LogError> {
    let names = match storage.list_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            storage.create_dir_all(dir).map_err(LogError::io(dir))?;
            if let Some(parent) = dir.parent() {
                storage.sync_dir(parent).map_err(LogError::io(parent))?;
            }
            Vec::new()
        }
        Err(e) => return Err(LogError::Io { path: dir.to_path_buf(), source: e }),
    };
    let mut listing = Listing::default();
    let mut index_files = Vec::new();
    for name in &names {
        if name.ends_with(TMP_SUFFIX) || name.ends_with(CLEANED_SUFFIX) {
            let _ = storage.remove(&dir.join(name));
        } else if let Some(base) = parse_base(name, LOG_SUFFIX) {
            listing.bases.push(base.ok_or_else(|| LogError::BadSegmentName(dir.join(name)))?);
        } else if let Some(Some(offset)) = parse_base(name, SNAPSHOT_SUFFIX) {
            listing.snapshots.push(offset);
        } else if let Some(Some(base)) = parse_base(name, INDEX_SUFFIX) {
            listing.with_index.insert(base);
            index_files.push((base, name));
        } else if let Some(Some(base)) = parse_base(name, TIME_INDEX_SUFFIX) {
            listing.with_time_index.insert(base);
            index_files.push((base, name));
        }
    }
    listing.bases.sort_unstable();
    for (base, name) in index_files {
        if listing.bases.binary_search(&base).is_err() {
            let _ = storage.remove(&dir.join(name));
        }
    }
    Ok(listing)
}
