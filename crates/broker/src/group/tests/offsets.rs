//! OffsetCommit rules, OffsetFetch, OffsetDelete, loading.

use kafgres_wire::error_code;

use super::*;

fn commit(generation_id: i32, member_id: &str, partitions: &[(i32, i64)]) -> OffsetCommitRequest {
    OffsetCommitRequest {
        api_version: 8,
        group_id: GROUP.to_string(),
        generation_id,
        member_id: member_id.to_string(),
        group_instance_id: None,
        topics: vec![OffsetCommitTopic {
            name: "t".to_string(),
            partitions: partitions
                .iter()
                .map(|&(partition, offset)| OffsetCommitPartition {
                    partition,
                    offset,
                    leader_epoch: 3,
                    metadata: Some("m".into()),
                })
                .collect(),
        }],
    }
}

fn fetch(h: &H, partitions: &[i32]) -> Vec<FetchedOffset> {
    let request = OffsetFetchRequest { group_id: GROUP.into(), topics: Some(vec![("t".into(), partitions.to_vec())]) };
    h.c.offset_fetch(&request).topics.remove(0).1
}

fn errors(response: &OffsetCommitResponse) -> Vec<i16> {
    response.topics.iter().flat_map(|(_, ps)| ps.iter().map(|&(_, e)| e)).collect()
}

#[test]
fn member_commit_is_persisted_and_fetched() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(1);
    let (response, effects) = h.c.offset_commit(h.now, &commit(generation, &members[0], &[(0, 42), (1, 7)]));
    assert_eq!(errors(&response), [error_code::NONE, error_code::NONE]);
    let Some(Effect::PersistOffsets { group_id, offsets }) = effects.first() else {
        panic!("expected PersistOffsets, got {effects:?}");
    };
    assert_eq!(group_id, GROUP);
    assert_eq!(offsets.len(), 2);
    assert_eq!(
        offsets[0],
        CommittedOffset {
            topic: "t".into(),
            partition: 0,
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp_ms: h.now,
        }
    );
    let fetched = fetch(&h, &[0, 1, 2]);
    assert_eq!((fetched[0].offset, fetched[0].leader_epoch, fetched[0].metadata.as_str()), (42, 3, "m"));
    assert_eq!(fetched[1].offset, 7);
    assert_eq!((fetched[2].offset, fetched[2].leader_epoch, fetched[2].error_code), (-1, -1, error_code::NONE));
}

#[test]
fn group_commit_errors() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(1);
    let code = |h: &mut H, request: OffsetCommitRequest| {
        let (response, effects) = h.c.offset_commit(h.now, &request);
        assert!(effects.iter().all(|e| !matches!(e, Effect::PersistOffsets { .. })));
        errors(&response)
    };
    assert_eq!(
        code(&mut h, commit(generation + 1, &members[0], &[(0, 1), (1, 1)])),
        [error_code::ILLEGAL_GENERATION; 2]
    );
    assert_eq!(code(&mut h, commit(generation, "ghost", &[(0, 1)])), [error_code::UNKNOWN_MEMBER_ID]);
    // A simple commit (no generation, no member) to a group with members.
    assert_eq!(code(&mut h, commit(-1, "", &[(0, 1)])), [error_code::UNKNOWN_MEMBER_ID]);
    assert_eq!(fetch(&h, &[0])[0].offset, -1);
}

#[test]
fn commits_during_rebalances() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(2);
    // PreparingRebalance: the current generation may still commit.
    unwrap_parked(h.join(join_request(&members[0])));
    let (response, _) = h.c.offset_commit(h.now, &commit(generation, &members[1], &[(0, 5)]));
    assert_eq!(errors(&response), [error_code::NONE]);
    // CompletingRebalance: members must sync first.
    let answer = unwrap_now(h.join(join_request(&members[1])));
    let (response, _) = h.c.offset_commit(h.now, &commit(answer.generation_id, &members[1], &[(0, 6)]));
    assert_eq!(errors(&response), [error_code::REBALANCE_IN_PROGRESS]);
    assert_eq!(fetch(&h, &[0])[0].offset, 5);
}

#[test]
fn simple_commit_creates_an_empty_group() {
    let mut h = H::new();
    let (response, effects) = h.c.offset_commit(h.now, &commit(-1, "", &[(0, 9)]));
    assert_eq!(errors(&response), [error_code::NONE]);
    assert!(matches!(effects.first(), Some(Effect::PersistOffsets { .. })));
    assert_eq!(h.state(), Some(GroupState::Empty));
    let listed = h.c.list_groups(&[], &[]);
    assert_eq!(listed[0].protocol_type, "");
    assert_eq!(fetch(&h, &[0])[0].offset, 9);
    // Generation -1 may keep committing while the group stays empty.
    let (response, _) = h.c.offset_commit(h.now, &commit(-1, "", &[(0, 10)]));
    assert_eq!(errors(&response), [error_code::NONE]);
}

#[test]
fn commit_with_a_generation_to_an_unknown_group() {
    let mut h = H::new();
    let (response, _) = h.c.offset_commit(h.now, &commit(1, "m", &[(0, 1)]));
    assert_eq!(errors(&response), [error_code::ILLEGAL_GENERATION]);
    let (response, _) = h.c.offset_commit(h.now, &OffsetCommitRequest { api_version: 9, ..commit(1, "m", &[(0, 1)]) });
    assert_eq!(errors(&response), [error_code::GROUP_ID_NOT_FOUND]);
    assert_eq!(h.c.group_count(), 0);
}

#[test]
fn oversized_metadata_fails_only_its_partition() {
    let mut h = H::new();
    let mut request = commit(-1, "", &[(0, 1), (1, 2)]);
    request.topics[0].partitions[1].metadata = Some("x".repeat(4097));
    let (response, effects) = h.c.offset_commit(h.now, &request);
    assert_eq!(errors(&response), [error_code::NONE, error_code::OFFSET_METADATA_TOO_LARGE]);
    let Some(Effect::PersistOffsets { offsets, .. }) = effects.first() else { panic!("{effects:?}") };
    assert_eq!(offsets.len(), 1);
    request.topics[0].partitions[1].metadata = Some("x".repeat(4096));
    assert_eq!(errors(&h.c.offset_commit(h.now, &request).0), [error_code::NONE, error_code::NONE]);
}

#[test]
fn commit_keeps_the_members_session_alive() {
    let mut h = H::new();
    let (members, generation) = h.stable_group(1);
    for _ in 0..5 {
        h.advance(i64::from(SESSION_MS) - 1);
        let (response, _) = h.c.offset_commit(h.now, &commit(generation, &members[0], &[(0, 1)]));
        assert_eq!(errors(&response), [error_code::NONE]);
    }
    assert_eq!(h.state(), Some(GroupState::Stable));
}

#[test]
fn fetch_all_and_fetch_of_unknown_groups() {
    let mut h = H::new();
    let mut request = commit(-1, "", &[(1, 11), (0, 10)]);
    request.topics.push(OffsetCommitTopic { name: "a".into(), partitions: request.topics[0].partitions.clone() });
    h.c.offset_commit(h.now, &request);
    let all = h.c.offset_fetch(&OffsetFetchRequest { group_id: GROUP.into(), topics: None });
    let listed: Vec<(&str, i32, i64)> =
        all.topics.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (t.as_str(), p.partition, p.offset))).collect();
    assert_eq!(listed, [("a", 0, 10), ("a", 1, 11), ("t", 0, 10), ("t", 1, 11)]);

    let unknown = h.c.offset_fetch(&OffsetFetchRequest { group_id: "none".into(), topics: None });
    assert!(unknown.topics.is_empty());
    let unknown =
        h.c.offset_fetch(&OffsetFetchRequest { group_id: "none".into(), topics: Some(vec![("t".into(), vec![0])]) });
    assert_eq!(unknown.topics[0].1[0].offset, -1);
}

#[test]
fn load_and_replace_offsets() {
    let mut h = H::new();
    let row = |partition, offset| CommittedOffset {
        topic: "t".into(),
        partition,
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp_ms: 1,
    };
    h.c.load_offsets(h.now, vec![(GROUP.to_string(), row(0, 100)), ("other".to_string(), row(0, 5))]);
    assert_eq!(h.state(), Some(GroupState::Empty));
    assert_eq!(h.c.group_count(), 2);
    assert_eq!(fetch(&h, &[0])[0].offset, 100);
    h.c.offset_commit(h.now, &commit(-1, "", &[(0, 200), (1, 1)]));
    // The write failed: back to what Postgres holds.
    h.c.replace_group_offsets(h.now, GROUP, vec![row(0, 100)]);
    let fetched = fetch(&h, &[0, 1]);
    assert_eq!((fetched[0].offset, fetched[1].offset), (100, -1));
}

#[test]
fn offset_delete_rules() {
    let mut h = H::new();
    let delete = |h: &mut H, group_id: &str, topic: &str| {
        let request = OffsetDeleteRequest { group_id: group_id.into(), topics: vec![(topic.into(), vec![0, 1])] };
        h.c.offset_delete(h.now, &request)
    };
    let (members, generation) = h.stable_group(1);
    let mut request = commit(generation, &members[0], &[(0, 1)]);
    request.topics.push(OffsetCommitTopic { name: "gone".into(), partitions: request.topics[0].partitions.clone() });
    h.c.offset_commit(h.now, &request);

    // Stable consumer group: subscribed topics are protected, others are not.
    let (response, effects) = delete(&mut h, GROUP, "t");
    assert_eq!(
        response.topics[0].1,
        [(0, error_code::GROUP_SUBSCRIBED_TO_TOPIC), (1, error_code::GROUP_SUBSCRIBED_TO_TOPIC)]
    );
    assert!(effects.is_empty());
    let (response, effects) = delete(&mut h, GROUP, "gone");
    assert_eq!(
        (response.error_code, response.topics[0].1.clone()),
        (error_code::NONE, vec![(0, error_code::NONE), (1, error_code::NONE)])
    );
    assert_eq!(
        effects,
        [Effect::DeleteOffsets {
            group_id: GROUP.into(),
            partitions: vec![TopicPartition { topic: "gone".into(), partition: 0 }],
        }]
    );
    // Once empty, every topic may be deleted.
    h.leave(&[(&members[0], None)]);
    let (response, effects) = delete(&mut h, GROUP, "t");
    assert_eq!(response.topics[0].1, [(0, error_code::NONE), (1, error_code::NONE)]);
    assert_eq!(effects.iter().filter(|e| matches!(e, Effect::DeleteOffsets { .. })).count(), 1);
    assert_eq!(delete(&mut h, "none", "t").0.error_code, error_code::GROUP_ID_NOT_FOUND);
    assert_eq!(delete(&mut h, "", "t").0.error_code, error_code::INVALID_GROUP_ID);
}

#[test]
fn offset_delete_in_a_non_consumer_group_needs_it_empty() {
    let mut h = H::new();
    let connect = JoinGroupRequest { protocol_type: "connect".into(), ..join_request("") };
    let (_, reply) = h.join_new(connect);
    h.await_joins(&[unwrap_parked(reply)]);
    let request = OffsetDeleteRequest { group_id: GROUP.into(), topics: vec![("t".into(), vec![0])] };
    let (response, _) = h.c.offset_delete(h.now, &request);
    assert_eq!(response.error_code, error_code::NON_EMPTY_GROUP);
    assert!(response.topics.is_empty());
}

#[test]
fn deleted_topics_are_forgotten() {
    let mut h = H::new();
    let mut request = commit(-1, "", &[(0, 1)]);
    request.topics.push(OffsetCommitTopic { name: "u".into(), partitions: request.topics[0].partitions.clone() });
    h.c.offset_commit(h.now, &request);
    let only_t = OffsetCommitRequest { group_id: "only-t".into(), ..commit(-1, "", &[(0, 1)]) };
    h.c.offset_commit(h.now, &only_t);
    // Only the offsets' retention is pending.
    assert_eq!(h.c.next_deadline(), Some(h.now + h.c.config().offsets_retention_ms));

    let effects = h.c.forget_topic(h.now, "t");
    assert_eq!(fetch(&h, &[0])[0].offset, -1);
    let u = OffsetFetchRequest { group_id: GROUP.into(), topics: Some(vec![("u".into(), vec![0])]) };
    assert_eq!(h.c.offset_fetch(&u).topics[0].1[0].offset, 1);
    // "only-t" holds nothing any more: it will be collected.
    let collect_at = h.now + h.c.config().empty_group_retention_ms;
    assert_eq!(effects, [Effect::ScheduleDeadline { at_ms: collect_at }]);
}

#[test]
fn offsets_of_a_group_that_had_members_expire_after_it_stays_empty_for_the_retention() {
    let config = GroupConfig { offsets_retention_ms: 60_000, ..GroupConfig::default() };
    let mut h = H::with_config(config);
    let (members, generation) = h.stable_group(1);
    let member = members[0].clone();
    let (response, _) = h.c.offset_commit(h.now, &commit(generation, &member, &[(0, 5), (1, 7)]));
    assert_eq!(errors(&response), [error_code::NONE, error_code::NONE]);
    // A live group keeps its offsets however old they get.
    for _ in 0..24 {
        h.advance(5_000);
        assert_eq!(h.heartbeat(&member, generation), error_code::NONE);
    }
    assert_eq!(fetch(&h, &[0])[0].offset, 5);
    // It empties: the retention counts from then, for every offset at once.
    h.leave(&[(&member, None)]);
    assert_eq!(h.state(), Some(GroupState::Empty));
    h.advance(59_000);
    assert_eq!(fetch(&h, &[0, 1]).iter().map(|f| f.offset).collect::<Vec<_>>(), [5, 7]);
    h.effects.clear();
    h.advance(1_000);
    assert_eq!(fetch(&h, &[0, 1]).iter().map(|f| f.offset).collect::<Vec<_>>(), [-1, -1]);
    let deleted: Vec<&Effect> = h.effects.iter().filter(|e| matches!(e, Effect::DeleteOffsets { .. })).collect();
    assert_eq!(deleted.len(), 1, "{:?}", h.effects);
    if let Effect::DeleteOffsets { group_id, partitions } = deleted[0] {
        assert_eq!(group_id, GROUP);
        assert_eq!(partitions.len(), 2);
    }
    // Nothing left: the group is then collected.
    h.advance(h.c.config().empty_group_retention_ms);
    assert_eq!(h.state(), None);
}

#[test]
fn simple_commits_expire_one_by_one_from_their_commit_time() {
    let config = GroupConfig { offsets_retention_ms: 60_000, ..GroupConfig::default() };
    let mut h = H::with_config(config);
    h.c.offset_commit(h.now, &commit(-1, "", &[(0, 1)]));
    h.advance(30_000);
    h.c.offset_commit(h.now, &commit(-1, "", &[(1, 2)]));
    h.advance(30_000);
    assert_eq!(fetch(&h, &[0, 1]).iter().map(|f| f.offset).collect::<Vec<_>>(), [-1, 2]);
    // A fresh commit restarts that partition's clock.
    h.c.offset_commit(h.now, &commit(-1, "", &[(1, 3)]));
    h.advance(59_000);
    assert_eq!(fetch(&h, &[1])[0].offset, 3);
    h.advance(1_000);
    assert_eq!(fetch(&h, &[1])[0].offset, -1);
}
