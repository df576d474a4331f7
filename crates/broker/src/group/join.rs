//! JoinGroup: new dynamic members (KIP-394's MEMBER_ID_REQUIRED round trip),
//! new and restarting static members (KIP-345), and known members rejoining.

use kafgres_wire::error_code;

use super::coordinator::{take_join, Ctx, GroupCoordinator};
use super::model::{Group, Member};
use super::rebalance::{maybe_complete_join_phase, maybe_prepare_rebalance_or_complete_join, prepare_rebalance};
use super::types::{Effect, GroupState, JoinGroupRequest, JoinGroupResponse, Reply, Ticket};

/// JoinGroup v4+ must rejoin with the member id the coordinator hands out.
const MEMBER_ID_REQUIRED_VERSION_MIN: i16 = 4;
/// JoinGroup v9+ lets a rejoining static leader skip the assignment.
const SKIP_ASSIGNMENT_VERSION_MIN: i16 = 9;

impl GroupCoordinator {
    pub fn join_group(&mut self, now_ms: i64, request: JoinGroupRequest) -> (Reply<JoinGroupResponse>, Vec<Effect>) {
        let before = self.next_deadline();
        let ticket = self.ticket();
        let mut effects = Vec::new();
        let immediate = self.join_inner(now_ms, ticket, &request, &mut effects);
        self.touch(now_ms, &request.group_id);
        self.finish(before, &mut effects);
        let reply = match immediate.or_else(|| take_join(&mut effects, ticket)) {
            Some(response) => Reply::Now(response),
            None => Reply::Parked(ticket),
        };
        (reply, effects)
    }

    fn join_inner(
        &mut self,
        now_ms: i64,
        ticket: Ticket,
        request: &JoinGroupRequest,
        effects: &mut Vec<Effect>,
    ) -> Option<JoinGroupResponse> {
        if request.group_id.is_empty() {
            return Some(JoinGroupResponse::error(&request.member_id, error_code::INVALID_GROUP_ID));
        }
        if request.session_timeout_ms < self.config.session_timeout_ms_min
            || request.session_timeout_ms > self.config.session_timeout_ms_max
        {
            return Some(JoinGroupResponse::error(&request.member_id, error_code::INVALID_SESSION_TIMEOUT));
        }
        let is_unknown_member = request.member_id.is_empty();
        if !self.groups.contains_key(&request.group_id) {
            if !is_unknown_member {
                return Some(JoinGroupResponse::error(&request.member_id, error_code::UNKNOWN_MEMBER_ID));
            }
            self.groups.insert(request.group_id.clone(), Group::new(&request.group_id, now_ms));
        }
        if let Some(group) = self.groups.get_mut(&request.group_id) {
            match group.consumer.as_deref() {
                // No mixed groups: a classic member cannot join a consumer
                // group that has members (Kafka can migrate online).
                Some(cg) if !cg.members.is_empty() => {
                    return Some(JoinGroupResponse::error(&request.member_id, error_code::INCONSISTENT_GROUP_PROTOCOL));
                }
                Some(_) => group.become_classic_group(now_ms),
                None => {}
            }
            match group.streams.as_deref() {
                // Nor a streams group with members; an empty one becomes
                // classic, as in Kafka.
                Some(sg) if !sg.members.is_empty() => {
                    return Some(JoinGroupResponse::error(&request.member_id, error_code::INCONSISTENT_GROUP_PROTOCOL));
                }
                Some(_) => {
                    group.streams = None;
                    group.protocol_type = None;
                    group.transition(GroupState::Empty, now_ms);
                }
                None => {}
            }
        }
        let (mut ctx, groups) = self.split(now_ms, effects);
        let Some(group) = groups.get_mut(&request.group_id) else {
            return Some(JoinGroupResponse::error(&request.member_id, error_code::UNKNOWN_SERVER_ERROR));
        };

        if !accepts_joining_member(group, &request.member_id, ctx.config.group_members_max) {
            // Kafka drops a known member that no longer fits.
            super::rebalance::remove_member(&mut ctx, group, &request.member_id);
            return Some(JoinGroupResponse::error("", error_code::GROUP_MAX_SIZE_REACHED));
        }
        if is_unknown_member {
            join_new_member(&mut ctx, group, request, ticket)
        } else {
            join_existing_member(&mut ctx, group, request, ticket)
        }
    }
}

/// Kafka's `acceptJoiningMember`: while rebalancing, members already waiting
/// are in and new ones count against the waiting members; otherwise against
/// the group's size.
fn accepts_joining_member(group: &Group, member_id: &str, members_max: usize) -> bool {
    match group.state {
        GroupState::Empty
        | GroupState::Dead
        | GroupState::Assigning
        | GroupState::Reconciling
        | GroupState::NotReady => true,
        GroupState::PreparingRebalance => {
            group.member(member_id).is_some_and(|m| m.awaiting_join()) || group.awaiting_join_count() < members_max
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            group.has_member(member_id) || group.members.len() < members_max
        }
    }
}

fn join_new_member(
    ctx: &mut Ctx,
    group: &mut Group,
    request: &JoinGroupRequest,
    ticket: Ticket,
) -> Option<JoinGroupResponse> {
    if !group.supports_protocols(&request.protocol_type, &request.protocols) {
        return Some(JoinGroupResponse::error(&request.member_id, error_code::INCONSISTENT_GROUP_PROTOCOL));
    }
    let prefix = request.group_instance_id.as_deref().unwrap_or(&request.client_id);
    let member_id = ctx.ids.next(prefix);
    match &request.group_instance_id {
        Some(instance_id) => match group.static_members.get(instance_id).cloned() {
            Some(old_member_id) => replace_static_member(ctx, group, request, &old_member_id, member_id, ticket),
            None => add_member(ctx, group, request, member_id, ticket),
        },
        None if request.api_version >= MEMBER_ID_REQUIRED_VERSION_MIN => {
            // KIP-394: remember the id, expect the member back within its session.
            group.pending_join.insert(member_id.clone());
            ctx.schedule_session(&group.group_id, &member_id, request.session_timeout_ms);
            Some(JoinGroupResponse::error(&member_id, error_code::MEMBER_ID_REQUIRED))
        }
        None => add_member(ctx, group, request, member_id, ticket),
    }
}

fn join_existing_member(
    ctx: &mut Ctx,
    group: &mut Group,
    request: &JoinGroupRequest,
    ticket: Ticket,
) -> Option<JoinGroupResponse> {
    let member_id = request.member_id.as_str();
    if !group.supports_protocols(&request.protocol_type, &request.protocols) {
        return Some(JoinGroupResponse::error(member_id, error_code::INCONSISTENT_GROUP_PROTOCOL));
    }
    if group.pending_join.contains(member_id) {
        if request.group_instance_id.is_some() {
            // Pending ids are only handed to dynamic members (Kafka: IllegalStateException).
            return Some(JoinGroupResponse::error(member_id, error_code::UNKNOWN_SERVER_ERROR));
        }
        return add_member(ctx, group, request, member_id.to_string(), ticket);
    }
    if let Err(code) = group.validate_member(member_id, request.group_instance_id.as_deref()) {
        return Some(JoinGroupResponse::error(member_id, code));
    }
    let same_metadata = group.member(member_id).is_some_and(|m| m.protocols == request.protocols);
    match group.state {
        GroupState::PreparingRebalance => update_member(ctx, group, request, ticket),
        GroupState::CompletingRebalance if same_metadata => {
            // It probably missed the join response: send it again.
            Some(current_generation(group, member_id, group.is_leader(member_id)))
        }
        GroupState::Stable if same_metadata && !group.is_leader(member_id) => {
            Some(current_generation(group, member_id, false))
        }
        // New metadata, or the leader asking for a rebalance (e.g. topic changes).
        GroupState::CompletingRebalance | GroupState::Stable => update_member(ctx, group, request, ticket),
        GroupState::Empty
        | GroupState::Dead
        | GroupState::Assigning
        | GroupState::Reconciling
        | GroupState::NotReady => Some(JoinGroupResponse::error(member_id, error_code::UNKNOWN_MEMBER_ID)),
    }
}

/// The current generation as a join response.
fn current_generation(group: &Group, member_id: &str, with_members: bool) -> JoinGroupResponse {
    JoinGroupResponse {
        error_code: error_code::NONE,
        generation_id: group.generation_id,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader: group.leader_or_empty(),
        skip_assignment: false,
        member_id: member_id.to_string(),
        members: if with_members { group.join_members() } else { Vec::new() },
    }
}

/// Adds a member with its join parked, then rebalances or completes the join.
fn add_member(
    ctx: &mut Ctx,
    group: &mut Group,
    request: &JoinGroupRequest,
    member_id: String,
    ticket: Ticket,
) -> Option<JoinGroupResponse> {
    if group.state == GroupState::PreparingRebalance && group.previous_state == GroupState::Empty {
        group.new_member_added = true;
    }
    group.add(Member {
        member_id: member_id.clone(),
        group_instance_id: request.group_instance_id.clone(),
        client_id: request.client_id.clone(),
        client_host: request.client_host.clone(),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        session_timeout_ms: request.session_timeout_ms,
        protocol_type: request.protocol_type.clone(),
        protocols: request.protocols.clone(),
        assignment: Default::default(),
        join_tickets: vec![ticket],
        sync_tickets: Vec::new(),
        is_new: true,
    });
    // A parked new member cannot heartbeat; bound how long it may wait.
    ctx.schedule_session(&group.group_id, &member_id, ctx.config.new_member_join_timeout_ms);
    maybe_prepare_rebalance_or_complete_join(ctx, group);
    None
}

/// Takes the member's new protocols and timeouts and parks its join.
fn update_member(
    ctx: &mut Ctx,
    group: &mut Group,
    request: &JoinGroupRequest,
    ticket: Ticket,
) -> Option<JoinGroupResponse> {
    let Some(member) = group.member_mut(&request.member_id) else {
        return Some(JoinGroupResponse::error(&request.member_id, error_code::UNKNOWN_MEMBER_ID));
    };
    member.protocols = request.protocols.clone();
    member.rebalance_timeout_ms = request.rebalance_timeout_ms;
    member.session_timeout_ms = request.session_timeout_ms;
    member.join_tickets.push(ticket);
    maybe_prepare_rebalance_or_complete_join(ctx, group);
    None
}

/// A static member rejoins with no member id (a restart): the new id takes
/// over the old member, whose parked requests are fenced. In a Stable group
/// whose selected protocol would not change, the member is answered at once
/// and keeps its assignment: no rebalance.
fn replace_static_member(
    ctx: &mut Ctx,
    group: &mut Group,
    request: &JoinGroupRequest,
    old_member_id: &str,
    new_member_id: String,
    ticket: Ticket,
) -> Option<JoinGroupResponse> {
    let old_leader = group.leader_or_empty();
    let group_id = group.group_id.clone();
    let Some(member) = group.member_mut(old_member_id) else {
        return Some(JoinGroupResponse::error("", error_code::UNKNOWN_MEMBER_ID));
    };
    let fenced_join = JoinGroupResponse::error(old_member_id, error_code::FENCED_INSTANCE_ID);
    ctx.complete_join(member, &fenced_join);
    ctx.complete_sync(member, &super::types::SyncGroupResponse::error(error_code::FENCED_INSTANCE_ID));
    member.member_id = new_member_id.clone();
    member.protocols = request.protocols.clone();
    member.rebalance_timeout_ms = request.rebalance_timeout_ms;
    member.session_timeout_ms = request.session_timeout_ms;
    member.join_tickets.push(ticket);
    member.is_new = false;
    let session_timeout_ms = member.session_timeout_ms;
    if let Some(instance_id) = &request.group_instance_id {
        group.static_members.insert(instance_id.clone(), new_member_id.clone());
    }
    if group.is_leader(old_member_id) {
        group.leader_id = Some(new_member_id.clone());
    }
    if group.pending_sync.remove(old_member_id) {
        group.pending_sync.insert(new_member_id.clone());
    }
    ctx.cancel_session(&group_id, old_member_id);
    ctx.schedule_session(&group_id, &new_member_id, session_timeout_ms);

    match group.state {
        GroupState::Stable if group.select_protocol() == group.protocol_name => {
            if let Some(member) = group.member_mut(&new_member_id) {
                member.join_tickets.retain(|&t| t != ticket);
            }
            let mut response = current_generation(group, &new_member_id, false);
            if request.api_version >= SKIP_ASSIGNMENT_VERSION_MIN {
                // The leader learns it leads, with the members, but keeps the assignment.
                let is_leader = group.is_leader(&new_member_id);
                response.skip_assignment = is_leader;
                if is_leader {
                    response.members = group.join_members();
                }
            } else {
                // Older leaders are told the old leader id, so they act as followers.
                response.leader = old_leader;
            }
            return Some(response);
        }
        GroupState::Stable => maybe_prepare_rebalance_or_complete_join(ctx, group),
        // The leader may already be assigning to the old id: start over.
        GroupState::CompletingRebalance => prepare_rebalance(ctx, group),
        _ => maybe_complete_join_phase(ctx, group),
    }
    None
}
