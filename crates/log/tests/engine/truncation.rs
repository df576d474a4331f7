//! Truncating the end of the log: the result is the log built from the kept
//! batches alone, file for file; refusals change nothing; a failure or
//! crash at any write, sync, rename or unlink of a truncation leaves, on the
//! durable and the written image alike, a prefix of the old log with
//! producer state and epochs that match its bytes; and a diverged follower
//! truncates where the leader's history says and then takes the leader's
//! batches.

use std::sync::Arc;

use kafgres_log::epochs::LEADER_EPOCH_FILE;
use kafgres_log::partition::TRUNCATION_FILE;
use kafgres_log::producer::SNAPSHOT_SUFFIX;
use kafgres_log::storage::faulty::FaultyStorage;
use kafgres_log::storage::memory::{CrashMode, MemStorage};
use kafgres_log::{LogError, PartitionLog, TxnEnd};
use kafgres_record::build::ProducerStamp;
use kafgres_record::validate_batches;

use crate::common::*;

/// Idempotent and transactional producers (a commit, an abort, one left
/// open), three leader epochs, several segments.
fn workload(log: &mut PartitionLog) {
    let idem = |seq| ProducerStamp { producer_id: 1, producer_epoch: 0, base_sequence: seq };
    let txn = |seq| ProducerStamp { producer_id: 2, producer_epoch: 0, base_sequence: seq };
    let mut seq = (0, 0);
    for round in 0..6 {
        let epoch = [0, 0, 2, 2, 3, 3][round];
        append_at_epoch(log, &batch_of(&[vec![1; 80], vec![2; 80]], 1_000 + round as i64, idem(seq.0)), epoch).unwrap();
        seq.0 += 2;
        append_at_epoch(log, &batch_of(&[vec![3; 120]], 2_000 - round as i64, ProducerStamp::NONE), epoch).unwrap();
        append_at_epoch(log, &txn_batch(3, 40, txn(seq.1)), epoch).unwrap();
        seq.1 += 3;
        if round < 5 {
            let end = if round % 2 == 0 { TxnEnd::Abort } else { TxnEnd::Commit };
            log.append_marker(2, 0, end, 0, epoch, 0).unwrap().unwrap();
        }
    }
}

/// A log holding `batches` exactly, copied into a fresh directory one batch
/// per append (as the workload appended them) and checkpointed.
fn rebuilt_from(batches: &[Stored]) -> (MemStorage, PartitionLog) {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    for b in batches {
        let headers = validate_batches(&b.bytes).unwrap().headers;
        log.append_replicated(&b.bytes, &headers, 0).unwrap();
    }
    log.checkpoint().unwrap();
    (storage, log)
}

/// Every file but the producer snapshots (which of those an older roll left
/// depends on pruning), plus the snapshot at the log end; an empty epoch
/// history and none are the same.
fn comparable_files(storage: &MemStorage, log: &PartitionLog) -> Vec<(String, Vec<u8>)> {
    let end_snapshot = kafgres_log::producer::snapshot_file_name(log.next_offset());
    files(storage)
        .into_iter()
        .filter(|(name, _)| !name.ends_with(SNAPSHOT_SUFFIX) || *name == end_snapshot)
        .filter(|(name, _)| name != LEADER_EPOCH_FILE || log.latest_epoch().is_some())
        .collect()
}

#[test]
fn a_truncated_log_is_the_log_of_its_kept_batches_file_for_file() {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    workload(&mut log);
    let all = read_all(&log);
    assert!(log.segments().len() >= 3, "{} segments", log.segments().len());
    let end = log.next_offset();
    for target in 0..=end + 1 {
        let image = storage.crash(CrashMode::KeepUnsynced);
        let (mut cut, _) = open(&image, small_config());
        let kept: Vec<Stored> = all.iter().filter(|b| b.header.last_offset() < target).cloned().collect();
        let expected_end = kept.last().map_or(0, |b| b.header.next_offset());
        assert_eq!(cut.truncate_to(target, 0).unwrap(), expected_end, "target {target}");
        assert_eq!(read_all(&cut), kept, "target {target}");
        check_invariants(&cut);
        let (ref_storage, reference) = rebuilt_from(&kept);
        assert_eq!(comparable_files(&image, &cut), comparable_files(&ref_storage, &reference), "target {target}");
        assert_eq!(cut.producer_state(), reference.producer_state(), "target {target}");
        assert_eq!(cut.aborted_between(0, i64::MAX), reference.aborted_between(0, i64::MAX));
        assert_eq!(cut.first_unstable_offset(), reference.first_unstable_offset(), "target {target}");
        assert_eq!(epochs_of(&cut), epochs_implied_by(&kept, 0), "target {target}");
        assert!(cut.recovery_point().is_some_and(|rp| rp.offset == expected_end));
        assert!(image.read_file(&dir().join(TRUNCATION_FILE)).is_none());
        for ts in [995, 1_000, 1_003, 1_996, 2_000] {
            assert_eq!(
                cut.offset_for_timestamp(ts, cut.end_position()).unwrap(),
                reference.offset_for_timestamp(ts, reference.end_position()).unwrap(),
                "target {target}, timestamp {ts}"
            );
        }
        // Durable: a power loss right after changes nothing, and a clean
        // reopen reads no segment data.
        let (after, report) = open(&image.crash(CrashMode::DropUnsynced), small_config());
        assert_eq!(read_all(&after), kept);
        assert_eq!(report.scanned_bytes(), 0, "target {target}");
        // Appends go on from the new end.
        let r = append_at_epoch(&mut cut, &batch_of(&[vec![7; 10]], 3_000, ProducerStamp::NONE), 9).unwrap();
        assert_eq!(r.base_offset, expected_end);
        assert_eq!(epochs_of(&cut).last(), Some(&(9, expected_end)));
    }
}

#[test]
fn truncation_is_refused_below_the_log_start_or_the_offset_to_keep() {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    for i in 0..6u8 {
        append_at_epoch(&mut log, &batch_of(&[vec![i; 50], vec![i; 50]], 1_000, ProducerStamp::NONE), 0).unwrap();
    }
    log.checkpoint().unwrap();
    log.delete_records(5).unwrap(); // inside the batch 4..5
    let before = files(&storage);
    let refused = |r: Result<i64, LogError>| matches!(r, Err(LogError::TruncationRefused { .. }));
    assert!(refused(log.truncate_to(3, 0)), "below the log start");
    assert!(refused(log.truncate_to(5, 0)), "the batch holding 5 starts below the log start");
    assert!(refused(log.truncate_to(8, 9)), "below the offset the caller keeps");
    assert!(refused(log.truncate_to(9, 9)), "the batch holding 9 starts at 8");
    assert_eq!(files(&storage), before, "refusals change nothing");
    assert!(log.failure().is_none());
    assert_eq!(log.truncate_to(12, 12).unwrap(), 12, "at the log end: nothing to do");
    assert_eq!(log.truncate_to(40, 0).unwrap(), 12);
    assert_eq!(files(&storage), before);
    assert_eq!(log.truncate_to(9, 8).unwrap(), 8);
    assert_eq!(log.truncate_to(6, 6).unwrap(), 6, "down to the log start's batch boundary");
    assert_eq!(log.next_offset(), 6);
}

/// Truncates a copy of `image` whose storage fails the chosen operation;
/// returns the truncation's result and the failing log.
fn truncate_with_fault(
    image: &MemStorage,
    arm: &dyn Fn(&FaultyStorage),
    target: i64,
) -> (Result<i64, LogError>, PartitionLog) {
    let faulty = FaultyStorage::new(Arc::new(image.clone()));
    let (mut log, _) = open_on(Arc::new(faulty.clone()), small_config());
    arm(&faulty);
    let result = log.truncate_to(target, 0);
    faulty.faults().clear();
    (result, log)
}

/// Reopens a crash image and checks it against the old batches: a prefix,
/// at least `kept` long (what the truncation keeps, all durable), with
/// producer state and epochs equal to what a rebuild from nothing but its
/// batch headers gives.
fn check_prefix(image: MemStorage, old: &[Stored], kept: usize, what: &str) -> usize {
    let (mut log, _) = open(&image, small_config());
    let got = read_all(&log);
    assert!(got.len() <= old.len() && got.len() >= kept, "{what}: {} of {} batches", got.len(), old.len());
    assert_eq!(got[..], old[..got.len()], "{what}: a prefix");
    check_invariants(&log);
    let bare = image.crash(CrashMode::KeepUnsynced);
    for name in files(&bare).into_keys().filter(|n| n.ends_with(SNAPSHOT_SUFFIX) || n == LEADER_EPOCH_FILE) {
        bare.delete_file(&dir().join(name));
    }
    let (rebuilt, _) = open(&bare, small_config());
    assert_eq!(log.producer_state(), rebuilt.producer_state(), "{what}");
    let mut epochs = epochs_of(&log);
    if got.len() == kept {
        assert_eq!(epochs, epochs_implied_by(&got, 0), "{what}: the cut history");
    } else if epochs.last().is_some_and(|e| e.1 == log.next_offset()) {
        // The old log less a tail a crash took: the epoch that tail began
        // stays at the log end.
        epochs.pop();
    }
    assert_eq!(epochs, epochs_of(&rebuilt), "{what}");
    assert_eq!(epochs, epochs_implied_by(&got, 0), "{what}");
    let r = append_at_epoch(&mut log, &batch_of(&[vec![9; 10]], 3_000, ProducerStamp::NONE), 5).unwrap();
    assert_eq!(r.base_offset, log.next_offset() - 1, "{what}: appends go on");
    got.len()
}

/// Arms the `nth` fault of one kind.
type Arm = fn(&FaultyStorage, u64);

#[test]
fn a_failure_or_crash_at_any_step_of_a_truncation_leaves_a_prefix() {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    workload(&mut log);
    log.flush().unwrap();
    let old = read_all(&log);
    // A few batches past the flush: a crash may take them too.
    for i in 0..3u8 {
        append_at_epoch(&mut log, &batch_of(&[vec![i; 60]], 2_500, ProducerStamp::NONE), 4).unwrap();
    }
    let unflushed = read_all(&log);
    drop(log);
    let image = storage.crash(CrashMode::KeepUnsynced);
    for target in [old[old.len() / 3].header.base_offset + 1, old[old.len() - 2].header.base_offset] {
        let kept = old.iter().filter(|b| b.header.last_offset() < target).count();
        let arms: [(&str, Arm); 3] = [
            ("write", |f, n| f.faults().fail_write(n)),
            ("sync", |f, n| f.faults().fail_sync(n, false)),
            ("rename/unlink", |f, n| f.faults().fail_namespace_op(n)),
        ];
        for (kind, arm) in arms {
            for nth in 1.. {
                // The failed operation had no effect: the images below are
                // what a crash just before it leaves, and after the process
                // went on failing.
                let copy = image.crash(CrashMode::KeepUnsynced);
                let (result, failed) = truncate_with_fault(&copy, &|f| arm(f, nth), target);
                let what = format!("target {target}, {kind} {nth} failing");
                match &result {
                    Ok(end) => assert_eq!(*end, old[kept - 1].header.next_offset(), "{what}"),
                    Err(_) => {
                        assert!(failed.failure().is_some(), "{what}: a failed truncation poisons the log");
                        let refused =
                            append_at_epoch(&mut { failed }, &batch_of(&[vec![1]], 0, ProducerStamp::NONE), 4);
                        assert!(matches!(refused, Err(LogError::Failed { .. })), "{what}");
                    }
                }
                for mode in [CrashMode::DropUnsynced, CrashMode::KeepUnsynced, CrashMode::Torn { seed: nth }] {
                    let what = format!("{what}, {mode:?}");
                    // Everything up to the flush was durable before: the
                    // truncation keeps `kept` batches of it or, not yet
                    // committed, leaves all of them.
                    let n = check_prefix(copy.crash(mode), &unflushed, kept, &what);
                    assert!(n == kept || n >= old.len(), "{what}: {n} batches, neither the cut log nor the old one");
                    if mode == CrashMode::KeepUnsynced {
                        assert!(n == kept || n == unflushed.len(), "{what}: {n} batches");
                    }
                }
                if result.is_ok() {
                    break;
                }
            }
        }
    }
}

#[test]
fn a_diverged_follower_truncates_where_the_leader_says_and_takes_its_batches() {
    let one = |tag: u8| batch_of(&[vec![tag; 40], vec![tag; 40]], 1_000, ProducerStamp::NONE);
    let (leader_storage, follower_storage) = (MemStorage::new(), MemStorage::new());
    let (mut leader, _) = open(&leader_storage, small_config());
    let (mut follower, _) = open(&follower_storage, small_config());
    // Epoch 1: both hold offsets 0..20.
    for i in 0..10 {
        append_at_epoch(&mut leader, &one(i), 1).unwrap();
    }
    while fetch_into(&leader, &mut follower, 700) {}
    // The follower leads epoch 2 for a while, alone (its writes never reach
    // the old leader); the old leader comes back as the leader of epoch 3
    // and writes its own offsets from 20 on.
    for i in 10..25 {
        append_at_epoch(&mut follower, &one(i), 2).unwrap();
    }
    for i in 100..108 {
        append_at_epoch(&mut leader, &one(i), 3).unwrap();
    }
    assert_eq!(epochs_of(&follower), vec![(1, 0), (2, 20)]);
    assert_eq!(epochs_of(&leader), vec![(1, 0), (3, 20)]);
    // The follower asks where its latest epoch ends in the leader's log.
    let (epoch, end) = leader.end_offset_for_epoch(follower.latest_epoch().unwrap());
    assert_eq!((epoch, end), (1, 20), "epoch 2 is unknown to the leader: epoch 1 ends at 20");
    // Kafka's rule (KIP-279): cut at the lower of that end and where the
    // follower's own copy of the answered epoch ends.
    let (_, own_end) = follower.end_offset_for_epoch(epoch);
    let cut_at = end.min(own_end);
    assert_eq!(follower.truncate_to(cut_at, 0).unwrap(), 20);
    assert_eq!(epochs_of(&follower), vec![(1, 0)]);
    while fetch_into(&leader, &mut follower, 500) {}
    assert_eq!(read_all(&follower), read_all(&leader));
    assert_eq!(epochs_of(&follower), epochs_of(&leader));
    assert_eq!(follower.end_offset_for_epoch(2), (1, 20));
    // And so it stays after a crash.
    follower.flush().unwrap();
    let (recovered, _) = open(&follower_storage.crash(CrashMode::DropUnsynced), small_config());
    assert_eq!(read_all(&recovered), read_all(&leader));
    assert_eq!(epochs_of(&recovered), epochs_of(&leader));
}

fn keyed(key: u8, round: u8) -> Vec<u8> {
    let record = kafgres_record::build::NewRecord {
        key: Some(vec![key]),
        value: Some(vec![round; 60]),
        headers: vec![],
        timestamp_ms: 1_000 + i64::from(round),
    };
    kafgres_record::build::encode_batch(&[record], ProducerStamp::NONE)
}

#[test]
fn truncation_into_a_compacted_segment_and_its_gaps() {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    for round in 0..40u8 {
        let key = if round % 2 == 0 { round } else { 255 };
        append_at_epoch(&mut log, &keyed(key, round), i32::from(round / 10)).unwrap();
    }
    log.roll(0).unwrap();
    assert!(log.clean(0, &kafgres_log::CleanerConfig::default()).unwrap().records_removed > 0);
    let all = read_all(&log);
    let gap = all.windows(2).position(|w| w[1].header.base_offset > w[0].header.next_offset()).unwrap();
    let (before, after) = (&all[gap], &all[gap + 1]);
    let image = storage.crash(CrashMode::KeepUnsynced);
    // Into the gap: the log ends where the batch before it ends.
    for target in [before.header.next_offset(), after.header.base_offset, after.header.base_offset + 1] {
        let copy = image.crash(CrashMode::KeepUnsynced);
        let (mut cut, _) = open(&copy, small_config());
        let kept: Vec<Stored> = all.iter().filter(|b| b.header.last_offset() < target).cloned().collect();
        let end = cut.truncate_to(target, 0).unwrap();
        assert_eq!(end, kept.last().unwrap().header.next_offset(), "target {target}");
        assert!(end <= target);
        assert_eq!(read_all(&cut), kept, "target {target}");
        assert!(cut.cleaner_state().first_dirty_offset <= end, "the cleaned section ends at the new end");
        // The cut segment, gaps and all, is now the active one: a crash that
        // makes recovery scan it keeps every batch.
        copy.delete_file(&dir().join(kafgres_log::checkpoint::RECOVERY_POINT_FILE));
        let (recovered, report) = open(&copy.crash(CrashMode::DropUnsynced), small_config());
        assert_eq!(report.truncated_bytes(), 0, "target {target}");
        assert_eq!(read_all(&recovered), kept, "target {target}");
    }
}

/// Truncates the log between a cleaning round's plan and its first swap.
struct TruncateMidRound<'a> {
    log: &'a mut PartitionLog,
    calls: usize,
    target: i64,
}

impl kafgres_log::cleaner::LogAccess for &mut TruncateMidRound<'_> {
    fn with_log<R>(&mut self, f: impl FnOnce(&mut PartitionLog) -> R) -> R {
        self.calls += 1;
        if self.calls == 2 {
            self.log.truncate_to(self.target, 0).unwrap();
        }
        f(self.log)
    }
}

#[test]
fn a_cleaning_round_planned_before_a_truncation_swaps_nothing_in() {
    let storage = MemStorage::new();
    let (mut log, _) = open(&storage, small_config());
    for round in 0..40u8 {
        append_at_epoch(&mut log, &keyed(round % 4, round), 0).unwrap();
    }
    log.roll(0).unwrap();
    let all = read_all(&log);
    let target = all[5].header.base_offset;
    let config = kafgres_log::CleanerConfig::default();
    let mut access = TruncateMidRound { log: &mut log, calls: 0, target };
    let report = kafgres_log::cleaner::clean(&mut access, 0, &config).unwrap();
    assert!(access.calls > 2, "the round went on after the truncation");
    assert_eq!(report.segments_written, 0, "{report:?}");
    assert!(report.groups_abandoned > 0, "{report:?}");
    assert_eq!(read_all(&log), all[..5], "nothing past the cut came back");
    assert!(log.cleaner_state().first_dirty_offset <= target);
    let (reopened, _) = open(&storage.crash(CrashMode::DropUnsynced), small_config());
    assert_eq!(read_all(&reopened), all[..5]);
    assert!(reopened.cleaner_state().first_dirty_offset <= target, "the stored checkpoint too");
    // Later rounds clean again.
    for round in 0..20u8 {
        append_at_epoch(&mut log, &keyed(round % 4, round), 0).unwrap();
    }
    log.roll(0).unwrap();
    assert!(log.clean(0, &config).unwrap().records_removed > 0);
}
