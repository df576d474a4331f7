//! Blocks reserved ahead of the appends (`LogConfig::reserve_ahead_bytes`):
//! only a segment that already holds that much asks, the reservations
//! follow its end without gaps or overlaps and never pass where it rolls, a
//! roll gives back what lies past the end, and a file system that refuses
//! changes nothing that is read or recovered.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use kafgres_log::storage::faulty::FaultyStorage;
use kafgres_log::storage::memory::{CrashMode, MemStorage};
use kafgres_log::{FileStorage, LogConfig, PartitionLog};
use kafgres_record::build::ProducerStamp;

use crate::common::*;

const MIB: u64 = 1 << 20;

/// Segments roll at 20 MiB; reservations start at 4 MiB.
fn config() -> LogConfig {
    LogConfig { segment_bytes_max: 20 * MIB, reserve_ahead_bytes: 4 * MIB, ..LogConfig::default() }
}

/// One batch of one record of `len` bytes.
fn append_value(log: &mut PartitionLog, len: usize, tag: u8) {
    append_batch(log, batch_of(&[vec![tag; len]], 1_000, ProducerStamp::NONE));
}

/// Appends batches of about 512 KiB until the log ends at `bytes` or past it.
fn fill_to(log: &mut PartitionLog, bytes: u64) {
    let mut tag = 0u8;
    while log.end_position().byte_pos < bytes {
        append_value(log, 512 << 10, tag);
        tag = tag.wrapping_add(1);
    }
}

#[test]
fn a_segment_below_the_threshold_reserves_nothing() {
    let faulty = FaultyStorage::new(Arc::new(MemStorage::new()));
    let (mut log, _) = open_on(Arc::new(faulty.clone()), config());
    while log.end_position().byte_pos < 4 * MIB - (600 << 10) {
        append_value(&mut log, 100 << 10, 1);
    }
    assert_eq!(faulty.faults().reservations(), vec![]);
}

#[test]
fn reservations_follow_the_end_without_gaps_and_stop_where_the_segment_rolls() {
    let faulty = FaultyStorage::new(Arc::new(MemStorage::new()));
    let (mut log, _) = open_on(Arc::new(faulty.clone()), config());
    // Into the third segment.
    while log.segments().len() < 3 {
        append_value(&mut log, 512 << 10, 2);
    }
    let calls = faulty.faults().reservations();
    // Per segment: positions rise from a start at or past 4 MiB; a new
    // segment shows as a position going back.
    let mut per_segment: Vec<Vec<(u64, u64)>> = Vec::new();
    for (i, &(position, len)) in calls.iter().enumerate() {
        if i == 0 || position < calls[i - 1].0 {
            per_segment.push(Vec::new());
        }
        per_segment.last_mut().unwrap().push((position, len));
    }
    assert_eq!(per_segment.len(), 2, "the two full segments reserved, the new one not yet: {calls:?}");
    for ranges in &per_segment {
        assert!(ranges[0].0 >= 4 * MIB, "{ranges:?}");
        for pair in ranges.windows(2) {
            assert_eq!(pair[0].0 + pair[0].1, pair[1].0, "contiguous: {ranges:?}");
        }
        let (last, len) = *ranges.last().unwrap();
        assert!(last + len <= 20 * MIB, "never past the roll: {ranges:?}");
        // At most one reservation per 4 MiB of appends.
        assert!(ranges.len() <= 5, "{ranges:?}");
    }
    check_invariants(&log);
}

#[test]
fn a_refused_reservation_stops_the_asking_and_every_append_is_still_written() {
    let mem = MemStorage::new();
    let faulty = FaultyStorage::new(Arc::new(mem.clone()));
    faulty.faults().refuse_reservations();
    let (mut log, _) = open_on(Arc::new(faulty.clone()), config());
    fill_to(&mut log, 12 * MIB);
    assert_eq!(faulty.faults().reservations().len(), 1, "asked once, then never again for this segment");
    let end = log.end_position().offset;
    log.flush().unwrap();
    let (recovered, _) = open(&mem.crash(CrashMode::DropUnsynced), config());
    assert_eq!(recovered.end_position().offset, end);
    assert_eq!(read_all(&recovered).len() as i64, end);
}

#[test]
fn after_a_failed_append_the_reservation_resumes_at_the_end() {
    let faulty = FaultyStorage::new(Arc::new(MemStorage::new()));
    let (mut log, _) = open_on(Arc::new(faulty.clone()), config());
    fill_to(&mut log, 5 * MIB);
    let reserved = faulty.faults().reservations();
    assert_eq!(reserved.len(), 1);
    let end_before = log.end_position().byte_pos;
    faulty.faults().fail_write(1);
    let bytes = batch_of(&[vec![7u8; 512 << 10]], 1_000, ProducerStamp::NONE);
    let headers = kafgres_record::validate_batches(&bytes).unwrap().headers;
    assert!(log.append(&bytes, &headers, 0, 0).is_err());
    assert_eq!(log.end_position().byte_pos, end_before);
    // The failed append's cut freed the reserved blocks past the end; the
    // appends that follow reserve again from there.
    while faulty.faults().reservations().len() == 1 {
        append_value(&mut log, 512 << 10, 8);
    }
    let next = faulty.faults().reservations()[1];
    assert_eq!(next.0, end_before, "{:?}", faulty.faults().reservations());
    check_invariants(&log);
}

/// On the real file system: the blocks past the end are allocated, the
/// length is only what was written, a reopened log reads exactly that, and
/// the roll frees the rest.
#[test]
fn a_real_file_holds_its_reserved_blocks_past_the_end_until_the_roll() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("topic-0");
    let (mut log, _) = PartitionLog::open_with(FileStorage::shared(), &dir, config(), 0).unwrap();
    fill_to(&mut log, 6 * MIB);
    log.flush().unwrap();
    let first = log.segments()[0].path().to_path_buf();
    let meta = std::fs::metadata(&first).unwrap();
    assert_eq!(meta.len(), log.end_position().byte_pos, "the length is what was written");
    let allocated = meta.blocks() * 512;
    assert!(allocated >= meta.len() + 2 * MIB, "blocks past the end: {allocated} bytes for a {}-byte file", meta.len());

    let end = log.end_position();
    drop(log);
    let (mut log, _) = PartitionLog::open_with(FileStorage::shared(), &dir, config(), 0).unwrap();
    assert_eq!(log.end_position(), end, "reopening reads only what was written");

    // A roll before the segment is full (by age, or a truncation) leaves
    // up to `reserve_ahead_bytes` reserved past the end: freed there.
    append_value(&mut log, 512 << 10, 3);
    let allocated = std::fs::metadata(&first).unwrap().blocks() * 512;
    assert!(allocated >= log.end_position().byte_pos + 2 * MIB, "{allocated}");
    log.roll(0).unwrap();
    assert_eq!(log.segments().len(), 2);
    let meta = std::fs::metadata(&first).unwrap();
    assert_eq!(meta.len(), log.segments()[0].size_bytes());
    let allocated = meta.blocks() * 512;
    assert!(allocated < meta.len() + MIB, "the roll freed the reserved blocks: {allocated} for {}", meta.len());
    check_invariants(&log);
}
