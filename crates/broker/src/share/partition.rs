//! One share-partition: what a share group has done with the records of one
//! topic partition (KIP-932). Pure: time and the batches read from the log
//! come in, acquired ranges and state changes go out; no I/O, no locks.
//!
//! ```text
//!   log:   ... | done (acknowledged or archived) | in flight ............ | not yet read
//!                                                 ^ start offset (SPSO)   ^ end (SPEO) + 1
//! ```
//! Every offset in `start_offset..next_offset` has an [`InFlight`] entry:
//! Available (may be acquired), Acquired (by one member until its lock's
//! deadline), Acknowledged or Archived (done). The start moves up over done
//! offsets at the front; offsets past `next_offset` were never handed out.
//! A record's delivery count grows at each acquisition; a record released,
//! or whose lock expires, after `delivery_count_limit` deliveries is archived.

use std::collections::BTreeMap;

use kafgres_wire::error_code;

/// A record's state, with Kafka's ids (RecordState: the ids the share
/// coordinator stores).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    Available = 0,
    Acquired = 1,
    Acknowledged = 2,
    Archived = 4,
}

impl RecordState {
    pub fn from_id(id: i8) -> Option<RecordState> {
        match id {
            0 => Some(RecordState::Available),
            1 => Some(RecordState::Acquired),
            2 => Some(RecordState::Acknowledged),
            4 => Some(RecordState::Archived),
            _ => None,
        }
    }

    fn is_done(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// ShareAcknowledge's acknowledge types (KIP-932; RENEW from KIP-1222,
/// ShareFetch and ShareAcknowledge v2).
pub mod ack_type {
    pub const GAP: i8 = 0;
    pub const ACCEPT: i8 = 1;
    pub const RELEASE: i8 = 2;
    pub const REJECT: i8 = 3;
    /// Extends the acquisition lock; the record stays acquired by the same
    /// member and is not delivered again (its delivery count is unchanged).
    pub const RENEW: i8 = 4;
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct InFlight {
    state: RecordState,
    delivery_count: i16,
    /// The member holding the acquisition lock (Acquired only).
    owner: Option<String>,
    lock_deadline_ms: i64,
}

impl InFlight {
    fn new(state: RecordState, delivery_count: i16) -> InFlight {
        InFlight { state, delivery_count, owner: None, lock_deadline_ms: 0 }
    }
}

/// One batch header as the share partition needs it, read from the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    /// A transaction marker: never delivered (archived at once).
    pub is_control: bool,
    /// Records of an aborted transaction read under read_committed:
    /// archived, never delivered.
    pub aborted: bool,
}

/// A range of acquired offsets with their delivery count (ShareFetch's
/// AcquiredRecords).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquiredRange {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: i16,
}

/// A run of offsets in one state, as stored (Kafka's share coordinator's
/// StateBatch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub state: RecordState,
    pub delivery_count: i16,
}

/// What acquisition may take at most.
#[derive(Debug, Clone, Copy)]
pub struct AcquireLimits {
    pub records_max: usize,
    /// `share.partition.max.record.locks`: the in-flight window's size.
    pub window_max: i64,
    pub lock_deadline_ms: i64,
}

/// The records of a share-partition's in-flight window by state, counted
/// in one walk of the window (at most `share.partition.max.record.locks`
/// entries): what DescribeShareGroupOffsets' lag and a scrape read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowCounts {
    pub available: i64,
    pub acquired: i64,
    /// Acknowledged or archived after the start offset (Kafka's
    /// delivery-complete count).
    pub done: i64,
}

/// A share-partition's lag as Kafka 4.2+ defines it (KIP-1226): the records
/// below the high watermark not delivered completely yet, high watermark -
/// start offset - records after the start already done. Never negative (a
/// truncated log can end below the start). The one home of this formula:
/// DescribeShareGroupOffsets v1 and the Prometheus endpoint both call it.
pub fn lag(high_watermark: i64, start_offset: i64, done: i64) -> i64 {
    high_watermark.saturating_sub(start_offset).saturating_sub(done).max(0)
}

/// Records of one acknowledgement batch that changed state, by type (what
/// Kafka's ShareGroupMetrics RecordAcknowledgementsPerSec counts by ackType).
/// Gaps are not counted, as Kafka ignores them there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckCounts {
    pub accepted: u64,
    pub released: u64,
    pub rejected: u64,
    pub renewed: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePartition {
    start_offset: i64,
    next_offset: i64,
    in_flight: BTreeMap<i64, InFlight>,
}

impl SharePartition {
    /// A share-partition first read at `start_offset` (share.auto.offset.reset).
    pub fn starting_at(start_offset: i64) -> SharePartition {
        SharePartition { start_offset, next_offset: start_offset, in_flight: BTreeMap::new() }
    }

    /// Rebuilds the state stored by [`Self::snapshot`]. A record that was
    /// acquired when stored comes back Available (its lock did not survive),
    /// with its delivery count. Batches below the start or overlapping are
    /// ignored (the later one wins).
    pub fn restore(start_offset: i64, batches: &[StateBatch]) -> SharePartition {
        let mut p = SharePartition::starting_at(start_offset);
        for b in batches {
            let state = if b.state == RecordState::Acquired { RecordState::Available } else { b.state };
            let first = b.first_offset.max(start_offset);
            // A corrupt row cannot make us allocate without bound: the window is capped.
            let last = b.last_offset.min(first.saturating_add(1 << 20));
            for offset in first..=last {
                p.in_flight.insert(offset, InFlight::new(state, b.delivery_count.max(0)));
            }
        }
        // Offsets between stored batches were never stored as in flight: they
        // are treated as done (the coordinator stores every offset it handed out).
        p.next_offset = p.in_flight.keys().next_back().map_or(start_offset, |last| last + 1);
        for offset in start_offset..p.next_offset {
            p.in_flight.entry(offset).or_insert_with(|| InFlight::new(RecordState::Archived, 0));
        }
        p.advance_start();
        p
    }

    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    /// The share-partition end offset (SPEO): the last offset handed out, or
    /// `start - 1` when nothing is in flight.
    pub fn end_offset(&self) -> i64 {
        self.next_offset - 1
    }

    /// The offset the next new record is read from.
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// Where to read the log from to find acquirable records: each run of
    /// Available offsets, then the offsets never handed out.
    pub fn read_positions(&self) -> Vec<i64> {
        let mut out = Vec::new();
        let mut previous_available = false;
        for (offset, r) in &self.in_flight {
            let available = r.state == RecordState::Available;
            if available && !previous_available {
                out.push(*offset);
            }
            previous_available = available;
        }
        out.push(self.next_offset);
        out
    }

    /// Where the run of Available offsets starting at `from` ends
    /// (exclusive): the first offset past it in another state, or the
    /// frontier of new records.
    pub fn available_run_end(&self, from: i64) -> i64 {
        self.in_flight
            .range(from..)
            .find(|(_, r)| r.state != RecordState::Available)
            .map_or(self.next_offset, |(offset, _)| *offset)
    }

    /// Whether anything may be acquired below `fetchable_end` (the high
    /// watermark or the last stable offset).
    pub fn has_acquirable(&self, fetchable_end: i64) -> bool {
        self.next_offset < fetchable_end || self.in_flight.values().any(|r| r.state == RecordState::Available)
    }

    /// The log start moved past the start offset (retention, DeleteRecords):
    /// those records are gone, so the share-partition starts there.
    pub fn skip_to_log_start(&mut self, log_start: i64) -> bool {
        if log_start <= self.start_offset {
            return false;
        }
        self.in_flight = self.in_flight.split_off(&log_start);
        self.start_offset = log_start;
        self.next_offset = self.next_offset.max(log_start);
        true
    }

    /// The log ends at `log_end` though offsets past it were handed out: a
    /// crash cut records that were never durable (`kafgres.flush_policy =
    /// page_cache`), or a failover truncated the log. The offsets past the
    /// end will hold new records, which must be delivered: their states go.
    pub fn truncate_to(&mut self, log_end: i64) -> bool {
        if self.next_offset <= log_end {
            return false;
        }
        self.in_flight.split_off(&log_end);
        self.next_offset = log_end;
        self.start_offset = self.start_offset.min(log_end);
        true
    }

    /// Acquires for `member` the acquirable offsets of `batches` (read from
    /// the log at `read_from`), at most `limits.records_max` of them;
    /// control records, aborted ones and offsets missing from the log
    /// (compacted away) are archived on the way. Returns the acquired ranges.
    pub fn acquire(
        &mut self,
        member: &str,
        read_from: i64,
        batches: &[LogBatch],
        limits: AcquireLimits,
    ) -> Vec<AcquiredRange> {
        let mut acquired: Vec<AcquiredRange> = Vec::new();
        let mut taken = 0usize;
        'batches: for batch in batches {
            let first = batch.base_offset.max(read_from).max(self.start_offset);
            for offset in first..=batch.last_offset {
                if taken >= limits.records_max {
                    break 'batches;
                }
                if offset < self.next_offset {
                    let Some(r) = self.in_flight.get_mut(&offset) else { continue };
                    if r.state != RecordState::Available {
                        continue;
                    }
                    acquire_one(r, member, limits.lock_deadline_ms);
                    push_range(&mut acquired, offset, r.delivery_count);
                    taken += 1;
                    continue;
                }
                // New territory: the window may not grow past its limit.
                if offset - self.start_offset + 1 > limits.window_max {
                    break 'batches;
                }
                // Offsets the log does not hold (compaction) are done.
                for gap in self.next_offset..offset {
                    self.in_flight.insert(gap, InFlight::new(RecordState::Archived, 0));
                }
                if batch.is_control || batch.aborted {
                    self.in_flight.insert(offset, InFlight::new(RecordState::Archived, 0));
                } else {
                    let mut r = InFlight::new(RecordState::Available, 0);
                    acquire_one(&mut r, member, limits.lock_deadline_ms);
                    push_range(&mut acquired, offset, r.delivery_count);
                    self.in_flight.insert(offset, r);
                    taken += 1;
                }
                self.next_offset = offset + 1;
            }
        }
        self.advance_start();
        acquired
    }

    /// Applies one acknowledgement batch of `member` without RENEW (a v1
    /// request's): see [`Self::acknowledge_renewing`].
    pub fn acknowledge(
        &mut self,
        member: &str,
        first_offset: i64,
        last_offset: i64,
        types: &[i8],
        delivery_count_limit: i16,
    ) -> Result<(), i16> {
        self.acknowledge_renewing(member, first_offset, last_offset, types, delivery_count_limit, None)
    }

    /// Applies one acknowledgement batch of `member`: `types` holds one type
    /// for the whole range or one per offset. Every offset must be acquired
    /// by `member` (else INVALID_RECORD_STATE and nothing changes). RENEW is
    /// a type only when `renew_deadline_ms` is given (v2 requests): a renewed
    /// record's lock then ends at that deadline (INVALID_REQUEST otherwise,
    /// as an unknown type).
    pub fn acknowledge_renewing(
        &mut self,
        member: &str,
        first_offset: i64,
        last_offset: i64,
        types: &[i8],
        delivery_count_limit: i16,
        renew_deadline_ms: Option<i64>,
    ) -> Result<(), i16> {
        self.acknowledge_counted(member, first_offset, last_offset, types, delivery_count_limit, renew_deadline_ms)
            .map(|_| ())
    }

    /// [`Self::acknowledge_renewing`], returning how many records each type
    /// moved (counted where they move: no second walk).
    pub fn acknowledge_counted(
        &mut self,
        member: &str,
        first_offset: i64,
        last_offset: i64,
        types: &[i8],
        delivery_count_limit: i16,
        renew_deadline_ms: Option<i64>,
    ) -> Result<AckCounts, i16> {
        if first_offset > last_offset || first_offset < 0 {
            return Err(error_code::INVALID_REQUEST);
        }
        // Offsets come off the wire: (0, i64::MAX) must not overflow.
        let count = (last_offset - first_offset).saturating_add(1);
        let type_max = if renew_deadline_ms.is_some() { ack_type::RENEW } else { ack_type::REJECT };
        if !(types.len() == 1 || types.len() as i64 == count) || types.iter().any(|t| !(0..=type_max).contains(t)) {
            return Err(error_code::INVALID_REQUEST);
        }
        let type_at = |offset: i64| if types.len() == 1 { types[0] } else { types[(offset - first_offset) as usize] };
        // Offsets never handed out cannot be held. The checks below walk at
        // most the in-flight window, or the request's own per-offset types:
        // a range sent from far below the start offset costs no more.
        if last_offset >= self.next_offset {
            return Err(error_code::INVALID_RECORD_STATE);
        }
        // Below the start offset everything is done: only a gap may name it.
        let below = first_offset..first_offset.max(self.start_offset).min(last_offset + 1);
        let gaps_below = if types.len() == 1 {
            types[0] == ack_type::GAP
        } else {
            below.clone().all(|o| type_at(o) == ack_type::GAP)
        };
        if !below.is_empty() && !gaps_below {
            return Err(error_code::INVALID_RECORD_STATE);
        }
        let in_window = first_offset.max(self.start_offset)..=last_offset;
        for (offset, r) in self.in_flight.range(in_window.clone()) {
            let held = r.state == RecordState::Acquired && r.owner.as_deref() == Some(member);
            // A gap may name an offset the log never held (already done here).
            let gap_done = type_at(*offset) == ack_type::GAP && r.state.is_done();
            if !held && !gap_done {
                return Err(error_code::INVALID_RECORD_STATE);
            }
        }
        let mut counts = AckCounts::default();
        for (offset, r) in self.in_flight.range_mut(in_window) {
            if r.state != RecordState::Acquired {
                continue;
            }
            match (type_at(*offset), renew_deadline_ms) {
                (ack_type::ACCEPT, _) => {
                    finish(r, RecordState::Acknowledged);
                    counts.accepted += 1;
                }
                (ack_type::RELEASE, _) => {
                    release_one(r, delivery_count_limit);
                    counts.released += 1;
                }
                // Only the lock moves: same owner, same delivery count.
                (ack_type::RENEW, Some(deadline_ms)) => {
                    r.lock_deadline_ms = deadline_ms;
                    counts.renewed += 1;
                }
                (t, _) => {
                    finish(r, RecordState::Archived); // REJECT, GAP
                    if t == ack_type::REJECT {
                        counts.rejected += 1;
                    }
                }
            }
        }
        self.advance_start();
        Ok(counts)
    }

    /// Releases every record `member` holds (it left the group, its share
    /// session closed). Returns whether anything changed.
    pub fn release_member(&mut self, member: &str, delivery_count_limit: i16) -> bool {
        let mut changed = false;
        for r in self.in_flight.values_mut() {
            if r.state == RecordState::Acquired && r.owner.as_deref() == Some(member) {
                release_one(r, delivery_count_limit);
                changed = true;
            }
        }
        self.advance_start();
        changed
    }

    /// Releases every record whose acquisition lock expired at `now_ms`;
    /// returns how many (Kafka's AcquisitionLockTimeoutPerSec counts them).
    pub fn expire_locks(&mut self, now_ms: i64, delivery_count_limit: i16) -> u64 {
        let mut expired = 0;
        for r in self.in_flight.values_mut() {
            if r.state == RecordState::Acquired && r.lock_deadline_ms <= now_ms {
                release_one(r, delivery_count_limit);
                expired += 1;
            }
        }
        self.advance_start();
        expired
    }

    /// The in-flight window by state, in one walk of it.
    pub fn window_counts(&self) -> WindowCounts {
        let mut counts = WindowCounts::default();
        for r in self.in_flight.values() {
            match r.state {
                RecordState::Available => counts.available += 1,
                RecordState::Acquired => counts.acquired += 1,
                RecordState::Acknowledged | RecordState::Archived => counts.done += 1,
            }
        }
        counts
    }

    /// The earliest acquisition lock deadline, if any record is acquired.
    pub fn next_lock_deadline(&self) -> Option<i64> {
        self.in_flight.values().filter(|r| r.state == RecordState::Acquired).map(|r| r.lock_deadline_ms).min()
    }

    /// The in-flight records as runs of one state and delivery count (what
    /// is stored; the start offset goes with it).
    pub fn snapshot(&self) -> Vec<StateBatch> {
        let mut out: Vec<StateBatch> = Vec::new();
        for (offset, r) in &self.in_flight {
            match out.last_mut() {
                Some(b)
                    if b.last_offset + 1 == *offset && b.state == r.state && b.delivery_count == r.delivery_count =>
                {
                    b.last_offset = *offset;
                }
                _ => out.push(StateBatch {
                    first_offset: *offset,
                    last_offset: *offset,
                    state: r.state,
                    delivery_count: r.delivery_count,
                }),
            }
        }
        out
    }

    /// The state of one offset (tests, ShareGroupDescribe-like views).
    pub fn state_of(&self, offset: i64) -> Option<(RecordState, i16)> {
        if offset < self.start_offset {
            return None;
        }
        self.in_flight.get(&offset).map(|r| (r.state, r.delivery_count))
    }

    /// Moves the start offset over the done records at the front.
    fn advance_start(&mut self) {
        while let Some(entry) = self.in_flight.first_entry() {
            if !entry.get().state.is_done() {
                break;
            }
            let offset = *entry.key();
            entry.remove();
            self.start_offset = offset + 1;
        }
        if self.in_flight.is_empty() {
            self.start_offset = self.start_offset.max(self.next_offset);
        }
        debug_assert!(self.in_flight.keys().next().is_none_or(|first| *first >= self.start_offset));
    }
}

fn acquire_one(r: &mut InFlight, member: &str, lock_deadline_ms: i64) {
    r.state = RecordState::Acquired;
    r.delivery_count = r.delivery_count.saturating_add(1);
    r.owner = Some(member.to_owned());
    r.lock_deadline_ms = lock_deadline_ms;
}

fn release_one(r: &mut InFlight, delivery_count_limit: i16) {
    let state = if r.delivery_count >= delivery_count_limit { RecordState::Archived } else { RecordState::Available };
    finish(r, state);
}

fn finish(r: &mut InFlight, state: RecordState) {
    r.state = state;
    r.owner = None;
    r.lock_deadline_ms = 0;
}

fn push_range(ranges: &mut Vec<AcquiredRange>, offset: i64, delivery_count: i16) {
    match ranges.last_mut() {
        Some(r) if r.last_offset + 1 == offset && r.delivery_count == delivery_count => r.last_offset = offset,
        _ => ranges.push(AcquiredRange { first_offset: offset, last_offset: offset, delivery_count }),
    }
}
