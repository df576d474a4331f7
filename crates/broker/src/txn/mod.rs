//! The transaction coordinator (Kafka's `TransactionCoordinator`): the state
//! of each transactional id, and the operations that move it — InitProducerId
//! with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
//! TxnOffsetCommit, EndTxn — plus the timeout that aborts a transaction left
//! open.
//!
//! # Shape
//!
//! [`rules`] holds the decisions as pure functions of the current state and
//! the request (which error, which next state), unit-tested without I/O.
//! [`TxnService`] hosts them: one async mutex per transactional id serialises
//! that id's requests (different ids proceed in parallel), and each operation
//! writes its new state to the catalog (Postgres) *before* answering, like
//! Kafka's write to `__transaction_state`.
//!
//! # Ending a transaction
//!
//! EndTxn stores PrepareCommit/PrepareAbort (with the pending offsets of
//! TxnOffsetCommit), appends a marker to every partition of the transaction
//! and waits until each is durable, then stores CompleteCommit/CompleteAbort —
//! for a commit together with the group offsets, in one Postgres transaction —
//! and only then answers. A crash in between leaves Prepare* in Postgres; at
//! startup the coordinator finishes those (markers again: a second marker of
//! a finished transaction changes nothing in a partition). Open (Ongoing)
//! transactions found at startup stay open; their timeout still applies.
//!
//! # Transaction version 2 (KIP-890 part 2)
//!
//! ApiVersions finalizes `transaction.version` 2, as Kafka 4.x does. A client
//! that knows it sends no AddPartitionsToTxn or AddOffsetsToTxn: its first
//! transactional batch to a partition (Produce v12+) and its TxnOffsetCommit
//! (v5+) add the partition or group, opening the transaction, stored before
//! the batch is appended. Each EndTxn (v5+) bumps the epoch: the markers
//! carry the new one, the answer gives it to the client, and a batch the
//! client sent late for the ended transaction is fenced from the next. When
//! the epoch runs out the end hands out a new producer id. A version 2 abort
//! with nothing open only bumps the epoch. Older clients (librdkafka,
//! kafka-python, Java before 4.0) keep the version 1 protocol on the same ids.
//!
//! # Differences from Kafka
//!
//! Kafka answers EndTxn once PrepareCommit is written and writes the markers
//! afterwards (clients retry CONCURRENT_TRANSACTIONS meanwhile); Kafgres
//! answers when the transaction is complete, so a producer's next transaction
//! never waits on the previous one's markers, and a retried EndTxn that finds
//! Prepare* (the first attempt failed after storing it) finishes it.

pub mod rules;
mod service;

pub use rules::TxnState;
pub use service::{TxnService, TxnServiceConfig, TxnSummary, TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT};
