//! The transaction coordinator hosted on the data plane: per-id state behind
//! async mutexes, persisted through the catalog, markers appended to the
//! partitions, and one timer task for transaction timeouts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use kafgres_wire::error_code;
use tokio::sync::Notify;

use super::rules::{self, InitPlan, Partitions, TxnState};
use crate::catalog::{Catalog, CommittedOffset, TransactionRecord};
use crate::group_service::GroupService;
use crate::producer_ids::ProducerIds;
use crate::topics::Topics;
use ending::EpochBump;

/// How long EndTxn waits for its markers to reach the synchronous standbys
/// before answering COORDINATOR_NOT_AVAILABLE (the client retries; the
/// Prepare state makes the retry finish the same transaction).
const MARKER_REPLICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Coordinator settings, named after Kafka's broker configs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnServiceConfig {
    /// `transaction.max.timeout.ms` (Kafka: 900000).
    pub timeout_ms_max: i32,
    /// `transactional.id.expiration.ms` (Kafka: 604800000, 7 days): an id
    /// with no transaction open that has not changed for this long is
    /// forgotten, its row deleted.
    pub transactional_id_expiration_ms: i64,
}

/// Kafka's `transactional.id.expiration.ms` default: 7 days.
pub const TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT: i64 = 7 * 24 * 3600 * 1000;

impl Default for TxnServiceConfig {
    fn default() -> TxnServiceConfig {
        TxnServiceConfig {
            timeout_ms_max: 900_000,
            transactional_id_expiration_ms: TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
        }
    }
}

/// The start time the admin APIs show for an id whose producer has opened no
/// transaction since InitProducerId (Kafka's `txnStartTimestamp` of an Empty
/// state). The stored `started_at` keeps a real time for the SQL views.
const NO_TRANSACTION_STARTED: i64 = -1;

/// How long a failed expiry waits before it is tried again.
const EXPIRY_RETRY_MS: i64 = 60_000;

mod ending;

/// Markers carry the coordinator's epoch; this coordinator never moves.
const COORDINATOR_EPOCH: i32 = 0;

#[derive(Debug, Clone)]
struct TxnMeta {
    producer_id: i64,
    producer_epoch: i16,
    timeout_ms: i32,
    state: TxnState,
    partitions: Partitions,
    groups: BTreeSet<String>,
    /// (group, topic, partition) → the offset TxnOffsetCommit gave.
    pending: BTreeMap<(String, String, i32), CommittedOffset>,
    started_ms: i64,
    /// When the state was last stored: idle ids expire from here.
    updated_ms: i64,
    /// The producer id a version 2 end replaced when the epoch ran out, for
    /// a retry of that end (Kafka's `previousProducerId`). Kept in memory
    /// only: a retry across a restart is told INVALID_PRODUCER_ID_MAPPING.
    previous_producer_id: Option<i64>,
    /// Whether the client speaks transaction version 2 (it added partitions
    /// implicitly or ended with EndTxn v5): its own ends bump the epoch, so a
    /// fence must bump past what a retry of such an end would carry. Kept in
    /// memory only.
    version_2: bool,
}

impl TxnMeta {
    /// Opens a transaction on an idle id.
    fn begin(&mut self) {
        self.state = TxnState::Ongoing;
        self.started_ms = crate::now_ms();
        self.partitions.clear();
        self.groups.clear();
        self.pending.clear();
    }

    fn record(&self, transactional_id: &str) -> TransactionRecord {
        TransactionRecord {
            transactional_id: transactional_id.to_string(),
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state.as_str().to_string(),
            partitions: self.partitions.iter().cloned().collect(),
            groups: self.groups.iter().cloned().collect(),
            pending_offsets: self.pending.values().cloned().collect(),
            started_ms: self.started_ms,
            updated_ms: self.updated_ms,
        }
    }

    fn from_record(r: &TransactionRecord) -> Option<TxnMeta> {
        Some(TxnMeta {
            producer_id: r.producer_id,
            producer_epoch: r.producer_epoch,
            timeout_ms: r.timeout_ms,
            state: TxnState::parse(&r.state)?,
            partitions: r.partitions.iter().cloned().collect(),
            groups: r.groups.iter().cloned().collect(),
            pending: r
                .pending_offsets
                .iter()
                .map(|o| ((o.group_id.clone(), o.topic.clone(), o.partition), o.clone()))
                .collect(),
            started_ms: r.started_ms,
            updated_ms: r.updated_ms,
            previous_producer_id: None,
            version_2: false,
        })
    }
}

type Entry = Arc<tokio::sync::Mutex<Option<TxnMeta>>>;

/// A TxnOffsetCommit's partitions: (topic, partition, offset, leader epoch, metadata).
pub type TxnOffsets = Vec<(String, i32, i64, i32, Option<String>)>;

pub struct TxnService {
    config: TxnServiceConfig,
    /// Where each state change is stored before it is answered.
    catalog: Arc<dyn Catalog>,
    producer_ids: Arc<ProducerIds>,
    /// The partitions markers are written to.
    topics: Arc<Topics>,
    /// Told the offsets a commit made durable, for OffsetFetch.
    groups: Arc<GroupService>,
    entries: Mutex<HashMap<String, Entry>>,
    /// Producer id → (epoch, partitions of its open transaction): what
    /// Produce checks transactional batches against, without awaiting.
    open: Mutex<HashMap<i64, (i16, Partitions)>>,
    /// Producer id → its current epoch, open transaction or not: a zombie's
    /// batch is told it is fenced rather than that it has no transaction.
    epochs: Mutex<HashMap<i64, i16>>,
    /// (deadline, transactional id) of open transactions.
    deadlines: Mutex<BTreeSet<(i64, String)>>,
    /// Shared with the timeout task, which waits on it without keeping the
    /// service alive.
    deadline_moved: Arc<Notify>,
    /// Every id's stored state, for the admin APIs: read without waiting on
    /// an id's lock, which an EndTxn holds while its markers become durable.
    summaries: Mutex<BTreeMap<String, TxnSummary>>,
    /// When each id with no transaction open expires, both ways.
    expiries: Mutex<Expiries>,
}

/// (expiry, id) in time order, and each id's entry in it.
#[derive(Default)]
struct Expiries {
    queue: BTreeSet<(i64, String)>,
    of: HashMap<String, i64>,
}

impl Expiries {
    fn set(&mut self, transactional_id: &str, at_ms: Option<i64>) {
        if let Some(old) = self.of.remove(transactional_id) {
            self.queue.remove(&(old, transactional_id.to_string()));
        }
        if let Some(at_ms) = at_ms {
            self.queue.insert((at_ms, transactional_id.to_string()));
            self.of.insert(transactional_id.to_string(), at_ms);
        }
    }

    fn first(&self) -> Option<(i64, String)> {
        self.queue.iter().next().cloned()
    }
}

/// A transactional id as DescribeTransactions and ListTransactions show it:
/// its last stored state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnSummary {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// When its open (or last) transaction began; -1 before the first.
    pub started_ms: i64,
    /// The partitions of its open transaction.
    pub partitions: Vec<(String, i32)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TxnService {
    /// Loads the stored states. Transactions left in Prepare* are finished by
    /// [`TxnService::recover`] once the broker serves.
    pub fn new(
        config: TxnServiceConfig,
        records: &[TransactionRecord],
        catalog: Arc<dyn Catalog>,
        producer_ids: Arc<ProducerIds>,
        topics: Arc<Topics>,
        groups: Arc<GroupService>,
    ) -> TxnService {
        let service = TxnService {
            config,
            catalog,
            producer_ids,
            topics,
            groups,
            entries: Mutex::new(HashMap::new()),
            open: Mutex::new(HashMap::new()),
            epochs: Mutex::new(HashMap::new()),
            deadlines: Mutex::new(BTreeSet::new()),
            deadline_moved: Arc::new(Notify::new()),
            summaries: Mutex::new(BTreeMap::new()),
            expiries: Mutex::new(Expiries::default()),
        };
        for r in records {
            let Some(meta) = TxnMeta::from_record(r) else {
                log::warn!("transactional id {}: unknown stored state {:?}; ignored", r.transactional_id, r.state);
                continue;
            };
            service.track(&r.transactional_id, &meta);
            lock(&service.entries).insert(r.transactional_id.clone(), Arc::new(tokio::sync::Mutex::new(Some(meta))));
        }
        service
    }

    fn entry(&self, transactional_id: &str) -> Entry {
        Arc::clone(lock(&self.entries).entry(transactional_id.to_string()).or_default())
    }

    fn existing(&self, transactional_id: &str) -> Option<Entry> {
        lock(&self.entries).get(transactional_id).cloned()
    }

    /// The stored state of one transactional id.
    pub fn summary(&self, transactional_id: &str) -> Option<TxnSummary> {
        lock(&self.summaries).get(transactional_id).cloned()
    }

    /// The stored state of every transactional id, by id.
    pub fn summaries(&self) -> Vec<(String, TxnSummary)> {
        lock(&self.summaries).iter().map(|(id, s)| (id.clone(), s.clone())).collect()
    }

    /// Keeps the produce index, the timeout queue and the admin APIs' view
    /// in step with `meta`.
    fn track(&self, transactional_id: &str, meta: &TxnMeta) {
        let summary = TxnSummary {
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            timeout_ms: meta.timeout_ms,
            state: meta.state,
            started_ms: if meta.state == TxnState::Empty { NO_TRANSACTION_STARTED } else { meta.started_ms },
            partitions: meta.partitions.iter().cloned().collect(),
        };
        lock(&self.summaries).insert(transactional_id.to_string(), summary);
        lock(&self.epochs).insert(meta.producer_id, meta.producer_epoch);
        // Only an id with no transaction in progress expires (Kafka's rule:
        // Empty, CompleteCommit, CompleteAbort).
        let idle = matches!(meta.state, TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort);
        let expires = idle.then(|| meta.updated_ms.saturating_add(self.config.transactional_id_expiration_ms));
        let first_before = lock(&self.expiries).first();
        lock(&self.expiries).set(transactional_id, expires);
        if lock(&self.expiries).first() != first_before {
            self.deadline_moved.notify_one();
        }
        let mut open = lock(&self.open);
        let mut deadlines = lock(&self.deadlines);
        deadlines.retain(|(_, id)| id != transactional_id);
        if meta.state == TxnState::Ongoing {
            open.insert(meta.producer_id, (meta.producer_epoch, meta.partitions.clone()));
            deadlines
                .insert((meta.started_ms.saturating_add(i64::from(meta.timeout_ms)), transactional_id.to_string()));
            drop(deadlines);
            self.deadline_moved.notify_one();
        } else {
            open.remove(&meta.producer_id);
        }
    }

    /// Produce's check of a transactional batch (KIP-890 part 1): the
    /// partition must be in the producer's open transaction, at its epoch.
    pub fn verify_partition(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        topic: &str,
        partition: i32,
    ) -> Result<(), i16> {
        if lock(&self.epochs).get(&producer_id).is_some_and(|current| *current > producer_epoch) {
            return Err(error_code::INVALID_PRODUCER_EPOCH);
        }
        match lock(&self.open).get(&producer_id) {
            Some((epoch, partitions))
                if *epoch == producer_epoch && partitions.contains(&(topic.to_string(), partition)) =>
            {
                Ok(())
            }
            _ => Err(error_code::INVALID_TXN_STATE),
        }
    }

    /// Whether a transactional batch of `producer` for the partition finds it
    /// in the open transaction already (Produce's fast path; a version 2
    /// client's first batch to a partition adds it, see
    /// [`TxnService::add_partitions_implicitly`]).
    pub fn in_open_transaction(&self, producer: (i64, i16), topic: &str, partition: i32) -> bool {
        lock(&self.open).get(&producer.0).is_some_and(|(epoch, partitions)| {
            *epoch == producer.1 && partitions.contains(&(topic.to_string(), partition))
        })
    }

    async fn store(&self, transactional_id: &str, meta: &mut TxnMeta) -> Result<(), i16> {
        meta.updated_ms = crate::now_ms();
        let result = self.catalog.store_transaction(meta.record(transactional_id)).await;
        result.map_err(|e| {
            log::warn!("transactional id {transactional_id}: storing its state failed: {e}");
            error_code::COORDINATOR_NOT_AVAILABLE
        })?;
        self.track(transactional_id, meta);
        Ok(())
    }

    /// InitProducerId with a transactional id: the producer id and epoch to use.
    pub async fn init_producer_id(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: (i64, i16),
    ) -> Result<(i64, i16), i16> {
        rules::check_timeout(timeout_ms, self.config.timeout_ms_max)?;
        let entry = self.entry(transactional_id);
        let mut guard = entry.lock().await;
        let current = guard.as_ref().map(|m| (m.state, m.producer_id, m.producer_epoch));
        let plan = rules::plan_init(current, expected)?;
        let mut meta = match (plan, guard.clone()) {
            (InitPlan::Fresh, _) | (_, None) => {
                let producer_id = self.new_producer_id().await?;
                TxnMeta {
                    producer_id,
                    producer_epoch: 0,
                    timeout_ms,
                    state: TxnState::Empty,
                    partitions: Partitions::new(),
                    groups: BTreeSet::new(),
                    pending: BTreeMap::new(),
                    started_ms: crate::now_ms(),
                    updated_ms: crate::now_ms(),
                    previous_producer_id: None,
                    version_2: false,
                }
            }
            (InitPlan::AbortOpenThenBump, Some(mut meta)) => {
                // Fence the old producer first: the abort markers carry the
                // new epoch, so its late batches and its EndTxn are refused.
                meta.producer_epoch += 1;
                self.finish(transactional_id, &mut meta, false, EpochBump::AlreadyDone).await?;
                meta
            }
            (_, Some(meta)) => meta,
        };
        match plan {
            InitPlan::NewProducerId => {
                meta.producer_id = self.new_producer_id().await?;
                meta.producer_epoch = 0;
            }
            InitPlan::BumpEpoch | InitPlan::AbortOpenThenBump => meta.producer_epoch += 1,
            InitPlan::Fresh => {}
        }
        if meta.producer_epoch == i16::MAX {
            meta.producer_id = self.new_producer_id().await?;
            meta.producer_epoch = 0;
        }
        let previous_producer = guard.as_ref().map(|m| m.producer_id);
        meta.timeout_ms = timeout_ms;
        // A new producer instance: which version it speaks shows at its first act.
        meta.version_2 = false;
        meta.state = TxnState::Empty;
        meta.partitions.clear();
        meta.groups.clear();
        meta.pending.clear();
        self.store(transactional_id, &mut meta).await?;
        if let Some(old) = previous_producer.filter(|old| *old != meta.producer_id) {
            lock(&self.open).remove(&old);
            lock(&self.epochs).remove(&old);
        }
        let answer = (meta.producer_id, meta.producer_epoch);
        *guard = Some(meta);
        Ok(answer)
    }

    async fn new_producer_id(&self) -> Result<i64, i16> {
        self.producer_ids.next().await.map_err(|e| {
            log::warn!("InitProducerId: cannot reserve producer ids: {e}");
            error_code::COORDINATOR_NOT_AVAILABLE
        })
    }

    /// Locks an id's state and checks the request's producer id and epoch.
    async fn checked(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        fenced_code: i16,
    ) -> Result<tokio::sync::OwnedMutexGuard<Option<TxnMeta>>, i16> {
        let entry = self.existing(transactional_id).ok_or(error_code::INVALID_PRODUCER_ID_MAPPING)?;
        let guard = entry.lock_owned().await;
        let meta = guard.as_ref().ok_or(error_code::INVALID_PRODUCER_ID_MAPPING)?;
        rules::check_producer((meta.producer_id, meta.producer_epoch), producer, fenced_code)?;
        Ok(guard)
    }

    /// When a partition does not exist, the request fails: those partitions
    /// UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED.
    fn refuse_unknown(&self, partitions: &[(String, i32)]) -> Option<Vec<((String, i32), i16)>> {
        let unknown: Vec<bool> = partitions.iter().map(|(t, p)| self.topics.partition(t, *p).is_none()).collect();
        unknown.iter().any(|u| *u).then(|| {
            partitions
                .iter()
                .zip(unknown)
                .map(|(tp, u)| {
                    let code =
                        if u { error_code::UNKNOWN_TOPIC_OR_PARTITION } else { error_code::OPERATION_NOT_ATTEMPTED };
                    (tp.clone(), code)
                })
                .collect()
        })
    }

    /// AddPartitionsToTxn: every partition gets the same answer (an unknown
    /// one fails the request: the others are OPERATION_NOT_ATTEMPTED).
    pub async fn add_partitions(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        fenced_code: i16,
        partitions: &[(String, i32)],
    ) -> Vec<((String, i32), i16)> {
        if let Some(refused) = self.refuse_unknown(partitions) {
            return refused;
        }
        let result = self.add(transactional_id, producer, fenced_code, |meta| {
            meta.partitions.extend(partitions.iter().cloned());
        });
        let code = result.await.err().unwrap_or(error_code::NONE);
        partitions.iter().map(|tp| (tp.clone(), code)).collect()
    }

    /// AddPartitionsToTxn v4+ with `verify_only` (KIP-890 part 1, the call
    /// Kafka's partition leaders make before appending a transactional
    /// batch): whether each partition is in the open transaction of that
    /// producer id and epoch, changing nothing.
    pub async fn verify_partitions(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
    ) -> Vec<((String, i32), i16)> {
        if let Some(refused) = self.refuse_unknown(partitions) {
            return refused;
        }
        let every = |code: i16| partitions.iter().map(|tp| (tp.clone(), code)).collect();
        let Some(entry) = self.existing(transactional_id) else {
            return every(error_code::INVALID_PRODUCER_ID_MAPPING);
        };
        let guard = entry.lock().await;
        let Some(meta) = guard.as_ref() else { return every(error_code::INVALID_PRODUCER_ID_MAPPING) };
        if let Err(code) =
            rules::check_producer((meta.producer_id, meta.producer_epoch), producer, error_code::PRODUCER_FENCED)
        {
            return every(code);
        }
        if let Err(code) = rules::check_can_add(meta.state) {
            return every(code);
        }
        partitions
            .iter()
            .map(|tp| {
                let added = meta.state == TxnState::Ongoing && meta.partitions.contains(tp);
                (tp.clone(), if added { error_code::NONE } else { error_code::INVALID_TXN_STATE })
            })
            .collect()
    }

    /// AddOffsetsToTxn: the group's offsets will be committed with the transaction.
    pub async fn add_offsets(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        fenced_code: i16,
        group_id: &str,
    ) -> Result<(), i16> {
        self.add(transactional_id, producer, fenced_code, |meta| {
            meta.groups.insert(group_id.to_string());
        })
        .await
    }

    /// A version 2 client's Produce (v12+) to partitions its transaction
    /// does not hold yet adds them (KIP-890 part 2: no AddPartitionsToTxn),
    /// opening the transaction if none is; stored before the batches are
    /// appended, so no partition ever holds records of a transaction the
    /// coordinator does not know.
    pub async fn add_partitions_implicitly(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
    ) -> Result<(), i16> {
        self.add(transactional_id, producer, error_code::INVALID_PRODUCER_EPOCH, |meta| {
            meta.partitions.extend(partitions.iter().cloned());
            meta.version_2 = true;
        })
        .await
    }

    async fn add(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        fenced_code: i16,
        change: impl FnOnce(&mut TxnMeta),
    ) -> Result<(), i16> {
        let mut guard = self.checked(transactional_id, producer, fenced_code).await?;
        let Some(current) = guard.as_ref() else { return Err(error_code::INVALID_PRODUCER_ID_MAPPING) };
        rules::check_can_add(current.state)?;
        let mut meta = current.clone();
        if meta.state != TxnState::Ongoing {
            meta.begin();
        }
        let before = (meta.partitions.len(), meta.groups.len());
        change(&mut meta);
        let unchanged = current.state == TxnState::Ongoing && before == (meta.partitions.len(), meta.groups.len());
        if !unchanged {
            self.store(transactional_id, &mut meta).await?;
        }
        *guard = Some(meta);
        Ok(())
    }

    /// TxnOffsetCommit: offsets committed if the transaction commits. They are
    /// stored with the transaction's state before the answer.
    /// `implicit_add`: a version 2 client (TxnOffsetCommit v5+) sends no
    /// AddOffsetsToTxn, so the group joins the transaction here, which opens
    /// if none is.
    pub async fn txn_offset_commit(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        fenced_code: i16,
        group_id: &str,
        offsets: TxnOffsets,
        implicit_add: bool,
    ) -> Result<(), i16> {
        let mut guard = self.checked(transactional_id, producer, fenced_code).await?;
        let Some(current) = guard.as_ref() else { return Err(error_code::INVALID_PRODUCER_ID_MAPPING) };
        let mut meta = current.clone();
        if implicit_add {
            rules::check_can_add(meta.state)?;
            if meta.state != TxnState::Ongoing {
                meta.begin();
            }
            meta.groups.insert(group_id.to_string());
            meta.version_2 = true;
        } else if current.state != TxnState::Ongoing || !current.groups.contains(group_id) {
            return Err(error_code::INVALID_TXN_STATE);
        }
        let now = crate::now_ms();
        for (topic, partition, offset, leader_epoch, metadata) in offsets {
            let committed = CommittedOffset {
                group_id: group_id.to_string(),
                topic: topic.clone(),
                partition,
                offset,
                leader_epoch,
                metadata,
                commit_timestamp_ms: now,
            };
            meta.pending.insert((group_id.to_string(), topic, partition), committed);
        }
        self.store(transactional_id, &mut meta).await?;
        *guard = Some(meta);
        Ok(())
    }

    /// Finishes the transactions a crash left in Prepare*.
    pub async fn recover(&self) {
        let ids: Vec<String> = lock(&self.entries).keys().cloned().collect();
        for id in ids {
            let Some(entry) = self.existing(&id) else { continue };
            let mut guard = entry.lock().await;
            let Some(mut meta) = guard.clone() else { continue };
            let commit = match meta.state {
                TxnState::PrepareCommit => true,
                TxnState::PrepareAbort => false,
                _ => continue,
            };
            log::info!(
                "transactional id {id}: finishing its {} after a restart",
                if commit { "commit" } else { "abort" }
            );
            if let Err(code) = self.complete_prepared(&id, &mut meta, commit).await {
                log::warn!("transactional id {id}: finishing failed (error {code}); retried at its next request");
            }
            *guard = Some(meta);
        }
    }

    /// Aborts open transactions past their timeout, fencing their producer
    /// (the epoch is bumped, as Kafka does), and forgets ids idle for
    /// `transactional.id.expiration.ms`, sleeping until the next of either.
    /// Holds the service only while it acts, so it ends with the broker.
    pub async fn run_timeouts(service: Weak<TxnService>) {
        loop {
            let Some((next, moved)) = service.upgrade().map(|s| {
                let timeout = lock(&s.deadlines).iter().next().cloned().map(|(at, id)| (at, id, true));
                let expiry = lock(&s.expiries).first().map(|(at, id)| (at, id, false));
                let next = match (timeout, expiry) {
                    (Some(t), Some(e)) => Some(if e.0 < t.0 { e } else { t }),
                    (t, e) => t.or(e),
                };
                (next, Arc::clone(&s.deadline_moved))
            }) else {
                return;
            };
            match next {
                None => moved.notified().await,
                Some((at_ms, id, is_timeout)) => {
                    let wait = Duration::from_millis((at_ms - crate::now_ms()).max(0) as u64);
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {
                            let Some(service) = service.upgrade() else { return };
                            if is_timeout {
                                lock(&service.deadlines).remove(&(at_ms, id.clone()));
                                service.abort_timed_out(&id).await;
                            } else {
                                service.expire_idle(&id).await;
                            }
                        }
                        _ = moved.notified() => {}
                    }
                }
            }
        }
    }

    /// Forgets an id whose last state change, with no transaction open, is
    /// `transactional.id.expiration.ms` old: its row, its producer id's
    /// epoch, its place in the admin APIs. Its next InitProducerId starts
    /// afresh with a new producer id, as on Kafka after the expiry.
    async fn expire_idle(&self, transactional_id: &str) {
        let expiration_ms = self.config.transactional_id_expiration_ms;
        let Some(entry) = self.existing(transactional_id) else {
            lock(&self.expiries).set(transactional_id, None);
            return;
        };
        let mut guard = entry.lock().await;
        let Some(meta) = guard.clone() else {
            lock(&self.expiries).set(transactional_id, None);
            return;
        };
        let idle = matches!(meta.state, TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort);
        if !idle || meta.updated_ms.saturating_add(expiration_ms) > crate::now_ms() {
            return; // changed meanwhile: `track` queued it again (or not at all)
        }
        if let Err(e) = self.catalog.delete_transaction(transactional_id.to_string()).await {
            log::warn!("transactional id {transactional_id}: forgetting it failed ({e}); retried in a minute");
            lock(&self.expiries).set(transactional_id, Some(crate::now_ms() + EXPIRY_RETRY_MS));
            return;
        }
        log::info!(
            "transactional id {transactional_id}: forgotten after {expiration_ms} ms without a transaction \
             (transactional.id.expiration.ms)"
        );
        *guard = None;
        drop(guard);
        lock(&self.expiries).set(transactional_id, None);
        lock(&self.summaries).remove(transactional_id);
        lock(&self.epochs).remove(&meta.producer_id);
        // The entry goes too, unless a request already waits on it (it then
        // finds no state, as for a new id, and keeps the entry).
        let mut entries = lock(&self.entries);
        if entries.get(transactional_id).is_some_and(|e| Arc::strong_count(e) == 2) {
            entries.remove(transactional_id);
        }
    }

    async fn abort_timed_out(&self, transactional_id: &str) {
        let Some(entry) = self.existing(transactional_id) else { return };
        let mut guard = entry.lock().await;
        let Some(mut meta) = guard.clone() else { return };
        let due = meta.started_ms.saturating_add(i64::from(meta.timeout_ms));
        if meta.state != TxnState::Ongoing || due > crate::now_ms() {
            return;
        }
        log::info!(
            "transactional id {transactional_id}: open for longer than its timeout ({} ms); aborting it",
            meta.timeout_ms
        );
        // A version 2 client's retry of an end carries the epoch just below
        // the current one and is answered as done: the fence goes two past
        // the client's, so that its EndTxn is PRODUCER_FENCED, as Kafka's
        // fence followed by its own end bump leaves it.
        let fence = if meta.version_2 { 2 } else { 1 };
        meta.producer_epoch = meta.producer_epoch.saturating_add(fence);
        if let Err(code) = self.finish(transactional_id, &mut meta, false, EpochBump::AlreadyDone).await {
            log::warn!("transactional id {transactional_id}: aborting failed (error {code})");
        }
        *guard = Some(meta);
    }
}
