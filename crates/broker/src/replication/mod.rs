//! Replication of partition data to Postgres standbys (docs/replication.md).
//!
//! - [`sync_policy`]: which standbys an `acks=all` produce waits for, read
//!   from PostgreSQL's own `synchronous_standby_names`.
pub mod sync_policy;

pub use sync_policy::{SyncMethod, SyncPolicy};
