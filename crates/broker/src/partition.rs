//! One partition as the data plane sees it: its log behind a short lock, the
//! high watermark, the group-commit flusher and the fetches waiting for data.
//!
//! Group commit: every append under [`FlushPolicy::Fsync`] wakes this
//! partition's flusher task (a `Notify`, never a timer). The flusher snapshots
//! the log end, fdatasyncs outside the lock, then publishes that position as
//! durable. Appends that land while an fdatasync runs are covered by the next
//! one, so N concurrent producers share one fdatasync instead of paying N.
//! Producers with `acks=all` wait on the durable position; consumers see only
//! durable records (the high watermark is the durable end), so a crash can
//! never take back a record a consumer has read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kafgres_log::{AppendResult, LogError, LogPosition, PartitionLog, ReadSlice, SequenceCheck, TxnEnd};
use kafgres_record::BatchHeader;
use tokio::sync::{watch, Notify};

use crate::config::FlushPolicy;

/// The durable end of the log, or the error that stopped flushing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableState {
    pub position: LogPosition,
    pub failed: Option<String>,
}

/// A long-polling fetch, registered with every partition it reads. It stays
/// registered until the fetch finishes (woken any number of times); finished
/// waiters are dropped from the lists at the next registration or publish.
#[derive(Debug, Default)]
pub struct FetchWaiter {
    notify: Notify,
    finished: AtomicBool,
    /// When a publish first woke this fetch since it last looked: where the
    /// broker's share of a consumer's end-to-end latency starts.
    woken_at: Mutex<Option<Instant>>,
}

impl FetchWaiter {
    /// Resolves once any partition it is registered with publishes new data
    /// (or already did since the last call: the permit is kept).
    pub async fn notified(&self) {
        self.notify.notified().await
    }

    /// The instant a publish first notified this fetch since the last call,
    /// if one did.
    pub fn take_woken_at(&self) -> Option<Instant> {
        self.woken_at.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn wake(&self, now: Instant) {
        self.woken_at.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(now);
        self.notify.notify_one();
    }

    /// Marks the fetch as done so partitions release it.
    pub fn finish(&self) {
        self.finished.store(true, Ordering::Release);
    }

    /// Wakes it now (something other than an append moved: the catalog).
    pub fn wake_now(&self) {
        self.wake(Instant::now());
    }

    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }
}

pub struct Partition {
    pub topic: String,
    pub index: i32,
    policy: crate::settings::SharedFlushPolicy,
    flush_delay: crate::settings::SharedFlushDelay,
    log: Mutex<PartitionLog>,
    high_watermark: watch::Sender<LogPosition>,
    durable: watch::Sender<DurableState>,
    flush_wanted: Notify,
    fetch_waiters: Mutex<Vec<Arc<FetchWaiter>>>,
    appends_since_flush: AtomicU64,
    closed: AtomicBool,
    metrics: &'static crate::metrics::BrokerMetrics,
    traffic: Traffic,
    /// Every segment below this base offset is archived (-1: none yet);
    /// `archive::ARCHIVE_CHECKPOINT_FILE` keeps it across restarts.
    archived_before: std::sync::atomic::AtomicI64,
    housekeeping: housekeeping::PartitionHousekeeping,
    replication: replica::PartitionReplication,
}

mod archive;
mod compaction;
mod housekeeping;
mod replica;
pub use compaction::{cleaner_config, keyless_record_refusal, run_cleaner, CleanupPolicy};
pub use housekeeping::{run_retention, Housekeeping};
pub use replica::{FollowerAck, NOT_REQUIRED};

/// A partition's counters of client traffic.
#[derive(Debug, Default)]
struct Traffic {
    bytes_in: AtomicU64,
    records_in: AtomicU64,
    bytes_out: AtomicU64,
}

/// A copy of a partition's [`Traffic`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrafficCounts {
    pub bytes_in: u64,
    pub records_in: u64,
    pub bytes_out: u64,
}

/// What every partition of a broker shares: the flush policy, the counters,
/// the replication state.
#[derive(Clone)]
pub struct PartitionSettings {
    /// The broker's flush policy in force (a reload switches it).
    pub policy: crate::settings::SharedFlushPolicy,
    /// The broker's flush delay in force (a reload changes it).
    pub flush_delay: crate::settings::SharedFlushDelay,
    pub metrics: &'static crate::metrics::BrokerMetrics,
    pub replication: Arc<crate::replication::ReplicationState>,
}

impl From<&crate::config::BrokerConfig> for PartitionSettings {
    fn from(config: &crate::config::BrokerConfig) -> Self {
        PartitionSettings {
            policy: config.live.flush_policy.clone(),
            flush_delay: config.live.flush_delay.clone(),
            metrics: config.metrics,
            replication: Arc::clone(&config.replication),
        }
    }
}

/// What an append came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    Appended(AppendResult),
    /// A retry of a batch already in the log (idempotent producer): nothing
    /// was written; the original offsets and the batch's max timestamp.
    Duplicate {
        first_offset: i64,
        last_offset: i64,
        timestamp_ms: i64,
    },
    /// Refused by the producer-state check (`OutOfOrder` or `InvalidEpoch`);
    /// nothing was written.
    Refused(SequenceCheck),
}

/// One producer as a partition knows it (DescribeProducers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSummary {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// -1 when the producer's state holds no batch (only a transaction marker).
    pub last_sequence: i32,
    pub last_timestamp_ms: i64,
    pub open_txn_first_offset: Option<i64>,
}

/// Why a produce could not be acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurabilityError {
    #[error("flushing the log failed: {0}")]
    FlushFailed(String),
    #[error("the partition was closed")]
    Closed,
    /// The standbys the synchronous policy requires did not acknowledge the
    /// records within the produce's timeout (they stay appended, as in Kafka).
    #[error("the synchronous standbys did not acknowledge the records in time")]
    NotReplicated,
}

impl Partition {
    /// Wraps an opened log and starts its flusher on the current runtime.
    /// `housekeeping` is the broker's retention service and `configs` the
    /// topic's configs (retention.ms, retention.bytes).
    pub fn start(
        topic: String,
        index: i32,
        log: PartitionLog,
        housekeeping: &Housekeeping,
        configs: &std::collections::BTreeMap<String, String>,
        settings: PartitionSettings,
    ) -> Arc<Partition> {
        let PartitionSettings { policy, flush_delay, metrics, replication } = settings;
        let end = log.end_position();
        let replication = replica::PartitionReplication::new(replication, end.offset);
        let (high_watermark, _) = watch::channel(end);
        let (durable, _) = watch::channel(DurableState { position: end, failed: None });
        let archived_before = archive::read_checkpoint(log.dir(), housekeeping.archive.timeline());
        let partition = Arc::new(Partition {
            topic,
            index,
            policy,
            flush_delay,
            log: Mutex::new(log),
            high_watermark,
            durable,
            flush_wanted: Notify::new(),
            fetch_waiters: Mutex::new(Vec::new()),
            appends_since_flush: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            metrics,
            traffic: Traffic::default(),
            archived_before: std::sync::atomic::AtomicI64::new(archived_before),
            housekeeping: housekeeping::PartitionHousekeeping::new(housekeeping, configs),
            replication,
        });
        tokio::spawn(Arc::clone(&partition).run_flusher());
        partition
    }

    fn lock_log(&self) -> MutexGuard<'_, PartitionLog> {
        // A panic while holding the lock cannot leave the log half-written in
        // memory (append updates its state only after the write succeeded).
        self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// After a failed fdatasync nothing more is written (the kernel may have
    /// dropped dirty pages: only a reopen can say what is on disk).
    fn refuse_if_flush_failed(&self) -> Result<(), LogError> {
        if self.closed.load(Ordering::Acquire) {
            // Closed by a shutdown: what was appended is flushed; nothing more.
            return Err(LogError::Failed {
                dir: self.lock_log().dir().to_path_buf(),
                reason: "the partition is closed (the broker is shutting down)".into(),
            });
        }
        match self.durable.borrow().failed.clone() {
            Some(reason) => {
                Err(LogError::Io { path: self.lock_log().dir().to_path_buf(), source: std::io::Error::other(reason) })
            }
            None => Ok(()),
        }
    }

    /// Appends validated batches and schedules their flush. A batch carrying a
    /// producer id (the caller sends such a batch alone) is first checked
    /// against the log's producer state *under the same lock hold* as the
    /// append, so two racing retries of one batch cannot both be written.
    pub fn append(&self, batches: &[u8], headers: &[BatchHeader], now_ms: i64) -> Result<AppendOutcome, LogError> {
        self.refuse_if_flush_failed()?;
        let result = {
            let mut log = self.lock_log();
            if let Some(h) = headers.iter().find(|h| h.has_producer_id()) {
                match log.check_sequence(h) {
                    SequenceCheck::Ok => {}
                    SequenceCheck::Duplicate { first_offset, last_offset } => {
                        let timestamp_ms = log
                            .producer_state()
                            .get(h.producer_id)
                            .and_then(|e| e.batches.iter().find(|b| b.first_offset == first_offset))
                            .map_or(-1, |b| b.timestamp_ms);
                        return Ok(AppendOutcome::Duplicate { first_offset, last_offset, timestamp_ms });
                    }
                    refused => return Ok(AppendOutcome::Refused(refused)),
                }
            }
            let segments_before = log.segments().len();
            let appended = log.append(batches, headers, self.replication.state.leader_epoch(), now_ms)?;
            if log.segments().len() != segments_before {
                // A roll makes a segment deletable and cleanable: let
                // retention and the cleaner look again.
                self.housekeeping.wake();
            }
            appended
        };
        self.appends_since_flush.fetch_add(headers.len() as u64, Ordering::Relaxed);
        let bytes: u64 = headers.iter().map(|h| h.total_bytes() as u64).sum();
        self.metrics.record_append(headers.len() as u64, bytes);
        self.traffic.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        let records: u64 = headers.iter().map(|h| h.records_count.max(0) as u64).sum();
        self.traffic.records_in.fetch_add(records, Ordering::Relaxed);
        match self.policy.get() {
            FlushPolicy::Fsync => self.flush_wanted.notify_one(),
            FlushPolicy::PageCache => self.publish(result.end),
        }
        self.wake_append_waiters();
        Ok(AppendOutcome::Appended(result))
    }

    /// Appends a transaction marker (EndTxn's commit or abort in this
    /// partition) and schedules its flush, like [`Self::append`]. A marker
    /// from a fenced epoch is `Refused` and not written.
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        end: TxnEnd,
        coordinator_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendOutcome, LogError> {
        self.refuse_if_flush_failed()?;
        let result = {
            let mut log = self.lock_log();
            let leader_epoch = self.replication.state.leader_epoch();
            match log.append_marker(producer_id, producer_epoch, end, coordinator_epoch, leader_epoch, now_ms)? {
                Ok(appended) => appended,
                Err(refused) => return Ok(AppendOutcome::Refused(refused)),
            }
        };
        self.appends_since_flush.fetch_add(1, Ordering::Relaxed);
        match self.policy.get() {
            FlushPolicy::Fsync => self.flush_wanted.notify_one(),
            FlushPolicy::PageCache => self.publish(result.end),
        }
        self.wake_append_waiters();
        Ok(AppendOutcome::Appended(result))
    }

    /// Every producer this partition holds state for (DescribeProducers):
    /// id, epoch, last sequence, the max timestamp of its last batch, and the
    /// first offset of its open transaction.
    pub fn producer_states(&self) -> Vec<ProducerSummary> {
        let log = self.lock_log();
        log.producer_state()
            .iter()
            .map(|(&producer_id, entry)| ProducerSummary {
                producer_id,
                producer_epoch: entry.epoch,
                last_sequence: entry.last_seq().unwrap_or(-1),
                last_timestamp_ms: entry.batches.back().map_or(-1, |b| b.timestamp_ms),
                open_txn_first_offset: entry.open_txn_first_offset,
            })
            .collect()
    }

    /// Kafka's last stable offset: the high watermark, or the first offset
    /// of the oldest open transaction if that is lower.
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark().offset;
        self.lock_log().first_unstable_offset().map_or(hw, |first| first.min(hw))
    }

    /// A `read_committed` read: like [`Self::read`] but never past the last
    /// stable offset; returns the slice, the last stable offset and the
    /// aborted transactions the reader must drop from what it reads.
    pub fn read_committed(
        &self,
        offset: i64,
        max_bytes: u64,
        whole_first_batch: bool,
    ) -> Result<(ReadSlice, i64, Vec<kafgres_log::AbortedTxn>), LogError> {
        let hw = self.high_watermark();
        let log = self.lock_log();
        let upto = match log.first_unstable_offset() {
            Some(first) if first < hw.offset => log.position_at(first)?.unwrap_or(hw),
            _ => hw,
        };
        let slice = log.read(offset, max_bytes, upto, whole_first_batch)?;
        let aborted = if slice.len == 0 { Vec::new() } else { log.aborted_between(offset, upto.offset) };
        Ok((slice, upto.offset, aborted))
    }

    /// Applies a topic's altered configs to this partition: its retention
    /// (`retention.ms`, `retention.bytes`, `cleanup.policy`) and compaction
    /// settings (the retention and cleaner tasks are woken) and its log
    /// settings (`segment.bytes`, from the next append on).
    pub fn reconfigure(
        &self,
        configs: &std::collections::BTreeMap<String, String>,
        log_config: kafgres_log::LogConfig,
    ) {
        self.lock_log().set_config(log_config);
        self.housekeeping.set_retention(configs);
    }

    /// Waits until every record before `end_offset` is durable.
    pub async fn wait_durable(&self, end_offset: i64) -> Result<(), DurabilityError> {
        let mut rx = self.durable.subscribe();
        let state = rx
            .wait_for(|d| d.position.offset >= end_offset || d.failed.is_some())
            .await
            .map_err(|_| DurabilityError::Closed)?;
        match &state.failed {
            Some(reason) if state.position.offset < end_offset => Err(DurabilityError::FlushFailed(reason.clone())),
            _ => Ok(()),
        }
    }

    pub fn flush_policy(&self) -> FlushPolicy {
        self.policy.get()
    }

    /// After a reload switched the broker's flush policy: to `page_cache`,
    /// what waits for an fdatasync becomes visible now; to `fsync`, the tail
    /// written without one is flushed (acks=all waits for it from now on).
    pub fn flush_policy_changed(&self) {
        self.publish_durable();
        self.flush_wanted.notify_one();
    }

    /// The position consumers may read up to.
    pub fn high_watermark(&self) -> LogPosition {
        *self.high_watermark.borrow()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.lock_log().log_start_offset()
    }

    /// What clients produced to and fetched from this partition since the
    /// broker started (Kafka's BrokerTopicMetrics, per partition here).
    pub fn traffic(&self) -> TrafficCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        TrafficCounts {
            bytes_in: get(&self.traffic.bytes_in),
            records_in: get(&self.traffic.records_in),
            bytes_out: get(&self.traffic.bytes_out),
        }
    }

    /// Counts `bytes` of records sent to a consumer (not to a standby's copy).
    pub fn count_bytes_out(&self, bytes: u64) {
        self.traffic.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }

    /// The bytes of the partition's segments (Kafka's `Log.Size`).
    pub fn size_bytes(&self) -> u64 {
        self.lock_log().size_bytes()
    }

    pub fn log_end_offset(&self) -> i64 {
        self.lock_log().next_offset()
    }

    /// Plans a read of committed data; the bytes are read outside the lock.
    pub fn read(&self, offset: i64, max_bytes: u64, whole_first_batch: bool) -> Result<ReadSlice, LogError> {
        let upto = self.high_watermark();
        self.lock_log().read(offset, max_bytes, upto, whole_first_batch)
    }

    /// DeleteRecords: moves the log start to `offset` (-1: the high
    /// watermark), durably, and deletes whole segments below it. Blocking
    /// (fsyncs a checkpoint): call from a blocking context. Returns the new
    /// log start (low watermark).
    pub fn delete_records(&self, offset: i64) -> Result<i64, LogError> {
        let high_watermark = self.high_watermark().offset;
        let offset = if offset == -1 { high_watermark } else { offset };
        if offset < 0 || offset > high_watermark {
            let log = self.lock_log();
            return Err(LogError::OffsetOutOfRange {
                requested: offset,
                log_start: log.log_start_offset(),
                log_end: high_watermark,
            });
        }
        let hold = self.archive_hold();
        self.lock_log().delete_records_holding(offset, hold)
    }

    /// ListOffsets by time, over committed records only.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<(i64, i64)>, LogError> {
        let upto = self.high_watermark();
        self.lock_log().offset_for_timestamp(timestamp_ms, upto)
    }

    /// ListOffsets -3 (max timestamp), over committed records only.
    pub fn offset_of_max_timestamp(&self) -> Result<Option<(i64, i64)>, LogError> {
        let upto = self.high_watermark();
        self.lock_log().offset_of_max_timestamp(upto)
    }

    /// Registers a fetch to be woken whenever the high watermark moves, until
    /// it finishes. Finished fetches are dropped here and on each publish, so
    /// the list is as long as the number of live fetches on this partition.
    pub fn register_fetch_waiter(&self, waiter: &Arc<FetchWaiter>) {
        let mut waiters = self.fetch_waiters.lock().unwrap_or_else(|p| p.into_inner());
        waiters.retain(|w| !w.is_finished());
        waiters.push(Arc::clone(waiter));
    }

    /// Wakes every fetch registered here (a shutdown: they answer now).
    pub fn wake_fetch_waiters(&self) {
        let mut waiters = self.fetch_waiters.lock().unwrap_or_else(|p| p.into_inner());
        waiters.retain(|w| !w.is_finished());
        let now = Instant::now();
        for w in waiters.iter() {
            w.wake(now);
        }
    }

    /// The end of what is durable here (under `page_cache`, of what is written).
    pub fn durable_offset(&self) -> i64 {
        match self.policy.get() {
            FlushPolicy::Fsync => self.durable.borrow().position.offset,
            FlushPolicy::PageCache => self.log_end_offset(),
        }
    }

    /// Publishes what is durable here, as far as the standbys allow.
    fn publish_durable(&self) {
        let local = match self.policy.get() {
            FlushPolicy::Fsync => self.durable.borrow().position,
            FlushPolicy::PageCache => self.lock_log().end_position(),
        };
        self.publish(local);
    }

    /// Moves the high watermark to `position` (never back), held back by
    /// what the synchronous standbys acknowledged, and wakes the fetches.
    fn publish(&self, position: LogPosition) {
        let position = self.visible_up_to(position);
        let moved = self.high_watermark.send_if_modified(|hw| {
            if position.offset > hw.offset {
                *hw = position;
                true
            } else {
                false
            }
        });
        if moved {
            let mut waiters = self.fetch_waiters.lock().unwrap_or_else(|p| p.into_inner());
            waiters.retain(|w| !w.is_finished());
            if !waiters.is_empty() {
                let now = Instant::now();
                for w in waiters.iter() {
                    w.wake(now);
                }
            }
        }
    }

    async fn run_flusher(self: Arc<Self>) {
        // When the last fdatasync started: `kafgres.flush_delay` keeps the
        // next one at least that far behind it. Every waiting produce counts,
        // a lone one too: holding back the flush a single in-flight request
        // waits for is what lets the next requests share it (measured: with
        // a two-waiter minimum, as Postgres's commit_siblings, a client at
        // 50,000 records/s was never paced and kept its flush rate).
        let mut last_start: Option<Instant> = None;
        loop {
            self.flush_wanted.notified().await;
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            let pace = last_start.map_or(Duration::ZERO, |started| {
                (started + self.flush_delay.get()).saturating_duration_since(Instant::now())
            });
            let starts = Instant::now() + pace;
            let flushed = self.flush_once(pace).await;
            if matches!(flushed, Ok(true)) {
                last_start = Some(starts);
            }
            if flushed.is_ok() {
                self.checkpoint_if_due().await;
            }
            if let Err(reason) = flushed {
                log::error!("partition {}-{}: {reason}; refusing further writes", self.topic, self.index);
                self.durable.send_modify(|d| d.failed = Some(reason));
                return;
            }
        }
    }

    /// One group-commit round: after `pace` (appends made meanwhile join
    /// it), fdatasync everything written so far. Whether there was anything
    /// to flush.
    async fn flush_once(self: &Arc<Self>, pace: Duration) -> Result<bool, String> {
        // One lock at a time: `close` takes the log lock while it reads `durable`.
        let durable = self.durable.borrow().position;
        if pace.is_zero() && self.lock_log().end_position() == durable {
            return Ok(false);
        }
        let partition = Arc::clone(self);
        let synced = tokio::task::spawn_blocking(move || partition.sync_written(pace))
            .await
            .map_err(|e| format!("flush task failed: {e}"))??;
        let Some((target, batches, took)) = synced else {
            return Ok(false);
        };
        self.metrics.record_flush(batches, took.as_micros().min(u128::from(u64::MAX)) as u64);
        // Visible first, then acknowledged: a producer told "durable" can
        // immediately read its record back.
        self.publish(target);
        self.durable.send_modify(|d| d.position = target);
        Ok(true)
    }

    /// On a blocking thread: sleeps `pace` (a thread's sleep, finer than the
    /// runtime's millisecond timer), then fdatasyncs what was written past
    /// the durable position. Returns the new durable position, the batches
    /// it covers and how long the fdatasyncs took; `None` if nothing was new.
    fn sync_written(&self, pace: Duration) -> Result<Option<(LogPosition, u64, Duration)>, String> {
        if !pace.is_zero() {
            std::thread::sleep(pace);
        }
        let since = self.durable.borrow().position;
        let (target, files) = {
            let log = self.lock_log();
            (log.end_position(), log.unflushed_files(since))
        };
        if target == since {
            return Ok(None);
        }
        let batches = self.appends_since_flush.swap(0, Ordering::Relaxed);
        let started = Instant::now();
        for (file, path) in files {
            file.sync_data().map_err(|e| format!("fdatasync {}: {e}", path.display()))?;
        }
        Ok(Some((target, batches, started.elapsed())))
    }

    /// Flushes synchronously and stops the flusher (clean shutdown). Producers
    /// still waiting are answered: durable now, or failed.
    pub fn close(&self) -> Result<(), LogError> {
        self.closed.store(true, Ordering::Release);
        self.flush_wanted.notify_one();
        if let Some(reason) = self.durable.borrow().failed.clone() {
            // After a failed fdatasync a later one proves nothing (the kernel
            // may have dropped the pages): never publish past the failure.
            return Err(LogError::Failed { dir: self.lock_log().dir().to_path_buf(), reason });
        }
        // A checkpoint flushes the log with its indexes and writes the
        // recovery point, so the next open reads no segment data.
        let result = self.lock_log().checkpoint();
        match &result {
            Ok(end) => {
                self.publish(*end);
                self.durable.send_modify(|d| d.position = *end);
            }
            Err(e) => self.durable.send_modify(|d| d.failed = Some(format!("closing: {e}"))),
        }
        result.map(|_| ())
    }
}
