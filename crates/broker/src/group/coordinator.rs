//! The coordinator value: the group map, the deadline queue, ticket and
//! member-id generation, and the plumbing shared by every entry point
//! (`Ctx`, the epilogue that keeps the deadline queue honest).

use std::collections::BTreeMap;

use super::consumer::model::ConsumerGroup;
use super::membership;
use super::model::{Group, Member};
use super::rebalance;
use super::streams::model::StreamsGroup;
use super::timers::{TimerAction, TimerKey, TimerKind, Timers};
use super::types::{Effect, GroupState, JoinGroupResponse, SyncGroupResponse, Ticket};
use super::GroupConfig;

/// Every consumer group of the broker; see the module documentation.
#[derive(Debug)]
pub struct GroupCoordinator {
    pub(super) config: GroupConfig,
    pub(super) groups: BTreeMap<String, Group>,
    pub(super) timers: Timers,
    pub(super) ids: MemberIds,
    next_ticket: Ticket,
}

/// How member ids are made: `<client.id or group.instance.id>-<uuid>`.
#[derive(Debug)]
pub(super) enum MemberIds {
    /// Random v4 UUIDs, as Kafka (ids must not be guessable by other clients).
    Random,
    /// A counter shaped like a UUID, for reproducible tests.
    Sequence(u64),
}

impl MemberIds {
    pub fn next(&mut self, prefix: &str) -> String {
        match self {
            MemberIds::Random => format!("{prefix}-{}", uuid::Uuid::new_v4()),
            MemberIds::Sequence(n) => {
                *n += 1;
                format!("{prefix}-00000000-0000-0000-0000-{:012x}", *n)
            }
        }
    }
}

/// What an operation on one group needs besides the group itself.
pub(super) struct Ctx<'a> {
    pub now_ms: i64,
    pub config: &'a GroupConfig,
    pub timers: &'a mut Timers,
    pub ids: &'a mut MemberIds,
    pub effects: &'a mut Vec<Effect>,
}

impl Ctx<'_> {
    pub fn schedule(&mut self, group_id: &str, kind: TimerKind, delay_ms: i64, action: TimerAction) {
        let key = TimerKey { group_id: group_id.to_string(), kind };
        self.timers.schedule(key, self.now_ms.saturating_add(delay_ms.max(0)), action);
    }

    pub fn cancel(&mut self, group_id: &str, kind: TimerKind) {
        self.timers.cancel(&TimerKey { group_id: group_id.to_string(), kind });
    }

    pub fn schedule_session(&mut self, group_id: &str, member_id: &str, timeout_ms: i32) {
        let kind = TimerKind::Session(member_id.to_string());
        self.schedule(group_id, kind, i64::from(timeout_ms), TimerAction::ExpireSession);
    }

    pub fn cancel_session(&mut self, group_id: &str, member_id: &str) {
        self.cancel(group_id, TimerKind::Session(member_id.to_string()));
    }

    /// Answers the member's parked JoinGroup(s); false if none was parked.
    pub fn complete_join(&mut self, member: &mut Member, response: &JoinGroupResponse) -> bool {
        let tickets = std::mem::take(&mut member.join_tickets);
        for &ticket in &tickets {
            self.effects.push(Effect::CompleteJoin { ticket, response: response.clone() });
        }
        !tickets.is_empty()
    }

    /// Answers the member's parked SyncGroup(s); false if none was parked.
    pub fn complete_sync(&mut self, member: &mut Member, response: &SyncGroupResponse) -> bool {
        let tickets = std::mem::take(&mut member.sync_tickets);
        for &ticket in &tickets {
            self.effects.push(Effect::CompleteSync { ticket, response: response.clone() });
        }
        !tickets.is_empty()
    }
}

/// A group's committed offsets, as [`GroupCoordinator::committed_offsets`] copies them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffsets {
    pub group_id: String,
    pub state: GroupState,
    pub members: usize,
    /// (topic, partition, offset)
    pub offsets: Vec<(String, i32, i64)>,
}

impl GroupCoordinator {
    /// A coordinator with random member ids.
    pub fn new(config: GroupConfig) -> GroupCoordinator {
        GroupCoordinator {
            config,
            groups: BTreeMap::new(),
            timers: Timers::default(),
            ids: MemberIds::Random,
            next_ticket: 0,
        }
    }

    /// A coordinator whose member ids are a predictable sequence (tests).
    pub fn with_sequential_member_ids(config: GroupConfig) -> GroupCoordinator {
        GroupCoordinator { ids: MemberIds::Sequence(0), ..GroupCoordinator::new(config) }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// A reload's new group timings; rebalances and sessions already under
    /// way keep the deadlines they were given.
    pub fn set_timings(
        &mut self,
        initial_rebalance_delay_ms: i32,
        consumer_session_timeout_ms: i32,
        consumer_heartbeat_interval_ms: i32,
    ) {
        self.config.initial_rebalance_delay_ms = initial_rebalance_delay_ms;
        self.config.consumer_session_timeout_ms = consumer_session_timeout_ms;
        self.config.consumer_heartbeat_interval_ms = consumer_heartbeat_interval_ms;
    }

    /// The state of a group, `None` if it does not exist.
    pub fn group_state(&self, group_id: &str) -> Option<GroupState> {
        self.groups.get(group_id).map(|g| g.state)
    }

    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Every group's state and committed offsets, groups in id order (the
    /// metrics endpoint's consumer lag).
    pub fn committed_offsets(&self) -> Vec<GroupOffsets> {
        self.groups
            .values()
            .map(|g| GroupOffsets {
                group_id: g.group_id.clone(),
                state: g.state,
                members: g.members.len()
                    + g.consumer.as_ref().map_or(0, |c| c.members.len())
                    + g.streams.as_ref().map_or(0, |s| s.members.len()),
                offsets: g
                    .offsets
                    .iter()
                    .flat_map(|(topic, partitions)| partitions.iter().map(move |(p, v)| (topic.clone(), *p, v.offset)))
                    .collect(),
            })
            .collect()
    }

    /// When `on_deadline` must next be called, if ever.
    pub fn next_deadline(&self) -> Option<i64> {
        self.timers.next_deadline()
    }

    /// Runs every deadline due at `now_ms`. Deadlines these handlers schedule
    /// for `now_ms` or earlier wait for the next call, so this always ends.
    pub fn on_deadline(&mut self, now_ms: i64) -> Vec<Effect> {
        let before = self.timers.next_deadline();
        let seq_limit = self.timers.last_seq();
        let mut effects = Vec::new();
        while let Some((key, action)) = self.timers.pop_due(now_ms, seq_limit) {
            if action == TimerAction::CollectGroup {
                self.collect(&key.group_id);
                continue;
            }
            if action == TimerAction::ExpireOffsets {
                self.expire_offsets(now_ms, &key.group_id, &mut effects);
                self.touch(now_ms, &key.group_id);
                continue;
            }
            let (mut ctx, groups) = self.split(now_ms, &mut effects);
            if let Some(group) = groups.get_mut(&key.group_id) {
                if matches!(action, TimerAction::FenceMember | TimerAction::RevocationTimeout { .. }) {
                    // A group is one kind or the other; the other's call finds no member table.
                    membership::on_deadline::<ConsumerGroup>(&mut ctx, group, &key.kind, action, now_ms);
                    membership::on_deadline::<StreamsGroup>(&mut ctx, group, &key.kind, action, now_ms);
                } else {
                    rebalance::on_timer(&mut ctx, group, &key.kind, action);
                }
            }
            self.touch(now_ms, &key.group_id);
        }
        self.finish(before, &mut effects);
        effects
    }

    pub(super) fn ticket(&mut self) -> Ticket {
        self.next_ticket += 1;
        self.next_ticket
    }

    /// Borrows the group map and the context separately.
    pub(super) fn split<'a>(
        &'a mut self,
        now_ms: i64,
        effects: &'a mut Vec<Effect>,
    ) -> (Ctx<'a>, &'a mut BTreeMap<String, Group>) {
        let ctx = Ctx { now_ms, config: &self.config, timers: &mut self.timers, ids: &mut self.ids, effects };
        (ctx, &mut self.groups)
    }

    /// After any change to a group: an Empty group holding nothing is
    /// collected after `empty_group_retention_ms`; any other keeps no such
    /// timer. An Empty group holding offsets gets a timer for the first of
    /// them to expire.
    pub(super) fn touch(&mut self, now_ms: i64, group_id: &str) {
        let expiry_key = TimerKey { group_id: group_id.to_string(), kind: TimerKind::ExpireOffsets };
        match self.groups.get(group_id).and_then(|g| g.offsets_expire_at(self.config.offsets_retention_ms)) {
            Some(at_ms) => {
                self.timers.cancel(&expiry_key);
                self.timers.schedule(expiry_key, at_ms.max(now_ms), TimerAction::ExpireOffsets);
            }
            None => self.timers.cancel(&expiry_key),
        }
        let key = TimerKey { group_id: group_id.to_string(), kind: TimerKind::Collect };
        match self.groups.get(group_id) {
            Some(group) if group.is_collectable() => {
                if !self.timers.contains(&key) {
                    let at_ms = now_ms.saturating_add(self.config.empty_group_retention_ms.max(0));
                    self.timers.schedule(key, at_ms, TimerAction::CollectGroup);
                }
            }
            Some(_) => self.timers.cancel(&key),
            None => self.timers.cancel_group(group_id),
        }
    }

    /// Drops the offsets of an Empty group that are past retention (KIP-211)
    /// and asks the broker to delete their rows.
    fn expire_offsets(&mut self, now_ms: i64, group_id: &str, effects: &mut Vec<Effect>) {
        let retention = self.config.offsets_retention_ms;
        let Some(group) = self.groups.get_mut(group_id) else { return };
        let expired = group.take_expired_offsets(now_ms, retention);
        if !expired.is_empty() {
            effects.push(Effect::DeleteOffsets { group_id: group_id.to_string(), partitions: expired });
        }
    }

    /// Removes a group that the collection timer found still collectable.
    pub(super) fn collect(&mut self, group_id: &str) {
        if self.groups.get(group_id).is_some_and(Group::is_collectable) {
            self.groups.remove(group_id);
            self.timers.cancel_group(group_id);
        }
    }

    /// Emits `ScheduleDeadline` when the call moved the earliest deadline earlier.
    pub(super) fn finish(&mut self, before: Option<i64>, effects: &mut Vec<Effect>) {
        if let Some(after) = self.timers.next_deadline() {
            if before.is_none_or(|b| after < b) {
                effects.push(Effect::ScheduleDeadline { at_ms: after });
            }
        }
    }
}

/// Takes the answer for `ticket` out of `effects`, if the call produced it.
pub(super) fn take_join(effects: &mut Vec<Effect>, ticket: Ticket) -> Option<JoinGroupResponse> {
    let index = effects.iter().position(|e| matches!(e, Effect::CompleteJoin { ticket: t, .. } if *t == ticket))?;
    match effects.remove(index) {
        Effect::CompleteJoin { response, .. } => Some(response),
        _ => None,
    }
}

/// Takes the answer for `ticket` out of `effects`, if the call produced it.
pub(super) fn take_sync(effects: &mut Vec<Effect>, ticket: Ticket) -> Option<SyncGroupResponse> {
    let index = effects.iter().position(|e| matches!(e, Effect::CompleteSync { ticket: t, .. } if *t == ticket))?;
    match effects.remove(index) {
        Effect::CompleteSync { response, .. } => Some(response),
        _ => None,
    }
}
