//! Group life cycle: forming, growing, shrinking, timeouts.

use kafgres_wire::error_code;

use super::*;

#[test]
fn two_members_join_and_split() {
    let mut h = H::new();
    let (a, reply_a) = h.join_new(join_request(""));
    let (b, reply_b) = h.join_new(join_request(""));
    let (ticket_a, ticket_b) = (unwrap_parked(reply_a), unwrap_parked(reply_b));

    // The first delay saw a second member: extended once, then complete.
    h.advance(DELAY_MS);
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
    assert!(h.join_answer(ticket_a).is_none());
    h.advance(DELAY_MS);
    assert_eq!(h.state(), Some(GroupState::CompletingRebalance));
    let leader = h.join_answer(ticket_a).expect("leader answered");
    let follower = h.join_answer(ticket_b).expect("follower answered");
    assert_eq!((leader.generation_id, follower.generation_id), (1, 1));
    assert_eq!(leader.leader, a);
    assert_eq!(follower.leader, a);
    assert_eq!(leader.members.iter().map(|m| m.member_id.as_str()).collect::<Vec<_>>(), [a.as_str(), b.as_str()]);
    assert!(follower.members.is_empty());

    // The follower syncs first and waits for the leader's assignment.
    let parked = unwrap_parked(h.sync(sync_request(&b, 1, &[])));
    let leader_sync = unwrap_now(h.sync(sync_request(&a, 1, &[(&a, "p0,p1,p2"), (&b, "p3,p4,p5")])));
    assert_eq!(leader_sync.assignment, Bytes::from_static(b"p0,p1,p2"));
    assert_eq!(leader_sync.protocol_name.as_deref(), Some("range"));
    let follower_sync = h.sync_answer(parked).expect("follower completed");
    assert_eq!(follower_sync.error_code, error_code::NONE);
    assert_eq!(follower_sync.assignment, Bytes::from_static(b"p3,p4,p5"));
    assert_eq!(h.state(), Some(GroupState::Stable));
    assert_eq!(h.heartbeat(&a, 1), error_code::NONE);
    assert_eq!(h.heartbeat(&b, 1), error_code::NONE);
}

#[test]
fn initial_rebalance_delay_holds_a_new_group() {
    let mut h = H::new();
    let start = h.now;
    let (_, reply) = h.join_new(join_request(""));
    let ticket = unwrap_parked(reply);
    assert_eq!(h.c.next_deadline(), Some(start + DELAY_MS));
    h.advance(DELAY_MS - 1);
    assert!(h.join_answer(ticket).is_none());
    h.advance(1);
    assert_eq!(h.join_answer(ticket).unwrap().generation_id, 1);
}

#[test]
fn initial_delay_extends_while_members_arrive_but_not_past_the_rebalance_timeout() {
    let mut h = H::new();
    let start = h.now;
    let short = |member_id: &str| JoinGroupRequest { rebalance_timeout_ms: 5_000, ..join_request(member_id) };
    let (_, first) = h.join_new(short(""));
    h.advance(1_000);
    let (_, second) = h.join_new(short(""));
    // At 3000 a member had arrived: extend by min(3000, 5000 - 3000).
    h.advance(2_000);
    assert_eq!(h.c.next_deadline(), Some(start + 5_000));
    h.advance(1_000);
    let (_, third) = h.join_new(short(""));
    // At 5000 the rebalance timeout is used up: complete despite the newcomer.
    h.advance(1_000);
    let tickets = [unwrap_parked(first), unwrap_parked(second), unwrap_parked(third)];
    let answers: Vec<_> = tickets.iter().map(|&t| h.join_answer(t).expect("answered at 5000")).collect();
    assert_eq!(answers[0].members.len(), 3);
}

#[test]
fn initial_delay_of_zero_completes_on_the_next_deadline_call() {
    let config = GroupConfig { initial_rebalance_delay_ms: 0, ..GroupConfig::default() };
    let mut h = H::with_config(config);
    let (_, reply) = h.join_new(join_request(""));
    let ticket = unwrap_parked(reply);
    assert_eq!(h.c.next_deadline(), Some(h.now));
    h.advance(0);
    assert_eq!(h.join_answer(ticket).unwrap().error_code, error_code::NONE);
}

#[test]
fn third_member_triggers_a_rebalance() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(2);
    let (c, reply) = h.join_new(join_request(""));
    let ticket_c = unwrap_parked(reply);
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
    // No initial delay now: the others learn through their heartbeats.
    assert_eq!(h.heartbeat(&members[0], generation), error_code::REBALANCE_IN_PROGRESS);
    assert_eq!(h.heartbeat(&members[1], generation), error_code::REBALANCE_IN_PROGRESS);
    let ticket_a = unwrap_parked(h.join(join_request(&members[0])));
    assert!(h.join_answer(ticket_c).is_none());
    let answer_b = unwrap_now(h.join(join_request(&members[1])));
    assert_eq!(answer_b.generation_id, generation + 1);
    let answer_a = h.join_answer(ticket_a).unwrap();
    let answer_c = h.join_answer(ticket_c).unwrap();
    assert_eq!(answer_a.members.len(), 3);
    assert_eq!(answer_c.leader, members[0]);
    assert_eq!(answer_c.member_id, c);
    assert_eq!(h.state(), Some(GroupState::CompletingRebalance));
}

#[test]
fn members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(2);
    let ticket = unwrap_parked(h.join(join_request(&members[0])));
    // The second member keeps heartbeating but never rejoins.
    for _ in 0..(REBALANCE_MS / 5_000) - 1 {
        h.advance(5_000);
        assert_eq!(h.heartbeat(&members[1], generation), error_code::REBALANCE_IN_PROGRESS);
    }
    assert!(h.join_answer(ticket).is_none());
    h.advance(5_000);
    let answer = h.join_answer(ticket).expect("completed at the rebalance timeout");
    assert_eq!(answer.members.len(), 1);
    assert_eq!(h.heartbeat(&members[1], generation), error_code::UNKNOWN_MEMBER_ID);
}

#[test]
fn leader_that_does_not_rejoin_is_replaced() {
    let mut h = H::new();
    let (members, _) = h.stable_group(2);
    // The follower rejoins with a new subscription; the leader stays silent.
    let changed = JoinGroupRequest { protocols: vec![protocol("range", &["t", "u"])], ..join_request(&members[1]) };
    let ticket = unwrap_parked(h.join(changed));
    h.advance(i64::from(REBALANCE_MS));
    let answer = h.join_answer(ticket).unwrap();
    assert_eq!(answer.leader, members[1]);
    assert_eq!(answer.members.len(), 1);
}

#[test]
fn a_member_leaves_and_the_rest_rebalance() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(3);
    let left = h.leave(&[(&members[2], None)]);
    assert_eq!(left.error_code, error_code::NONE);
    assert_eq!(left.members[0].error_code, error_code::NONE);
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
    let ticket = unwrap_parked(h.join(join_request(&members[0])));
    let answer = unwrap_now(h.join(join_request(&members[1])));
    assert_eq!(answer.generation_id, generation + 1);
    assert_eq!(h.join_answer(ticket).unwrap().members.len(), 2);
}

#[test]
fn leader_leaving_hands_leadership_to_the_next_member() {
    let mut h = H::new();
    let (members, _) = h.stable_group(2);
    h.leave(&[(&members[0], None)]);
    let answer = unwrap_now(h.join(join_request(&members[1])));
    assert_eq!(answer.leader, members[1]);
    assert_eq!(answer.members.len(), 1);
}

#[test]
fn session_expiry_removes_the_member_and_rebalances() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(2);
    // Only the first member keeps heartbeating.
    for _ in 0..3 {
        h.advance(3_000);
        assert_eq!(h.heartbeat(&members[0], generation), error_code::NONE);
    }
    assert_eq!(h.state(), Some(GroupState::Stable));
    h.advance(1_000); // 10 s after the second member's last sign of life.
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
    assert_eq!(h.heartbeat(&members[0], generation), error_code::REBALANCE_IN_PROGRESS);
    assert_eq!(h.heartbeat(&members[1], generation), error_code::UNKNOWN_MEMBER_ID);
    let answer = unwrap_now(h.join(join_request(&members[0])));
    assert_eq!(answer.generation_id, generation + 1);
    assert_eq!(answer.members.len(), 1);
}

#[test]
fn last_member_leaving_empties_the_group() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(1);
    h.leave(&[(&members[0], None)]);
    assert_eq!(h.state(), Some(GroupState::Empty));
    let described = h.c.describe_groups(5, &[GROUP.to_string()]).remove(0);
    assert_eq!(described.protocol_type, "consumer");
    assert!(described.members.is_empty());
    // The member is gone: its commits are refused.
    let commit = OffsetCommitRequest {
        api_version: 8,
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: members[0].clone(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            name: "t".into(),
            partitions: vec![OffsetCommitPartition { partition: 0, offset: 5, leader_epoch: -1, metadata: None }],
        }],
    };
    let (response, effects) = h.c.offset_commit(h.now, &commit);
    assert_eq!(response.topics[0].1, [(0, error_code::UNKNOWN_MEMBER_ID)]);
    assert!(effects.is_empty());
}

#[test]
fn follower_that_never_syncs_is_removed_after_the_rebalance_timeout() {
    let mut h = H::new();
    let (a, ra) = h.join_new(join_request(""));
    let (b, rb) = h.join_new(join_request(""));
    let answers = h.await_joins(&[unwrap_parked(ra), unwrap_parked(rb)]);
    let generation = answers[0].generation_id;
    unwrap_now(h.sync(sync_request(&a, generation, &[(&a, "x"), (&b, "y")])));
    assert_eq!(h.state(), Some(GroupState::Stable));
    // b heartbeats (so its session lives) but never sends SyncGroup.
    for _ in 0..(REBALANCE_MS / 5_000) - 1 {
        h.advance(5_000);
        assert_eq!(h.heartbeat(&a, generation), error_code::NONE);
        assert_eq!(h.heartbeat(&b, generation), error_code::NONE);
    }
    h.advance(5_000);
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
    assert_eq!(h.heartbeat(&b, generation), error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(h.heartbeat(&a, generation), error_code::REBALANCE_IN_PROGRESS);
}

#[test]
fn rejoin_in_completing_rebalance_with_same_metadata_repeats_the_answer() {
    let mut h = H::new();
    let (a, ra) = h.join_new(join_request(""));
    let (b, rb) = h.join_new(join_request(""));
    let answers = h.await_joins(&[unwrap_parked(ra), unwrap_parked(rb)]);
    let again = unwrap_now(h.join(join_request(&a)));
    assert_eq!(again, answers[0]);
    let again = unwrap_now(h.join(join_request(&b)));
    assert_eq!(again, answers[1]);
    assert_eq!(h.state(), Some(GroupState::CompletingRebalance));
}

#[test]
fn new_metadata_during_completing_rebalance_restarts_it_and_releases_parked_syncs() {
    let mut h = H::new();
    let (a, ra) = h.join_new(join_request(""));
    let (b, rb) = h.join_new(join_request(""));
    let answers = h.await_joins(&[unwrap_parked(ra), unwrap_parked(rb)]);
    let parked = unwrap_parked(h.sync(sync_request(&b, answers[1].generation_id, &[])));
    let changed = JoinGroupRequest { protocols: vec![protocol("range", &["t", "u"])], ..join_request(&a) };
    let ticket_a = unwrap_parked(h.join(changed));
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
    assert_eq!(h.sync_answer(parked).unwrap().error_code, error_code::REBALANCE_IN_PROGRESS);
    let answer_b = unwrap_now(h.join(join_request(&b)));
    assert_eq!(answer_b.generation_id, 2);
    let answer_a = h.join_answer(ticket_a).unwrap();
    assert_eq!(answer_a.members[0].metadata, subscription(&["t", "u"]));
}

#[test]
fn leader_rejoining_a_stable_group_forces_a_rebalance_follower_does_not() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(2);
    let same = unwrap_now(h.join(join_request(&members[1])));
    assert_eq!(same.generation_id, generation);
    assert_eq!(h.state(), Some(GroupState::Stable));
    unwrap_parked(h.join(join_request(&members[0])));
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
}
