//! A partition's ordered segments: append, roll, read and what to flush.
//!
//! Appends write to the page cache only. Durability is the caller's explicit
//! step: [`PartitionLog::end_position`] names the bytes written so far and
//! [`PartitionLog::unflushed_files`] the files a flush must fdatasync to make
//! them durable; the broker runs that outside any lock (group commit) and then
//! treats everything up to the position as durable.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafgres_wire::batch::{set_base_offset, set_partition_leader_epoch, BatchHeader, BATCH_LOG_OVERHEAD_BYTES};

use crate::error::LogError;
use crate::recovery::{scan_segment, ScanReport};
use crate::segment::Segment;

/// Per-partition storage settings (Kafka's topic configs of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would grow past this.
    pub segment_bytes_max: u64,
    /// `segment.ms`: roll when the active segment is older than this.
    pub segment_age_ms_max: i64,
    /// `index.interval.bytes`: bytes between sparse index entries.
    pub index_interval_bytes: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { segment_bytes_max: 1 << 30, segment_age_ms_max: 7 * 24 * 3600 * 1000, index_interval_bytes: 4096 }
    }
}

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
#[derive(Debug, Clone)]
pub struct ReadSlice {
    pub file: Option<Arc<File>>,
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

#[derive(Debug)]
pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    segments: Vec<Segment>,
    log_start_offset: i64,
}

impl PartitionLog {
    /// Opens (or creates) the partition in `dir`, recovering its newest segment.
    pub fn open(dir: &Path, config: LogConfig, now_ms: i64) -> Result<(PartitionLog, Vec<ScanReport>), LogError> {
        let created = !dir.exists();
        std::fs::create_dir_all(dir).map_err(LogError::io(dir))?;
        if created {
            if let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
        }
        let mut bases = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(LogError::io(dir))? {
            let entry = entry.map_err(LogError::io(dir))?;
            let name = entry.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".log")) else { continue };
            let base: i64 = stem.parse().map_err(|_| LogError::BadSegmentName(entry.path()))?;
            bases.push(base);
        }
        bases.sort_unstable();
        let mut segments = Vec::with_capacity(bases.len().max(1));
        let mut reports = Vec::new();
        let newest = bases.len().saturating_sub(1);
        for (i, base) in bases.into_iter().enumerate() {
            let mut segment = Segment::create(dir, base, now_ms)?;
            reports.push(scan_segment(&mut segment, i == newest, config.index_interval_bytes)?);
            segments.push(segment);
        }
        if segments.is_empty() {
            segments.push(Segment::create(dir, 0, now_ms)?);
            sync_dir(dir)?;
        } else if let Some(tail) = segments.last() {
            // What recovery kept is what readers will see: make it durable now,
            // so a second crash cannot take back records served after this one.
            tail.file.sync_data().map_err(LogError::io(&tail.path))?;
        }
        let log_start_offset = segments[0].base_offset;
        Ok((PartitionLog { dir: dir.to_path_buf(), config, segments, log_start_offset }, reports))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
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

    fn active(&self) -> &Segment {
        self.segments.last().expect("a partition log always has an active segment")
    }

    pub fn end_position(&self) -> LogPosition {
        let active = self.active();
        LogPosition { offset: active.next_offset, segment_base: active.base_offset, byte_pos: active.size_bytes }
    }

    /// Appends validated batches, assigning consecutive offsets by patching
    /// each batch's base offset and stamping `leader_epoch`. `headers` are the
    /// batches' parsed headers in order, as validation returned them.
    pub fn append(
        &mut self,
        batches: &mut [u8],
        headers: &[BatchHeader],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendResult, LogError> {
        let total = batches.len() as u64;
        self.maybe_roll(total, now_ms)?;
        let base_offset = self.next_offset();
        let mut offset = base_offset;
        let mut pos = 0usize;
        let mut stamped = Vec::with_capacity(headers.len());
        for h in headers {
            let size = h.total_bytes();
            let batch = &mut batches[pos..pos + size];
            set_base_offset(batch, offset);
            set_partition_leader_epoch(batch, leader_epoch);
            let mut h = *h;
            h.base_offset = offset;
            h.partition_leader_epoch = leader_epoch;
            offset = h.next_offset();
            if offset < 0 {
                return Err(LogError::OffsetOverflow(offset));
            }
            stamped.push((h, pos as u64));
            pos += size;
        }
        let interval = self.config.index_interval_bytes;
        let active = self.segments.last_mut().expect("active segment");
        active.write_at_end(batches)?;
        let start = active.size_bytes;
        for (h, rel) in stamped {
            active.note_batch(&h, start + rel, interval);
        }
        Ok(AppendResult { base_offset, last_offset: offset - 1, end: self.end_position() })
    }

    fn maybe_roll(&mut self, incoming_bytes: u64, now_ms: i64) -> Result<(), LogError> {
        let active = self.active();
        let full = active.size_bytes > 0 && active.size_bytes + incoming_bytes > self.config.segment_bytes_max;
        let old = active.size_bytes > 0 && now_ms - active.created_ms >= self.config.segment_age_ms_max;
        if !(full || old) {
            return Ok(());
        }
        // The old segment is flushed before the new one exists, so everything
        // before the newest segment is durable and recovery verifies only it.
        active.file.sync_data().map_err(LogError::io(&active.path))?;
        let next = active.next_offset;
        self.segments.push(Segment::create(&self.dir, next, now_ms)?);
        sync_dir(&self.dir)
    }

    /// The files holding bytes written after `since`, which a flush must
    /// fdatasync to make everything up to [`Self::end_position`] durable.
    pub fn unflushed_files(&self, since: LogPosition) -> Vec<(Arc<File>, PathBuf)> {
        self.segments
            .iter()
            .filter(|s| s.base_offset >= since.segment_base)
            .map(|s| (Arc::clone(&s.file), s.path.clone()))
            .collect()
    }

    /// Plans a read of up to `max_bytes` starting at the batch that holds
    /// `offset`, never past `upto` (the high watermark). With
    /// `whole_first_batch` the first batch is returned whole even if it is
    /// larger than `max_bytes` (KIP-74: the first partition of a fetch
    /// response always makes progress); without it, as in Kafka, the range is
    /// simply cut at `max_bytes`.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: u64,
        upto: LogPosition,
        whole_first_batch: bool,
    ) -> Result<ReadSlice, LogError> {
        let log_end = self.next_offset();
        if offset < self.log_start_offset || offset > log_end {
            return Err(LogError::OffsetOutOfRange { requested: offset, log_start: self.log_start_offset, log_end });
        }
        if offset >= upto.offset {
            return Ok(ReadSlice::empty());
        }
        let first = self.segments.partition_point(|s| s.base_offset <= offset).saturating_sub(1);
        for segment in &self.segments[first..] {
            if segment.base_offset > upto.segment_base {
                break;
            }
            let Some(position) = segment.position_of(offset)? else { continue };
            let limit = if segment.base_offset == upto.segment_base { upto.byte_pos } else { segment.size_bytes };
            if position >= limit {
                return Ok(ReadSlice::empty());
            }
            let mut prefix = [0u8; BATCH_LOG_OVERHEAD_BYTES];
            segment.file.read_exact_at(&mut prefix, position).map_err(LogError::io(&segment.path))?;
            let first_batch = BATCH_LOG_OVERHEAD_BYTES as u64
                + u64::from(u32::from_be_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]));
            let wanted = if whole_first_batch { max_bytes.max(first_batch) } else { max_bytes };
            if wanted == 0 {
                return Ok(ReadSlice::empty());
            }
            let len = wanted.min(limit - position);
            return Ok(ReadSlice { file: Some(Arc::clone(&segment.file)), path: segment.path.clone(), position, len });
        }
        Ok(ReadSlice::empty())
    }
}

impl PartitionLog {
    /// The first record at or after `timestamp_ms` below `upto`, as
    /// `(offset, record timestamp)` (ListOffsets by time). Segments whose max
    /// timestamp is earlier are skipped without reading them. Inside a
    /// compressed batch the batch's first offset and max timestamp stand in for
    /// the record (its records are not decompressed here).
    pub fn offset_for_timestamp(&self, timestamp_ms: i64, upto: LogPosition) -> Result<Option<(i64, i64)>, LogError> {
        for segment in &self.segments {
            if segment.base_offset > upto.segment_base || segment.max_timestamp_ms < timestamp_ms {
                continue;
            }
            let mut found = None;
            self.scan_batches(segment, upto, |header, bytes| {
                if header.max_timestamp < timestamp_ms {
                    return true;
                }
                found = Some(first_record_at_or_after(header, bytes, timestamp_ms));
                false
            })?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// The record with the largest timestamp below `upto` (ListOffsets -3,
    /// KIP-734), as `(offset, timestamp)`; the earliest such record on ties.
    pub fn offset_of_max_timestamp(&self, upto: LogPosition) -> Result<Option<(i64, i64)>, LogError> {
        let mut best: Option<(i64, i64)> = None;
        for segment in &self.segments {
            if segment.base_offset > upto.segment_base {
                break;
            }
            if best.is_some_and(|(_, ts)| segment.max_timestamp_ms <= ts) {
                continue;
            }
            self.scan_batches(segment, upto, |header, bytes| {
                if best.is_none_or(|(_, ts)| header.max_timestamp > ts) {
                    best = Some(first_record_at_or_after(header, bytes, header.max_timestamp));
                }
                true
            })?;
        }
        Ok(best)
    }

    /// Calls `visit(header, whole batch)` for each batch of `segment` below
    /// `upto` until it returns false.
    fn scan_batches(
        &self,
        segment: &Segment,
        upto: LogPosition,
        mut visit: impl FnMut(&BatchHeader, &[u8]) -> bool,
    ) -> Result<(), LogError> {
        let limit = if segment.base_offset == upto.segment_base { upto.byte_pos } else { segment.size_bytes };
        let mut position = 0u64;
        let mut buf = Vec::new();
        while position < limit {
            let mut head = [0u8; kafgres_wire::batch::BATCH_HEADER_BYTES];
            segment.file.read_exact_at(&mut head, position).map_err(LogError::io(&segment.path))?;
            let Ok(header) = BatchHeader::parse(&head) else { break };
            buf.resize(header.total_bytes(), 0);
            segment.file.read_exact_at(&mut buf, position).map_err(LogError::io(&segment.path))?;
            if !visit(&header, &buf) {
                break;
            }
            position += header.total_bytes() as u64;
        }
        Ok(())
    }
}

fn first_record_at_or_after(header: &BatchHeader, batch: &[u8], timestamp_ms: i64) -> (i64, i64) {
    kafgres_wire::batch::record_timestamps(batch)
        .and_then(|records| records.into_iter().find(|(_, ts)| *ts >= timestamp_ms))
        .map(|(delta, ts)| (header.base_offset + i64::from(delta), ts))
        .unwrap_or((header.base_offset, header.max_timestamp))
}

/// fdatasyncs a directory so that file creations and renames in it are durable.
pub fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(LogError::io(dir))
}

#[cfg(test)]
mod tests;
