//! The share-group coordinator hosted on the data plane: membership and
//! share sessions behind one std mutex, each share-partition behind its own
//! (never held across an `.await`), writes through the [`Catalog`], and one
//! timer task for session expiry and acquisition-lock deadlines.
//!
//! Lock deadlines sit in a heap of (deadline, share-partition); the timer
//! task sleeps until the earliest of it and the membership's next session
//! deadline, and is woken early by a `Notify` when an acquisition puts an
//! earlier deadline in. A heap entry whose partition's locks were
//! acknowledged meanwhile is stale and only costs a look. No periodic tick.
//!
//! Every change of a share-partition makes a record of its whole state with
//! a higher version ([`Slot::record`], under the partition's lock); a
//! request's records are handed to the catalog together, and the catalog
//! keeps the highest version of each partition, so writes that reach it out
//! of order cannot move a partition back. ShareAcknowledge and ShareFetch
//! await the write of their acknowledgements before answering; ShareFetch's
//! acquisitions are written without waiting (a crash forgets those delivery
//! counts, as Kafka's share coordinator does not store them either).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use uuid::Uuid;

use super::config::{ShareConfig, ShareGroupConfig};
use super::membership::{DepartedMember, ShareHeartbeat, ShareHeartbeatAnswer, ShareMembership};
use super::partition::{AckCounts, SharePartition, WindowCounts};
use super::session::{SessionOutcome, SessionRequest, ShareSessions};
use crate::catalog::{Catalog, CatalogFuture, ShareStateRecord};
use crate::group::{GroupState, TopicLookup};
use crate::topics::Topics;

/// A share-partition's state and how many times it was stored: each record
/// handed to the catalog carries a higher version, and the catalog keeps
/// the highest, so writes of several partitions batched outside their locks
/// can land in any order.
///
/// A slot may be *unset*: the group has no state there (its offsets were
/// deleted, or altered to -1), and the next acquisition starts it from
/// `share.auto.offset.reset` ([`Slot::start_if_unset`]). An unset slot keeps
/// its version, and is stored as a tombstone, so that no older write in
/// flight can bring the deleted state back.
pub struct Slot {
    pub state: SharePartition,
    version: i64,
    unset: bool,
    /// Records whose acquisition lock expired here since the broker started
    /// (Kafka's SharePartitionMetrics AcquisitionLockTimeoutPerSec). Kept on
    /// the slot, not the state, so that AlterShareGroupOffsets does not
    /// reset it; mutated under the slot's lock, which the timer holds anyway.
    lock_timeouts: u64,
}

impl Slot {
    fn unset(version: i64) -> Slot {
        Slot { state: SharePartition::starting_at(0), version, unset: true, lock_timeouts: 0 }
    }

    /// Whether the group has state here (an unset slot has none).
    pub fn is_set(&self) -> bool {
        !self.unset
    }

    /// Starts an unset slot's state with `init` (share.auto.offset.reset).
    pub(super) fn start_if_unset(&mut self, init: impl FnOnce() -> SharePartition) {
        if self.unset {
            self.state = init();
            self.unset = false;
        }
    }

    /// AlterShareGroupOffsets: the share-partition starts at `start_offset`
    /// with nothing in flight (what was before it is done); a negative one
    /// unsets it, as Kafka's share partition reads -1 as "not initialized".
    pub(super) fn reset_to(&mut self, start_offset: i64) {
        if start_offset < 0 {
            self.clear();
        } else {
            self.state = SharePartition::starting_at(start_offset);
            self.unset = false;
        }
    }

    /// DeleteShareGroupOffsets: forgets the state (the version stays).
    pub(super) fn clear(&mut self) {
        self.state = SharePartition::starting_at(0);
        self.unset = true;
    }

    /// The record of the state now, to store.
    pub(super) fn record(&mut self, key: &SharePartitionKey) -> ShareStateRecord {
        self.version += 1;
        let (start_offset, batches) = if self.unset {
            (crate::catalog::UNSET_START_OFFSET, Vec::new())
        } else {
            (self.state.start_offset(), self.state.snapshot())
        };
        ShareStateRecord {
            group_id: key.group_id.clone(),
            topic_id: key.topic_id,
            partition: key.partition,
            version: self.version,
            start_offset,
            batches,
        }
    }
}

/// A slot never stored: unset, version 0.
pub(super) fn new_slot() -> Arc<Mutex<Slot>> {
    Arc::new(Mutex::new(Slot::unset(0)))
}

/// ListGroups' protocol and group type of a share group.
pub const SHARE_GROUP_TYPE: &str = "share";

/// A share-partition: (group id, topic id, partition).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharePartitionKey {
    pub group_id: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

struct Groups {
    membership: ShareMembership,
    sessions: ShareSessions,
    /// Per-group overrides of the broker's defaults: as set (names and
    /// values, what is stored) and applied.
    overrides: HashMap<String, BTreeMap<String, String>>,
    configs: HashMap<String, ShareGroupConfig>,
}

/// Records acknowledged since the broker started, by type, over every
/// share group (Kafka's ShareGroupMetrics RecordAcknowledgementsPerSec by
/// ackType). Added once per acknowledgement batch, after its records moved,
/// with no lock of their own.
#[derive(Debug, Default)]
pub struct ShareCounters {
    pub accepted: AtomicU64,
    pub released: AtomicU64,
    pub rejected: AtomicU64,
    pub renewed: AtomicU64,
}

impl ShareCounters {
    pub(super) fn add(&self, counts: &AckCounts) {
        let pairs = [
            (&self.accepted, counts.accepted),
            (&self.released, counts.released),
            (&self.rejected, counts.rejected),
            (&self.renewed, counts.renewed),
        ];
        for (counter, n) in pairs {
            if n > 0 {
                counter.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}

/// One share group as a scrape sees it.
#[derive(Debug, Clone)]
pub struct ShareGroupRow {
    pub group_id: String,
    pub state: GroupState,
    pub members: usize,
}

/// One share-partition as a scrape sees it (an unset one is left out: the
/// group has no state there).
#[derive(Debug, Clone)]
pub struct SharePartitionRow {
    pub key: SharePartitionKey,
    pub start_offset: i64,
    pub window: WindowCounts,
    pub lock_timeouts: u64,
}

pub struct ShareService {
    pub(super) config: ShareConfig,
    pub(super) catalog: Arc<dyn Catalog>,
    pub(super) topics: Arc<Topics>,
    groups: Mutex<Groups>,
    partitions: Mutex<BTreeMap<SharePartitionKey, Arc<Mutex<Slot>>>>,
    lock_deadlines: Mutex<BinaryHeap<Reverse<(i64, SharePartitionKey)>>>,
    deadline_moved: Notify,
    pub counters: ShareCounters,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ShareService {
    /// Restores the stored share-partitions and starts the timer task.
    pub fn start(
        config: ShareConfig,
        catalog: Arc<dyn Catalog>,
        topics: Arc<Topics>,
        stored: Vec<ShareStateRecord>,
        group_configs: Vec<crate::catalog::GroupConfigRecord>,
    ) -> Arc<ShareService> {
        let service = Arc::new(ShareService::new(config, catalog, topics, stored));
        {
            let mut groups = lock(&service.groups);
            for (group_id, overrides) in group_configs {
                match ShareGroupConfig::with_overrides(&service.config.group_defaults, &overrides) {
                    Ok(applied) => {
                        groups.configs.insert(group_id.clone(), applied);
                        groups.overrides.insert(group_id, overrides);
                    }
                    Err(e) => log::warn!("the stored configs of group {group_id} are not applied: {e}"),
                }
            }
        }
        tokio::spawn(Arc::clone(&service).run_deadlines());
        service
    }

    fn new(
        config: ShareConfig,
        catalog: Arc<dyn Catalog>,
        topics: Arc<Topics>,
        stored: Vec<ShareStateRecord>,
    ) -> ShareService {
        let partitions = stored
            .into_iter()
            .map(|s| {
                let key = SharePartitionKey { group_id: s.group_id, topic_id: s.topic_id, partition: s.partition };
                let slot = if s.start_offset < 0 {
                    Slot::unset(s.version) // a tombstone: offsets deleted
                } else {
                    let state = SharePartition::restore(s.start_offset, &s.batches);
                    Slot { state, version: s.version, unset: false, lock_timeouts: 0 }
                };
                (key, Arc::new(Mutex::new(slot)))
            })
            .collect();
        ShareService {
            config,
            catalog,
            topics,
            groups: Mutex::new(Groups {
                membership: ShareMembership::default(),
                sessions: ShareSessions::default(),
                overrides: HashMap::new(),
                configs: HashMap::new(),
            }),
            partitions: Mutex::new(partitions),
            lock_deadlines: Mutex::new(BinaryHeap::new()),
            deadline_moved: Notify::new(),
            counters: ShareCounters::default(),
        }
    }

    /// A group's configs: its overrides, else the broker's defaults.
    pub fn group_config(&self, group_id: &str) -> ShareGroupConfig {
        lock(&self.groups).configs.get(group_id).copied().unwrap_or(self.config.group_defaults)
    }

    /// A group's overrides, as set (DescribeConfigs tells them from defaults).
    pub fn group_overrides(&self, group_id: &str) -> BTreeMap<String, String> {
        lock(&self.groups).overrides.get(group_id).cloned().unwrap_or_default()
    }

    /// IncrementalAlterConfigs on a group: each change sets a config (or with
    /// `None` deletes it, back to the broker's default). All are checked
    /// before any applies; the write is handed to the catalog under the
    /// lock, so a group's configs are stored in the order they were set.
    pub fn alter_group_configs(
        &self,
        group_id: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<Option<CatalogFuture<()>>, super::GroupConfigError> {
        let mut groups = lock(&self.groups);
        let mut overrides = groups.overrides.get(group_id).cloned().unwrap_or_default();
        for (name, value) in changes {
            match value {
                Some(v) => overrides.insert(name.clone(), v.clone()),
                None => overrides.remove(name),
            };
            // A delete of an unknown name is refused too.
            if !super::config::GROUP_CONFIG_NAMES.contains(&name.as_str()) {
                return Err(super::GroupConfigError::UnknownName(name.clone()));
            }
        }
        let applied = ShareGroupConfig::with_overrides(&self.config.group_defaults, &overrides)?;
        if validate_only {
            return Ok(None);
        }
        groups.configs.insert(group_id.to_owned(), applied);
        groups.overrides.insert(group_id.to_owned(), overrides.clone());
        Ok(Some(self.catalog.set_group_configs(group_id.to_owned(), overrides)))
    }

    /// One ShareGroupHeartbeat; a member that left releases its records.
    pub fn heartbeat(&self, request: ShareHeartbeat, topics: &dyn TopicLookup) -> ShareHeartbeatAnswer {
        let (answer, departed) = {
            let mut groups = lock(&self.groups);
            let (answer, departed) = groups.membership.heartbeat(crate::now_ms(), request, topics, &self.config);
            if let Some(d) = &departed {
                groups.sessions.remove_member(&d.group_id, &d.member_id);
            }
            (answer, departed)
        };
        // A new member's session deadline may be the earliest now.
        self.deadline_moved.notify_one();
        if let Some(d) = departed {
            self.release_departed(&[d]);
        }
        answer
    }

    /// Read access to the membership (ShareGroupDescribe).
    pub fn read_membership<R>(&self, f: impl FnOnce(&ShareMembership) -> R) -> R {
        f(&lock(&self.groups).membership)
    }

    /// ListGroups' entries for share groups (protocol and group type
    /// "share"), filtered as ListGroups filters (case-insensitively; empty
    /// matches all).
    pub fn listed_groups(&self, states_filter: &[String], types_filter: &[String]) -> Vec<crate::group::ListedGroup> {
        let wanted = |filter: &[String], value: &str| {
            filter.is_empty() || filter.iter().any(|f| f.trim().eq_ignore_ascii_case(value))
        };
        if !wanted(types_filter, SHARE_GROUP_TYPE) {
            return Vec::new();
        }
        let groups = lock(&self.groups);
        let mut ids = groups.membership.group_ids();
        ids.sort();
        ids.into_iter()
            .filter_map(|id| {
                let group = groups.membership.group(&id)?;
                let state = group.group_state();
                wanted(states_filter, state.as_str()).then(|| crate::group::ListedGroup {
                    group_id: id.clone(),
                    protocol_type: SHARE_GROUP_TYPE.to_owned(),
                    state,
                    group_type: SHARE_GROUP_TYPE,
                })
            })
            .collect()
    }

    /// Whether the share group is known: it has had members, or state.
    pub fn group_exists(&self, group_id: &str) -> bool {
        lock(&self.groups).membership.group(group_id).is_some()
            || lock(&self.partitions).keys().any(|k| k.group_id == group_id)
    }

    /// DeleteGroups of a share group: an empty group goes with its
    /// share-partitions' states (its configs stay, as Kafka keeps a group
    /// resource's configs). GROUP_ID_NOT_FOUND for a group never seen,
    /// NON_EMPTY_GROUP while it has members. The future says when the
    /// states are deleted from the catalog.
    pub fn delete_group(&self, group_id: &str) -> Result<CatalogFuture<()>, i16> {
        if !self.group_exists(group_id) {
            return Err(kafgres_wire::error_code::GROUP_ID_NOT_FOUND);
        }
        let mut groups = lock(&self.groups);
        groups.membership.remove_group(group_id)?;
        let group = group_id.to_owned();
        groups.sessions.remove_group(group_id);
        lock(&self.partitions).retain(|k, _| k.group_id != group);
        Ok(self.catalog.delete_share_group(group))
    }

    /// Forgets a deleted topic's share-partitions (the catalog deleted their
    /// rows with the topic); sessions naming it answer UNKNOWN_TOPIC_ID.
    pub fn forget_topic(&self, topic_id: Uuid) {
        lock(&self.partitions).retain(|k, _| k.topic_id != topic_id);
    }

    /// Each share-partition of the group with its start offset and the
    /// records after it already done (acknowledged or archived: Kafka's
    /// delivery-complete count, which DescribeShareGroupOffsets v1's lag
    /// subtracts), in (topic id, partition) order.
    pub fn start_offsets(&self, group_id: &str) -> Vec<(Uuid, i32, i64, i64)> {
        self.partition_rows(|k| k.group_id == group_id)
            .into_iter()
            .map(|r| (r.key.topic_id, r.key.partition, r.start_offset, r.window.done))
            .collect()
    }

    /// The set share-partitions whose key `wanted` picks, in key order, each
    /// read under its own lock in turn (never two at once): one walk of its
    /// in-flight window, no record copied.
    pub fn partition_rows(&self, wanted: impl Fn(&SharePartitionKey) -> bool) -> Vec<SharePartitionRow> {
        let partitions: Vec<(SharePartitionKey, Arc<Mutex<Slot>>)> = lock(&self.partitions)
            .iter()
            .filter(|(k, _)| wanted(k))
            .map(|(k, slot)| (k.clone(), Arc::clone(slot)))
            .collect();
        partitions
            .into_iter()
            .filter_map(|(key, slot)| {
                let slot = lock(&slot);
                slot.is_set().then(|| SharePartitionRow {
                    start_offset: slot.state.start_offset(),
                    window: slot.state.window_counts(),
                    lock_timeouts: slot.lock_timeouts,
                    key,
                })
            })
            .collect()
    }

    /// Every share group known (with members, or with state only), sorted,
    /// with its state and member count.
    pub fn group_rows(&self) -> Vec<ShareGroupRow> {
        let mut rows: BTreeMap<String, ShareGroupRow> = {
            let groups = lock(&self.groups);
            groups
                .membership
                .group_ids()
                .into_iter()
                .filter_map(|id| {
                    let group = groups.membership.group(&id)?;
                    let row = ShareGroupRow {
                        group_id: id.clone(),
                        state: group.group_state(),
                        members: group.members.len(),
                    };
                    Some((id, row))
                })
                .collect()
        };
        for key in lock(&self.partitions).keys() {
            if !rows.contains_key(&key.group_id) {
                // State but no members (yet, or since a restart): Empty.
                let row = ShareGroupRow { group_id: key.group_id.clone(), state: GroupState::Empty, members: 0 };
                rows.insert(key.group_id.clone(), row);
            }
        }
        rows.into_values().collect()
    }

    pub fn is_member(&self, group_id: &str, member_id: &str) -> bool {
        lock(&self.groups).membership.is_member(group_id, member_id)
    }

    /// Applies a ShareFetch's or ShareAcknowledge's session epoch; a session
    /// opened anew (epoch 0 again) releases what the member held in the old
    /// one. Closing one (epoch -1) releases nothing here: the caller first
    /// applies the request's acknowledgements, then [`Self::release_member`].
    pub fn update_session(&self, request: SessionRequest<'_>) -> Result<SessionOutcome, i16> {
        // Kafka opens a session for any member id: membership is the
        // heartbeat's business, and a member's records are released when it leaves.
        let outcome = lock(&self.groups).sessions.update(&request, self.config.sessions_max)?;
        let (group_id, member_id) = (request.group_id, request.member_id);
        if let SessionOutcome::Open { replaced_an_older_one: true, .. } = outcome {
            self.release_departed(&[DepartedMember { group_id: group_id.into(), member_id: member_id.into() }]);
        }
        Ok(outcome)
    }

    /// A client connection closed: the share sessions it opened go, and
    /// their members' records are released (Kafka evicts them the same way).
    /// Peer addresses identify connections: one cannot be reused before the
    /// connection that had it is closed, which is when this runs.
    pub fn connection_closed(&self, connection: std::net::SocketAddr) {
        let gone = lock(&self.groups).sessions.remove_connection(connection);
        if !gone.is_empty() {
            let departed: Vec<DepartedMember> =
                gone.into_iter().map(|(group_id, member_id)| DepartedMember { group_id, member_id }).collect();
            self.release_departed(&departed);
        }
    }

    /// Releases what `member` holds once its session closed (after its
    /// final acknowledgements were applied).
    pub fn release_member(&self, group_id: &str, member_id: &str) {
        self.release_departed(&[DepartedMember { group_id: group_id.into(), member_id: member_id.into() }]);
    }

    /// The share-partition's state, if the group has read it yet.
    pub fn existing(&self, key: &SharePartitionKey) -> Option<Arc<Mutex<Slot>>> {
        lock(&self.partitions).get(key).cloned()
    }

    /// The share-partition's slot, unset the first time: the caller starts
    /// it under the slot's lock ([`Slot::start_if_unset`]), where no
    /// DeleteShareGroupOffsets can unset it again before it is used.
    pub(super) fn slot(&self, key: &SharePartitionKey) -> Arc<Mutex<Slot>> {
        let mut partitions = lock(&self.partitions);
        Arc::clone(partitions.entry(key.clone()).or_insert_with(new_slot))
    }

    /// Runs `change` on the share-partitions of an empty group, with the
    /// group's membership locked so that no member joins meanwhile
    /// (Alter/DeleteShareGroupOffsets, which Kafka allows only on an empty
    /// group). GROUP_ID_NOT_FOUND for a group never seen, NON_EMPTY_GROUP
    /// while it has members. Locks are taken groups, partitions, then each
    /// slot: the order every other path keeps.
    pub(super) fn change_empty_group<R>(
        &self,
        group_id: &str,
        change: impl FnOnce(&mut BTreeMap<SharePartitionKey, Arc<Mutex<Slot>>>) -> R,
    ) -> Result<R, i16> {
        let groups = lock(&self.groups);
        let mut partitions = lock(&self.partitions);
        match groups.membership.group(group_id) {
            Some(g) if !g.members.is_empty() => return Err(kafgres_wire::error_code::NON_EMPTY_GROUP),
            Some(_) => {}
            None if partitions.keys().any(|k| k.group_id == group_id) => {}
            None => return Err(kafgres_wire::error_code::GROUP_ID_NOT_FOUND),
        }
        Ok(change(&mut partitions))
    }

    /// Hands states to the catalog (call with the partitions' locks held).
    pub(super) fn write(&self, records: Vec<ShareStateRecord>) -> Option<CatalogFuture<()>> {
        (!records.is_empty()).then(|| self.catalog.write_share_states(records))
    }

    /// A write nobody waits for: its failure is logged.
    pub(super) fn write_in_background(&self, write: Option<CatalogFuture<()>>) {
        if let Some(write) = write {
            tokio::spawn(async move {
                if let Err(e) = write.await {
                    log::warn!("storing share-partition state failed: {e}; a restart may redeliver records");
                }
            });
        }
    }

    /// Remembers a lock deadline and wakes the timer task if it is the earliest.
    pub(super) fn schedule_lock_deadline(&self, key: &SharePartitionKey, deadline_ms: i64) {
        let mut heap = lock(&self.lock_deadlines);
        let earliest = heap.peek().is_none_or(|Reverse((at, _))| deadline_ms < *at);
        heap.push(Reverse((deadline_ms, key.clone())));
        drop(heap);
        if earliest {
            self.deadline_moved.notify_one();
        }
    }

    /// Records became available again: wake the fetches waiting on the log partition.
    pub(super) fn wake_fetches(&self, key: &SharePartitionKey) {
        if let Some(p) = self.topics.get_by_id(&key.topic_id).and_then(|t| t.partition(key.partition).cloned()) {
            p.wake_fetch_waiters();
        }
    }

    fn release_departed(&self, departed: &[DepartedMember]) {
        let keys: Vec<(SharePartitionKey, Arc<Mutex<Slot>>)> = lock(&self.partitions)
            .iter()
            .filter(|(k, _)| departed.iter().any(|d| d.group_id == k.group_id))
            .map(|(k, p)| (k.clone(), Arc::clone(p)))
            .collect();
        for (key, partition) in keys {
            let limit = self.group_config(&key.group_id).delivery_count_limit;
            let mut slot = lock(&partition);
            let mut changed = false;
            for d in departed.iter().filter(|d| d.group_id == key.group_id) {
                changed |= slot.state.release_member(&d.member_id, limit);
            }
            if changed {
                let write = self.write(vec![slot.record(&key)]);
                drop(slot);
                self.write_in_background(write);
                self.wake_fetches(&key);
            }
        }
    }

    /// Sleeps until the earliest session or lock deadline, serves it, repeats.
    async fn run_deadlines(self: Arc<Self>) {
        loop {
            let sessions = lock(&self.groups).membership.next_deadline();
            let locks = lock(&self.lock_deadlines).peek().map(|Reverse((at, _))| *at);
            let next = match (sessions, locks) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let Some(at_ms) = next else {
                self.deadline_moved.notified().await;
                continue;
            };
            let wait = Duration::from_millis((at_ms - crate::now_ms()).max(0) as u64);
            tokio::select! {
                _ = tokio::time::sleep(wait) => self.serve_deadlines(crate::now_ms()),
                _ = self.deadline_moved.notified() => {}
            }
        }
    }

    fn serve_deadlines(&self, now_ms: i64) {
        let departed = {
            let mut groups = lock(&self.groups);
            let departed = groups.membership.expire_sessions(now_ms);
            for d in &departed {
                groups.sessions.remove_member(&d.group_id, &d.member_id);
            }
            departed
        };
        if !departed.is_empty() {
            self.release_departed(&departed);
        }
        let mut due = Vec::new();
        {
            let mut heap = lock(&self.lock_deadlines);
            while heap.peek().is_some_and(|Reverse((at, _))| *at <= now_ms) {
                if let Some(Reverse((_, key))) = heap.pop() {
                    due.push(key);
                }
            }
        }
        due.sort();
        due.dedup();
        for key in due {
            let Some(partition) = self.existing(&key) else { continue };
            let limit = self.group_config(&key.group_id).delivery_count_limit;
            let mut slot = lock(&partition);
            let expired = slot.state.expire_locks(now_ms, limit);
            if expired == 0 {
                continue;
            }
            slot.lock_timeouts += expired;
            let next = slot.state.next_lock_deadline();
            let write = self.write(vec![slot.record(&key)]);
            drop(slot);
            self.write_in_background(write);
            if let Some(at) = next {
                self.schedule_lock_deadline(&key, at);
            }
            self.wake_fetches(&key);
        }
    }
}
