//! SyncGroup, Heartbeat and LeaveGroup answers and errors.

use kafgres_wire::error_code;

use super::*;

/// Two members answered by the join phase, nobody synced yet.
fn completing(h: &mut H) -> (String, String, i32) {
    let (a, ra) = h.join_new(join_request(""));
    let (b, rb) = h.join_new(join_request(""));
    let answers = h.await_joins(&[unwrap_parked(ra), unwrap_parked(rb)]);
    (a, b, answers[0].generation_id)
}

#[test]
fn followers_are_parked_until_the_leader_syncs() {
    let mut h = H::new();
    let (a, b, generation) = completing(&mut h);
    let parked = unwrap_parked(h.sync(sync_request(&b, generation, &[])));
    // A heartbeat in CompletingRebalance is fine.
    assert_eq!(h.heartbeat(&b, generation), error_code::NONE);
    assert!(h.sync_answer(parked).is_none());
    let leader = unwrap_now(h.sync(sync_request(&a, generation, &[(&b, "for-b"), ("stranger", "x")])));
    // The leader gave itself nothing: it gets an empty assignment.
    assert_eq!(leader.error_code, error_code::NONE);
    assert!(leader.assignment.is_empty());
    let follower = h.sync_answer(parked).unwrap();
    assert_eq!(follower.assignment, Bytes::from_static(b"for-b"));
    assert_eq!(follower.protocol_type.as_deref(), Some("consumer"));
    // A late repeat in Stable returns the stored assignment.
    let repeat = unwrap_now(h.sync(sync_request(&b, generation, &[])));
    assert_eq!(repeat, follower);
}

#[test]
fn sync_errors() {
    let mut h = H::new();
    let (a, b, generation) = completing(&mut h);
    let code = |h: &mut H, request: SyncGroupRequest| unwrap_now(h.sync(request)).error_code;
    assert_eq!(code(&mut h, sync_request(&b, generation + 1, &[])), error_code::ILLEGAL_GENERATION);
    assert_eq!(code(&mut h, sync_request(&b, generation - 1, &[])), error_code::ILLEGAL_GENERATION);
    assert_eq!(code(&mut h, sync_request("ghost", generation, &[])), error_code::UNKNOWN_MEMBER_ID);
    let other_group = SyncGroupRequest { group_id: "other".into(), ..sync_request(&a, generation, &[]) };
    assert_eq!(code(&mut h, other_group), error_code::UNKNOWN_MEMBER_ID);
    let no_group = SyncGroupRequest { group_id: String::new(), ..sync_request(&a, generation, &[]) };
    assert_eq!(code(&mut h, no_group), error_code::INVALID_GROUP_ID);
    let wrong_name = SyncGroupRequest { protocol_name: Some("roundrobin".into()), ..sync_request(&a, generation, &[]) };
    assert_eq!(code(&mut h, wrong_name), error_code::INCONSISTENT_GROUP_PROTOCOL);
    let wrong_type = SyncGroupRequest { protocol_type: Some("connect".into()), ..sync_request(&a, generation, &[]) };
    assert_eq!(code(&mut h, wrong_type), error_code::INCONSISTENT_GROUP_PROTOCOL);
    // Before v5 the fields are absent and not checked.
    let unchecked = SyncGroupRequest { protocol_type: None, protocol_name: None, ..sync_request(&a, generation, &[]) };
    assert_eq!(code(&mut h, unchecked), error_code::NONE);
}

#[test]
fn sync_during_preparing_rebalance_is_told_to_rejoin() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(2);
    unwrap_parked(h.join(join_request(&members[0])));
    let answer = unwrap_now(h.sync(sync_request(&members[1], generation, &[])));
    assert_eq!(answer.error_code, error_code::REBALANCE_IN_PROGRESS);
}

#[test]
fn heartbeat_errors() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(2);
    assert_eq!(h.heartbeat(&members[0], generation), error_code::NONE);
    assert_eq!(h.heartbeat(&members[0], generation + 1), error_code::ILLEGAL_GENERATION);
    assert_eq!(h.heartbeat("ghost", generation), error_code::UNKNOWN_MEMBER_ID);
    let (code, _) = h.c.heartbeat(
        h.now,
        HeartbeatRequest {
            group_id: "other".into(),
            generation_id: 1,
            member_id: members[0].clone(),
            group_instance_id: None,
        },
    );
    assert_eq!(code, error_code::UNKNOWN_MEMBER_ID);
    let (code, _) = h.c.heartbeat(
        h.now,
        HeartbeatRequest {
            group_id: String::new(),
            generation_id: 1,
            member_id: members[0].clone(),
            group_instance_id: None,
        },
    );
    assert_eq!(code, error_code::INVALID_GROUP_ID);
    // An unknown instance id is an unknown member.
    assert_eq!(h.heartbeat_static(&members[0], Some("nobody"), generation), error_code::UNKNOWN_MEMBER_ID);
}

#[test]
fn heartbeat_from_a_member_that_left_is_unknown() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(2);
    h.leave(&[(&members[1], None)]);
    assert_eq!(h.heartbeat(&members[1], generation), error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(h.heartbeat(&members[0], generation), error_code::REBALANCE_IN_PROGRESS);
}

#[test]
fn heartbeats_keep_a_session_alive() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(1);
    for _ in 0..20 {
        h.advance(i64::from(SESSION_MS) - 1);
        assert_eq!(h.heartbeat(&members[0], generation), error_code::NONE);
    }
    assert_eq!(h.state(), Some(GroupState::Stable));
}

#[test]
fn leave_group_in_batch() {
    let mut h = H::new();
    let (members, _) = h.stable_group(3);
    let response = h.leave(&[(&members[0], None), ("ghost", None), (&members[1], None), (&members[1], None)]);
    assert_eq!(response.error_code, error_code::NONE);
    let codes_seen: Vec<i16> = response.members.iter().map(|m| m.error_code).collect();
    assert_eq!(
        codes_seen,
        [error_code::NONE, error_code::UNKNOWN_MEMBER_ID, error_code::NONE, error_code::UNKNOWN_MEMBER_ID]
    );
    assert_eq!(response.members[1].member_id, "ghost");
    // The survivor is the only member, and now leads.
    let answer = unwrap_now(h.join(join_request(&members[2])));
    assert_eq!(answer.leader, members[2]);
}

#[test]
fn leave_of_a_pending_member_and_of_unknown_groups() {
    let mut h = H::new();
    let pending = unwrap_now(h.join(join_request(""))).member_id;
    let response = h.leave(&[(&pending, None)]);
    assert_eq!(response.members[0].error_code, error_code::NONE);
    assert_eq!(unwrap_now(h.join(join_request(&pending))).error_code, error_code::UNKNOWN_MEMBER_ID);

    let request = LeaveGroupRequest { group_id: "other".into(), members: Vec::new() };
    assert_eq!(h.c.leave_group(h.now, request).0.error_code, error_code::UNKNOWN_MEMBER_ID);
    let request = LeaveGroupRequest { group_id: String::new(), members: Vec::new() };
    assert_eq!(h.c.leave_group(h.now, request).0.error_code, error_code::INVALID_GROUP_ID);
}

#[test]
fn leaving_while_parked_in_a_join_answers_the_join() {
    let mut h = H::new();
    let (members, _) = h.stable_group(2);
    let ticket = unwrap_parked(h.join(join_request(&members[0])));
    h.leave(&[(&members[0], None)]);
    let answer = h.join_answer(ticket).unwrap();
    assert_eq!(answer.error_code, error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(answer.member_id, "");
}
