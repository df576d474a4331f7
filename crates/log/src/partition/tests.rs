use super::*;
use crate::producer::TxnEnd;
use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};
use kafgres_record::validate_batches;

fn batch(n: usize, tag: u8) -> Vec<u8> {
    let records: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord {
            key: Some(vec![tag, i as u8]),
            value: Some(vec![tag; 100]),
            headers: vec![],
            timestamp_ms: 1_000 + i as i64,
        })
        .collect();
    encode_batch(&records, ProducerStamp::NONE)
}

fn append(log: &mut PartitionLog, n: usize, tag: u8) -> AppendResult {
    let b = batch(n, tag);
    let headers = validate_batches(&b).unwrap().headers;
    log.append(&b, &headers, 0, 0).unwrap()
}

fn offsets_in(bytes: &[u8]) -> Vec<i64> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some((base, size)) = kafgres_record::peek_offset_and_size(&bytes[pos..]) {
        if pos + size > bytes.len() {
            break;
        }
        out.push(base);
        pos += size;
    }
    out
}

#[test]
fn appends_assign_consecutive_offsets_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(append(&mut log, 3, 1).base_offset, 0);
    let r = append(&mut log, 2, 2);
    assert_eq!((r.base_offset, r.last_offset, r.end.offset), (3, 4, 5));
    let all = log.read(0, 1 << 20, log.end_position(), true).unwrap().read_to_vec().unwrap();
    assert_eq!(offsets_in(&all), vec![0, 3]);
    let from4 = log.read(4, 1 << 20, log.end_position(), true).unwrap().read_to_vec().unwrap();
    assert_eq!(offsets_in(&from4), vec![3], "a read starts at the batch holding the offset");
    assert!(log.read(5, 100, log.end_position(), true).unwrap().read_to_vec().unwrap().is_empty());
    assert!(matches!(log.read(6, 100, log.end_position(), true), Err(LogError::OffsetOutOfRange { .. })));
}

#[test]
fn reads_stop_at_the_given_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    let first = append(&mut log, 1, 1);
    append(&mut log, 1, 2);
    let bytes = log.read(0, 1 << 20, first.end, true).unwrap().read_to_vec().unwrap();
    assert_eq!(offsets_in(&bytes), vec![0]);
    assert!(log.read(1, 1 << 20, first.end, true).unwrap().read_to_vec().unwrap().is_empty());
}

#[test]
fn first_batch_is_whole_even_above_max_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append(&mut log, 5, 1);
    let slice = log.read(0, 10, log.end_position(), true).unwrap();
    assert_eq!(slice.len, log.size_bytes());
}

#[test]
fn rolls_by_size_and_reads_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes_max: 1000, ..LogConfig::default() };
    let (mut log, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
    for i in 0..20 {
        append(&mut log, 2, i);
    }
    assert!(log.segments().len() > 3);
    let (reopened, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
    assert_eq!(reopened.next_offset(), 40);
    for offset in 0..40 {
        let bytes = reopened.read(offset, 1, reopened.end_position(), true).unwrap().read_to_vec().unwrap();
        let base = offsets_in(&bytes)[0];
        assert!(base == offset || base == offset - 1, "offset {offset} read batch {base}");
    }
}

#[test]
fn recovery_cuts_a_torn_tail_at_interesting_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append(&mut log, 2, 1);
    let kept = log.size_bytes();
    append(&mut log, 3, 2);
    let full = std::fs::read(log.segments()[0].path()).unwrap();
    drop(log);
    // Every byte is cut in tests/engine (in memory); on the real file
    // system, where each recovery fsyncs, the interesting points suffice:
    // inside the length prefix, the header, the records, and one byte short.
    let len = full.len() as u64;
    for cut in [kept, kept + 1, kept + 11, kept + 12, kept + 60, kept + 61, kept + 62, (kept + len) / 2, len - 1] {
        let seg = dir.path().join(crate::segment::segment_file_name(0));
        std::fs::write(&seg, &full[..cut as usize]).unwrap();
        let (log, report) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
        assert_eq!(log.next_offset(), 2, "cut at {cut}");
        assert_eq!(log.size_bytes(), kept);
        assert_eq!(report.truncated_bytes(), cut - kept);
        assert_eq!(std::fs::metadata(&seg).unwrap().len(), kept, "the file itself is truncated");
    }
}

#[test]
fn recovery_cuts_a_corrupt_batch_and_everything_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append(&mut log, 1, 1);
    let kept = log.size_bytes();
    append(&mut log, 1, 2);
    append(&mut log, 1, 3);
    let seg = log.segments()[0].path().to_path_buf();
    drop(log);
    let mut bytes = std::fs::read(&seg).unwrap();
    let flip = kept as usize + 70;
    bytes[flip] ^= 0x55;
    std::fs::write(&seg, &bytes).unwrap();
    let (mut log, report) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(log.next_offset(), 1);
    assert!(report.segments[0].truncation_reason.as_deref().unwrap().contains("CRC"), "{report:?}");
    assert_eq!(append(&mut log, 1, 4).base_offset, 1, "appends continue after the cut");
}

#[test]
fn unflushed_files_cover_segments_rolled_since_the_last_flush() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes_max: 500, ..LogConfig::default() };
    let (mut log, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
    let flushed = log.end_position();
    for i in 0..6 {
        append(&mut log, 2, i);
    }
    assert_eq!(log.unflushed_files(flushed).len(), log.segments().len());
    assert_eq!(log.unflushed_files(log.end_position()).len(), 1);
}

#[test]
fn finds_offsets_by_timestamp_and_the_max_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes_max: 600, ..LogConfig::default() };
    let (mut log, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
    // batch(n, tag) stamps records 1000, 1001, ...; make later batches later.
    let stamp = |n: usize, base: i64, log: &mut PartitionLog| {
        let records: Vec<NewRecord> = (0..n)
            .map(|i| NewRecord {
                key: None,
                value: Some(vec![0; 100]),
                headers: vec![],
                timestamp_ms: base + i as i64 * 10,
            })
            .collect();
        let b = encode_batch(&records, ProducerStamp::NONE);
        let headers = validate_batches(&b).unwrap().headers;
        log.append(&b, &headers, 0, 0).unwrap();
    };
    stamp(3, 1_000, &mut log); // offsets 0..3 at 1000, 1010, 1020
    stamp(3, 2_000, &mut log); // offsets 3..6 at 2000, 2010, 2020
    stamp(2, 1_500, &mut log); // offsets 6..8 at 1500, 1510
    assert!(log.segments().len() > 1, "the lookup must cross segments");
    let end = log.end_position();
    assert_eq!(log.offset_for_timestamp(0, end).unwrap(), Some((0, 1_000)));
    assert_eq!(log.offset_for_timestamp(1_011, end).unwrap(), Some((2, 1_020)));
    assert_eq!(log.offset_for_timestamp(1_021, end).unwrap(), Some((3, 2_000)));
    assert_eq!(log.offset_for_timestamp(2_015, end).unwrap(), Some((5, 2_020)));
    assert_eq!(log.offset_for_timestamp(2_021, end).unwrap(), None);
    assert_eq!(log.offset_of_max_timestamp(end).unwrap(), Some((5, 2_020)));
}

#[test]
fn index_files_hold_kafka_sized_entries_and_are_flushed_at_roll() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes_max: 2_000, index_interval_bytes: 300, ..LogConfig::default() };
    let (mut log, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
    while log.segments().len() < 2 {
        append(&mut log, 1, 7);
    }
    let old = &log.segments()[0];
    let index = std::fs::read(dir.path().join(crate::segment::index_file_name(0))).unwrap();
    let time = std::fs::read(dir.path().join(crate::segment::time_index_file_name(0))).unwrap();
    assert_eq!(index.len(), 8 * old.offset_index().len());
    assert_eq!(time.len(), 12 * old.time_index().len());
    assert!(old.offset_index().len() > 1);
    let second = &index[8..16];
    let entry = old.offset_index()[1];
    assert_eq!(second, [entry.relative_offset.to_be_bytes(), entry.position.to_be_bytes()].concat());
    assert_eq!(old.time_index().last().unwrap().timestamp_ms, old.max_timestamp_ms(), "final time entry at roll");
    let rp = log.recovery_point().unwrap();
    assert_eq!(rp.segment_base, log.segments()[1].base_offset());
}

#[test]
fn rolls_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_age_ms_max: 1_000, ..LogConfig::default() };
    let (mut log, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
    let b = batch(1, 1);
    let headers = validate_batches(&b).unwrap().headers;
    log.append(&b, &headers, 0, 500).unwrap();
    let b = batch(1, 2);
    log.append(&b, &headers, 0, 999).unwrap();
    assert_eq!(log.segments().len(), 1);
    let b = batch(1, 3);
    log.append(&b, &headers, 0, 1_000).unwrap();
    assert_eq!(log.segments().len(), 2);
}

#[test]
fn the_log_checks_sequences_against_what_it_appended() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    let stamp = ProducerStamp { producer_id: 9, producer_epoch: 1, base_sequence: 0 };
    let records = vec![NewRecord { key: None, value: Some(vec![1]), headers: vec![], timestamp_ms: 1 }; 3];
    let b = encode_batch(&records, stamp);
    let headers = validate_batches(&b).unwrap().headers;
    assert_eq!(log.check_sequence(&headers[0]), crate::SequenceCheck::Ok);
    let r = log.append(&b, &headers, 0, 0).unwrap();
    assert_eq!(
        log.check_sequence(&headers[0]),
        crate::SequenceCheck::Duplicate { first_offset: r.base_offset, last_offset: r.last_offset }
    );
}

fn txn_batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let records: Vec<NewRecord> =
        (0..n).map(|i| NewRecord { value: Some(vec![i as u8]), timestamp_ms: 1_000, ..Default::default() }).collect();
    let mut b = encode_batch(&records, ProducerStamp { producer_id: pid, producer_epoch: epoch, base_sequence: seq });
    let attributes = i16::from_be_bytes([b[21], b[22]]) | 0x10;
    b[21..23].copy_from_slice(&attributes.to_be_bytes());
    kafgres_record::rewrite_crc(&mut b);
    b
}

fn append_bytes(log: &mut PartitionLog, b: Vec<u8>) -> AppendResult {
    let headers = validate_batches(&b).unwrap().headers;
    log.append(&b, &headers, 0, 0).unwrap()
}

#[test]
fn markers_end_transactions_and_a_crash_rebuilds_them_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
        append(&mut log, 1, 1); // offset 0
        append_bytes(&mut log, txn_batch(7, 0, 0, 2)); // 1..2, to be aborted
        append_bytes(&mut log, txn_batch(8, 0, 0, 1)); // 3, to be committed
        assert_eq!(log.first_unstable_offset(), Some(1));
        let abort = log.append_marker(7, 0, TxnEnd::Abort, 0, 0, 0).unwrap().unwrap();
        assert_eq!(abort.base_offset, 4);
        assert_eq!(log.first_unstable_offset(), Some(3));
        append_bytes(&mut log, txn_batch(7, 0, 2, 1)); // 5: a new transaction of 7
        log.append_marker(8, 0, TxnEnd::Commit, 0, 0, 0).unwrap().unwrap(); // 6
        assert_eq!(log.first_unstable_offset(), Some(5));
        // A zombie's marker is refused.
        assert_eq!(
            log.append_marker(8, -1, TxnEnd::Commit, 0, 0, 0).unwrap().unwrap_err(),
            SequenceCheck::InvalidEpoch { current_epoch: 0 }
        );
        log.flush().unwrap();
        // Dropped without a checkpoint: the next open rebuilds from the log.
    }
    let (log, report) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert!(report.producer_batches_scanned > 0);
    assert_eq!(log.first_unstable_offset(), Some(5));
    let aborted = log.aborted_between(0, 100);
    assert_eq!(aborted.len(), 1);
    assert_eq!((aborted[0].producer_id, aborted[0].first_offset, aborted[0].last_offset), (7, 1, 4));
    // The marker batches are in the log where they were appended.
    let all = log.read(0, 1 << 20, log.end_position(), true).unwrap().read_to_vec().unwrap();
    assert_eq!(offsets_in(&all), vec![0, 1, 3, 4, 5, 6]);
}

/// Tail lookups answered from the recent batches kept in memory agree with
/// the index walk a reopened log does, for every offset and across a roll
/// (which frees the rolled segment's list).
#[test]
fn every_offset_is_found_from_memory_and_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { index_interval_bytes: 1024, ..LogConfig::default() };
    let (mut log, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
    let mut batches = Vec::new(); // (base offset, last offset)
    for i in 0..200 {
        if i == 100 {
            log.roll(0).unwrap();
        }
        let r = append(&mut log, 1 + i % 3, i as u8);
        batches.push((r.base_offset, r.last_offset));
    }
    assert_eq!(log.segments().len(), 2);
    let holding = |offset: i64| batches.iter().find(|(_, last)| *last >= offset).map(|(base, _)| *base);
    let positions = |log: &PartitionLog| -> Vec<u64> {
        (0..log.next_offset()).map(|o| log.position_at(o).unwrap().expect("in the log").byte_pos).collect()
    };
    let in_memory = positions(&log);
    for offset in 0..log.next_offset() {
        let bytes = log.read(offset, 1, log.end_position(), true).unwrap().read_to_vec().unwrap();
        assert_eq!(offsets_in(&bytes).first().copied(), holding(offset), "offset {offset}");
    }
    drop(log);
    let (log, _) = PartitionLog::open(dir.path(), config, 0).unwrap();
    assert_eq!(positions(&log), in_memory, "the walk from the index finds the same batches");
}

#[test]
fn an_append_whose_headers_do_not_describe_its_bytes_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    let mut two = batch(1, 1);
    two.extend(batch(2, 2));
    let headers = validate_batches(&two).unwrap().headers;
    for described in [&headers[..1], &headers[..0]] {
        let err = log.append(&two, described, 0, 0).expect_err("a batch no header describes");
        assert!(matches!(err, LogError::BadAppend(_)), "{err}");
    }
    let one = batch(1, 3);
    assert!(matches!(log.append(&one, &headers, 0, 0), Err(LogError::BadAppend(_))), "headers past the bytes");
    assert_eq!((log.next_offset(), log.size_bytes()), (0, 0), "nothing was written");
    assert_eq!(log.failure(), None, "a refused append leaves the log writable");
    assert_eq!(append(&mut log, 2, 4).base_offset, 0);
}
