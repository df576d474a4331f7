//! Reads: by offset as a file range (sendfile-ready), by timestamp through
//! the time index, and the record with the largest timestamp. Nothing below
//! the log start offset is ever returned as a result (a range may still
//! begin inside a batch that straddles it, as in Kafka).

use std::sync::Arc;

use kafgres_record::{BatchHeader, DecompressLimit, BATCH_HEADER_BYTES, BATCH_LOG_OVERHEAD_BYTES};

use super::{LogPosition, PartitionLog, ReadSlice, STORED_BATCH_DECOMPRESSED_BYTES_MAX};
use crate::error::LogError;
use crate::segment::Segment;

impl PartitionLog {
    /// Plans a read of up to `max_bytes` starting at the batch that holds
    /// `offset`, never past `upto` (the high watermark). With
    /// `whole_first_batch` the first batch is returned whole even if it is
    /// larger than `max_bytes` (KIP-74: the first partition of a fetch
    /// response always makes progress); without it, as in Kafka, the range is
    /// simply cut at `max_bytes`. Offsets below the log start or past the log
    /// end are `OffsetOutOfRange`.
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
            let available = limit - position;
            // The first batch's size matters only when the budget would cut
            // it; a consumer that keeps up reads everything there is, and
            // skips this read.
            let wanted = if whole_first_batch && max_bytes < available {
                let mut prefix = [0u8; BATCH_LOG_OVERHEAD_BYTES];
                segment.file().read_exact_at(&mut prefix, position).map_err(LogError::io(&segment.path))?;
                let first_batch = BATCH_LOG_OVERHEAD_BYTES as u64
                    + u64::from(u32::from_be_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]));
                max_bytes.max(first_batch)
            } else {
                max_bytes
            };
            if wanted == 0 {
                return Ok(ReadSlice::empty());
            }
            let len = wanted.min(available);
            return Ok(ReadSlice { file: Some(Arc::clone(segment.file())), path: segment.path.clone(), position, len });
        }
        Ok(ReadSlice::empty())
    }

    /// The position of the batch starting at or holding `offset`, if it is
    /// in the log (the last stable offset is always a batch's first offset).
    pub fn position_at(&self, offset: i64) -> Result<Option<LogPosition>, LogError> {
        if offset < self.log_start_offset || offset >= self.next_offset() {
            return Ok(None);
        }
        let index = self.segments.partition_point(|s| s.base_offset <= offset).saturating_sub(1);
        let Some(segment) = self.segments.get(index) else { return Ok(None) };
        Ok(segment.position_of(offset)?.map(|byte_pos| LogPosition {
            offset,
            segment_base: segment.base_offset,
            byte_pos,
        }))
    }

    /// The first record at or after `timestamp_ms` below `upto`, as
    /// `(offset, record timestamp)` (ListOffsets by time). Segments whose max
    /// timestamp is earlier are skipped without reading them; inside a
    /// segment the time index says where to start. Inside a compressed batch
    /// the batch's first offset and max timestamp stand in for the record
    /// (its records are not decompressed here).
    pub fn offset_for_timestamp(&self, timestamp_ms: i64, upto: LogPosition) -> Result<Option<(i64, i64)>, LogError> {
        for segment in &self.segments {
            if segment.base_offset > upto.segment_base {
                break;
            }
            if segment.max_timestamp_ms < timestamp_ms || segment.next_offset <= self.log_start_offset {
                continue;
            }
            // The last entry with a smaller timestamp: nothing before the
            // batch it names reaches `timestamp_ms`.
            let entries = segment.time_index();
            let from_offset = match entries.partition_point(|e| e.timestamp_ms < timestamp_ms) {
                0 => segment.base_offset,
                i => segment.base_offset + i64::from(entries[i - 1].relative_offset),
            }
            .max(self.log_start_offset);
            let start = segment.position_of(from_offset)?.unwrap_or(0);
            let mut found = None;
            self.scan_batches(segment, start, upto, |header, bytes| {
                if header.max_timestamp < timestamp_ms || header.last_offset() < self.log_start_offset {
                    return true;
                }
                found = first_record_at_or_after(header, bytes, timestamp_ms, self.log_start_offset);
                found.is_none()
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
            if best.is_some_and(|(_, ts)| segment.max_timestamp_ms <= ts)
                || segment.next_offset <= self.log_start_offset
            {
                continue;
            }
            self.scan_batches(segment, 0, upto, |header, bytes| {
                if header.last_offset() < self.log_start_offset
                    || best.is_some_and(|(_, ts)| header.max_timestamp <= ts)
                {
                    return true;
                }
                // Only records at or after the log start count (a batch may
                // straddle it).
                let candidate = max_record_from(header, bytes, self.log_start_offset);
                if let Some(c) = candidate.filter(|c| best.is_none_or(|(_, ts)| c.1 > ts)) {
                    best = Some(c);
                }
                true
            })?;
        }
        Ok(best)
    }

    /// Calls `visit(header, whole batch)` for each batch of `segment` from
    /// byte `position`, below `upto`, until it returns false.
    fn scan_batches(
        &self,
        segment: &Segment,
        mut position: u64,
        upto: LogPosition,
        mut visit: impl FnMut(&BatchHeader, &[u8]) -> bool,
    ) -> Result<(), LogError> {
        let limit = if segment.base_offset == upto.segment_base { upto.byte_pos } else { segment.size_bytes };
        let mut buf = Vec::new();
        while position + BATCH_HEADER_BYTES as u64 <= limit {
            let mut head = [0u8; BATCH_HEADER_BYTES];
            segment.file().read_exact_at(&mut head, position).map_err(LogError::io(&segment.path))?;
            let Ok(header) = BatchHeader::parse(&head) else { break };
            if header.batch_length <= 0 {
                break;
            }
            buf.resize(header.total_bytes(), 0);
            segment.file().read_exact_at(&mut buf, position).map_err(LogError::io(&segment.path))?;
            if !visit(&header, &buf) {
                break;
            }
            position += header.total_bytes() as u64;
        }
        Ok(())
    }
}

const TIMESTAMP_LOOKUP_DECOMPRESS_LIMIT: DecompressLimit =
    DecompressLimit { bytes_max: STORED_BATCH_DECOMPRESSED_BYTES_MAX };

/// (offset, timestamp) of each record of `batch`, decompressing it if needed.
fn records_of(header: &BatchHeader, batch: &[u8]) -> Option<Vec<(i64, i64)>> {
    let records = kafgres_record::record_timestamps_decompressing(batch, TIMESTAMP_LOOKUP_DECOMPRESS_LIMIT)?;
    Some(records.into_iter().map(|(delta, ts)| (header.base_offset + i64::from(delta), ts)).collect())
}

/// The first record of `batch` at or after `timestamp_ms` with an offset at
/// or after `min_offset` (a compressed batch is decompressed to find it, as
/// Kafka does). A batch whose records cannot be read stands for itself: its
/// first offset at or after `min_offset` and its max timestamp.
fn first_record_at_or_after(
    header: &BatchHeader,
    batch: &[u8],
    timestamp_ms: i64,
    min_offset: i64,
) -> Option<(i64, i64)> {
    match records_of(header, batch) {
        Some(records) => records.into_iter().find(|&(offset, ts)| ts >= timestamp_ms && offset >= min_offset),
        None => Some((header.base_offset.max(min_offset), header.max_timestamp)),
    }
}

/// The earliest record with the largest timestamp among those of `batch` at
/// or after `min_offset` (a batch whose records cannot be read stands for
/// itself).
fn max_record_from(header: &BatchHeader, batch: &[u8], min_offset: i64) -> Option<(i64, i64)> {
    match records_of(header, batch) {
        Some(records) => records
            .into_iter()
            .filter(|&(offset, _)| offset >= min_offset)
            .fold(None, |best: Option<(i64, i64)>, r| if best.is_none_or(|b| r.1 > b.1) { Some(r) } else { best }),
        None => Some((header.base_offset.max(min_offset), header.max_timestamp)),
    }
}
