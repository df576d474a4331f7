//! The log of one topic-partition, stored the way Kafka stores it.
//!
//! A partition is a directory of segments named by their base offset
//! (`00000000000000000000.log`), each holding v2 record batches back to back,
//! byte for byte what producers sent except for the broker-assigned base offset
//! and leader epoch, with a sparse offset index and time index beside it. This
//! crate owns:
//! - [`storage`]: the file-system port, with the real, in-memory (crash
//!   simulating) and fault-injecting implementations, and the one routine
//!   that replaces a small file atomically;
//! - [`segment`] and [`index`]: one segment's files and its indexes, and
//!   `recent_batches`, the positions of the newest batches kept in memory;
//! - [`recovery`]: the decision table that opens segments after a clean stop
//!   or a crash, trusting what the recovery point covers and scanning the rest;
//! - [`partition`]: the ordered segments, appends with offset assignment, rolls,
//!   flushes and checkpoints, reads as file ranges (sendfile-ready) and by time;
//!   a follower's appends of a leader's batches and truncation of the end;
//! - [`epochs`]: the leader epoch history (which epoch wrote which offsets)
//!   and its OffsetForLeaderEpoch answer;
//! - [`retention`]: `retention.ms`, `retention.bytes` and DeleteRecords;
//! - [`cleaner`]: log compaction (`cleanup.policy=compact`): the closed
//!   segments rewritten to keep the latest record per key, swapped in by a
//!   crash-safe protocol;
//! - [`producer`]: idempotent-producer state rebuilt from the log and snapshots;
//! - [`checkpoint`]: the small files replaced atomically.
//!
//! It must not spawn threads, use async runtimes, run timers or know about
//! Postgres or the Kafka protocol: batches are read and written with the
//! `kafgres-record` crate (the v2 batch format), never with request types.
//! Who flushes when (group commit) and when retention and the
//! cleaner run is the broker's decision; this crate only says which bytes a
//! flush covers and when cleaning would be worth it. The on-disk format and
//! crash policy are in docs/architecture.md.

pub mod checkpoint;
pub mod cleaner;
pub mod epochs;
pub mod error;
pub mod index;
pub mod partition;
pub mod producer;
mod recent_batches;
pub mod recovery;
pub mod retention;
pub mod segment;
pub mod storage;

pub use cleaner::{CleanReport, CleanerConfig};
pub use epochs::{EpochEntry, LeaderEpochHistory};
pub use error::LogError;
pub use partition::{AppendResult, LogConfig, LogPosition, OpenReport, PartitionLog, ReadSlice};
pub use producer::{AbortedTxn, ProducerStateMap, SequenceCheck, TxnEnd};
pub use retention::{RetentionConfig, RetentionReport};
pub use segment::RESERVE_AHEAD_BYTES;
pub use storage::{replace_file_atomically, FileStorage, Storage, StorageFile};
