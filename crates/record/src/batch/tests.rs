use super::*;
use crate::build::{encode_batch, NewRecord, ProducerStamp};
use proptest::prelude::*;

fn record(i: u8) -> NewRecord {
    NewRecord {
        key: Some(vec![b'k', i]),
        value: if i.is_multiple_of(3) { None } else { Some(vec![i; i as usize]) },
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

#[test]
fn batch_crc_is_crc32c() {
    assert_eq!(batch_crc(b""), 0);
    assert_eq!(batch_crc(b"123456789"), 0xE306_9283); // the standard check value
    let large: Vec<u8> = (0..(1usize << 20) + 7).map(|i| (i * 131 % 251) as u8).collect();
    assert_eq!(batch_crc(&large), crc32c::crc32c(&large));
    assert_eq!(batch_crc(&large[3..]), crc32c::crc32c(&large[3..]));
}

proptest! {
    // Every length and alignment around the 64-byte folding blocks and the
    // vector paths' thresholds, against the reference implementation.
    #[test]
    fn batch_crc_matches_the_reference(
        bytes in proptest::collection::vec(any::<u8>(), 0..4200),
        skip in 0usize..64,
    ) {
        let slice = &bytes[skip.min(bytes.len())..];
        prop_assert_eq!(batch_crc(slice), crc32c::crc32c(slice));
    }

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

mod compressed {
    use super::*;
    use crate::build::{assemble_batch, encode_compressed_batch, encode_records};
    use crate::compression::encode::{raw_snappy, xerial_snappy};
    use crate::compression::*;

    const LIMIT: DecompressLimit = DecompressLimit { bytes_max: 1 << 20 };
    const CODECS: [u8; 4] = [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD];

    fn records(n: u8) -> Vec<NewRecord> {
        (0..n).map(record).collect()
    }

    #[test]
    fn every_codec_round_trips_and_is_walked() {
        for codec in CODECS {
            let recs = records(20);
            let batch = encode_compressed_batch(&recs, ProducerStamp::NONE, codec);
            let v = validate_produced_batches(&batch, LIMIT).unwrap();
            assert_eq!((v.records, v.headers[0].compression()), (20, codec));
            let first = recs[0].timestamp_ms;
            assert_eq!(v.timestamp_bounds, vec![Some((first, first + 19))]);
            let payload = &batch[BATCH_HEADER_BYTES..];
            assert_eq!(decompress(codec, payload, LIMIT).unwrap(), encode_records(&recs), "codec {codec}");
            // The header-only path accepts it without looking inside.
            assert_eq!(validate_batches(&batch).unwrap().timestamp_bounds, vec![None]);
        }
    }

    #[test]
    fn raw_and_multi_chunk_xerial_snappy_are_both_read() {
        let recs = records(30);
        let body = encode_records(&recs);
        for payload in [raw_snappy(&body), xerial_snappy(&body, 7)] {
            let batch = assemble_batch(&recs, ProducerStamp::NONE, CODEC_SNAPPY, &payload);
            assert_eq!(validate_produced_batches(&batch, LIMIT).unwrap().records, 30);
        }
    }

    #[test]
    fn a_decompression_bomb_is_refused_at_the_cap() {
        let huge = vec![0u8; 64 << 20];
        for codec in CODECS {
            let payload = crate::compression::encode::compress(codec, &huge);
            assert!(payload.len() < 4 << 20, "codec {codec}: {} bytes", payload.len());
            let batch = assemble_batch(&records(1), ProducerStamp::NONE, codec, &payload);
            let err = validate_produced_batches(&batch, LIMIT).unwrap_err();
            assert!(
                matches!(err, BatchError::DecompressedTooLarge { bytes_max, .. } if bytes_max == LIMIT.bytes_max),
                "{err:?}"
            );
            assert!(!err.is_invalid_record());
        }
        // Raw snappy declares its size up front: refused before allocating.
        let header_only = [0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(matches!(
            decompress(CODEC_SNAPPY, &header_only, LIMIT),
            Err(BatchError::DecompressedTooLarge { .. }) | Err(BatchError::Decompression { .. })
        ));
    }

    #[test]
    fn corrupt_and_truncated_payloads_are_refused() {
        let recs = records(10);
        for codec in CODECS {
            let payload = crate::compression::encode::compress(codec, &encode_records(&recs));
            let mut garbled = payload.clone();
            for b in garbled.iter_mut().skip(payload.len() / 3).take(8) {
                *b ^= 0x5a;
            }
            for bad in [&payload[..payload.len() / 2], &garbled[..], b"not compressed at all"] {
                let batch = assemble_batch(&recs, ProducerStamp::NONE, codec, bad);
                assert!(validate_produced_batches(&batch, LIMIT).is_err(), "codec {codec} accepted {bad:?}");
            }
        }
    }

    #[test]
    fn a_count_that_disagrees_with_the_compressed_records_is_invalid() {
        let body = encode_records(&records(3));
        let payload = crate::compression::encode::compress(CODEC_ZSTD, &body);
        let batch = assemble_batch(&records(4), ProducerStamp::NONE, CODEC_ZSTD, &payload);
        assert!(validate_produced_batches(&batch, LIMIT).unwrap_err().is_invalid_record());
    }

    #[test]
    fn unknown_codecs_are_refused() {
        let mut batch = encode_batch(&records(2), ProducerStamp::NONE);
        batch[OFFSET_ATTRIBUTES + 1] |= 5;
        rewrite_crc(&mut batch);
        assert_eq!(validate_produced_batches(&batch, LIMIT), Err(BatchError::UnknownCompression(5)));
    }

    #[test]
    fn log_append_time_stamps_both_timestamps_and_keeps_the_crc_valid() {
        let mut batch = encode_compressed_batch(&records(3), ProducerStamp::NONE, CODEC_LZ4);
        set_log_append_time(&mut batch, 42);
        let h = validate_produced_batches(&batch, LIMIT).unwrap().headers[0];
        assert!(h.is_log_append_time());
        assert_eq!((h.base_timestamp, h.max_timestamp, h.compression()), (42, 42, CODEC_LZ4));
    }

    proptest! {
        #[test]
        fn compressed_garbage_never_panics(codec in 1u8..=4, bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decompress(codec, &bytes, DecompressLimit { bytes_max: 4096 });
        }

        #[test]
        fn any_codec_round_trips_any_records(
            codec in 1u8..=4,
            values in proptest::collection::vec(proptest::option::of(proptest::collection::vec(any::<u8>(), 0..100)), 1..15)
        ) {
            let recs: Vec<NewRecord> = values.into_iter().enumerate().map(|(i, value)| NewRecord {
                key: None, value, headers: vec![], timestamp_ms: 1_000 + i as i64,
            }).collect();
            let batch = encode_compressed_batch(&recs, ProducerStamp::NONE, codec);
            let v = validate_produced_batches(&batch, LIMIT).unwrap();
            prop_assert_eq!(v.records, recs.len() as i64);
        }
    }
}
