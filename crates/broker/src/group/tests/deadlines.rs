//! The deadline queue as the broker sees it: `next_deadline`,
//! `ScheduleDeadline` effects, `on_deadline`, and no leaked timers.

use kafgres_wire::error_code;

use super::super::timers::{TimerAction, TimerKey, TimerKind, Timers};
use super::*;

fn scheduled(effects: &[Effect]) -> Vec<i64> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::ScheduleDeadline { at_ms } => Some(*at_ms),
            _ => None,
        })
        .collect()
}

#[test]
fn next_deadline_follows_the_group_through_its_life() {
    let mut h = H::new();
    assert_eq!(h.c.next_deadline(), None);
    let start = h.now;
    // A pending member: its session.
    let (first, effects) = h.c.join_group(h.now, join_request(""));
    assert_eq!(scheduled(&effects), [start + i64::from(SESSION_MS)]);
    let member_id = unwrap_now(first).member_id;
    // Joined: the initial delay comes first.
    let (_, effects) = h.c.join_group(h.now, join_request(&member_id));
    assert_eq!(scheduled(&effects), [start + DELAY_MS]);
    assert_eq!(h.c.next_deadline(), Some(start + DELAY_MS));
    // Join complete: sessions (10 s) come before the sync deadline (60 s).
    h.advance(DELAY_MS);
    assert_eq!(h.c.next_deadline(), Some(start + DELAY_MS + i64::from(SESSION_MS)));
    // A heartbeat moves the deadline later: no ScheduleDeadline.
    h.advance(1_000);
    let (code, effects) = h.c.heartbeat(
        h.now,
        HeartbeatRequest {
            group_id: GROUP.into(),
            generation_id: 1,
            member_id: member_id.clone(),
            group_instance_id: None,
        },
    );
    assert_eq!(code, error_code::NONE);
    assert!(scheduled(&effects).is_empty());
    assert_eq!(h.c.next_deadline(), Some(h.now + i64::from(SESSION_MS)));
    // Silence: the session expires, the group empties, and is collected later.
    h.advance(i64::from(SESSION_MS));
    assert_eq!(h.state(), Some(GroupState::Empty));
    let collect_at = h.now + h.c.config().empty_group_retention_ms;
    assert_eq!(h.c.next_deadline(), Some(collect_at));
    h.advance(h.c.config().empty_group_retention_ms - 1);
    assert_eq!(h.state(), Some(GroupState::Empty));
    h.advance(1);
    assert_eq!(h.state(), None);
    assert_eq!(h.c.next_deadline(), None);
    assert_eq!(h.c.timers.len(), 0);
}

#[test]
fn on_deadline_before_the_deadline_does_nothing() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(2);
    let deadline = h.c.next_deadline().unwrap();
    let effects = h.c.on_deadline(deadline - 1);
    assert!(effects.is_empty());
    assert_eq!(h.c.next_deadline(), Some(deadline));
    assert_eq!(h.heartbeat(&members[0], generation), error_code::NONE);
}

#[test]
fn a_joining_group_schedules_earlier_than_a_collectable_one() {
    let mut h = H::new();
    let start = h.now;
    let pending = unwrap_now(h.join(join_request(""))).member_id;
    h.leave(&[(&pending, None)]);
    // Nothing left but the collection deadline.
    assert_eq!(h.c.next_deadline(), Some(start + h.c.config().empty_group_retention_ms));
    let (_, effects) = h.c.join_group(h.now, join_request(""));
    assert_eq!(scheduled(&effects), [start + i64::from(SESSION_MS)]);
}

#[test]
fn no_timers_leak_once_every_group_is_gone() {
    let mut h = H::new();
    let (members, _) = h.stable_group(3);
    let ids: Vec<(&str, Option<&str>)> = members.iter().map(|m| (m.as_str(), None)).collect();
    h.leave(&ids);
    assert_eq!(h.state(), Some(GroupState::Empty));
    // Only the collection timer is left.
    assert_eq!(h.c.timers.len(), 1);
    h.c.delete_groups(h.now, &[GROUP.into()]);
    assert_eq!(h.c.timers.len(), 0);
}

#[test]
fn on_deadline_always_terminates_on_zero_timeouts() {
    let config = GroupConfig { initial_rebalance_delay_ms: 0, ..GroupConfig::default() };
    let mut h = H::with_config(config);
    let zero = |member_id: &str| JoinGroupRequest { rebalance_timeout_ms: 0, ..join_request(member_id) };
    let (_, reply) = h.join_new(zero(""));
    let ticket = unwrap_parked(reply);
    let (_, reply) = h.join_new(zero(""));
    let second = unwrap_parked(reply);
    // The second member extends nothing: both answered on the first call.
    h.advance(0);
    assert!(h.join_answer(ticket).is_some() && h.join_answer(second).is_some());
}

#[test]
fn timers_replace_cancel_and_pop_in_order() {
    let mut timers = Timers::default();
    let key = |group: &str, kind: TimerKind| TimerKey { group_id: group.into(), kind };
    timers.schedule(key("a", TimerKind::Join), 30, TimerAction::CompleteJoin);
    timers.schedule(key("a", TimerKind::Session("m".into())), 10, TimerAction::ExpireSession);
    timers.schedule(key("b", TimerKind::Sync), 20, TimerAction::ExpirePendingSync { generation_id: 1 });
    // Rescheduling replaces.
    timers.schedule(key("a", TimerKind::Session("m".into())), 25, TimerAction::ExpireSession);
    assert_eq!((timers.len(), timers.next_deadline()), (3, Some(20)));
    let limit = timers.last_seq();
    timers.schedule(key("c", TimerKind::Collect), 0, TimerAction::CollectGroup);
    // Entries newer than the limit wait for the next round.
    assert_eq!(timers.pop_due(25, limit).map(|(k, _)| k.group_id), Some("b".into()));
    assert_eq!(timers.pop_due(25, limit).map(|(k, _)| k.kind), Some(TimerKind::Session("m".into())));
    assert_eq!(timers.pop_due(25, limit), None);
    assert_eq!(timers.pop_due(25, timers.last_seq()).map(|(k, _)| k.group_id), Some("c".into()));
    timers.cancel_group("a");
    assert_eq!((timers.len(), timers.next_deadline()), (0, None));
}
