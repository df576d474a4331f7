//! The log of one topic-partition, stored the way Kafka stores it.
//!
//! A partition is a directory of segment files named by their base offset
//! (`00000000000000000000.log`), each holding v2 record batches back to back,
//! byte for byte what producers sent except for the broker-assigned base offset
//! and leader epoch. This crate owns:
//! - [`segment`]: one segment file, its sparse in-memory offset index and the
//!   lookup of an offset's byte position;
//! - [`recovery`]: the scan that rebuilds a segment's index at open and cuts a
//!   torn or corrupt tail after a crash;
//! - [`partition`]: the ordered segments, appends with offset assignment, rolls,
//!   reads as file ranges (sendfile-ready) and the list of files a flush must
//!   fdatasync.
//!
//! It must not spawn threads, use async runtimes or know about Postgres. Who
//! flushes when (group commit) is the broker's decision; this crate only says
//! which bytes a flush covers. See docs/architecture.md for the crash policy.

pub mod error;
pub mod partition;
pub mod recovery;
pub mod segment;

pub use error::LogError;
pub use partition::{AppendResult, LogConfig, LogPosition, PartitionLog, ReadSlice};
