//! ConsumerGroupHeartbeat: join, heartbeat, leave, and the deadlines that
//! fence members that stop heartbeating or never revoke.

use std::collections::{BTreeMap, BTreeSet};

use kafgres_wire::error_code;
use uuid::Uuid;

use super::assignor::{assign, AssignmentSpec};
use super::model::{is_subset, ConsumerGroup, ConsumerMember, ASSIGNORS};
use super::reconcile::reconcile;
use super::types::*;
use crate::group::coordinator::GroupCoordinator;
use crate::group::membership::{self, ensure_room, refuse, take_over_static, Leave, MemberTable, Refusal};
use crate::group::model::{Group, CONSUMER_PROTOCOL_TYPE};
use crate::group::types::{Effect, GroupState};

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`.
fn validate(request: &ConsumerHeartbeatRequest) -> Result<(), Refusal> {
    let empty = |s: &Option<String>| s.as_deref().is_some_and(|s| s.trim().is_empty());
    if request.group_id.trim().is_empty() {
        return refuse(error_code::INVALID_REQUEST, "GroupId can't be empty.");
    }
    if empty(&request.instance_id) {
        return refuse(error_code::INVALID_REQUEST, "InstanceId can't be empty.");
    }
    if empty(&request.rack_id) {
        return refuse(error_code::INVALID_REQUEST, "RackId can't be empty.");
    }
    let member_id_required = request.api_version >= 1 || request.member_epoch != JOIN_MEMBER_EPOCH;
    if member_id_required && request.member_id.trim().is_empty() {
        return refuse(error_code::INVALID_REQUEST, "MemberId can't be empty.");
    }
    match request.member_epoch {
        JOIN_MEMBER_EPOCH => {
            if request.rebalance_timeout_ms == -1 {
                return refuse(error_code::INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.");
            }
            if request.owned_partitions.as_ref().is_none_or(|owned| owned.values().any(|p| !p.is_empty())) {
                return refuse(error_code::INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.");
            }
            if request.subscribed_topic_names.is_none() && request.subscribed_topic_regex.is_none() {
                return refuse(
                    error_code::INVALID_REQUEST,
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        }
        LEAVE_STATIC_MEMBER_EPOCH if request.instance_id.is_none() => {
            return refuse(error_code::INVALID_REQUEST, "InstanceId can't be null.");
        }
        epoch if epoch > 0 || epoch == LEAVE_MEMBER_EPOCH || epoch == LEAVE_STATIC_MEMBER_EPOCH => {}
        _ => return refuse(error_code::INVALID_REQUEST, "MemberEpoch is invalid."),
    }
    if let Some(assignor) = &request.server_assignor {
        if !ASSIGNORS.contains(&assignor.as_str()) {
            return refuse(
                error_code::UNSUPPORTED_ASSIGNOR,
                format!("ServerAssignor {assignor} is not supported. Supported assignors: {}.", ASSIGNORS.join(", ")),
            );
        }
    }
    if let Some(regex) = &request.subscribed_topic_regex {
        compile(regex).map_err(|e| {
            (
                error_code::INVALID_REGULAR_EXPRESSION,
                format!("SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}."),
            )
        })?;
    }
    Ok(())
}

/// Kafka matches the whole topic name.
fn compile(regex: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{regex})$"))
}

fn resolve_regex(topics: &dyn TopicLookup, regex: &str) -> Vec<String> {
    match compile(regex) {
        Ok(re) => topics.topic_names().into_iter().filter(|name| re.is_match(name)).collect(),
        Err(_) => Vec::new(),
    }
}

impl GroupCoordinator {
    /// One ConsumerGroupHeartbeat (join, heartbeat or leave).
    pub fn consumer_group_heartbeat(
        &mut self,
        now_ms: i64,
        request: ConsumerHeartbeatRequest,
        topics: &dyn TopicLookup,
    ) -> (ConsumerHeartbeatResponse, Vec<Effect>) {
        let before = self.next_deadline();
        let mut effects = Vec::new();
        let result = validate(&request).and_then(|()| match request.member_epoch {
            LEAVE_MEMBER_EPOCH | LEAVE_STATIC_MEMBER_EPOCH => self.consumer_leave(now_ms, &request, &mut effects),
            _ => self.consumer_heartbeat(now_ms, request.clone(), topics, &mut effects),
        });
        let response = result.unwrap_or_else(|(code, message)| ConsumerHeartbeatResponse::error(code, message));
        self.touch(now_ms, &request.group_id);
        self.finish(before, &mut effects);
        (response, effects)
    }

    /// No consumer group `group_id`, and no classic group with members:
    /// what this coordinator holds after a start for a group whose members
    /// were consuming before it.
    fn forgot_consumer_group(&self, group_id: &str) -> bool {
        match self.groups.get(group_id) {
            None => true,
            Some(group) => {
                group.consumer.is_none()
                    && group.state == GroupState::Empty
                    && group.members.is_empty()
                    && group.pending_join.is_empty()
            }
        }
    }

    /// The consumer group `group_id`, created (or converted from an empty
    /// classic group) when `create` is set.
    fn consumer_group_mut(&mut self, now_ms: i64, group_id: &str, create: bool) -> Result<&mut Group, Refusal> {
        if !self.groups.contains_key(group_id) {
            if !create {
                return refuse(error_code::GROUP_ID_NOT_FOUND, format!("Group {group_id} not found."));
            }
            self.groups.insert(group_id.to_string(), Group::new(group_id, now_ms));
        }
        let group = self.groups.get_mut(group_id).ok_or((error_code::UNKNOWN_SERVER_ERROR, String::new()))?;
        if group.consumer.is_none() {
            let empty_classic = group.streams.is_none()
                && group.state == GroupState::Empty
                && group.members.is_empty()
                && group.pending_join.is_empty();
            if !(create && empty_classic) {
                return refuse(error_code::GROUP_ID_NOT_FOUND, format!("Group {group_id} is not a consumer group."));
            }
            group.become_consumer_group(now_ms);
        }
        Ok(group)
    }

    fn consumer_heartbeat(
        &mut self,
        now_ms: i64,
        mut request: ConsumerHeartbeatRequest,
        topics: &dyn TopicLookup,
        effects: &mut Vec<Effect>,
    ) -> Result<ConsumerHeartbeatResponse, Refusal> {
        let joining = request.member_epoch == JOIN_MEMBER_EPOCH;
        if request.member_id.is_empty() {
            request.member_id = kafka_uuid_string(Uuid::new_v4());
        }
        let members_max = self.config.group_members_max;
        let session_ms = self.config.consumer_session_timeout_ms;
        let heartbeat_interval_ms = self.config.consumer_heartbeat_interval_ms;
        if !joining && self.forgot_consumer_group(&request.group_id) {
            // Membership is not persisted (docs/conformance.md): after a
            // restart or a failover a member comes back to a group this
            // coordinator does not know, or knows only by its committed
            // offsets. Kafka would have replayed the group and fenced the
            // member; GROUP_ID_NOT_FOUND would be fatal to the client, while
            // UNKNOWN_MEMBER_ID makes it rejoin with epoch 0.
            return refuse(
                error_code::UNKNOWN_MEMBER_ID,
                format!("Member {} is not a member of group {}.", request.member_id, request.group_id),
            );
        }
        self.consumer_group_mut(now_ms, &request.group_id, joining)?;
        let (mut ctx, groups) = self.split(now_ms, effects);
        let group = groups.get_mut(&request.group_id).ok_or((error_code::UNKNOWN_SERVER_ERROR, String::new()))?;
        let cg = group.consumer.as_deref_mut().ok_or((error_code::UNKNOWN_SERVER_ERROR, String::new()))?;

        let (member, is_new) = find_or_create_member(cg, &request, members_max)?;
        let mut updated = member.clone();
        if request.instance_id.is_some() {
            updated.instance_id = request.instance_id.clone();
        }
        if request.rack_id.is_some() {
            updated.rack_id = request.rack_id.clone();
        }
        if request.rebalance_timeout_ms != -1 {
            updated.rebalance_timeout_ms = request.rebalance_timeout_ms;
        }
        if request.server_assignor.is_some() {
            updated.server_assignor = request.server_assignor.clone();
        }
        if let Some(names) = &request.subscribed_topic_names {
            let mut names: Vec<String> = names.iter().filter(|n| !n.is_empty()).cloned().collect();
            names.sort();
            names.dedup();
            updated.subscribed_topic_names = names;
        }
        if let Some(regex) = &request.subscribed_topic_regex {
            updated.subscribed_topic_regex = (!regex.is_empty()).then(|| regex.clone());
        }
        updated.client_id = request.client_id.clone();
        updated.client_host = request.client_host.clone();

        let mut bump = cg.group_epoch == 0
            || is_new
            || updated.subscribed_topic_names != member.subscribed_topic_names
            || updated.subscribed_topic_regex != member.subscribed_topic_regex;
        cg.put_member(updated.clone());
        bump |= refresh_subscribed_topics(cg, topics);
        if bump {
            cg.group_epoch += 1;
        }
        if cg.group_epoch > cg.assignment_epoch {
            compute_target(cg, topics);
        }
        let target = cg.target.get(&updated.member_id).cloned().unwrap_or_default();
        let reconciled = reconcile(cg, &updated, cg.assignment_epoch, &target, request.owned_partitions.as_ref());
        let member_id = reconciled.member_id.clone();

        membership::schedule_deadlines(&mut ctx, &request.group_id, &member, &reconciled, session_ms);

        let full_request = request.rebalance_timeout_ms != -1
            && (request.subscribed_topic_names.is_some() || request.subscribed_topic_regex.is_some())
            && request.owned_partitions.is_some();
        let send_assignment = joining || full_request || reconciled.assigned != member.assigned || is_new;
        let response = ConsumerHeartbeatResponse {
            error_code: error_code::NONE,
            error_message: None,
            member_id: Some(member_id),
            member_epoch: reconciled.member_epoch,
            heartbeat_interval_ms,
            assignment: send_assignment.then(|| reconciled.assigned.clone()),
        };
        cg.put_member(reconciled);
        membership::refresh_state::<ConsumerGroup>(group, now_ms);
        Ok(response)
    }

    fn consumer_leave(
        &mut self,
        now_ms: i64,
        request: &ConsumerHeartbeatRequest,
        effects: &mut Vec<Effect>,
    ) -> Result<ConsumerHeartbeatResponse, Refusal> {
        self.consumer_group_mut(now_ms, &request.group_id, false)?;
        let (mut ctx, groups) = self.split(now_ms, effects);
        let group = groups.get_mut(&request.group_id).ok_or((error_code::UNKNOWN_SERVER_ERROR, String::new()))?;
        let leave = Leave {
            group_id: &request.group_id,
            member_id: &request.member_id,
            instance_id: request.instance_id.as_deref(),
            member_epoch: request.member_epoch,
        };
        let member_id = membership::leave::<ConsumerGroup>(&mut ctx, group, &leave, now_ms)?;
        Ok(ConsumerHeartbeatResponse {
            error_code: error_code::NONE,
            error_message: None,
            member_id: Some(member_id),
            member_epoch: request.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }
}

/// Kafka's `getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember`.
fn find_or_create_member(
    cg: &mut ConsumerGroup,
    request: &ConsumerHeartbeatRequest,
    members_max: usize,
) -> Result<(ConsumerMember, bool), Refusal> {
    let joining = request.member_epoch == JOIN_MEMBER_EPOCH;
    if let Some(instance_id) = &request.instance_id {
        let existing = cg.static_members.get(instance_id).and_then(|id| cg.members.get(id)).cloned();
        if joining {
            return match existing {
                None => match cg.members.get(&request.member_id) {
                    Some(member) => Ok((member.clone(), false)),
                    None => {
                        ensure_room(cg, members_max)?;
                        Ok((ConsumerMember::new(&request.member_id), true))
                    }
                },
                Some(old) if old.member_epoch != LEAVE_STATIC_MEMBER_EPOCH => refuse(
                    error_code::UNRELEASED_INSTANCE_ID,
                    format!("Static member {} with instance id {instance_id} is not released yet.", old.member_id),
                ),
                Some(old) => Ok((take_over_static(cg, &old, &request.member_id), false)),
            };
        }
        let Some(existing) = existing else {
            return refuse(error_code::UNKNOWN_MEMBER_ID, format!("Instance id {instance_id} is unknown."));
        };
        if existing.member_id != request.member_id {
            return refuse(
                error_code::FENCED_INSTANCE_ID,
                format!(
                    "Static member {} with instance id {instance_id} was fenced by member {}.",
                    request.member_id, existing.member_id
                ),
            );
        }
        check_epoch(&existing, request)?;
        return Ok((existing, false));
    }
    match cg.members.get(&request.member_id) {
        Some(member) if joining => Ok((member.clone(), false)),
        Some(member) => {
            check_epoch(member, request)?;
            Ok((member.clone(), false))
        }
        None if joining => {
            ensure_room(cg, members_max)?;
            Ok((ConsumerMember::new(&request.member_id), true))
        }
        None => refuse(
            error_code::UNKNOWN_MEMBER_ID,
            format!("Member {} is not a member of group {}.", request.member_id, request.group_id),
        ),
    }
}

/// Kafka's `throwIfMemberEpochIsInvalid`: an epoch ahead is fenced; the
/// previous epoch is accepted when the member owns no more than it was given
/// (the answer that bumped it may have been lost).
fn check_epoch(member: &ConsumerMember, request: &ConsumerHeartbeatRequest) -> Result<(), Refusal> {
    let received = request.member_epoch;
    let fenced = received > member.member_epoch
        || (received < member.member_epoch
            && (received != member.previous_member_epoch
                || !request.owned_partitions.as_ref().is_some_and(|owned| is_subset(owned, &member.assigned))));
    if fenced {
        return refuse(
            error_code::FENCED_MEMBER_EPOCH,
            format!(
                "The consumer group member has a member epoch ({received}) that does not match the coordinator's ({}).",
                member.member_epoch
            ),
        );
    }
    Ok(())
}

/// Forgets the topics no remaining member subscribes to, as a refresh with
/// unchanged topics would (so the next heartbeat does not bump again).
fn prune_subscribed_topics(cg: &mut ConsumerGroup) {
    let regexes: Vec<regex::Regex> = cg
        .members
        .values()
        .filter_map(|m| m.subscribed_topic_regex.as_deref())
        .filter_map(|r| compile(r).ok())
        .collect();
    let names: BTreeSet<String> = cg.members.values().flat_map(|m| m.subscribed_topic_names.iter().cloned()).collect();
    cg.subscribed_topics.retain(|name, _| names.contains(name) || regexes.iter().any(|re| re.is_match(name)));
}

/// Re-reads the partitions of every subscribed topic; true if they changed.
fn refresh_subscribed_topics(cg: &mut ConsumerGroup, topics: &dyn TopicLookup) -> bool {
    let names = cg.subscribed_names(|regex| resolve_regex(topics, regex));
    let current: BTreeMap<String, (Uuid, i32)> =
        names.into_iter().filter_map(|name| topics.topic(&name).map(|meta| (name, meta))).collect();
    if current == cg.subscribed_topics {
        return false;
    }
    cg.subscribed_topics = current;
    true
}

/// Runs the group's assignor for every member at the group epoch.
fn compute_target(cg: &mut ConsumerGroup, topics: &dyn TopicLookup) {
    let mut regex_cache: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let subscriptions: BTreeMap<String, BTreeSet<Uuid>> = cg
        .members
        .values()
        .map(|m| {
            let mut names: BTreeSet<String> = m.subscribed_topic_names.iter().cloned().collect();
            if let Some(regex) = &m.subscribed_topic_regex {
                let matched = regex_cache.entry(regex.clone()).or_insert_with(|| resolve_regex(topics, regex));
                names.extend(matched.iter().cloned());
            }
            let ids = names.iter().filter_map(|n| cg.subscribed_topics.get(n).map(|(id, _)| *id)).collect();
            (m.member_id.clone(), ids)
        })
        .collect();
    let partitions: BTreeMap<Uuid, i32> = cg.subscribed_topics.values().copied().collect();
    let assignor = cg.preferred_assignor();
    let spec = AssignmentSpec { subscriptions: &subscriptions, partitions: &partitions, previous: &cg.target };
    cg.target = assign(&assignor, &spec);
    cg.assignment_epoch = cg.group_epoch;
}

/// Kafka's `Uuid.toString()`: URL-safe base64 without padding.
pub(in crate::group) fn kafka_uuid_string(uuid: Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = uuid.as_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

impl Group {
    /// An empty classic group (or a new one) becomes a consumer group; its
    /// committed offsets stay.
    pub(in crate::group) fn become_consumer_group(&mut self, now_ms: i64) {
        self.consumer = Some(Box::default());
        self.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_string());
        self.protocol_name = None;
        self.leader_id = None;
        self.static_members.clear();
        self.subscribed_topics = None;
        self.transition(GroupState::Empty, now_ms);
    }

    /// An empty consumer group becomes classic again; its offsets stay.
    pub(in crate::group) fn become_classic_group(&mut self, now_ms: i64) {
        self.consumer = None;
        self.protocol_type = None;
        self.transition(GroupState::Empty, now_ms);
    }
}

membership::impl_group_member!(ConsumerMember);

impl MemberTable for ConsumerGroup {
    type Member = ConsumerMember;
    type Target = Assignment;
    const KIND: &'static str = "consumer";

    fn of(group: &Group) -> Option<&Self> {
        group.consumer.as_deref()
    }
    fn of_mut(group: &mut Group) -> Option<&mut Self> {
        group.consumer.as_deref_mut()
    }
    fn members(&self) -> &BTreeMap<String, ConsumerMember> {
        &self.members
    }
    fn static_members(&self) -> &BTreeMap<String, String> {
        &self.static_members
    }
    fn targets_mut(&mut self) -> &mut BTreeMap<String, Assignment> {
        &mut self.target
    }
    fn put_member(&mut self, member: ConsumerMember) {
        ConsumerGroup::put_member(self, member);
    }
    fn remove_member(&mut self, member_id: &str) -> Option<ConsumerMember> {
        ConsumerGroup::remove_member(self, member_id)
    }
    fn state(&self) -> GroupState {
        ConsumerGroup::state(self)
    }
    fn after_fence(&mut self) {
        self.group_epoch += 1;
        prune_subscribed_topics(self);
    }
}
