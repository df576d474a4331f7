//! Fault injection: a failed sync or write must surface as an error and
//! never turn into acknowledged data; the log stays consistent around it.

use std::sync::Arc;

use kafgres_log::storage::faulty::FaultyStorage;
use kafgres_log::storage::memory::{CrashMode, MemStorage};
use kafgres_log::{AppendResult, LogConfig, LogError, PartitionLog, Storage};
use kafgres_record::build::ProducerStamp;
use kafgres_record::{validate_batches, BatchHeader};

use crate::common::*;

/// Appends and flushes until the injected sync failure; returns the
/// acknowledged batches (those whose flush succeeded).
fn ack_until_failure(log: &mut PartitionLog) -> (Vec<Stored>, LogError) {
    let mut acked: Vec<Stored> = Vec::new();
    let mut pending: Vec<Stored> = Vec::new();
    for i in 0..1_000u32 {
        let r = try_append(log, 150);
        match r {
            Ok(r) => {
                let bytes = log.read(r.base_offset, 1, log.end_position(), true).unwrap().read_to_vec().unwrap();
                pending.push(Stored { header: BatchHeader::parse(&bytes).unwrap(), bytes });
            }
            Err(e) => return (acked, e),
        }
        if i % 3 == 2 {
            match log.flush() {
                Ok(_) => acked.append(&mut pending),
                Err(e) => return (acked, e),
            }
        }
    }
    panic!("no failure was injected");
}

#[test]
fn a_failed_sync_is_an_error_and_acknowledged_data_survives_a_power_loss() {
    for nth in 1..40 {
        let mem = MemStorage::new();
        let faulty = FaultyStorage::new(Arc::new(mem.clone()));
        let (mut log, _) = open_on(Arc::new(faulty.clone()), small_config());
        faulty.faults().fail_sync(nth, true);
        let (acked, error) = ack_until_failure(&mut log);
        // After the failure the log refuses writes: nothing more can be acked.
        let retry = try_append(&mut log, 10);
        assert!(matches!(retry, Err(LogError::Failed { .. })), "sync {nth}: {retry:?} after {error}");
        assert!(log.flush().is_err());
        let (recovered, _) = open(&mem.crash(CrashMode::DropUnsynced), small_config());
        let got = read_all(&recovered);
        assert!(got.len() >= acked.len(), "sync {nth}: {} recovered, {} acknowledged", got.len(), acked.len());
        assert_eq!(&got[..acked.len()], &acked[..], "sync {nth}");
        check_invariants(&recovered);
    }
}

fn try_append(log: &mut PartitionLog, value_len: usize) -> Result<AppendResult, LogError> {
    let bytes = batch_of(&[vec![1; value_len]], 10_000, ProducerStamp::NONE);
    let headers = validate_batches(&bytes).unwrap().headers;
    log.append(&bytes, &headers, 0, 0)
}

#[test]
fn a_failed_or_torn_write_is_cut_and_the_next_append_takes_its_place() {
    // An index entry per batch (in memory: index files are written at a
    // roll or a checkpoint). An append is two writes, the batch's stamped
    // head and its rest, and each of them may fail.
    let config = LogConfig { index_interval_bytes: 0, ..small_config() };
    for nth in 1..=2 {
        for keep in [None, Some(0), Some(4), Some(30), Some(100)] {
            let what = format!("write {nth} keep {keep:?}");
            let mem = MemStorage::new();
            let faulty = FaultyStorage::new(Arc::new(mem.clone()));
            let (mut log, _) = open_on(Arc::new(faulty.clone()), config);
            append(&mut log, 2, 50, 1, 1_000);
            let before = read_all(&log);
            match keep {
                None => faulty.faults().fail_write(nth),
                Some(k) => faulty.faults().tear_write(nth, k),
            }
            let failed = try_append(&mut log, 10);
            assert!(failed.is_err(), "{what}");
            assert_eq!(read_all(&log), before, "{what}: the failed append is not visible");
            assert!(log.failure().is_none(), "{what}: a cut failed append does not poison the log");
            let r = append(&mut log, 1, 20, 2, 1_001);
            assert_eq!(r.base_offset, 2, "{what}: the next append takes the failed one's offsets");
            log.flush().unwrap();
            let (recovered, report) = open(&mem.crash(CrashMode::KeepUnsynced), config);
            assert_eq!(report.truncated_bytes(), 0, "{what}: no garbage was left behind: {report:?}");
            assert_eq!(read_all(&recovered), read_all(&log), "{what}");
            assert_eq!(recovered.segments()[0].offset_index(), log.segments()[0].offset_index(), "{what}");
            check_invariants(&recovered);
        }
    }
}

/// Lookups of the newest batches come from a list kept in memory; after a
/// failed append it must name only the batches the file really holds, as
/// the index walk of a reopened log finds them. (Batches are noted only once
/// all of an append's bytes are written, so a failed write leaves nothing of
/// it in that list; this keeps it so.)
#[test]
fn lookups_after_a_failed_append_find_the_batches_a_reopen_finds() {
    let values = |n: usize, len: usize| vec![vec![7u8; len]; n];
    let first = batch_of(&values(2, 50), 1_000, ProducerStamp::NONE);
    let big = batch_of(&values(5, 200), 1_001, ProducerStamp::NONE);
    let small = batch_of(&values(1, 20), 1_002, ProducerStamp::NONE);
    for smalls_after in [2, 4, 6, 8] {
        // The failed append is two batches, `big` then `small`: the interval
        // puts no index entry on `big` but would put one on the `small`
        // after it, whose write fails once `big` has been noted. The
        // one-record batches appended after it get no index entry, so
        // nothing would clear a stale memory of the failed five-record `big`.
        let interval = (first.len() + smalls_after * small.len() + 1) as u64;
        assert!(interval <= (first.len() + big.len()) as u64);
        let config = LogConfig { index_interval_bytes: interval, ..LogConfig::default() };
        let mem = MemStorage::new();
        let faulty = FaultyStorage::new(Arc::new(mem.clone()));
        let (mut log, _) = open_on(Arc::new(faulty.clone()), config);
        append_batch(&mut log, first.clone());
        let two = [big.clone(), small.clone()].concat();
        let headers = validate_batches(&two).unwrap().headers;
        // Writes 1-2: `big`'s stamped head and rest; 3: `small`'s head.
        faulty.faults().fail_write(3);
        let failed = log.append(&two, &headers, 0, 0).expect_err("the second batch's write fails");
        let failed_path = match &failed {
            LogError::Io { path, .. } => path.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(failed_path.extension().and_then(|e| e.to_str()), Some("log"), "{failed:?}");
        assert!(log.failure().is_none());
        for _ in 0..smalls_after {
            append_batch(&mut log, small.clone());
        }
        log.flush().unwrap();
        let (reopened, _) = open(&mem.crash(CrashMode::KeepUnsynced), config);
        for offset in 0..log.next_offset() {
            let found = log.position_at(offset).unwrap().map(|p| p.byte_pos);
            let walked = reopened.position_at(offset).unwrap().map(|p| p.byte_pos);
            assert_eq!(found, walked, "{smalls_after} batches after, offset {offset}");
        }
        assert_eq!(read_all(&reopened), read_all(&log));
    }
}

#[test]
fn short_writes_are_completed() {
    let mem = MemStorage::new();
    let faulty = FaultyStorage::new(Arc::new(mem.clone()));
    faulty.faults().short_writes(Some(7));
    let storage: Arc<dyn Storage> = Arc::new(faulty.clone());
    let (mut log, _) = open_on(Arc::clone(&storage), small_config());
    for i in 0..20 {
        append(&mut log, 2, 100, i, 1_000);
    }
    log.checkpoint().unwrap();
    let want = read_all(&log);
    let (reopened, report) = open_on(storage, small_config());
    assert_eq!(report.scanned_bytes(), 0);
    assert_eq!(read_all(&reopened), want);
}

#[test]
fn a_failed_sync_during_a_roll_poisons_the_log_until_it_is_reopened() {
    let mem = MemStorage::new();
    let faulty = FaultyStorage::new(Arc::new(mem.clone()));
    let (mut log, _) = open_on(Arc::new(faulty.clone()), small_config());
    append(&mut log, 1, 1_500, 1, 1_000);
    faulty.faults().fail_sync(1, false);
    let e = try_append(&mut log, 1_000);
    assert!(e.is_err(), "the roll's sync failed");
    assert!(log.failure().is_some());
    assert!(matches!(try_append(&mut log, 10), Err(LogError::Failed { .. })));
    drop(log);
    let (mut reopened, _) = open(&mem.crash(CrashMode::KeepUnsynced), small_config());
    assert!(reopened.failure().is_none());
    append(&mut reopened, 1, 10, 3, 1_000);
    check_invariants(&reopened);
}
