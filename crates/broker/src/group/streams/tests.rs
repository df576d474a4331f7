//! The pure parts of streams groups: configuring a topology against topics,
//! the task assignor, and the deadlines with a hand-advanced clock.

use std::collections::{BTreeMap, BTreeSet};

use kafgres_wire::error_code;
use uuid::Uuid;

use super::assignor::{assign, AssignmentSpec};
use super::topology::configure;
use super::types::*;
use crate::group::consumer::types::TopicLookup;
use crate::group::{GroupConfig, GroupCoordinator, GroupState};

struct Topics(BTreeMap<String, i32>);

impl TopicLookup for Topics {
    fn topic(&self, name: &str) -> Option<(Uuid, i32)> {
        self.0.get(name).map(|&n| (Uuid::from_u128(name.len() as u128), n))
    }
    fn topic_name(&self, _id: Uuid) -> Option<String> {
        None
    }
    fn topic_names(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

fn topics(list: &[(&str, i32)]) -> Topics {
    Topics(list.iter().map(|(n, p)| (n.to_string(), *p)).collect())
}

fn info(name: &str, partitions: i32) -> StreamsTopicInfo {
    StreamsTopicInfo { name: name.into(), partitions, replication_factor: 0, configs: BTreeMap::new() }
}

fn sub(
    id: &str,
    sources: &[&str],
    sinks: &[&str],
    repartition: &[StreamsTopicInfo],
    changelogs: &[&str],
) -> StreamsSubtopology {
    StreamsSubtopology {
        subtopology_id: id.into(),
        source_topics: sources.iter().map(|s| s.to_string()).collect(),
        repartition_sink_topics: sinks.iter().map(|s| s.to_string()).collect(),
        state_changelog_topics: changelogs.iter().map(|c| info(c, 0)).collect(),
        repartition_source_topics: repartition.to_vec(),
        copartition_groups: Vec::new(),
    }
}

#[test]
fn internal_topics_take_their_partition_counts_from_the_sources() {
    // 0 reads a (4) and b (2) into r1; 1 reads r1 into r2 (fixed at 6); 2 reads r2 with a store.
    let topology = StreamsTopology {
        epoch: 0,
        subtopologies: vec![
            sub("0", &["a", "b"], &["r1"], &[], &[]),
            sub("1", &[], &["r2"], &[info("r1", 0)], &["s1-changelog"]),
            sub("2", &[], &[], &[info("r2", 6)], &["s2-changelog"]),
        ],
    };
    let c = configure(&topology, &topics(&[("a", 4), ("b", 2)]));
    let missing: BTreeMap<&str, i32> =
        c.missing_internal_topics.iter().map(|t| (t.name.as_str(), t.partitions)).collect();
    assert_eq!(missing, BTreeMap::from([("r1", 4), ("r2", 6), ("s1-changelog", 4), ("s2-changelog", 6)]));
    assert_eq!(c.status.as_ref().map(|s| s.code), Some(status::MISSING_INTERNAL_TOPICS));
    assert!(!c.is_ready());
    let changelog = c.missing_internal_topics.iter().find(|t| t.name == "s1-changelog").unwrap();
    assert_eq!(changelog.configs.get("cleanup.policy").map(String::as_str), Some("compact"));

    let all = topics(&[("a", 4), ("b", 2), ("r1", 4), ("r2", 6), ("s1-changelog", 4), ("s2-changelog", 6)]);
    let c = configure(&topology, &all);
    assert!(c.is_ready(), "{c:?}");
    assert_eq!(c.task_counts(), BTreeMap::from([("0".into(), 4), ("1".into(), 4), ("2".into(), 6)]));

    let wrong = topics(&[("a", 4), ("b", 2), ("r1", 3)]);
    assert_eq!(configure(&topology, &wrong).status.map(|s| s.code), Some(status::INCORRECTLY_PARTITIONED_TOPICS));
    let c = configure(&topology, &topics(&[("a", 4)]));
    assert_eq!(
        c.status.map(|s| (s.code, s.detail)),
        Some((status::MISSING_SOURCE_TOPICS, "Source topics b are missing.".into()))
    );
}

#[test]
fn copartitioned_topics_agree() {
    let mut join = sub("0", &["left", "right"], &[], &[], &[]);
    join.copartition_groups = vec![BTreeSet::from(["left".to_string(), "right".to_string()])];
    let topology = StreamsTopology { epoch: 0, subtopologies: vec![join] };
    let c = configure(&topology, &topics(&[("left", 3), ("right", 2)]));
    assert_eq!(c.status.map(|s| s.code), Some(status::INCORRECTLY_PARTITIONED_TOPICS));
    assert!(configure(&topology, &topics(&[("left", 3), ("right", 3)])).is_ready());
}

fn tuple(active: &[(&str, &[i32])], standby: &[(&str, &[i32])]) -> TasksTuple {
    let tasks = |l: &[(&str, &[i32])]| l.iter().map(|(id, p)| (id.to_string(), p.iter().copied().collect())).collect();
    TasksTuple { active: tasks(active), standby: tasks(standby), warmup: Tasks::new() }
}

#[test]
fn the_assignor_balances_keeps_tasks_in_place_and_puts_standbys_elsewhere() {
    let counts = BTreeMap::from([("0".to_string(), 4), ("1".to_string(), 2)]);
    let previous = BTreeMap::from([("a".to_string(), tuple(&[("0", &[0, 1, 2, 3]), ("1", &[0, 1])], &[]))]);
    let spec = AssignmentSpec {
        members: BTreeMap::from([("a", "p1"), ("b", "p2"), ("c", "p3")]),
        task_counts: &counts,
        previous: &previous,
        num_standby_replicas: 1,
    };
    let out = assign(&spec);
    let active = |m: &str| out[m].active.values().map(BTreeSet::len).sum::<usize>();
    assert_eq!([active("a"), active("b"), active("c")], [2, 2, 2], "{out:?}");
    assert!(out["a"].active["0"].is_subset(&BTreeSet::from([0, 1, 2, 3])), "a keeps what it had: {out:?}");
    for (member, t) in &out {
        for (id, partitions) in &t.standby {
            for p in partitions {
                assert!(!t.active.get(id).is_some_and(|a| a.contains(p)), "{member} has {id}_{p} twice");
            }
        }
    }
    let standbys: usize = out.values().map(|t| t.standby.values().map(BTreeSet::len).sum::<usize>()).sum();
    assert_eq!(standbys, 6, "one standby per task");

    // One process: nowhere to put a standby.
    let spec = AssignmentSpec { members: BTreeMap::from([("a", "p"), ("b", "p")]), ..spec };
    assert!(assign(&spec).values().all(|t| t.standby.is_empty()));
}

fn join(member: &str) -> StreamsHeartbeatRequest {
    let topology = StreamsTopology { epoch: 0, subtopologies: vec![sub("0", &["in"], &[], &[], &[])] };
    StreamsHeartbeatRequest {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        endpoint_information_epoch: 0,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: 1_000,
        topology: Some(Ok(topology)),
        active_tasks: None,
        standby_tasks: None,
        warmup_tasks: None,
        process_id: Some(format!("p-{member}")),
        user_endpoint: Some(StreamsEndpoint { host: member.into(), port: 1 }),
        client_tags: None,
        shutdown_application: false,
        uses_source_regex: false,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
    }
}

fn beat(member: &str, epoch: i32, active: Option<&[i32]>) -> StreamsHeartbeatRequest {
    let tasks = active.map(|p| Tasks::from([("0".to_string(), p.iter().copied().collect())]));
    StreamsHeartbeatRequest {
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        topology: None,
        active_tasks: tasks.clone(),
        standby_tasks: tasks.as_ref().map(|_| Tasks::new()),
        warmup_tasks: tasks.as_ref().map(|_| Tasks::new()),
        process_id: None,
        user_endpoint: None,
        ..join(member)
    }
}

#[test]
fn deadlines_fence_silent_and_unrevoking_members() {
    let mut config = GroupConfig::default();
    config.streams.session_timeout_ms = 10_000;
    let mut c = GroupCoordinator::with_sequential_member_ids(config);
    let t = topics(&[("in", 2)]);
    let (r, _) = c.streams_group_heartbeat(0, join("a"), &t);
    assert_eq!((r.error_code, r.member_epoch), (error_code::NONE, 1));
    let (r, _) = c.streams_group_heartbeat(100, join("b"), &t);
    assert_eq!((r.error_code, r.member_epoch), (error_code::NONE, 2));
    // Endpoints: b learns what a serves.
    assert_eq!(r.partitions_by_user_endpoint.map(|e| e.len()), Some(2));
    // a must revoke one task and never does: its rebalance timeout (1 s) fences it.
    let (r, _) = c.streams_group_heartbeat(200, beat("a", 1, Some(&[0, 1])), &t);
    assert_eq!((r.member_epoch, r.tasks.map(|t| t.active["0"].len())), (1, Some(1)));
    let _ = c.on_deadline(1_300);
    let (r, _) = c.streams_group_heartbeat(1_400, beat("a", 1, None), &t);
    assert_eq!(r.error_code, error_code::UNKNOWN_MEMBER_ID);
    // b heartbeats until 9 s, then stops: its session ends at 19 s.
    let (r, _) = c.streams_group_heartbeat(9_000, beat("b", 2, Some(&[])), &t);
    assert_eq!(r.tasks.map(|t| t.active["0"].len()), Some(2), "a's tasks are free once it is fenced");
    let _ = c.on_deadline(18_999);
    assert_ne!(c.group_state("g"), Some(GroupState::Empty));
    let _ = c.on_deadline(19_000);
    assert_eq!(c.group_state("g"), Some(GroupState::Empty));
}

#[test]
fn a_static_member_returns_with_its_tasks_and_a_left_one_is_fenced_when_its_session_ends() {
    let mut config = GroupConfig::default();
    config.streams.session_timeout_ms = 10_000;
    let mut c = GroupCoordinator::with_sequential_member_ids(config);
    let t = topics(&[("in", 2)]);
    let stat = |member: &str, request: StreamsHeartbeatRequest| StreamsHeartbeatRequest {
        instance_id: Some("i1".into()),
        ..StreamsHeartbeatRequest { member_id: member.into(), ..request }
    };
    let (r, _) = c.streams_group_heartbeat(0, stat("s1", join("s1")), &t);
    assert_eq!((r.error_code, r.member_epoch), (error_code::NONE, 1));
    let given = r.tasks.expect("a joining member is sent its tasks");
    assert_eq!(given.active["0"].len(), 2);

    // Another process with the same instance id while s1 is active.
    let (r, _) = c.streams_group_heartbeat(100, stat("s2", join("s2")), &t);
    assert_eq!(r.error_code, error_code::UNRELEASED_INSTANCE_ID);
    // s1 leaves temporarily (epoch -2): kept, so s2 takes over its tasks without a new group epoch.
    let (r, _) = c.streams_group_heartbeat(200, stat("s1", beat("s1", -2, None)), &t);
    assert_eq!((r.error_code, r.member_epoch), (error_code::NONE, -2));
    // The same process (Streams keeps its process id in the state directory) under a new member id.
    let returning = StreamsHeartbeatRequest { process_id: Some("p-s1".into()), ..join("s2") };
    let (r, _) = c.streams_group_heartbeat(300, stat("s2", returning), &t);
    assert_eq!((r.error_code, r.member_epoch), (error_code::NONE, 1), "no rebalance: the group epoch stays 1");
    assert_eq!(r.tasks.map(|tasks| tasks.active), Some(given.active));
    // The old member id is no member any more (streams heartbeats look members up by id).
    let (r, _) = c.streams_group_heartbeat(400, stat("s1", beat("s1", 1, None)), &t);
    assert_eq!(r.error_code, error_code::UNKNOWN_MEMBER_ID);

    // s2 leaves temporarily and never returns: the session of its last heartbeat (at 300 ms,
    // 10 s long) ends and it is fenced.
    let (r, _) = c.streams_group_heartbeat(500, stat("s2", beat("s2", -2, None)), &t);
    assert_eq!(r.error_code, error_code::NONE);
    assert_ne!(c.group_state("g"), Some(GroupState::Empty), "a left static member is kept");
    let _ = c.on_deadline(10_299);
    assert_ne!(c.group_state("g"), Some(GroupState::Empty));
    let _ = c.on_deadline(10_300);
    assert_eq!(c.group_state("g"), Some(GroupState::Empty));
}

#[test]
fn a_full_streams_group_refuses_a_new_member_with_kafkas_message() {
    let config = GroupConfig { group_members_max: 1, ..GroupConfig::default() };
    let mut c = GroupCoordinator::with_sequential_member_ids(config);
    let t = topics(&[("in", 2)]);
    let (r, _) = c.streams_group_heartbeat(0, join("a"), &t);
    assert_eq!(r.error_code, error_code::NONE);
    let (r, _) = c.streams_group_heartbeat(10, join("b"), &t);
    assert_eq!(r.error_code, error_code::GROUP_MAX_SIZE_REACHED);
    assert_eq!(r.error_message.as_deref(), Some("The streams group has reached its maximum capacity of 1 members."));
}
