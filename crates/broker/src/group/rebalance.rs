//! The rebalance protocol's transitions, shared by the entry points and the
//! deadline handlers: preparing a rebalance, completing the join phase,
//! propagating assignments, and what each expired deadline does. Kafka's
//! `GroupMetadataManager` names are kept so the two can be read side by side.

use std::collections::HashMap;

use bytes::Bytes;
use kafgres_wire::error_code;

use super::coordinator::Ctx;
use super::model::Group;
use super::timers::{TimerAction, TimerKind};
use super::types::{GroupState, JoinGroupResponse, SyncGroupResponse};

pub(super) fn on_timer(ctx: &mut Ctx, group: &mut Group, kind: &TimerKind, action: TimerAction) {
    match (kind, action) {
        (TimerKind::Session(member_id), TimerAction::ExpireSession) => expire_session(ctx, group, member_id),
        (TimerKind::Join, TimerAction::InitialRebalance { delay_ms, remaining_ms }) => {
            initial_delay_elapsed(ctx, group, delay_ms, remaining_ms)
        }
        (TimerKind::Join, TimerAction::CompleteJoin) if group.state == GroupState::PreparingRebalance => {
            complete_join(ctx, group)
        }
        (TimerKind::Sync, TimerAction::ExpirePendingSync { generation_id }) => {
            expire_pending_sync(ctx, group, generation_id)
        }
        _ => {}
    }
}

/// Removes a member: cancels its session and answers its parked requests
/// with UNKNOWN_MEMBER_ID (so a still-running client rejoins).
pub(super) fn remove_member(ctx: &mut Ctx, group: &mut Group, member_id: &str) {
    ctx.cancel_session(&group.group_id, member_id);
    if let Some(member) = group.member_mut(member_id) {
        ctx.complete_join(member, &JoinGroupResponse::error("", error_code::UNKNOWN_MEMBER_ID));
        ctx.complete_sync(member, &SyncGroupResponse::error(error_code::UNKNOWN_MEMBER_ID));
    }
    group.remove(member_id);
}

pub(super) fn maybe_prepare_rebalance_or_complete_join(ctx: &mut Ctx, group: &mut Group) {
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty => prepare_rebalance(ctx, group),
        _ => maybe_complete_join_phase(ctx, group),
    }
}

pub(super) fn prepare_rebalance(ctx: &mut Ctx, group: &mut Group) {
    if group.state == GroupState::CompletingRebalance {
        reset_and_propagate_assignment_with_error(ctx, group, error_code::REBALANCE_IN_PROGRESS);
    }
    group.pending_sync.clear();
    ctx.cancel(&group.group_id, TimerKind::Sync);

    let is_initial = group.state == GroupState::Empty;
    if is_initial {
        let delay_ms = i64::from(ctx.config.initial_rebalance_delay_ms).max(0);
        let remaining_ms = (group.rebalance_timeout_ms() - delay_ms).max(0);
        let action = TimerAction::InitialRebalance { delay_ms, remaining_ms };
        ctx.schedule(&group.group_id, TimerKind::Join, delay_ms, action);
    }
    group.transition(GroupState::PreparingRebalance, ctx.now_ms);
    if !is_initial {
        if group.has_all_members_joined() {
            complete_join(ctx, group);
        } else {
            let timeout_ms = group.rebalance_timeout_ms();
            ctx.schedule(&group.group_id, TimerKind::Join, timeout_ms, TimerAction::CompleteJoin);
        }
    }
}

/// Completes the join phase once everyone is in, except during the initial
/// delay, which only its deadline ends.
pub(super) fn maybe_complete_join_phase(ctx: &mut Ctx, group: &mut Group) {
    if group.state == GroupState::PreparingRebalance
        && group.previous_state != GroupState::Empty
        && group.has_all_members_joined()
    {
        complete_join(ctx, group);
    }
}

fn initial_delay_elapsed(ctx: &mut Ctx, group: &mut Group, delay_ms: i64, remaining_ms: i64) {
    if group.state != GroupState::PreparingRebalance {
        return;
    }
    if group.new_member_added && remaining_ms != 0 {
        group.new_member_added = false;
        let next_delay_ms = i64::from(ctx.config.initial_rebalance_delay_ms).max(0).min(remaining_ms);
        let next_remaining_ms = (remaining_ms - delay_ms).max(0);
        let action = TimerAction::InitialRebalance { delay_ms: next_delay_ms, remaining_ms: next_remaining_ms };
        ctx.schedule(&group.group_id, TimerKind::Join, next_delay_ms, action);
    } else {
        complete_join(ctx, group);
    }
}

/// Ends the join phase: drops dynamic members that did not rejoin, moves to
/// the next generation and answers every parked JoinGroup (the leader gets
/// the member list), then waits for SyncGroups.
pub(super) fn complete_join(ctx: &mut Ctx, group: &mut Group) {
    let group_id = group.group_id.clone();
    ctx.cancel(&group_id, TimerKind::Join);
    let not_rejoined: Vec<String> = group
        .members
        .iter()
        .filter(|m| !m.awaiting_join() && m.group_instance_id.is_none())
        .map(|m| m.member_id.clone())
        .collect();
    for member_id in &not_rejoined {
        remove_member(ctx, group, member_id);
    }

    if !group.maybe_elect_new_joined_leader() && !group.members.is_empty() {
        // Only static members that did not rejoin are left: wait for them
        // (or for their sessions to expire) one more rebalance timeout.
        let timeout_ms = group.rebalance_timeout_ms();
        ctx.schedule(&group_id, TimerKind::Join, timeout_ms, TimerAction::CompleteJoin);
        return;
    }
    group.init_next_generation(ctx.now_ms);
    if group.state == GroupState::Empty {
        return;
    }

    let leader = group.leader_or_empty();
    let leader_members = group.join_members();
    for member in group.members.iter_mut() {
        let response = JoinGroupResponse {
            error_code: error_code::NONE,
            generation_id: group.generation_id,
            protocol_type: group.protocol_type.clone(),
            protocol_name: group.protocol_name.clone(),
            leader: leader.clone(),
            skip_assignment: false,
            member_id: member.member_id.clone(),
            members: if member.member_id == leader { leader_members.clone() } else { Vec::new() },
        };
        ctx.complete_join(member, &response);
        ctx.schedule_session(&group_id, &member.member_id, member.session_timeout_ms);
        member.is_new = false;
        group.pending_sync.insert(member.member_id.clone());
    }
    let action = TimerAction::ExpirePendingSync { generation_id: group.generation_id };
    ctx.schedule(&group_id, TimerKind::Sync, group.rebalance_timeout_ms(), action);
}

/// The leader's SyncGroup: every member gets its assignment (empty if the
/// leader gave none) and the group becomes Stable.
pub(super) fn set_and_propagate_assignment(ctx: &mut Ctx, group: &mut Group, assignments: HashMap<String, Bytes>) {
    for member in group.members.iter_mut() {
        member.assignment = assignments.get(&member.member_id).cloned().unwrap_or_default();
    }
    propagate_assignment(ctx, group, error_code::NONE);
    group.transition(GroupState::Stable, ctx.now_ms);
}

fn reset_and_propagate_assignment_with_error(ctx: &mut Ctx, group: &mut Group, error_code: i16) {
    for member in group.members.iter_mut() {
        member.assignment = Bytes::new();
    }
    propagate_assignment(ctx, group, error_code);
}

/// Answers parked SyncGroups; a member answered starts a fresh session.
fn propagate_assignment(ctx: &mut Ctx, group: &mut Group, error_code: i16) {
    let (protocol_type, protocol_name) = if error_code == error_code::NONE {
        (group.protocol_type.clone(), group.protocol_name.clone())
    } else {
        (None, None)
    };
    for member in group.members.iter_mut() {
        let response = SyncGroupResponse {
            error_code,
            protocol_type: protocol_type.clone(),
            protocol_name: protocol_name.clone(),
            assignment: member.assignment.clone(),
        };
        if ctx.complete_sync(member, &response) {
            ctx.schedule_session(&group.group_id, &member.member_id, member.session_timeout_ms);
        }
    }
}

/// A member's session ran out. Members parked in a rebalance are kept (the
/// rebalance timeout deals with them) unless they are new.
fn expire_session(ctx: &mut Ctx, group: &mut Group, member_id: &str) {
    if group.pending_join.contains(member_id) {
        group.remove(member_id);
        if group.state == GroupState::PreparingRebalance && group.has_all_members_joined() {
            complete_join(ctx, group);
        }
        return;
    }
    match group.member(member_id) {
        Some(member) if !member.has_satisfied_heartbeat() => {}
        _ => return,
    }
    remove_member(ctx, group, member_id);
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => maybe_prepare_rebalance_or_complete_join(ctx, group),
        GroupState::PreparingRebalance if group.has_all_members_joined() => complete_join(ctx, group),
        _ => {}
    }
}

/// Members that never sent SyncGroup within the rebalance timeout are removed
/// and the group rebalances without them.
fn expire_pending_sync(ctx: &mut Ctx, group: &mut Group, generation_id: i32) {
    if generation_id != group.generation_id
        || !matches!(group.state, GroupState::CompletingRebalance | GroupState::Stable)
        || group.pending_sync.is_empty()
    {
        return;
    }
    let pending: Vec<String> = group.pending_sync.iter().cloned().collect();
    for member_id in &pending {
        remove_member(ctx, group, member_id);
    }
    prepare_rebalance(ctx, group);
}
