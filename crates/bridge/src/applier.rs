//! The applier: committed SQL transactions become records in their
//! partitions, exactly once, through the broker's ordinary Produce path.
//!
//! It is an idempotent Kafka producer with one producer id for its whole
//! life (kept in its [`Checkpoint`]). Every record sent from SQL gets a
//! sequence number that follows from the commit order alone: the records of
//! a partition are numbered one after another, transaction after transaction,
//! from the checkpoint's next sequence. So the same transactions always get
//! the same sequences, however a round happens to group them into batches,
//! and after a restart the applier asks the broker how far its sequences
//! reached in each partition (DescribeProducers) and sends only what is
//! missing: nothing is written twice, nothing skipped.
//!
//! Produce's rules (size limits, timestamps, LogAppendTime, compaction's
//! keys, durability under the flush policy and the standbys) are the broker's,
//! applied to these batches as to any client's. The applier only keeps each
//! batch under the topic's `max.message.bytes`.
//!
//! The broker is reached through the [`Broker`] port (a `kafgres-client`
//! connection in production, a model in tests). [`Applier::apply`] returns
//! only once every record of the round is acknowledged (acks=all); the caller
//! then stores the checkpoint and confirms the WAL it read.

use std::collections::{BTreeMap, BTreeSet};

use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};

use crate::assembly::CommittedTxn;
use crate::message::{OffsetCommitMessage, SendMessage};

/// A sequence this far behind the last one written is already in the log,
/// not a gap (sequences wrap at `i32::MAX`, as Kafka's do).
const REPLAY_WINDOW: i64 = 1 << 30;
/// How often one round may find the broker's producer state different from
/// what it planned (a resync) before it gives up until the next try.
const RESYNCS_PER_ROUND_MAX: usize = 4;

/// The applier's durable progress, stored by the extension in Postgres
/// (`kafgres.sql_bridge`) after each applied round, so it reaches standbys
/// with the rest of the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Every transaction whose commit record ends at or before this is in the log.
    pub applied_lsn: u64,
    /// Where reading must resume to rebuild the transactions open at `applied_lsn`.
    pub restart_lsn: u64,
    /// -1 until the applier has reserved one (InitProducerId).
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The next sequence per (topic, partition).
    pub next_sequence: BTreeMap<(String, i32), i32>,
}

impl Checkpoint {
    /// A checkpoint that starts reading at `lsn` with no producer yet.
    pub fn starting_at(lsn: u64) -> Checkpoint {
        Checkpoint {
            applied_lsn: lsn,
            restart_lsn: lsn,
            producer_id: -1,
            producer_epoch: 0,
            next_sequence: BTreeMap::new(),
        }
    }
}

/// One batch for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingBatch {
    pub topic: String,
    pub partition: i32,
    pub base_sequence: i32,
    pub record_count: i32,
    /// An encoded v2 batch (base offset 0, stamped with the producer).
    pub bytes: Vec<u8>,
}

/// The broker's answer for one partition of a Produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProduceOutcome {
    /// Written (or recognised as a retry of a batch already written) and
    /// durable as acks=all requires.
    Acknowledged,
    /// The topic or partition does not exist (deleted after the send).
    UnknownPartition,
    /// The broker's sequence for this producer and partition is not the one
    /// planned: resynchronise.
    OutOfOrderSequence,
    /// The producer id or epoch is no longer valid for this partition.
    ProducerFenced,
    /// The batch exceeds the topic's `max.message.bytes` (lowered since the
    /// applier read it): nothing was written; plan with the new limit.
    TooLarge,
    /// Any other Kafka error code: the round fails and is tried again.
    Failed(i16),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
    /// The broker cannot be reached or the connection broke: try later.
    #[error("the broker is unreachable: {0}")]
    Unreachable(String),
    /// A request was answered with an error for the request as a whole.
    #[error("{api} failed: {reason}")]
    Refused { api: &'static str, reason: String },
}

/// What the applier needs from the broker (a Kafka connection in production).
pub trait Broker {
    /// A new producer id and epoch (InitProducerId without a transactional id).
    fn init_producer_id(&mut self) -> Result<(i64, i16), BrokerError>;
    /// The last sequence `producer_id` wrote to each partition (DescribeProducers):
    /// `None` where the partition holds no state for it, or does not exist.
    fn last_sequences(
        &mut self,
        producer_id: i64,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Option<i32>>, BrokerError>;
    /// Produces at most one batch per partition with acks=all, in one request;
    /// one outcome per batch, in order.
    fn produce(&mut self, batches: &[OutgoingBatch]) -> Result<Vec<ProduceOutcome>, BrokerError>;
    /// The topic's `max.message.bytes`; `None` when the topic does not exist.
    fn message_bytes_max(&mut self, topic: &str) -> Result<Option<usize>, BrokerError>;
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Broker(#[from] BrokerError),
    #[error("{topic}-{partition} refused the batch with Kafka error {code}")]
    Refused { topic: String, partition: i32, code: i16 },
    #[error("the broker's producer state for {topic}-{partition} kept disagreeing with the plan")]
    Unsettled { topic: String, partition: i32 },
}

/// What one applied round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundReport {
    pub transactions: usize,
    pub records_appended: u64,
    /// Records found already in the log (written before a restart).
    pub records_already_present: u64,
    /// Records dropped because their topic or partition no longer exists.
    pub records_dropped: u64,
    /// Records the log had lost although the checkpoint counted them
    /// (`kafgres.flush_policy = page_cache` and a crash): reported, not re-sent.
    pub records_lost_by_log: u64,
    /// Offsets committed from SQL in these transactions.
    pub offsets: Vec<OffsetCommitMessage>,
}

/// A record of the round with its planned sequence.
struct Planned<'a> {
    sequence: i32,
    send: &'a SendMessage,
}

/// The applier's state between rounds: the checkpoint as of the last applied
/// round, and which partitions' broker-side sequences are known to match it.
pub struct Applier {
    checkpoint: Checkpoint,
    /// Partitions whose last sequence on the broker is known (written by this
    /// applier since it started, or read with DescribeProducers).
    synced: BTreeSet<(String, i32)>,
    /// The producer id was reserved by this applier since it started and the
    /// connection has not broken since: the broker holds exactly what this
    /// applier wrote with it, so nothing needs reading back.
    producer_is_fresh: bool,
}

impl Applier {
    pub fn new(checkpoint: Checkpoint) -> Applier {
        Applier { checkpoint, synced: BTreeSet::new(), producer_is_fresh: false }
    }

    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// Marks the WAL read so far as applied (after a round, or when the WAL
    /// read held no transaction to apply); the caller stores the result.
    pub fn advance(&mut self, applied_lsn: u64, restart_lsn: u64) {
        debug_assert!(restart_lsn <= applied_lsn.max(restart_lsn));
        self.checkpoint.applied_lsn = self.checkpoint.applied_lsn.max(applied_lsn);
        self.checkpoint.restart_lsn = restart_lsn;
    }

    /// Forgets what is known of the broker (after a reconnect: the broker may
    /// have restarted and lost unflushed records under a relaxed flush policy).
    pub fn resync(&mut self) {
        self.synced.clear();
        self.producer_is_fresh = false;
    }

    /// Appends every record of `txns` (in commit order, all committed after
    /// the checkpoint) and waits for their acknowledgement. On error the
    /// checkpoint is unchanged: the same transactions are passed again later
    /// and whatever was written meanwhile is recognised.
    pub fn apply(&mut self, broker: &mut impl Broker, txns: &[CommittedTxn]) -> Result<RoundReport, ApplyError> {
        let txns: Vec<&CommittedTxn> = txns.iter().filter(|t| t.end_lsn > self.checkpoint.applied_lsn).collect();
        let mut report = RoundReport { transactions: txns.len(), ..RoundReport::default() };
        report.offsets = txns.iter().flat_map(|t| t.offsets.iter().cloned()).collect();
        if txns.iter().all(|t| t.sends.is_empty()) {
            return Ok(report);
        }
        if self.checkpoint.producer_id < 0 {
            self.new_producer(broker)?;
        }
        for _ in 0..RESYNCS_PER_ROUND_MAX {
            let mut attempt = RoundReport::default();
            match self.try_round(broker, &txns, &mut attempt)? {
                RoundEnd::Done(next_sequence) => {
                    self.checkpoint.next_sequence = next_sequence;
                    report.records_appended = attempt.records_appended;
                    report.records_already_present = attempt.records_already_present;
                    report.records_dropped = attempt.records_dropped;
                    report.records_lost_by_log += attempt.records_lost_by_log;
                    return Ok(report);
                }
                RoundEnd::NewProducer { lost } => {
                    report.records_lost_by_log += lost;
                    self.new_producer(broker)?;
                }
                RoundEnd::Resync => {}
            }
        }
        let (topic, partition) =
            txns.iter().flat_map(|t| t.sends.iter()).map(|s| (s.topic.clone(), s.partition)).next().unwrap_or_default();
        Err(ApplyError::Unsettled { topic, partition })
    }

    /// Starts over with a new producer id: every partition's sequence from 0.
    fn new_producer(&mut self, broker: &mut impl Broker) -> Result<(), ApplyError> {
        let (id, epoch) = broker.init_producer_id()?;
        log::info!("the SQL bridge produces as producer id {id} (epoch {epoch})");
        self.checkpoint.producer_id = id;
        self.checkpoint.producer_epoch = epoch;
        self.checkpoint.next_sequence.clear();
        // A fresh producer id has no state anywhere: nothing to read back.
        self.synced.clear();
        self.producer_is_fresh = true;
        Ok(())
    }

    fn try_round(
        &mut self,
        broker: &mut impl Broker,
        txns: &[&CommittedTxn],
        report: &mut RoundReport,
    ) -> Result<RoundEnd, ApplyError> {
        // The topics' limits first: a record that can never fit its topic's
        // batch (its max.message.bytes lowered below it since the send) is
        // dropped here, before it takes a sequence, so the ones after it
        // still follow on (and a replay decides alike).
        let mut limits: BTreeMap<String, Option<usize>> = BTreeMap::new();
        for send in txns.iter().flat_map(|t| t.sends.iter()) {
            if !limits.contains_key(&send.topic) {
                limits.insert(send.topic.clone(), broker.message_bytes_max(&send.topic)?);
            }
        }
        let room = |topic: &str| {
            limits.get(topic).copied().flatten().map(|l| l.saturating_sub(kafgres_record::BATCH_OVERHEAD_BYTES_MAX))
        };
        // Sequences follow from the commit order alone.
        let mut next_sequence = self.checkpoint.next_sequence.clone();
        let mut planned: BTreeMap<(String, i32), Vec<Planned<'_>>> = BTreeMap::new();
        for txn in txns {
            for send in &txn.sends {
                if room(&send.topic).is_some_and(|room| send.estimated_record_bytes() > room) {
                    report.records_dropped += 1;
                    log::warn!(
                        "dropping a record of about {} bytes sent from SQL to {}-{} (committed at {:X}/{:X}): it is \
                         larger than the topic's max.message.bytes now allows",
                        send.estimated_record_bytes(),
                        send.topic,
                        send.partition,
                        txn.end_lsn >> 32,
                        txn.end_lsn & 0xffff_ffff
                    );
                    continue;
                }
                let key = (send.topic.clone(), send.partition);
                let next = next_sequence.entry(key.clone()).or_insert(0);
                planned.entry(key).or_default().push(Planned { sequence: *next, send });
                *next = next_after(*next, 1);
            }
        }
        // After a restart, a reconnect or a refusal: what is already there?
        let unsynced: Vec<(String, i32)> = if self.producer_is_fresh {
            Vec::new()
        } else {
            planned.keys().filter(|k| !self.synced.contains(*k)).cloned().collect()
        };
        if !unsynced.is_empty() {
            let last = broker.last_sequences(self.checkpoint.producer_id, &unsynced)?;
            for (key, last) in unsynced.iter().zip(last) {
                self.synced.insert(key.clone());
                let (Some(records), Some(last)) = (planned.get_mut(key), last) else {
                    // No state for this producer there: nothing of it was
                    // written (or the topic is new); send everything.
                    continue;
                };
                // Planning starts at the checkpoint's next sequence, so the
                // checkpoint counts everything up to the one before it.
                let checkpointed_last = previous(records.first().map_or(0, |r| r.sequence));
                if last != checkpointed_last && is_at_or_behind(last, checkpointed_last) {
                    let lost = sequence_distance(last, checkpointed_last);
                    log::warn!(
                        "{}-{}: the log holds the SQL bridge's records up to sequence {last}, but up to \
                         {checkpointed_last} were acknowledged: {lost} record(s) sent from SQL were lost by the \
                         log (a crash under kafgres.flush_policy = page_cache?); continuing with a new producer id",
                        key.0,
                        key.1,
                    );
                    return Ok(RoundEnd::NewProducer { lost });
                }
                // Written before a restart: what lies at or behind `last`.
                let before = records.len();
                records.retain(|r| !is_at_or_behind(r.sequence, last));
                report.records_already_present += (before - records.len()) as u64;
            }
        }
        planned.retain(|_, records| !records.is_empty());
        // At most one batch per partition and request; a partition with more
        // than fits in one batch takes several requests, in order.
        let mut queues: BTreeMap<(String, i32), Vec<Vec<&Planned<'_>>>> = BTreeMap::new();
        for (key, records) in &planned {
            match room(&key.0) {
                None => {
                    report.records_dropped += records.len() as u64;
                    log::warn!(
                        "dropping {} record(s) sent from SQL to {}-{}: the topic no longer exists",
                        records.len(),
                        key.0,
                        key.1
                    );
                }
                Some(room) => {
                    queues.insert(key.clone(), chunks_under(records, room));
                }
            }
        }
        let stamp_of = |sequence: i32| ProducerStamp {
            producer_id: self.checkpoint.producer_id,
            producer_epoch: self.checkpoint.producer_epoch,
            base_sequence: sequence,
        };
        let mut turn = 0;
        loop {
            let mut batches = Vec::new();
            for ((topic, partition), chunks) in &queues {
                let Some(chunk) = chunks.get(turn) else { continue };
                let records: Vec<NewRecord> = chunk
                    .iter()
                    .map(|r| NewRecord {
                        key: r.send.key.clone(),
                        value: r.send.value.clone(),
                        headers: r.send.headers.clone(),
                        timestamp_ms: r.send.timestamp_ms,
                    })
                    .collect();
                let base_sequence = chunk[0].sequence;
                batches.push(OutgoingBatch {
                    topic: topic.clone(),
                    partition: *partition,
                    base_sequence,
                    record_count: records.len() as i32,
                    bytes: encode_batch(&records, stamp_of(base_sequence)),
                });
            }
            if batches.is_empty() {
                return Ok(RoundEnd::Done(next_sequence));
            }
            let outcomes = broker.produce(&batches)?;
            if outcomes.len() != batches.len() {
                return Err(ApplyError::Broker(BrokerError::Refused {
                    api: "Produce",
                    reason: format!("{} answers for {} partitions", outcomes.len(), batches.len()),
                }));
            }
            let mut resync = false;
            for (batch, outcome) in batches.iter().zip(outcomes) {
                let key = (batch.topic.clone(), batch.partition);
                match outcome {
                    ProduceOutcome::Acknowledged => report.records_appended += batch.record_count as u64,
                    ProduceOutcome::UnknownPartition => {
                        // Deleted since the send: this and its later chunks go.
                        let dropped: usize = queues.get(&key).map_or(0, |c| c.iter().skip(turn).map(Vec::len).sum());
                        report.records_dropped += dropped as u64;
                        log::warn!(
                            "dropping {dropped} record(s) sent from SQL to {}-{}: the partition no longer exists",
                            batch.topic,
                            batch.partition
                        );
                        if let Some(chunks) = queues.get_mut(&key) {
                            chunks.truncate(turn + 1);
                        }
                    }
                    // The topic's limit went down since it was read: plan again.
                    ProduceOutcome::TooLarge => resync = true,
                    ProduceOutcome::OutOfOrderSequence => {
                        self.synced.remove(&key);
                        self.producer_is_fresh = false;
                        resync = true;
                    }
                    ProduceOutcome::ProducerFenced => return Ok(RoundEnd::NewProducer { lost: 0 }),
                    ProduceOutcome::Failed(code) => {
                        // Whether it was written is unknown: read it back next time.
                        self.synced.remove(&key);
                        self.producer_is_fresh = false;
                        return Err(ApplyError::Refused {
                            topic: batch.topic.clone(),
                            partition: batch.partition,
                            code,
                        });
                    }
                }
            }
            if resync {
                return Ok(RoundEnd::Resync);
            }
            turn += 1;
        }
    }
}

enum RoundEnd {
    Done(BTreeMap<(String, i32), i32>),
    Resync,
    NewProducer { lost: u64 },
}

/// Splits `records` into runs whose estimated size stays under `bytes_max`
/// (each run has at least one record).
fn chunks_under<'p, 'a>(records: &'p [Planned<'a>], bytes_max: usize) -> Vec<Vec<&'p Planned<'a>>> {
    let mut chunks: Vec<Vec<&Planned<'_>>> = Vec::new();
    let mut size = 0;
    for r in records {
        let bytes = r.send.estimated_record_bytes();
        match chunks.last_mut() {
            Some(chunk) if size + bytes <= bytes_max => chunk.push(r),
            _ => {
                chunks.push(vec![r]);
                size = 0;
            }
        }
        size += bytes;
    }
    chunks
}

const SEQUENCE_MODULUS: i64 = i32::MAX as i64 + 1;

fn next_after(sequence: i32, count: i32) -> i32 {
    ((i64::from(sequence) + i64::from(count)) % SEQUENCE_MODULUS) as i32
}

fn previous(sequence: i32) -> i32 {
    ((i64::from(sequence) - 1).rem_euclid(SEQUENCE_MODULUS)) as i32
}

/// How far `to` lies ahead of `from` on the sequence circle.
fn sequence_distance(from: i32, to: i32) -> u64 {
    (i64::from(to) - i64::from(from)).rem_euclid(SEQUENCE_MODULUS) as u64
}

/// Whether `sequence` is `last` or lies behind it, within the replay window.
fn is_at_or_behind(sequence: i32, last: i32) -> bool {
    (sequence_distance(sequence, last) as i64) < REPLAY_WINDOW
}

#[cfg(test)]
mod tests;
