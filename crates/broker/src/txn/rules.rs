//! The transaction coordinator's decisions, as pure functions.

use std::collections::BTreeSet;

use kafgres_wire::error_code;

/// A transactional id's state (Kafka's `TransactionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    /// Initialised; no transaction open.
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    /// The name stored in the catalog (and shown by DescribeTransactions).
    pub fn as_str(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
        }
    }

    pub fn parse(name: &str) -> Option<TxnState> {
        Some(match name {
            "Empty" => TxnState::Empty,
            "Ongoing" => TxnState::Ongoing,
            "PrepareCommit" => TxnState::PrepareCommit,
            "PrepareAbort" => TxnState::PrepareAbort,
            "CompleteCommit" => TxnState::CompleteCommit,
            "CompleteAbort" => TxnState::CompleteAbort,
            _ => return None,
        })
    }

    /// No transaction is open or ending.
    pub fn is_idle(self) -> bool {
        matches!(self, TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort)
    }
}

/// The error for a request carrying a stale epoch: PRODUCER_FENCED, which
/// older versions of each API cannot carry (they get INVALID_PRODUCER_EPOCH,
/// as Kafka maps it).
pub fn fenced(api_version: i16, fenced_since_version: i16) -> i16 {
    if api_version >= fenced_since_version {
        error_code::PRODUCER_FENCED
    } else {
        error_code::INVALID_PRODUCER_EPOCH
    }
}

/// The producer id and epoch of a request against the id's current ones.
pub fn check_producer(current: (i64, i16), request: (i64, i16), fenced_code: i16) -> Result<(), i16> {
    if request.0 != current.0 {
        return Err(error_code::INVALID_PRODUCER_ID_MAPPING);
    }
    if request.1 != current.1 {
        return Err(fenced_code);
    }
    Ok(())
}

/// What InitProducerId does for a transactional id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitPlan {
    /// A new id: a new producer id, epoch 0.
    Fresh,
    /// Same producer id, next epoch (a new producer instance fences the old).
    BumpEpoch,
    /// The epoch is exhausted: a new producer id, epoch 0.
    NewProducerId,
    /// A transaction is open: abort it with a bumped epoch (fencing the old
    /// producer), then answer as for an idle id.
    AbortOpenThenBump,
}

/// Kafka's `prepareInitProducerIdTransit`, for an id in `state` with
/// `epoch`; `expected` is the producer id and epoch the request says it had
/// (KIP-360; `(-1, -1)` when it does not know).
pub fn plan_init(state: Option<(TxnState, i64, i16)>, expected: (i64, i16)) -> Result<InitPlan, i16> {
    let Some((state, producer_id, epoch)) = state else { return Ok(InitPlan::Fresh) };
    if expected != (-1, -1) && expected.0 != producer_id {
        return Err(error_code::INVALID_PRODUCER_ID_MAPPING);
    }
    if expected != (-1, -1) && expected.1 != epoch {
        return Err(error_code::PRODUCER_FENCED);
    }
    match state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => Err(error_code::CONCURRENT_TRANSACTIONS),
        TxnState::Ongoing => Ok(InitPlan::AbortOpenThenBump),
        _ if epoch >= i16::MAX - 1 => Ok(InitPlan::NewProducerId),
        _ => Ok(InitPlan::BumpEpoch),
    }
}

/// Whether a transaction may take partitions or groups now.
pub fn check_can_add(state: TxnState) -> Result<(), i16> {
    match state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => Err(error_code::CONCURRENT_TRANSACTIONS),
        _ => Ok(()),
    }
}

/// What EndTxn does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndPlan {
    /// Write the markers and complete.
    End,
    /// A retry of an end already done: answer success.
    AlreadyDone,
    /// A retry of an end that failed after storing Prepare*: write the
    /// markers and complete. (The id's lock is held while an end runs, so a
    /// Prepare* seen under it is one that failed, not one in progress.)
    Resume,
}

/// Kafka's `endTransaction` checks for a request to commit (or abort).
pub fn plan_end(state: TxnState, commit: bool) -> Result<EndPlan, i16> {
    match (state, commit) {
        (TxnState::Ongoing, _) => Ok(EndPlan::End),
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(EndPlan::AlreadyDone),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => Ok(EndPlan::Resume),
        _ => Err(error_code::INVALID_TXN_STATE),
    }
}

/// What EndTxn does for a client of transaction version 2 (EndTxn v5+,
/// KIP-890 part 2), where every end bumps the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndPlanV2 {
    /// Bump the epoch, write the markers (with the bumped epoch), complete.
    End,
    /// No transaction is open (partitions are added implicitly, so the client
    /// cannot know): an abort only bumps the epoch, fencing late batches.
    AbortEmpty,
    /// A retry of the end that bumped the epoch: answer success with the
    /// current producer id and epoch.
    AlreadyDone,
}

/// Which request an id in `state` at `current` (producer id, epoch) takes
/// from a version 2 client asking with `request`: Kafka's `endTransaction`
/// (its `isValidEpoch`, `retryOnEpochBump` and `retryOnOverflow`).
/// `previous_producer_id` is the id the last end replaced when the epoch ran
/// out.
pub fn plan_end_v2(
    state: TxnState,
    commit: bool,
    current: (i64, i16),
    request: (i64, i16),
    previous_producer_id: Option<i64>,
) -> Result<EndPlanV2, i16> {
    let retry_on_overflow = previous_producer_id == Some(request.0)
        && request.1 == i16::MAX - 1
        && current.1 == 0
        && request.0 != current.0;
    if request.0 != current.0 && !retry_on_overflow {
        return Err(error_code::INVALID_PRODUCER_ID_MAPPING);
    }
    let retry_on_epoch_bump = request.0 == current.0 && i32::from(request.1) + 1 == i32::from(current.1);
    let retry = retry_on_epoch_bump || retry_on_overflow;
    let valid_epoch = match state {
        TxnState::Ongoing | TxnState::Empty => request.1 == current.1 && request.0 == current.0,
        TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_epoch_bump,
        TxnState::CompleteCommit | TxnState::CompleteAbort => retry || request == current,
    };
    if !valid_epoch {
        return Err(error_code::PRODUCER_FENCED);
    }
    match (state, commit) {
        (TxnState::Ongoing, _) => Ok(EndPlanV2::End),
        // Kafka answers CONCURRENT_TRANSACTIONS while its markers are under
        // way; here an end holds the id's lock until complete, so this is a
        // retry of an end that failed after Prepare*: it finishes it.
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => Ok(EndPlanV2::End),
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if retry => Ok(EndPlanV2::AlreadyDone),
        (TxnState::CompleteCommit | TxnState::CompleteAbort | TxnState::Empty, false) if !retry => {
            Ok(EndPlanV2::AbortEmpty)
        }
        _ => Err(error_code::INVALID_TXN_STATE),
    }
}

/// Kafka's bound on `transaction.timeout.ms` (`transaction.max.timeout.ms`).
pub fn check_timeout(timeout_ms: i32, max_ms: i32) -> Result<(), i16> {
    if timeout_ms <= 0 || timeout_ms > max_ms {
        return Err(error_code::INVALID_TRANSACTION_TIMEOUT);
    }
    Ok(())
}

/// The partitions of a transaction, in order.
pub type Partitions = BTreeSet<(String, i32)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_plans_follow_kafkas_transitions() {
        assert_eq!(plan_init(None, (-1, -1)), Ok(InitPlan::Fresh));
        assert_eq!(plan_init(Some((TxnState::Empty, 5, 0)), (-1, -1)), Ok(InitPlan::BumpEpoch));
        assert_eq!(plan_init(Some((TxnState::CompleteCommit, 5, 3)), (5, 3)), Ok(InitPlan::BumpEpoch));
        assert_eq!(plan_init(Some((TxnState::Ongoing, 5, 3)), (-1, -1)), Ok(InitPlan::AbortOpenThenBump));
        assert_eq!(plan_init(Some((TxnState::PrepareAbort, 5, 3)), (-1, -1)), Err(error_code::CONCURRENT_TRANSACTIONS));
        assert_eq!(plan_init(Some((TxnState::Empty, 5, i16::MAX - 1)), (-1, -1)), Ok(InitPlan::NewProducerId));
        assert_eq!(plan_init(Some((TxnState::Empty, 5, 3)), (6, 3)), Err(error_code::INVALID_PRODUCER_ID_MAPPING));
        assert_eq!(plan_init(Some((TxnState::Empty, 5, 3)), (5, 2)), Err(error_code::PRODUCER_FENCED));
    }

    #[test]
    fn end_plans_accept_retries_and_refuse_the_rest() {
        assert_eq!(plan_end(TxnState::Ongoing, true), Ok(EndPlan::End));
        assert_eq!(plan_end(TxnState::Ongoing, false), Ok(EndPlan::End));
        assert_eq!(plan_end(TxnState::CompleteCommit, true), Ok(EndPlan::AlreadyDone));
        assert_eq!(plan_end(TxnState::CompleteAbort, false), Ok(EndPlan::AlreadyDone));
        assert_eq!(plan_end(TxnState::CompleteCommit, false), Err(error_code::INVALID_TXN_STATE));
        assert_eq!(plan_end(TxnState::Empty, true), Err(error_code::INVALID_TXN_STATE));
        assert_eq!(plan_end(TxnState::PrepareCommit, true), Ok(EndPlan::Resume));
        assert_eq!(plan_end(TxnState::PrepareCommit, false), Err(error_code::INVALID_TXN_STATE));
    }

    #[test]
    fn version_2_ends_follow_kafkas_epoch_rules() {
        use EndPlanV2::*;
        let pid = 7;
        // The end of an open transaction, at its epoch; a stale or newer one is fenced.
        assert_eq!(plan_end_v2(TxnState::Ongoing, true, (pid, 4), (pid, 4), None), Ok(End));
        assert_eq!(plan_end_v2(TxnState::Ongoing, false, (pid, 4), (pid, 3), None), Err(error_code::PRODUCER_FENCED));
        assert_eq!(plan_end_v2(TxnState::Ongoing, false, (pid, 4), (pid, 5), None), Err(error_code::PRODUCER_FENCED));
        assert_eq!(
            plan_end_v2(TxnState::Ongoing, true, (pid, 4), (8, 4), None),
            Err(error_code::INVALID_PRODUCER_ID_MAPPING)
        );
        // A retry carries the epoch before the bump.
        assert_eq!(plan_end_v2(TxnState::CompleteCommit, true, (pid, 5), (pid, 4), None), Ok(AlreadyDone));
        assert_eq!(plan_end_v2(TxnState::CompleteAbort, false, (pid, 5), (pid, 4), None), Ok(AlreadyDone));
        assert_eq!(
            plan_end_v2(TxnState::CompleteCommit, false, (pid, 5), (pid, 4), None),
            Err(error_code::INVALID_TXN_STATE)
        );
        assert_eq!(plan_end_v2(TxnState::PrepareCommit, true, (pid, 5), (pid, 4), None), Ok(End));
        assert_eq!(
            plan_end_v2(TxnState::PrepareCommit, false, (pid, 5), (pid, 4), None),
            Err(error_code::INVALID_TXN_STATE)
        );
        assert_eq!(
            plan_end_v2(TxnState::PrepareCommit, true, (pid, 5), (pid, 5), None),
            Err(error_code::PRODUCER_FENCED)
        );
        // At the current epoch with nothing open: an abort bumps, a commit is refused.
        assert_eq!(plan_end_v2(TxnState::Empty, false, (pid, 5), (pid, 5), None), Ok(AbortEmpty));
        assert_eq!(plan_end_v2(TxnState::CompleteCommit, false, (pid, 5), (pid, 5), None), Ok(AbortEmpty));
        assert_eq!(plan_end_v2(TxnState::CompleteAbort, false, (pid, 5), (pid, 5), None), Ok(AbortEmpty));
        assert_eq!(plan_end_v2(TxnState::Empty, true, (pid, 5), (pid, 5), None), Err(error_code::INVALID_TXN_STATE));
        assert_eq!(
            plan_end_v2(TxnState::CompleteCommit, true, (pid, 5), (pid, 5), None),
            Err(error_code::INVALID_TXN_STATE)
        );
        // The epoch ran out: the retry names the old id at the last epoch.
        let overflow = (pid, i16::MAX - 1);
        assert_eq!(plan_end_v2(TxnState::CompleteCommit, true, (9, 0), overflow, Some(pid)), Ok(AlreadyDone));
        assert_eq!(
            plan_end_v2(TxnState::CompleteCommit, true, (9, 0), overflow, None),
            Err(error_code::INVALID_PRODUCER_ID_MAPPING)
        );
        assert_eq!(
            plan_end_v2(TxnState::CompleteCommit, true, (9, 0), (pid, 3), Some(pid)),
            Err(error_code::INVALID_PRODUCER_ID_MAPPING)
        );
    }

    #[test]
    fn producer_checks_map_stale_epochs_by_version() {
        assert_eq!(check_producer((5, 2), (5, 2), fenced(2, 2)), Ok(()));
        assert_eq!(check_producer((5, 2), (6, 2), fenced(2, 2)), Err(error_code::INVALID_PRODUCER_ID_MAPPING));
        assert_eq!(check_producer((5, 2), (5, 1), fenced(2, 2)), Err(error_code::PRODUCER_FENCED));
        assert_eq!(check_producer((5, 2), (5, 1), fenced(1, 2)), Err(error_code::INVALID_PRODUCER_EPOCH));
        assert_eq!(check_timeout(60_000, 900_000), Ok(()));
        assert_eq!(check_timeout(900_001, 900_000), Err(error_code::INVALID_TRANSACTION_TIMEOUT));
        assert_eq!(check_timeout(0, 900_000), Err(error_code::INVALID_TRANSACTION_TIMEOUT));
        assert_eq!(check_can_add(TxnState::PrepareCommit), Err(error_code::CONCURRENT_TRANSACTIONS));
        assert_eq!(check_can_add(TxnState::CompleteAbort), Ok(()));
    }
}
