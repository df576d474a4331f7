//! An append writes each batch's stamped head and the caller's bytes in one
//! vectored write, leaving the caller's buffer as it was: the stored batches
//! must be exactly the given ones with offsets and leader epoch stamped, on
//! the real file system (one `pwritev`) and when every write is short. And
//! every few megabytes an append starts the writeback of what came before.

use std::sync::Arc;

use kafgres_log::segment::WRITEBACK_CHUNK_BYTES;
use kafgres_log::storage::faulty::FaultyStorage;
use kafgres_log::storage::memory::MemStorage;
use kafgres_log::{LogConfig, PartitionLog};
use kafgres_record::build::ProducerStamp;
use kafgres_record::{validate_batches, BatchHeader};

use crate::common::*;

/// Three batches in one append, as a produce request with several batches
/// for one partition sends them.
fn three_batches() -> Vec<u8> {
    let mut bytes = batch_of(&[vec![1; 10], vec![2; 20]], 1_000, ProducerStamp::NONE);
    bytes.extend(batch_of(&[vec![3; 300]], 1_001, ProducerStamp::NONE));
    bytes.extend(batch_of(&[vec![4; 5], vec![5; 6], vec![6; 7]], 1_002, ProducerStamp::NONE));
    bytes
}

fn append_and_check(log: &mut PartitionLog, leader_epoch: i32) {
    let start = log.end_position().offset;
    let given = three_batches();
    let before = given.clone();
    let headers = validate_batches(&given).unwrap().headers;
    let appended = log.append(&given, &headers, leader_epoch, 0).expect("append");
    assert_eq!(given, before, "the caller's bytes are left as they were");
    assert_eq!((appended.base_offset, appended.last_offset), (start, start + 5));

    let stored: Vec<_> = read_all(log).into_iter().filter(|b| b.header.base_offset >= start).collect();
    assert_eq!(stored.len(), 3);
    let mut pos = 0;
    let mut offset = start;
    for (b, h) in stored.iter().zip(&headers) {
        let mut expected = given[pos..pos + h.total_bytes()].to_vec();
        expected[..8].copy_from_slice(&offset.to_be_bytes());
        expected[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
        assert_eq!(b.bytes, expected, "batch at offset {offset}");
        // The stamped batch still passes validation: its CRC is untouched.
        assert_eq!(BatchHeader::parse(&b.bytes).unwrap().base_offset, offset);
        validate_batches(&b.bytes).expect("stored batch validates");
        offset += i64::from(h.last_offset_delta) + 1;
        pos += h.total_bytes();
    }
}

#[test]
fn several_batches_in_one_append_on_the_real_file_system() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(tmp.path(), LogConfig::default(), 0).expect("open");
    append_and_check(&mut log, 7);
    append_and_check(&mut log, 8);
    log.flush().expect("flush");
}

#[test]
fn several_batches_in_one_append_with_short_writes() {
    let mem = MemStorage::new();
    let faulty = FaultyStorage::new(Arc::new(mem.clone()));
    // 7 bytes per write: every head and body is split across calls.
    faulty.faults().short_writes(Some(7));
    let (mut log, _) = open_on(Arc::new(faulty.clone()), small_config());
    append_and_check(&mut log, 3);
    append_and_check(&mut log, 3);
}

#[test]
fn appends_start_the_writeback_of_each_chunk_once_and_in_order() {
    let mem = MemStorage::new();
    let faulty = FaultyStorage::new(Arc::new(mem.clone()));
    let (mut log, _) = open_on(Arc::new(faulty.clone()), LogConfig::default());
    let value = vec![9u8; 512 << 10];
    while log.end_position().byte_pos < 3 * WRITEBACK_CHUNK_BYTES + (1 << 20) {
        append_batch(&mut log, batch_of(std::slice::from_ref(&value), 0, ProducerStamp::NONE));
    }
    let appended = log.end_position().byte_pos;
    let calls = faulty.faults().writebacks();
    assert_eq!(calls.len(), 3, "{calls:?}");
    // Contiguous from the start of the segment, each at least a chunk long.
    let mut next = 0;
    for (position, len) in calls {
        assert_eq!(position, next);
        assert!(len >= WRITEBACK_CHUNK_BYTES);
        next = position + len;
    }
    assert!(next <= appended);
    // Writeback makes nothing durable: without a sync, a power loss keeps nothing.
    let (recovered, _) = open(&mem.crash(kafgres_log::storage::memory::CrashMode::DropUnsynced), LogConfig::default());
    assert_eq!(recovered.end_position().offset, 0);
}

#[test]
fn writeback_of_a_real_file_is_accepted_and_changes_nothing_read() {
    use kafgres_log::FileStorage;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("writeback.bin");
    let file = FileStorage::shared().open(&path, true).unwrap();
    let data = vec![5u8; 3 << 20];
    file.write_all_at(&data, 0).unwrap();
    file.start_writeback(0, data.len() as u64).expect("sync_file_range on a regular file");
    file.start_writeback(1 << 20, 1 << 20).expect("a range inside the file");
    let mut back = vec![0u8; data.len()];
    file.read_exact_at(&mut back, 0).unwrap();
    assert_eq!(back, data);
}
