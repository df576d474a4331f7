//! ShareFetch's and ShareAcknowledge's work on share-partitions: acquiring
//! records read from the log, and applying acknowledgements.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafgres_log::LogError;
use kafgres_wire::error_code;

use super::config::AutoOffsetReset;
use super::log_read::{fetchable_end, read_batches};
use super::partition::{ack_type, AcquireLimits, AcquiredRange, SharePartition};
use super::service::{lock, SharePartitionKey, ShareService};
use crate::catalog::ShareStateRecord;
use crate::partition::Partition;

/// What one partition gave a ShareFetch.
#[derive(Debug, Default)]
pub struct Acquired {
    /// The batches holding the acquired records by base offset (whole
    /// batches: the client keeps only the acquired offsets).
    pub batches: BTreeMap<i64, Bytes>,
    pub ranges: Vec<AcquiredRange>,
    pub error_code: i16,
}

impl Acquired {
    pub fn record_count(&self) -> i64 {
        self.ranges.iter().map(|r| r.last_offset - r.first_offset + 1).sum()
    }

    pub fn byte_count(&self) -> usize {
        self.batches.values().map(Bytes::len).sum()
    }

    /// Takes in a later acquisition of the same fetch (a long poll's next
    /// look); a batch already there is not sent twice.
    pub fn merge(&mut self, later: Acquired) {
        self.ranges.extend(later.ranges);
        self.ranges.sort_by_key(|r| r.first_offset);
        for (base, bytes) in later.batches {
            self.batches.entry(base).or_insert(bytes);
        }
        if self.error_code == kafgres_wire::error_code::NONE {
            self.error_code = later.error_code;
        }
    }

    /// The record batches in offset order, as ShareFetch's records field.
    pub fn records(&self) -> Bytes {
        let mut records = BytesMut::with_capacity(self.byte_count());
        for bytes in self.batches.values() {
            records.extend_from_slice(bytes);
        }
        records.freeze()
    }
}

/// One acknowledgement batch of a request.
#[derive(Debug, Clone)]
pub struct AckBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub types: Vec<i8>,
}

/// How much log one read of an acquisition copies at most (a batch larger
/// than this is still read whole).
const READ_CHUNK_BYTES: u64 = 1 << 20;

impl ShareService {
    /// Acquires for `member_id` up to `records_max` records of `partition`
    /// within `bytes_max`; the state to store goes into `writes`.
    pub fn acquire(
        &self,
        key: &SharePartitionKey,
        member_id: &str,
        partition: &Arc<Partition>,
        records_max: usize,
        bytes_max: u64,
        writes: &mut Vec<ShareStateRecord>,
    ) -> Acquired {
        let config = self.group_config(&key.group_id);
        let isolation = config.isolation_level;
        let end = fetchable_end(partition, isolation);
        let slot = self.slot(key);
        let mut slot = lock(&slot);
        slot.start_if_unset(|| {
            // share.auto.offset.reset: where the group starts reading.
            SharePartition::starting_at(match config.auto_offset_reset {
                AutoOffsetReset::Latest => end,
                AutoOffsetReset::Earliest => partition.log_start_offset(),
            })
        });
        let mut changed = slot.state.truncate_to(partition.log_end_offset());
        changed |= slot.state.skip_to_log_start(partition.log_start_offset());
        let mut out = Acquired::default();
        let mut bytes_left = bytes_max;
        let deadline = crate::now_ms() + i64::from(config.record_lock_duration_ms);
        let positions = slot.state.read_positions();
        let frontier = slot.state.next_offset();
        'positions: for position in positions {
            // The log is read a chunk at a time, not `bytes_left` at once: a
            // client's fetch.max.bytes (50 MiB by default) would otherwise be
            // copied for every fetch, however few records it may take. A run
            // of released records below the frontier is read to its end, new
            // records until enough.
            let run_end = if position < frontier { slot.state.available_run_end(position) } else { i64::MAX };
            let mut at = position;
            loop {
                let taken = out.record_count() as usize;
                if at >= end || taken >= records_max || bytes_left == 0 {
                    break;
                }
                // The answer's byte limit may be passed only by its first batch.
                let first_whole = out.batches.is_empty() && bytes_left == bytes_max;
                let chunk = bytes_left.min(READ_CHUNK_BYTES);
                let mut read = read_batches(partition, at, chunk, first_whole, isolation);
                if matches!(&read, Ok(r) if r.batches.is_empty()) && !first_whole && chunk < bytes_left {
                    // A batch larger than a chunk: read as far as the answer's limit.
                    read = read_batches(partition, at, bytes_left, false, isolation);
                }
                let read = match read {
                    Ok(read) => read,
                    // Retention moved the log start since: the next fetch skips there.
                    Err(LogError::OffsetOutOfRange { .. }) => break,
                    Err(e) => {
                        log::error!("share fetch from {}-{} failed: {e}", partition.topic, partition.index);
                        out.error_code = error_code::KAFKA_STORAGE_ERROR;
                        break 'positions;
                    }
                };
                let Some(read_to) = read.batches.last().map(|(b, _)| b.last_offset).filter(|&o| o >= at) else {
                    break;
                };
                let headers: Vec<_> = read.batches.iter().map(|(b, _)| *b).collect();
                let limits = AcquireLimits {
                    records_max: records_max - taken,
                    window_max: i64::from(self.config.partition_record_locks_max),
                    lock_deadline_ms: deadline,
                };
                let before = (slot.state.start_offset(), slot.state.next_offset());
                let ranges = slot.state.acquire(member_id, at, &headers, limits);
                // Archived control, aborted and missing offsets change the state too.
                changed |= !ranges.is_empty() || before != (slot.state.start_offset(), slot.state.next_offset());
                for (batch, bytes) in read.batches {
                    let holds_acquired = ranges
                        .iter()
                        .any(|r| r.first_offset <= batch.last_offset && batch.base_offset <= r.last_offset);
                    if holds_acquired && !out.batches.contains_key(&batch.base_offset) {
                        bytes_left = bytes_left.saturating_sub(bytes.len() as u64);
                        // Counted as a Fetch's bytes are (kafka_server_brokertopicmetrics_bytesout).
                        partition.count_bytes_out(bytes.len() as u64);
                        out.batches.insert(batch.base_offset, bytes);
                    }
                }
                out.ranges.extend(ranges);
                // The window of in-flight records is full: nothing more to take past it.
                let window_full = slot.state.next_offset() - slot.state.start_offset()
                    >= i64::from(self.config.partition_record_locks_max);
                at = read_to + 1;
                if at >= run_end || window_full {
                    break;
                }
            }
        }
        if !out.ranges.is_empty() {
            self.schedule_lock_deadline(key, deadline);
        }
        if changed {
            writes.push(slot.record(key));
        }
        drop(slot);
        out.ranges.sort_by_key(|r| r.first_offset);
        // Reads a chunk apart leave a run in pieces: one range each, as one read gives.
        out.ranges.dedup_by(|next, kept| {
            let joins = kept.last_offset + 1 == next.first_offset && kept.delivery_count == next.delivery_count;
            if joins {
                kept.last_offset = next.last_offset;
            }
            joins
        });
        out
    }

    /// Applies `member_id`'s acknowledgements to one share-partition: NONE,
    /// or the code of the first batch refused (the batches before it stay
    /// applied, as Kafka applies them one by one). RENEW is a type only if
    /// `renew_allowed` (ShareFetch and ShareAcknowledge v2). The state to
    /// store goes into `writes`.
    pub fn acknowledge(
        &self,
        key: &SharePartitionKey,
        member_id: &str,
        batches: &[AckBatch],
        renew_allowed: bool,
        writes: &mut Vec<ShareStateRecord>,
    ) -> i16 {
        let Some(slot) = self.existing(key) else {
            // Nothing was ever acquired here by anyone.
            return error_code::INVALID_RECORD_STATE;
        };
        let config = self.group_config(&key.group_id);
        // A renewed lock lasts as long as a new acquisition's (KIP-1222).
        let renew_deadline_ms = renew_allowed.then(|| crate::now_ms() + i64::from(config.record_lock_duration_ms));
        let mut slot = lock(&slot);
        let mut code = error_code::NONE;
        let (mut changed, mut renewed) = (false, false);
        for b in batches {
            let applied = slot.state.acknowledge_counted(
                member_id,
                b.first_offset,
                b.last_offset,
                &b.types,
                config.delivery_count_limit,
                renew_deadline_ms,
            );
            match applied {
                Ok(counts) => {
                    self.counters.add(&counts);
                    renewed |= b.types.contains(&ack_type::RENEW);
                    // A lock is not stored (a restart makes acquired records
                    // available): a renewal alone has nothing to store.
                    changed |= b.types.iter().any(|t| *t != ack_type::RENEW);
                }
                Err(c) => {
                    code = c;
                    break;
                }
            }
        }
        if changed {
            writes.push(slot.record(key));
        }
        drop(slot);
        if let (true, Some(deadline_ms)) = (renewed, renew_deadline_ms) {
            self.schedule_lock_deadline(key, deadline_ms);
        }
        // Released records may be acquired again at once.
        if changed && batches.iter().any(|b| b.types.contains(&ack_type::RELEASE)) {
            self.wake_fetches(key);
        }
        code
    }

    /// Stores `writes` together; the future says when they are durable.
    pub fn store(&self, writes: Vec<ShareStateRecord>) -> Option<crate::catalog::CatalogFuture<()>> {
        self.write(writes)
    }

    /// Stores `writes` without waiting (acquisitions).
    pub fn store_in_background(&self, writes: Vec<ShareStateRecord>) {
        let write = self.write(writes);
        self.write_in_background(write);
    }
}
