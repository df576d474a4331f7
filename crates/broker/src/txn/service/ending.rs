//! Ending transactions: EndTxn in both transaction versions (the epoch bump
//! of version 2, the producer id that follows a spent epoch), the Prepare*,
//! markers, Complete* sequence every end goes through, and the markers.

use kafgres_log::TxnEnd;
use kafgres_wire::error_code;

use super::super::rules::{self, EndPlan, EndPlanV2, TxnState};
use super::{lock, TxnMeta, TxnService, COORDINATOR_EPOCH, MARKER_REPLICATION_TIMEOUT};
use crate::catalog::CommittedOffset;
use crate::partition::AppendOutcome;

/// How an end moves the producer's epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EpochBump {
    /// Transaction version 1: the epoch stays.
    None,
    /// Transaction version 2: the end bumps it (the markers carry the new one).
    Bump,
    /// A fence (timeout, a new producer instance) bumped it already.
    AlreadyDone,
}

/// A version 2 end whose epoch ran out hands the client `next_producer_id`
/// at epoch 0, remembering the old id for a retry of that end.
fn rotate_producer_id(meta: &mut TxnMeta, next_producer_id: Option<i64>) {
    let Some(next) = next_producer_id else { return };
    meta.previous_producer_id = Some(meta.producer_id);
    meta.producer_id = next;
    meta.producer_epoch = 0;
}

impl TxnService {
    /// EndTxn: commit or abort the open transaction; answered when complete,
    /// with the producer id and epoch the client goes on with. A client of
    /// transaction version 2 (`version_2`: EndTxn v5+) gets its epoch bumped
    /// at every end, so a batch it sent late for this transaction is fenced
    /// from the next one (KIP-890 part 2).
    pub async fn end_txn(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        fenced_code: i16,
        commit: bool,
        version_2: bool,
    ) -> Result<(i64, i16), i16> {
        if !version_2 {
            let mut guard = self.checked(transactional_id, producer, fenced_code).await?;
            let Some(current) = guard.as_ref() else { return Err(error_code::INVALID_PRODUCER_ID_MAPPING) };
            let answer = (current.producer_id, current.producer_epoch);
            let mut meta = current.clone();
            let result = match rules::plan_end(current.state, commit)? {
                EndPlan::AlreadyDone => return Ok(answer),
                EndPlan::End => self.finish(transactional_id, &mut meta, commit, EpochBump::None).await,
                EndPlan::Resume => self.complete_prepared(transactional_id, &mut meta, commit).await,
            };
            *guard = Some(meta);
            return result.map(|()| answer);
        }
        let entry = self.existing(transactional_id).ok_or(error_code::INVALID_PRODUCER_ID_MAPPING)?;
        let mut guard = entry.lock_owned().await;
        let Some(current) = guard.as_ref() else { return Err(error_code::INVALID_PRODUCER_ID_MAPPING) };
        let current_producer = (current.producer_id, current.producer_epoch);
        let plan = rules::plan_end_v2(current.state, commit, current_producer, producer, current.previous_producer_id)
            .map_err(|code| if code == error_code::PRODUCER_FENCED { fenced_code } else { code })?;
        let mut meta = current.clone();
        meta.version_2 = true;
        let result = match plan {
            EndPlanV2::AlreadyDone => return Ok(current_producer),
            // A Prepare* left by a failed end is finished by the retry
            // (with the epoch it was bumped to), not refused for ever.
            EndPlanV2::End if meta.state != TxnState::Ongoing => {
                self.complete_prepared(transactional_id, &mut meta, commit).await
            }
            EndPlanV2::End => self.finish(transactional_id, &mut meta, commit, EpochBump::Bump).await,
            EndPlanV2::AbortEmpty => self.abort_empty(transactional_id, &mut meta).await,
        };
        let answer = (meta.producer_id, meta.producer_epoch);
        *guard = Some(meta);
        result.map(|()| answer)
    }

    /// A version 2 abort with no transaction open: the epoch moves on (a new
    /// producer id when it runs out), nothing is written to any partition.
    /// Nothing changes unless the new state is stored.
    async fn abort_empty(&self, transactional_id: &str, meta: &mut TxnMeta) -> Result<(), i16> {
        let mut next = meta.clone();
        let next_producer_id = self.bump_epoch(&mut next).await?;
        next.state = TxnState::CompleteAbort;
        next.partitions.clear();
        next.groups.clear();
        next.pending.clear();
        rotate_producer_id(&mut next, next_producer_id);
        self.store(transactional_id, &mut next).await?;
        self.forget_replaced_producer(meta.producer_id, &next);
        *meta = next;
        Ok(())
    }

    /// The next epoch of a version 2 end, and the producer id that follows
    /// when this one's epochs run out (Kafka rotates at `Short.MaxValue - 1`:
    /// the markers take the last epoch, the client the new id at epoch 0).
    async fn bump_epoch(&self, meta: &mut TxnMeta) -> Result<Option<i64>, i16> {
        let next_producer_id =
            if meta.producer_epoch >= i16::MAX - 1 { Some(self.new_producer_id().await?) } else { None };
        meta.producer_epoch = meta.producer_epoch.saturating_add(1);
        Ok(next_producer_id)
    }

    /// Once a state naming a new producer id is stored, the old id's
    /// entries go (as after InitProducerId hands out a new one).
    fn forget_replaced_producer(&self, old_producer_id: i64, meta: &TxnMeta) {
        if meta.producer_id != old_producer_id {
            lock(&self.open).remove(&old_producer_id);
            lock(&self.epochs).remove(&old_producer_id);
        }
    }

    /// Prepare (stored), markers (durable), complete (stored, with the offsets
    /// of a commit). On failure the state stays Prepare*, which the next
    /// start, or a retry of the EndTxn, finishes.
    pub(super) async fn finish(
        &self,
        transactional_id: &str,
        meta: &mut TxnMeta,
        commit: bool,
        bump: EpochBump,
    ) -> Result<(), i16> {
        let next_producer_id = match bump {
            EpochBump::Bump => self.bump_epoch(meta).await?,
            EpochBump::None | EpochBump::AlreadyDone => None,
        };
        meta.state = if commit { TxnState::PrepareCommit } else { TxnState::PrepareAbort };
        if !commit {
            meta.pending.clear();
        }
        self.store(transactional_id, meta).await?;
        self.complete_prepared_then_rotate(transactional_id, meta, commit, next_producer_id).await
    }

    /// Markers and completion of a transaction stored as Prepare*.
    pub(super) async fn complete_prepared(
        &self,
        transactional_id: &str,
        meta: &mut TxnMeta,
        commit: bool,
    ) -> Result<(), i16> {
        self.complete_prepared_then_rotate(transactional_id, meta, commit, None).await
    }

    async fn complete_prepared_then_rotate(
        &self,
        transactional_id: &str,
        meta: &mut TxnMeta,
        commit: bool,
        next_producer_id: Option<i64>,
    ) -> Result<(), i16> {
        self.write_markers(meta, commit).await?;
        let offsets: Vec<CommittedOffset> = meta.pending.values().cloned().collect();
        let before = meta.clone();
        meta.state = if commit { TxnState::CompleteCommit } else { TxnState::CompleteAbort };
        meta.partitions.clear();
        meta.groups.clear();
        meta.pending.clear();
        rotate_producer_id(meta, next_producer_id);
        meta.updated_ms = crate::now_ms();
        let record = meta.record(transactional_id);
        let stored = if commit && !offsets.is_empty() {
            self.catalog.complete_transaction(record, offsets.clone()).await
        } else {
            self.catalog.store_transaction(record).await
        };
        if let Err(e) = stored {
            log::warn!("transactional id {transactional_id}: completing failed: {e}");
            // Still Prepare*, as stored: a retry or the next start finishes it.
            *meta = before;
            return Err(error_code::COORDINATOR_NOT_AVAILABLE);
        }
        self.track(transactional_id, meta);
        self.forget_replaced_producer(before.producer_id, meta);
        if !offsets.is_empty() {
            self.groups.load_committed_offsets(offsets);
        }
        Ok(())
    }

    async fn write_markers(&self, meta: &TxnMeta, commit: bool) -> Result<(), i16> {
        let end = if commit { TxnEnd::Commit } else { TxnEnd::Abort };
        let now = crate::now_ms();
        let mut waits = Vec::new();
        for (topic, index) in &meta.partitions {
            // A partition deleted since has nothing left to mark.
            let Some(partition) = self.topics.partition(topic, *index) else { continue };
            match partition.append_marker(meta.producer_id, meta.producer_epoch, end, COORDINATOR_EPOCH, now) {
                Ok(AppendOutcome::Appended(appended)) => waits.push((partition, appended.last_offset + 1)),
                Ok(other) => {
                    // Only a newer epoch in the partition refuses a marker:
                    // that producer generation already ended this one.
                    log::warn!("marker for producer {} in {topic}-{index} refused: {other:?}", meta.producer_id);
                }
                Err(e) => {
                    log::error!("writing a transaction marker to {topic}-{index} failed: {e}");
                    return Err(error_code::COORDINATOR_NOT_AVAILABLE);
                }
            }
        }
        for (partition, end_offset) in waits {
            // Durable here and, with a synchronous policy, on the standbys:
            // a failover must not take back a commit the client was told of.
            if let Err(e) = partition.wait_committed(end_offset, MARKER_REPLICATION_TIMEOUT).await {
                log::error!("transaction marker in {}-{} not durable: {e}", partition.topic, partition.index);
                return Err(error_code::COORDINATOR_NOT_AVAILABLE);
            }
        }
        Ok(())
    }
}
