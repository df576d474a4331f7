//! The rows of the recovery decision table, one test each.

use kafgres_log::checkpoint::RECOVERY_POINT_FILE;
use kafgres_log::recovery::SegmentOpen;
use kafgres_log::segment::{index_file_name, segment_file_name, time_index_file_name};
use kafgres_log::storage::memory::{CrashMode, MemStorage};
use kafgres_log::LogConfig;

use crate::common::*;

/// A log of several segments, closed cleanly.
fn closed_log(storage: &MemStorage) -> Vec<Stored> {
    let (mut log, _) = open(storage, small_config());
    for i in 0..40 {
        append(&mut log, 1 + i % 3, 90, i as u8, 1_000 + i as i64 * 10);
    }
    assert!(log.segments().len() >= 4);
    log.checkpoint().unwrap();
    read_all(&log)
}

#[test]
fn a_cleanly_closed_log_opens_without_reading_segment_data() {
    let storage = MemStorage::new();
    let before = closed_log(&storage);
    let reopened = storage.crash(CrashMode::DropUnsynced);
    let (log, report) = open(&reopened, small_config());
    assert_eq!(report.scanned_bytes(), 0);
    assert!(report.segments.iter().all(|s| s.how == SegmentOpen::Trusted), "{report:?}");
    assert!(report.recovery_point.is_some());
    assert_eq!(report.producer_batches_scanned, 0);
    let index_bytes: u64 =
        log.segments().iter().map(|s| 20 * (s.offset_index().len() + s.time_index().len()) as u64).sum();
    assert!(reopened.bytes_read() < 1_000 + index_bytes, "read {} bytes", reopened.bytes_read());
    assert_eq!(read_all(&log), before);
    check_invariants(&log);
}

#[test]
fn after_a_crash_only_the_tail_past_the_recovery_point_is_scanned() {
    let storage = MemStorage::new();
    let before = closed_log(&storage);
    let (mut log, _) = open(&storage, small_config());
    let tail_start = log.end_position();
    append(&mut log, 2, 50, 7, 5_000);
    append(&mut log, 1, 50, 8, 5_001);
    log.flush().unwrap();
    let crashed = storage.crash(CrashMode::DropUnsynced);
    let (log, report) = open(&crashed, small_config());
    let tail = log.end_position().byte_pos - tail_start.byte_pos;
    assert_eq!(report.scanned_bytes(), tail, "{report:?}");
    assert_eq!(report.segments.last().unwrap().how, SegmentOpen::Scanned { from_byte: tail_start.byte_pos });
    assert_eq!(read_all(&log).len(), before.len() + 2);
    check_invariants(&log);
    // Recovery wrote a new recovery point: the next open scans nothing.
    let (_, again) = open(&crashed.crash(CrashMode::DropUnsynced), small_config());
    assert_eq!(again.scanned_bytes(), 0);
}

#[test]
fn a_roll_moves_the_recovery_point_to_the_new_segment() {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    while log.segments().len() < 3 {
        append(&mut log, 1, 200, 1, 1_000);
    }
    let rp = log.recovery_point().unwrap();
    let third = log.segments()[2].base_offset();
    assert_eq!((rp.segment_base, rp.byte_pos, rp.offset), (third, 0, third));
    // Not flushed since the roll: a power loss keeps exactly the rolled segments.
    let (log, report) = open(&storage.crash(CrashMode::DropUnsynced), small_config());
    assert_eq!(report.scanned_bytes(), 0);
    assert_eq!(log.next_offset(), rp.offset);
    check_invariants(&log);
}

#[test]
fn damaged_index_files_of_flushed_segments_are_rebuilt() {
    let storage = MemStorage::new();
    let before = closed_log(&storage);
    let index = dir().join(index_file_name(0));
    let bytes = storage.read_file(&index).unwrap();
    assert!(bytes.len() >= 16);
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("torn entry", bytes[..bytes.len() - 3].to_vec()),
        ("entries out of order", [&bytes[8..16], &bytes[..8], &bytes[16..]].concat()),
        ("past the end", [&bytes[..], &[0, 0, 0x7f, 0, 0, 0x7f, 0, 0][..]].concat()),
        ("empty", Vec::new()),
    ];
    cases.push(("garbage", vec![0xAB; bytes.len()]));
    for (what, damaged) in cases {
        let crashed = storage.crash(CrashMode::DropUnsynced);
        crashed.write_file(&index, &damaged);
        let (log, report) = open(&crashed, small_config());
        assert!(matches!(report.segments[0].how, SegmentOpen::IndexRebuilt { .. }), "{what}: {report:?}");
        assert_eq!(read_all(&log), before, "{what}");
        assert_eq!(crashed.read_file(&index).unwrap(), bytes, "{what}: the rebuilt index equals the original");
        check_invariants(&log);
    }
    let crashed = storage.crash(CrashMode::DropUnsynced);
    let expected_max = open(&crashed, small_config()).0.segments()[0].max_timestamp_ms();
    crashed.delete_file(&dir().join(time_index_file_name(0)));
    let (log, report) = open(&crashed, small_config());
    assert!(matches!(report.segments[0].how, SegmentOpen::IndexRebuilt { .. }), "missing time index");
    assert_eq!(log.segments()[0].max_timestamp_ms(), expected_max);
    assert!(expected_max > 0);
}

#[test]
fn a_damaged_or_inconsistent_recovery_point_means_a_full_scan() {
    let storage = MemStorage::new();
    let before = closed_log(&storage);
    let cp = dir().join(RECOVERY_POINT_FILE);
    let text = String::from_utf8(storage.read_file(&cp).unwrap()).unwrap();
    let edited = text.replace("segment_base ", "segment_base 9");
    for damaged in [text.as_bytes()[..text.len() / 2].to_vec(), edited.into_bytes(), b"junk".to_vec()] {
        let crashed = storage.crash(CrashMode::DropUnsynced);
        crashed.write_file(&cp, &damaged);
        let (log, report) = open(&crashed, small_config());
        assert_eq!(report.recovery_point, None);
        assert_eq!(report.scanned_bytes(), log.size_bytes());
        assert_eq!(read_all(&log), before);
    }
    // A recovery point past the end of its segment (the disk lost flushed data).
    let crashed = storage.crash(CrashMode::DropUnsynced);
    let (log, _) = open(&crashed, small_config());
    let last = dir().join(segment_file_name(log.segments().last().unwrap().base_offset()));
    let data = crashed.read_file(&last).unwrap();
    crashed.write_file(&last, &data[..data.len() - 1]);
    let (log, report) = open(&crashed, small_config());
    assert!(report.recovery_point_ignored.is_some());
    assert_eq!(read_all(&log).len(), before.len() - 1);
}

#[test]
fn a_cut_in_a_scanned_segment_deletes_the_segments_after_it() {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    while log.segments().len() < 4 {
        append(&mut log, 1, 200, 1, 1_000);
    }
    let second_base = log.segments()[1].base_offset();
    drop(log);
    // Without a recovery point every segment is scanned, and a corrupt byte
    // in the second batch of the second segment makes the third and fourth
    // unreachable.
    let crashed = storage.crash(CrashMode::KeepUnsynced);
    crashed.delete_file(&dir().join(RECOVERY_POINT_FILE));
    let second = dir().join(segment_file_name(second_base));
    let mut data = crashed.read_file(&second).unwrap();
    let first_batch = kafgres_record::peek_offset_and_size(&data).unwrap().1;
    data[first_batch + 40] ^= 0xFF;
    crashed.write_file(&second, &data);
    let (log, report) = open(&crashed, small_config());
    assert_eq!(log.segments().len(), 2);
    assert_eq!(report.deleted_segments.len(), 2);
    assert_eq!(log.next_offset(), second_base + 1);
    check_invariants(&log);
}

#[test]
fn a_fresh_log_writes_no_checkpoint_until_it_rolls_or_closes() {
    let storage = MemStorage::new();
    let (mut log, report) = open(&storage, LogConfig::default());
    assert!(report.segments.is_empty());
    assert!(storage.read_file(&dir().join(RECOVERY_POINT_FILE)).is_none());
    append(&mut log, 1, 10, 1, 1);
    log.checkpoint().unwrap();
    assert!(storage.read_file(&dir().join(RECOVERY_POINT_FILE)).is_some());
}
