//! Idempotent-producer state of one partition, rebuilt from the log itself.
//!
//! Per producer id: its epoch and the metadata of its last
//! [`PRODUCER_BATCHES_KEPT`] batches (first/last sequence, first/last offset,
//! max timestamp), enough to answer a retried batch with its original
//! offsets and to check that the next one is in sequence (Kafka's
//! `ProducerStateManager`, without transactions yet).
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
//! magic "KGPS" | version u16 = 1 | offset i64 | producers u32
//! per producer: id i64 | epoch i16 | batches u8
//!   per batch:  first seq i32 | last seq i32 | first offset i64 | last offset i64 | max timestamp i64
//! crc32c u32 of everything before it
//! ```

use std::collections::{BTreeMap, VecDeque};

use kafgres_wire::batch::BatchHeader;

use crate::checkpoint::crc32c;

/// Batches remembered per producer (matches `max.in.flight.requests.per.connection` ≤ 5).
pub const PRODUCER_BATCHES_KEPT: usize = 5;
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
const SNAPSHOT_MAGIC: &[u8; 4] = b"KGPS";
const SNAPSHOT_VERSION: u16 = 1;
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

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateMap {
    producers: BTreeMap<i64, ProducerEntry>,
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
        });
        entry.last_seen_ms = entry.last_seen_ms.max(now_ms);
        if entry.epoch != header.producer_epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        if header.is_control() || header.base_sequence < 0 {
            return;
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

    /// Forgets batches below the log start, and producers left with none
    /// (Kafka removes producers whose last offset is before the log start).
    pub fn evict_below(&mut self, log_start_offset: i64) {
        self.producers.retain(|_, e| {
            e.batches.retain(|b| b.last_offset >= log_start_offset);
            !e.batches.is_empty()
        });
    }

    /// Forgets producers that have not appended for `idle_ms_max` (Kafka's
    /// `producer.id.expiration.ms`): without it the state grows with every
    /// producer that ever wrote. An expired producer that comes back starts
    /// afresh, as in Kafka. Returns how many were forgotten.
    pub fn expire_idle(&mut self, now_ms: i64, idle_ms_max: i64) -> usize {
        let before = self.producers.len();
        let oldest_kept = now_ms.saturating_sub(idle_ms_max);
        self.producers.retain(|_, e| e.last_seen_ms >= oldest_kept);
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
            out.push(e.batches.len() as u8);
            for b in &e.batches {
                out.extend_from_slice(&b.first_seq.to_be_bytes());
                out.extend_from_slice(&b.last_seq.to_be_bytes());
                out.extend_from_slice(&b.first_offset.to_be_bytes());
                out.extend_from_slice(&b.last_offset.to_be_bytes());
                out.extend_from_slice(&b.timestamp_ms.to_be_bytes());
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
        if version != SNAPSHOT_VERSION {
            return Err(format!("unknown snapshot version {version}"));
        }
        let offset = i64::from_be_bytes(r.array()?);
        let count = u32::from_be_bytes(r.array()?);
        let mut map = ProducerStateMap::default();
        for _ in 0..count {
            let id = i64::from_be_bytes(r.array()?);
            let epoch = i16::from_be_bytes(r.array()?);
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
            map.producers.insert(id, ProducerEntry { epoch, batches, last_seen_ms: 0 });
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
