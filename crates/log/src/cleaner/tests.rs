use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kafgres_record::build::{encode_compressed_batch, NewRecord, ProducerStamp};
use kafgres_record::records::{parse_records, records_section};
use kafgres_record::{validate_batches, BatchHeader, DecompressLimit};
use proptest::prelude::*;

use super::*;
use crate::partition::LogConfig;
use crate::storage::faulty::FaultyStorage;
use crate::storage::memory::{CrashMode, MemStorage};

const DIR: &str = "/data/compacted-0";
const DAY_MS: i64 = 24 * 3600 * 1000;

fn dir() -> &'static Path {
    Path::new(DIR)
}

fn small() -> LogConfig {
    LogConfig { segment_bytes_max: 1_000, index_interval_bytes: 200, ..LogConfig::default() }
}

fn open(storage: Arc<dyn Storage>) -> PartitionLog {
    PartitionLog::open_with(storage, dir(), small(), 0).expect("open").0
}

/// One record: key (None: no key), value (None: tombstone).
type Kv = (Option<Vec<u8>>, Option<Vec<u8>>);

fn kv(key: &str, value: Option<&str>) -> Kv {
    (Some(key.as_bytes().to_vec()), value.map(|v| v.as_bytes().to_vec()))
}

fn append(log: &mut PartitionLog, records: &[Kv], codec: u8, producer: ProducerStamp) {
    let records: Vec<NewRecord> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| NewRecord {
            key: k.clone(),
            value: v.clone(),
            headers: vec![],
            timestamp_ms: 1_000 + i as i64,
        })
        .collect();
    let bytes = encode_compressed_batch(&records, producer, codec);
    let headers = validate_batches(&bytes).expect("valid").headers;
    log.append(&bytes, &headers, 0, 0).expect("append");
}

/// Every record from the log start through the read API: (offset, key, value).
fn records(log: &PartitionLog) -> Vec<(i64, Kv)> {
    let end = log.end_position();
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    let limit = DecompressLimit { bytes_max: 1 << 24 };
    while offset < end.offset {
        let bytes = log.read(offset, 1 << 20, end, true).expect("read").read_to_vec().expect("bytes");
        assert!(!bytes.is_empty(), "nothing at {offset}");
        validate_batches(&bytes).expect("served batches validate");
        let mut pos = 0;
        while pos < bytes.len() {
            let header = BatchHeader::parse(&bytes[pos..]).unwrap();
            let batch = &bytes[pos..pos + header.total_bytes()];
            let section = records_section(batch, limit).unwrap();
            for r in parse_records(&header, &section).unwrap() {
                let o = header.base_offset + i64::from(r.offset_delta);
                if o >= offset {
                    out.push((o, (r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec))));
                }
            }
            offset = offset.max(header.next_offset());
            pos += header.total_bytes();
        }
    }
    out
}

/// Key → (offset, value) of its latest record; keyless records by offset.
fn latest(records: &[(i64, Kv)]) -> BTreeMap<Vec<u8>, (i64, Option<Vec<u8>>)> {
    let mut map = BTreeMap::new();
    for (o, (k, v)) in records {
        let key = k.clone().unwrap_or_else(|| format!("no key @{o}").into_bytes());
        map.insert(key, (*o, v.clone()));
    }
    map
}

/// What compaction promises about `after` given `before`: a subset with the
/// same offsets, offsets increasing, the same latest record per key, and
/// nothing removed at or past `uncleanable` (the active segment).
fn check_compacted(before: &[(i64, Kv)], after: &[(i64, Kv)], uncleanable: i64, tombstones_may_go: bool) {
    let by_offset: BTreeMap<i64, &Kv> = before.iter().map(|(o, r)| (*o, r)).collect();
    for w in after.windows(2) {
        assert!(w[0].0 < w[1].0, "offsets increase: {} then {}", w[0].0, w[1].0);
    }
    for (o, r) in after {
        assert_eq!(by_offset.get(o), Some(&r), "offset {o} holds what it held");
    }
    let kept: Vec<i64> = after.iter().map(|(o, _)| *o).collect();
    for (o, _) in before.iter().filter(|(o, _)| *o >= uncleanable) {
        assert!(kept.binary_search(o).is_ok(), "offset {o} of the active segment is untouched");
    }
    let (mut want, got) = (latest(before), latest(after));
    if tombstones_may_go {
        want.retain(|k, (o, v)| v.is_some() || got.contains_key(k) || *o >= uncleanable);
    }
    assert_eq!(got, want, "the latest record of each key");
}

fn updates(log: &mut PartitionLog, rounds: usize, keys: usize) {
    for round in 0..rounds {
        let batch: Vec<Kv> = (0..keys)
            .map(|k| {
                let value =
                    (round % 5 == 4 && k == 1).then_some("").map(|_| None).unwrap_or(Some(format!("v{round}-{k}")));
                (Some(format!("key-{k}").into_bytes()), value.map(String::into_bytes))
            })
            .collect();
        append(log, &batch, (round % 5) as u8, ProducerStamp::NONE);
    }
}

fn no_lag() -> CleanerConfig {
    CleanerConfig { min_cleanable_dirty_ratio: 0.0, ..CleanerConfig::default() }
}

#[test]
fn a_round_keeps_the_latest_record_per_key_and_shrinks_the_log() {
    let mem = MemStorage::new();
    let mut log = open(Arc::new(mem.clone()));
    updates(&mut log, 40, 4);
    let before = records(&log);
    let size_before = log.size_bytes();
    let uncleanable = log.segments().last().unwrap().base_offset();
    assert!(log.cleaning_due_at(0, &CleanerConfig::default()).is_some_and(|t| t <= 0), "all dirty: due now");
    let report = log.clean(0, &no_lag()).unwrap();
    assert_eq!(report.end_offset, uncleanable);
    assert!(report.records_removed > 0 && report.segments_written > 0, "{report:?}");
    assert!(log.size_bytes() < size_before);
    assert_eq!(log.cleaner_state().first_dirty_offset, uncleanable);
    assert!(log.cleaning_due_at(0, &CleanerConfig::default()).is_none_or(|t| t > 0), "nothing dirty left");
    let after = records(&log);
    check_compacted(&before, &after, uncleanable, false);
    log.flush().unwrap();
    // The same after a clean reopen and after a power loss.
    for image in [mem.clone(), mem.crash(CrashMode::DropUnsynced)] {
        let reopened = open(Arc::new(image));
        assert_eq!(records(&reopened), after);
        assert_eq!(reopened.cleaner_state().first_dirty_offset, uncleanable);
    }
    // A second round over the clean section changes nothing it must keep.
    let again = log.clean(0, &no_lag()).unwrap();
    assert_eq!(again.records_removed, 0, "{again:?}");
    check_compacted(&before, &records(&log), uncleanable, false);
}

#[test]
fn tombstones_go_only_once_delete_retention_has_passed_since_their_first_round() {
    let mut log = open(Arc::new(MemStorage::new()));
    append(&mut log, &[kv("a", Some("1")), kv("b", Some("1"))], 0, ProducerStamp::NONE);
    append(&mut log, &[kv("a", None)], 0, ProducerStamp::NONE);
    log.roll(0).unwrap();
    append(&mut log, &[kv("c", Some("1"))], 0, ProducerStamp::NONE);
    let config = CleanerConfig { delete_retention_ms: DAY_MS, ..no_lag() };
    let t0 = 5_000;
    log.clean(t0, &config).unwrap();
    let keys = |log: &PartitionLog| records(log).into_iter().map(|(o, (k, v))| (o, k.unwrap(), v)).collect::<Vec<_>>();
    assert_eq!(
        keys(&log),
        vec![
            (1, b"b".to_vec(), Some(b"1".to_vec())),
            (2, b"a".to_vec(), None),
            (3, b"c".to_vec(), Some(b"1".to_vec()))
        ]
    );
    assert_eq!(log.cleaner_state().delete_horizon_ms, Some(t0 + DAY_MS));
    assert_eq!(log.cleaning_due_at(t0, &config), Some(t0 + DAY_MS), "woken at the horizon, not before");
    log.clean(t0 + DAY_MS - 1, &config).unwrap();
    assert_eq!(keys(&log).len(), 3, "still inside delete.retention.ms");
    assert_eq!(log.cleaning_due_at(t0 + DAY_MS, &config), Some(t0 + DAY_MS));
    let report = log.clean(t0 + DAY_MS, &config).unwrap();
    assert_eq!(report.tombstones_removed, 1);
    assert_eq!(keys(&log), vec![(1, b"b".to_vec(), Some(b"1".to_vec())), (3, b"c".to_vec(), Some(b"1".to_vec()))]);
    assert_eq!(log.cleaner_state().delete_horizon_ms, None);
    assert_eq!(log.cleaning_due_at(t0 + 2 * DAY_MS, &config), None);
}

#[test]
fn an_idempotent_producers_last_batch_keeps_its_header_when_emptied() {
    let mem = MemStorage::new();
    let mut log = open(Arc::new(mem.clone()));
    let stamp = ProducerStamp { producer_id: 9, producer_epoch: 0, base_sequence: 0 };
    append(&mut log, &[kv("a", Some("1")), kv("b", Some("1"))], 3, stamp);
    append(&mut log, &[kv("a", Some("2")), kv("b", Some("2"))], 0, ProducerStamp::NONE);
    log.roll(0).unwrap();
    log.clean(0, &no_lag()).unwrap();
    let end = log.end_position();
    let bytes = log.read(0, 1 << 20, end, true).unwrap().read_to_vec().unwrap();
    let first = BatchHeader::parse(&bytes).unwrap();
    assert_eq!((first.producer_id, first.records_count, first.last_offset(), first.compression()), (9, 0, 1, 0));
    log.checkpoint().unwrap();
    drop(log);
    let reopened = open(Arc::new(mem.crash(CrashMode::DropUnsynced)));
    let entry = reopened.producer_state().get(9).expect("the producer is still known");
    assert_eq!(entry.last_seq(), Some(1));
    assert_eq!(records(&reopened).len(), 2);
}

#[test]
fn keyless_records_are_kept_and_reads_in_flight_keep_the_old_bytes() {
    let mut log = open(Arc::new(MemStorage::new()));
    append(&mut log, &[(None, Some(b"x".to_vec())), kv("a", Some("1"))], 0, ProducerStamp::NONE);
    append(&mut log, &[kv("a", Some("2"))], 0, ProducerStamp::NONE);
    log.roll(0).unwrap();
    let planned = log.read(0, 1 << 20, log.end_position(), true).unwrap();
    let old = planned.read_to_vec().unwrap();
    log.clean(0, &no_lag()).unwrap();
    assert_eq!(records(&log).iter().map(|(o, _)| *o).collect::<Vec<_>>(), vec![0, 2]);
    assert_eq!(planned.read_to_vec().unwrap(), old, "a fetch planned before the swap reads the old segment");
}

#[test]
fn min_compaction_lag_holds_young_segments_back_and_says_when_they_are_due() {
    let mut log = open(Arc::new(MemStorage::new()));
    updates(&mut log, 20, 2);
    let config = CleanerConfig { min_compaction_lag_ms: 10_000, ..CleanerConfig::default() };
    // Records are stamped around 1_000: young until 11_000 or so.
    let due = log.cleaning_due_at(2_000, &config).expect("a deadline");
    assert!(due > 2_000 && due <= 11_010, "{due}");
    assert_eq!(log.clean(2_000, &config).unwrap().records_removed, 0);
    assert!(log.cleaning_due_at(20_000, &config).is_some_and(|t| t <= 20_000));
    assert!(log.clean(20_000, &config).unwrap().records_removed > 0);
}

#[test]
fn the_offset_map_limit_splits_the_dirty_section_over_rounds() {
    let mut log = open(Arc::new(MemStorage::new()));
    updates(&mut log, 40, 4);
    let before = records(&log);
    let uncleanable = log.segments().last().unwrap().base_offset();
    let config = CleanerConfig { offset_map_bytes_max: 1, ..no_lag() };
    let first = log.clean(0, &config).unwrap();
    assert!(first.end_offset < uncleanable, "{first:?}");
    for _ in 0..100 {
        if log.cleaner_state().first_dirty_offset >= uncleanable {
            break;
        }
        log.clean(0, &config).unwrap();
    }
    assert_eq!(log.cleaner_state().first_dirty_offset, uncleanable);
    check_compacted(&before, &records(&log), uncleanable, false);
}

/// What a fault may hit.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Write,
    Sync,
    RenameOrRemove,
}

#[test]
fn a_damaged_base_offset_in_a_trusted_segment_stops_the_round_and_changes_nothing() {
    let mem = MemStorage::new();
    let mut log = open(Arc::new(mem.clone()));
    updates(&mut log, 30, 3);
    log.checkpoint().unwrap();
    drop(log);
    // The base offset is outside the CRC, and a cleanly closed log trusts its
    // closed segments without reading them: only the cleaner meets this.
    let first = dir().join(crate::segment::segment_file_name(0));
    let mut bytes = mem.read_file(&first).expect("the first segment");
    let second_batch = BatchHeader::parse(&bytes).unwrap().total_bytes();
    bytes[second_batch..second_batch + 8].copy_from_slice(&(1i64 << 40).to_be_bytes());
    mem.write_file(&first, &bytes);
    let mut log = open(Arc::new(mem.clone()));
    let bases: Vec<i64> = log.segments().iter().map(|s| s.base_offset()).collect();
    let err = log.clean(0, &no_lag()).expect_err("a batch whose offsets do not follow the one before");
    assert!(matches!(err, LogError::BadBatch { .. }), "{err}");
    assert_eq!(log.segments().iter().map(|s| s.base_offset()).collect::<Vec<_>>(), bases);
    assert_eq!(log.failure(), None, "the log still takes appends");
    let names = mem.list_dir(dir()).unwrap();
    assert!(!names.iter().any(|n| n.ends_with(CLEANED_SUFFIX) || n == SWAP_FILE), "{names:?}");
    assert_eq!(mem.read_file(&first), Some(bytes), "the segment is left as it was");
}

/// Builds the same log on a fresh storage each time, made durable.
fn durable_log() -> (MemStorage, FaultyStorage, PartitionLog) {
    let mem = MemStorage::new();
    let faulty = FaultyStorage::new(Arc::new(mem.clone()));
    let mut log = open(Arc::new(faulty.clone()));
    updates(&mut log, 30, 3);
    log.checkpoint().unwrap();
    (mem, faulty, log)
}

#[test]
fn a_crash_at_any_step_of_a_round_loses_nothing_and_duplicates_nothing() {
    let (_, _, reference) = durable_log();
    let before = records(&reference);
    let uncleanable = reference.segments().last().unwrap().base_offset();
    let end = reference.next_offset();
    for fault in [Fault::Write, Fault::Sync, Fault::RenameOrRemove] {
        let mut fired = 0;
        for nth in 1..200u64 {
            let (mem, faulty, mut log) = durable_log();
            let faults = faulty.faults();
            let seen = |f: &Arc<crate::storage::faulty::Faults>| match fault {
                Fault::Write => f.counts().0,
                Fault::Sync => f.counts().1,
                Fault::RenameOrRemove => f.namespace_ops(),
            };
            let start = seen(&faults);
            match fault {
                Fault::Write => faults.fail_write(nth),
                Fault::Sync => faults.fail_sync(nth, false),
                Fault::RenameOrRemove => faults.fail_namespace_op(nth),
            }
            let result = log.clean(0, &no_lag());
            if seen(&faults) - start < nth {
                assert!(result.is_ok(), "{fault:?} {nth}: {result:?}");
                break;
            }
            fired += 1;
            // The live log still serves what it held (old or new group).
            check_compacted(&before, &records(&log), uncleanable, false);
            for mode in [CrashMode::DropUnsynced, CrashMode::KeepUnsynced] {
                let image = mem.crash(mode);
                let mut reopened = open(Arc::new(image.clone()));
                let what = format!("{fault:?} #{nth}, {mode:?}");
                assert_eq!(reopened.next_offset(), end, "{what}");
                check_compacted(&before, &records(&reopened), uncleanable, false);
                let names = image.list_dir(dir()).unwrap();
                assert!(!names.iter().any(|n| n.ends_with(CLEANED_SUFFIX) || n == SWAP_FILE), "{what}: {names:?}");
                // And a later round completes the work.
                reopened.clean(0, &no_lag()).unwrap_or_else(|e| panic!("{what}: {e}"));
                check_compacted(&before, &records(&reopened), uncleanable, false);
            }
        }
        assert!(fired > 3, "{fault:?}: only {fired} fault points");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_the_latest_value_of_every_key(
        batches in proptest::collection::vec(
            (proptest::collection::vec((0u8..6, proptest::option::weighted(0.8, 0u8..255), any::<bool>()), 1..6), 0u8..5),
            1..40,
        ),
        expire in any::<bool>(),
    ) {
        let mem = MemStorage::new();
        let mut log = open(Arc::new(mem.clone()));
        for (records, codec) in &batches {
            let kvs: Vec<Kv> = records
                .iter()
                .map(|(k, v, keyless)| {
                    let key = (!(*keyless && *k == 0)).then(|| vec![b'k', *k]);
                    (key, v.map(|v| vec![v; 1 + usize::from(v) % 40]))
                })
                .collect();
            append(&mut log, &kvs, *codec, ProducerStamp::NONE);
        }
        let before = records(&log);
        let uncleanable = log.segments().last().unwrap().base_offset();
        let config = CleanerConfig { delete_retention_ms: 1_000, ..no_lag() };
        log.clean(0, &config).unwrap();
        check_compacted(&before, &records(&log), uncleanable, false);
        if expire {
            log.clean(1_000, &config).unwrap();
            let after = records(&log);
            check_compacted(&before, &after, uncleanable, true);
            prop_assert!(after.iter().all(|(o, (k, v))| v.is_some() || k.is_none() || *o >= uncleanable));
        }
        let after = records(&log);
        log.flush().unwrap();
        let reopened = open(Arc::new(mem.crash(CrashMode::DropUnsynced)));
        prop_assert_eq!(records(&reopened), after);
    }
}
