//! A consumer group's state: members, epochs, the target assignment and who
//! owns each partition now. Plain data and the rules that keep its indexes
//! consistent; no timers, no effects.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::types::Assignment;
use crate::group::types::GroupState;

/// The assignor used when no member names one (Kafka's first of
/// `group.consumer.assignors`).
pub(in crate::group) const DEFAULT_ASSIGNOR: &str = "uniform";
/// The server-side assignors this coordinator runs.
pub(in crate::group) const ASSIGNORS: &[&str] = &["uniform", "range"];

/// Where a member is in reconciling towards its target assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::group) enum MemberState {
    /// Owns its target at the assignment epoch.
    Stable,
    /// Must give up partitions before moving to the next epoch.
    UnrevokedPartitions,
    /// At the assignment epoch, waiting for partitions others still own.
    UnreleasedPartitions,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::group) struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    /// What the member may own now (sent to it).
    pub assigned: Assignment,
    /// What it must give up before its epoch moves on.
    pub pending_revocation: Assignment,
}

impl ConsumerMember {
    pub fn new(member_id: &str) -> ConsumerMember {
        ConsumerMember {
            member_id: member_id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: -1,
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: None,
            server_assignor: None,
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
        }
    }
}

#[derive(Debug, Default)]
pub(in crate::group) struct ConsumerGroup {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    /// instance id → member id.
    pub static_members: BTreeMap<String, String>,
    /// member id → target assignment at `assignment_epoch`.
    pub target: BTreeMap<String, Assignment>,
    /// (topic, partition) → the member that owns it (assigned or revoking).
    pub owners: BTreeMap<(Uuid, i32), String>,
    /// The subscribed topics as of the last epoch: name → (id, partitions).
    pub subscribed_topics: BTreeMap<String, (Uuid, i32)>,
}

impl ConsumerGroup {
    /// Kafka's `ConsumerGroup.maybeUpdateGroupState`.
    pub fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            GroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.member_epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }

    /// Stores a member, keeping the owner and static-member indexes right.
    pub fn put_member(&mut self, member: ConsumerMember) {
        self.release_partitions(&member.member_id);
        for (topic_id, partitions) in member.assigned.iter().chain(member.pending_revocation.iter()) {
            for &partition in partitions {
                self.owners.insert((*topic_id, partition), member.member_id.clone());
            }
        }
        if let Some(instance_id) = &member.instance_id {
            self.static_members.insert(instance_id.clone(), member.member_id.clone());
        }
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member with its target, its partitions and its instance id.
    pub fn remove_member(&mut self, member_id: &str) -> Option<ConsumerMember> {
        self.release_partitions(member_id);
        self.target.remove(member_id);
        let member = self.members.remove(member_id)?;
        if let Some(instance_id) = &member.instance_id {
            if self.static_members.get(instance_id).is_some_and(|id| id == member_id) {
                self.static_members.remove(instance_id);
            }
        }
        Some(member)
    }

    fn release_partitions(&mut self, member_id: &str) {
        if let Some(old) = self.members.get(member_id) {
            for (topic_id, partitions) in old.assigned.iter().chain(old.pending_revocation.iter()) {
                for &partition in partitions {
                    if self.owners.get(&(*topic_id, partition)).is_some_and(|owner| owner == member_id) {
                        self.owners.remove(&(*topic_id, partition));
                    }
                }
            }
        }
    }

    /// Whether a member other than `member_id` still owns the partition.
    pub fn owned_by_other(&self, member_id: &str, topic_id: Uuid, partition: i32) -> bool {
        self.owners.get(&(topic_id, partition)).is_some_and(|owner| owner != member_id)
    }

    /// The assignor most members ask for (ties: the first in name order),
    /// else the default.
    pub fn preferred_assignor(&self) -> String {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some(name) = member.server_assignor.as_deref() {
                *votes.entry(name).or_default() += 1;
            }
        }
        let best = votes.iter().max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)));
        best.map_or_else(|| DEFAULT_ASSIGNOR.to_string(), |(name, _)| name.to_string())
    }

    /// The union of every member's subscribed names (regexes resolved by the caller).
    pub fn subscribed_names(&self, resolve_regex: impl Fn(&str) -> Vec<String>) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for member in self.members.values() {
            names.extend(member.subscribed_topic_names.iter().cloned());
            if let Some(regex) = &member.subscribed_topic_regex {
                names.extend(resolve_regex(regex));
            }
        }
        names
    }
}

/// Every partition of `small` is in `big`.
pub(in crate::group) fn is_subset(small: &Assignment, big: &Assignment) -> bool {
    small
        .iter()
        .all(|(topic, partitions)| partitions.is_empty() || big.get(topic).is_some_and(|b| partitions.is_subset(b)))
}

/// Any partition in both.
pub(in crate::group) fn intersects(a: &Assignment, b: &Assignment) -> bool {
    a.iter().any(|(topic, partitions)| b.get(topic).is_some_and(|o| !partitions.is_disjoint(o)))
}
