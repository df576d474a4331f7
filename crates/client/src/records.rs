//! Fetched record batches (magic v2) into [`Record`]s.
//!
//! Each batch is checked with `kafgres_record`'s validation (lengths, magic,
//! CRC-32C, record count), compressed ones are inflated with its decoders into
//! a buffer capped by what is left of a per-fetch budget, control batches are
//! skipped, and records are read by their varint framing:
//!
//! ```text
//! length varint | attributes i8 | timestampDelta varlong | offsetDelta varint
//! keyLength varint | key | valueLength varint | value     (length -1: null)
//! headerCount varint | (keyLength varint | key | valueLength varint | value)*
//! ```
//!
//! Keys, values and header values of uncompressed batches are slices of the
//! fetched buffer (no copy). A trailing partial batch, which a broker may send
//! when a size limit cuts one, is left out, as Kafka's clients do.

use bytes::Bytes;
use kafgres_record::compression::{decompress, CODEC_NONE};
use kafgres_record::varint::{read_varint, read_varlong};
use kafgres_record::{validate_batches, BatchError, BatchHeader, DecompressLimit, BATCH_HEADER_BYTES};

use crate::error::ClientError;

/// One record as fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// Where a record's timestamp comes from (a batch attribute).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// Set by the producer.
    CreateTime,
    /// Set by the broker when the batch was appended (the batch's max timestamp).
    LogAppendTime,
}

/// The records of a fetch response's records field.
#[derive(Debug, Default)]
pub struct Decoded {
    pub records: Vec<Record>,
    /// The offset after the last whole batch (control batches included), or
    /// `None` if the field held no whole batch.
    pub next_offset: Option<i64>,
}

/// Decodes the whole batches in `data`, keeping records at `from_offset` or
/// later; compressed batches together inflate to at most `decompressed_bytes_max`.
pub fn decode_batches(data: &Bytes, from_offset: i64, decompressed_bytes_max: usize) -> Result<Decoded, ClientError> {
    let mut decoded = Decoded::default();
    let mut budget = decompressed_bytes_max;
    let mut pos = 0;
    while data.len() - pos >= BATCH_HEADER_BYTES {
        let Ok(header) = BatchHeader::parse(&data[pos..]) else { break };
        let total = header.total_bytes();
        if total > data.len() - pos {
            break;
        }
        let batch = data.slice(pos..pos + total);
        pos += total;
        let corrupt = |source| ClientError::Batch { base_offset: header.base_offset, source };
        validate_batches(&batch).map_err(corrupt)?;
        decoded.next_offset = Some(header.next_offset());
        if header.is_control() || header.last_offset() < from_offset {
            continue;
        }
        let body = match header.compression() {
            CODEC_NONE => batch.slice(BATCH_HEADER_BYTES..),
            codec => {
                let inflated = decompress(codec, &batch[BATCH_HEADER_BYTES..], DecompressLimit { bytes_max: budget })
                    .map_err(corrupt)?;
                budget -= inflated.len();
                Bytes::from(inflated)
            }
        };
        read_records(&header, &body, from_offset, &mut decoded.records).map_err(corrupt)?;
    }
    Ok(decoded)
}

fn read_records(header: &BatchHeader, body: &Bytes, from_offset: i64, out: &mut Vec<Record>) -> Result<(), BatchError> {
    let timestamp_type =
        if header.is_log_append_time() { TimestampType::LogAppendTime } else { TimestampType::CreateTime };
    let mut cursor = Cursor { data: body, pos: 0, end: body.len() };
    for index in 0..header.records_count {
        let bad = |reason| BatchError::InvalidRecord { index, reason };
        let len = cursor.varint().ok_or(bad("bad record length"))?;
        if len < 1 || len as usize > cursor.remaining() {
            return Err(bad("record length runs past the batch"));
        }
        let mut record = Cursor { data: body, pos: cursor.pos, end: cursor.pos + len as usize };
        cursor.pos = record.end;
        record.pos += 1; // attributes, unused in v2
        let timestamp_delta = record.varlong().ok_or(bad("bad timestamp delta"))?;
        let offset_delta = record.varint().ok_or(bad("bad offset delta"))?;
        let key = record.bytes().ok_or(bad("bad key"))?;
        let value = record.bytes().ok_or(bad("bad value"))?;
        let header_count = record.varint().ok_or(bad("bad header count"))?;
        // Each header takes at least two bytes.
        if header_count < 0 || header_count as usize > record.remaining() / 2 {
            return Err(bad("bad header count"));
        }
        let mut headers = Vec::with_capacity(header_count as usize);
        for _ in 0..header_count {
            let name = record.bytes().ok_or(bad("bad header key"))?.ok_or(bad("null header key"))?;
            let value = record.bytes().ok_or(bad("bad header value"))?;
            headers.push((String::from_utf8_lossy(&name).into_owned(), value));
        }
        if record.remaining() != 0 {
            return Err(bad("trailing bytes after the record's headers"));
        }
        let offset = header.base_offset + i64::from(offset_delta);
        if offset < from_offset {
            continue;
        }
        let timestamp = match timestamp_type {
            TimestampType::LogAppendTime => header.max_timestamp,
            TimestampType::CreateTime => header.base_timestamp.wrapping_add(timestamp_delta),
        };
        out.push(Record { offset, timestamp, timestamp_type, key, value, headers });
    }
    if cursor.remaining() != 0 {
        return Err(BatchError::InvalidRecord { index: header.records_count, reason: "bytes after the last record" });
    }
    Ok(())
}

/// A position in a shared buffer, so fields come out as zero-copy slices.
struct Cursor<'a> {
    data: &'a Bytes,
    pos: usize,
    end: usize,
}

impl Cursor<'_> {
    fn remaining(&self) -> usize {
        self.end - self.pos
    }

    fn rest(&self) -> &[u8] {
        &self.data[self.pos..self.end]
    }

    fn varint(&mut self) -> Option<i32> {
        let mut rest = self.rest();
        let before = rest.len();
        let value = read_varint(&mut rest)?;
        self.pos += before - rest.len();
        Some(value)
    }

    fn varlong(&mut self) -> Option<i64> {
        let mut rest = self.rest();
        let before = rest.len();
        let value = read_varlong(&mut rest)?;
        self.pos += before - rest.len();
        Some(value)
    }

    /// A varint-length-prefixed field: `Some(None)` for null (-1), `None` if malformed.
    fn bytes(&mut self) -> Option<Option<Bytes>> {
        match self.varint()? {
            -1 => Some(None),
            len if len < 0 || len as usize > self.remaining() => None,
            len => {
                let field = self.data.slice(self.pos..self.pos + len as usize);
                self.pos += len as usize;
                Some(Some(field))
            }
        }
    }
}

#[cfg(test)]
mod tests;
