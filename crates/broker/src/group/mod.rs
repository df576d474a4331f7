//! The group coordinator as a pure state machine, with Apache Kafka 4.x
//! semantics: the classic protocol (JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup), the consumer protocol of KIP-848 ([`consumer`]:
//! ConsumerGroupHeartbeat, ConsumerGroupDescribe), committed offsets and the
//! group admin APIs.
//!
//! # Shape
//!
//! [`GroupCoordinator`] owns every group of the broker. Each entry point takes
//! the current time `now_ms` and a plain request struct ([`types`]), and
//! returns the answer together with a list of [`Effect`]s for the broker to
//! carry out. There is no tokio, no timer, no I/O and no lock inside: the
//! broker serialises calls (one task or one mutex) and owns every side effect.
//! Tests drive it with a hand-advanced clock.
//!
//! - **Parked requests.** JoinGroup and SyncGroup may have to wait for other
//!   members. Their entry points return [`Reply::Now`] or
//!   [`Reply::Parked`]`(ticket)`; a later call (any entry point, or
//!   [`GroupCoordinator::on_deadline`]) answers the ticket with
//!   [`Effect::CompleteJoin`] / [`Effect::CompleteSync`]. A request answered
//!   within the call that made it is returned as `Reply::Now`, never as an
//!   effect. Tickets of closed connections are simply ignored by the broker.
//! - **Deadlines.** Session expiry, the rebalance timeout, the initial
//!   rebalance delay, the pending-sync timeout and the collection of empty
//!   groups live in one deadline queue (a `BTreeMap` keyed by time, with a
//!   reverse index so a heartbeat reschedules in O(log n)). The broker sleeps
//!   until [`GroupCoordinator::next_deadline`], then calls `on_deadline(now)`;
//!   never a periodic tick. Any call whose work moves the earliest deadline
//!   earlier emits [`Effect::ScheduleDeadline`] so a sleeping timer task can be
//!   woken; after `on_deadline` the broker re-reads `next_deadline()`.
//! - **Committed offsets.** OffsetCommit is validated here (generation and
//!   member checks, simple commits with generation -1 only while the group is
//!   Empty) and applied to the in-memory view at once; the call returns
//!   [`Effect::PersistOffsets`] and the response, which the broker must hold
//!   back until the effect is durable in Postgres. DeleteGroups and
//!   OffsetDelete likewise return [`Effect::DeleteGroup`] /
//!   [`Effect::DeleteOffsets`]. Effects are in application order: persisting
//!   them in that order (batched into few transactions) keeps Postgres equal to
//!   the view. If a write fails, the broker answers with an error and reloads
//!   the group's rows with [`GroupCoordinator::replace_group_offsets`].
//!   At startup the broker feeds every stored row to
//!   [`GroupCoordinator::load_offsets`]; when a topic is deleted it calls
//!   [`GroupCoordinator::forget_topic`]. Group membership is not persisted
//!   (members rejoin after a restart, as the issue allows).
//! - **Incremental (cooperative-sticky) rebalances** need nothing here: in the
//!   classic protocol they are driven by the clients (KIP-429), the
//!   coordinator runs ordinary generations.
//!
//! # States
//!
//! Empty → PreparingRebalance (first join; waits `initial_rebalance_delay_ms`,
//! extended while members keep arriving, up to the rebalance timeout) →
//! CompletingRebalance (every member answered, leader gets the member list) →
//! Stable (leader's SyncGroup distributes the assignment) → PreparingRebalance
//! (join with new metadata, leader rejoin, leave, session expiry) → … →
//! Empty (last member gone). Dead is only reported for groups that do not exist
//! (deleted or collected); such groups are removed from the map.
//!
//! # Where this differs from Kafka (on purpose)
//!
//! - Group membership is not written anywhere; after a restart, members rejoin.
//! - A parked request of a member that is removed is answered
//!   (UNKNOWN_MEMBER_ID) instead of being left to the client's request timeout.
//! - Ties in protocol votes go to the leader's preference order (Kafka: hash order).
//! - Offset retention (`offsets.retention.minutes`, KIP-211): an Empty group
//!   that had members loses all its offsets `offsets_retention_ms` after it
//!   became Empty; a group that never had members (simple commits, SQL
//!   consumers) loses each offset that long after its commit. Kafka checks at
//!   a 10-minute interval; here a timer fires at the exact time. Offsets of
//!   topics a live group no longer subscribes to are not expired (Kafka does).
//!   An Empty group with no offsets is collected `empty_group_retention_ms`
//!   after it became collectable (Kafka: at the next cleanup run).

mod admin;
pub mod consumer;
mod coordinator;
mod join;
mod membership;
mod model;
mod offsets;
mod rebalance;
pub mod streams;
mod sync;
mod timers;
pub mod types;

#[cfg(test)]
mod tests;

pub use consumer::types::*;
pub use coordinator::{GroupCoordinator, GroupOffsets};
pub use streams::types as streams_types;
pub use types::*;

/// Coordinator settings, named after Kafka's broker configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms` (Kafka: 6000).
    pub session_timeout_ms_min: i32,
    /// `group.max.session.timeout.ms` (Kafka 4.x: 1800000).
    pub session_timeout_ms_max: i32,
    /// `group.initial.rebalance.delay.ms` (Kafka: 3000).
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size` (Kafka: i32::MAX). Members beyond it get GROUP_MAX_SIZE_REACHED.
    pub group_members_max: usize,
    /// Kafka's fixed 5-minute timeout for a new member's parked JoinGroup.
    pub new_member_join_timeout_ms: i32,
    /// `offset.metadata.max.bytes` (Kafka: 4096, counted in UTF-16 units as Java does).
    pub offset_metadata_max_bytes: usize,
    /// How long an Empty group without members, pending members or offsets
    /// stays listed (Kafka: up to `offsets.retention.check.interval.ms`, 600000).
    pub empty_group_retention_ms: i64,
    /// `offsets.retention.minutes` (Kafka: 7 days) in milliseconds.
    pub offsets_retention_ms: i64,
    /// `group.consumer.session.timeout.ms` (Kafka: 45000): consumer-protocol
    /// members are fenced this long after their last heartbeat.
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` (Kafka: 5000), told to members.
    pub consumer_heartbeat_interval_ms: i32,
    /// Streams groups (KIP-1071).
    pub streams: StreamsGroupConfig,
}

/// Kafka's `group.streams.*` broker settings that streams groups use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsGroupConfig {
    /// `group.streams.session.timeout.ms` (Kafka: 45000).
    pub session_timeout_ms: i32,
    /// `group.streams.heartbeat.interval.ms` (Kafka: 5000), told to members.
    pub heartbeat_interval_ms: i32,
    /// `group.streams.num.standby.replicas` (Kafka: 0).
    pub num_standby_replicas: i32,
}

impl Default for StreamsGroupConfig {
    fn default() -> StreamsGroupConfig {
        StreamsGroupConfig { session_timeout_ms: 45_000, heartbeat_interval_ms: 5_000, num_standby_replicas: 0 }
    }
}

impl Default for GroupConfig {
    fn default() -> GroupConfig {
        GroupConfig {
            session_timeout_ms_min: 6_000,
            session_timeout_ms_max: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            group_members_max: i32::MAX as usize,
            new_member_join_timeout_ms: 300_000,
            offset_metadata_max_bytes: 4096,
            empty_group_retention_ms: 600_000,
            offsets_retention_ms: 7 * 24 * 3_600_000,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
            streams: StreamsGroupConfig::default(),
        }
    }
}
