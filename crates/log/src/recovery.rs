//! Opening segments after a clean stop or a crash: what is trusted, what is
//! scanned, what is cut.
//!
//! The **recovery point** (`recovery-point-offset-checkpoint`, written by
//! [`crate::checkpoint`]'s atomic protocol) names a position `(offset R,
//! segment B, byte P)` such that, when it was written, segment B's `.log`
//! was fsynced up to P, its index files were fsynced with every entry below
//! P (and a final time entry), and every segment before B had been fsynced
//! with its indexes at its roll. It is written after each roll (P = 0), at
//! clean close and by [`crate::PartitionLog::checkpoint`] (P = end of the
//! active segment), and after a recovery.
//!
//! # Decision table: one row per segment (first matching row wins)
//!
//! | checkpoint / segment                                  | trusted                          | action                                                        |
//! |-------------------------------------------------------|----------------------------------|---------------------------------------------------------------|
//! | none, damaged, B not a segment, `.log` of B shorter than P, or R < B | nothing           | scan every segment from byte 0, checking CRCs; rebuild indexes |
//! | base < B                                              | `.log` and both index files      | load the indexes (no data read); if a file is invalid, rebuild it by scanning without CRC checks |
//! | base = B                                              | `.log` up to P, index entries below P/R | load the index prefix, then scan from P checking CRCs     |
//! | base > B                                              | nothing                          | scan from byte 0 checking CRCs; rebuild indexes               |
//!
//! An index file is invalid when it is missing, its size is not a whole
//! number of entries, an entry does not increase on the previous one, an
//! entry points past the segment (offset at or past the next segment's base,
//! position at or past the file's end), or the offset index of a non-empty
//! segment is empty.
//!
//! # Decision table: each batch met by a scan (first matching row wins)
//!
//! | what the scan finds                                   | action                          |
//! |-------------------------------------------------------|---------------------------------|
//! | end of file exactly at a batch boundary               | done, nothing cut               |
//! | fewer bytes left than a batch header or its length    | torn write: cut from here       |
//! | magic != 2, length < header size                      | garbage: cut from here          |
//! | base offset below the previous batch's next offset (a gap above it is kept: the cleaner leaves them, and a follower copies a compacted leader's) | garbage: cut from here |
//! | offsets or bytes do not fit the u32 relative offsets and positions of the indexes | garbage: cut from here |
//! | CRC-32C or record framing mismatch (CRC scans only)   | corrupt: cut from here          |
//! | otherwise                                             | keep, add to the indexes        |
//!
//! Whatever is cut is logged at WARNING with its byte range, and the file is
//! truncated and fdatasynced before the log accepts appends. When a scanned
//! segment that is not the last is cut (or does not end where the next one
//! begins), the segments after it cannot be trusted to follow on and are
//! deleted, as Kafka does (a segment that ends below the next one's base
//! without being cut is a compacted one and is kept). After any scan the partition writes a new
//! recovery point, so a second crash does not rescan the same bytes.
//!
//! Cost: opening a cleanly closed log reads the index files and the small
//! checkpoint files only; after a crash it also reads the bytes written
//! since the last recovery point (at most the active segment plus whatever
//! rolled after the last checkpoint write).

use std::path::Path;
use std::sync::Arc;

use kafgres_record::{validate_batches, BatchHeader, BATCH_HEADER_BYTES, BATCH_LOG_OVERHEAD_BYTES, MAGIC_V2};

use crate::checkpoint::{decode_offsets, encode_offsets, read_whole, write_atomically, RECOVERY_POINT_FILE};
use crate::error::LogError;
use crate::partition::LogPosition;
use crate::segment::{Segment, SEGMENT_POSITION_LIMIT};
use crate::storage::{Storage, StorageFile};

/// How one segment is opened (a row of the first table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentPlan {
    /// Below the recovery point: load the index files, read no data.
    LoadIndexes,
    /// The recovery point's segment: trust `bytes` bytes ending at
    /// `next_offset`, scan (with CRCs) after them.
    TrustPrefix { bytes: u64, next_offset: i64 },
    /// Past the recovery point: scan everything with CRCs.
    ScanAll,
}

/// What opening one segment did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentOpen {
    Trusted,
    IndexRebuilt { reason: String },
    Scanned { from_byte: u64 },
}

/// What opening a segment found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanReport {
    pub base_offset: i64,
    pub how: SegmentOpen,
    /// Batches walked by a scan (0 when only indexes were loaded).
    pub batches: u64,
    /// Segment bytes read by a scan.
    pub scanned_bytes: u64,
    pub valid_bytes: u64,
    /// Bytes cut from the tail, and why.
    pub truncated_bytes: u64,
    pub truncation_reason: Option<String>,
}

/// Plans the opening of segments `(base offset, .log length)`, sorted by
/// base. Returns one plan per segment and, when a checkpoint was found but
/// cannot be used, why.
pub fn plan(segments: &[(i64, u64)], checkpoint: Option<LogPosition>) -> (Vec<SegmentPlan>, Option<String>) {
    let all_scan = || vec![SegmentPlan::ScanAll; segments.len()];
    let Some(cp) = checkpoint else { return (all_scan(), None) };
    let Some(&(_, len)) = segments.iter().find(|(base, _)| *base == cp.segment_base) else {
        return (all_scan(), Some(format!("recovery point names segment {} which does not exist", cp.segment_base)));
    };
    if len < cp.byte_pos {
        return (
            all_scan(),
            Some(format!(
                "recovery point is at byte {} of segment {} which has {len} bytes",
                cp.byte_pos, cp.segment_base
            )),
        );
    }
    if cp.offset < cp.segment_base {
        return (
            all_scan(),
            Some(format!("recovery point offset {} is below its segment {}", cp.offset, cp.segment_base)),
        );
    }
    let plans = segments
        .iter()
        .map(|&(base, _)| match base.cmp(&cp.segment_base) {
            std::cmp::Ordering::Less => SegmentPlan::LoadIndexes,
            std::cmp::Ordering::Equal if cp.byte_pos > 0 => {
                SegmentPlan::TrustPrefix { bytes: cp.byte_pos, next_offset: cp.offset }
            }
            _ => SegmentPlan::ScanAll,
        })
        .collect();
    (plans, None)
}

/// Opens `segment` by `plan`. `next_base` is the following segment's base
/// offset (required by [`SegmentPlan::LoadIndexes`]); `indexes_present`
/// says whether both index files existed before the segment was opened.
pub(crate) fn open_segment(
    segment: &mut Segment,
    plan: SegmentPlan,
    next_base: Option<i64>,
    indexes_present: bool,
    index_interval_bytes: u64,
) -> Result<ScanReport, LogError> {
    let file_len = segment.file.len().map_err(LogError::io(&segment.path))?;
    let base = segment.base_offset;
    match (plan, next_base) {
        (SegmentPlan::LoadIndexes, Some(next_base)) => {
            let range = next_base - base;
            let loaded = if indexes_present {
                let offsets = segment
                    .offset_index
                    .load(|e| i64::from(e.relative_offset) < range && u64::from(e.position) < file_len)?;
                let times = segment.time_index.load(|e| i64::from(e.relative_offset) < range)?;
                offsets.and(times).and_then(|()| match segment.offset_index.entries().is_empty() && file_len > 0 {
                    true => Err("the offset index is empty".to_string()),
                    false => Ok(()),
                })
            } else {
                Err("an index file is missing".to_string())
            };
            match loaded {
                Ok(()) => {
                    adopt_loaded(segment, file_len, next_base);
                    Ok(ScanReport { how: SegmentOpen::Trusted, valid_bytes: file_len, ..ScanReport::new(base) })
                }
                Err(reason) => {
                    log::warn!("{}: index files are invalid ({reason}); rebuilding them", segment.path.display());
                    segment.reset()?;
                    let mut report = scan(segment, file_len, false, index_interval_bytes)?;
                    segment.flush_all()?;
                    report.how = SegmentOpen::IndexRebuilt { reason };
                    Ok(report)
                }
            }
        }
        (SegmentPlan::TrustPrefix { bytes, next_offset }, _) => {
            let range = next_offset - base;
            segment
                .offset_index
                .load_prefix(|e| i64::from(e.relative_offset) < range && u64::from(e.position) < bytes)?;
            segment.time_index.load_prefix(|e| i64::from(e.relative_offset) < range)?;
            adopt_loaded(segment, bytes, next_offset);
            let mut report = scan(segment, file_len, true, index_interval_bytes)?;
            if report.scanned_bytes == 0 {
                report.how = SegmentOpen::Trusted;
            }
            Ok(report)
        }
        _ => {
            segment.reset()?;
            scan(segment, file_len, true, index_interval_bytes)
        }
    }
}

/// Takes the segment's extent from trusted numbers and its largest
/// timestamp from the loaded time index.
fn adopt_loaded(segment: &mut Segment, size_bytes: u64, next_offset: i64) {
    segment.size_bytes = size_bytes;
    segment.next_offset = next_offset;
    segment.bytes_since_index_entry =
        segment.offset_index.last().map_or(size_bytes, |e| size_bytes - u64::from(e.position));
    match segment.time_index.last() {
        Some(e) => {
            segment.max_timestamp_ms = e.timestamp_ms;
            segment.offset_of_max_timestamp = segment.base_offset + i64::from(e.relative_offset);
        }
        None => {
            segment.max_timestamp_ms = -1;
            segment.offset_of_max_timestamp = segment.base_offset;
        }
    }
}

impl ScanReport {
    fn new(base_offset: i64) -> ScanReport {
        ScanReport {
            base_offset,
            how: SegmentOpen::Scanned { from_byte: 0 },
            batches: 0,
            scanned_bytes: 0,
            valid_bytes: 0,
            truncated_bytes: 0,
            truncation_reason: None,
        }
    }
}

const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// Reads a file forward in large chunks, so a scan of small batches costs a
/// few big reads rather than two reads per batch.
struct ChunkReader<'a> {
    file: &'a dyn StorageFile,
    path: &'a Path,
    buf: Vec<u8>,
    start: u64,
    file_len: u64,
}

impl ChunkReader<'_> {
    /// `len` bytes at `position`; the caller has checked they are in the file.
    fn get(&mut self, position: u64, len: usize) -> Result<&[u8], LogError> {
        let end = position + len as u64;
        if position < self.start || end > self.start + self.buf.len() as u64 {
            let n = (len.max(SCAN_CHUNK_BYTES) as u64).min(self.file_len - position) as usize;
            self.buf.resize(n, 0);
            self.file.read_exact_at(&mut self.buf, position).map_err(LogError::io(self.path))?;
            self.start = position;
        }
        let from = (position - self.start) as usize;
        Ok(&self.buf[from..from + len])
    }
}

/// Scans `segment` from its current end (`size_bytes`, `next_offset`) to
/// `file_len`, adding each good batch to the indexes and cutting the file at
/// the first bad one (second table above). `verify` checks CRCs and record
/// framing.
fn scan(segment: &mut Segment, file_len: u64, verify: bool, index_interval_bytes: u64) -> Result<ScanReport, LogError> {
    let from = segment.size_bytes;
    let mut report =
        ScanReport { how: SegmentOpen::Scanned { from_byte: from }, ..ScanReport::new(segment.base_offset) };
    let file = Arc::clone(&segment.file);
    let path = segment.path.clone();
    let mut reader = ChunkReader { file: file.as_ref(), path: &path, buf: Vec::new(), start: 0, file_len };
    let mut position = from;
    let mut reason: Option<String> = None;
    while position < file_len {
        let left = file_len - position;
        if left < BATCH_HEADER_BYTES as u64 {
            reason = Some(format!("{left} trailing bytes, shorter than a batch header"));
            break;
        }
        let header = match BatchHeader::parse(reader.get(position, BATCH_HEADER_BYTES)?) {
            Ok(h) => h,
            Err(e) => {
                reason = Some(e.to_string());
                break;
            }
        };
        if header.magic != MAGIC_V2 || (header.batch_length as usize) < BATCH_HEADER_BYTES - BATCH_LOG_OVERHEAD_BYTES {
            reason = Some(format!(
                "no batch header at byte {position} (magic {}, length {})",
                header.magic, header.batch_length
            ));
            break;
        }
        let total = header.total_bytes() as u64;
        if total > left {
            reason = Some(format!("batch at byte {position} needs {total} bytes, only {left} written"));
            break;
        }
        if header.base_offset < segment.next_offset {
            reason = Some(format!(
                "batch at byte {position} has base offset {}, expected {}",
                header.base_offset, segment.next_offset
            ));
            break;
        }
        let last_offset = header.base_offset.checked_add(i64::from(header.last_offset_delta));
        if header.last_offset_delta < 0 || !last_offset.is_some_and(|last| segment.fits_relative(last)) {
            reason = Some(format!("batch at byte {position} has last offset delta {}", header.last_offset_delta));
            break;
        }
        if position + total > SEGMENT_POSITION_LIMIT {
            reason = Some(format!(
                "batch at byte {position} ends past byte {SEGMENT_POSITION_LIMIT}, which no index position reaches"
            ));
            break;
        }
        if verify {
            if let Err(e) = validate_batches(reader.get(position, total as usize)?) {
                reason = Some(format!("batch at byte {position} (offset {}): {e}", header.base_offset));
                break;
            }
        }
        segment.note_batch(&header, position, index_interval_bytes);
        report.batches += 1;
        position += total;
    }
    report.valid_bytes = position;
    report.scanned_bytes = file_len - from;
    if position < file_len {
        report.truncated_bytes = file_len - position;
        report.truncation_reason = reason;
        log::warn!(
            "truncating {} at byte {position}: cutting {} bytes ({})",
            segment.path.display(),
            report.truncated_bytes,
            report.truncation_reason.as_deref().unwrap_or("unknown")
        );
        segment.file.set_len(position).map_err(LogError::io(&segment.path))?;
        segment.file.sync_data().map_err(LogError::io(&segment.path))?;
    }
    Ok(report)
}

const RECOVERY_KEYS: [&str; 3] = ["offset", "segment_base", "position"];

/// The recovery point, or `None` if there is none or it is damaged (which
/// costs a full scan, never wrong data).
pub(crate) fn read_recovery_point(storage: &Arc<dyn Storage>, dir: &Path) -> Result<Option<LogPosition>, LogError> {
    let path = dir.join(RECOVERY_POINT_FILE);
    let Some(bytes) = read_whole(storage, &path, 4096)? else { return Ok(None) };
    Ok(decode_offsets(&path, &bytes, &RECOVERY_KEYS).and_then(|v| {
        let byte_pos = u64::try_from(v[2]).ok()?;
        Some(LogPosition { offset: v[0], segment_base: v[1], byte_pos })
    }))
}

pub(crate) fn write_recovery_point(storage: &Arc<dyn Storage>, dir: &Path, at: LogPosition) -> Result<(), LogError> {
    let bytes = encode_offsets(&[
        (RECOVERY_KEYS[0], at.offset),
        (RECOVERY_KEYS[1], at.segment_base),
        (RECOVERY_KEYS[2], at.byte_pos as i64),
    ]);
    write_atomically(storage, dir, RECOVERY_POINT_FILE, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset: i64, segment_base: i64, byte_pos: u64) -> Option<LogPosition> {
        Some(LogPosition { offset, segment_base, byte_pos })
    }

    #[test]
    fn the_plan_follows_the_decision_table() {
        use SegmentPlan::*;
        let segs = [(0, 1000), (10, 1000), (20, 500)];
        assert_eq!(plan(&segs, None), (vec![ScanAll; 3], None));
        assert_eq!(plan(&segs, at(20, 20, 0)).0, vec![LoadIndexes, LoadIndexes, ScanAll]);
        assert_eq!(
            plan(&segs, at(25, 20, 300)).0,
            vec![LoadIndexes, LoadIndexes, TrustPrefix { bytes: 300, next_offset: 25 }]
        );
        assert_eq!(
            plan(&segs, at(15, 10, 700)).0,
            vec![LoadIndexes, TrustPrefix { bytes: 700, next_offset: 15 }, ScanAll]
        );
        for unusable in [at(40, 30, 0), at(25, 20, 501), at(5, 10, 10)] {
            let (plans, why) = plan(&segs, unusable);
            assert_eq!(plans, vec![ScanAll; 3]);
            assert!(why.is_some());
        }
    }
}
