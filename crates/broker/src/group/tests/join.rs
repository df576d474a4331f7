//! JoinGroup: validation, KIP-394, protocol selection, the group size limit.

use kafgres_wire::error_code;

use super::*;

#[test]
fn member_id_required_round_trip() {
    let mut h = H::new();
    let first = unwrap_now(h.join(join_request("")));
    assert_eq!(first.error_code, error_code::MEMBER_ID_REQUIRED);
    assert!(first.member_id.starts_with("client-"), "{}", first.member_id);
    assert_eq!(first.generation_id, -1);
    // The group exists, still Empty, with the id pending.
    assert_eq!(h.state(), Some(GroupState::Empty));

    let ticket = unwrap_parked(h.join(join_request(&first.member_id)));
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
    let answer = h.await_joins(&[ticket]).remove(0);
    assert_eq!(answer.error_code, error_code::NONE);
    assert_eq!(answer.member_id, first.member_id);
    assert_eq!(answer.leader, first.member_id);
    assert_eq!(answer.generation_id, 1);
    assert_eq!(answer.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(answer.protocol_name.as_deref(), Some("range"));
    assert_eq!(answer.members.len(), 1);
    assert_eq!(answer.members[0].metadata, subscription(&["t"]));
    assert_eq!(h.state(), Some(GroupState::CompletingRebalance));
}

#[test]
fn join_v3_without_member_id_is_added_at_once() {
    let mut h = H::new();
    let ticket = unwrap_parked(h.join(JoinGroupRequest { api_version: 3, ..join_request("") }));
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
    let answer = h.await_joins(&[ticket]).remove(0);
    assert_eq!(answer.error_code, error_code::NONE);
    assert!(answer.member_id.starts_with("client-"));
}

#[test]
fn session_timeout_must_be_within_broker_bounds() {
    let mut h = H::new();
    for session_timeout_ms in [5_999, 1_800_001] {
        let answer = unwrap_now(h.join(JoinGroupRequest { session_timeout_ms, ..join_request("") }));
        assert_eq!(answer.error_code, error_code::INVALID_SESSION_TIMEOUT);
    }
    for session_timeout_ms in [6_000, 1_800_000] {
        let answer = unwrap_now(h.join(JoinGroupRequest { session_timeout_ms, ..join_request("") }));
        assert_eq!(answer.error_code, error_code::MEMBER_ID_REQUIRED);
    }
}

#[test]
fn empty_group_id_is_invalid() {
    let mut h = H::new();
    let answer = unwrap_now(h.join(JoinGroupRequest { group_id: String::new(), ..join_request("") }));
    assert_eq!(answer.error_code, error_code::INVALID_GROUP_ID);
    assert_eq!(h.c.group_count(), 0);
}

#[test]
fn known_member_id_for_unknown_group_is_unknown_member() {
    let mut h = H::new();
    let answer = unwrap_now(h.join(join_request("ghost")));
    assert_eq!(answer.error_code, error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(answer.member_id, "ghost");
    assert_eq!(h.c.group_count(), 0);
    // Also for an existing group that does not know the id.
    h.join_new(join_request(""));
    let answer = unwrap_now(h.join(join_request("ghost")));
    assert_eq!(answer.error_code, error_code::UNKNOWN_MEMBER_ID);
}

#[test]
fn inconsistent_protocols_are_refused() {
    let mut h = H::new();
    let empty_type = JoinGroupRequest { protocol_type: String::new(), ..join_request("") };
    assert_eq!(unwrap_now(h.join(empty_type)).error_code, error_code::INCONSISTENT_GROUP_PROTOCOL);
    let no_protocols = JoinGroupRequest { protocols: Vec::new(), ..join_request("") };
    assert_eq!(unwrap_now(h.join(no_protocols)).error_code, error_code::INCONSISTENT_GROUP_PROTOCOL);

    h.join_new(join_request(""));
    let other_type = JoinGroupRequest { protocol_type: "connect".into(), ..join_request("") };
    assert_eq!(unwrap_now(h.join(other_type)).error_code, error_code::INCONSISTENT_GROUP_PROTOCOL);
    let other_protocol = JoinGroupRequest { protocols: vec![protocol("roundrobin", &["t"])], ..join_request("") };
    assert_eq!(unwrap_now(h.join(other_protocol)).error_code, error_code::INCONSISTENT_GROUP_PROTOCOL);
    // One shared protocol is enough.
    let shared = JoinGroupRequest {
        protocols: vec![protocol("roundrobin", &["t"]), protocol("range", &["t"])],
        ..join_request("")
    };
    assert_eq!(unwrap_now(h.join(shared)).error_code, error_code::MEMBER_ID_REQUIRED);
}

#[test]
fn protocol_is_the_most_voted_one_all_members_support() {
    let mut h = H::new();
    let both = |first: &str, second: &str| JoinGroupRequest {
        protocols: vec![protocol(first, &["t"]), protocol(second, &["t"])],
        ..join_request("")
    };
    let (_, a) = h.join_new(both("range", "cooperative-sticky"));
    let (_, b) = h.join_new(both("cooperative-sticky", "range"));
    let (_, c) = h.join_new(both("cooperative-sticky", "range"));
    let answers = h.await_joins(&[unwrap_parked(a), unwrap_parked(b), unwrap_parked(c)]);
    assert!(answers.iter().all(|a| a.protocol_name.as_deref() == Some("cooperative-sticky")));
}

#[test]
fn protocol_vote_tie_goes_to_the_leaders_preference() {
    let mut h = H::new();
    let both = |first: &str, second: &str| JoinGroupRequest {
        protocols: vec![protocol(first, &["t"]), protocol(second, &["t"])],
        ..join_request("")
    };
    let (_, a) = h.join_new(both("range", "roundrobin"));
    let (_, b) = h.join_new(both("roundrobin", "range"));
    let answers = h.await_joins(&[unwrap_parked(a), unwrap_parked(b)]);
    assert!(answers.iter().all(|a| a.protocol_name.as_deref() == Some("range")));
}

#[test]
fn protocol_no_longer_supported_by_all_members_is_not_selected() {
    let mut h = H::new();
    let (_, a) = h.join_new(JoinGroupRequest {
        protocols: vec![protocol("roundrobin", &["t"]), protocol("range", &["t"])],
        ..join_request("")
    });
    let (_, b) = h.join_new(join_request(""));
    let answers = h.await_joins(&[unwrap_parked(a), unwrap_parked(b)]);
    assert!(answers.iter().all(|a| a.protocol_name.as_deref() == Some("range")));
}

#[test]
fn group_max_size_refuses_extra_members() {
    let config = GroupConfig { group_members_max: 2, ..GroupConfig::default() };
    let mut h = H::with_config(config);
    let (_, a) = h.join_new(join_request(""));
    let (_, b) = h.join_new(join_request(""));
    // A third member is refused before it even gets an id.
    let refused = unwrap_now(h.join(join_request("")));
    assert_eq!(refused.error_code, error_code::GROUP_MAX_SIZE_REACHED);
    assert_eq!(refused.member_id, "");
    let answers = h.await_joins(&[unwrap_parked(a), unwrap_parked(b)]);
    assert_eq!(answers[0].members.len(), 2);
    // Once the group is formed, new members are counted against its size.
    let new = unwrap_now(h.join(JoinGroupRequest { api_version: 3, ..join_request("") }));
    assert_eq!(new.error_code, error_code::GROUP_MAX_SIZE_REACHED);
}

#[test]
fn pending_member_that_never_rejoins_expires_with_its_session() {
    let mut h = H::new();
    let pending = unwrap_now(h.join(join_request(""))).member_id;
    h.advance(i64::from(SESSION_MS) - 1);
    // Still pending: its rejoin is accepted...
    let (other, reply) = h.join_new(join_request(""));
    let ticket = unwrap_parked(reply);
    h.advance(1);
    // ...but now it is gone.
    let late = unwrap_now(h.join(join_request(&pending)));
    assert_eq!(late.error_code, error_code::UNKNOWN_MEMBER_ID);
    let answer = h.await_joins(&[ticket]).remove(0);
    assert_eq!(answer.leader, other);
    assert_eq!(answer.members.len(), 1);
}

#[test]
fn pending_member_blocks_join_completion_until_it_rejoins() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(1);
    // A newcomer triggers a rebalance (through its rejoin)…
    let pending = unwrap_now(h.join(join_request(""))).member_id;
    let leader_ticket = unwrap_parked(h.join(join_request(&members[0])));
    // …the leader alone cannot complete it while an id is pending.
    assert_eq!(h.state(), Some(GroupState::PreparingRebalance));
    assert!(h.join_answer(leader_ticket).is_none());
    // Its rejoin completes the phase: it is answered at once.
    let pending_answer = unwrap_now(h.join(join_request(&pending)));
    let answers = [h.join_answer(leader_ticket).unwrap(), pending_answer];
    assert!(answers.iter().all(|a| a.generation_id == generation + 1));
}
