//! The KIP-848 consumer protocol: joining, reconciliation (revoke, then
//! assign released partitions), leaving, fencing by session and rebalance
//! deadlines, static members, topic changes, offsets, and the boundaries with
//! classic groups. The clock is advanced by hand.

use std::collections::{BTreeMap, BTreeSet};

use kafgres_wire::error_code;
use uuid::Uuid;

use super::*;
use crate::group::consumer::types::*;

const TOPIC: &str = "t";
const REBALANCE: i32 = 300_000;

/// Topics by name: (id, partitions).
#[derive(Default)]
struct Topics(BTreeMap<String, (Uuid, i32)>);

impl Topics {
    fn with(topics: &[(&str, i32)]) -> Topics {
        Topics(
            topics
                .iter()
                .enumerate()
                .map(|(i, (name, n))| (name.to_string(), (Uuid::from_u128(i as u128 + 1), *n)))
                .collect(),
        )
    }

    fn id(&self, name: &str) -> Uuid {
        self.0[name].0
    }
}

impl TopicLookup for Topics {
    fn topic(&self, name: &str) -> Option<(Uuid, i32)> {
        self.0.get(name).copied()
    }
    fn topic_name(&self, id: Uuid) -> Option<String> {
        self.0.iter().find(|(_, (i, _))| *i == id).map(|(n, _)| n.clone())
    }
    fn topic_names(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

fn join(member_id: &str, topics: &[&str]) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        api_version: 1,
        group_id: GROUP.to_string(),
        member_id: member_id.to_string(),
        member_epoch: 0,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: REBALANCE,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        subscribed_topic_regex: None,
        server_assignor: None,
        owned_partitions: Some(Assignment::new()),
        client_id: "client".to_string(),
        client_host: "/127.0.0.1".to_string(),
    }
}

/// A plain heartbeat: nothing changed except, if given, the owned partitions.
fn beat(member_id: &str, epoch: i32, owned: Option<Assignment>) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: None,
        owned_partitions: owned,
        ..join(member_id, &[])
    }
}

fn parts(topic: Uuid, partitions: &[i32]) -> Assignment {
    Assignment::from([(topic, partitions.iter().copied().collect::<BTreeSet<i32>>())])
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

struct C {
    h: H,
    topics: Topics,
}

impl C {
    fn new(topics: &[(&str, i32)]) -> C {
        C { h: H::new(), topics: Topics::with(topics) }
    }

    fn send(&mut self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse {
        let (response, effects) = self.h.c.consumer_group_heartbeat(self.h.now, request, &self.topics);
        self.h.effects.extend(effects);
        response
    }

    fn ok(&mut self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse {
        let response = self.send(request);
        assert_eq!(response.error_code, error_code::NONE, "{response:?}");
        response
    }

    fn describe(&self) -> DescribedConsumerGroup {
        self.h.c.consumer_group_describe(&[GROUP.to_string()], &self.topics).remove(0)
    }

    /// Two members split a 6-partition topic, both Stable at epoch 2.
    fn two_members(&mut self) -> (Assignment, Assignment) {
        let t = self.topics.id(TOPIC);
        let a = self.ok(join("a", &[TOPIC]));
        assert_eq!((a.member_epoch, a.assignment.clone()), (1, Some(parts(t, &[0, 1, 2, 3, 4, 5]))));
        let b = self.ok(join("b", &[TOPIC]));
        // b is at the new epoch, but every partition is still a's.
        assert_eq!((b.member_epoch, b.assignment), (2, Some(Assignment::new())));
        // a must give three up first: it stays at epoch 1 and keeps three.
        let a = self.ok(beat("a", 1, None));
        assert_eq!(a.member_epoch, 1);
        let kept = a.assignment.expect("the revocation is sent");
        assert_eq!(count(&kept), 3);
        assert_eq!(self.describe().group_state, "Reconciling");
        // a acknowledges by listing only what it kept: epoch 2.
        let a = self.ok(beat("a", 1, Some(kept.clone())));
        assert_eq!((a.member_epoch, a.assignment), (2, None));
        // b now gets the released three.
        let b = self.ok(beat("b", 2, Some(Assignment::new())));
        let got = b.assignment.expect("the released partitions are sent");
        assert_eq!(count(&got), 3);
        assert!(!intersects(&kept, &got));
        assert_eq!(self.describe().group_state, "Stable");
        (kept, got)
    }
}

fn intersects(a: &Assignment, b: &Assignment) -> bool {
    a.iter().any(|(t, ps)| b.get(t).is_some_and(|o| !ps.is_disjoint(o)))
}

#[test]
fn invalid_requests_are_refused_with_kafkas_codes() {
    let mut c = C::new(&[(TOPIC, 6)]);
    let cases: Vec<(ConsumerHeartbeatRequest, i16)> = vec![
        (ConsumerHeartbeatRequest { group_id: String::new(), ..join("a", &[TOPIC]) }, error_code::INVALID_REQUEST),
        (ConsumerHeartbeatRequest { member_id: String::new(), ..join("a", &[TOPIC]) }, error_code::INVALID_REQUEST),
        (ConsumerHeartbeatRequest { rebalance_timeout_ms: -1, ..join("a", &[TOPIC]) }, error_code::INVALID_REQUEST),
        (ConsumerHeartbeatRequest { owned_partitions: None, ..join("a", &[TOPIC]) }, error_code::INVALID_REQUEST),
        (
            ConsumerHeartbeatRequest { owned_partitions: Some(parts(Uuid::from_u128(1), &[0])), ..join("a", &[TOPIC]) },
            error_code::INVALID_REQUEST,
        ),
        (ConsumerHeartbeatRequest { subscribed_topic_names: None, ..join("a", &[TOPIC]) }, error_code::INVALID_REQUEST),
        (ConsumerHeartbeatRequest { member_epoch: -3, ..join("a", &[TOPIC]) }, error_code::INVALID_REQUEST),
        (ConsumerHeartbeatRequest { member_epoch: -2, ..join("a", &[TOPIC]) }, error_code::INVALID_REQUEST),
        (
            ConsumerHeartbeatRequest { instance_id: Some(" ".into()), ..join("a", &[TOPIC]) },
            error_code::INVALID_REQUEST,
        ),
        (
            ConsumerHeartbeatRequest { server_assignor: Some("sticky".into()), ..join("a", &[TOPIC]) },
            error_code::UNSUPPORTED_ASSIGNOR,
        ),
        (
            ConsumerHeartbeatRequest { subscribed_topic_regex: Some("t(".into()), ..join("a", &[]) },
            error_code::INVALID_REGULAR_EXPRESSION,
        ),
        // A member of a group this coordinator forgot (a restart): rejoin.
        (beat("a", 5, None), error_code::UNKNOWN_MEMBER_ID),
        (beat("a", -1, None), error_code::GROUP_ID_NOT_FOUND),
    ];
    for (request, code) in cases {
        let response = c.send(request.clone());
        assert_eq!(response.error_code, code, "{request:?} -> {response:?}");
        assert!(response.error_message.is_some());
        assert_eq!(response.member_id, None);
    }
    assert_eq!(c.h.state(), None, "no refused request created the group");
}

#[test]
fn v0_join_gets_a_member_id_from_the_coordinator() {
    let mut c = C::new(&[(TOPIC, 1)]);
    let response = c.ok(ConsumerHeartbeatRequest { api_version: 0, member_id: String::new(), ..join("", &[TOPIC]) });
    let member_id = response.member_id.expect("a member id");
    assert_eq!(member_id.len(), 22, "Kafka's base64 uuid form: {member_id}");
    assert_eq!(c.describe().members[0].member_id, member_id);
}

#[test]
fn two_members_split_by_revoking_first_then_releasing() {
    let mut c = C::new(&[(TOPIC, 6)]);
    c.two_members();
    let described = c.describe();
    assert_eq!((described.group_epoch, described.assignment_epoch), (2, 2));
    assert_eq!(described.assignor_name, "uniform");
    for m in &described.members {
        assert_eq!(m.member_epoch, 2);
        assert_eq!(m.assignment, m.target_assignment);
        assert_eq!(m.assignment[0].partitions.len(), 3);
        assert_eq!(m.subscribed_topic_names, vec![TOPIC.to_string()]);
    }
    assert_eq!(c.h.state(), Some(GroupState::Stable));
    // A heartbeat that changes nothing sends no assignment.
    let b = c.ok(beat("b", 2, None));
    assert_eq!((b.member_epoch, b.assignment, b.heartbeat_interval_ms), (2, None, 5_000));
}

#[test]
fn a_leaving_member_hands_its_partitions_to_the_others() {
    let mut c = C::new(&[(TOPIC, 6)]);
    c.two_members();
    let left = c.ok(beat("a", -1, None));
    assert_eq!((left.member_id.as_deref(), left.member_epoch), (Some("a"), -1));
    assert_eq!(c.h.state(), Some(GroupState::Assigning), "the target waits for the next heartbeat");
    let b = c.ok(beat("b", 2, None));
    assert_eq!(b.member_epoch, 3);
    assert_eq!(b.assignment, Some(parts(c.topics.id(TOPIC), &[0, 1, 2, 3, 4, 5])));
    assert_eq!(c.h.state(), Some(GroupState::Stable));
    // The one who left is gone.
    assert_eq!(c.send(beat("a", 2, None)).error_code, error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(c.send(beat("a", -1, None)).error_code, error_code::UNKNOWN_MEMBER_ID);
    // The last one leaving empties the group.
    c.ok(beat("b", -1, None));
    assert_eq!(c.h.state(), Some(GroupState::Empty));
}

#[test]
fn a_silent_member_is_fenced_after_the_session_timeout() {
    let mut c = C::new(&[(TOPIC, 4)]);
    c.ok(join("a", &[TOPIC]));
    c.ok(join("b", &[TOPIC]));
    c.h.advance(40_000);
    let kept = c.ok(beat("a", 1, None)).assignment.expect("revocation");
    assert_eq!(c.ok(beat("a", 1, Some(kept))).member_epoch, 2);
    c.h.advance(6_000); // b: 46 s of silence
    assert_eq!(c.describe().members.len(), 1);
    assert_eq!(c.send(beat("b", 2, None)).error_code, error_code::UNKNOWN_MEMBER_ID);
    // a, kept alive by its heartbeats, ends with every partition.
    let a = c.ok(beat("a", 2, None));
    assert_eq!((a.member_epoch, a.assignment.map(|x| count(&x))), (3, Some(4)));
    assert!(c.h.effects.iter().any(|e| matches!(e, Effect::ScheduleDeadline { .. })));
}

#[test]
fn a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout() {
    let mut c = C::new(&[(TOPIC, 6)]);
    c.ok(ConsumerHeartbeatRequest { rebalance_timeout_ms: 20_000, ..join("a", &[TOPIC]) });
    c.ok(join("b", &[TOPIC]));
    let a = c.ok(beat("a", 1, None)); // told to revoke three
    assert_eq!(a.assignment.map(|x| count(&x)), Some(3));
    for _ in 0..3 {
        c.h.advance(6_000);
        c.ok(beat("b", 2, None));
        c.ok(beat("a", 1, None)); // keeps heartbeating, never revokes
    }
    c.h.advance(3_000); // 21 s since the revocation was asked
    assert_eq!(c.send(beat("a", 1, None)).error_code, error_code::UNKNOWN_MEMBER_ID);
    let b = c.ok(beat("b", 2, None));
    assert_eq!(b.assignment.map(|x| count(&x)), Some(6));
}

#[test]
fn member_epochs_ahead_or_behind_are_fenced_except_the_lost_answer_case() {
    let mut c = C::new(&[(TOPIC, 6)]);
    let (kept, _) = c.two_members();
    let t = c.topics.id(TOPIC);
    assert_eq!(c.send(beat("a", 3, None)).error_code, error_code::FENCED_MEMBER_EPOCH);
    // Epoch 1 is a's previous epoch: accepted if it owns no more than it has.
    assert_eq!(c.send(beat("a", 1, Some(kept.clone()))).error_code, error_code::NONE);
    assert_eq!(c.send(beat("a", 1, None)).error_code, error_code::FENCED_MEMBER_EPOCH);
    assert_eq!(c.send(beat("a", 1, Some(parts(t, &[0, 1, 2, 3, 4, 5])))).error_code, error_code::FENCED_MEMBER_EPOCH);
    // A fenced member rejoins with epoch 0 and the same id.
    let again = c.ok(join("a", &[TOPIC]));
    assert_eq!(again.member_epoch, 2);
    assert_eq!(again.assignment, Some(kept));
}

#[test]
fn a_static_member_returns_without_a_rebalance() {
    let mut c = C::new(&[(TOPIC, 6)]);
    let stat =
        |member_id: &str| ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..join(member_id, &[TOPIC]) };
    c.ok(stat("s1"));
    c.ok(join("d", &[TOPIC]));
    let s1 = c.ok(ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..beat("s1", 1, None) });
    let kept = s1.assignment.expect("revocation");
    c.ok(ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..beat("s1", 1, Some(kept.clone())) });
    c.ok(beat("d", 2, Some(Assignment::new())));
    let epoch = c.describe().group_epoch;

    // Another process with the same instance id while s1 is active.
    assert_eq!(c.send(stat("s2")).error_code, error_code::UNRELEASED_INSTANCE_ID);
    // s1 leaves temporarily, s2 takes its place and its partitions.
    let left = c.ok(ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..beat("s1", -2, None) });
    assert_eq!(left.member_epoch, -2);
    let s2 = c.ok(stat("s2"));
    assert_eq!((s2.member_epoch, s2.assignment), (2, Some(kept)));
    assert_eq!(c.describe().group_epoch, epoch, "no rebalance");
    // The old member id is fenced.
    let old = c.send(ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..beat("s1", 2, None) });
    assert_eq!(old.error_code, error_code::FENCED_INSTANCE_ID);
}

#[test]
fn a_temporarily_left_static_member_is_fenced_when_its_session_ends() {
    let mut c = C::new(&[(TOPIC, 2)]);
    c.ok(ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..join("s1", &[TOPIC]) });
    c.ok(join("d", &[TOPIC]));
    c.ok(ConsumerHeartbeatRequest { instance_id: Some("i1".into()), ..beat("s1", -2, None) });
    let mut epoch = 2;
    for _ in 0..10 {
        c.h.advance(5_000);
        epoch = c.ok(beat("d", epoch, None)).member_epoch;
    }
    assert_eq!(epoch, 3, "fenced s1 bumped the epoch: {:?}", c.describe());
    assert_eq!(c.describe().members.len(), 1);
}

#[test]
fn new_partitions_and_topics_bump_the_group_epoch() {
    let mut c = C::new(&[(TOPIC, 2)]);
    c.ok(join("a", &[TOPIC, "later"]));
    assert_eq!(c.describe().group_epoch, 1);
    c.topics.0.insert(TOPIC.into(), (c.topics.id(TOPIC), 3));
    let a = c.ok(beat("a", 1, None));
    assert_eq!((a.member_epoch, a.assignment.map(|x| count(&x))), (2, Some(3)));
    c.topics.0.insert("later".into(), (Uuid::from_u128(99), 2));
    let a = c.ok(beat("a", 2, None));
    assert_eq!((a.member_epoch, a.assignment.map(|x| count(&x))), (3, Some(5)));
    // A heartbeat with nothing new changes nothing.
    assert_eq!(c.ok(beat("a", 3, None)).member_epoch, 3);
    assert_eq!(c.describe().group_epoch, 3);
}

#[test]
fn regex_subscriptions_match_whole_topic_names() {
    let mut c = C::new(&[("orders", 1), ("orders-eu", 2), ("xorders", 4)]);
    let a = c.ok(ConsumerHeartbeatRequest {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("orders.*".into()),
        ..join("a", &[])
    });
    assert_eq!(a.assignment.map(|x| count(&x)), Some(3));
    assert_eq!(c.describe().members[0].subscribed_topic_regex.as_deref(), Some("orders.*"));
}

#[test]
fn the_range_assignor_is_used_when_members_ask_for_it() {
    let mut c = C::new(&[(TOPIC, 5)]);
    let ranged = |m: &str| ConsumerHeartbeatRequest { server_assignor: Some("range".into()), ..join(m, &[TOPIC]) };
    c.ok(ranged("a"));
    c.ok(ranged("b"));
    assert_eq!(c.describe().assignor_name, "range");
    let t = c.topics.id(TOPIC);
    let described = c.describe();
    assert_eq!(described.members[0].target_assignment[0].partitions, vec![0, 1, 2]);
    assert_eq!(described.members[1].target_assignment[0].partitions, vec![3, 4]);
    let a = c.ok(beat("a", 1, None));
    assert_eq!(a.assignment, Some(parts(t, &[0, 1, 2])));
}

fn commit(api_version: i16, epoch: i32, member_id: &str) -> OffsetCommitRequest {
    OffsetCommitRequest {
        api_version,
        group_id: GROUP.to_string(),
        generation_id: epoch,
        member_id: member_id.to_string(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            name: TOPIC.to_string(),
            partitions: vec![OffsetCommitPartition { partition: 0, offset: 5, leader_epoch: -1, metadata: None }],
        }],
    }
}

#[test]
fn offset_commits_are_checked_against_the_member_epoch() {
    let mut c = C::new(&[(TOPIC, 6)]);
    c.two_members();
    let code = |c: &mut C, request: OffsetCommitRequest| {
        let (response, _) = c.h.c.offset_commit(c.h.now, &request);
        response.topics[0].1[0].1
    };
    assert_eq!(code(&mut c, commit(9, 2, "a")), error_code::NONE);
    assert_eq!(code(&mut c, commit(9, 1, "a")), error_code::STALE_MEMBER_EPOCH);
    assert_eq!(code(&mut c, commit(9, 2, "zz")), error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(code(&mut c, commit(8, 2, "a")), error_code::UNSUPPORTED_VERSION);
    assert_eq!(code(&mut c, commit(9, -1, "")), error_code::UNKNOWN_MEMBER_ID, "members are in");
    c.ok(beat("a", -1, None));
    c.ok(beat("b", -1, None));
    assert_eq!(code(&mut c, commit(9, -1, "")), error_code::NONE, "an empty group takes simple commits");
}

#[test]
fn classic_and_consumer_groups_do_not_mix() {
    let mut c = C::new(&[(TOPIC, 6)]);
    c.ok(join("a", &[TOPIC]));
    let classic = unwrap_now(c.h.join(join_request("")));
    assert_eq!(classic.error_code, error_code::INCONSISTENT_GROUP_PROTOCOL);
    // Listing shows the type; DescribeGroups does not describe it.
    let listed = c.h.c.list_groups(&[], &["Consumer".into()]);
    assert_eq!((listed.len(), listed[0].group_type, listed[0].state.as_str()), (1, "consumer", "Stable"));
    assert!(c.h.c.list_groups(&[], &["classic".into()]).is_empty());
    assert_eq!(c.h.c.describe_groups(6, &[GROUP.into()])[0].error_code, error_code::GROUP_ID_NOT_FOUND);

    // Empty again, it can become classic; committed offsets stay.
    let (response, _) = c.h.c.offset_commit(c.h.now, &commit(9, 1, "a"));
    assert_eq!(response.topics[0].1[0].1, error_code::NONE);
    c.ok(beat("a", -1, None));
    let (member_id, _) = c.h.join_new(join_request(""));
    assert!(!member_id.is_empty());
    assert_eq!(c.h.c.list_groups(&[], &["classic".into()]).len(), 1);
    let described = c.h.c.consumer_group_describe(&[GROUP.into()], &c.topics);
    assert_eq!(described[0].error_code, error_code::GROUP_ID_NOT_FOUND);
    assert_eq!(described[0].error_message.as_deref(), Some("Group g is not a consumer group."));
    // A consumer-protocol member cannot join the classic group while it has members.
    assert_eq!(c.send(join("x", &[TOPIC])).error_code, error_code::GROUP_ID_NOT_FOUND);
    let request = OffsetFetchRequest { group_id: GROUP.into(), topics: Some(vec![(TOPIC.into(), vec![0])]) };
    assert_eq!(c.h.c.offset_fetch(&request).topics[0].1[0].offset, 5);
}

#[test]
fn an_empty_consumer_group_without_offsets_is_collected() {
    let mut c = C::new(&[(TOPIC, 1)]);
    c.ok(join("a", &[TOPIC]));
    c.ok(beat("a", -1, None));
    assert_eq!(c.h.state(), Some(GroupState::Empty));
    c.h.advance(GroupConfig::default().empty_group_retention_ms + 1);
    assert_eq!(c.h.state(), None);
    let described = c.describe();
    assert_eq!(
        (described.error_code, described.error_message.as_deref()),
        (error_code::GROUP_ID_NOT_FOUND, Some("Group g not found."))
    );
}

#[test]
fn a_member_of_a_group_forgotten_at_a_restart_is_told_to_rejoin() {
    // A coordinator that just started knows the group only by its committed
    // offsets (an empty classic group); the member heartbeats at its epoch.
    let mut c = C::new(&[(TOPIC, 2)]);
    let committed = crate::group::types::CommittedOffset {
        topic: TOPIC.into(),
        partition: 0,
        offset: 7,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: c.h.now,
    };
    c.h.c.load_offsets(c.h.now, [(GROUP.to_string(), committed)]);
    let refused = c.send(beat("a", 4, None));
    assert_eq!(refused.error_code, error_code::UNKNOWN_MEMBER_ID, "{refused:?}");
    assert_eq!(refused.error_message.as_deref(), Some("Member a is not a member of group g."));
    // It rejoins at epoch 0 (as the Java client does on UNKNOWN_MEMBER_ID)
    // and gets the partitions; the group keeps its offsets.
    let joined = c.ok(join("a", &[TOPIC]));
    assert_eq!((joined.member_epoch, joined.assignment), (1, Some(parts(c.topics.id(TOPIC), &[0, 1]))));
    // A classic group with members is not forgotten: that stays Kafka's answer.
    let mut c = C::new(&[(TOPIC, 1)]);
    let (member_id, _) = c.h.join_new(join_request(""));
    assert!(!member_id.is_empty());
    let refused = c.send(beat("a", 4, None));
    assert_eq!(refused.error_code, error_code::GROUP_ID_NOT_FOUND, "{refused:?}");
}
