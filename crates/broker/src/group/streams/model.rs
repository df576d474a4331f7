//! A streams group's state: members, epochs, the topology, the target
//! assignment. Plain data and the rules that keep it consistent; no timers.

use std::collections::{BTreeMap, BTreeSet};

use super::topology::ConfiguredTopology;
use super::types::{StreamsEndpoint, StreamsTopology, Tasks, TasksTuple};
use crate::group::consumer::model::MemberState;
use crate::group::types::GroupState;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::group) struct StreamsMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub topology_epoch: i32,
    pub process_id: String,
    pub user_endpoint: Option<StreamsEndpoint>,
    pub client_tags: BTreeMap<String, String>,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    /// What the member may own now (sent to it).
    pub assigned: TasksTuple,
    /// What it must give up before its epoch moves on.
    pub pending_revocation: TasksTuple,
}

impl StreamsMember {
    pub fn new(member_id: &str) -> StreamsMember {
        StreamsMember {
            member_id: member_id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: -1,
            topology_epoch: 0,
            process_id: String::new(),
            user_endpoint: None,
            client_tags: BTreeMap::new(),
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: TasksTuple::default(),
            pending_revocation: TasksTuple::default(),
        }
    }
}

#[derive(Debug, Default)]
pub(in crate::group) struct StreamsGroup {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, StreamsMember>,
    /// instance id → member id.
    pub static_members: BTreeMap<String, String>,
    /// member id → target at `assignment_epoch`.
    pub target: BTreeMap<String, TasksTuple>,
    /// Set by the first member to join; kept until the group is deleted.
    pub topology: Option<StreamsTopology>,
    pub configured: ConfiguredTopology,
    /// The topology's topics as last configured (name → partitions).
    pub topics_snapshot: BTreeMap<String, Option<i32>>,
    /// Bumped whenever what some member serves changes (interactive queries).
    pub endpoint_information_epoch: i32,
    /// A member asked every member to shut down (until the group empties).
    pub shutdown_requested_by: Option<String>,
}

impl StreamsGroup {
    /// Kafka's `StreamsGroup.maybeUpdateGroupState`.
    pub fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if !self.configured.is_ready() {
            GroupState::NotReady
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

    pub fn put_member(&mut self, member: StreamsMember) {
        if let Some(instance_id) = &member.instance_id {
            self.static_members.insert(instance_id.clone(), member.member_id.clone());
        }
        let changed = self
            .members
            .get(&member.member_id)
            .is_none_or(|old| old.assigned != member.assigned || old.user_endpoint != member.user_endpoint);
        if changed && member.user_endpoint.is_some() {
            self.endpoint_information_epoch += 1;
        }
        self.members.insert(member.member_id.clone(), member);
    }

    pub fn remove_member(&mut self, member_id: &str) -> Option<StreamsMember> {
        self.target.remove(member_id);
        let member = self.members.remove(member_id)?;
        if let Some(instance_id) = &member.instance_id {
            if self.static_members.get(instance_id).is_some_and(|id| id == member_id) {
                self.static_members.remove(instance_id);
            }
        }
        if member.user_endpoint.is_some() {
            self.endpoint_information_epoch += 1;
        }
        if self.members.is_empty() {
            // The topology stays, as Kafka keeps its record: the next member
            // must bring the same one (or an older epoch); DeleteGroups drops it.
            self.shutdown_requested_by = None;
        }
        Some(member)
    }

    /// Whether a member other than `member_id` owns the task as active.
    pub fn active_elsewhere(&self, member_id: &str, subtopology: &str, partition: i32) -> bool {
        self.members.values().any(|m| {
            m.member_id != member_id
                && [&m.assigned.active, &m.pending_revocation.active]
                    .iter()
                    .any(|t| t.get(subtopology).is_some_and(|p| p.contains(&partition)))
        })
    }
}

/// Any task in both.
pub(in crate::group) fn intersects(a: &Tasks, b: &Tasks) -> bool {
    a.iter().any(|(id, partitions)| b.get(id).is_some_and(|o| !partitions.is_disjoint(o)))
}

pub(in crate::group) fn tuple_intersects(a: &TasksTuple, b: &TasksTuple) -> bool {
    intersects(&a.active, &b.active) || intersects(&a.standby, &b.standby) || intersects(&a.warmup, &b.warmup)
}

/// Drops subtopologies without tasks.
pub(in crate::group) fn prune(tasks: &mut Tasks) {
    tasks.retain(|_, partitions| !partitions.is_empty());
}

/// `a` minus `b`.
pub(in crate::group) fn difference(a: &Tasks, b: &Tasks) -> Tasks {
    let mut out: Tasks = a
        .iter()
        .map(|(id, p)| (id.clone(), p.difference(b.get(id).unwrap_or(&BTreeSet::new())).copied().collect()))
        .collect();
    prune(&mut out);
    out
}

/// `a` and `b`.
pub(in crate::group) fn intersection(a: &Tasks, b: &Tasks) -> Tasks {
    let mut out: Tasks = a
        .iter()
        .map(|(id, p)| (id.clone(), p.intersection(b.get(id).unwrap_or(&BTreeSet::new())).copied().collect()))
        .collect();
    prune(&mut out);
    out
}
