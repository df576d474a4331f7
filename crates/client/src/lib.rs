//! A small blocking Kafka client for the Kafgres broker.
//!
//! SQL functions run inside a Postgres backend: one thread, no async runtime,
//! and a statement cancel must be able to stop a long poll. This crate owns
//! one TCP connection to the broker and everything that happens on it:
//!
//! - [`wait`]: the [`Wait`] port. The socket is non-blocking and every point
//!   where the client would block (connect, write, read) goes through the
//!   host's waiter with a deadline; the Postgres host waits on its latch and
//!   checks for interrupts, [`PollWait`] uses `poll(2)` for everyone else;
//! - [`connection`]: connecting, framing (a response longer than the frame
//!   limit is an error, never an allocation), request and response headers,
//!   correlation ids, deadlines;
//! - [`guard`]: a walk of each response body before `kafka-protocol` decodes
//!   it, because that crate sizes vectors from counts read off the wire;
//! - [`api`]: the one table of the API versions this client sends, each one
//!   served by the Kafgres broker (`kafgres_broker::api`);
//! - [`records`]: v2 record batches into [`Record`]s (CRC checked, every codec,
//!   decompression capped, control batches skipped);
//! - [`client`]: [`Client`] and its operations, one module per area
//!   (`topics`, `offsets`, `fetch`, `groups`);
//! - [`error`]: [`ClientError`], the one error type, with Kafka error names.
//!
//! It must not depend on tokio or pgrx, spawn threads, touch signals, or block
//! anywhere except inside [`Wait::wait`]. Nothing read from the network is
//! trusted: no `unwrap`, no allocation sized by an unchecked length.

pub mod api;
pub mod client;
pub mod connection;
pub mod error;
pub mod guard;
pub mod records;
pub mod wait;

pub use client::{AcknowledgeType, AcquiredRecord, ShareAcknowledgement, ShareMember};
pub use client::{
    Client, ClientConfig, FetchResult, GroupInfo, InternalLogin, ListedGroup, LogBounds, OffsetSpec, PartitionAnswer,
    PartitionBatch, PartitionInfo, PartitionOffset, ProducerState, TopicInfo,
};
pub use error::ClientError;
pub use kafgres_record::build::NewRecord;
/// The codes [`ClientError::Kafka`] carries, by name.
pub use kafgres_wire::error_code;
pub use records::{Record, TimestampType};
pub use uuid::Uuid;
pub use wait::{Interest, PollWait, Ready, Wait};
