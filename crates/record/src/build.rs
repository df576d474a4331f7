//! Encoding v2 record batches (uncompressed, or compressed with a Kafka
//! client's codec): used by the SQL producer, the benchmark and tests. The
//! broker's produce path never re-encodes batches.

use bytes::BufMut;

use crate::batch::{rewrite_crc, BATCH_HEADER_BYTES, BATCH_LOG_OVERHEAD_BYTES, MAGIC_V2};
use crate::compression::{encode::compress, CODEC_NONE};
use crate::varint::{put_bytes, put_varint, put_varlong};

/// One record to encode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewRecord {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp_ms: i64,
}

/// Producer identity stamped on a batch; `NONE` for non-idempotent producers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStamp {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

impl ProducerStamp {
    pub const NONE: ProducerStamp = ProducerStamp { producer_id: -1, producer_epoch: -1, base_sequence: -1 };
}

/// Encodes `records` as one uncompressed batch with base offset 0.
///
/// Panics if `records` is empty: an empty batch is never valid input.
pub fn encode_batch(records: &[NewRecord], producer: ProducerStamp) -> Vec<u8> {
    encode_compressed_batch(records, producer, CODEC_NONE)
}

/// Encodes `records` as one batch whose records section is compressed with
/// `codec` (0 none, 1 gzip, 2 snappy in xerial framing, 3 lz4, 4 zstd).
///
/// Panics if `records` is empty or the codec is unknown.
pub fn encode_compressed_batch(records: &[NewRecord], producer: ProducerStamp, codec: u8) -> Vec<u8> {
    let body = encode_records(records);
    let body = if codec == CODEC_NONE { body } else { compress(codec, &body) };
    assemble_batch(records, producer, codec, &body)
}

/// The records section of an uncompressed batch holding `records`.
pub fn encode_records(records: &[NewRecord]) -> Vec<u8> {
    assert!(!records.is_empty(), "a record batch needs at least one record");
    let base_timestamp = records[0].timestamp_ms;
    let mut body = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let mut rec = Vec::new();
        rec.put_u8(0);
        put_varlong(&mut rec, r.timestamp_ms - base_timestamp);
        put_varint(&mut rec, i as i32);
        put_bytes(&mut rec, r.key.as_deref());
        put_bytes(&mut rec, r.value.as_deref());
        put_varint(&mut rec, r.headers.len() as i32);
        for (k, v) in &r.headers {
            put_bytes(&mut rec, Some(k.as_bytes()));
            put_bytes(&mut rec, v.as_deref());
        }
        put_varint(&mut body, rec.len() as i32);
        body.extend_from_slice(&rec);
    }
    body
}

/// Puts a header in front of an already encoded (maybe compressed) records
/// section; `records` gives the count and timestamps.
pub fn assemble_batch(records: &[NewRecord], producer: ProducerStamp, codec: u8, body: &[u8]) -> Vec<u8> {
    assert!(!records.is_empty(), "a record batch needs at least one record");
    let base_timestamp = records[0].timestamp_ms;
    let max_timestamp = records.iter().map(|r| r.timestamp_ms).max().unwrap_or(base_timestamp);
    let header = HeaderFields {
        attributes: i16::from(codec),
        records: records.len() as i32,
        base_timestamp,
        max_timestamp,
        producer,
    };
    finish_batch(&header, body)
}

/// What a v2 batch header says besides its lengths, offsets and CRC.
pub(crate) struct HeaderFields {
    pub attributes: i16,
    pub records: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer: ProducerStamp,
}

/// A batch with base offset 0 and no leader epoch: the header, `body`, and
/// the CRC over both.
pub(crate) fn finish_batch(h: &HeaderFields, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + body.len());
    out.put_i64(0);
    out.put_i32((BATCH_HEADER_BYTES - BATCH_LOG_OVERHEAD_BYTES + body.len()) as i32);
    out.put_i32(-1);
    out.put_i8(MAGIC_V2);
    out.put_u32(0);
    out.put_i16(h.attributes);
    out.put_i32(h.records - 1);
    out.put_i64(h.base_timestamp);
    out.put_i64(h.max_timestamp);
    out.put_i64(h.producer.producer_id);
    out.put_i16(h.producer.producer_epoch);
    out.put_i32(h.producer.base_sequence);
    out.put_i32(h.records);
    out.extend_from_slice(body);
    rewrite_crc(&mut out);
    out
}
