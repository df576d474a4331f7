//! Retention by time and size, DeleteRecords, and deleting while reading.

use kafgres_log::checkpoint::LOG_START_FILE;
use kafgres_log::retention::DeleteReason;
use kafgres_log::segment::segment_file_name;
use kafgres_log::storage::memory::{CrashMode, MemStorage};
use kafgres_log::{LogError, PartitionLog, RetentionConfig};

use crate::common::*;

const FOREVER: RetentionConfig = RetentionConfig { retention_ms: -1, retention_bytes: -1 };

/// A log with `segments` segments, segment i holding records stamped 1000 * (i + 1).
fn log_with_segments(storage: &MemStorage, segments: usize) -> PartitionLog {
    let (mut log, _) = open(storage, small_config());
    let mut i = 0;
    loop {
        let ts = 1_000 * (log.segments().len() as i64);
        append(&mut log, 1, 400, i, ts);
        i += 1;
        if log.segments().len() == segments && log.segments().last().unwrap().size_bytes() > 0 {
            break;
        }
    }
    log
}

#[test]
fn time_retention_deletes_old_segments_but_never_the_active_one() {
    let storage = MemStorage::new();
    let mut log = log_with_segments(&storage, 4);
    let bases: Vec<i64> = log.segments().iter().map(|s| s.base_offset()).collect();
    // Segment i's newest record is 1000 * (i + 1) + small; at now = 3_500
    // with 1_000 ms retention, segments 0 and 1 have expired.
    let report = log.apply_retention(3_500, &RetentionConfig { retention_ms: 1_000, retention_bytes: -1 }).unwrap();
    assert_eq!(report.deleted.iter().map(|d| d.base_offset).collect::<Vec<_>>(), bases[..2]);
    assert!(report.deleted.iter().all(|d| d.reason == DeleteReason::Time));
    assert_eq!(log.log_start_offset(), bases[2]);
    assert!(storage.read_file(&dir().join(segment_file_name(bases[0]))).is_none(), "files unlinked");
    // Everything expired: still the active segment stays.
    let report = log.apply_retention(1_000_000, &RetentionConfig { retention_ms: 1, retention_bytes: -1 }).unwrap();
    assert_eq!(report.deleted.len(), 1);
    assert_eq!(log.segments().len(), 1);
    check_invariants(&log);
    assert!(matches!(log.read(0, 100, log.end_position(), true), Err(LogError::OffsetOutOfRange { .. })));
}

#[test]
fn size_retention_keeps_at_least_retention_bytes() {
    let storage = MemStorage::new();
    let mut log = log_with_segments(&storage, 5);
    let sizes: Vec<u64> = log.segments().iter().map(|s| s.size_bytes()).collect();
    let total: u64 = sizes.iter().sum();
    let limit = total - sizes[0] - sizes[1] / 2;
    let report = log.apply_retention(0, &RetentionConfig { retention_ms: -1, retention_bytes: limit as i64 }).unwrap();
    assert_eq!(report.deleted.len(), 1, "deleting the second segment would go below the limit");
    assert_eq!(report.deleted[0].reason, DeleteReason::Size);
    assert!(log.size_bytes() >= limit);
    assert!(log.apply_retention(0, &FOREVER).unwrap().deleted.is_empty());
}

#[test]
fn delete_records_moves_the_log_start_durably_and_drops_whole_segments_below_it() {
    let storage = MemStorage::new();
    let mut log = log_with_segments(&storage, 4);
    let third = log.segments()[2].base_offset();
    let target = third + 1;
    assert_eq!(log.delete_records(target).unwrap(), target);
    assert_eq!(log.segments()[0].base_offset(), third, "segments entirely below are gone");
    assert!(matches!(log.read(target - 1, 100, log.end_position(), true), Err(LogError::OffsetOutOfRange { .. })));
    // A read at the log start begins at the batch holding it, as in Kafka.
    assert!(!log.read(target, 100, log.end_position(), true).unwrap().read_to_vec().unwrap().is_empty());
    assert_eq!(log.delete_records(target - 1).unwrap(), target, "the log start never moves back");
    assert!(matches!(log.delete_records(log.next_offset() + 1), Err(LogError::OffsetOutOfRange { .. })));
    let (reopened, _) = open(&storage.crash(CrashMode::DropUnsynced), small_config());
    assert_eq!(reopened.log_start_offset(), target);
    assert_eq!(reopened.segments()[0].base_offset(), third);
    assert_eq!(read_all(&reopened).first().unwrap().header.base_offset, target);
    // ListOffsets by time never answers below the log start.
    let (offset, _) = reopened.offset_for_timestamp(0, reopened.end_position()).unwrap().unwrap();
    assert_eq!(offset, target);
}

#[test]
fn a_crash_after_the_log_start_checkpoint_but_before_the_unlinks_is_finished_at_open() {
    let storage = MemStorage::new();
    let mut log = log_with_segments(&storage, 4);
    let bases: Vec<i64> = log.segments().iter().map(|s| s.base_offset()).collect();
    let image = storage.crash(CrashMode::KeepUnsynced);
    log.delete_records(bases[2]).unwrap();
    // As if delete_records had written its checkpoint and crashed before unlinking.
    let path = dir().join(LOG_START_FILE);
    image.write_file(&path, &storage.read_file(&path).unwrap());
    let (log, report) = open(&image, small_config());
    assert_eq!(report.deleted_segments, bases[..2]);
    assert_eq!(log.log_start_offset(), bases[2]);
    assert!(image.read_file(&dir().join(segment_file_name(bases[0]))).is_none());
    check_invariants(&log);
}

#[test]
fn a_reader_holding_a_segment_keeps_reading_it_after_deletion() {
    // The in-memory storage and the real file system behave the same.
    let storage = MemStorage::new();
    let mut log = log_with_segments(&storage, 3);
    let slice = log.read(0, 1 << 20, log.end_position(), true).unwrap();
    let before = slice.read_to_vec().unwrap();
    log.apply_retention(i64::MAX / 2, &RetentionConfig { retention_ms: 0, retention_bytes: -1 }).unwrap();
    assert_eq!(log.log_start_offset(), log.segments()[0].base_offset());
    assert_eq!(slice.read_to_vec().unwrap(), before);

    let tmp = tempfile::tempdir().unwrap();
    let (mut real, _) = PartitionLog::open(tmp.path(), small_config(), 0).unwrap();
    while real.segments().len() < 3 {
        append(&mut real, 1, 400, 1, 1_000);
    }
    let slice = real.read(0, 1 << 20, real.end_position(), true).unwrap();
    let before = slice.read_to_vec().unwrap();
    let report = real.apply_retention(i64::MAX / 2, &RetentionConfig { retention_ms: 0, retention_bytes: -1 }).unwrap();
    assert_eq!(report.deleted.len(), 2);
    assert!(!tmp.path().join(segment_file_name(0)).exists());
    assert_eq!(slice.read_to_vec().unwrap(), before, "an unlinked file stays readable through its descriptor");
}
