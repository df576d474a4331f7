//! Streams groups (KIP-1071) over the wire: StreamsGroupHeartbeat with a
//! topology creates the internal topics and assigns tasks, tasks move between
//! members only after revocation, deadlines fence, members commit offsets with
//! their epoch, and bad requests get Kafka 4.4's error codes.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{create_topic, metadata_request, topic_configs, Client, TestBroker};
use kafgres_broker::BrokerConfig;
use kafgres_wire::error_code;
use kafgres_wire::messages::streams_group::*;
use kafgres_wire::messages::{self, DeleteGroupsRequest};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

const V: i16 = 1;
const STATUS_MISSING_SOURCE_TOPICS: i8 = 1;
const STATUS_MISSING_INTERNAL_TOPICS: i8 = 3;
const STATUS_STALE_TOPOLOGY: i8 = 0;

fn info(name: &str, partitions: i32) -> TopicInfo {
    TopicInfo { name: name.into(), partitions, ..Default::default() }
}

/// One subtopology reading `source` (no internal topics).
fn simple_topology(source: &str) -> Topology {
    let s = Subtopology { subtopology_id: "0".into(), source_topics: vec![source.into()], ..Default::default() };
    Topology { epoch: 0, subtopologies: vec![s], ..Default::default() }
}

/// A word count: subtopology 0 reads `words` and writes the repartition
/// topic that subtopology 1 reads into a store with a changelog.
fn word_count_topology() -> Topology {
    let split = Subtopology {
        subtopology_id: "0".into(),
        source_topics: vec!["words".into()],
        repartition_sink_topics: vec!["app-counts-repartition".into()],
        ..Default::default()
    };
    let count = Subtopology {
        subtopology_id: "1".into(),
        repartition_source_topics: vec![info("app-counts-repartition", 0)],
        state_changelog_topics: vec![info("app-counts-changelog", 0)],
        ..Default::default()
    };
    Topology { epoch: 0, subtopologies: vec![split, count], ..Default::default() }
}

fn join(group: &str, member: &str, topology: Topology) -> StreamsGroupHeartbeatRequest {
    StreamsGroupHeartbeatRequest {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        topology: Some(topology),
        process_id: Some(format!("process-{member}")),
        ..Default::default()
    }
}

/// A heartbeat reporting the tasks the member owns (`None`: unchanged).
fn beat(group: &str, member: &str, epoch: i32, active: Option<&[(&str, &[i32])]>) -> StreamsGroupHeartbeatRequest {
    let tasks = |list: &[(&str, &[i32])]| {
        list.iter()
            .map(|(id, p)| TaskIds { subtopology_id: id.to_string(), partitions: p.to_vec(), ..Default::default() })
            .collect()
    };
    StreamsGroupHeartbeatRequest {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        active_tasks: active.map(tasks),
        standby_tasks: active.map(|_| Vec::new()),
        warmup_tasks: active.map(|_| Vec::new()),
        ..Default::default()
    }
}

async fn heartbeat(client: &mut Client, request: &StreamsGroupHeartbeatRequest) -> StreamsGroupHeartbeatResponse {
    client.call(V, request).await
}

/// The active tasks of an answer as (subtopology, partitions), sorted.
fn active(r: &StreamsGroupHeartbeatResponse) -> Option<BTreeMap<String, Vec<i32>>> {
    r.active_tasks.as_ref().map(|tasks| {
        tasks
            .iter()
            .filter(|t| !t.partitions.is_empty())
            .map(|t| {
                let mut p = t.partitions.clone();
                p.sort_unstable();
                (t.subtopology_id.clone(), p)
            })
            .collect()
    })
}

fn tasks(list: &[(&str, &[i32])]) -> BTreeMap<String, Vec<i32>> {
    list.iter().map(|(id, p)| (id.to_string(), p.to_vec())).collect()
}

fn codes(r: &StreamsGroupHeartbeatResponse) -> Vec<i8> {
    r.status.iter().flatten().map(|s| s.status_code).collect()
}

async fn describe(client: &mut Client, group: &str) -> DescribedGroup {
    let request = StreamsGroupDescribeRequest { group_ids: vec![group.into()], ..Default::default() };
    let mut r: StreamsGroupDescribeResponse = client.call(V, &request).await;
    r.groups.remove(0)
}

#[tokio::test]
async fn joining_with_a_topology_creates_its_internal_topics_and_assigns_tasks() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "words", 3).await;

    let r = heartbeat(&mut client, &join("wc", "a", word_count_topology())).await;
    assert_eq!(r.error_code, error_code::NONE, "{r:?}");
    assert_eq!((r.member_id.as_str(), r.member_epoch, r.heartbeat_interval_ms), ("a", 1, 5_000));
    assert_eq!(codes(&r), vec![STATUS_MISSING_INTERNAL_TOPICS], "no task until the internal topics exist");
    assert_eq!(active(&r), Some(BTreeMap::new()));
    assert_eq!(describe(&mut client, "wc").await.group_state, "NotReady");

    // The broker created them before answering: the repartition topic with
    // the partitions of its writer's source, the changelog with its
    // subtopology's task count, compacted.
    let m = client.call(12, &metadata_request(Some(&["app-counts-repartition", "app-counts-changelog"]), false)).await;
    let partitions: Vec<(i16, usize)> = m.topics.iter().map(|t| (t.error_code, t.partitions.len())).collect();
    assert_eq!(partitions, vec![(0, 3), (0, 3)]);
    let changelog = topic_configs(&mut client, "app-counts-changelog").await;
    assert_eq!(changelog.get("cleanup.policy").map(String::as_str), Some("compact"));

    let r = heartbeat(&mut client, &beat("wc", "a", 1, Some(&[]))).await;
    assert_eq!(r.error_code, error_code::NONE, "{r:?}");
    assert_eq!(r.member_epoch, 2);
    assert!(codes(&r).is_empty(), "{r:?}");
    assert_eq!(active(&r), Some(tasks(&[("0", &[0, 1, 2]), ("1", &[0, 1, 2])])));

    let g = describe(&mut client, "wc").await;
    assert_eq!((g.error_code, g.group_state.as_str(), g.group_epoch, g.assignment_epoch), (0, "Stable", 2, 2));
    let topology = g.topology.expect("topology");
    let subtopologies = topology.subtopologies.expect("configured");
    assert_eq!(subtopologies[1].state_changelog_topics[0].partitions, 3, "the decided count is described");
    assert_eq!(g.members.len(), 1);
    assert_eq!(g.members[0].process_id, "process-a");
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn tasks_move_to_a_new_member_only_after_revocation() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "in", 4).await;

    let r = heartbeat(&mut client, &join("g", "a", simple_topology("in"))).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    assert_eq!(active(&r), Some(tasks(&[("0", &[0, 1, 2, 3])])));

    // b joins: its share is still a's, so it gets nothing yet.
    let r = heartbeat(&mut client, &join("g", "b", simple_topology("in"))).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(active(&r), Some(BTreeMap::new()));
    let b_target = describe(&mut client, "g").await.members.iter().find(|m| m.member_id == "b").unwrap().clone();
    let b_share: Vec<i32> = b_target.target_assignment.active_tasks[0].partitions.clone();
    assert_eq!(b_share.len(), 2);
    let a_keeps: Vec<i32> = (0..4).filter(|p| !b_share.contains(p)).collect();

    // a must revoke first: it stays at epoch 1 and is sent what it keeps.
    let r = heartbeat(&mut client, &beat("g", "a", 1, Some(&[("0", &[0, 1, 2, 3])]))).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    assert_eq!(active(&r), Some(tasks(&[("0", &a_keeps)])));
    assert_eq!(describe(&mut client, "g").await.group_state, "Reconciling");

    // Until a's heartbeat no longer lists them, b gets nothing.
    let r = heartbeat(&mut client, &beat("g", "b", 2, Some(&[]))).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 2));
    assert_eq!(active(&r), None, "unchanged");

    let r = heartbeat(&mut client, &beat("g", "a", 1, Some(&[("0", &a_keeps)]))).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 2), "revoked: a moves to the new epoch");

    let r = heartbeat(&mut client, &beat("g", "b", 2, None)).await;
    assert_eq!(active(&r), Some(tasks(&[("0", &b_share)])));

    let g = describe(&mut client, "g").await;
    assert_eq!(g.group_state, "Stable");
    for m in &g.members {
        assert_eq!(m.assignment, m.target_assignment, "{}", m.member_id);
        assert_eq!(m.assignment.active_tasks[0].partitions.len(), 2);
    }

    // b leaves: its tasks go back to a at a's next heartbeat, at once (no
    // one else owns them).
    let left = heartbeat(&mut client, &beat("g", "b", -1, None)).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -1));
    let r = heartbeat(&mut client, &beat("g", "a", 2, Some(&[("0", &a_keeps)]))).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 3));
    assert_eq!(active(&r), Some(tasks(&[("0", &[0, 1, 2, 3])])));
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn standby_tasks_go_to_another_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    config.group_streams.num_standby_replicas = 1;
    let broker = TestBroker::start_with(dir, Default::default(), config).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "in", 2).await;

    heartbeat(&mut client, &join("s", "a", simple_topology("in"))).await;
    let r = heartbeat(&mut client, &join("s", "b", simple_topology("in"))).await;
    assert_eq!(r.error_code, error_code::NONE);
    let r = heartbeat(&mut client, &beat("s", "a", 1, Some(&[("0", &[0, 1])]))).await;
    let a_active = active(&r).unwrap_or_default();
    let r = heartbeat(&mut client, &beat("s", "a", r.member_epoch, Some(&[("0", &a_active["0"])]))).await;
    assert_eq!(r.error_code, error_code::NONE);
    heartbeat(&mut client, &beat("s", "b", 2, Some(&[]))).await;
    let g = describe(&mut client, "s").await;
    for m in &g.members {
        let own: Vec<i32> = m.target_assignment.active_tasks.iter().flat_map(|t| t.partitions.clone()).collect();
        let standby: Vec<i32> = m.target_assignment.standby_tasks.iter().flat_map(|t| t.partitions.clone()).collect();
        assert_eq!(own.len(), 1, "{m:?}");
        assert_eq!(standby.len(), 1, "{m:?}");
        assert_ne!(own, standby, "a task's standby copy is never with its active copy");
    }
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn a_member_that_stops_heartbeating_is_fenced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    config.group_streams.session_timeout_ms = 300;
    let broker = TestBroker::start_with(dir, Default::default(), config).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "in", 2).await;

    let r = heartbeat(&mut client, &join("f", "a", simple_topology("in"))).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));
    tokio::time::sleep(Duration::from_millis(900)).await;
    let g = describe(&mut client, "f").await;
    assert_eq!((g.group_state.as_str(), g.members.len()), ("Empty", 0), "fenced by its session deadline");
    let r = heartbeat(&mut client, &beat("f", "a", 1, None)).await;
    assert_eq!(r.error_code, error_code::UNKNOWN_MEMBER_ID);
    let r = heartbeat(&mut client, &join("f", "a", simple_topology("in"))).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 3), "it rejoins at a new epoch");
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn members_commit_offsets_with_their_epoch() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "in", 1).await;
    let r = heartbeat(&mut client, &join("c", "a", simple_topology("in"))).await;
    assert_eq!((r.error_code, r.member_epoch), (0, 1));

    let commit = |member: &str, epoch: i32| {
        messages::OffsetCommitRequest(
            OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_string("c".into())))
                .with_member_id(StrBytes::from_string(member.into()))
                .with_generation_id_or_member_epoch(epoch)
                .with_topics(vec![OffsetCommitRequestTopic::default().with_name(common::name("in")).with_partitions(
                    vec![OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(7)],
                )]),
        )
    };
    let code = |r: messages::OffsetCommitResponse| r.topics[0].partitions[0].error_code;
    assert_eq!(code(client.call(9, &commit("a", 1)).await), error_code::NONE);
    assert_eq!(code(client.call(9, &commit("a", 5)).await), error_code::STALE_MEMBER_EPOCH);
    assert_eq!(code(client.call(9, &commit("z", 1)).await), error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(code(client.call(8, &commit("a", 1)).await), error_code::UNSUPPORTED_VERSION);
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn bad_heartbeats_get_kafkas_errors() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "in", 1).await;
    let refused = |r: &StreamsGroupHeartbeatResponse| (r.error_code, r.error_message.clone().unwrap_or_default());

    let r = heartbeat(&mut client, &join("bad", "", simple_topology("in"))).await;
    assert_eq!(refused(&r), (error_code::INVALID_REQUEST, "MemberId can't be empty.".into()));
    let r = heartbeat(
        &mut client,
        &StreamsGroupHeartbeatRequest { topology: None, ..join("bad", "a", simple_topology("in")) },
    )
    .await;
    assert_eq!(refused(&r), (error_code::INVALID_REQUEST, "Topology must be non-null when (re-)joining.".into()));
    let r = heartbeat(
        &mut client,
        &StreamsGroupHeartbeatRequest { rebalance_timeout_ms: -1, ..join("bad", "a", simple_topology("in")) },
    )
    .await;
    assert_eq!(
        refused(&r),
        (error_code::INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.".into())
    );
    let mut with_regex = simple_topology("in");
    with_regex.subtopologies[0].source_topic_regex = vec!["i.*".into()];
    let r = heartbeat(&mut client, &join("bad", "a", with_regex)).await;
    assert_eq!(
        refused(&r),
        (error_code::INVALID_REQUEST, "Regular expressions for source topics are not supported yet.".into())
    );
    let mut sized_changelog = simple_topology("in");
    sized_changelog.subtopologies[0].state_changelog_topics = vec![info("bad-store-changelog", 4)];
    let r = heartbeat(&mut client, &join("bad", "a", sized_changelog)).await;
    assert_eq!(r.error_code, error_code::STREAMS_INVALID_TOPOLOGY);
    let r =
        heartbeat(&mut client, &StreamsGroupHeartbeatRequest { member_epoch: -3, ..beat("bad", "a", 0, None) }).await;
    assert_eq!(
        refused(&r),
        (error_code::INVALID_REQUEST, "MemberEpoch is -3, but must be greater than or equal to -2.".into())
    );
    let r =
        heartbeat(&mut client, &StreamsGroupHeartbeatRequest { standby_tasks: None, ..beat("bad", "a", 1, Some(&[])) })
            .await;
    assert_eq!(
        refused(&r),
        (error_code::INVALID_REQUEST, "If one task-type is non-null, all must be non-null.".into())
    );
    let r = heartbeat(&mut client, &beat("nowhere", "a", 1, None)).await;
    assert_eq!(r.error_code, error_code::UNKNOWN_MEMBER_ID);

    // A missing source topic: joined, told, no tasks.
    let r = heartbeat(&mut client, &join("missing", "a", simple_topology("absent"))).await;
    assert_eq!((r.error_code, codes(&r)), (error_code::NONE, vec![STATUS_MISSING_SOURCE_TOPICS]));
    assert_eq!(active(&r), Some(BTreeMap::new()));

    // Topology epochs: another topology at the same epoch is refused; an
    // older epoch joins with STALE_TOPOLOGY.
    let r = heartbeat(&mut client, &join("epochs", "a", Topology { epoch: 2, ..simple_topology("in") })).await;
    assert_eq!(r.error_code, error_code::NONE);
    let mut other = simple_topology("in");
    other.epoch = 2;
    other.subtopologies[0].subtopology_id = "other".into();
    let r = heartbeat(&mut client, &join("epochs", "b", other)).await;
    assert_eq!(refused(&r), (error_code::INVALID_REQUEST, "Topology updates are not supported yet.".into()));
    let r = heartbeat(&mut client, &join("epochs", "c", Topology { epoch: 1, ..simple_topology("in") })).await;
    assert_eq!((r.error_code, codes(&r)), (error_code::NONE, vec![STATUS_STALE_TOPOLOGY]));
    // An epoch ahead of the member's is fenced.
    let r = heartbeat(&mut client, &beat("epochs", "a", 9, None)).await;
    assert_eq!(r.error_code, error_code::FENCED_MEMBER_EPOCH);

    // One namespace: the consumer protocol cannot use a streams group, nor the reverse.
    let consumer = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_string("epochs".into())))
        .with_member_id(StrBytes::from_string("m".into()))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![common::name("in")]))
        .with_topic_partitions(Some(vec![]));
    let r = client.call(1, &consumer).await;
    assert_eq!(r.error_code, error_code::GROUP_ID_NOT_FOUND);
    let consumer = consumer.with_group_id(GroupId(StrBytes::from_string("kip848".into())));
    assert_eq!(client.call(1, &consumer).await.error_code, error_code::NONE);
    let r = heartbeat(&mut client, &join("kip848", "a", simple_topology("in"))).await;
    assert_eq!(refused(&r), (error_code::GROUP_ID_NOT_FOUND, "Group kip848 is not a streams group.".into()));
    let g = describe(&mut client, "kip848").await;
    assert_eq!(g.error_code, error_code::GROUP_ID_NOT_FOUND);
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn streams_groups_are_listed_and_deleted_as_kafka_does() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "in", 1).await;
    heartbeat(&mut client, &join("app", "a", simple_topology("in"))).await;

    let listed = client
        .call(5, &ListGroupsRequest::default().with_types_filter(vec![StrBytes::from_static_str("streams")]))
        .await;
    let groups: Vec<(&str, &str, &str, &str)> = listed
        .groups
        .iter()
        .map(|g| (g.group_id.as_str(), g.protocol_type.as_str(), g.group_state.as_str(), g.group_type.as_str()))
        .collect();
    assert_eq!(groups, vec![("app", "streams", "Stable", "streams")]);

    let described = client
        .call(6, &DescribeGroupsRequest::default().with_groups(vec![GroupId(StrBytes::from_static_str("app"))]))
        .await;
    assert_eq!(described.groups[0].error_code, error_code::GROUP_ID_NOT_FOUND);

    let delete = DeleteGroupsRequest::from(
        kafka_protocol::messages::DeleteGroupsRequest::default()
            .with_groups_names(vec![GroupId(StrBytes::from_static_str("app"))]),
    );
    let r = client.call(2, &delete).await;
    assert_eq!(r.results[0].result.error_code, error_code::NON_EMPTY_GROUP);
    heartbeat(&mut client, &beat("app", "a", -1, None)).await;
    let r = client.call(2, &delete).await;
    assert_eq!(r.results[0].result.error_code, error_code::NONE);
    assert_eq!(describe(&mut client, "app").await.error_code, error_code::GROUP_ID_NOT_FOUND);
    broker.broker.shutdown().await;
}
