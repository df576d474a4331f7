//! The group coordinator hosted on the data plane.
//!
//! One [`GroupService`] owns the pure [`GroupCoordinator`] behind a std mutex
//! (never held across an `.await`) and carries out its effects:
//! - parked JoinGroup/SyncGroup requests wait on a oneshot registered under
//!   their ticket before the lock is released, so a later call can answer them;
//! - offset writes are handed to the [`Catalog`] *while the lock is held*: the
//!   catalog enqueues an operation when it is called, so Postgres applies them
//!   in the coordinator's order, and the caller awaits durability afterwards;
//! - deadlines are served by one timer task that sleeps until the earliest
//!   deadline and is woken by a `Notify` when a call moves it earlier. There is
//!   no periodic tick.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{oneshot, Notify};

use crate::catalog::{Catalog, CatalogError, CatalogFuture, CommittedOffset as StoredOffset};
use crate::group::{CommittedOffset, Effect, GroupConfig, GroupCoordinator, Reply, Ticket, TopicPartition};
use crate::group::{JoinGroupResponse, SyncGroupResponse};

struct Inner {
    coordinator: GroupCoordinator,
    parked_joins: HashMap<Ticket, oneshot::Sender<JoinGroupResponse>>,
    parked_syncs: HashMap<Ticket, oneshot::Sender<SyncGroupResponse>>,
}

/// Writes to await once the coordinator's lock is released.
pub type Durability = Vec<CatalogFuture<()>>;

/// A JoinGroup or SyncGroup answer, now or later.
pub enum Pending<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

pub struct GroupService {
    inner: Mutex<Inner>,
    catalog: Arc<dyn Catalog>,
    deadline_moved: Notify,
}

/// A catalog row as the coordinator's view holds it: (group id, offset).
fn stored_to_view(o: StoredOffset) -> (String, CommittedOffset) {
    let row = CommittedOffset {
        topic: o.topic,
        partition: o.partition,
        offset: o.offset,
        leader_epoch: o.leader_epoch,
        metadata: o.metadata.unwrap_or_default(),
        commit_timestamp_ms: o.commit_timestamp_ms,
    };
    (o.group_id, row)
}

impl GroupService {
    /// Loads the committed offsets read from the catalog and starts the timer task.
    pub fn start(config: GroupConfig, catalog: Arc<dyn Catalog>, offsets: Vec<StoredOffset>) -> Arc<GroupService> {
        let mut coordinator = GroupCoordinator::new(config);
        coordinator.load_offsets(crate::now_ms(), offsets.into_iter().map(stored_to_view));
        let service = Arc::new(GroupService {
            inner: Mutex::new(Inner { coordinator, parked_joins: HashMap::new(), parked_syncs: HashMap::new() }),
            catalog,
            deadline_moved: Notify::new(),
        });
        tokio::spawn(Arc::clone(&service).run_deadlines());
        service
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs one coordinator call and carries out its effects; returns the
    /// call's result and the writes its answer must wait for.
    pub fn call<R>(&self, f: impl FnOnce(&mut GroupCoordinator) -> (R, Vec<Effect>)) -> (R, Durability) {
        let mut inner = self.lock();
        let (result, effects) = f(&mut inner.coordinator);
        let writes = self.apply(&mut inner, effects);
        (result, writes)
    }

    /// A JoinGroup: the answer now, or a receiver registered before the lock
    /// is released.
    pub fn join(
        &self,
        f: impl FnOnce(&mut GroupCoordinator) -> (Reply<JoinGroupResponse>, Vec<Effect>),
    ) -> Pending<JoinGroupResponse> {
        self.park(f, |inner| &mut inner.parked_joins)
    }

    /// A SyncGroup, like [`Self::join`].
    pub fn sync(
        &self,
        f: impl FnOnce(&mut GroupCoordinator) -> (Reply<SyncGroupResponse>, Vec<Effect>),
    ) -> Pending<SyncGroupResponse> {
        self.park(f, |inner| &mut inner.parked_syncs)
    }

    fn park<T>(
        &self,
        f: impl FnOnce(&mut GroupCoordinator) -> (Reply<T>, Vec<Effect>),
        parked: impl FnOnce(&mut Inner) -> &mut HashMap<Ticket, oneshot::Sender<T>>,
    ) -> Pending<T> {
        let mut inner = self.lock();
        let (reply, effects) = f(&mut inner.coordinator);
        let pending = match reply {
            Reply::Now(r) => Pending::Now(r),
            Reply::Parked(ticket) => {
                let (tx, rx) = oneshot::channel();
                parked(&mut inner).insert(ticket, tx);
                Pending::Later(rx)
            }
        };
        // Joins and syncs never write offsets; their effects only answer
        // other parked requests and move deadlines.
        drop(self.apply(&mut inner, effects));
        pending
    }

    /// Takes offsets that are already durable in the catalog (committed by
    /// `kafgres.consume()` in a SQL transaction) into the in-memory view, so
    /// OffsetFetch answers them. Nothing is written.
    pub fn load_committed_offsets(&self, offsets: Vec<StoredOffset>) {
        let mut inner = self.lock();
        inner.coordinator.load_offsets(crate::now_ms(), offsets.into_iter().map(stored_to_view));
    }

    /// Replaces a group's offsets in the in-memory view with what the catalog
    /// holds (after a failed write left the view ahead of it).
    pub fn replace_group_offsets(&self, group_id: &str, offsets: Vec<StoredOffset>) {
        let rows = offsets.into_iter().map(|o| stored_to_view(o).1).collect();
        self.lock().coordinator.replace_group_offsets(crate::now_ms(), group_id, rows);
    }

    /// After a failed write the coordinator's view holds offsets the catalog
    /// does not: reads the group's rows back so OffsetFetch answers what is
    /// durable. If that read fails too, the view stays ahead until the
    /// broker restarts (and says so in the log).
    pub async fn reload_group_offsets(&self, group_id: &str) {
        match self.catalog.load_group_offsets(group_id.to_string()).await {
            Ok(rows) => self.replace_group_offsets(group_id, rows),
            Err(e) => log::error!(
                "reloading the offsets of group {group_id} failed too ({e}); OffsetFetch may answer offsets \
                 that are not stored until the broker restarts"
            ),
        }
    }

    /// Read-only access (OffsetFetch, ListGroups, DescribeGroups).
    pub fn read<R>(&self, f: impl FnOnce(&GroupCoordinator) -> R) -> R {
        f(&self.lock().coordinator)
    }

    fn apply(&self, inner: &mut Inner, effects: Vec<Effect>) -> Durability {
        let mut writes = Vec::new();
        for effect in effects {
            match effect {
                Effect::CompleteJoin { ticket, response } => {
                    if let Some(tx) = inner.parked_joins.remove(&ticket) {
                        let _ = tx.send(response); // the connection may be gone
                    }
                }
                Effect::CompleteSync { ticket, response } => {
                    if let Some(tx) = inner.parked_syncs.remove(&ticket) {
                        let _ = tx.send(response);
                    }
                }
                Effect::ScheduleDeadline { .. } => self.deadline_moved.notify_one(),
                Effect::PersistOffsets { group_id, offsets } => {
                    let rows = offsets
                        .into_iter()
                        .map(|o| StoredOffset {
                            group_id: group_id.clone(),
                            topic: o.topic,
                            partition: o.partition,
                            offset: o.offset,
                            leader_epoch: o.leader_epoch,
                            metadata: Some(o.metadata),
                            commit_timestamp_ms: o.commit_timestamp_ms,
                        })
                        .collect();
                    writes.push(self.catalog.commit_offsets(rows));
                }
                Effect::DeleteOffsets { group_id, partitions } => {
                    let partitions =
                        partitions.into_iter().map(|TopicPartition { topic, partition }| (topic, partition));
                    writes.push(self.catalog.delete_offsets(group_id, Some(partitions.collect())));
                }
                Effect::DeleteGroup { group_id } => writes.push(self.catalog.delete_offsets(group_id, None)),
            }
        }
        writes
    }

    /// Forgets a deleted topic's committed offsets (the catalog deleted its rows).
    pub fn forget_topic(&self, topic: &str) {
        let mut inner = self.lock();
        let effects = inner.coordinator.forget_topic(crate::now_ms(), topic);
        // The catalog already removed the rows with the topic; only wake-ups
        // and answers matter here.
        let effects = effects.into_iter().filter(|e| {
            !matches!(e, Effect::PersistOffsets { .. } | Effect::DeleteOffsets { .. } | Effect::DeleteGroup { .. })
        });
        drop(self.apply(&mut inner, effects.collect()));
    }

    /// Sleeps until the coordinator's earliest deadline, serves it, repeats.
    async fn run_deadlines(self: Arc<Self>) {
        loop {
            let next = self.lock().coordinator.next_deadline();
            match next {
                None => self.deadline_moved.notified().await,
                Some(at_ms) => {
                    let wait = Duration::from_millis((at_ms - crate::now_ms()).max(0) as u64);
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {
                            let mut inner = self.lock();
                            let effects = inner.coordinator.on_deadline(crate::now_ms());
                            for write in self.apply(&mut inner, effects) {
                                tokio::spawn(async move {
                                    if let Err(e) = write.await {
                                        log::warn!("group state write after a timeout failed: {e}");
                                    }
                                });
                            }
                        }
                        _ = self.deadline_moved.notified() => {}
                    }
                }
            }
        }
    }
}

/// Awaits every write; the first failure, if any.
pub async fn durable(writes: Durability) -> Result<(), CatalogError> {
    let mut first_error = None;
    for write in writes {
        if let Err(e) = write.await {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}
