//! Property test: random appends (under rising leader epochs), flushes,
//! checkpoints, power losses, clean reopens, DeleteRecords, size retention
//! and truncations of the end against a model of the log. After every step
//! the log must hold exactly the model's batches from the log start (after a
//! crash: a prefix of them at least as long as what was durable), its leader
//! epoch history must be the model's, and reads by offset and by time must
//! agree with a linear scan of the model.

use kafgres_log::storage::memory::{CrashMode, MemStorage};
use kafgres_log::{LogConfig, LogError, PartitionLog, RetentionConfig};
use kafgres_record::BatchHeader;
use proptest::prelude::*;

use crate::common::*;

#[derive(Debug, Clone)]
enum Op {
    Append { records: usize, value_len: usize, ts: i64, epoch_bump: u8 },
    Flush,
    Checkpoint,
    Crash { mode: u8, seed: u64 },
    Reopen,
    DeleteRecords { fraction: u8 },
    RetainBytes { bytes: u16 },
    Query { pick: u16 },
    Truncate { fraction: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (1usize..4, 0usize..300, 900i64..1_100, prop_oneof![9 => Just(0u8), 1 => 1u8..3])
            .prop_map(|(records, value_len, ts, epoch_bump)| Op::Append { records, value_len, ts, epoch_bump }),
        2 => Just(Op::Flush),
        1 => Just(Op::Checkpoint),
        2 => (0u8..3, any::<u64>()).prop_map(|(mode, seed)| Op::Crash { mode, seed }),
        1 => Just(Op::Reopen),
        1 => any::<u8>().prop_map(|fraction| Op::DeleteRecords { fraction }),
        1 => (1_000u16..8_000).prop_map(|bytes| Op::RetainBytes { bytes }),
        3 => any::<u16>().prop_map(|pick| Op::Query { pick }),
        1 => any::<u8>().prop_map(|fraction| Op::Truncate { fraction }),
    ]
}

#[derive(Debug, Clone)]
struct ModelBatch {
    bytes: Vec<u8>,
    header: BatchHeader,
    /// (offset, timestamp) of each record.
    records: Vec<(i64, i64)>,
}

#[derive(Default)]
struct Model {
    batches: Vec<ModelBatch>,
    durable: usize,
    log_start: i64,
    epoch: i32,
    /// The leader epoch history: (epoch, start), by Kafka's rules.
    epochs: Vec<(i32, i64)>,
}

impl Model {
    fn end(&self) -> i64 {
        self.batches.last().map_or(0, |b| b.header.next_offset())
    }

    fn durable_end(&self) -> i64 {
        self.batches[..self.durable].last().map_or(0, |b| b.header.next_offset())
    }

    fn visible(&self) -> impl Iterator<Item = &ModelBatch> {
        self.batches.iter().filter(|b| b.header.last_offset() >= self.log_start)
    }

    fn note_epoch(&mut self, epoch: i32, base_offset: i64) {
        match self.epochs.last() {
            Some(&(e, _)) if e >= epoch => {}
            // An epoch that began at the log end and wrote nothing is replaced.
            Some(&(_, start)) if start == base_offset => *self.epochs.last_mut().unwrap() = (epoch, base_offset),
            _ => self.epochs.push((epoch, base_offset)),
        }
    }

    fn epochs_from_start(&mut self) {
        if let Some(i) = self.epochs.iter().rposition(|e| e.1 <= self.log_start) {
            let epoch = self.epochs[i].0;
            self.epochs.drain(..=i);
            self.epochs.insert(0, (epoch, self.log_start));
        }
    }

    fn records(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.visible().flat_map(|b| b.records.iter().copied()).filter(|(o, _)| *o >= self.log_start)
    }
}

fn config() -> LogConfig {
    LogConfig { segment_bytes_max: 1_500, index_interval_bytes: 200, ..LogConfig::default() }
}

fn check(log: &PartitionLog, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(log.next_offset(), model.end());
    prop_assert_eq!(log.log_start_offset(), model.log_start);
    let got = read_all(log);
    let want: Vec<&ModelBatch> = model.visible().collect();
    prop_assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        prop_assert_eq!(&g.bytes, &w.bytes);
    }
    check_invariants(log);
    prop_assert_eq!(epochs_of(log), model.epochs.clone());
    if let Some(&(latest, _)) = model.epochs.last() {
        prop_assert_eq!(log.end_offset_for_epoch(latest), (latest, model.end().max(model.log_start)));
    }
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut storage = MemStorage::new();
    let (mut log, _) = open(&storage, config());
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Append { records, value_len, ts, epoch_bump } => {
                let active = log.segments().last().unwrap().base_offset();
                model.epoch += i32::from(epoch_bump);
                let values: Vec<Vec<u8>> =
                    (0..records).map(|i| vec![(ts as u8).wrapping_add(i as u8); value_len]).collect();
                let bytes = batch_of(&values, ts, kafgres_record::build::ProducerStamp::NONE);
                let r = append_at_epoch(&mut log, &bytes, model.epoch).unwrap();
                model.note_epoch(model.epoch, r.base_offset);
                if log.segments().last().unwrap().base_offset() != active {
                    model.durable = model.batches.len();
                }
                let bytes = log.read(r.base_offset, 1, log.end_position(), true).unwrap().read_to_vec().unwrap();
                let header = BatchHeader::parse(&bytes).unwrap();
                let records = (0..records as i64).map(|i| (r.base_offset + i, ts + i)).collect();
                model.batches.push(ModelBatch { bytes, header, records });
            }
            Op::Flush => {
                log.flush().unwrap();
                model.durable = model.batches.len();
            }
            Op::Checkpoint => {
                log.checkpoint().unwrap();
                model.durable = model.batches.len();
            }
            Op::Reopen => {
                log.checkpoint().unwrap();
                drop(log);
                let (reopened, report) = open(&storage, config());
                prop_assert_eq!(report.scanned_bytes(), 0);
                log = reopened;
                model.durable = model.batches.len();
            }
            Op::Crash { mode, seed } => {
                let mode = match mode {
                    0 => CrashMode::DropUnsynced,
                    1 => CrashMode::KeepUnsynced,
                    _ => CrashMode::Torn { seed },
                };
                drop(log);
                storage = storage.crash(mode);
                let (reopened, _) = open(&storage, config());
                log = reopened;
                let got = read_all(&log);
                let skipped = model.batches.len() - model.visible().count();
                let want: Vec<&ModelBatch> = model.visible().collect();
                prop_assert!(
                    skipped + got.len() >= model.durable,
                    "{} recovered, {} durable",
                    skipped + got.len(),
                    model.durable
                );
                prop_assert!(got.len() <= want.len());
                if mode == CrashMode::KeepUnsynced {
                    prop_assert_eq!(got.len(), want.len());
                }
                for (g, w) in got.iter().zip(&want) {
                    prop_assert_eq!(&g.bytes, &w.bytes);
                }
                model.batches.truncate(skipped + got.len());
                model.durable = model.batches.len();
                // Stored before its batches: an epoch outlives a crash that
                // took them, at the log end.
                let end = model.end().max(model.log_start);
                model.epochs.retain(|e| e.1 <= end);
            }
            Op::DeleteRecords { fraction } => {
                // The broker bounds DeleteRecords by the high watermark,
                // which is durable.
                let span = (model.durable_end() - model.log_start).max(0);
                let target = model.log_start + span * i64::from(fraction) / 255;
                prop_assert_eq!(log.delete_records(target).unwrap(), target.max(model.log_start));
                model.log_start = model.log_start.max(target);
                model.epochs_from_start();
            }
            Op::RetainBytes { bytes } => {
                let before = log.size_bytes();
                let report = log
                    .apply_retention(0, &RetentionConfig { retention_ms: -1, retention_bytes: i64::from(bytes) })
                    .unwrap();
                prop_assert!(
                    log.size_bytes() >= i64::from(bytes) as u64
                        || report.deleted.is_empty()
                        || log.segments().len() == 1
                );
                prop_assert_eq!(before - log.size_bytes(), report.deleted_bytes());
                prop_assert!(log.log_start_offset() >= model.log_start);
                model.log_start = log.log_start_offset();
                model.epochs_from_start();
            }
            Op::Truncate { fraction } => {
                let target = model.log_start + (model.end() - model.log_start) * i64::from(fraction) / 255;
                let kept = model.batches.iter().filter(|b| b.header.last_offset() < target).count();
                let new_end = model.batches[..kept].last().map_or(0, |b| b.header.next_offset());
                let log_end = log.next_offset();
                match log.truncate_to(target, 0) {
                    Ok(end) => {
                        prop_assert_eq!(end, new_end);
                        // A cut makes everything kept durable before it
                        // returns; a target at or past the end changes nothing.
                        if target < log_end {
                            model.batches.truncate(kept);
                            model.durable = kept;
                            model.epochs.retain(|e| e.1 < new_end);
                        }
                    }
                    Err(LogError::TruncationRefused { .. }) => {
                        prop_assert!(new_end < model.log_start, "refused a cut to {} above the log start", new_end);
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("truncating to {target}: {e}"))),
                }
            }
            Op::Query { pick } => {
                let end = log.end_position();
                if model.end() > model.log_start {
                    let offset = model.log_start + i64::from(pick) % (model.end() - model.log_start);
                    let bytes = log.read(offset, 1, end, true).unwrap().read_to_vec().unwrap();
                    let holder = model.batches.iter().find(|b| b.header.last_offset() >= offset).unwrap();
                    prop_assert_eq!(&bytes[..holder.bytes.len()], &holder.bytes[..]);
                }
                let target = 890 + i64::from(pick % 220);
                let want = model.records().find(|&(_, ts)| ts >= target);
                prop_assert_eq!(log.offset_for_timestamp(target, end).unwrap(), want, "timestamp {}", target);
                let max = model.records().fold(
                    None,
                    |best: Option<(i64, i64)>, r| if best.is_none_or(|b| r.1 > b.1) { Some(r) } else { best },
                );
                prop_assert_eq!(log.offset_of_max_timestamp(end).unwrap(), max);
            }
        }
        check(&log, &model)?;
    }
    Ok(())
}

/// 96 cases by default (a few seconds); `PROPTEST_CASES=5000` for a soak.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(96)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn the_log_matches_its_model_through_crashes(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops)?;
    }
}
