//! Share groups (KIP-932, "queues for Kafka"): members of a share group
//! consume the same partitions together, each record handed to one member at
//! a time under an acquisition lock, and acknowledged one by one.
//!
//! - [`membership`] (pure): ShareGroupHeartbeat's members, epochs and the
//!   simple assignor;
//! - [`session`] (pure): share sessions, the ShareFetch/ShareAcknowledge epochs;
//! - [`partition`] (pure): one share-partition's start offset, in-flight
//!   records, their states, delivery counts and lock deadlines;
//! - [`service`]: the coordinator on the data plane (locks, the timer task
//!   for session and lock deadlines, writes through the catalog);
//!   [`acquire`]: ShareFetch's acquisitions from the log and
//!   acknowledgements; [`log_read`]: the log reads they need;
//! - [`config`]: the broker's share settings and each group's configs;
//! - [`offsets_admin`]: Alter/DeleteShareGroupOffsets on an empty group.
//!
//! The state of each share-partition is stored through the catalog
//! (`kafgres.share_partitions`), batched per request and versioned, and
//! restored at startup; membership and sessions are not stored (members
//! rejoin, as with KIP-848 groups). docs/architecture.md ("Share groups")
//! says what a crash can redeliver.

pub mod acquire;
pub mod config;
pub mod log_read;
pub mod membership;
pub mod offsets_admin;
pub mod partition;
pub mod service;
pub mod session;

#[cfg(test)]
mod tests;

pub use acquire::{AckBatch, Acquired};
pub use config::{AutoOffsetReset, GroupConfigError, IsolationLevel, ShareConfig, ShareGroupConfig};
pub use membership::{ShareHeartbeat, ShareHeartbeatAnswer};
pub use offsets_admin::StartOffsetChange;
pub use partition::{AckCounts, RecordState, StateBatch, WindowCounts};
pub use service::{ShareCounters, ShareGroupRow, SharePartitionKey, SharePartitionRow, ShareService};
