//! A partition's part in replication.
//!
//! On a leader: the offset each follower acknowledged (a follower's fetch
//! offset: it holds everything below, durably, since it fetches again only
//! after its fdatasync), the offset the synchronous policy holds from them
//! (`replicated`), and the fetches of followers, woken at every append (they
//! read past the high watermark). With a policy, an `acks=all` produce waits
//! for `replicated` as well as for the local flush, and consumers see only
//! what both hold, so a failover to a synchronous standby never takes back a
//! record a consumer read or a producer was told about.
//!
//! On a follower: appends of the leader's batches as they are (offsets and
//! epochs kept) and truncation of a tail the leader never had.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kafgres_log::{AppendResult, LogError, LogPosition, ReadSlice};
use kafgres_record::BatchHeader;
use tokio::sync::watch;

use super::{DurabilityError, FetchWaiter, Partition};
use crate::config::FlushPolicy;
use crate::replication::ReplicationState;

/// Nothing to wait for: no synchronous policy.
pub const NOT_REQUIRED: i64 = i64::MAX;

pub struct PartitionReplication {
    pub(super) state: Arc<ReplicationState>,
    acks: Mutex<HashMap<String, FollowerAck>>,
    replicated: watch::Sender<i64>,
    append_waiters: Mutex<Vec<Arc<FetchWaiter>>>,
}

/// What one follower holds of this partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerAck {
    /// Its last fetch offset: it holds every record below, durably.
    pub offset: i64,
    /// When a fetch of it last started at the log end (ms since the Unix
    /// epoch; 0: never since this broker started): how far behind it is in time.
    pub caught_up_ms: i64,
}

impl PartitionReplication {
    pub fn new(state: Arc<ReplicationState>, log_end: i64) -> PartitionReplication {
        let start = if state.sync_required() { log_end } else { NOT_REQUIRED };
        let (replicated, _) = watch::channel(start);
        PartitionReplication { state, acks: Mutex::new(HashMap::new()), replicated, append_waiters: Mutex::default() }
    }
}

impl Partition {
    /// The offset the synchronous standbys hold ([`NOT_REQUIRED`] without a policy).
    pub fn replicated_offset(&self) -> i64 {
        *self.replication.replicated.borrow()
    }

    /// What each follower acknowledged here, by name.
    pub fn follower_acks(&self) -> Vec<(String, FollowerAck)> {
        let acks = self.replication.acks.lock().unwrap_or_else(|p| p.into_inner());
        let mut rows: Vec<(String, FollowerAck)> = acks.iter().map(|(n, a)| (n.clone(), *a)).collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows
    }

    /// A follower fetched from `offset`: it holds everything below, durably.
    pub fn follower_fetched(&self, name: &str, offset: i64) {
        let caught_up = offset >= self.log_end_offset();
        let moved = {
            let mut acks = self.replication.acks.lock().unwrap_or_else(|p| p.into_inner());
            let entry = acks.entry(name.to_owned()).or_insert(FollowerAck { offset, caught_up_ms: 0 });
            let moved = entry.offset != offset;
            entry.offset = offset;
            if caught_up {
                entry.caught_up_ms = crate::now_ms();
            }
            moved
        };
        if moved || self.replication.state.sync_required() {
            self.recompute_replicated();
        }
    }

    /// Recomputes `replicated` from the acknowledgements and the policy (after
    /// a fetch, a follower lost, or a reload of the policy), and publishes
    /// what consumers may now see.
    pub fn recompute_replicated(&self) {
        let Some(policy) = self.replication.state.sync_policy() else {
            let changed =
                self.replication.replicated.send_if_modified(|r| std::mem::replace(r, NOT_REQUIRED) != NOT_REQUIRED);
            if changed {
                self.publish_durable();
            }
            return;
        };
        let log_end = self.log_end_offset();
        let current = match self.replicated_offset() {
            // The policy was just turned on: what was acknowledged before it
            // stays; from here on the standbys must hold it.
            NOT_REQUIRED => self.durable_offset(),
            current => current,
        };
        // A follower counts once it holds what is already acknowledged (a
        // standby catching up is not yet synchronous, as in Postgres), and
        // while it keeps fetching.
        let candidates: Vec<(String, i64)> = {
            let acks = self.replication.acks.lock().unwrap_or_else(|p| p.into_inner());
            acks.iter()
                .filter(|(name, ack)| ack.offset >= current && self.replication.state.is_connected(name))
                .map(|(name, ack)| (name.clone(), ack.offset.min(log_end)))
                .collect()
        };
        let held = policy.replicated_offset(candidates.iter().map(|(n, o)| (n.as_str(), *o)));
        let next = held.map_or(current, |h| h.max(current));
        let changed = self.replication.replicated.send_if_modified(|r| std::mem::replace(r, next) != next);
        if changed {
            self.publish_durable();
        }
    }

    /// Waits until the records before `end_offset` are what `acks=all`
    /// promises: durable here and, with a synchronous policy, on the standbys
    /// it requires; at most `timeout` for the standbys (the produce's own
    /// `timeout_ms`, as Kafka bounds acks=all).
    pub async fn wait_committed(&self, end_offset: i64, timeout: std::time::Duration) -> Result<(), DurabilityError> {
        if self.policy.get() == FlushPolicy::Fsync {
            self.wait_durable(end_offset).await?;
        }
        if self.replicated_offset() >= end_offset {
            return Ok(());
        }
        let mut rx = self.replication.replicated.subscribe();
        let waited = tokio::time::timeout(timeout, async { rx.wait_for(|r| *r >= end_offset).await.map(|_| ()) }).await;
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(DurabilityError::Closed),
            Err(_) => Err(DurabilityError::NotReplicated),
        }
    }

    /// The position consumers may read up to, given what is durable here
    /// (`local`) and what the standbys hold.
    pub(super) fn visible_up_to(&self, local: LogPosition) -> LogPosition {
        let replicated = self.replicated_offset();
        if replicated >= local.offset {
            return local;
        }
        self.lock_log().position_at(replicated).ok().flatten().unwrap_or(local)
    }

    /// Registers a follower's fetch, woken at every append until it finishes.
    pub fn register_append_waiter(&self, waiter: &Arc<FetchWaiter>) {
        let mut waiters = self.replication.append_waiters.lock().unwrap_or_else(|p| p.into_inner());
        waiters.retain(|w| !w.is_finished());
        waiters.push(Arc::clone(waiter));
    }

    pub(super) fn wake_append_waiters(&self) {
        let mut waiters = self.replication.append_waiters.lock().unwrap_or_else(|p| p.into_inner());
        waiters.retain(|w| !w.is_finished());
        if !waiters.is_empty() {
            let now = Instant::now();
            for w in waiters.iter() {
                w.wake(now);
            }
        }
    }

    /// A follower's read: everything appended, past the high watermark.
    pub fn read_for_follower(&self, offset: i64, max_bytes: u64) -> Result<ReadSlice, LogError> {
        let log = self.lock_log();
        let upto = log.end_position();
        log.read(offset, max_bytes, upto, true)
    }

    /// The leader epoch this log's batches last carried.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.lock_log().latest_epoch()
    }

    /// OffsetForLeaderEpoch: (the largest epoch ≤ `requested`, where it ends).
    pub fn end_offset_for_epoch(&self, requested: i32) -> (i32, i64) {
        self.lock_log().end_offset_for_epoch(requested)
    }

    /// The epoch of the batch holding `offset`, if the log holds it.
    pub fn epoch_of(&self, offset: i64) -> Option<i32> {
        self.lock_log().epoch_of(offset)
    }

    /// A follower's append of the leader's batches, byte for byte; flushed
    /// by the group commit like any append.
    pub fn append_replicated(
        &self,
        batches: &[u8],
        headers: &[BatchHeader],
        now_ms: i64,
    ) -> Result<AppendResult, LogError> {
        self.refuse_if_flush_failed()?;
        let result = self.lock_log().append_replicated(batches, headers, now_ms)?;
        self.appends_since_flush.fetch_add(headers.len() as u64, std::sync::atomic::Ordering::Relaxed);
        match self.policy.get() {
            FlushPolicy::Fsync => self.flush_wanted.notify_one(),
            FlushPolicy::PageCache => self.publish(result.end),
        }
        Ok(result)
    }

    /// A follower cuts the tail the leader never had: every batch whose last
    /// offset is at or past `offset` (docs/replication.md). Returns the new
    /// log end. Blocking (fsyncs): call from a blocking context.
    pub fn truncate_to(&self, offset: i64) -> Result<i64, LogError> {
        let (end, position) = {
            let mut log = self.lock_log();
            let floor = log.log_start_offset();
            let end = log.truncate_to(offset, floor)?;
            (end, log.end_position())
        };
        // A follower serves no consumer: its positions may move back.
        self.high_watermark.send_modify(|hw| *hw = position);
        self.durable.send_modify(|d| d.position = position);
        Ok(end)
    }
}
