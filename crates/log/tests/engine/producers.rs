//! Producer state rebuilt from the log: from snapshots, from scratch, and
//! after recovery cut the tail a snapshot described.

use kafgres_log::producer::{snapshot_file_name, SNAPSHOT_SUFFIX};
use kafgres_log::storage::memory::{CrashMode, MemStorage};
use kafgres_log::{PartitionLog, SequenceCheck, Storage};
use kafgres_record::build::ProducerStamp;
use kafgres_record::validate_batches;

use crate::common::*;

/// Appends a batch of `n` records from producer `pid` at `seq`.
fn produce(log: &mut PartitionLog, pid: i64, epoch: i16, seq: i32, n: usize) -> SequenceCheck {
    let values: Vec<Vec<u8>> = (0..n).map(|_| vec![pid as u8; 120]).collect();
    let bytes = batch_of(&values, 1_000, ProducerStamp { producer_id: pid, producer_epoch: epoch, base_sequence: seq });
    let headers = validate_batches(&bytes).unwrap().headers;
    let check = log.check_sequence(&headers[0]);
    if check == SequenceCheck::Ok {
        log.append(&bytes, &headers, 0, 0).unwrap();
    }
    check
}

fn snapshots(storage: &MemStorage, log: &PartitionLog) -> Vec<String> {
    let mut names: Vec<String> =
        storage.list_dir(log.dir()).unwrap().into_iter().filter(|n| n.ends_with(SNAPSHOT_SUFFIX)).collect();
    names.sort();
    names
}

#[test]
fn producer_state_survives_clean_reopens_and_crashes() {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    let mut seqs = [0i32; 4];
    for round in 0..30 {
        let pid = round % 4;
        assert_eq!(produce(&mut log, pid as i64, 0, seqs[pid], 2), SequenceCheck::Ok);
        seqs[pid] += 2;
    }
    assert!(log.segments().len() > 2);
    assert!(!snapshots(&storage, &log).is_empty(), "rolls write snapshots");
    assert!(snapshots(&storage, &log).len() <= 2, "old snapshots are pruned");
    let want = log.producer_state().clone();
    // A power loss: snapshot at the last roll plus the headers after it.
    log.flush().unwrap();
    let (crashed, report) = open(&storage.crash(CrashMode::DropUnsynced), small_config());
    assert_eq!(crashed.producer_state(), &want);
    assert!(report.producer_snapshot.is_some());
    // A clean close: the snapshot is at the log end, nothing to scan.
    log.checkpoint().unwrap();
    let (clean, report) = open(&storage.crash(CrashMode::DropUnsynced), small_config());
    assert_eq!(clean.producer_state(), &want);
    assert_eq!(report.producer_batches_scanned, 0);
    // Without any snapshot: rebuilt from every header.
    let bare = storage.crash(CrashMode::DropUnsynced);
    for name in snapshots(&bare, &clean) {
        bare.delete_file(&dir().join(name));
    }
    let (mut rebuilt, report) = open(&bare, small_config());
    assert_eq!(rebuilt.producer_state(), &want);
    assert_eq!(report.producer_snapshot, None);
    // The rebuilt state answers retries with their original offsets.
    let dup = produce(&mut rebuilt, 1, 0, seqs[1] - 2, 2);
    let last = rebuilt.producer_state().get(1).unwrap().batches.back().copied().unwrap();
    assert_eq!(dup, SequenceCheck::Duplicate { first_offset: last.first_offset, last_offset: last.last_offset });
    assert!(matches!(produce(&mut rebuilt, 1, 0, seqs[1] + 1, 1), SequenceCheck::OutOfOrder { .. }));
    assert_eq!(produce(&mut rebuilt, 1, 0, seqs[1], 1), SequenceCheck::Ok);
}

#[test]
fn a_snapshot_past_a_cut_tail_is_not_used() {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    produce(&mut log, 7, 0, 0, 1);
    log.checkpoint().unwrap();
    let image = storage.crash(CrashMode::DropUnsynced);
    produce(&mut log, 7, 0, 1, 1);
    log.checkpoint().unwrap();
    // A snapshot exists for offset 2, but the log image ends at 1 (as if
    // recovery had cut the second batch).
    let name = snapshot_file_name(2);
    image.write_file(&dir().join(&name), &storage.read_file(&dir().join(&name)).unwrap());
    let (reopened, _) = open(&image, small_config());
    assert_eq!(reopened.next_offset(), 1);
    assert_eq!(reopened.producer_state().get(7).unwrap().last_seq(), Some(0));
    assert!(image.read_file(&dir().join(&name)).is_none(), "the stale snapshot is removed");
}

#[test]
fn a_damaged_snapshot_falls_back_to_an_older_one_or_the_log() {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    for seq in 0..40 {
        produce(&mut log, 3, 0, seq, 1);
    }
    log.checkpoint().unwrap();
    let want = log.producer_state().clone();
    let image = storage.crash(CrashMode::DropUnsynced);
    let names = snapshots(&image, &log);
    let newest = dir().join(names.last().unwrap());
    let mut bytes = image.read_file(&newest).unwrap();
    bytes[10] ^= 1;
    image.write_file(&newest, &bytes);
    let (reopened, report) = open(&image, small_config());
    assert_eq!(reopened.producer_state(), &want);
    assert!(report.producer_batches_scanned > 0);
}

#[test]
fn delete_records_evicts_producers_whose_batches_are_gone() {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    produce(&mut log, 1, 0, 0, 1);
    produce(&mut log, 2, 0, 0, 1);
    log.delete_records(1).unwrap();
    assert!(log.producer_state().get(1).is_none());
    assert!(log.producer_state().get(2).is_some());
    log.checkpoint().unwrap();
    let (mut reopened, _) = open(&storage.crash(CrashMode::DropUnsynced), small_config());
    assert!(reopened.producer_state().get(1).is_none());
    assert_eq!(produce(&mut reopened, 1, 0, 17, 1), SequenceCheck::Ok, "unknown again: any sequence");
}
