//! Opening a segment after a clean stop or a crash.
//!
//! Decision table for each batch found while scanning from the start of a
//! segment (the first row that applies wins):
//!
//! | what the scan finds                                   | action                          |
//! |-------------------------------------------------------|---------------------------------|
//! | end of file exactly at a batch boundary               | done, nothing cut               |
//! | fewer bytes left than a batch header or its length    | torn write: cut from here       |
//! | magic != 2, length < header size                      | garbage: cut from here          |
//! | base offset != the previous batch's next offset       | garbage: cut from here          |
//! | CRC-32C or record framing mismatch (`verify` only)    | corrupt: cut from here          |
//! | otherwise                                             | keep, add to the offset index   |
//!
//! Whatever is cut is logged at WARNING with its byte range, and the file is
//! truncated and fdatasynced before the log accepts appends. Only the newest
//! segment is verified by CRC: older ones were fsynced before the roll that
//! made them old, so they are only walked to rebuild their index.

use std::os::unix::fs::FileExt;

use kafgres_wire::batch::{validate_batches, BatchHeader, BATCH_HEADER_BYTES};

use crate::error::LogError;
use crate::segment::Segment;

/// What opening a segment found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanReport {
    pub batches: u64,
    pub valid_bytes: u64,
    /// Bytes cut from the tail, and why.
    pub truncated_bytes: u64,
    pub truncation_reason: Option<String>,
}

const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// Scans `segment` from its start, rebuilding its index and cutting any invalid
/// tail. `verify` checks each batch's CRC and record framing.
pub fn scan_segment(segment: &mut Segment, verify: bool, index_interval_bytes: u64) -> Result<ScanReport, LogError> {
    let file_len = segment.file.metadata().map_err(LogError::io(&segment.path))?.len();
    segment.index.clear();
    segment.size_bytes = 0;
    segment.next_offset = segment.base_offset;
    segment.bytes_since_index_entry = 0;
    let mut report = ScanReport::default();
    let mut position = 0u64;
    let mut buf = Vec::with_capacity(SCAN_CHUNK_BYTES);
    let mut reason: Option<String> = None;
    while position < file_len {
        let left = file_len - position;
        if left < BATCH_HEADER_BYTES as u64 {
            reason = Some(format!("{left} trailing bytes, shorter than a batch header"));
            break;
        }
        let mut head = [0u8; BATCH_HEADER_BYTES];
        segment.file.read_exact_at(&mut head, position).map_err(LogError::io(&segment.path))?;
        let header = match BatchHeader::parse(&head) {
            Ok(h) => h,
            Err(e) => {
                reason = Some(e.to_string());
                break;
            }
        };
        if header.magic != kafgres_wire::batch::MAGIC_V2 || (header.batch_length as usize) < BATCH_HEADER_BYTES - 12 {
            reason = Some(format!("no batch header at byte {position} (magic {}, length {})", header.magic, header.batch_length));
            break;
        }
        let total = header.total_bytes() as u64;
        if total > left {
            reason = Some(format!("batch at byte {position} needs {total} bytes, only {left} written"));
            break;
        }
        if header.base_offset != segment.next_offset {
            reason = Some(format!(
                "batch at byte {position} has base offset {}, expected {}",
                header.base_offset, segment.next_offset
            ));
            break;
        }
        if verify {
            buf.resize(total as usize, 0);
            segment.file.read_exact_at(&mut buf, position).map_err(LogError::io(&segment.path))?;
            if let Err(e) = validate_batches(&buf) {
                reason = Some(format!("batch at byte {position} (offset {}): {e}", header.base_offset));
                break;
            }
        }
        segment.note_batch(&header, position, index_interval_bytes);
        report.batches += 1;
        position += total;
    }
    report.valid_bytes = position;
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
