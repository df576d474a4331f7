//! The SQL bridge: records sent and offsets committed from Postgres
//! transactions, carried by the WAL to the broker exactly once, in commit
//! order.
//!
//! - [`message`]: what `kafgres.send()` and `kafgres.consume()` write into the
//!   WAL (transactional logical messages) and the end message that lets a
//!   reader tell a whole transaction from a part of one;
//! - [`partitioner`]: Kafka's default partitioner (murmur2), so SQL and Java
//!   producers put a key in the same partition;
//! - [`assembly`]: transactions reassembled from WAL records (messages,
//!   commits, aborts, running transactions), in commit order;
//! - [`applier`]: the idempotent producer that appends them, with sequences
//!   that follow from the commit order, and its [`Checkpoint`];
//! - [`kafka`]: the applier's broker port over a `kafgres-client` connection;
//! - [`legacy`]: the checkpoint file of releases whose applier ran inside the
//!   broker, read once when upgrading;
//!
//! It never touches Postgres and never opens a socket of its own: the
//! extension reads the WAL and hands events in, and produces through
//! `kafgres-client` (docs/sql.md has the design).

pub mod applier;
pub mod assembly;
pub mod kafka;
pub mod legacy;
pub mod message;
pub mod partitioner;

pub use applier::{Applier, ApplyError, Broker, BrokerError, Checkpoint, OutgoingBatch, ProduceOutcome, RoundReport};
pub use assembly::{Assembled, Assembler, AssemblyError, CommittedTxn, WalEvent};
pub use message::{
    DecodeError, EndMessage, MessageKind, OffsetCommitMessage, SendMessage, COMMIT_LSN_HEADER, COMMIT_TIME_HEADER,
};
