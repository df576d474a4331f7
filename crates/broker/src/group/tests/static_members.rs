//! Static membership (KIP-345): restarts without rebalances, and fencing.

use kafgres_wire::error_code;

use super::*;

/// A Stable group of static members "i0", "i1", … assigned "a0", "a1", ….
fn static_group(h: &mut H, n: usize) -> (Vec<String>, i32) {
    let tickets: Vec<Ticket> = (0..n).map(|i| unwrap_parked(h.join(static_join_request(&format!("i{i}"))))).collect();
    let answers = h.await_joins(&tickets);
    let members: Vec<String> = answers.iter().map(|a| a.member_id.clone()).collect();
    let generation = answers[0].generation_id;
    assert!(members[0].starts_with("i0-"));
    let assignments: Vec<(String, String)> =
        members.iter().enumerate().map(|(i, m)| (m.clone(), format!("a{i}"))).collect();
    let refs: Vec<(&str, &str)> = assignments.iter().map(|(m, a)| (m.as_str(), a.as_str())).collect();
    let leader =
        SyncGroupRequest { group_instance_id: Some("i0".into()), ..sync_request(&members[0], generation, &refs) };
    unwrap_now(h.sync(leader));
    for (i, member_id) in members.iter().enumerate().skip(1) {
        let request =
            SyncGroupRequest { group_instance_id: Some(format!("i{i}")), ..sync_request(member_id, generation, &[]) };
        unwrap_now(h.sync(request));
    }
    assert_eq!(h.state(), Some(GroupState::Stable));
    (members, generation)
}

#[test]
fn static_member_restart_gets_its_assignment_back_without_a_rebalance() {
    let mut h = H::new();
    let (members, generation) = static_group(&mut h, 2);
    // i1 restarts: no member id, same instance id and metadata.
    let answer = unwrap_now(h.join(static_join_request("i1")));
    assert_eq!(answer.error_code, error_code::NONE);
    assert_ne!(answer.member_id, members[1]);
    assert_eq!(answer.generation_id, generation);
    assert_eq!(answer.leader, members[0]);
    assert!(answer.members.is_empty());
    assert_eq!(h.state(), Some(GroupState::Stable));
    let request =
        SyncGroupRequest { group_instance_id: Some("i1".into()), ..sync_request(&answer.member_id, generation, &[]) };
    let synced = unwrap_now(h.sync(request));
    assert_eq!(synced.assignment, Bytes::from_static(b"a1"));
    // The leader noticed nothing.
    assert_eq!(h.heartbeat_static(&members[0], Some("i0"), generation), error_code::NONE);
    assert_eq!(h.heartbeat_static(&answer.member_id, Some("i1"), generation), error_code::NONE);
}

#[test]
fn the_replaced_member_id_is_fenced() {
    let mut h = H::new();
    let (members, generation) = static_group(&mut h, 2);
    let old = members[1].clone();
    unwrap_now(h.join(static_join_request("i1")));
    assert_eq!(h.heartbeat_static(&old, Some("i1"), generation), error_code::FENCED_INSTANCE_ID);
    let sync = SyncGroupRequest { group_instance_id: Some("i1".into()), ..sync_request(&old, generation, &[]) };
    assert_eq!(unwrap_now(h.sync(sync)).error_code, error_code::FENCED_INSTANCE_ID);
    let join = JoinGroupRequest { member_id: old.clone(), ..static_join_request("i1") };
    assert_eq!(unwrap_now(h.join(join)).error_code, error_code::FENCED_INSTANCE_ID);
    let leave = h.leave(&[(&old, Some("i1"))]);
    assert_eq!(leave.members[0].error_code, error_code::FENCED_INSTANCE_ID);
    let commit = OffsetCommitRequest {
        api_version: 8,
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: old.clone(),
        group_instance_id: Some("i1".into()),
        topics: vec![OffsetCommitTopic {
            name: "t".into(),
            partitions: vec![OffsetCommitPartition { partition: 0, offset: 1, leader_epoch: -1, metadata: None }],
        }],
    };
    assert_eq!(h.c.offset_commit(h.now, &commit).0.topics[0].1, [(0, error_code::FENCED_INSTANCE_ID)]);
    assert_eq!(h.state(), Some(GroupState::Stable));
}

#[test]
fn static_leader_restart_v9_skips_the_assignment_older_versions_follow() {
    let mut h = H::new();
    let (members, generation) = static_group(&mut h, 2);
    let v9 = unwrap_now(h.join(JoinGroupRequest { api_version: 9, ..static_join_request("i0") }));
    assert_eq!(v9.leader, v9.member_id);
    assert!(v9.skip_assignment);
    assert_eq!(v9.members.len(), 2);
    assert_eq!(v9.generation_id, generation);

    let v5 = unwrap_now(h.join(static_join_request("i0")));
    // Told the previous leader id: it will sync as a follower and keep its assignment.
    assert_eq!(v5.leader, v9.member_id);
    assert!(!v5.skip_assignment);
    assert!(v5.members.is_empty());
    assert_ne!(v5.member_id, members[0]);
    assert_eq!(h.state(), Some(GroupState::Stable));
}

#[test]
fn static_restart_with_a_different_selected_protocol_rebalances() {
    let mut h = H::new();
    let (members, generation) = static_group(&mut h, 1);
    let changed = JoinGroupRequest {
        protocols: vec![protocol("cooperative-sticky", &["t"]), protocol("range", &["t"])],
        ..static_join_request("i0")
    };
    // The only member is the one rejoining: the new generation forms at once.
    let answer = unwrap_now(h.join(changed));
    assert_eq!(h.state(), Some(GroupState::CompletingRebalance));
    assert_eq!(answer.generation_id, generation + 1);
    assert_ne!(answer.member_id, members[0]);
    assert_eq!(answer.protocol_name.as_deref(), Some("cooperative-sticky"));
}

#[test]
fn static_restart_during_a_rebalance_fences_the_old_parked_join() {
    let mut h = H::new();
    let (members, generation) = static_group(&mut h, 2);
    let rejoin = |member_id: &str, instance_id: &str| JoinGroupRequest {
        member_id: member_id.to_string(),
        ..static_join_request(instance_id)
    };
    // A newcomer starts a rebalance; i1's old incarnation rejoins and waits.
    let newcomer = unwrap_parked(h.join(static_join_request("i2")));
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
    let old_ticket = unwrap_parked(h.join(rejoin(&members[1], "i1")));
    let new_ticket = unwrap_parked(h.join(static_join_request("i1")));
    let fenced = h.join_answer(old_ticket).unwrap();
    assert_eq!(fenced.error_code, error_code::FENCED_INSTANCE_ID);
    assert_eq!(fenced.member_id, members[1]);
    let leader = unwrap_now(h.join(rejoin(&members[0], "i0")));
    let restarted = h.join_answer(new_ticket).unwrap();
    assert_eq!((leader.generation_id, restarted.generation_id), (generation + 1, generation + 1));
    assert!(leader.members.iter().any(|m| m.member_id == restarted.member_id));
    assert!(!leader.members.iter().any(|m| m.member_id == members[1]));
    assert_eq!(leader.members.len(), 3);
    assert!(h.join_answer(newcomer).is_some());
}

#[test]
fn static_restart_during_completing_rebalance_fences_the_parked_sync_and_rebalances() {
    let mut h = H::new();
    let (members, generation) = static_group(&mut h, 2);
    let rejoin = |member_id: &str, instance_id: &str| JoinGroupRequest {
        member_id: member_id.to_string(),
        ..static_join_request(instance_id)
    };
    let leader_ticket = unwrap_parked(h.join(rejoin(&members[0], "i0")));
    let follower = unwrap_now(h.join(rejoin(&members[1], "i1")));
    assert_eq!(follower.generation_id, generation + 1);
    assert_eq!(h.join_answer(leader_ticket).map(|a| a.generation_id), Some(generation + 1));
    let parked = unwrap_parked(h.sync(SyncGroupRequest {
        group_instance_id: Some("i1".into()),
        ..sync_request(&members[1], generation + 1, &[])
    }));
    // The leader may be assigning to the old id: the restart starts over.
    let new_ticket = unwrap_parked(h.join(static_join_request("i1")));
    assert_eq!(h.sync_answer(parked).unwrap().error_code, error_code::FENCED_INSTANCE_ID);
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
    let leader_again = unwrap_now(h.join(rejoin(&members[0], "i0")));
    let new_answer = h.join_answer(new_ticket).unwrap();
    assert_eq!(leader_again.generation_id, generation + 2);
    assert!(leader_again.members.iter().any(|m| m.member_id == new_answer.member_id));
}

#[test]
fn static_members_that_do_not_rejoin_are_kept_dynamic_ones_dropped() {
    let mut h = H::new();
    let ticket_s = unwrap_parked(h.join(static_join_request("i0")));
    let (dynamic, reply) = h.join_new(join_request(""));
    let answers = h.await_joins(&[ticket_s, unwrap_parked(reply)]);
    let (static_id, generation) = (answers[0].member_id.clone(), answers[0].generation_id);
    let refs = [(static_id.as_str(), "a0"), (dynamic.as_str(), "a1")];
    unwrap_now(h.sync(SyncGroupRequest {
        group_instance_id: Some("i0".into()),
        ..sync_request(&static_id, generation, &refs)
    }));
    unwrap_now(h.sync(sync_request(&dynamic, generation, &[])));
    // A third member joins; neither old member rejoins before the timeout.
    let (third, reply) = h.join_new(join_request(""));
    let ticket = unwrap_parked(reply);
    for _ in 0..(REBALANCE_MS / 5_000) {
        h.advance(5_000);
        h.heartbeat_static(&static_id, Some("i0"), generation);
        h.heartbeat(&dynamic, generation);
    }
    let answer = h.join_answer(ticket).expect("completed at the rebalance timeout");
    let ids: Vec<&str> = answer.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(answer.leader, third);
    assert!(ids.contains(&static_id.as_str()) && !ids.contains(&dynamic.as_str()), "{ids:?}");
    assert_eq!(h.heartbeat(&dynamic, generation), error_code::UNKNOWN_MEMBER_ID);
}

#[test]
fn admin_removes_a_static_member_by_instance_id() {
    let mut h = H::new();
    let (_, _) = static_group(&mut h, 2);
    let response = h.leave(&[("", Some("i1")), ("", Some("nobody")), ("", None)]);
    let codes_seen: Vec<i16> = response.members.iter().map(|m| m.error_code).collect();
    assert_eq!(codes_seen, [error_code::NONE, error_code::UNKNOWN_MEMBER_ID, error_code::UNKNOWN_MEMBER_ID]);
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
}
