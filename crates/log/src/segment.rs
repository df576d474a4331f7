//! One segment file: record batches back to back, starting at `base_offset`.
//!
//! The offset index is sparse and in memory: one entry (batch base offset, byte
//! position) every `index_interval_bytes`, rebuilt by [`crate::recovery`] when
//! the segment is opened. A lookup bisects the index, then reads batch headers
//! forward from the entry it found.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafgres_wire::batch::{BatchHeader, BATCH_HEADER_BYTES};

use crate::error::LogError;

/// An entry of the sparse offset index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub offset: i64,
    pub position: u64,
}

#[derive(Debug)]
pub struct Segment {
    pub(crate) base_offset: i64,
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<File>,
    /// Bytes of whole batches in the file.
    pub(crate) size_bytes: u64,
    /// The offset after the last batch in this segment.
    pub(crate) next_offset: i64,
    pub(crate) index: Vec<IndexEntry>,
    pub(crate) bytes_since_index_entry: u64,
    pub(crate) max_timestamp_ms: i64,
    pub(crate) created_ms: i64,
}

/// The file name of the segment starting at `base_offset`.
pub fn segment_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}.log")
}

impl Segment {
    pub(crate) fn create(dir: &Path, base_offset: i64, now_ms: i64) -> Result<Segment, LogError> {
        let path = dir.join(segment_file_name(base_offset));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(LogError::io(&path))?;
        Ok(Segment {
            base_offset,
            path,
            file: Arc::new(file),
            size_bytes: 0,
            next_offset: base_offset,
            index: Vec::new(),
            bytes_since_index_entry: 0,
            max_timestamp_ms: -1,
            created_ms: now_ms,
        })
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

    /// Records a batch written at `position` in the index if the interval has passed.
    pub(crate) fn note_batch(&mut self, header: &BatchHeader, position: u64, index_interval_bytes: u64) {
        let size = header.total_bytes() as u64;
        if self.index.is_empty() || self.bytes_since_index_entry >= index_interval_bytes {
            self.index.push(IndexEntry { offset: header.base_offset, position });
            self.bytes_since_index_entry = 0;
        }
        self.bytes_since_index_entry += size;
        self.size_bytes = position + size;
        self.next_offset = header.next_offset();
        self.max_timestamp_ms = self.max_timestamp_ms.max(header.max_timestamp);
    }

    /// Writes `bytes` at the end of the file (page cache only; see flushing).
    pub(crate) fn write_at_end(&self, bytes: &[u8]) -> Result<(), LogError> {
        self.file.write_all_at(bytes, self.size_bytes).map_err(LogError::io(&self.path))
    }

    /// The byte position of the batch containing `offset`, or `None` when the
    /// offset is at or past this segment's end.
    pub(crate) fn position_of(&self, offset: i64) -> Result<Option<u64>, LogError> {
        if offset >= self.next_offset {
            return Ok(None);
        }
        let start = match self.index.partition_point(|e| e.offset <= offset) {
            0 => 0,
            i => self.index[i - 1].position,
        };
        let mut position = start;
        let mut header = [0u8; BATCH_HEADER_BYTES];
        while position < self.size_bytes {
            self.file.read_exact_at(&mut header, position).map_err(LogError::io(&self.path))?;
            let h = match BatchHeader::parse(&header) {
                Ok(h) => h,
                Err(_) => break,
            };
            if h.last_offset() >= offset {
                return Ok(Some(position));
            }
            position += h.total_bytes() as u64;
        }
        Ok(None)
    }
}
