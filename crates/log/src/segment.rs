//! One segment: `<base>.log` holding record batches back to back, starting
//! at `base_offset`, with its `<base>.index` and `<base>.timeindex`
//! (layouts in [`crate::index`]). File names are the base offset in 20
//! zero-padded digits, as in Kafka.
//!
//! A lookup bisects the offset index, then reads batch headers forward from
//! the entry it found. The index is only a hint: the header at an entry's
//! position must carry the entry's offset, or the lookup starts over from
//! the beginning of the segment (a damaged index costs time, never wrong
//! data). Offsets among the batches appended since the last index entry —
//! where a consumer that keeps up fetches — are found in memory instead
//! ([`crate::recent_batches`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafgres_record::{BatchHeader, BATCH_HEADER_BYTES};

use crate::error::LogError;
use crate::index::{IndexFile, OffsetEntry, TimeEntry};
use crate::recent_batches::RecentBatches;
use crate::storage::{Storage, StorageFile};

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";

/// The file name of the segment starting at `base_offset`.
pub fn segment_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}{LOG_SUFFIX}")
}

pub fn index_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}{INDEX_SUFFIX}")
}

pub fn time_index_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}{TIME_INDEX_SUFFIX}")
}

/// The most bytes a segment file may hold: offset index positions are u32.
/// (Appends roll far below it, at [`crate::partition::SEGMENT_BYTES_LIMIT`];
/// only a file written by something else reaches it.)
pub const SEGMENT_POSITION_LIMIT: u64 = u32::MAX as u64;

/// Appended bytes after which a segment asks for their writeback.
pub const WRITEBACK_CHUNK_BYTES: u64 = 8 << 20;

/// How far ahead of its end a busy segment keeps its blocks allocated
/// ([`Segment::reserve_ahead`]; `LogConfig::reserve_ahead_bytes` sets it).
pub const RESERVE_AHEAD_BYTES: u64 = 4 << 20;

#[derive(Debug)]
pub struct Segment {
    pub(crate) base_offset: i64,
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<dyn StorageFile>,
    pub(crate) offset_index: IndexFile<OffsetEntry>,
    pub(crate) time_index: IndexFile<TimeEntry>,
    /// Bytes of whole batches in the file.
    pub(crate) size_bytes: u64,
    /// The offset after the last batch in this segment.
    pub(crate) next_offset: i64,
    pub(crate) bytes_since_index_entry: u64,
    /// Largest batch max timestamp so far (-1: none), and the base offset of
    /// the batch that holds it.
    pub(crate) max_timestamp_ms: i64,
    pub(crate) offset_of_max_timestamp: i64,
    pub(crate) created_ms: i64,
    /// Writeback of the file was started up to here (see [`Self::start_writeback_if_due`]).
    pub(crate) writeback_started_to: u64,
    /// The file's blocks are allocated up to here (see [`Self::reserve_ahead`]);
    /// `None` once the file system refused, so the segment stops asking.
    reserved_to: Option<u64>,
    /// The batches appended since the last offset-index entry (tail lookups).
    recent: RecentBatches,
}

/// Where a walk through a segment's batch headers ended.
enum Walk {
    Found(u64),
    End,
    BadHint,
}

/// The in-memory state of a segment before an append, to roll back to if
/// the append fails half-way.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegmentMark {
    size_bytes: u64,
    next_offset: i64,
    bytes_since_index_entry: u64,
    max_timestamp_ms: i64,
    offset_of_max_timestamp: i64,
    offset_entries: usize,
    time_entries: usize,
}

impl SegmentMark {
    /// The offset after the segment's last batch once cut back to the mark.
    pub(crate) fn next_offset(&self) -> i64 {
        self.next_offset
    }
}

impl Segment {
    /// Opens (creating if missing) the segment's three files without reading them.
    pub(crate) fn open(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        now_ms: i64,
    ) -> Result<Segment, LogError> {
        let path = dir.join(segment_file_name(base_offset));
        let file = storage.open(&path, true).map_err(LogError::io(&path))?;
        Ok(Segment {
            base_offset,
            offset_index: IndexFile::open(storage, &dir.join(index_file_name(base_offset)))?,
            time_index: IndexFile::open(storage, &dir.join(time_index_file_name(base_offset)))?,
            path,
            file,
            size_bytes: 0,
            next_offset: base_offset,
            bytes_since_index_entry: 0,
            max_timestamp_ms: -1,
            offset_of_max_timestamp: base_offset,
            created_ms: now_ms,
            writeback_started_to: 0,
            reserved_to: Some(0),
            recent: RecentBatches::default(),
        })
    }

    /// Creates the empty files of a segment the log cleaner is writing:
    /// `<base>.log<suffix>`, `<base>.index<suffix>`, `<base>.timeindex<suffix>`
    /// (truncated if a failed attempt left them).
    pub(crate) fn create_with_suffix(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        suffix: &str,
        now_ms: i64,
    ) -> Result<Segment, LogError> {
        let path = dir.join(format!("{}{suffix}", segment_file_name(base_offset)));
        let file = storage.open(&path, true).map_err(LogError::io(&path))?;
        file.set_len(0).map_err(LogError::io(&path))?;
        let index = |name: String| -> Result<_, LogError> {
            let path = dir.join(format!("{name}{suffix}"));
            storage.open(&path, true).and_then(|f| f.set_len(0)).map_err(LogError::io(&path))?;
            Ok(path)
        };
        Ok(Segment {
            base_offset,
            offset_index: IndexFile::open(storage, &index(index_file_name(base_offset))?)?,
            time_index: IndexFile::open(storage, &index(time_index_file_name(base_offset))?)?,
            path,
            file,
            size_bytes: 0,
            next_offset: base_offset,
            bytes_since_index_entry: 0,
            max_timestamp_ms: -1,
            offset_of_max_timestamp: base_offset,
            created_ms: now_ms,
            writeback_started_to: 0,
            reserved_to: Some(0),
            recent: RecentBatches::default(),
        })
    }

    /// The segment's files now carry the names of [`Self::open`] (renamed
    /// from the cleaner's names).
    pub(crate) fn set_final_paths(&mut self, dir: &Path) {
        self.path = dir.join(segment_file_name(self.base_offset));
        self.offset_index.set_path(dir.join(index_file_name(self.base_offset)));
        self.time_index.set_path(dir.join(time_index_file_name(self.base_offset)));
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn max_timestamp_ms(&self) -> i64 {
        self.max_timestamp_ms
    }

    pub fn offset_index(&self) -> &[OffsetEntry] {
        self.offset_index.entries()
    }

    pub fn time_index(&self) -> &[TimeEntry] {
        self.time_index.entries()
    }

    pub(crate) fn file(&self) -> &Arc<dyn StorageFile> {
        &self.file
    }

    /// Empties the segment's three files, which an earlier life of its base
    /// offset may have left (a new segment must not be shadowed by them).
    pub(crate) fn clear_leftovers(&mut self) -> Result<(), LogError> {
        self.file.set_len(0).map_err(LogError::io(&self.path))?;
        self.offset_index.clear()?;
        self.time_index.clear()
    }

    /// Whether `offset` can be stored relative to this segment's base (u32).
    pub(crate) fn fits_relative(&self, offset: i64) -> bool {
        offset >= self.base_offset && offset - self.base_offset <= i64::from(u32::MAX)
    }

    /// Whether a batch with `header` may be noted next: it starts at or after
    /// the segment's end offset, and its offsets and its bytes fit the u32
    /// fields of the indexes. A batch read back from a file is checked with
    /// this first (failing it is damage, an error); [`Self::note_batch`]
    /// asserts it.
    pub(crate) fn may_note(&self, header: &BatchHeader) -> bool {
        let last = header.base_offset.checked_add(i64::from(header.last_offset_delta));
        header.base_offset >= self.next_offset
            && header.last_offset_delta >= 0
            && last.is_some_and(|last| self.fits_relative(last))
            && self.size_bytes.saturating_add(header.total_bytes() as u64) <= SEGMENT_POSITION_LIMIT
    }

    /// Empties the in-memory state (before a scan rebuilds it).
    pub(crate) fn reset(&mut self) -> Result<(), LogError> {
        self.size_bytes = 0;
        self.next_offset = self.base_offset;
        self.bytes_since_index_entry = 0;
        self.max_timestamp_ms = -1;
        self.offset_of_max_timestamp = self.base_offset;
        self.recent.clear();
        self.offset_index.truncate(0)?;
        self.time_index.truncate(0)
    }

    /// Accounts for a batch written at `position`, adding index entries (in
    /// memory; the files get them at the next [`Self::flush_all`]) when the
    /// interval has passed. `header` carries the assigned base offset.
    pub(crate) fn note_batch(&mut self, header: &BatchHeader, position: u64, index_interval_bytes: u64) {
        let size = header.total_bytes() as u64;
        // Appends assign offsets from the segment's end and write at its end;
        // scans and the cleaner check what they read with `may_note` first.
        assert_eq!(position, self.size_bytes, "{}: a batch is noted where the segment ends", self.path.display());
        assert!(
            header.base_offset >= self.next_offset,
            "{}: batch at offset {} noted below the segment's end offset {}",
            self.path.display(),
            header.base_offset,
            self.next_offset
        );
        assert!(
            position + size <= SEGMENT_POSITION_LIMIT,
            "{}: a batch ending at byte {} is past what u32 index positions address",
            self.path.display(),
            position + size
        );
        if header.max_timestamp > self.max_timestamp_ms {
            self.max_timestamp_ms = header.max_timestamp;
            self.offset_of_max_timestamp = header.base_offset;
        }
        if self.offset_index.entries().is_empty() || self.bytes_since_index_entry >= index_interval_bytes {
            let relative_offset = self.relative(header.base_offset);
            // Fits: asserted above.
            self.offset_index.append(OffsetEntry { relative_offset, position: position as u32 });
            self.append_time_entry();
            self.bytes_since_index_entry = 0;
            self.recent.clear();
        }
        let last_offset = header.last_offset();
        assert!(
            self.fits_relative(last_offset),
            "{}: a batch's last offset {last_offset} is not a u32 above the segment's base {}",
            self.path.display(),
            self.base_offset
        );
        self.recent.push(header.base_offset, last_offset, position);
        self.bytes_since_index_entry += size;
        self.size_bytes = position + size;
        self.next_offset = header.next_offset();
    }

    fn relative(&self, offset: i64) -> u32 {
        // Appends roll before an offset stops fitting (see `fits_relative`);
        // scans and the cleaner cut or refuse such a batch (`may_note`).
        assert!(
            self.fits_relative(offset),
            "{}: offset {offset} is not a u32 above the segment's base {}",
            self.path.display(),
            self.base_offset
        );
        (offset - self.base_offset) as u32
    }

    /// Adds a time entry for the largest timestamp so far, if it is new.
    pub(crate) fn append_time_entry(&mut self) {
        if self.max_timestamp_ms < 0 || self.time_index.last().is_some_and(|e| e.timestamp_ms >= self.max_timestamp_ms)
        {
            return;
        }
        let relative_offset = self.relative(self.offset_of_max_timestamp);
        self.time_index.append(TimeEntry { timestamp_ms: self.max_timestamp_ms, relative_offset });
    }

    /// Makes the segment and both indexes durable, with a final time entry so
    /// that the time index alone gives the segment's largest timestamp.
    pub(crate) fn flush_all(&mut self) -> Result<(), LogError> {
        self.append_time_entry();
        self.file.sync_data().map_err(LogError::io(&self.path))?;
        self.offset_index.sync()?;
        self.time_index.sync()
    }

    /// Frees what only the segment taking appends needs (see
    /// [`crate::recent_batches`]); lookups still work, from the index. Blocks
    /// reserved past the end are given back: truncating a file to its own
    /// length frees them (ext4 and tmpfs, checked by the reservations tests;
    /// other file systems may keep them until the file is deleted), and a
    /// sealed segment never grows.
    /// A refusal only leaves them allocated until the segment is deleted.
    pub(crate) fn seal(&mut self) {
        self.recent.release();
        if self.reserved_to.is_some_and(|to| to > self.size_bytes) {
            if let Err(e) = self.file.set_len(self.size_bytes) {
                log::warn!("{}: freeing the blocks reserved past the end failed: {e}", self.path.display());
            }
            self.reserved_to = Some(self.size_bytes);
        }
    }

    /// Before appending `incoming` bytes: once the segment holds `ahead`
    /// bytes (a partition that writes a lot), keeps the file's blocks
    /// allocated past the append's end, `ahead` bytes at a time and never
    /// past `limit` (where the segment rolls).
    ///
    /// Why: a buffered write into unallocated blocks costs ext4 a delayed
    /// allocation per 4 KiB block (space and quota reservation, an entry in
    /// the extent status tree), then an allocation at writeback; into
    /// blocks allocated beforehand it costs a lookup. Producing 1 KiB
    /// records from three clients, 12.6% of the broker's CPU was in
    /// `ext4_da_get_block_prep`. The length does not change, so recovery and
    /// readers see exactly the bytes written; what a crash leaves reserved
    /// past the end is used by the next appends or freed at the roll.
    /// Costs disk space: up to `ahead` bytes per partition whose active
    /// segment holds at least as much. A refusal (a file system without
    /// `fallocate`, a full disk) stops the reservations of this segment;
    /// the writes go on as before and report a full disk themselves.
    pub(crate) fn reserve_ahead(&mut self, incoming: u64, ahead: u64, limit: u64) {
        let Some(reserved_to) = self.reserved_to else { return };
        let end = self.size_bytes + incoming;
        if ahead == 0 || self.size_bytes < ahead || end <= reserved_to {
            return;
        }
        let from = reserved_to.max(self.size_bytes);
        let to = end.saturating_add(ahead).min(limit.max(end));
        match self.file.reserve(from, to - from) {
            Ok(()) => self.reserved_to = Some(to),
            Err(e) => {
                if e.kind() == std::io::ErrorKind::Unsupported {
                    log::debug!("{}: no block reservation here: {e}", self.path.display());
                } else {
                    log::warn!("{}: reserving blocks ahead of the appends failed: {e}", self.path.display());
                }
                self.reserved_to = None;
            }
        }
    }

    pub(crate) fn mark(&self) -> SegmentMark {
        SegmentMark {
            size_bytes: self.size_bytes,
            next_offset: self.next_offset,
            bytes_since_index_entry: self.bytes_since_index_entry,
            max_timestamp_ms: self.max_timestamp_ms,
            offset_of_max_timestamp: self.offset_of_max_timestamp,
            offset_entries: self.offset_index.entries().len(),
            time_entries: self.time_index.entries().len(),
        }
    }

    /// Undoes a failed append: cuts whatever part of it reached the files.
    pub(crate) fn roll_back(&mut self, mark: SegmentMark) -> Result<(), LogError> {
        self.size_bytes = mark.size_bytes;
        self.writeback_started_to = self.writeback_started_to.min(mark.size_bytes);
        // Cutting the file frees its blocks past the new end.
        self.reserved_to = self.reserved_to.map(|to| to.min(mark.size_bytes));
        self.next_offset = mark.next_offset;
        self.bytes_since_index_entry = mark.bytes_since_index_entry;
        self.max_timestamp_ms = mark.max_timestamp_ms;
        self.offset_of_max_timestamp = mark.offset_of_max_timestamp;
        self.recent.truncate_to(mark.size_bytes);
        self.file.set_len(mark.size_bytes).map_err(LogError::io(&self.path))?;
        self.offset_index.truncate(mark.offset_entries)?;
        self.time_index.truncate(mark.time_entries)
    }

    /// The state the segment had when it ended at byte `position`, the start
    /// of one of its batches (or its end): what [`Self::roll_back`] cuts it
    /// back to for a truncation. Reads the batch headers from the last offset
    /// index entry before `position` to it (at most an index interval) to
    /// learn where the kept batches end and their largest timestamp; the
    /// time entries of kept batches give the largest timestamp before that.
    pub(crate) fn mark_at(&self, position: u64) -> Result<SegmentMark, LogError> {
        let offsets = self.offset_index.entries();
        let offset_entries = offsets.partition_point(|e| u64::from(e.position) < position);
        let mut at = offset_entries.checked_sub(1).map_or(0, |i| u64::from(offsets[i].position));
        let walked_from = at;
        let mut next_offset = self.base_offset;
        let mut walked_max: Option<(i64, i64)> = None;
        let mut head = [0u8; BATCH_HEADER_BYTES];
        while at < position {
            let bad = |reason: String| LogError::BadBatch { path: self.path.clone(), position: at, reason };
            if at + BATCH_HEADER_BYTES as u64 > self.size_bytes {
                return Err(bad("the batch headers do not reach the truncation point".into()));
            }
            self.file.read_exact_at(&mut head, at).map_err(LogError::io(&self.path))?;
            let h = BatchHeader::parse(&head).map_err(|e| bad(e.to_string()))?;
            if h.batch_length <= 0 || h.base_offset < next_offset {
                return Err(bad(format!("a batch of offset {} and length {}", h.base_offset, h.batch_length)));
            }
            if walked_max.is_none_or(|(ts, _)| h.max_timestamp > ts) {
                walked_max = Some((h.max_timestamp, h.base_offset));
            }
            next_offset = h.next_offset();
            at += h.total_bytes() as u64;
        }
        if at != position {
            let reason = format!("byte {position} is not the start of a batch");
            return Err(LogError::BadBatch { path: self.path.clone(), position, reason });
        }
        let time_entries = self
            .time_index
            .entries()
            .partition_point(|e| self.base_offset + i64::from(e.relative_offset) < next_offset);
        let indexed = self.time_index.entries()[..time_entries]
            .last()
            .map(|e| (e.timestamp_ms, self.base_offset + i64::from(e.relative_offset)));
        let (max_timestamp_ms, offset_of_max_timestamp) = match (indexed, walked_max) {
            (Some(i), Some(w)) if w.0 > i.0 => w,
            (Some(i), _) => i,
            (None, Some(w)) if w.0 >= 0 => w,
            _ => (-1, self.base_offset),
        };
        Ok(SegmentMark {
            size_bytes: position,
            next_offset,
            bytes_since_index_entry: position - walked_from,
            max_timestamp_ms,
            offset_of_max_timestamp,
            offset_entries,
            time_entries,
        })
    }

    /// Once [`WRITEBACK_CHUNK_BYTES`] have been appended since the last
    /// time, asks the kernel to start writing them to disk, without waiting
    /// (write-behind). Nothing becomes durable by it — only `sync_data`
    /// does that — but the dirty pages stay few: the fdatasync at a roll then
    /// has megabytes left to write instead of up to a whole segment (a
    /// second-long stall of every append to the partition, seen at 1 GB/s
    /// with fsync relaxed), and a fast writer does not reach the kernel's
    /// dirty-page limit and its throttling. A refusal is only logged: the
    /// next `sync_data` writes the same pages and reports real I/O errors.
    pub(crate) fn start_writeback_if_due(&mut self) {
        let pending = self.size_bytes.saturating_sub(self.writeback_started_to);
        if pending < WRITEBACK_CHUNK_BYTES {
            return;
        }
        if let Err(e) = self.file.start_writeback(self.writeback_started_to, pending) {
            log::warn!("{}: starting writeback failed: {e}", self.path.display());
        }
        self.writeback_started_to = self.size_bytes;
    }

    /// Writes `bytes` at the end of the file (page cache only).
    pub(crate) fn write_at_end(&self, bytes: &[u8]) -> Result<(), LogError> {
        self.file.write_all_at(bytes, self.size_bytes).map_err(LogError::io(&self.path))
    }

    /// Writes `slices` one after the other at the end (see [`Self::write_at_end`]).
    pub(crate) fn write_slices_at_end(&self, slices: &mut [std::io::IoSlice<'_>]) -> Result<(), LogError> {
        self.file.write_all_vectored_at(slices, self.size_bytes).map_err(LogError::io(&self.path))
    }

    /// The byte position of the batch containing `offset`, or `None` when the
    /// offset is at or past this segment's end.
    pub(crate) fn position_of(&self, offset: i64) -> Result<Option<u64>, LogError> {
        if offset >= self.next_offset {
            return Ok(None);
        }
        if let Some(position) = self.recent.position_of(offset) {
            return Ok(Some(position));
        }
        let entries = self.offset_index.entries();
        let relative = offset.saturating_sub(self.base_offset).clamp(0, i64::from(u32::MAX)) as u32;
        let hint = match entries.partition_point(|e| e.relative_offset <= relative) {
            0 => None,
            i => Some(entries[i - 1]),
        };
        if let Some(entry) = hint {
            let expected = self.base_offset + i64::from(entry.relative_offset);
            match self.walk_to(offset, u64::from(entry.position), Some(expected))? {
                Walk::Found(position) => return Ok(Some(position)),
                // Past the last batch: a compacted segment may end below
                // the next segment's base.
                Walk::End => return Ok(None),
                Walk::BadHint => {}
            }
        }
        match self.walk_to(offset, 0, None)? {
            Walk::Found(position) => Ok(Some(position)),
            Walk::End | Walk::BadHint => Ok(None),
        }
    }

    /// Reads headers forward from `position` to the batch holding `offset`.
    /// With `expected`, the first header must start at that offset, else the
    /// walk gives up (`BadHint`) and the caller starts from the segment's start.
    fn walk_to(&self, offset: i64, mut position: u64, mut expected: Option<i64>) -> Result<Walk, LogError> {
        let mut head = [0u8; BATCH_HEADER_BYTES];
        while position + BATCH_HEADER_BYTES as u64 <= self.size_bytes {
            self.file.read_exact_at(&mut head, position).map_err(LogError::io(&self.path))?;
            let Ok(h) = BatchHeader::parse(&head) else { break };
            if let Some(want) = expected.take() {
                if h.base_offset != want {
                    log::warn!(
                        "{}: index entry for offset {want} points at a batch of offset {}; scanning",
                        self.path.display(),
                        h.base_offset
                    );
                    return Ok(Walk::BadHint);
                }
            }
            if h.last_offset() >= offset {
                return Ok(Walk::Found(position));
            }
            if h.batch_length <= 0 {
                break;
            }
            position += h.total_bytes() as u64;
        }
        Ok(Walk::End)
    }
}
