//! Record batches (magic v2), the unit Kafgres stores and serves.
//!
//! Layout of the 61-byte header (big-endian), as in Kafka's `DefaultRecordBatch`:
//!
//! ```text
//!  0 baseOffset i64          | 12 partitionLeaderEpoch i32 | 16 magic i8 (= 2)
//!  8 batchLength i32         | 17 crc u32 (CRC-32C of bytes 21..end)
//! 21 attributes i16          | 23 lastOffsetDelta i32      | 27 baseTimestamp i64
//! 35 maxTimestamp i64        | 43 producerId i64           | 51 producerEpoch i16
//! 53 baseSequence i32        | 57 recordsCount i32         | 61 records...
//! ```
//!
//! The CRC does not cover the base offset or the leader epoch, so the broker
//! assigns offsets and stamps its epoch by patching those fields in place
//! without recomputing it.
//!
//! Two entry points: [`validate_produced_batches`] (the produce path) walks
//! every batch record by record, decompressing compressed ones into a buffer
//! bounded by a [`DecompressLimit`]; [`validate_batches`] (recovery, tests)
//! walks uncompressed batches and checks compressed ones at the header level
//! only, since their payload is covered by the CRC and was walked when it was
//! produced. Uncompressed batches are never copied.
//!
//! Stored batches may have been rewritten by log compaction, exactly as
//! Kafka's cleaner rewrites them: a batch keeps its base offset and its
//! lastOffsetDelta (so the producer's last sequence survives) while records
//! are removed, so its offset deltas may have gaps and it may even hold no
//! record at all (the header of an idempotent producer's last batch).
//! [`validate_batches`] accepts that shape; [`validate_produced_batches`]
//! does not (a producer's batch has consecutive deltas from 0).
//! [`crate::records`] reads and writes single records for the cleaner.

use bytes::Buf;

use crate::compression::{self, DecompressLimit};
use crate::varint::{read_bytes, read_varint, read_varlong};

pub const BATCH_HEADER_BYTES: usize = 61;
/// baseOffset + batchLength: the bytes not counted in batchLength.
pub const BATCH_LOG_OVERHEAD_BYTES: usize = 12;
pub const MAGIC_V2: i8 = 2;
/// The head a log append rewrites: baseOffset, batchLength (kept as it is)
/// and partitionLeaderEpoch, all before the magic byte and outside the CRC.
pub const BATCH_STAMPED_HEAD_BYTES: usize = OFFSET_MAGIC;
/// Room a size check keeps for a batch's own bytes around records it
/// estimates one by one (the SQL send path, against `max.message.bytes`): the
/// 61-byte header, and slack for what the per-record estimates round off.
pub const BATCH_OVERHEAD_BYTES_MAX: usize = 128;
const _: () = assert!(BATCH_OVERHEAD_BYTES_MAX >= BATCH_HEADER_BYTES);

const OFFSET_BASE: usize = 0;
const OFFSET_LENGTH: usize = 8;
const OFFSET_LEADER_EPOCH: usize = 12;
const OFFSET_MAGIC: usize = 16;
const OFFSET_CRC: usize = 17;
const OFFSET_ATTRIBUTES: usize = 21;
const OFFSET_BASE_TIMESTAMP: usize = 27;
const OFFSET_MAX_TIMESTAMP: usize = 35;

pub(crate) const ATTR_COMPRESSION_MASK: i16 = 0x07;
const ATTR_TIMESTAMP_TYPE_LOG_APPEND: i16 = 0x08;
pub(crate) const ATTR_TRANSACTIONAL: i16 = 0x10;
pub(crate) const ATTR_CONTROL: i16 = 0x20;
/// KIP-534: the base timestamp holds the batch's delete horizon (set by the
/// log cleaner on a batch that keeps tombstones).
pub(crate) const ATTR_DELETE_HORIZON: i16 = 0x40;

/// The decoded fixed header of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Decodes the header fields without any validation beyond the length.
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < BATCH_HEADER_BYTES {
            return Err(BatchError::Truncated { needed: BATCH_HEADER_BYTES, available: buf.len() });
        }
        let mut b = &buf[..BATCH_HEADER_BYTES];
        Ok(BatchHeader {
            base_offset: b.get_i64(),
            batch_length: b.get_i32(),
            partition_leader_epoch: b.get_i32(),
            magic: b.get_i8(),
            crc: b.get_u32(),
            attributes: b.get_i16(),
            last_offset_delta: b.get_i32(),
            base_timestamp: b.get_i64(),
            max_timestamp: b.get_i64(),
            producer_id: b.get_i64(),
            producer_epoch: b.get_i16(),
            base_sequence: b.get_i32(),
            records_count: b.get_i32(),
        })
    }

    /// Bytes the whole batch occupies in a log (header overhead included).
    pub fn total_bytes(&self) -> usize {
        BATCH_LOG_OVERHEAD_BYTES + self.batch_length.max(0) as usize
    }

    /// The offset after this batch's last record.
    pub fn next_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta) + 1
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Compression codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
    pub fn compression(&self) -> u8 {
        (self.attributes & ATTR_COMPRESSION_MASK) as u8
    }

    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_TIMESTAMP_TYPE_LOG_APPEND != 0
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// KIP-534's delete horizon: when the log cleaner may drop this batch's
    /// tombstones (`None`: the batch was never cleaned with tombstones in it).
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & ATTR_DELETE_HORIZON != 0).then_some(self.base_timestamp)
    }
}

/// Why a batch was refused. Maps to CORRUPT_MESSAGE (framing, CRC) or
/// INVALID_RECORD (record-level content) in produce responses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    #[error("batch truncated: needs {needed} bytes, {available} available")]
    Truncated { needed: usize, available: usize },
    #[error("batch length {0} is smaller than a batch header")]
    LengthTooSmall(i32),
    #[error("unsupported record batch magic {0} (only v2 is accepted)")]
    UnsupportedMagic(i8),
    #[error("CRC mismatch: batch says {stored:#010x}, content gives {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("records count {0} is negative")]
    NegativeRecordCount(i32),
    #[error("lastOffsetDelta {last_offset_delta} does not match {records_count} records")]
    OffsetDeltaMismatch { last_offset_delta: i32, records_count: i32 },
    #[error("unknown compression codec {0}")]
    UnknownCompression(u8),
    #[error("invalid record {index}: {reason}")]
    InvalidRecord { index: i32, reason: &'static str },
    #[error("empty records field")]
    Empty,
    #[error("{codec} payload cannot be decompressed: {reason}")]
    Decompression { codec: &'static str, reason: String },
    #[error("{codec} payload decompresses to more than {bytes_max} bytes")]
    DecompressedTooLarge { codec: &'static str, bytes_max: usize },
}

impl BatchError {
    /// Whether this is a record-content problem (INVALID_RECORD) rather than
    /// corruption of the batch framing (CORRUPT_MESSAGE).
    pub fn is_invalid_record(&self) -> bool {
        matches!(self, BatchError::InvalidRecord { .. } | BatchError::OffsetDeltaMismatch { .. })
    }
}

/// What validation learnt about the batches of one produce request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedBatches {
    pub headers: Vec<BatchHeader>,
    /// Per batch, the smallest and largest record timestamp (base timestamp
    /// plus each record's delta), leaving out records without one (-1, as
    /// Kafka's timestamp checks do); `None` where no record has one or the
    /// records were not walked (a compressed batch under [`validate_batches`]).
    pub timestamp_bounds: Vec<Option<(i64, i64)>>,
    /// Total records across the batches.
    pub records: i64,
}

/// Validates batches already known to have been walked once (stored ones):
/// lengths, magic, CRC-32C, record count against lastOffsetDelta and, for
/// uncompressed batches, each record's framing and offset deltas. Nothing is
/// decompressed.
pub fn validate_batches(buf: &[u8]) -> Result<ValidatedBatches, BatchError> {
    validate_all(buf, None)
}

/// Validates the batches of a produce request's records field: everything
/// [`validate_batches`] checks, plus the records inside compressed batches,
/// decompressed one batch at a time into at most `limit` bytes.
pub fn validate_produced_batches(buf: &[u8], limit: DecompressLimit) -> Result<ValidatedBatches, BatchError> {
    validate_all(buf, Some(limit))
}

fn validate_all(buf: &[u8], limit: Option<DecompressLimit>) -> Result<ValidatedBatches, BatchError> {
    if buf.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut headers = Vec::new();
    let mut timestamp_bounds = Vec::new();
    let mut records = 0i64;
    let mut pos = 0;
    while pos < buf.len() {
        let (header, bounds) = validate_one(&buf[pos..], limit)?;
        pos += header.total_bytes();
        records += i64::from(header.records_count);
        timestamp_bounds.push(bounds);
        headers.push(header);
    }
    Ok(ValidatedBatches { headers, timestamp_bounds, records })
}

/// Validates one batch; returns its header and, when its records were
/// walked, the range of their timestamps.
fn validate_one(buf: &[u8], limit: Option<DecompressLimit>) -> Result<(BatchHeader, Option<(i64, i64)>), BatchError> {
    let header = BatchHeader::parse(buf)?;
    if header.magic != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic(header.magic));
    }
    if (header.batch_length as i64) < (BATCH_HEADER_BYTES - BATCH_LOG_OVERHEAD_BYTES) as i64 {
        return Err(BatchError::LengthTooSmall(header.batch_length));
    }
    let total = header.total_bytes();
    if total > buf.len() {
        return Err(BatchError::Truncated { needed: total, available: buf.len() });
    }
    let computed = batch_crc(&buf[OFFSET_ATTRIBUTES..total]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch { stored: header.crc, computed });
    }
    if header.records_count < 0 {
        return Err(BatchError::NegativeRecordCount(header.records_count));
    }
    // A produced batch numbers its records 0..count; a stored one may have
    // lost records to compaction (fewer records than its offset range, with
    // gaps between their deltas, possibly none at all).
    let produced = limit.is_some();
    let count_ok = if produced {
        header.records_count > 0 && header.last_offset_delta == header.records_count - 1
    } else {
        header.last_offset_delta >= 0 && i64::from(header.records_count) <= i64::from(header.last_offset_delta) + 1
    };
    if !count_ok {
        return Err(BatchError::OffsetDeltaMismatch {
            last_offset_delta: header.last_offset_delta,
            records_count: header.records_count,
        });
    }
    let base = header.base_timestamp;
    let bounds = match header.compression() {
        0 if produced => walk_records::<true>(&buf[BATCH_HEADER_BYTES..total], header.records_count, base, 0)?,
        0 => walk_records::<false>(
            &buf[BATCH_HEADER_BYTES..total],
            header.records_count,
            base,
            header.last_offset_delta,
        )?,
        codec @ 1..=4 => match limit {
            Some(limit) => {
                let records = compression::decompress(codec, &buf[BATCH_HEADER_BYTES..total], limit)?;
                walk_records::<true>(&records, header.records_count, base, 0)?
            }
            None => None,
        },
        other => return Err(BatchError::UnknownCompression(other)),
    };
    Ok((header, bounds))
}

/// Checks each record's length prefix, field framing and offset delta, and
/// returns the smallest and largest record timestamp other than -1. Offset
/// deltas must be 0, 1, 2… in a `PRODUCED` batch; in a stored one (maybe
/// compacted) they must increase and stay at or below `deltas_max`, which a
/// produced batch ignores.
fn walk_records<const PRODUCED: bool>(
    mut buf: &[u8],
    records_count: i32,
    base_timestamp: i64,
    deltas_max: i32,
) -> Result<Option<(i64, i64)>, BatchError> {
    // The timestamps' bounds, empty while lowest > highest (no record, or
    // every timestamp -1).
    let (mut lowest, mut highest) = (i64::MAX, i64::MIN);
    let mut previous_delta = -1i32;
    for index in 0..records_count {
        let bad = |reason| BatchError::InvalidRecord { index, reason };
        let len = read_varint(&mut buf).ok_or(bad("bad record length"))?;
        if len < 0 || len as usize > buf.len() {
            return Err(bad("record length runs past the batch"));
        }
        let (mut rec, rest) = buf.split_at(len as usize);
        buf = rest;
        if rec.is_empty() {
            return Err(bad("empty record"));
        }
        rec = &rec[1..]; // attributes
        let delta = read_varlong(&mut rec).ok_or(bad("bad timestamp delta"))?;
        let timestamp = base_timestamp.wrapping_add(delta);
        if timestamp != -1 {
            lowest = lowest.min(timestamp);
            highest = highest.max(timestamp);
        }
        let offset_delta = read_varint(&mut rec).ok_or(bad("bad offset delta"))?;
        if PRODUCED {
            if offset_delta != index {
                return Err(bad("offset deltas are not consecutive from 0"));
            }
        } else if offset_delta <= previous_delta || offset_delta > deltas_max {
            return Err(bad("offset deltas do not increase within the batch's offsets"));
        }
        previous_delta = offset_delta;
        read_bytes(&mut rec).ok_or(bad("bad key"))?;
        read_bytes(&mut rec).ok_or(bad("bad value"))?;
        let headers = read_varint(&mut rec).ok_or(bad("bad header count"))?;
        if headers < 0 || headers as usize > rec.len() {
            return Err(bad("bad header count"));
        }
        for _ in 0..headers {
            let key_len = read_varint(&mut rec).ok_or(bad("bad header key"))?;
            if key_len < 0 || key_len as usize > rec.len() {
                return Err(bad("bad header key"));
            }
            rec = &rec[key_len as usize..];
            read_bytes(&mut rec).ok_or(bad("bad header value"))?;
        }
        if !rec.is_empty() {
            return Err(bad("trailing bytes after the record's headers"));
        }
    }
    if !buf.is_empty() {
        return Err(BatchError::InvalidRecord { index: records_count, reason: "bytes after the last record" });
    }
    Ok((lowest <= highest).then_some((lowest, highest)))
}

/// Writes the broker-assigned base offset into a batch.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[OFFSET_BASE..OFFSET_BASE + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Stamps the leader epoch into a batch (not covered by the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[OFFSET_LEADER_EPOCH..OFFSET_LEADER_EPOCH + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Reads `(base_offset, total_bytes)` from the first 12 bytes of a stored batch.
pub fn peek_offset_and_size(buf: &[u8]) -> Option<(i64, usize)> {
    if buf.len() < BATCH_LOG_OVERHEAD_BYTES + 5 {
        return None;
    }
    let base = i64::from_be_bytes(buf[OFFSET_BASE..OFFSET_BASE + 8].try_into().ok()?);
    let len = i32::from_be_bytes(buf[OFFSET_LENGTH..OFFSET_LENGTH + 4].try_into().ok()?);
    if len < 0 || buf[OFFSET_MAGIC] as i8 != MAGIC_V2 {
        return None;
    }
    Some((base, BATCH_LOG_OVERHEAD_BYTES + len as usize))
}

/// Marks a batch as LogAppendTime: sets the timestamp-type attribute and
/// writes `now_ms` as its base and max timestamp (as Kafka does for v2), then
/// recomputes the CRC. Records keep their deltas; readers use the max
/// timestamp for every record of such a batch.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attributes = i16::from_be_bytes([batch[OFFSET_ATTRIBUTES], batch[OFFSET_ATTRIBUTES + 1]]);
    let attributes = attributes | ATTR_TIMESTAMP_TYPE_LOG_APPEND;
    batch[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[OFFSET_BASE_TIMESTAMP..OFFSET_BASE_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    batch[OFFSET_MAX_TIMESTAMP..OFFSET_MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    rewrite_crc(batch);
}

/// Recomputes the CRC after the broker changed bytes it covers (attributes,
/// max timestamp for LogAppendTime).
pub fn rewrite_crc(batch: &mut [u8]) {
    let crc = batch_crc(&batch[OFFSET_ATTRIBUTES..]);
    batch[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// CRC-32C (Castagnoli), the checksum of a v2 record batch from its
/// attributes to its end. Checking it is the largest cost of Kafgres's own
/// code on the produce path, so it uses `crc-fast`, which folds 64 bytes at a
/// time with VPCLMULQDQ where the CPU has it and falls back to the SSE4.2
/// instruction or a table: 85 GB/s against the `crc32c` crate's 21 on 1 MiB
/// here (AVX-512 Xeon), 11% of the broker's CPU during a 1 KiB produce before.
pub fn batch_crc(bytes: &[u8]) -> u32 {
    // Crc32Iscsi is CRC-32C; a 32-bit algorithm's value fits in 32 bits.
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

#[cfg(test)]
mod tests;

/// Each record's (offset delta, timestamp) in an uncompressed batch; `None`
/// for a compressed or malformed one. A LogAppendTime batch reports its max
/// timestamp for every record, as Kafka does.
pub fn record_timestamps(batch: &[u8]) -> Option<Vec<(i32, i64)>> {
    let header = BatchHeader::parse(batch).ok()?;
    if header.compression() != 0 || batch.len() < header.total_bytes() {
        return None;
    }
    timestamps_of_records(&header, &batch[BATCH_HEADER_BYTES..header.total_bytes()])
}

/// [`record_timestamps`] for any batch: a compressed one is decompressed
/// (under `limit`) to reach its records. `None` if the batch does not parse.
pub fn record_timestamps_decompressing(batch: &[u8], limit: DecompressLimit) -> Option<Vec<(i32, i64)>> {
    let header = BatchHeader::parse(batch).ok()?;
    if batch.len() < header.total_bytes() {
        return None;
    }
    let body = &batch[BATCH_HEADER_BYTES..header.total_bytes()];
    if header.compression() == 0 {
        return timestamps_of_records(&header, body);
    }
    let records = compression::decompress(header.compression(), body, limit).ok()?;
    timestamps_of_records(&header, &records)
}

/// (offset delta, timestamp) of each record in an uncompressed records section.
fn timestamps_of_records(header: &BatchHeader, records: &[u8]) -> Option<Vec<(i32, i64)>> {
    let mut buf = records;
    let mut out = Vec::with_capacity(header.records_count.clamp(0, 1 << 16) as usize);
    for _ in 0..header.records_count {
        let len = read_varint(&mut buf)?;
        if len < 1 || len as usize > buf.len() {
            return None;
        }
        let (mut rec, rest) = buf.split_at(len as usize);
        buf = rest;
        rec = &rec[1..];
        let delta = read_varlong(&mut rec)?;
        let offset_delta = read_varint(&mut rec)?;
        let ts = if header.is_log_append_time() { header.max_timestamp } else { header.base_timestamp + delta };
        out.push((offset_delta, ts));
    }
    Some(out)
}
