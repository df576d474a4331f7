//! The applier: appends committed SQL transactions to the partition logs
//! exactly once.
//!
//! It is an idempotent producer with its own producer id. Each (transaction,
//! partition) becomes one batch (more only when the records exceed the
//! topic's `max.message.bytes`), in commit order, whose base sequence is the
//! partition's next sequence in the [`ApplierCheckpoint`]. The same input
//! therefore always yields the same batches with the same sequences: when the
//! extension replays transactions after a crash, the partition's producer
//! state (recovered from the log) recognises each one already written
//! (`Duplicate`, or an `OutOfOrder` sequence *behind* the expected one once it
//! fell out of the five-batch window), and nothing is written twice.
//!
//! [`SqlApplier::apply`] returns only after the batches are durable and the
//! checkpoint is stored; the caller confirms the replication slot after that.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use kafgres_log::SequenceCheck;
use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};
use kafgres_record::{set_log_append_time, validate_batches, BATCH_OVERHEAD_BYTES_MAX};

use super::checkpoint::{ApplierCheckpoint, CheckpointError};
use super::message::{CommittedTxn, SendMessage};
use crate::catalog::CommittedOffset;
use crate::partition::{AppendOutcome, Partition};
use crate::server::BrokerContext;
use crate::topic_config::RecordPolicy;

/// A sequence this far behind the expected one is an old batch replayed, not
/// a gap (sequences wrap at i32::MAX).
const REPLAY_WINDOW: i64 = 1 << 30;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("cannot reserve a producer id for the SQL applier: {0}")]
    ProducerId(crate::catalog::CatalogError),
    #[error("appending to {topic}-{partition} failed: {reason}")]
    Append { topic: String, partition: i32, reason: String },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

/// What one call to [`SqlApplier::apply`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// The checkpoint's LSN after the call: confirm the slot up to here.
    pub applied_lsn: u64,
    pub transactions: usize,
    pub records_appended: u64,
    /// Batches found already in the log (replayed after a crash).
    pub batches_already_present: u64,
    /// Records dropped because their topic or partition no longer exists.
    pub records_dropped: u64,
    pub offsets_committed: usize,
}

pub struct SqlApplier {
    log_dir: PathBuf,
    checkpoint: ApplierCheckpoint,
}

impl SqlApplier {
    /// Loads the checkpoint from the broker's log directory.
    pub fn open(log_dir: PathBuf) -> Result<SqlApplier, ApplyError> {
        let checkpoint = ApplierCheckpoint::load(&log_dir)?;
        Ok(SqlApplier { log_dir, checkpoint })
    }

    pub fn applied_lsn(&self) -> u64 {
        self.checkpoint.applied_lsn
    }

    pub fn producer(&self) -> (i64, i16) {
        (self.checkpoint.producer_id, self.checkpoint.producer_epoch)
    }

    /// Appends every transaction not yet applied, waits until they are
    /// durable, applies committed offsets to the group coordinator and stores
    /// the checkpoint. On error nothing is confirmed: the same transactions
    /// are passed again later and what was written is recognised.
    pub async fn apply(&mut self, ctx: &BrokerContext, txns: &[CommittedTxn]) -> Result<ApplyReport, ApplyError> {
        let mut report = ApplyReport::default();
        let pending: Vec<&CommittedTxn> = txns.iter().filter(|t| t.end_lsn > self.checkpoint.applied_lsn).collect();
        let Some(last) = pending.last() else {
            report.applied_lsn = self.checkpoint.applied_lsn;
            return Ok(report);
        };
        let last_lsn = last.end_lsn;
        if self.checkpoint.producer_id < 0 && pending.iter().any(|t| !t.sends.is_empty()) {
            let id = ctx.producer_ids.next(&*ctx.catalog).await.map_err(ApplyError::ProducerId)?;
            log::info!("the SQL applier produces as producer id {id}");
            self.checkpoint.producer_id = id;
            self.checkpoint.producer_epoch = 0;
        }
        let mut touched: BTreeMap<(String, i32), (Arc<Partition>, i64)> = BTreeMap::new();
        let mut offsets = Vec::new();
        for txn in &pending {
            report.transactions += 1;
            for (topic, partition, records) in by_partition(&txn.sends) {
                self.append_records(ctx, topic, partition, &records, &mut touched, &mut report)?;
            }
            offsets.extend(txn.offsets.iter().map(|o| CommittedOffset {
                group_id: o.group_id.clone(),
                topic: o.topic.clone(),
                partition: o.partition,
                offset: o.offset,
                leader_epoch: -1,
                metadata: None,
                commit_timestamp_ms: txn.commit_time_ms,
            }));
        }
        for ((topic, index), (partition, end)) in &touched {
            partition.wait_durable(*end).await.map_err(|e| ApplyError::Append {
                topic: topic.clone(),
                partition: *index,
                reason: e.to_string(),
            })?;
        }
        report.offsets_committed = offsets.len();
        if !offsets.is_empty() {
            ctx.groups.load_committed_offsets(offsets);
        }
        self.checkpoint.applied_lsn = last_lsn;
        self.checkpoint.store(&self.log_dir)?;
        ctx.config.metrics.sql_rounds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ctx.config.metrics.sql_records.fetch_add(report.records_appended, std::sync::atomic::Ordering::Relaxed);
        report.applied_lsn = last_lsn;
        Ok(report)
    }

    fn append_records(
        &mut self,
        ctx: &BrokerContext,
        topic: &str,
        index: i32,
        records: &[&SendMessage],
        touched: &mut BTreeMap<(String, i32), (Arc<Partition>, i64)>,
        report: &mut ApplyReport,
    ) -> Result<(), ApplyError> {
        let found = ctx.topic(topic).and_then(|t| {
            let policy = RecordPolicy::from_configs(&t.configs, ctx.config.message_bytes_max);
            t.partition(index).map(|p| (Arc::clone(p), policy))
        });
        let Some((partition, policy)) = found else {
            log::warn!(
                "dropping {} record(s) sent from SQL to {topic}-{index}: the partition no longer exists",
                records.len()
            );
            report.records_dropped += records.len() as u64;
            return Ok(());
        };
        let key = (topic.to_string(), index);
        for chunk in chunks_under(records, policy.message_bytes_max.saturating_sub(BATCH_OVERHEAD_BYTES_MAX)) {
            let end = self.append_chunk(&partition, &key, chunk, &policy, report)?;
            let slot = touched.entry(key.clone()).or_insert_with(|| (Arc::clone(&partition), 0));
            slot.1 = slot.1.max(end);
        }
        Ok(())
    }

    /// Appends one batch; returns the offset just past it.
    fn append_chunk(
        &mut self,
        partition: &Partition,
        key: &(String, i32),
        records: &[&SendMessage],
        policy: &RecordPolicy,
        report: &mut ApplyReport,
    ) -> Result<i64, ApplyError> {
        let failed = |reason: String| ApplyError::Append { topic: key.0.clone(), partition: key.1, reason };
        let new_records: Vec<NewRecord> = records
            .iter()
            .map(|r| NewRecord {
                key: r.key.clone(),
                value: r.value.clone(),
                headers: r.headers.clone(),
                timestamp_ms: r.timestamp_ms,
            })
            .collect();
        let count = new_records.len() as i32;
        // At most two tries: the second after starting a new epoch when the
        // log has lost what the checkpoint says was written.
        for _ in 0..2 {
            let base_sequence = self.checkpoint.next_sequence.get(key).copied().unwrap_or(0);
            let stamp = ProducerStamp {
                producer_id: self.checkpoint.producer_id,
                producer_epoch: self.checkpoint.producer_epoch,
                base_sequence,
            };
            let mut bytes = encode_batch(&new_records, stamp);
            let now_ms = crate::now_ms();
            if policy.log_append_time {
                set_log_append_time(&mut bytes, now_ms);
            }
            let headers = validate_batches(&bytes).map_err(|e| failed(format!("built an invalid batch: {e}")))?.headers;
            let outcome = partition.append(&bytes, &headers, now_ms).map_err(|e| failed(e.to_string()))?;
            let end = match outcome {
                AppendOutcome::Appended(appended) => {
                    report.records_appended += count as u64;
                    appended.last_offset + 1
                }
                AppendOutcome::Duplicate { last_offset, .. } => {
                    report.batches_already_present += 1;
                    last_offset + 1
                }
                AppendOutcome::Refused(SequenceCheck::OutOfOrder { expected_seq, received_seq })
                    if is_behind(received_seq, expected_seq) =>
                {
                    // Written before a crash and since pushed out of the
                    // duplicate window by later batches: already present.
                    report.batches_already_present += 1;
                    partition.log_end_offset()
                }
                AppendOutcome::Refused(check) => {
                    log::warn!(
                        "SQL applier batch for {}-{} refused ({check:?}): the log has lost records the applier \
                         had written (fsync relaxed?); starting producer epoch {}",
                        key.0,
                        key.1,
                        self.checkpoint.producer_epoch.wrapping_add(1)
                    );
                    self.checkpoint.producer_epoch = self.checkpoint.producer_epoch.wrapping_add(1).max(0);
                    self.checkpoint.next_sequence.clear();
                    continue;
                }
            };
            self.checkpoint.next_sequence.insert(key.clone(), next_sequence(base_sequence, count));
            return Ok(end);
        }
        Err(failed("refused twice by the partition's producer state".into()))
    }
}

/// The records of one transaction grouped by partition, each group in the
/// transaction's order, groups in order of first appearance.
fn by_partition(sends: &[SendMessage]) -> Vec<(&str, i32, Vec<&SendMessage>)> {
    let mut groups: Vec<(&str, i32, Vec<&SendMessage>)> = Vec::new();
    for send in sends {
        match groups.iter_mut().find(|(t, p, _)| *t == send.topic && *p == send.partition) {
            Some(group) => group.2.push(send),
            None => groups.push((&send.topic, send.partition, vec![send])),
        }
    }
    groups
}

/// Splits `records` into runs whose estimated size stays under `bytes_max`
/// (each run has at least one record). Deterministic: a replay splits alike.
fn chunks_under<'a, 'b>(records: &'b [&'a SendMessage], bytes_max: usize) -> Vec<&'b [&'a SendMessage]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut size = 0;
    for (i, r) in records.iter().enumerate() {
        let bytes = r.estimated_record_bytes();
        if i > start && size + bytes > bytes_max {
            chunks.push(&records[start..i]);
            start = i;
            size = 0;
        }
        size += bytes;
    }
    if start < records.len() {
        chunks.push(&records[start..]);
    }
    chunks
}

fn next_sequence(base: i32, count: i32) -> i32 {
    let next = i64::from(base) + i64::from(count);
    (next % (i64::from(i32::MAX) + 1)) as i32
}

/// Whether `received` lies behind `expected` on the wrapping sequence circle.
fn is_behind(received: i32, expected: i32) -> bool {
    let modulus = i64::from(i32::MAX) + 1;
    let distance = (i64::from(expected) - i64::from(received)).rem_euclid(modulus);
    distance > 0 && distance < REPLAY_WINDOW
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_wrap_like_kafka() {
        assert_eq!(next_sequence(0, 5), 5);
        assert_eq!(next_sequence(i32::MAX, 1), 0);
        assert_eq!(next_sequence(i32::MAX - 1, 3), 1);
        assert!(is_behind(3, 10));
        assert!(is_behind(i32::MAX, 2));
        assert!(!is_behind(10, 10));
        assert!(!is_behind(11, 10));
    }

    #[test]
    fn chunks_keep_order_and_respect_the_limit() {
        let big = SendMessage { value: Some(vec![0; 400]), ..SendMessage::default() };
        let records: Vec<&SendMessage> = std::iter::repeat_n(&big, 5).collect();
        let chunks = chunks_under(&records, 1000);
        assert_eq!(chunks.iter().map(|c| c.len()).collect::<Vec<_>>(), [2, 2, 1]);
        // A record bigger than the limit still goes, alone.
        assert_eq!(chunks_under(&records, 10).len(), 5);
    }
}
