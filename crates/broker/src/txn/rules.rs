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
}

/// Kafka's `endTransaction` checks for a request to commit (or abort).
pub fn plan_end(state: TxnState, commit: bool) -> Result<EndPlan, i16> {
    match (state, commit) {
        (TxnState::Ongoing, _) => Ok(EndPlan::End),
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(EndPlan::AlreadyDone),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => Err(error_code::CONCURRENT_TRANSACTIONS),
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
        assert_eq!(plan_end(TxnState::PrepareCommit, true), Err(error_code::CONCURRENT_TRANSACTIONS));
        assert_eq!(plan_end(TxnState::PrepareCommit, false), Err(error_code::INVALID_TXN_STATE));
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
