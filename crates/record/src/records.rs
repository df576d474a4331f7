//! Single records of a stored v2 batch, for the log cleaner: read them out
//! of a batch (decompressing it under a cap), and build a batch back from a
//! subset of them, keeping its base offset, its last offset, its producer
//! fields and its codec, as Kafka's `MemoryRecords.filterTo` does.
//!
//! Record layout inside a batch's (uncompressed) records section:
//!
//! ```text
//! length varint | attributes i8 | timestamp delta varlong | offset delta varint
//! key length varint (-1: null) | key | value length varint (-1: null) | value
//! header count varint | headers (kept verbatim here)
//! ```

use std::borrow::Cow;

use crate::batch::{
    rewrite_crc, BatchError, BatchHeader, ATTR_COMPRESSION_MASK, ATTR_DELETE_HORIZON, BATCH_HEADER_BYTES,
    BATCH_LOG_OVERHEAD_BYTES, MAGIC_V2,
};
use crate::compression::{decompress, encode::compress, DecompressLimit, CODEC_NONE};
use crate::varint::{put_bytes, put_varint, put_varlong, read_bytes, read_varint, read_varlong};

/// One record of a stored batch, borrowing the batch's (decompressed) bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredRecord<'a> {
    /// Relative to the batch's base offset.
    pub offset_delta: i32,
    /// The batch's base timestamp plus the record's delta (for a
    /// LogAppendTime batch readers use the batch's max timestamp instead).
    pub timestamp_ms: i64,
    pub attributes: u8,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The header count and the headers, verbatim.
    pub headers: &'a [u8],
}

impl StoredRecord<'_> {
    /// A record without a value: a delete marker on a compacted topic.
    pub fn is_tombstone(&self) -> bool {
        self.value.is_none()
    }
}

/// The records section of a whole stored `batch`, decompressed (under
/// `limit`) if the batch is compressed.
pub fn records_section(batch: &[u8], limit: DecompressLimit) -> Result<Cow<'_, [u8]>, BatchError> {
    let header = BatchHeader::parse(batch)?;
    let total = header.total_bytes();
    if total > batch.len() || total < BATCH_HEADER_BYTES {
        return Err(BatchError::Truncated { needed: total.max(BATCH_HEADER_BYTES), available: batch.len() });
    }
    let body = &batch[BATCH_HEADER_BYTES..total];
    match header.compression() {
        CODEC_NONE => Ok(Cow::Borrowed(body)),
        codec => decompress(codec, body, limit).map(Cow::Owned),
    }
}

/// Parses the `header.records_count` records of an uncompressed records
/// section. Never allocates more than one entry per byte of input.
pub fn parse_records<'a>(header: &BatchHeader, section: &'a [u8]) -> Result<Vec<StoredRecord<'a>>, BatchError> {
    let mut buf = section;
    let count = header.records_count.max(0);
    let mut out = Vec::with_capacity((count as usize).min(section.len()));
    for index in 0..count {
        let bad = |reason| BatchError::InvalidRecord { index, reason };
        let len = read_varint(&mut buf).ok_or(bad("bad record length"))?;
        if len < 1 || len as usize > buf.len() {
            return Err(bad("record length runs past the batch"));
        }
        let (mut rec, rest) = buf.split_at(len as usize);
        buf = rest;
        let attributes = rec[0];
        rec = &rec[1..];
        let timestamp_delta = read_varlong(&mut rec).ok_or(bad("bad timestamp delta"))?;
        let offset_delta = read_varint(&mut rec).ok_or(bad("bad offset delta"))?;
        let key = read_bytes(&mut rec).ok_or(bad("bad key"))?;
        let value = read_bytes(&mut rec).ok_or(bad("bad value"))?;
        out.push(StoredRecord {
            offset_delta,
            timestamp_ms: header.base_timestamp.wrapping_add(timestamp_delta),
            attributes,
            key,
            value,
            headers: rec,
        });
    }
    if !buf.is_empty() {
        return Err(BatchError::InvalidRecord { index: count, reason: "bytes after the last record" });
    }
    Ok(out)
}

/// Builds a batch holding `records` (a subset of `original`'s, in order) in
/// place of `original`: same base offset, lastOffsetDelta, leader epoch,
/// producer id, epoch and base sequence, attributes and codec (the records
/// are recompressed with it), a new count, timestamps and CRC. With
/// `delete_horizon_ms` the batch carries KIP-534's delete horizon: the flag
/// is set and the base timestamp is the horizon (record timestamp deltas are
/// taken from it). Without records, the result is the header alone,
/// uncompressed, with the original max timestamp as both timestamps (Kafka's
/// empty batch, kept for an idempotent producer's last sequence).
pub fn rebuild_batch(original: &BatchHeader, records: &[StoredRecord<'_>], delete_horizon_ms: Option<i64>) -> Vec<u8> {
    let mut attributes = original.attributes & !ATTR_DELETE_HORIZON;
    let (base_timestamp, max_timestamp, body) = if records.is_empty() {
        attributes &= !ATTR_COMPRESSION_MASK;
        (original.max_timestamp, original.max_timestamp, Vec::new())
    } else {
        let base_timestamp = delete_horizon_ms.unwrap_or(records[0].timestamp_ms);
        if delete_horizon_ms.is_some() {
            attributes |= ATTR_DELETE_HORIZON;
        }
        let max_timestamp = if original.is_log_append_time() {
            original.max_timestamp
        } else {
            records.iter().map(|r| r.timestamp_ms).max().unwrap_or(base_timestamp)
        };
        let mut body = Vec::new();
        let mut rec = Vec::new();
        for r in records {
            rec.clear();
            rec.push(r.attributes);
            put_varlong(&mut rec, r.timestamp_ms.wrapping_sub(base_timestamp));
            put_varint(&mut rec, r.offset_delta);
            put_bytes(&mut rec, r.key);
            put_bytes(&mut rec, r.value);
            rec.extend_from_slice(r.headers);
            put_varint(&mut body, rec.len() as i32);
            body.extend_from_slice(&rec);
        }
        let codec = original.compression();
        let body = if codec == CODEC_NONE { body } else { compress(codec, &body) };
        (base_timestamp, max_timestamp, body)
    };
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + body.len());
    out.extend_from_slice(&original.base_offset.to_be_bytes());
    out.extend_from_slice(&((BATCH_HEADER_BYTES - BATCH_LOG_OVERHEAD_BYTES + body.len()) as i32).to_be_bytes());
    out.extend_from_slice(&original.partition_leader_epoch.to_be_bytes());
    out.push(MAGIC_V2 as u8);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&attributes.to_be_bytes());
    out.extend_from_slice(&original.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&base_timestamp.to_be_bytes());
    out.extend_from_slice(&max_timestamp.to_be_bytes());
    out.extend_from_slice(&original.producer_id.to_be_bytes());
    out.extend_from_slice(&original.producer_epoch.to_be_bytes());
    out.extend_from_slice(&original.base_sequence.to_be_bytes());
    out.extend_from_slice(&(records.len() as i32).to_be_bytes());
    out.extend_from_slice(&body);
    rewrite_crc(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{set_base_offset, validate_batches, validate_produced_batches};
    use crate::build::{encode_compressed_batch, NewRecord, ProducerStamp};

    const LIMIT: DecompressLimit = DecompressLimit { bytes_max: 1 << 20 };

    fn rec(i: u8, value: bool) -> NewRecord {
        NewRecord {
            key: Some(vec![b'k', i]),
            value: value.then(|| vec![i; 10]),
            headers: vec![("h".into(), Some(vec![i]))],
            timestamp_ms: 1_000 + i64::from(i),
        }
    }

    #[test]
    fn a_subset_rebuilds_into_a_valid_stored_batch_with_the_same_offsets() {
        for codec in 0..=4u8 {
            let stamp = ProducerStamp { producer_id: 7, producer_epoch: 1, base_sequence: 40 };
            let mut batch = encode_compressed_batch(&[rec(0, true), rec(1, false), rec(2, true)], stamp, codec);
            set_base_offset(&mut batch, 100);
            let header = BatchHeader::parse(&batch).unwrap();
            let section = records_section(&batch, LIMIT).unwrap();
            let records = parse_records(&header, &section).unwrap();
            assert_eq!(records.len(), 3);
            assert!(records[1].is_tombstone());
            let kept = [records[1], records[2]];
            let rebuilt = rebuild_batch(&header, &kept, Some(99_999));
            let v = validate_batches(&rebuilt).unwrap_or_else(|e| panic!("codec {codec}: {e}"));
            let h = v.headers[0];
            assert_eq!((h.base_offset, h.last_offset(), h.records_count, h.compression()), (100, 102, 2, codec));
            assert_eq!((h.producer_id, h.base_sequence, h.delete_horizon_ms()), (7, 40, Some(99_999)));
            assert_eq!(h.max_timestamp, 1_002);
            let section = records_section(&rebuilt, LIMIT).unwrap();
            let again = parse_records(&h, &section).unwrap();
            assert_eq!(again, kept.to_vec(), "records, timestamps included, survive the rebuild");
            assert!(validate_produced_batches(&rebuilt, LIMIT).is_err(), "a producer may not send gaps");
        }
    }

    #[test]
    fn an_emptied_batch_keeps_its_header_and_offsets() {
        let stamp = ProducerStamp { producer_id: 3, producer_epoch: 0, base_sequence: 5 };
        let batch = encode_compressed_batch(&[rec(0, true), rec(1, true)], stamp, 1);
        let header = BatchHeader::parse(&batch).unwrap();
        let empty = rebuild_batch(&header, &[], None);
        let h = validate_batches(&empty).unwrap().headers[0];
        assert_eq!((h.records_count, h.last_offset_delta, h.compression(), h.max_timestamp), (0, 1, 0, 1_001));
        assert_eq!(h.total_bytes(), BATCH_HEADER_BYTES);
    }
}
