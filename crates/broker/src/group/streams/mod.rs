//! The Streams group protocol of KIP-1071 (StreamsGroupHeartbeat,
//! StreamsGroupDescribe): Kafka Streams members send their topology, the
//! coordinator creates the internal topics it declares, assigns tasks
//! (subtopology × partition) and moves them between members with revocation
//! first, like the consumer protocol ([`super::consumer`]) moves partitions.
//!
//! A group is classic, consumer or streams (`Group::streams` is `Some`); the
//! three share one namespace, committed offsets, the deadline queue,
//! ListGroups and DeleteGroups. Each heartbeat:
//! 1. validates the request as Kafka's `GroupCoordinatorService` does;
//! 2. the first member's topology initializes the group's; a member with an
//!    older topology epoch joins with status STALE_TOPOLOGY, one with a
//!    different topology at the same or a newer epoch is refused (Kafka 4.4:
//!    "Topology updates are not supported yet.");
//! 3. the topology is configured against the topics that exist
//!    ([`topology`]): MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS,
//!    or MISSING_INTERNAL_TOPICS with the topics to create (the broker creates
//!    them before answering, so the next heartbeat finds them); no task is
//!    assigned until it is ready;
//! 4. a new member, a changed process, rack, client tags or topology epoch,
//!    or changed tasks bump the group epoch, and the [`assignor`] computes a
//!    new target;
//! 5. the member is reconciled towards its target: tasks it must give up are
//!    revoked first; an active task another member still owns is withheld.
//!
//! Deadlines: each member's session (`group.streams.session.timeout.ms`) and,
//! while it must revoke tasks, its rebalance timeout; either expiring fences
//! the member.
//!
//! Differences from Kafka 4.4 (docs/conformance.md): no initial rebalance
//! delay (`group.streams.initial.rebalance.delay.ms`) and no assignment
//! interval: the target is computed at the heartbeat that needs it; no
//! warm-up tasks; standby tasks are placed without rack awareness; membership
//! and the topology are not persisted (as for consumer groups: after a
//! restart the first member brings the topology again); no topology
//! description plugin, so
//! StreamsGroupTopologyDescriptionUpdate is not served.

pub(super) mod assignor;
mod describe;
mod heartbeat;
pub(super) mod model;
pub(super) mod topology;
pub mod types;

#[cfg(test)]
mod tests;

pub use types::*;
