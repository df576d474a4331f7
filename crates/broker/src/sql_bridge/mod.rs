//! The bridge between SQL sessions and the log: how records sent from a
//! Postgres transaction reach the partitions exactly once, in commit order.
//!
//! - [`message`]: the bytes `kafgres.send()` and `kafgres.consume()` write into
//!   the WAL as transactional logical messages, and the envelope the output
//!   plugin adds when it decodes them at commit;
//! - [`partitioner`]: Kafka's default partitioner (murmur2), so SQL and Java
//!   producers put a key in the same partition;
//! - [`checkpoint`]: the applier's durable progress (WAL position reached,
//!   producer identity, next sequence per partition);
//! - [`apply`]: the applier, an idempotent producer whose sequences follow
//!   from the commit order, so a transaction replayed after a crash is
//!   recognised as a duplicate by the partition's producer state.
//!
//! This module never touches Postgres: the extension decodes the WAL and hands
//! committed transactions here (see docs/sql.md for the design).

pub mod apply;
pub mod checkpoint;
pub mod message;
pub mod partitioner;

pub use apply::{ApplyError, SqlApplier};
pub use message::{CommittedTxn, DecodeError, OffsetCommitMessage, SendMessage};
