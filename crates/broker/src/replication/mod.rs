//! Replication of partition data to Postgres standbys (docs/replication.md).
//!
//! - [`sync_policy`]: which standbys an `acks=all` produce waits for, read
//!   from PostgreSQL's own `synchronous_standby_names`;
//! - [`state`]: the broker-wide part: this broker's leader epoch, the policy,
//!   the followers it has seen (each partition keeps its followers'
//!   acknowledgements itself, `crate::partition`);
//! - [`board`]: the same, published where SQL reads it (shared memory in
//!   the extension), and [`partition_status`]: each follower's position in
//!   each partition, written to a file when SQL asks;
//! - [`follower`]: a standby's broker copying every partition from the
//!   leader (Fetch as a replica, OffsetForLeaderEpoch to cut a diverged
//!   tail), over [`leader_link`].
pub mod board;
pub mod follower;
pub mod leader_link;
pub mod partition_status;
pub mod standby_name;
pub mod state;
pub mod sync_policy;

pub use state::{FollowerInfo, FollowerStatus, ReplicationState};
pub use sync_policy::{SyncMethod, SyncPolicy};

/// The topic id under which followers fetch the catalog version (partition
/// 0; its high watermark is the version). No real topic has it: Kafka's
/// topic ids are random (version 4) UUIDs, and this one is not.
pub const CATALOG_TOPIC_ID: uuid::Uuid = uuid::Uuid::from_u128(0x6b61_6667_7265_735f_6361_7461_6c6f_6700);

/// KIP-320's check of the epoch a client believes the leader has: -1 means
/// it does not know (no check); a newer one than ours is UNKNOWN_LEADER_EPOCH
/// (we are behind: retry), an older one FENCED_LEADER_EPOCH (the client is
/// behind: refresh metadata).
pub fn check_leader_epoch(requested: i32, current: i32) -> Result<(), i16> {
    use kafgres_wire::error_code;
    match requested {
        // Only -1 means "unknown" (Kafka's NO_PARTITION_LEADER_EPOCH); any
        // other negative number is an old epoch like any other.
        -1 => Ok(()),
        r if r > current => Err(error_code::UNKNOWN_LEADER_EPOCH),
        r if r < current => Err(error_code::FENCED_LEADER_EPOCH),
        _ => Ok(()),
    }
}
