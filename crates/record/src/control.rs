//! Transaction markers: the control batches a transaction coordinator
//! writes to each partition of a transaction when it ends (Kafka's
//! `EndTransactionMarker`). One record per batch; its key is
//! `version i16 = 0 | type i16` (0 abort, 1 commit) and its value
//! `version i16 = 0 | coordinator epoch i32`. The batch carries the
//! producer's id and epoch, no sequence, and the transactional and control
//! attribute bits. Consumers never see these records: clients skip control
//! batches, and `read_committed` fetches use them to drop aborted data.

use bytes::BufMut;

use crate::batch::{BatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL};
use crate::build::{finish_batch, HeaderFields, ProducerStamp};
use crate::varint::{put_varint, put_varlong, read_varint, read_varlong};

const CONTROL_TYPE_ABORT: i16 = 0;
const CONTROL_TYPE_COMMIT: i16 = 1;

/// How a transaction ended, as its marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Commit,
    Abort,
}

/// One marker batch with base offset 0 (the log assigns the real one).
pub fn encode_marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: Marker,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.put_i16(0);
    key.put_i16(match marker {
        Marker::Abort => CONTROL_TYPE_ABORT,
        Marker::Commit => CONTROL_TYPE_COMMIT,
    });
    let mut value = Vec::with_capacity(6);
    value.put_i16(0);
    value.put_i32(coordinator_epoch);
    let mut record = Vec::new();
    record.put_u8(0); // attributes
    put_varlong(&mut record, 0); // timestamp delta
    put_varint(&mut record, 0); // offset delta
    put_varint(&mut record, key.len() as i32);
    record.extend_from_slice(&key);
    put_varint(&mut record, value.len() as i32);
    record.extend_from_slice(&value);
    put_varint(&mut record, 0); // headers
    let mut body = Vec::with_capacity(record.len() + 5);
    put_varint(&mut body, record.len() as i32);
    body.extend_from_slice(&record);

    let header = HeaderFields {
        attributes: ATTR_TRANSACTIONAL | ATTR_CONTROL,
        records: 1,
        base_timestamp: timestamp_ms,
        max_timestamp: timestamp_ms,
        producer: ProducerStamp { producer_id, producer_epoch, base_sequence: -1 },
    };
    finish_batch(&header, &body)
}

/// The marker of a control batch, from the first bytes of its records
/// section (`body`: what follows the 61-byte header; 32 bytes are enough).
/// `None` when the batch is not a control batch or its record is not a
/// marker Kafgres knows (Kafka has other control types, which end nothing).
pub fn marker_of(header: &BatchHeader, body: &[u8]) -> Option<Marker> {
    if !header.is_control() || header.compression() != 0 {
        return None;
    }
    let mut b = body;
    let _record_len = read_varint(&mut b)?;
    let (_attributes, rest) = b.split_first()?;
    b = rest;
    let _timestamp_delta = read_varlong(&mut b)?;
    let _offset_delta = read_varint(&mut b)?;
    let key_len = read_varint(&mut b)?;
    if key_len < 4 || b.len() < 4 {
        return None;
    }
    match i16::from_be_bytes([b[2], b[3]]) {
        CONTROL_TYPE_ABORT => Some(Marker::Abort),
        CONTROL_TYPE_COMMIT => Some(Marker::Commit),
        _ => None,
    }
}

/// Bytes of a marker batch's records section that [`marker_of`] needs.
pub const MARKER_PEEK_BYTES: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{validate_batches, BATCH_HEADER_BYTES};

    #[test]
    fn markers_round_trip_and_validate() {
        for marker in [Marker::Commit, Marker::Abort] {
            let batch = encode_marker_batch(42, 3, marker, 7, 1_000);
            let validated = validate_batches(&batch).expect("a valid batch");
            let header = validated.headers[0];
            assert!(header.is_control() && header.is_transactional());
            assert_eq!((header.producer_id, header.producer_epoch, header.base_sequence), (42, 3, -1));
            assert_eq!(marker_of(&header, &batch[BATCH_HEADER_BYTES..]), Some(marker));
            let peek = &batch[BATCH_HEADER_BYTES..(BATCH_HEADER_BYTES + MARKER_PEEK_BYTES).min(batch.len())];
            assert_eq!(marker_of(&header, peek), Some(marker));
        }
    }

    #[test]
    fn data_batches_have_no_marker() {
        let batch = crate::build::encode_batch(
            &[crate::build::NewRecord { key: Some(vec![0, 0, 0, 1]), ..Default::default() }],
            crate::build::ProducerStamp::NONE,
        );
        let header = BatchHeader::parse(&batch).unwrap();
        assert_eq!(marker_of(&header, &batch[BATCH_HEADER_BYTES..]), None);
    }
}
