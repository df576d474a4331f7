use super::build::{encode_batch, NewRecord, ProducerStamp};
use super::*;
use proptest::prelude::*;

fn record(i: u8) -> NewRecord {
    NewRecord {
        key: Some(vec![b'k', i]),
        value: if i % 3 == 0 { None } else { Some(vec![i; i as usize]) },
        headers: vec![("h".into(), Some(vec![i])), ("h".into(), None)],
        timestamp_ms: 1_700_000_000_000 + i64::from(i),
    }
}

#[test]
fn encoded_batches_validate_and_report_their_shape() {
    let batch = encode_batch(&[record(1), record(2), record(3)], ProducerStamp::NONE);
    let v = validate_batches(&batch).unwrap();
    assert_eq!(v.records, 3);
    let h = v.headers[0];
    assert_eq!((h.base_offset, h.last_offset_delta, h.records_count), (0, 2, 3));
    assert_eq!(h.total_bytes(), batch.len());
    assert_eq!(h.max_timestamp, 1_700_000_000_003);
    assert!(!h.has_producer_id());
}

#[test]
fn patching_offset_and_epoch_keeps_the_crc_valid() {
    let mut batch = encode_batch(&[record(7)], ProducerStamp::NONE);
    set_base_offset(&mut batch, 12345);
    set_partition_leader_epoch(&mut batch, 4);
    let h = validate_batches(&batch).unwrap().headers[0];
    assert_eq!((h.base_offset, h.partition_leader_epoch, h.next_offset()), (12345, 4, 12346));
    assert_eq!(peek_offset_and_size(&batch), Some((12345, batch.len())));
}

#[test]
fn several_batches_back_to_back() {
    let mut buf = encode_batch(&[record(1)], ProducerStamp::NONE);
    buf.extend(encode_batch(&[record(2), record(3)], ProducerStamp::NONE));
    let v = validate_batches(&buf).unwrap();
    assert_eq!((v.headers.len(), v.records), (2, 3));
}

#[test]
fn refuses_corruption_with_a_reason() {
    let good = encode_batch(&[record(1), record(2)], ProducerStamp::NONE);
    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0xff;
    assert!(matches!(validate_batches(&flipped), Err(BatchError::CrcMismatch { .. })));
    let mut magic = good.clone();
    magic[OFFSET_MAGIC] = 1;
    assert_eq!(validate_batches(&magic), Err(BatchError::UnsupportedMagic(1)));
    assert!(matches!(validate_batches(&good[..good.len() - 1]), Err(BatchError::Truncated { .. })));
    assert_eq!(validate_batches(&[]), Err(BatchError::Empty));
}

#[test]
fn refuses_a_count_that_disagrees_with_the_records() {
    let mut batch = encode_batch(&[record(1), record(2)], ProducerStamp::NONE);
    batch[57..61].copy_from_slice(&3i32.to_be_bytes());
    batch[23..27].copy_from_slice(&2i32.to_be_bytes());
    rewrite_crc(&mut batch);
    let err = validate_batches(&batch).unwrap_err();
    assert!(err.is_invalid_record(), "{err:?}");
}

proptest! {
    #[test]
    fn any_cut_of_a_batch_is_refused(cut in 0usize..200) {
        let batch = encode_batch(&[record(5), record(9)], ProducerStamp::NONE);
        prop_assume!(cut < batch.len());
        prop_assert!(validate_batches(&batch[..cut]).is_err());
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = validate_batches(&bytes);
    }

    #[test]
    fn roundtrip_any_records(
        recs in proptest::collection::vec(
            (proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
             proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
             0i64..100_000), 1..20)
    ) {
        let records: Vec<NewRecord> = recs.into_iter().map(|(key, value, ts)| NewRecord {
            key, value, headers: vec![], timestamp_ms: 1_000_000 + ts,
        }).collect();
        let batch = encode_batch(&records, ProducerStamp { producer_id: 7, producer_epoch: 0, base_sequence: 0 });
        let v = validate_batches(&batch).unwrap();
        prop_assert_eq!(v.records, records.len() as i64);
        prop_assert_eq!(v.headers[0].max_timestamp, records.iter().map(|r| r.timestamp_ms).max().unwrap());
    }
}
