//! The leader epoch history kept by a partition: grown by appends of a new
//! epoch (stored once per epoch, before the batch), refusing an older one,
//! following the log start, dropping what a crash took, and rebuilt from
//! batch headers only when its file is missing or damaged.

use std::sync::Arc;

use kafgres_log::epochs::LEADER_EPOCH_FILE;
use kafgres_log::storage::faulty::FaultyStorage;
use kafgres_log::storage::memory::{CrashMode, MemStorage};
use kafgres_log::{LogConfig, LogError, PartitionLog, RetentionConfig};
use kafgres_record::build::ProducerStamp;
use kafgres_record::BATCH_HEADER_BYTES;

use crate::common::*;

fn one(tag: u8) -> Vec<u8> {
    batch_of(&[vec![tag; 100]], 1_000, ProducerStamp::NONE)
}

/// 12 single-record batches: epochs 0 (offsets 0-3), 3 (4-7), 5 (8-11).
fn build(log: &mut PartitionLog) {
    for i in 0..12u8 {
        let epoch = [0, 3, 5][usize::from(i / 4)];
        append_at_epoch(log, &one(i), epoch).unwrap();
    }
}

#[test]
fn appends_of_a_new_epoch_grow_the_history_and_an_older_epoch_is_refused() {
    let mem = MemStorage::new();
    let faulty = FaultyStorage::new(Arc::new(mem.clone()));
    // One segment: a roll's checkpoints would rename files too.
    let config = LogConfig { segment_bytes_max: 1 << 20, ..small_config() };
    let (mut log, _) = open_on(Arc::new(faulty.clone()), config);
    assert_eq!((log.latest_epoch(), log.end_offset_for_epoch(0)), (None, (-1, -1)));
    let mut renames = Vec::new();
    for i in 0..12u8 {
        let before = faulty.faults().namespace_ops();
        let epoch = [0, 3, 5][usize::from(i / 4)];
        append_at_epoch(&mut log, &one(i), epoch).unwrap();
        renames.push(faulty.faults().namespace_ops() - before);
    }
    assert_eq!(epochs_of(&log), vec![(0, 0), (3, 4), (5, 8)]);
    // One atomic replace (a rename) per new epoch, none for the others.
    assert_eq!(renames, vec![1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(log.latest_epoch(), Some(5));
    assert_eq!(
        (log.epoch_of(0), log.epoch_of(7), log.epoch_of(11), log.epoch_of(12)),
        (Some(0), Some(3), Some(5), None)
    );
    assert_eq!(log.end_offset_for_epoch(5), (5, 12));
    assert_eq!(log.end_offset_for_epoch(4), (3, 8));
    assert_eq!(log.end_offset_for_epoch(1), (0, 4));
    let before = files(&mem);
    let refused = append_at_epoch(&mut log, &one(99), 4);
    assert!(matches!(refused, Err(LogError::StaleLeaderEpoch { epoch: 4, latest: 5, offset: 12 })), "{refused:?}");
    assert_eq!(files(&mem), before, "nothing written");
    assert!(log.failure().is_none(), "a refusal is not a failure");
    // Durable before the append returned: a power loss right after keeps it.
    let (crashed, _) = open(&mem.crash(CrashMode::KeepUnsynced), small_config());
    assert_eq!(epochs_of(&crashed), vec![(0, 0), (3, 4), (5, 8)]);
    drop(crashed);
    log.checkpoint().unwrap();
    let (reopened, report) = open(&mem, small_config());
    assert_eq!(epochs_of(&reopened), vec![(0, 0), (3, 4), (5, 8)]);
    assert!(!report.leader_epochs_rebuilt);
}

#[test]
fn an_epoch_whose_batch_was_lost_stays_at_the_log_end_and_entries_past_it_go() {
    let mem = MemStorage::new();
    let faulty = FaultyStorage::new(Arc::new(mem.clone()));
    let (mut log, _) = open_on(Arc::new(faulty.clone()), small_config());
    append_at_epoch(&mut log, &one(1), 0).unwrap();
    log.flush().unwrap();
    // The history is stored, then the batch's write fails (and is cut).
    faulty.faults().fail_write(2); // the history's .tmp, then the segment
    assert!(append_at_epoch(&mut log, &one(2), 7).is_err());
    assert_eq!(log.next_offset(), 1);
    assert_eq!(epochs_of(&log), vec![(0, 0), (7, 1)], "stored before the write");
    assert_eq!(log.end_offset_for_epoch(0), (0, 1), "epoch 0 still ends at the log end");
    let (reopened, _) = open(&mem.crash(CrashMode::DropUnsynced), small_config());
    assert_eq!(epochs_of(&reopened), vec![(0, 0), (7, 1)], "an epoch that began and wrote nothing");
    drop(reopened);
    // A later epoch at the same offset replaces it.
    faulty.faults().clear();
    append_at_epoch(&mut log, &one(3), 8).unwrap();
    assert_eq!(epochs_of(&log), vec![(0, 0), (8, 1)]);
    // Entries past the log end (their batches cut by recovery) go at open.
    log.checkpoint().unwrap();
    append_at_epoch(&mut log, &one(4), 9).unwrap();
    let (reopened, _) = open(&mem.crash(CrashMode::DropUnsynced), small_config());
    assert_eq!(reopened.next_offset(), 2);
    assert_eq!(epochs_of(&reopened), vec![(0, 0), (8, 1), (9, 2)], "at the end: kept");
    let image = mem.crash(CrashMode::DropUnsynced);
    let history = "kafgres-checkpoint 1\nepoch 0 start 0\nepoch 8 start 1\nepoch 9 start 3\n";
    let crc = crc32c(history.as_bytes());
    image.write_file(&dir().join(LEADER_EPOCH_FILE), format!("{history}crc32c {crc:08x}\n").as_bytes());
    let (reopened, _) = open(&image, small_config());
    assert_eq!(epochs_of(&reopened), vec![(0, 0), (8, 1)], "past the end: dropped");
}

/// CRC-32C, to craft a checkpoint file by hand.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

#[test]
fn a_missing_or_damaged_file_is_rebuilt_from_the_batch_headers_only() {
    let mem = MemStorage::new();
    let (mut log, _) = open(&mem, small_config());
    build(&mut log);
    log.checkpoint().unwrap();
    let batches = read_all(&log).len() as u64;
    let path = dir().join(LEADER_EPOCH_FILE);
    let stored = mem.read_file(&path).unwrap();
    let clean = mem.crash(CrashMode::DropUnsynced);
    let (_, report) = open(&clean, small_config());
    assert!(!report.leader_epochs_rebuilt);
    let clean_reads = clean.bytes_read();
    let mut damaged = stored.clone();
    damaged[25] ^= 0x04;
    for image in [Some(damaged), Some(b"kafgres-checkpoint 1\ncrc32c 00000000\n".to_vec()), None] {
        let crashed = mem.crash(CrashMode::DropUnsynced);
        match &image {
            Some(bytes) => crashed.write_file(&path, bytes),
            None => crashed.delete_file(&path),
        }
        let (reopened, report) = open(&crashed, small_config());
        assert!(report.leader_epochs_rebuilt, "{image:?}");
        assert_eq!(epochs_of(&reopened), vec![(0, 0), (3, 4), (5, 8)]);
        // Headers only: beyond a clean open's reads, one header per batch
        // and one per segment (finding where the walk starts), and the file.
        let extra = crashed.bytes_read() - clean_reads;
        let headers = (batches + reopened.segments().len() as u64) * BATCH_HEADER_BYTES as u64;
        let bound = headers + image.as_ref().map_or(0, |b| b.len() as u64);
        assert!(extra <= bound, "{extra} bytes read for {batches} batches");
        assert_eq!(crashed.read_file(&path).unwrap(), stored, "rewritten whole");
    }
}

#[test]
fn recovery_adds_the_epochs_of_the_batches_it_scans() {
    let mem = MemStorage::new();
    let (mut log, _) = open(&mem, small_config());
    append_at_epoch(&mut log, &one(1), 0).unwrap();
    log.checkpoint().unwrap();
    let path = dir().join(LEADER_EPOCH_FILE);
    let old = mem.read_file(&path).unwrap();
    append_at_epoch(&mut log, &one(2), 2).unwrap();
    append_at_epoch(&mut log, &one(3), 2).unwrap();
    log.flush().unwrap();
    // A history from before epoch 2 (as an older broker would have left it).
    let image = mem.crash(CrashMode::DropUnsynced);
    image.write_file(&path, &old);
    let (reopened, report) = open(&image, small_config());
    assert!(!report.leader_epochs_rebuilt);
    assert!(report.scanned_bytes() > 0);
    assert_eq!(epochs_of(&reopened), vec![(0, 0), (2, 1)]);
    assert_ne!(image.read_file(&path).unwrap(), old, "stored at open");
}

#[test]
fn the_first_entry_follows_the_log_start() {
    let mem = MemStorage::new();
    let (mut log, _) = open(&mem, small_config());
    build(&mut log);
    log.delete_records(2).unwrap();
    assert_eq!(epochs_of(&log), vec![(0, 2), (3, 4), (5, 8)]);
    log.delete_records(6).unwrap();
    assert_eq!(epochs_of(&log), vec![(3, 6), (5, 8)]);
    assert_eq!(log.end_offset_for_epoch(0), (0, 6), "an epoch below the first entry ends where the history starts");
    let (reopened, _) = open(&mem.crash(CrashMode::DropUnsynced), small_config());
    assert_eq!(epochs_of(&reopened), vec![(3, 6), (5, 8)]);
    drop(reopened);
    let removed = log.apply_retention(0, &RetentionConfig { retention_ms: -1, retention_bytes: 0 }).unwrap();
    assert!(!removed.deleted.is_empty());
    let start = log.log_start_offset();
    assert_eq!(epochs_of(&log), epochs_implied_by(&read_all(&log), start));
    assert_eq!(log.leader_epochs().entries()[0].start_offset, start);
    log.flush().unwrap();
    let image = mem.crash(CrashMode::DropUnsynced);
    let (reopened, _) = open(&image, small_config());
    assert_eq!(epochs_of(&reopened), epochs_of(&log));
}
