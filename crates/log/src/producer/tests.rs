use super::*;

fn header(pid: i64, epoch: i16, seq: i32, records: i32, base_offset: i64) -> BatchHeader {
    BatchHeader {
        base_offset,
        batch_length: 100,
        partition_leader_epoch: 0,
        magic: 2,
        crc: 0,
        attributes: 0,
        last_offset_delta: records - 1,
        base_timestamp: 1_000,
        max_timestamp: 1_000 + base_offset,
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: seq,
        records_count: records,
    }
}

#[test]
fn a_new_producer_may_start_anywhere_then_must_follow_on() {
    let mut s = ProducerStateMap::default();
    assert_eq!(s.check_sequence(&header(7, 0, 42, 3, 0)), SequenceCheck::Ok);
    s.record(&header(7, 0, 42, 3, 0));
    assert_eq!(s.check_sequence(&header(7, 0, 45, 1, 3)), SequenceCheck::Ok);
    assert_eq!(
        s.check_sequence(&header(7, 0, 46, 1, 3)),
        SequenceCheck::OutOfOrder { expected_seq: 45, received_seq: 46 }
    );
    assert_eq!(s.check_sequence(&header(-1, -1, -1, 1, 3)), SequenceCheck::Ok, "not idempotent");
}

#[test]
fn a_retry_of_one_of_the_last_five_batches_is_a_duplicate_with_its_offsets() {
    let mut s = ProducerStateMap::default();
    for i in 0..7 {
        s.record(&header(1, 0, i * 2, 2, 100 + i64::from(i) * 2));
    }
    assert_eq!(s.get(1).unwrap().batches.len(), PRODUCER_BATCHES_KEPT);
    assert_eq!(
        s.check_sequence(&header(1, 0, 12, 2, 0)),
        SequenceCheck::Duplicate { first_offset: 112, last_offset: 113 }
    );
    assert_eq!(
        s.check_sequence(&header(1, 0, 4, 2, 0)),
        SequenceCheck::Duplicate { first_offset: 104, last_offset: 105 }
    );
    // Older than the five kept: neither a known duplicate nor in sequence.
    assert!(matches!(s.check_sequence(&header(1, 0, 2, 2, 0)), SequenceCheck::OutOfOrder { .. }));
    // Same first sequence, different length: not the same batch.
    assert!(matches!(s.check_sequence(&header(1, 0, 12, 1, 0)), SequenceCheck::OutOfOrder { .. }));
}

#[test]
fn epochs_fence_old_producers_and_restart_sequences() {
    let mut s = ProducerStateMap::default();
    s.record(&header(1, 3, 0, 5, 0));
    assert_eq!(s.check_sequence(&header(1, 2, 5, 1, 0)), SequenceCheck::InvalidEpoch { current_epoch: 3 });
    assert_eq!(
        s.check_sequence(&header(1, 4, 5, 1, 0)),
        SequenceCheck::OutOfOrder { expected_seq: 0, received_seq: 5 }
    );
    assert_eq!(s.check_sequence(&header(1, 4, 0, 1, 0)), SequenceCheck::Ok);
    s.record(&header(1, 4, 0, 1, 5));
    let e = s.get(1).unwrap();
    assert_eq!((e.epoch, e.batches.len()), (4, 1), "a new epoch forgets the old batches");
}

#[test]
fn sequences_wrap_at_i32_max() {
    assert_eq!(last_sequence(i32::MAX - 1, 3), 1);
    let mut s = ProducerStateMap::default();
    s.record(&header(1, 0, i32::MAX - 1, 2, 0));
    assert_eq!(s.get(1).unwrap().last_seq(), Some(i32::MAX));
    assert_eq!(s.check_sequence(&header(1, 0, 0, 1, 2)), SequenceCheck::Ok);
}

#[test]
fn eviction_drops_batches_and_producers_below_the_log_start() {
    let mut s = ProducerStateMap::default();
    s.record(&header(1, 0, 0, 2, 0));
    s.record(&header(2, 0, 0, 2, 2));
    s.record(&header(2, 0, 2, 2, 4));
    s.evict_below(4);
    assert!(s.get(1).is_none());
    assert_eq!(s.get(2).unwrap().batches.len(), 1);
}

#[test]
fn snapshots_round_trip_and_damage_is_detected() {
    let mut s = ProducerStateMap::default();
    for pid in 0..4 {
        for i in 0..(pid + 1) {
            s.record(&header(pid as i64, pid as i16, i * 3, 3, 10 * i64::from(pid) + i64::from(i)));
        }
    }
    let bytes = s.encode_snapshot(99);
    assert_eq!(ProducerStateMap::decode_snapshot(&bytes), Ok((99, s.clone())));
    for cut in 0..bytes.len() {
        assert!(ProducerStateMap::decode_snapshot(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut flipped = bytes.clone();
    flipped[30] ^= 0x10;
    assert!(ProducerStateMap::decode_snapshot(&flipped).is_err());
}

#[test]
fn producers_idle_past_the_expiration_are_forgotten_and_may_start_afresh() {
    let mut s = ProducerStateMap::default();
    s.record_at(&header(1, 0, 0, 1, 0), 1_000);
    // Producer 2's batch claims an ancient timestamp (replayed events): only
    // when it appended counts.
    let mut old = header(2, 0, 0, 1, 5);
    old.max_timestamp = 1;
    s.record_at(&old, 6_000);
    assert_eq!(s.expire_idle(10_000, 10_000), 0, "both appended within the window");
    assert_eq!(s.expire_idle(10_500, 5_000), 1, "producer 1 last appended at 1_000");
    assert!(s.get(1).is_none());
    assert!(s.get(2).is_some());
    // Back after expiry: any sequence may start it again, as for a new producer.
    assert_eq!(s.check_sequence(&header(1, 0, 77, 1, 6)), SequenceCheck::Ok);
    // The snapshot no longer carries it; state read back counts as seen when
    // it is loaded, so a restart never expires anyone at once.
    let (_, mut decoded) = ProducerStateMap::decode_snapshot(&s.encode_snapshot(6)).expect("decodes");
    assert_eq!(decoded.len(), 1);
    decoded.mark_all_seen(50_000);
    assert_eq!(decoded.expire_idle(50_001, 5_000), 0);
}

fn txn(pid: i64, epoch: i16, seq: i32, records: i32, base_offset: i64) -> BatchHeader {
    BatchHeader { attributes: 0x10, ..header(pid, epoch, seq, records, base_offset) }
}

fn marker(pid: i64, epoch: i16, offset: i64) -> BatchHeader {
    BatchHeader { attributes: 0x30, base_sequence: -1, ..header(pid, epoch, -1, 1, offset) }
}

#[test]
fn open_transactions_hold_back_the_first_unstable_offset() {
    let mut s = ProducerStateMap::default();
    s.record(&header(1, 0, 0, 2, 0)); // idempotent, not transactional
    assert_eq!(s.first_unstable_offset(), None);
    s.record(&txn(2, 0, 0, 2, 2));
    s.record(&txn(3, 0, 0, 1, 4));
    s.record(&txn(2, 0, 2, 1, 5)); // same transaction: its first offset stays
    assert_eq!(s.first_unstable_offset(), Some(2));
    assert_eq!(s.get(2).unwrap().open_txn_first_offset, Some(2));
    s.record_marker(&marker(2, 0, 6), TxnEnd::Commit, 0);
    assert_eq!(s.first_unstable_offset(), Some(4));
    s.record_marker(&marker(3, 0, 7), TxnEnd::Abort, 0);
    assert_eq!(s.first_unstable_offset(), None);
    let aborted: Vec<AbortedTxn> = s.aborted().copied().collect();
    assert_eq!(aborted, vec![AbortedTxn { producer_id: 3, first_offset: 4, last_offset: 7, last_stable_offset: 8 }]);
    // A marker for a producer without an open transaction changes nothing else.
    s.record_marker(&marker(3, 0, 8), TxnEnd::Abort, 0);
    assert_eq!(s.aborted().count(), 1);
}

#[test]
fn aborted_transactions_are_found_by_the_range_they_overlap() {
    let mut s = ProducerStateMap::default();
    for (pid, first, last) in [(1, 0, 3), (2, 5, 9), (3, 10, 12)] {
        s.record(&txn(pid, 0, 0, 1, first));
        s.record_marker(&marker(pid, 0, last), TxnEnd::Abort, 0);
    }
    let ids = |v: Vec<AbortedTxn>| v.iter().map(|a| a.producer_id).collect::<Vec<_>>();
    assert_eq!(ids(s.aborted_between(0, 100)), vec![1, 2, 3]);
    assert_eq!(ids(s.aborted_between(4, 10)), vec![2]);
    assert_eq!(ids(s.aborted_between(9, 11)), vec![2, 3]);
    assert_eq!(ids(s.aborted_between(13, 20)), Vec::<i64>::new());
    s.evict_below(10);
    assert_eq!(ids(s.aborted_between(0, 100)), vec![3]);
}

#[test]
fn transactional_rules_for_data_and_markers() {
    let mut s = ProducerStateMap::default();
    s.record(&txn(5, 1, 0, 1, 0));
    // A plain batch of the same producer while its transaction is open.
    assert_eq!(s.check_sequence(&header(5, 1, 1, 1, 1)), SequenceCheck::InvalidTxnState);
    // A zombie's marker.
    assert_eq!(s.check_sequence(&marker(5, 0, 1)), SequenceCheck::InvalidEpoch { current_epoch: 1 });
    assert_eq!(s.check_sequence(&marker(5, 1, 1)), SequenceCheck::Ok);
    // A fencing marker with a bumped epoch ends the transaction.
    s.record_marker(&marker(5, 2, 1), TxnEnd::Abort, 0);
    assert_eq!((s.get(5).unwrap().epoch, s.first_unstable_offset()), (2, None));
    assert_eq!(s.check_sequence(&txn(5, 1, 1, 1, 2)), SequenceCheck::InvalidEpoch { current_epoch: 2 });
}

#[test]
fn transactions_survive_a_snapshot_and_expiry_spares_open_ones() {
    let mut s = ProducerStateMap::default();
    s.record_at(&txn(1, 0, 0, 1, 0), 0);
    s.record_marker(&marker(1, 0, 1), TxnEnd::Abort, 0);
    s.record_at(&txn(2, 0, 0, 1, 2), 0);
    let (at, back) = ProducerStateMap::decode_snapshot(&s.encode_snapshot(3)).unwrap();
    assert_eq!(at, 3);
    assert_eq!(back.first_unstable_offset(), Some(2));
    assert_eq!(back.aborted().copied().collect::<Vec<_>>(), s.aborted().copied().collect::<Vec<_>>());
    let mut expiring = back.clone();
    expiring.expire_idle(1_000_000, 10);
    assert!(expiring.get(2).is_some(), "an open transaction keeps its producer");
    assert!(expiring.get(1).is_none());
}

#[test]
fn version_1_snapshots_are_still_read() {
    let mut s = ProducerStateMap::default();
    s.record(&header(9, 0, 0, 1, 0));
    let mut v1 = s.encode_snapshot(1);
    // Rewrite as version 1: drop the open-transaction field and the aborted count.
    v1.truncate(v1.len() - 4); // crc
    v1.truncate(v1.len() - 4); // aborted count
    v1[4..6].copy_from_slice(&1u16.to_be_bytes());
    let producer_at = 4 + 2 + 8 + 4 + 8 + 2;
    v1.drain(producer_at..producer_at + 8);
    let crc = crate::checkpoint::crc32c(&v1);
    v1.extend_from_slice(&crc.to_be_bytes());
    let (_, back) = ProducerStateMap::decode_snapshot(&v1).unwrap();
    assert_eq!(back.get(9).unwrap().batches.len(), 1);
    assert_eq!(back.first_unstable_offset(), None);
}
