//! A follower's log: batches copied from a leader with `append_replicated`
//! must give the leader's log back, file for file when the copy follows the
//! leader's appends one for one (segments, indexes, snapshots, recovery
//! point, leader epoch history), and the same batches, epochs and producer
//! answers when it copies in fetch-sized chunks instead; gaps a compacted
//! leader left survive the follower's crashes; and what cannot follow on is
//! refused without writing anything.

use kafgres_log::storage::memory::{CrashMode, MemStorage};
use kafgres_log::{CleanerConfig, LogConfig, LogError, PartitionLog, SequenceCheck, TxnEnd};
use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};
use kafgres_record::{validate_batches, BatchHeader};
use proptest::prelude::*;

use crate::common::*;

#[derive(Debug, Clone)]
enum Op {
    /// A batch from producer `pid` (0: not idempotent), transactional or not.
    Produce {
        pid: u8,
        records: usize,
        value_len: usize,
        txn: bool,
    },
    /// A retry of producer `pid`'s last batch.
    Retry {
        pid: u8,
    },
    End {
        pid: u8,
        commit: bool,
    },
    BumpEpoch {
        by: u8,
    },
    Checkpoint,
    Reopen,
    FlushAndCrash,
    /// The chunked follower fetches up to this many bytes.
    Fetch {
        max_bytes: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0u8..4, 1usize..4, 0usize..300, any::<bool>())
            .prop_map(|(pid, records, value_len, txn)| Op::Produce { pid, records, value_len, txn }),
        2 => (1u8..4).prop_map(|pid| Op::Retry { pid }),
        2 => (1u8..4, any::<bool>()).prop_map(|(pid, commit)| Op::End { pid, commit }),
        1 => (1u8..3).prop_map(|by| Op::BumpEpoch { by }),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
        1 => Just(Op::FlushAndCrash),
        3 => (1u16..3_000).prop_map(|max_bytes| Op::Fetch { max_bytes }),
    ]
}

fn config() -> LogConfig {
    LogConfig { segment_bytes_max: 1_500, index_interval_bytes: 200, ..LogConfig::default() }
}

/// A log on its own in-memory disk.
struct Node {
    storage: MemStorage,
    log: PartitionLog,
}

impl Node {
    fn new() -> Node {
        let storage = MemStorage::new();
        let (log, _) = open(&storage, config());
        Node { storage, log }
    }

    fn reopen(&mut self, crash: bool) {
        if crash {
            self.log.flush().unwrap();
            self.storage = self.storage.crash(CrashMode::DropUnsynced);
        } else {
            self.log.checkpoint().unwrap();
        }
        let (log, _) = open(&self.storage, config());
        self.log = log;
    }
}

/// Per producer id: epoch, next sequence, whether a transaction is open,
/// and its last batch (for retries).
#[derive(Default, Clone)]
struct Producer {
    next_seq: i32,
    txn_open: bool,
    last: Option<Vec<u8>>,
}

/// The bytes of the batches the leader's last append wrote, as stored.
fn appended_bytes(log: &PartitionLog, base_offset: i64) -> Vec<u8> {
    log.read(base_offset, u64::MAX, log.end_position(), true).unwrap().read_to_vec().unwrap()
}

fn replicate(follower: &mut PartitionLog, bytes: &[u8]) {
    let headers = validate_batches(bytes).unwrap().headers;
    follower.append_replicated(bytes, &headers, 0).unwrap();
}

/// What a promoted follower must answer exactly like the leader.
fn same_answers(leader: &PartitionLog, follower: &PartitionLog, producers: &[Producer]) -> Result<(), TestCaseError> {
    prop_assert_eq!(leader.next_offset(), follower.next_offset());
    prop_assert_eq!(epochs_of(leader), epochs_of(follower));
    prop_assert_eq!(leader.producer_state(), follower.producer_state());
    prop_assert_eq!(leader.first_unstable_offset(), follower.first_unstable_offset());
    prop_assert_eq!(leader.aborted_between(0, i64::MAX), follower.aborted_between(0, i64::MAX));
    for p in producers {
        if let Some(last) = &p.last {
            let h = BatchHeader::parse(last).unwrap();
            prop_assert_eq!(leader.check_sequence(&h), follower.check_sequence(&h));
        }
    }
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut leader = Node::new();
    // Copies every append one for one: must end up with the leader's files.
    let mut mirror = Node::new();
    // Copies in fetch-sized chunks whenever it fetches.
    let mut chunked = Node::new();
    let mut producers = vec![Producer::default(); 4];
    let mut epoch = 0i32;
    for op in ops {
        let mut appended = None;
        match op {
            Op::Produce { pid, records, value_len, txn } => {
                let p = &mut producers[pid as usize];
                let txn = txn && pid > 0;
                let stamp = match pid {
                    0 => ProducerStamp::NONE,
                    _ => ProducerStamp { producer_id: i64::from(pid), producer_epoch: 0, base_sequence: p.next_seq },
                };
                if p.txn_open && !txn {
                    continue; // a non-transactional batch inside a transaction is refused anyway
                }
                let bytes = match txn {
                    true => txn_batch(records, value_len, stamp),
                    false => batch_of(&vec![vec![pid; value_len]; records], 1_000, stamp),
                };
                let header = validate_batches(&bytes).unwrap().headers[0];
                prop_assert_eq!(leader.log.check_sequence(&header), SequenceCheck::Ok);
                appended = Some(append_at_epoch(&mut leader.log, &bytes, epoch).unwrap());
                if pid > 0 {
                    p.next_seq += records as i32;
                    p.txn_open |= txn;
                    p.last = Some(bytes);
                }
            }
            Op::Retry { pid } => {
                if let Some(last) = &producers[pid as usize].last {
                    let h = BatchHeader::parse(last).unwrap();
                    let duplicate = matches!(leader.log.check_sequence(&h), SequenceCheck::Duplicate { .. });
                    prop_assert!(duplicate, "a retry of producer {}'s last batch", pid);
                }
            }
            Op::End { pid, commit } => {
                let p = &mut producers[pid as usize];
                if p.txn_open {
                    let end = if commit { TxnEnd::Commit } else { TxnEnd::Abort };
                    appended = Some(leader.log.append_marker(i64::from(pid), 0, end, 0, epoch, 0).unwrap().unwrap());
                    p.txn_open = false;
                }
            }
            Op::BumpEpoch { by } => epoch += i32::from(by),
            Op::Checkpoint => {
                leader.log.checkpoint().unwrap();
                mirror.log.checkpoint().unwrap();
            }
            Op::Reopen => {
                leader.reopen(false);
                mirror.reopen(false);
                chunked.reopen(false);
            }
            Op::FlushAndCrash => {
                leader.reopen(true);
                mirror.reopen(true);
                chunked.reopen(true);
            }
            Op::Fetch { max_bytes } => {
                fetch_into(&leader.log, &mut chunked.log, u64::from(max_bytes));
            }
        }
        if let Some(r) = appended {
            replicate(&mut mirror.log, &appended_bytes(&leader.log, r.base_offset));
        }
        prop_assert_eq!(files(&leader.storage), files(&mirror.storage), "the mirror holds the leader's files");
        same_answers(&leader.log, &mirror.log, &producers)?;
    }
    while fetch_into(&leader.log, &mut chunked.log, 2_000) {}
    prop_assert_eq!(read_all(&leader.log), read_all(&chunked.log));
    same_answers(&leader.log, &chunked.log, &producers)?;
    chunked.reopen(true);
    prop_assert_eq!(read_all(&leader.log), read_all(&chunked.log));
    same_answers(&leader.log, &chunked.log, &producers)?;
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn a_follower_copy_is_the_leaders_log(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops)?;
    }
}

fn keyed(key: u8, value: Option<u8>) -> Vec<u8> {
    let record =
        NewRecord { key: Some(vec![key]), value: value.map(|v| vec![v; 60]), headers: vec![], timestamp_ms: 1_000 };
    encode_batch(&[record], ProducerStamp::NONE)
}

#[test]
fn gaps_of_a_compacted_leader_are_copied_and_survive_the_followers_crashes() {
    let leader_storage = MemStorage::new();
    let (mut leader, _) = open(&leader_storage, config());
    for round in 0..40u8 {
        // Even rounds have keys of their own; odd ones share one, of which
        // compaction keeps the last: gaps at odd offsets.
        let key = if round % 2 == 0 { round } else { 255 };
        append_at_epoch(&mut leader, &keyed(key, Some(round)), i32::from(round / 10)).unwrap();
    }
    leader.roll(0).unwrap();
    let report = leader.clean(0, &CleanerConfig::default()).unwrap();
    assert!(report.records_removed > 0, "{report:?}");
    let batches = read_all(&leader);
    assert!(batches.windows(2).any(|w| w[1].header.base_offset > w[0].header.next_offset()), "gaps");
    for max_bytes in [1, 300, 5_000] {
        let storage = MemStorage::new();
        let (mut follower, _) = open(&storage, config());
        while fetch_into(&leader, &mut follower, max_bytes) {}
        assert_eq!(read_all(&follower), batches, "fetches of {max_bytes} bytes");
        assert_eq!(epochs_of(&follower), epochs_of(&leader));
        follower.flush().unwrap();
        // Without a recovery point every segment is scanned, the last one too.
        let image = storage.crash(CrashMode::KeepUnsynced);
        image.delete_file(&dir().join(kafgres_log::checkpoint::RECOVERY_POINT_FILE));
        let (recovered, report) = open(&image, config());
        assert_eq!(report.truncated_bytes(), 0);
        assert_eq!(read_all(&recovered), batches, "fetches of {max_bytes} bytes, after a crash");
        assert_eq!(epochs_of(&recovered), epochs_of(&leader));
    }
}

#[test]
fn what_does_not_follow_on_is_refused_and_nothing_is_written() {
    let storage = MemStorage::new();
    let (mut leader, _) = open(&storage, small_config());
    for i in 0..4u8 {
        append_at_epoch(&mut leader, &batch_of(&[vec![i; 30]], 1_000, ProducerStamp::NONE), 2).unwrap();
    }
    let stored: Vec<Stored> = read_all(&leader);
    let follower_storage = MemStorage::new();
    let (mut follower, _) = open(&follower_storage, small_config());
    let copy = |b: &[&Stored]| -> Vec<u8> { b.iter().flat_map(|s| s.bytes.clone()).collect() };
    let try_copy = |f: &mut PartitionLog, bytes: &[u8]| {
        let headers = validate_batches(bytes).unwrap().headers;
        f.append_replicated(bytes, &headers, 0)
    };
    try_copy(&mut follower, &copy(&[&stored[0], &stored[1]])).unwrap();
    let before = files(&follower_storage);
    let again = try_copy(&mut follower, &copy(&[&stored[1], &stored[2]]));
    assert!(matches!(again, Err(LogError::BelowLogEnd { base_offset: 1, log_end: 2 })), "{again:?}");
    let backwards = try_copy(&mut follower, &copy(&[&stored[3], &stored[2]]));
    assert!(matches!(backwards, Err(LogError::BadAppend(_))), "{backwards:?}");
    // A batch of an older epoch than the follower's latest.
    let mut older = stored[2].bytes.clone();
    kafgres_record::set_partition_leader_epoch(&mut older, 1);
    let stale = try_copy(&mut follower, &older);
    assert!(matches!(stale, Err(LogError::StaleLeaderEpoch { epoch: 1, latest: 2, offset: 2 })), "{stale:?}");
    // Headers that are not the bytes'.
    let bytes = copy(&[&stored[2]]);
    let mut headers = validate_batches(&bytes).unwrap().headers;
    headers[0].base_offset = 7;
    assert!(matches!(follower.append_replicated(&bytes, &headers, 0), Err(LogError::BadAppend(_))));
    assert_eq!(files(&follower_storage), before, "nothing was written");
    assert_eq!(follower.next_offset(), 2);
    assert!(follower.failure().is_none());
    // A gap is fine: the batch at 3 follows the end 2.
    try_copy(&mut follower, &copy(&[&stored[3]])).unwrap();
    assert_eq!(follower.next_offset(), 4);
    assert_eq!(read_all(&follower).last().map(|s| s.bytes.clone()), Some(stored[3].bytes.clone()));
}
