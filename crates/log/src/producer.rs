//! Idempotent and transactional producer state of one partition, rebuilt
//! from the log itself.
//!
//! Per producer id: its epoch and the metadata of its last
//! [`PRODUCER_BATCHES_KEPT`] batches (first/last sequence, first/last offset,
//! max timestamp), enough to answer a retried batch with its original
//! offsets and to check that the next one is in sequence (Kafka's
//! `ProducerStateManager`); and, for transactions, the first offset of the
//! producer's open transaction in this partition. The open transactions give
//! the first unstable offset (the last stable offset is the lower of it and
//! the high watermark); each abort marker adds an entry to the list of
//! aborted transactions that `read_committed` fetches return, kept until the
//! log start passes it.
//!
//! Durability: the state is derived data. It is updated in memory on every
//! append, written to `<offset>.snapshot` (the state as of that log offset)
//! at each roll and checkpoint, and rebuilt at open from the newest snapshot
//! at or below the log end plus the batch headers after it. No snapshot, or
//! a damaged one, only means scanning headers from the log start.
//!
//! Snapshot layout (big-endian), replaced atomically like a checkpoint:
//!
//! ```text
//! magic "KGPS" | version u16 = 2 | offset i64 | producers u32
//! per producer: id i64 | epoch i16 | open transaction's first offset i64 (-1: none) | batches u8
//!   per batch:  first seq i32 | last seq i32 | first offset i64 | last offset i64 | max timestamp i64
//! aborted u32
//!   per abort:  producer id i64 | first offset i64 | last offset i64 | last stable offset i64
//! crc32c u32 of everything before it
//! ```
//!
//! Version 1 (no transactions) is still read. The aborted list lives in the
//! snapshot rather than in Kafka's per-segment `.txnindex` files: a snapshot
//! is rewritten whole at each roll, so its size (32 bytes per abort still in
//! the log) is the cost of aborts.

use std::collections::{BTreeMap, VecDeque};

use kafgres_record::BatchHeader;

use crate::checkpoint::crc32c;

/// Batches remembered per producer (matches `max.in.flight.requests.per.connection` ≤ 5).
pub const PRODUCER_BATCHES_KEPT: usize = 5;
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
const SNAPSHOT_MAGIC: &[u8; 4] = b"KGPS";
const SNAPSHOT_VERSION: u16 = 2;
const SNAPSHOT_VERSION_IDEMPOTENT_ONLY: u16 = 1;
const ABORTED_BYTES: usize = 8 * 4;
const BATCH_BYTES: usize = 4 + 4 + 8 + 8 + 8;
/// A bound on what a snapshot may claim before anything is allocated for it.
pub(crate) const SNAPSHOT_BYTES_MAX: u64 = 256 << 20;

pub fn snapshot_file_name(offset: i64) -> String {
    format!("{offset:020}{SNAPSHOT_SUFFIX}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub timestamp_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Oldest first.
    pub batches: VecDeque<BatchMetadata>,
    /// The partition's clock when this producer last appended (or when the
    /// log was opened, for state rebuilt from disk): what expiry measures.
    /// Not the batches' own timestamps, which a producer may set to any time
    /// (replaying old events must not expire it at once). Not persisted.
    pub last_seen_ms: i64,
    /// The first offset of the producer's open transaction in this partition.
    pub open_txn_first_offset: Option<i64>,
}

impl ProducerEntry {
    pub fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }

    pub fn last_offset(&self) -> Option<i64> {
        self.batches.back().map(|b| b.last_offset)
    }
}

/// What a produce of a batch should do, per Kafka's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it.
    Ok,
    /// A retry of a batch already in the log: answer success with these
    /// offsets and do not write it again.
    Duplicate { first_offset: i64, last_offset: i64 },
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (45).
    OutOfOrder { expected_seq: i32, received_seq: i32 },
    /// INVALID_PRODUCER_EPOCH (47): the batch's epoch is older than the producer's.
    InvalidEpoch { current_epoch: i16 },
    /// INVALID_TXN_STATE (48): a non-transactional batch while the producer
    /// has a transaction open in this partition.
    InvalidTxnState,
}

/// The last sequence of a batch: sequences wrap from i32::MAX to 0.
pub fn last_sequence(base_sequence: i32, last_offset_delta: i32) -> i32 {
    let last = i64::from(base_sequence) + i64::from(last_offset_delta);
    if last > i64::from(i32::MAX) {
        (last - i64::from(i32::MAX) - 1) as i32
    } else {
        last as i32
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    (last_seq == i32::MAX && next_seq == 0) || i64::from(next_seq) == i64::from(last_seq) + 1
}

/// A transaction that ended with an abort marker: `read_committed` readers
/// drop this producer's records from `first_offset` up to the marker at
/// `last_offset` (Kafka's `AbortedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The last stable offset once the abort was written.
    pub last_stable_offset: i64,
}

/// A transaction marker's effect on the producer state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnEnd {
    Commit,
    Abort,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateMap {
    producers: BTreeMap<i64, ProducerEntry>,
    /// Open transactions: first offset → producer id.
    open_txns: BTreeMap<i64, i64>,
    /// Ordered by `last_offset`.
    aborted: VecDeque<AbortedTxn>,
}

impl ProducerStateMap {
    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&i64, &ProducerEntry)> {
        self.producers.iter()
    }

    /// The first offset of the oldest open transaction, if any: no
    /// `read_committed` reader may go past it (Kafka's first unstable offset).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.open_txns.keys().next().copied()
    }

    /// The aborted transactions a `read_committed` fetch of offsets
    /// `[from, to)` must know about: those ending at or after `from` and
    /// starting before `to`, oldest first.
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        self.aborted.iter().skip(start).filter(|a| a.first_offset < to).copied().collect()
    }

    /// Every aborted transaction still in the log, oldest first.
    pub fn aborted(&self) -> impl Iterator<Item = &AbortedTxn> {
        self.aborted.iter()
    }

    /// Checks an incoming batch against the producer's state (Kafka's
    /// duplicate detection, then `ProducerAppendInfo.checkProducerEpoch` and
    /// `checkSequence`). Batches without a producer id are always `Ok`.
    pub fn check_sequence(&self, header: &BatchHeader) -> SequenceCheck {
        if header.producer_id < 0 {
            return SequenceCheck::Ok;
        }
        let Some(entry) = self.producers.get(&header.producer_id) else {
            // No state (new producer, or its batches left the log): any
            // sequence may start it.
            return SequenceCheck::Ok;
        };
        if header.is_control() {
            // A marker from an older epoch is a zombie coordinator's.
            return if header.producer_epoch < entry.epoch {
                SequenceCheck::InvalidEpoch { current_epoch: entry.epoch }
            } else {
                SequenceCheck::Ok
            };
        }
        if !header.is_transactional() && entry.open_txn_first_offset.is_some() && header.producer_epoch == entry.epoch {
            return SequenceCheck::InvalidTxnState;
        }
        let first_seq = header.base_sequence;
        if header.producer_epoch < entry.epoch {
            return SequenceCheck::InvalidEpoch { current_epoch: entry.epoch };
        }
        if header.producer_epoch > entry.epoch {
            // A bumped epoch restarts sequences at 0.
            return if first_seq == 0 {
                SequenceCheck::Ok
            } else {
                SequenceCheck::OutOfOrder { expected_seq: 0, received_seq: first_seq }
            };
        }
        let last_seq = last_sequence(first_seq, header.last_offset_delta);
        if let Some(dup) = entry.batches.iter().find(|b| b.first_seq == first_seq && b.last_seq == last_seq) {
            return SequenceCheck::Duplicate { first_offset: dup.first_offset, last_offset: dup.last_offset };
        }
        // An entry without batches (its epoch was set by a marker) expects 0.
        let expected_seq = entry.last_seq().map_or(0, |last| last_sequence(last, 1));
        if entry.last_seq().map_or(first_seq == 0, |last| in_sequence(last, first_seq)) {
            SequenceCheck::Ok
        } else {
            SequenceCheck::OutOfOrder { expected_seq, received_seq: first_seq }
        }
    }

    /// Records a batch as appended (`header` carries its assigned offsets).
    /// A newer epoch replaces the producer's batches; control batches
    /// (transaction markers, later) only move the epoch.
    pub fn record(&mut self, header: &BatchHeader) {
        self.record_at(header, 0)
    }

    /// [`ProducerStateMap::record`] at the partition's clock `now_ms`.
    pub fn record_at(&mut self, header: &BatchHeader, now_ms: i64) {
        if header.producer_id < 0 {
            return;
        }
        let entry = self.producers.entry(header.producer_id).or_insert_with(|| ProducerEntry {
            epoch: header.producer_epoch,
            batches: VecDeque::new(),
            last_seen_ms: now_ms,
            open_txn_first_offset: None,
        });
        entry.last_seen_ms = entry.last_seen_ms.max(now_ms);
        if entry.epoch != header.producer_epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        if header.is_control() || header.base_sequence < 0 {
            return;
        }
        if header.is_transactional() && entry.open_txn_first_offset.is_none() {
            entry.open_txn_first_offset = Some(header.base_offset);
            self.open_txns.insert(header.base_offset, header.producer_id);
        }
        entry.batches.push_back(BatchMetadata {
            first_seq: header.base_sequence,
            last_seq: last_sequence(header.base_sequence, header.last_offset_delta),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            timestamp_ms: header.max_timestamp,
        });
        while entry.batches.len() > PRODUCER_BATCHES_KEPT {
            entry.batches.pop_front();
        }
    }

    /// Records a transaction marker (`header` carries its assigned offset):
    /// the producer's open transaction in this partition ends; an abort is
    /// added to the aborted list. A marker for a producer without an open
    /// transaction only moves its epoch (Kafka writes markers to every
    /// partition of a transaction, and again after a coordinator restart).
    pub fn record_marker(&mut self, header: &BatchHeader, end: TxnEnd, now_ms: i64) {
        self.record_at(header, now_ms);
        let Some(entry) = self.producers.get_mut(&header.producer_id) else { return };
        let Some(first_offset) = entry.open_txn_first_offset.take() else { return };
        self.open_txns.remove(&first_offset);
        if end == TxnEnd::Abort {
            let after_marker = header.base_offset + 1;
            let last_stable_offset = self.first_unstable_offset().unwrap_or(after_marker).min(after_marker);
            self.aborted.push_back(AbortedTxn {
                producer_id: header.producer_id,
                first_offset,
                last_offset: header.base_offset,
                last_stable_offset,
            });
        }
    }

    /// Forgets batches below the log start, producers left with none and no
    /// open transaction (Kafka removes producers whose last offset is before
    /// the log start), and aborted transactions that ended before it.
    pub fn evict_below(&mut self, log_start_offset: i64) {
        self.producers.retain(|_, e| {
            e.batches.retain(|b| b.last_offset >= log_start_offset);
            !e.batches.is_empty() || e.open_txn_first_offset.is_some()
        });
        while self.aborted.front().is_some_and(|a| a.last_offset < log_start_offset) {
            self.aborted.pop_front();
        }
    }

    /// Forgets producers that have not appended for `idle_ms_max` (Kafka's
    /// `producer.id.expiration.ms`): without it the state grows with every
    /// producer that ever wrote. An expired producer that comes back starts
    /// afresh, as in Kafka. Returns how many were forgotten.
    pub fn expire_idle(&mut self, now_ms: i64, idle_ms_max: i64) -> usize {
        let before = self.producers.len();
        let oldest_kept = now_ms.saturating_sub(idle_ms_max);
        // A producer with an open transaction stays until it ends (the
        // coordinator's timeout aborts it).
        self.producers.retain(|_, e| e.last_seen_ms >= oldest_kept || e.open_txn_first_offset.is_some());
        before - self.producers.len()
    }

    /// Marks every producer as seen at `now_ms` (state just rebuilt from disk,
    /// whose last-seen times are not persisted).
    pub fn mark_all_seen(&mut self, now_ms: i64) {
        for entry in self.producers.values_mut() {
            entry.last_seen_ms = entry.last_seen_ms.max(now_ms);
        }
    }

    pub fn encode_snapshot(&self, offset: i64) -> Vec<u8> {
        let mut out = Vec::with_capacity(22 + self.producers.len() * (11 + PRODUCER_BATCHES_KEPT * BATCH_BYTES));
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&offset.to_be_bytes());
        out.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        for (id, e) in &self.producers {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&e.epoch.to_be_bytes());
            out.extend_from_slice(&e.open_txn_first_offset.unwrap_or(-1).to_be_bytes());
            out.push(e.batches.len() as u8);
            for b in &e.batches {
                out.extend_from_slice(&b.first_seq.to_be_bytes());
                out.extend_from_slice(&b.last_seq.to_be_bytes());
                out.extend_from_slice(&b.first_offset.to_be_bytes());
                out.extend_from_slice(&b.last_offset.to_be_bytes());
                out.extend_from_slice(&b.timestamp_ms.to_be_bytes());
            }
        }
        out.extend_from_slice(&(self.aborted.len() as u32).to_be_bytes());
        out.reserve(self.aborted.len() * ABORTED_BYTES + 4);
        for a in &self.aborted {
            for v in [a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset] {
                out.extend_from_slice(&v.to_be_bytes());
            }
        }
        let crc = crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes a snapshot into `(offset, state)`, or says what is wrong with it.
    pub fn decode_snapshot(bytes: &[u8]) -> Result<(i64, ProducerStateMap), String> {
        let Some((body, crc)) = bytes.split_last_chunk::<4>() else { return Err("shorter than a CRC".into()) };
        if crc32c(body) != u32::from_be_bytes(*crc) {
            return Err("CRC mismatch".into());
        }
        let mut r = Reader(body);
        if r.take(4)? != SNAPSHOT_MAGIC {
            return Err("not a producer snapshot".into());
        }
        let version = u16::from_be_bytes(r.array()?);
        if version != SNAPSHOT_VERSION && version != SNAPSHOT_VERSION_IDEMPOTENT_ONLY {
            return Err(format!("unknown snapshot version {version}"));
        }
        let with_txns = version == SNAPSHOT_VERSION;
        let offset = i64::from_be_bytes(r.array()?);
        let count = u32::from_be_bytes(r.array()?);
        let mut map = ProducerStateMap::default();
        for _ in 0..count {
            let id = i64::from_be_bytes(r.array()?);
            let epoch = i16::from_be_bytes(r.array()?);
            let open = if with_txns { i64::from_be_bytes(r.array()?) } else { -1 };
            let open_txn_first_offset = (open >= 0).then_some(open);
            let n = r.take(1)?[0] as usize;
            if n > PRODUCER_BATCHES_KEPT {
                return Err(format!("producer {id} has {n} batches"));
            }
            let mut batches = VecDeque::with_capacity(n);
            for _ in 0..n {
                batches.push_back(BatchMetadata {
                    first_seq: i32::from_be_bytes(r.array()?),
                    last_seq: i32::from_be_bytes(r.array()?),
                    first_offset: i64::from_be_bytes(r.array()?),
                    last_offset: i64::from_be_bytes(r.array()?),
                    timestamp_ms: i64::from_be_bytes(r.array()?),
                });
            }
            if let Some(first) = open_txn_first_offset {
                map.open_txns.insert(first, id);
            }
            map.producers.insert(id, ProducerEntry { epoch, batches, last_seen_ms: 0, open_txn_first_offset });
        }
        if with_txns {
            let aborted = u32::from_be_bytes(r.array()?) as usize;
            if aborted.saturating_mul(ABORTED_BYTES) > r.0.len() {
                return Err(format!("claims {aborted} aborted transactions"));
            }
            for _ in 0..aborted {
                map.aborted.push_back(AbortedTxn {
                    producer_id: i64::from_be_bytes(r.array()?),
                    first_offset: i64::from_be_bytes(r.array()?),
                    last_offset: i64::from_be_bytes(r.array()?),
                    last_stable_offset: i64::from_be_bytes(r.array()?),
                });
            }
        }
        if !r.0.is_empty() {
            return Err("trailing bytes".into());
        }
        Ok((offset, map))
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("truncated".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
}

#[cfg(test)]
mod tests;
