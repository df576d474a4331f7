//! The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat,
//! ConsumerGroupDescribe): the coordinator owns the assignment, members only
//! heartbeat their subscription and the partitions they own.
//!
//! A group is either classic or a consumer group (`Group::consumer` is
//! `Some`); committed offsets, the deadline queue, ListGroups, DeleteGroups and
//! offset retention are shared with the classic protocol. Each heartbeat, as in
//! Kafka's `GroupMetadataManager.consumerGroupHeartbeat`:
//! 1. the member is created or updated; a new member, a changed subscription or
//!    a change in the subscribed topics' partitions bumps the **group epoch**;
//! 2. when the group epoch is ahead of the **assignment epoch**, the server-side
//!    assignor (`uniform`, the default, or `range`) computes a new target
//!    assignment for every member;
//! 3. the member is reconciled towards its target ([`reconcile`]): partitions
//!    it must give up are revoked first (it stays at its epoch, state
//!    UNREVOKED_PARTITIONS, until a heartbeat no longer lists them); partitions
//!    another member still owns are withheld (UNRELEASED_PARTITIONS) until
//!    released; otherwise it moves to the assignment epoch (STABLE).
//!
//! Deadlines: each member's session (`group.consumer.session.timeout.ms`) and,
//! while it must revoke partitions, its rebalance timeout; either expiring
//! fences the member (removed, group epoch bumped). A new target is computed at
//! the next heartbeat (the group shows Assigning until then), as in Kafka.
//!
//! Differences from Kafka (docs/conformance.md): no mixed groups (a classic
//! member cannot join a non-empty consumer group, nor the reverse: Kafka's
//! online migration); the assignors are balanced and sticky like Kafka's but
//! not the same algorithm, so which member gets which partition may differ;
//! regular expressions use Rust's `regex` syntax (RE2, as Kafka's RE2/J) and
//! are resolved at each heartbeat instead of in the background.

pub(super) mod assignor;
mod describe;
mod heartbeat;
pub(super) mod model;
pub(super) mod reconcile;
pub mod types;

pub use types::*;
