//! SyncGroup, Heartbeat and LeaveGroup.

use std::collections::HashMap;

use kafgres_wire::error_code;

use super::coordinator::{take_sync, Ctx, GroupCoordinator};
use super::model::Group;
use super::rebalance::{
    maybe_complete_join_phase, maybe_prepare_rebalance_or_complete_join, remove_member, set_and_propagate_assignment,
};
use super::timers::TimerKind;
use super::types::{
    Effect, GroupState, HeartbeatRequest, LeaveGroupRequest, LeaveGroupResponse, LeftMember, Reply, SyncGroupRequest,
    SyncGroupResponse, Ticket,
};

impl GroupCoordinator {
    /// Followers are parked until the leader's SyncGroup brings the assignment.
    pub fn sync_group(&mut self, now_ms: i64, request: SyncGroupRequest) -> (Reply<SyncGroupResponse>, Vec<Effect>) {
        let before = self.next_deadline();
        let ticket = self.ticket();
        let mut effects = Vec::new();
        let group_id = request.group_id.clone();
        let immediate = self.sync_inner(now_ms, ticket, request, &mut effects);
        self.touch(now_ms, &group_id);
        self.finish(before, &mut effects);
        let reply = match immediate.or_else(|| take_sync(&mut effects, ticket)) {
            Some(response) => Reply::Now(response),
            None => Reply::Parked(ticket),
        };
        (reply, effects)
    }

    fn sync_inner(
        &mut self,
        now_ms: i64,
        ticket: Ticket,
        request: SyncGroupRequest,
        effects: &mut Vec<Effect>,
    ) -> Option<SyncGroupResponse> {
        if request.group_id.is_empty() {
            return Some(SyncGroupResponse::error(error_code::INVALID_GROUP_ID));
        }
        let (mut ctx, groups) = self.split(now_ms, effects);
        let Some(group) = groups.get_mut(&request.group_id) else {
            return Some(SyncGroupResponse::error(error_code::UNKNOWN_MEMBER_ID));
        };
        if let Err(code) = validate_sync(group, &request) {
            return Some(SyncGroupResponse::error(code));
        }
        let member_id = request.member_id.as_str();
        match group.state {
            GroupState::PreparingRebalance => Some(SyncGroupResponse::error(error_code::REBALANCE_IN_PROGRESS)),
            GroupState::CompletingRebalance => {
                let Some(member) = group.member_mut(member_id) else {
                    return Some(SyncGroupResponse::error(error_code::UNKNOWN_MEMBER_ID));
                };
                member.sync_tickets.push(ticket);
                remove_pending_sync_member(&mut ctx, group, member_id);
                if group.is_leader(member_id) {
                    let assignments: HashMap<_, _> = request.assignments.into_iter().collect();
                    set_and_propagate_assignment(&mut ctx, group, assignments);
                }
                None
            }
            GroupState::Stable => {
                remove_pending_sync_member(&mut ctx, group, member_id);
                let Some(member) = group.member(member_id) else {
                    return Some(SyncGroupResponse::error(error_code::UNKNOWN_MEMBER_ID));
                };
                Some(SyncGroupResponse {
                    error_code: error_code::NONE,
                    protocol_type: group.protocol_type.clone(),
                    protocol_name: group.protocol_name.clone(),
                    assignment: member.assignment.clone(),
                })
            }
            GroupState::Empty
            | GroupState::Dead
            | GroupState::Assigning
            | GroupState::Reconciling
            | GroupState::NotReady => Some(SyncGroupResponse::error(error_code::UNKNOWN_MEMBER_ID)),
        }
    }

    /// Keeps a member's session alive; tells it when to rejoin.
    pub fn heartbeat(&mut self, now_ms: i64, request: HeartbeatRequest) -> (i16, Vec<Effect>) {
        let before = self.next_deadline();
        let mut effects = Vec::new();
        let (mut ctx, groups) = self.split(now_ms, &mut effects);
        let error_code = if request.group_id.is_empty() {
            error_code::INVALID_GROUP_ID
        } else if let Some(group) = groups.get_mut(&request.group_id) {
            match group.validate_member(&request.member_id, request.group_instance_id.as_deref()) {
                Err(code) => code,
                Ok(()) if request.generation_id != group.generation_id => error_code::ILLEGAL_GENERATION,
                Ok(()) => {
                    let timeout_ms = group.member(&request.member_id).map_or(0, |m| m.session_timeout_ms);
                    ctx.schedule_session(&group.group_id, &request.member_id, timeout_ms);
                    match group.state {
                        GroupState::PreparingRebalance => error_code::REBALANCE_IN_PROGRESS,
                        GroupState::CompletingRebalance | GroupState::Stable => error_code::NONE,
                        GroupState::Empty
                        | GroupState::Dead
                        | GroupState::Assigning
                        | GroupState::Reconciling
                        | GroupState::NotReady => error_code::UNKNOWN_MEMBER_ID,
                    }
                }
            }
        } else {
            error_code::UNKNOWN_MEMBER_ID
        };
        self.finish(before, &mut effects);
        (error_code, effects)
    }

    /// Removes members by id, or static members by instance id alone (admin).
    pub fn leave_group(&mut self, now_ms: i64, request: LeaveGroupRequest) -> (LeaveGroupResponse, Vec<Effect>) {
        let before = self.next_deadline();
        let mut effects = Vec::new();
        let (mut ctx, groups) = self.split(now_ms, &mut effects);
        let response = if request.group_id.is_empty() {
            LeaveGroupResponse { error_code: error_code::INVALID_GROUP_ID, members: Vec::new() }
        } else if let Some(group) = groups.get_mut(&request.group_id) {
            let mut results = Vec::with_capacity(request.members.len());
            for leaving in &request.members {
                let error_code = if leaving.member_id.is_empty() {
                    match leaving.group_instance_id.as_ref().and_then(|i| group.static_members.get(i)).cloned() {
                        Some(member_id) => {
                            remove_member(&mut ctx, group, &member_id);
                            error_code::NONE
                        }
                        None => error_code::UNKNOWN_MEMBER_ID,
                    }
                } else if group.pending_join.contains(&leaving.member_id) {
                    group.remove(&leaving.member_id);
                    ctx.cancel_session(&request.group_id, &leaving.member_id);
                    error_code::NONE
                } else {
                    match group.validate_member(&leaving.member_id, leaving.group_instance_id.as_deref()) {
                        Ok(()) => {
                            remove_member(&mut ctx, group, &leaving.member_id);
                            error_code::NONE
                        }
                        Err(code) => code,
                    }
                };
                results.push(LeftMember {
                    member_id: leaving.member_id.clone(),
                    group_instance_id: leaving.group_instance_id.clone(),
                    error_code,
                });
            }
            if results.iter().any(|r| r.error_code == error_code::NONE) {
                match group.state {
                    GroupState::Stable | GroupState::CompletingRebalance => {
                        maybe_prepare_rebalance_or_complete_join(&mut ctx, group)
                    }
                    GroupState::PreparingRebalance => maybe_complete_join_phase(&mut ctx, group),
                    _ => {}
                }
            }
            LeaveGroupResponse { error_code: error_code::NONE, members: results }
        } else {
            LeaveGroupResponse { error_code: error_code::UNKNOWN_MEMBER_ID, members: Vec::new() }
        };
        self.touch(now_ms, &request.group_id);
        self.finish(before, &mut effects);
        (response, effects)
    }
}

/// Kafka's `validateSyncGroup`: member, generation, then (v5+) protocol type and name.
fn validate_sync(group: &Group, request: &SyncGroupRequest) -> Result<(), i16> {
    group.validate_member(&request.member_id, request.group_instance_id.as_deref())?;
    if request.generation_id != group.generation_id {
        return Err(error_code::ILLEGAL_GENERATION);
    }
    let inconsistent =
        |asked: &Option<String>, actual: &Option<String>| matches!((asked, actual), (Some(a), Some(b)) if a != b);
    if inconsistent(&request.protocol_type, &group.protocol_type)
        || inconsistent(&request.protocol_name, &group.protocol_name)
    {
        return Err(error_code::INCONSISTENT_GROUP_PROTOCOL);
    }
    Ok(())
}

/// The member has synced; once every member has, the sync deadline goes.
fn remove_pending_sync_member(ctx: &mut Ctx, group: &mut Group, member_id: &str) {
    group.pending_sync.remove(member_id);
    let all_synced = group.pending_sync.is_empty();
    let in_sync_phase = matches!(group.state, GroupState::CompletingRebalance | GroupState::Stable);
    if all_synced || !in_sync_phase {
        ctx.cancel(&group.group_id, TimerKind::Sync);
    }
}
