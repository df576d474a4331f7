//! StreamsGroupHeartbeat: join with a topology, heartbeat, leave, and the
//! deadlines that fence members that stop heartbeating or never revoke.

use std::collections::BTreeMap;

use kafgres_wire::error_code;

use super::assignor::{assign, AssignmentSpec};
use super::model::{difference, intersection, tuple_intersects, StreamsGroup, StreamsMember};
use super::topology::{configure, topics_snapshot};
use super::types::*;
use crate::group::consumer::model::MemberState;
use crate::group::consumer::types::{TopicLookup, JOIN_MEMBER_EPOCH, LEAVE_MEMBER_EPOCH, LEAVE_STATIC_MEMBER_EPOCH};
use crate::group::coordinator::GroupCoordinator;
use crate::group::membership::{self, ensure_room, refuse, take_over_static, Leave, MemberTable, Refusal};
use crate::group::model::Group;
use crate::group::types::{Effect, GroupState};

/// The protocol type ListGroups shows for a streams group.
pub(in crate::group) const STREAMS_PROTOCOL_TYPE: &str = "streams";

/// Kafka's `throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures`
/// and `throwIfStreamsGroupHeartbeatRequestIsInvalid`, in Kafka's order.
fn validate(request: &StreamsHeartbeatRequest) -> Result<(), Refusal> {
    let invalid = |m: &str| refuse(error_code::INVALID_REQUEST, m);
    if request.uses_source_regex {
        return invalid("Regular expressions for source topics are not supported yet.");
    }
    let empty = |s: &Option<String>| s.as_deref().is_some_and(|s| s.trim().is_empty());
    if request.member_id.trim().is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if request.group_id.trim().is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if empty(&request.instance_id) {
        return invalid("InstanceId can't be empty.");
    }
    if empty(&request.rack_id) {
        return invalid("RackId can't be empty.");
    }
    if request.member_epoch == JOIN_MEMBER_EPOCH {
        if request.rebalance_timeout_ms == -1 {
            return invalid("RebalanceTimeoutMs must be provided in first request.");
        }
        let non_empty = |t: &Option<Tasks>| t.as_ref().is_some_and(|t| !t.is_empty());
        if non_empty(&request.active_tasks) {
            return invalid("ActiveTasks must be empty when (re-)joining.");
        }
        if non_empty(&request.standby_tasks) {
            return invalid("StandbyTasks must be empty when (re-)joining.");
        }
        if non_empty(&request.warmup_tasks) {
            return invalid("WarmupTasks must be empty when (re-)joining.");
        }
        match &request.topology {
            None => return invalid("Topology must be non-null when (re-)joining."),
            Some(Err(message)) => return refuse(error_code::STREAMS_INVALID_TOPOLOGY, message.clone()),
            Some(Ok(topology)) => {
                for t in topology.subtopologies.iter().flat_map(|s| s.state_changelog_topics.iter()) {
                    if t.partitions != 0 {
                        return refuse(
                            error_code::STREAMS_INVALID_TOPOLOGY,
                            format!(
                                "Changelog topic {} must have an undefined partition count, but it is set to {}.",
                                t.name, t.partitions
                            ),
                        );
                    }
                }
            }
        }
    } else if request.member_epoch == LEAVE_STATIC_MEMBER_EPOCH {
        if request.instance_id.is_none() {
            return invalid("InstanceId can't be null.");
        }
    } else if request.member_epoch < LEAVE_STATIC_MEMBER_EPOCH {
        return invalid(&format!("MemberEpoch is {}, but must be greater than or equal to -2.", request.member_epoch));
    }
    let nulls = [&request.active_tasks, &request.standby_tasks, &request.warmup_tasks].map(Option::is_none);
    if nulls.iter().any(|n| *n) && !nulls.iter().all(|n| *n) {
        return invalid("If one task-type is non-null, all must be non-null.");
    }
    if request.member_epoch != JOIN_MEMBER_EPOCH && request.topology.is_some() {
        return invalid("Topology can only be provided when (re-)joining.");
    }
    Ok(())
}

impl GroupCoordinator {
    /// One StreamsGroupHeartbeat (join, heartbeat or leave).
    pub fn streams_group_heartbeat(
        &mut self,
        now_ms: i64,
        request: StreamsHeartbeatRequest,
        topics: &dyn TopicLookup,
    ) -> (StreamsHeartbeatResponse, Vec<Effect>) {
        let before = self.next_deadline();
        let mut effects = Vec::new();
        let result = validate(&request).and_then(|()| match request.member_epoch {
            LEAVE_MEMBER_EPOCH | LEAVE_STATIC_MEMBER_EPOCH => self.streams_leave(now_ms, &request, &mut effects),
            _ => self.streams_heartbeat(now_ms, &request, topics, &mut effects),
        });
        let response = result.unwrap_or_else(|(code, message)| StreamsHeartbeatResponse::error(code, message));
        self.touch(now_ms, &request.group_id);
        self.finish(before, &mut effects);
        (response, effects)
    }

    /// The streams group `group_id`, created (or converted from an empty
    /// classic group) when `create` is set.
    fn streams_group_mut(&mut self, now_ms: i64, group_id: &str, create: bool) -> Result<&mut Group, Refusal> {
        if !self.groups.contains_key(group_id) {
            if !create {
                // Membership is not persisted: after a restart a member comes
                // back to a group this coordinator does not know; Kafka would
                // have fenced it, and UNKNOWN_MEMBER_ID makes it rejoin.
                return refuse(error_code::UNKNOWN_MEMBER_ID, format!("Streams group {group_id} not found."));
            }
            self.groups.insert(group_id.to_string(), Group::new(group_id, now_ms));
        }
        let group = self.groups.get_mut(group_id).ok_or((error_code::UNKNOWN_SERVER_ERROR, String::new()))?;
        if group.streams.is_none() {
            let empty_classic = group.consumer.is_none()
                && group.state == GroupState::Empty
                && group.members.is_empty()
                && group.pending_join.is_empty();
            if !empty_classic {
                return refuse(error_code::GROUP_ID_NOT_FOUND, format!("Group {group_id} is not a streams group."));
            }
            if !create {
                return refuse(error_code::UNKNOWN_MEMBER_ID, format!("Streams group {group_id} not found."));
            }
            group.streams = Some(Box::default());
            group.protocol_type = Some(STREAMS_PROTOCOL_TYPE.to_string());
            group.protocol_name = None;
            group.leader_id = None;
            group.subscribed_topics = None;
            group.transition(GroupState::Empty, now_ms);
        }
        Ok(group)
    }

    fn streams_heartbeat(
        &mut self,
        now_ms: i64,
        request: &StreamsHeartbeatRequest,
        topics: &dyn TopicLookup,
        effects: &mut Vec<Effect>,
    ) -> Result<StreamsHeartbeatResponse, Refusal> {
        let joining = request.member_epoch == JOIN_MEMBER_EPOCH;
        let members_max = self.config.group_members_max;
        let session_ms = self.config.streams.session_timeout_ms;
        let heartbeat_interval_ms = self.config.streams.heartbeat_interval_ms;
        let num_standby_replicas = self.config.streams.num_standby_replicas;
        self.streams_group_mut(now_ms, &request.group_id, joining)?;
        let (mut ctx, groups) = self.split(now_ms, effects);
        let group = groups.get_mut(&request.group_id).ok_or((error_code::UNKNOWN_SERVER_ERROR, String::new()))?;
        let sg = group.streams.as_deref_mut().ok_or((error_code::UNKNOWN_SERVER_ERROR, String::new()))?;

        let (member, is_new) = find_or_create_member(sg, request, members_max)?;
        let mut updated = member.clone();
        let mut status = Vec::new();
        if let Some(Ok(topology)) = &request.topology {
            match &sg.topology {
                None => {
                    sg.topology = Some(topology.clone());
                    sg.topics_snapshot.clear(); // configured below
                }
                Some(current) if current.epoch > topology.epoch => {}
                Some(current) if current == topology => {}
                Some(_) => return refuse(error_code::INVALID_REQUEST, "Topology updates are not supported yet."),
            }
            updated.topology_epoch = topology.epoch;
        }
        if let Some(current) = &sg.topology {
            if updated.topology_epoch < current.epoch {
                status.push(StreamsStatus {
                    code: status::STALE_TOPOLOGY,
                    detail: format!(
                        "The member's topology epoch {} is behind the group's topology epoch {}.",
                        updated.topology_epoch, current.epoch
                    ),
                });
            }
        }
        if request.instance_id.is_some() {
            updated.instance_id = request.instance_id.clone();
        }
        if request.rack_id.is_some() {
            updated.rack_id = request.rack_id.clone();
        }
        if request.rebalance_timeout_ms != -1 {
            updated.rebalance_timeout_ms = request.rebalance_timeout_ms;
        }
        if let Some(process_id) = &request.process_id {
            updated.process_id = process_id.clone();
        }
        if request.user_endpoint.is_some() {
            updated.user_endpoint = request.user_endpoint.clone();
        }
        if let Some(tags) = &request.client_tags {
            updated.client_tags = tags.clone();
        }
        updated.client_id = request.client_id.clone();
        updated.client_host = request.client_host.clone();
        if request.shutdown_application && sg.shutdown_requested_by.is_none() {
            sg.shutdown_requested_by = Some(updated.member_id.clone());
        }

        let mut bump = sg.group_epoch == 0
            || is_new
            || updated.process_id != member.process_id
            || updated.rack_id != member.rack_id
            || updated.client_tags != member.client_tags
            || updated.topology_epoch != member.topology_epoch;
        sg.put_member(updated.clone());
        bump |= refresh_topology(sg, topics);
        if bump {
            sg.group_epoch += 1;
        }
        if sg.group_epoch > sg.assignment_epoch {
            compute_target(sg, num_standby_replicas);
        }
        let target = sg.target.get(&updated.member_id).cloned().unwrap_or_default();
        let owned = request.active_tasks.as_ref().map(|active| TasksTuple {
            active: active.clone(),
            standby: request.standby_tasks.clone().unwrap_or_default(),
            warmup: request.warmup_tasks.clone().unwrap_or_default(),
        });
        let reconciled = reconcile(sg, &updated, sg.assignment_epoch, &target, owned.as_ref());
        let member_id = reconciled.member_id.clone();

        membership::schedule_deadlines(&mut ctx, &request.group_id, &member, &reconciled, session_ms);

        let full_request = request.rebalance_timeout_ms != -1 && owned.is_some();
        let send_tasks = joining || full_request || is_new || reconciled.assigned != member.assigned;
        sg.put_member(reconciled.clone());
        if let Some(s) = &sg.configured.status {
            status.push(s.clone());
        }
        if let Some(by) = &sg.shutdown_requested_by {
            status.push(StreamsStatus {
                code: status::SHUTDOWN_APPLICATION,
                detail: format!(
                    "Streams group member {by} encountered a fatal error and requested a shutdown for the entire \
                     application."
                ),
            });
        }
        let partitions_by_user_endpoint =
            (request.endpoint_information_epoch < sg.endpoint_information_epoch).then(|| endpoint_partitions(sg));
        let response = StreamsHeartbeatResponse {
            error_code: error_code::NONE,
            error_message: None,
            member_id,
            member_epoch: reconciled.member_epoch,
            heartbeat_interval_ms,
            status,
            tasks: send_tasks.then(|| reconciled.assigned.clone()),
            endpoint_information_epoch: sg.endpoint_information_epoch,
            partitions_by_user_endpoint,
            topics_to_create: sg.configured.missing_internal_topics.clone(),
        };
        membership::refresh_state::<StreamsGroup>(group, now_ms);
        Ok(response)
    }

    fn streams_leave(
        &mut self,
        now_ms: i64,
        request: &StreamsHeartbeatRequest,
        effects: &mut Vec<Effect>,
    ) -> Result<StreamsHeartbeatResponse, Refusal> {
        self.streams_group_mut(now_ms, &request.group_id, false)?;
        let (mut ctx, groups) = self.split(now_ms, effects);
        let group = groups.get_mut(&request.group_id).ok_or((error_code::UNKNOWN_SERVER_ERROR, String::new()))?;
        let leave = Leave {
            group_id: &request.group_id,
            member_id: &request.member_id,
            instance_id: request.instance_id.as_deref(),
            member_epoch: request.member_epoch,
        };
        let member_id = membership::leave::<StreamsGroup>(&mut ctx, group, &leave, now_ms)?;
        Ok(StreamsHeartbeatResponse {
            error_code: error_code::NONE,
            error_message: None,
            member_id,
            member_epoch: request.member_epoch,
            heartbeat_interval_ms: 0,
            status: Vec::new(),
            tasks: None,
            endpoint_information_epoch: 0,
            partitions_by_user_endpoint: None,
            topics_to_create: Vec::new(),
        })
    }
}

/// Kafka's `getOrCreateStreamsGroupMember` with static membership.
fn find_or_create_member(
    sg: &mut StreamsGroup,
    request: &StreamsHeartbeatRequest,
    members_max: usize,
) -> Result<(StreamsMember, bool), Refusal> {
    let joining = request.member_epoch == JOIN_MEMBER_EPOCH;
    if let (Some(instance_id), true) = (&request.instance_id, joining) {
        if let Some(old) = sg.static_members.get(instance_id).and_then(|id| sg.members.get(id)).cloned() {
            if old.member_id != request.member_id {
                if old.member_epoch != LEAVE_STATIC_MEMBER_EPOCH {
                    return refuse(
                        error_code::UNRELEASED_INSTANCE_ID,
                        format!("Static member {} with instance id {instance_id} is not released yet.", old.member_id),
                    );
                }
                return Ok((take_over_static(sg, &old, &request.member_id), false));
            }
        }
    }
    match sg.members.get(&request.member_id) {
        Some(member) if joining => Ok((member.clone(), false)),
        Some(member) => {
            check_epoch(member, request)?;
            Ok((member.clone(), false))
        }
        None if joining => {
            ensure_room(sg, members_max)?;
            Ok((StreamsMember::new(&request.member_id), true))
        }
        None => refuse(
            error_code::UNKNOWN_MEMBER_ID,
            format!("Member {} is not a member of group {}.", request.member_id, request.group_id),
        ),
    }
}

/// Kafka's `throwIfStreamsGroupMemberEpochIsInvalid`: an epoch ahead is
/// fenced; the previous epoch is accepted when the member owns no more than
/// it was given (the answer that bumped it may have been lost).
fn check_epoch(member: &StreamsMember, request: &StreamsHeartbeatRequest) -> Result<(), Refusal> {
    let received = request.member_epoch;
    let owns_only_assigned = || {
        let within = |owned: &Option<Tasks>, given: &Tasks| {
            owned.as_ref().is_some_and(|owned| difference(owned, given).is_empty())
        };
        within(&request.active_tasks, &member.assigned.active)
            && within(&request.standby_tasks, &member.assigned.standby)
            && within(&request.warmup_tasks, &member.assigned.warmup)
    };
    let fenced = received > member.member_epoch
        || (received < member.member_epoch && (received != member.previous_member_epoch || !owns_only_assigned()));
    if fenced {
        return refuse(
            error_code::FENCED_MEMBER_EPOCH,
            format!(
                "The streams group member has a member epoch ({received}) that does not match the coordinator's ({}).",
                member.member_epoch
            ),
        );
    }
    Ok(())
}

/// Configures the topology again when its topics changed; true when the
/// tasks to assign changed (the group epoch must be bumped).
fn refresh_topology(sg: &mut StreamsGroup, topics: &dyn TopicLookup) -> bool {
    let Some(topology) = &sg.topology else { return false };
    let snapshot = topics_snapshot(topology, topics);
    if snapshot == sg.topics_snapshot && sg.configured != Default::default() {
        return false;
    }
    let before = (sg.configured.is_ready(), sg.configured.task_counts());
    sg.configured = configure(topology, topics);
    sg.topics_snapshot = snapshot;
    (sg.configured.is_ready(), sg.configured.task_counts()) != before
}

/// Runs the assignor for every member at the group epoch (no tasks while the
/// topology is not ready).
fn compute_target(sg: &mut StreamsGroup, num_standby_replicas: i32) {
    let task_counts = sg.configured.task_counts();
    let members = sg
        .members
        .values()
        .map(|m| {
            (m.member_id.as_str(), if m.process_id.is_empty() { m.member_id.as_str() } else { m.process_id.as_str() })
        })
        .collect();
    let spec = AssignmentSpec { members, task_counts: &task_counts, previous: &sg.target, num_standby_replicas };
    let target = assign(&spec);
    sg.target = target;
    sg.assignment_epoch = sg.group_epoch;
}

/// Kafka's streams `CurrentAssignmentBuilder`: revoke first, then take what is
/// free. `owned` is what the heartbeat says the member owns (`None`:
/// unchanged, so it still owns everything it was given).
fn reconcile(
    sg: &StreamsGroup,
    member: &StreamsMember,
    target_epoch: i32,
    target: &TasksTuple,
    owned: Option<&TasksTuple>,
) -> StreamsMember {
    match member.state {
        MemberState::Stable if member.member_epoch == target_epoch => member.clone(),
        MemberState::Stable | MemberState::UnreleasedPartitions => {
            next_assignment(sg, member, member.member_epoch, target_epoch, target, owned)
        }
        MemberState::UnrevokedPartitions => {
            if owned.is_none_or(|owned| tuple_intersects(&member.pending_revocation, owned)) {
                return member.clone();
            }
            let epoch = (member.member_epoch + 1).min(target_epoch);
            next_assignment(sg, member, epoch, target_epoch, target, owned)
        }
    }
}

fn next_assignment(
    sg: &StreamsGroup,
    member: &StreamsMember,
    revoking_epoch: i32,
    target_epoch: i32,
    target: &TasksTuple,
    owned: Option<&TasksTuple>,
) -> StreamsMember {
    let current = &member.assigned;
    let kept = TasksTuple {
        active: intersection(&current.active, &target.active),
        standby: intersection(&current.standby, &target.standby),
        warmup: intersection(&current.warmup, &target.warmup),
    };
    let revoking = TasksTuple {
        active: difference(&current.active, &target.active),
        standby: difference(&current.standby, &target.standby),
        warmup: difference(&current.warmup, &target.warmup),
    };
    let mut next = member.clone();
    let must_revoke = !revoking.is_empty() && owned.is_none_or(|owned| tuple_intersects(&revoking, owned));
    let (epoch, state, assigned, pending) = if must_revoke {
        // Only what it keeps is sent; it acknowledges the revocation by no
        // longer listing the rest.
        (revoking_epoch, MemberState::UnrevokedPartitions, kept, revoking)
    } else {
        let mut assigned = kept;
        let mut unreleased = false;
        for (id, partitions) in difference(&target.active, &current.active) {
            for p in partitions {
                if sg.active_elsewhere(&member.member_id, &id, p) {
                    unreleased = true;
                } else {
                    assigned.active.entry(id.clone()).or_default().insert(p);
                }
            }
        }
        for (id, partitions) in difference(&target.standby, &current.standby) {
            assigned.standby.entry(id).or_default().extend(partitions);
        }
        for (id, partitions) in difference(&target.warmup, &current.warmup) {
            assigned.warmup.entry(id).or_default().extend(partitions);
        }
        let state = if unreleased { MemberState::UnreleasedPartitions } else { MemberState::Stable };
        (target_epoch, state, assigned, TasksTuple::default())
    };
    if epoch != next.member_epoch {
        next.previous_member_epoch = next.member_epoch;
        next.member_epoch = epoch;
    }
    next.state = state;
    next.assigned = assigned;
    next.pending_revocation = pending;
    next
}

/// What each member with an endpoint serves: the source partitions of its
/// active tasks, and of its standby and warm-up tasks. One entry per member
/// (clients union the entries of one endpoint), as Kafka sends them.
fn endpoint_partitions(sg: &StreamsGroup) -> Vec<EndpointPartitions> {
    let Some(subtopologies) = &sg.configured.subtopologies else { return Vec::new() };
    let partitions = |tasks: &[&Tasks]| {
        let mut out: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for t in tasks {
            for (id, ps) in t.iter() {
                let Some(s) = subtopologies.get(id) else { continue };
                for (topic, &count) in &s.source_partitions {
                    let entry = out.entry(topic.clone()).or_default();
                    entry.extend(ps.iter().copied().filter(|&p| p < count));
                }
            }
        }
        for ps in out.values_mut() {
            ps.sort_unstable();
            ps.dedup();
        }
        out.retain(|_, ps| !ps.is_empty());
        out
    };
    sg.members
        .values()
        .filter_map(|m| {
            let endpoint = m.user_endpoint.clone()?;
            Some(EndpointPartitions {
                endpoint,
                active: partitions(&[&m.assigned.active]),
                standby: partitions(&[&m.assigned.standby, &m.assigned.warmup]),
            })
        })
        .collect()
}

membership::impl_group_member!(StreamsMember);

impl MemberTable for StreamsGroup {
    type Member = StreamsMember;
    type Target = TasksTuple;
    const KIND: &'static str = "streams";

    fn of(group: &Group) -> Option<&Self> {
        group.streams.as_deref()
    }
    fn of_mut(group: &mut Group) -> Option<&mut Self> {
        group.streams.as_deref_mut()
    }
    fn members(&self) -> &BTreeMap<String, StreamsMember> {
        &self.members
    }
    fn static_members(&self) -> &BTreeMap<String, String> {
        &self.static_members
    }
    fn targets_mut(&mut self) -> &mut BTreeMap<String, TasksTuple> {
        &mut self.target
    }
    fn put_member(&mut self, member: StreamsMember) {
        StreamsGroup::put_member(self, member);
    }
    fn remove_member(&mut self, member_id: &str) -> Option<StreamsMember> {
        StreamsGroup::remove_member(self, member_id)
    }
    fn state(&self) -> GroupState {
        StreamsGroup::state(self)
    }
    fn after_fence(&mut self) {
        self.group_epoch += 1;
    }
}
