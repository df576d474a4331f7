use bytes::Bytes;
use kafgres_record::build::{encode_batch, encode_compressed_batch, NewRecord, ProducerStamp};
use kafgres_record::compression::CODEC_GZIP;
use kafgres_record::{rewrite_crc, set_base_offset, set_log_append_time};

use super::*;

fn records(n: usize) -> Vec<NewRecord> {
    (0..n)
        .map(|i| NewRecord {
            key: if i == 1 { None } else { Some(format!("k{i}").into_bytes()) },
            value: if i == 2 { None } else { Some(format!("v{i}").into_bytes()) },
            headers: vec![("h".into(), Some(vec![i as u8])), ("null".into(), None)],
            timestamp_ms: 1_000 + i as i64,
        })
        .collect()
}

fn stored(mut batch: Vec<u8>, base_offset: i64) -> Vec<u8> {
    set_base_offset(&mut batch, base_offset);
    batch
}

fn check_record(r: &Record, offset: i64, source: &NewRecord) {
    assert_eq!(r.offset, offset);
    assert_eq!(r.timestamp, source.timestamp_ms);
    assert_eq!(r.timestamp_type, TimestampType::CreateTime);
    assert_eq!(r.key.as_deref(), source.key.as_deref());
    assert_eq!(r.value.as_deref(), source.value.as_deref());
    let headers: Vec<(String, Option<Vec<u8>>)> =
        r.headers.iter().map(|(k, v)| (k.clone(), v.as_ref().map(|v| v.to_vec()))).collect();
    assert_eq!(headers, source.headers);
}

#[test]
fn decodes_batches_from_an_offset_inside_one() {
    let rs = records(4);
    let mut data = stored(encode_batch(&rs, ProducerStamp::NONE), 10);
    data.extend(stored(encode_compressed_batch(&rs[..2], ProducerStamp::NONE, CODEC_GZIP), 14));
    let decoded = decode_batches(&Bytes::from(data), 12, 1 << 20).unwrap();
    let offsets: Vec<i64> = decoded.records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [12, 13, 14, 15]);
    check_record(&decoded.records[0], 12, &rs[2]);
    check_record(&decoded.records[3], 15, &rs[1]);
    assert_eq!(decoded.next_offset, Some(16));
}

#[test]
fn skips_control_batches_and_a_trailing_partial_batch() {
    let mut control = stored(encode_batch(&records(1), ProducerStamp::NONE), 0);
    control[22] |= 0x20; // attributes low byte: control
    rewrite_crc(&mut control);
    let mut data = control;
    data.extend(stored(encode_batch(&records(2), ProducerStamp::NONE), 1));
    let whole = data.len();
    data.extend(&stored(encode_batch(&records(2), ProducerStamp::NONE), 3)[..40]);
    let decoded = decode_batches(&Bytes::from(data.clone()), 0, 1 << 20).unwrap();
    assert_eq!(decoded.records.iter().map(|r| r.offset).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(decoded.next_offset, Some(3));
    let decoded = decode_batches(&Bytes::copy_from_slice(&data[..whole - 1]), 0, 1 << 20).unwrap();
    assert_eq!(decoded.records.len(), 0);
    assert_eq!(decoded.next_offset, Some(1));
}

#[test]
fn log_append_time_batches_use_the_max_timestamp() {
    let mut batch = stored(encode_batch(&records(3), ProducerStamp::NONE), 0);
    set_log_append_time(&mut batch, 99_000);
    let decoded = decode_batches(&Bytes::from(batch), 0, 1 << 20).unwrap();
    assert!(decoded.records.iter().all(|r| r.timestamp == 99_000 && r.timestamp_type == TimestampType::LogAppendTime));
}

#[test]
fn refuses_a_bad_crc_and_a_decompression_past_the_budget() {
    let mut batch = stored(encode_batch(&records(2), ProducerStamp::NONE), 5);
    let last = batch.len() - 1;
    batch[last] ^= 1;
    let err = decode_batches(&Bytes::from(batch), 0, 1 << 20).unwrap_err();
    assert!(matches!(err, ClientError::Batch { base_offset: 5, source: BatchError::CrcMismatch { .. } }), "{err}");

    let big = vec![NewRecord { value: Some(vec![b'x'; 10_000]), timestamp_ms: 1, ..Default::default() }];
    let batch = stored(encode_compressed_batch(&big, ProducerStamp::NONE, CODEC_GZIP), 0);
    let err = decode_batches(&Bytes::from(batch), 0, 1_000).unwrap_err();
    assert!(matches!(err, ClientError::Batch { source: BatchError::DecompressedTooLarge { .. }, .. }), "{err}");
}
