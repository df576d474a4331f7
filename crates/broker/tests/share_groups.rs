//! Share groups (KIP-932) over the wire: members splitting a partition's
//! records, acknowledgements, lock timeouts and delivery limits, the long
//! poll, restarts, and the errors Kafka answers for bad input.
//! Every wait is bounded (the harness's read timeout, explicit deadlines).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::txn;
use common::{batch, create_topic, decode_records, produce, records, Client, TestBroker};
use kafgres_broker::share::{AutoOffsetReset, IsolationLevel};
use kafgres_broker::{BrokerConfig, MemoryCatalog};
use kafgres_wire::{error_code, messages};
use kafka_protocol::messages::share_acknowledge_request::{AcknowledgePartition, AcknowledgeTopic};
use kafka_protocol::messages::share_fetch_request::{AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{
    GroupId, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
    ShareGroupDescribeRequest, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const REJECT: i8 = 3;
const RENEW: i8 = 4;

fn config(dir: &tempfile::TempDir) -> BrokerConfig {
    let mut config = BrokerConfig::for_tests(dir.path().to_path_buf());
    // Most tests produce before the group first reads.
    config.share.group_defaults.auto_offset_reset = AutoOffsetReset::Earliest;
    config
}

async fn start(adjust: impl FnOnce(&mut BrokerConfig)) -> (TestBroker, BrokerConfig) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(&dir);
    adjust(&mut c);
    (TestBroker::start_with(dir, Arc::new(MemoryCatalog::default()), c.clone()).await, c)
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

async fn heartbeat(
    client: &mut Client,
    member: &str,
    epoch: i32,
    topics: Option<&[&str]>,
) -> ShareGroupHeartbeatResponse {
    let request = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names(topics.map(|t| t.iter().map(|n| common::name(n)).collect()));
    client.call(1, &request).await
}

/// Acknowledgements of one partition: (first, last, types).
type Acks = Vec<(i64, i64, Vec<i8>)>;

fn ack_batches(acks: &Acks) -> Vec<AcknowledgementBatch> {
    acks.iter()
        .map(|(first, last, types)| {
            AcknowledgementBatch::default()
                .with_first_offset(*first)
                .with_last_offset(*last)
                .with_acknowledge_types(types.clone())
        })
        .collect()
}

struct Fetch<'a> {
    member: &'a str,
    epoch: i32,
    topic_id: Uuid,
    acks: Acks,
    records_max: i32,
    wait_ms: i32,
}

impl<'a> Fetch<'a> {
    fn new(member: &'a str, epoch: i32, topic_id: Uuid) -> Fetch<'a> {
        Fetch { member, epoch, topic_id, acks: Vec::new(), records_max: 500, wait_ms: 0 }
    }

    fn request(&self) -> ShareFetchRequest {
        let partition =
            FetchPartition::default().with_partition_index(0).with_acknowledgement_batches(ack_batches(&self.acks));
        ShareFetchRequest::default()
            .with_group_id(Some(GroupId(s("g"))))
            .with_member_id(Some(s(self.member)))
            .with_share_session_epoch(self.epoch)
            .with_max_wait_ms(self.wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_max_records(self.records_max)
            .with_batch_size(self.records_max)
            .with_topics(vec![FetchTopic::default().with_topic_id(self.topic_id).with_partitions(vec![partition])])
    }

    async fn send(&self, client: &mut Client) -> ShareFetchResponse {
        client.call(1, &self.request()).await
    }
}

/// (first, last, delivery count) of every acquired range, partition 0.
fn acquired(r: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    r.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| &p.acquired_records)
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

/// The acquired offsets, checked against the records sent (each must be in a batch).
fn acquired_offsets(r: &ShareFetchResponse) -> Vec<i64> {
    let partition = &r.responses[0].partitions[0];
    let sent: Vec<i64> =
        partition.records.as_ref().map(|b| decode_records(b).into_iter().map(|(o, _)| o).collect()).unwrap_or_default();
    let offsets: Vec<i64> = acquired(r).iter().flat_map(|(first, last, _)| *first..=*last).collect();
    for o in &offsets {
        assert!(sent.contains(o), "acquired offset {o} is not in the records sent ({sent:?})");
    }
    offsets
}

async fn acknowledge(
    client: &mut Client,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &Acks,
) -> ShareAcknowledgeResponse {
    client.call(1, &acknowledge_request(member, epoch, topic_id, acks)).await
}

fn acknowledge_request(member: &str, epoch: i32, topic_id: Uuid, acks: &Acks) -> ShareAcknowledgeRequest {
    let partition = AcknowledgePartition::default().with_partition_index(0).with_acknowledgement_batches(
        acks.iter()
            .map(|(first, last, types)| {
                kafka_protocol::messages::share_acknowledge_request::AcknowledgementBatch::default()
                    .with_first_offset(*first)
                    .with_last_offset(*last)
                    .with_acknowledge_types(types.clone())
            })
            .collect(),
    );
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s("g"))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![AcknowledgeTopic::default().with_topic_id(topic_id).with_partitions(vec![partition])])
}

async fn produce_records(client: &mut Client, tag: &str, count: usize) {
    let p = produce(client, 9, "t", 0, -1, batch(&records(tag, count))).await;
    assert_eq!(p.error_code, 0);
}

/// A topic `t` with records 0..count and members joined to group `g`.
async fn topic_with_members(broker: &TestBroker, count: usize, members: &[&str]) -> (Client, Uuid) {
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "t", 1).await;
    if count > 0 {
        produce_records(&mut client, "r", count).await;
    }
    for m in members {
        let r = heartbeat(&mut client, m, 0, Some(&["t"])).await;
        assert_eq!(r.error_code, 0, "{r:?}");
    }
    (client, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_split_the_records_of_one_partition() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 10, &["a", "b"]).await;
    // One partition, two members: both are assigned it.
    let a = heartbeat(&mut client, "a", 1, None).await;
    assert_eq!((a.error_code, a.member_epoch), (0, 2));
    assert_eq!(a.assignment.map(|x| x.topic_partitions[0].partitions.clone()), Some(vec![0]));
    let mut fetch = Fetch::new("a", 0, id);
    fetch.records_max = 4;
    let first = fetch.send(&mut client).await;
    assert_eq!((first.error_code, first.acquisition_lock_timeout_ms), (0, 30_000));
    let mut b_client = broker.client().await;
    let mut fetch_b = Fetch::new("b", 0, id);
    fetch_b.records_max = 100;
    let second = fetch_b.send(&mut b_client).await;
    let (mine, theirs) = (acquired_offsets(&first), acquired_offsets(&second));
    assert_eq!(mine, (0..4).collect::<Vec<_>>());
    assert_eq!(theirs, (4..10).collect::<Vec<_>>(), "b gets what a does not hold");
    assert!(acquired(&first).iter().chain(&acquired(&second)).all(|(_, _, count)| *count == 1));
    // Nothing left for either.
    let again = Fetch::new("a", 1, id).send(&mut client).await;
    assert!(acquired(&again).is_empty(), "{again:?}");
    // Describe: both members, Stable, the simple assignor.
    let d = client
        .call(1, &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g")), GroupId(s("nope"))]))
        .await;
    assert_eq!((d.groups[0].error_code, d.groups[0].group_state.as_str()), (0, "Stable"));
    assert_eq!(d.groups[0].members.len(), 2);
    assert_eq!(d.groups[0].assignor_name.as_str(), "simple");
    assert_eq!(d.groups[1].error_code, error_code::GROUP_ID_NOT_FOUND);
    // ListGroups v5 lists it by its type; a consumer-type filter does not.
    let listed = |types: &[&str]| {
        kafka_protocol::messages::ListGroupsRequest::default().with_types_filter(types.iter().map(|t| s(t)).collect())
    };
    let shares = client.call(5, &listed(&["share"])).await;
    let row: Vec<(&str, &str, &str, &str)> = shares
        .groups
        .iter()
        .map(|g| (g.group_id.0.as_str(), g.protocol_type.as_str(), g.group_state.as_str(), g.group_type.as_str()))
        .collect();
    assert_eq!(row, vec![("g", "share", "Stable", "share")]);
    assert!(client.call(5, &listed(&["consumer"])).await.groups.is_empty());
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_release_and_reject_decide_what_is_delivered_again() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 10, &["a", "b"]).await;
    let got = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!(acquired(&got), vec![(0, 9, 1)]);
    // Accept 0-3, release 4-5, reject 6-9 (per-offset types for 4-9).
    let acks = vec![(0, 3, vec![ACCEPT]), (4, 9, vec![RELEASE, RELEASE, REJECT, REJECT, REJECT, REJECT])];
    let r = acknowledge(&mut client, "a", 1, id, &acks).await;
    assert_eq!((r.error_code, r.responses[0].partitions[0].error_code), (0, 0), "{r:?}");
    // DescribeShareGroupOffsets v1's lag: 10 records, the start at 4, 6-9
    // archived after it: 4 and 5 are left to deliver (Kafka's KIP-1226 lag).
    let offsets = client
        .call(
            1,
            &kafgres_wire::messages::DescribeShareGroupOffsetsRequest(
                kafka_protocol::messages::DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                    kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                        .with_group_id(GroupId(s("g")))
                        .with_topics(None),
                ]),
            ),
        )
        .await;
    let p = &offsets.groups[0].topics[0].partitions[0];
    assert_eq!((p.start_offset, p.lag), (4, 2), "{offsets:?}");
    // The released records go to b, delivered a second time.
    let mut b = broker.client().await;
    let redelivered = Fetch::new("b", 0, id).send(&mut b).await;
    assert_eq!(acquired(&redelivered), vec![(4, 5, 2)]);
    // b accepts them piggybacked on its next fetch.
    let mut next = Fetch::new("b", 1, id);
    next.acks = vec![(4, 5, vec![ACCEPT])];
    let r = next.send(&mut b).await;
    assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0, "{r:?}");
    assert!(acquired(&r).is_empty());
    // DescribeShareGroupOffsets answers the start offset (kafka-share-groups.sh --describe).
    let offsets = client
        .call(
            0,
            &kafka_protocol::messages::DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(s("g")))
                    .with_topics(None),
                kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(s("unknown"))),
            ]),
        )
        .await;
    let g = &offsets.groups[0];
    assert_eq!((g.topics[0].topic_name.0.as_str(), g.topics[0].topic_id), ("t", id));
    assert_eq!((g.topics[0].partitions[0].partition_index, g.topics[0].partitions[0].start_offset), (0, 10));
    assert_eq!(offsets.groups[1].error_code, error_code::GROUP_ID_NOT_FOUND);
    // Everything is done: the stored start offset is past the last record.
    let stored = broker.catalog.share_states();
    assert_eq!((stored.len(), stored[0].start_offset), (1, 10), "{stored:?}");
    assert!(stored[0].batches.is_empty());
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lock_redelivers_with_a_higher_delivery_count() {
    let (broker, _) = start(|c| c.share.group_defaults.record_lock_duration_ms = 400).await;
    let (mut client, id) = topic_with_members(&broker, 3, &["a", "b"]).await;
    let got = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!((acquired(&got), got.acquisition_lock_timeout_ms), (vec![(0, 2, 1)], 400));
    // b long-polls before the lock expires; the expiry (a timer, not a poll)
    // makes the records available and wakes it.
    let mut b = broker.client().await;
    let started = Instant::now();
    let mut wait = Fetch::new("b", 0, id);
    wait.wait_ms = 8_000;
    let r = wait.send(&mut b).await;
    assert_eq!(acquired(&r), vec![(0, 2, 2)]);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(200) && waited < Duration::from_secs(4), "woken after {waited:?}");
    // a's acknowledgement comes too late: the records are b's now.
    let late = acknowledge(&mut client, "a", 1, id, &vec![(0, 2, vec![ACCEPT])]).await;
    assert_eq!(late.responses[0].partitions[0].error_code, error_code::INVALID_RECORD_STATE);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delivery_count_limit_archives_a_record() {
    let (broker, _) = start(|c| c.share.group_defaults.delivery_count_limit = 2).await;
    let (mut client, id) = topic_with_members(&broker, 1, &["a"]).await;
    let mut epoch = 0;
    for delivery in 1..=2 {
        let got = Fetch::new("a", epoch, id).send(&mut client).await;
        assert_eq!(acquired(&got), vec![(0, 0, delivery)]);
        let r = acknowledge(&mut client, "a", epoch + 1, id, &vec![(0, 0, vec![RELEASE])]).await;
        assert_eq!(r.responses[0].partitions[0].error_code, 0);
        epoch += 2;
    }
    // Released after its second delivery: archived, never delivered again.
    let none = Fetch::new("a", epoch, id).send(&mut client).await;
    assert!(acquired(&none).is_empty(), "{none:?}");
    let stored = broker.catalog.share_states();
    assert_eq!(stored[0].start_offset, 1, "{stored:?}");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_is_woken_by_an_append() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 0, &["a"]).await;
    let mut consumer = broker.client().await;
    let poll = tokio::spawn(async move {
        let mut fetch = Fetch::new("a", 0, id);
        fetch.wait_ms = 10_000;
        let started = Instant::now();
        (fetch.send(&mut consumer).await, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    produce_records(&mut client, "late", 2).await;
    let (r, waited) = tokio::time::timeout(Duration::from_secs(8), poll).await.expect("answered").expect("task");
    assert_eq!(acquired(&r), vec![(0, 1, 1)]);
    assert!(waited < Duration::from_secs(5), "the append did not wake it ({waited:?})");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_starts_after_what_is_there_at_the_first_read() {
    let (broker, _) = start(|c| c.share.group_defaults.auto_offset_reset = AutoOffsetReset::Latest).await;
    let (mut client, id) = topic_with_members(&broker, 5, &["a"]).await;
    let first = Fetch::new("a", 0, id).send(&mut client).await;
    assert!(acquired(&first).is_empty(), "{first:?}");
    assert_eq!(first.responses[0].partitions[0].error_code, 0, "the partition is answered, empty");
    produce_records(&mut client, "new", 2).await;
    let next = Fetch::new("a", 1, id).send(&mut client).await;
    assert_eq!(acquired(&next), vec![(5, 6, 1)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_never_delivers_aborted_records() {
    let (broker, _) = start(|c| c.share.group_defaults.isolation_level = IsolationLevel::ReadCommitted).await;
    let (mut client, id) = topic_with_members(&broker, 0, &["a"]).await;
    let (pid, epoch, code) = txn::init(&mut client, "tx", 60_000).await;
    assert_eq!(code, 0);
    assert_eq!(
        txn::produce_txn_at(&mut client, 12, "tx", "t", 0, txn::txn_batch(pid, epoch, 0, 3, "aborted")).await,
        0
    );
    // Open transaction: nothing is stable yet.
    let open = Fetch::new("a", 0, id).send(&mut client).await;
    assert!(acquired(&open).is_empty(), "{open:?}");
    let ended = txn::end_answer(&mut client, 5, "tx", pid, epoch, false).await;
    assert_eq!(ended.error_code, 0);
    produce_records(&mut client, "plain", 2).await;
    // 0-2 aborted, 3 the abort marker: archived; 4-5 delivered.
    let got = Fetch::new("a", 1, id).send(&mut client).await;
    assert_eq!(acquired(&got), vec![(4, 5, 1)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_acknowledgements_and_delivery_counts() {
    let (broker, config) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 10, &["a"]).await;
    let got = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!(acquired(&got), vec![(0, 9, 1)]);
    let r = acknowledge(&mut client, "a", 1, id, &vec![(0, 4, vec![ACCEPT])]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    drop(client);
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_with(dir, catalog, config).await;
    let mut client = broker.client().await;
    // Membership is not stored: the member joins again; 0-4 stay accepted,
    // 5-9 lost their lock with the restart and come back, second delivery.
    assert_eq!(heartbeat(&mut client, "a", 0, Some(&["t"])).await.error_code, 0);
    let again = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!(acquired(&again), vec![(5, 9, 2)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_leaves_releases_its_records() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 2, &["a", "b"]).await;
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(0, 1, 1)]);
    let left = heartbeat(&mut client, "a", -1, None).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -1));
    let mut b = broker.client().await;
    assert_eq!(acquired(&Fetch::new("b", 0, id).send(&mut b).await), vec![(0, 1, 2)]);
    // Its session went with it.
    let gone = Fetch::new("a", 1, id).send(&mut client).await;
    assert_eq!(gone.error_code, error_code::SHARE_SESSION_NOT_FOUND);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_kafkas_error_codes() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 3, &["a"]).await;
    // Heartbeats.
    assert_eq!(heartbeat(&mut client, "stranger", 3, None).await.error_code, error_code::UNKNOWN_MEMBER_ID);
    assert_eq!(heartbeat(&mut client, "a", 7, None).await.error_code, error_code::FENCED_MEMBER_EPOCH);
    let no_topics = heartbeat(&mut client, "c", 0, None).await;
    assert_eq!(no_topics.error_code, error_code::INVALID_REQUEST);
    assert_eq!(heartbeat(&mut client, "", 0, Some(&["t"])).await.error_code, error_code::INVALID_REQUEST);
    assert_eq!(heartbeat(&mut client, "stranger", -1, None).await.error_code, error_code::UNKNOWN_MEMBER_ID);
    // Sessions: acknowledgements on an initial fetch, unknown sessions, wrong epochs.
    let mut initial = Fetch::new("a", 0, id);
    initial.acks = vec![(0, 0, vec![ACCEPT])];
    let r = initial.send(&mut client).await;
    assert_eq!((r.error_code, r.acquisition_lock_timeout_ms), (error_code::INVALID_REQUEST, 0));
    assert_eq!(Fetch::new("a", 1, id).send(&mut client).await.error_code, error_code::SHARE_SESSION_NOT_FOUND);
    assert_eq!(acknowledge(&mut client, "a", 0, id, &vec![]).await.error_code, error_code::INVALID_SHARE_SESSION_EPOCH);
    assert_eq!(acknowledge(&mut client, "a", 1, id, &vec![]).await.error_code, error_code::SHARE_SESSION_NOT_FOUND);
    let opened = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!(acquired(&opened), vec![(0, 2, 1)]);
    assert_eq!(Fetch::new("a", 5, id).send(&mut client).await.error_code, error_code::INVALID_SHARE_SESSION_EPOCH);
    // Acknowledging what was never acquired, or with malformed types.
    let wrong = acknowledge(&mut client, "a", 1, id, &vec![(5, 6, vec![ACCEPT])]).await;
    assert_eq!(wrong.responses[0].partitions[0].error_code, error_code::INVALID_RECORD_STATE);
    let malformed = acknowledge(&mut client, "a", 2, id, &vec![(0, 2, vec![ACCEPT, REJECT])]).await;
    assert_eq!(malformed.responses[0].partitions[0].error_code, error_code::INVALID_REQUEST);
    // An unknown topic id in the session is answered per partition.
    let mut unknown = Fetch::new("a", 3, Uuid::from_u128(42));
    unknown.wait_ms = 100;
    let r = unknown.send(&mut client).await;
    let codes: Vec<(Uuid, i16)> =
        r.responses.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p.error_code))).collect();
    assert!(codes.contains(&(Uuid::from_u128(42), error_code::UNKNOWN_TOPIC_ID)), "{r:?}");
    // Forgetting it and closing the session (epoch -1) with a final acknowledgement.
    let forget = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s("g"))))
        .with_member_id(Some(s("a")))
        .with_share_session_epoch(4)
        .with_forgotten_topics_data(vec![ForgottenTopic::default()
            .with_topic_id(Uuid::from_u128(42))
            .with_partitions(vec![0])]);
    let r: ShareFetchResponse = client.call(1, &forget).await;
    assert!(r.responses.iter().all(|t| t.topic_id == id), "{r:?}");
    let mut close = Fetch::new("a", -1, id);
    close.acks = vec![(0, 2, vec![ACCEPT])];
    let r = close.send(&mut client).await;
    assert_eq!((r.error_code, r.responses[0].partitions[0].acknowledge_error_code), (0, 0), "{r:?}");
    assert!(acquired(&r).is_empty());
    assert_eq!(Fetch::new("a", 6, id).send(&mut client).await.error_code, error_code::SHARE_SESSION_NOT_FOUND);
    broker.broker.shutdown().await;
}

async fn alter_group_configs(client: &mut Client, changes: &[(&str, Option<&str>)]) -> (i16, Option<String>) {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let configs = changes
        .iter()
        .map(|(name, value)| {
            AlterableConfig::default()
                .with_name(s(name))
                .with_config_operation(if value.is_some() { 0 } else { 1 })
                .with_value(value.map(s))
        })
        .collect();
    let request = kafka_protocol::messages::IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default().with_resource_type(32).with_resource_name(s("g")).with_configs(configs),
    ]);
    let r = client.call(1, &request).await;
    (r.responses[0].error_code, r.responses[0].error_message.as_ref().map(|m| m.to_string()))
}

/// (name, value, source) of group `g`'s configs.
async fn describe_group_configs(client: &mut Client) -> Vec<(String, String, i8)> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let request = kafka_protocol::messages::DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default().with_resource_type(32).with_resource_name(s("g"))]);
    let r = client.call(4, &request).await;
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    r.results[0]
        .configs
        .iter()
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(), c.config_source))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_configs_are_set_described_and_kept_across_a_restart() {
    const GROUP_CONFIG: i8 = 8;
    const DEFAULT_CONFIG: i8 = 5;
    let (broker, config) = start(|c| c.share.group_defaults.auto_offset_reset = AutoOffsetReset::Latest).await;
    let (mut client, id) = topic_with_members(&broker, 4, &["a"]).await;
    let set = [("share.auto.offset.reset", Some("earliest")), ("share.record.lock.duration.ms", Some("15000"))];
    assert_eq!(alter_group_configs(&mut client, &set).await, (0, None));
    // Refused, and nothing of the request applied: a bad value, an unknown name.
    let (code, message) = alter_group_configs(&mut client, &[("share.isolation.level", Some("sometimes"))]).await;
    assert_eq!(code, error_code::INVALID_CONFIG);
    assert!(message.is_some_and(|m| m.contains("share.isolation.level")));
    let (code, _) =
        alter_group_configs(&mut client, &[("share.delivery.count.limit", Some("3")), ("nope", Some("1"))]).await;
    assert_eq!(code, error_code::INVALID_CONFIG);
    let described = describe_group_configs(&mut client).await;
    assert!(described.contains(&("share.auto.offset.reset".into(), "earliest".into(), GROUP_CONFIG)), "{described:?}");
    assert!(described.contains(&("share.delivery.count.limit".into(), "5".into(), DEFAULT_CONFIG)), "{described:?}");
    // The group starts at the log start, with the group's lock duration.
    let got = Fetch::new("a", 0, id).send(&mut client).await;
    assert_eq!((acquired(&got), got.acquisition_lock_timeout_ms), (vec![(0, 3, 1)], 15_000));
    drop(client);
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_with(dir, catalog, config).await;
    let mut client = broker.client().await;
    let described = describe_group_configs(&mut client).await;
    assert!(
        described.contains(&("share.record.lock.duration.ms".into(), "15000".into(), GROUP_CONFIG)),
        "{described:?}"
    );
    // Deleting one goes back to the default.
    assert_eq!(alter_group_configs(&mut client, &[("share.record.lock.duration.ms", None)]).await.0, 0);
    let described = describe_group_configs(&mut client).await;
    assert!(described.contains(&("share.record.lock.duration.ms".into(), "30000".into(), DEFAULT_CONFIG)));
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_ends_its_share_sessions_and_releases_their_records() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 2, &["a", "b"]).await;
    let mut a = broker.client().await;
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut a).await), vec![(0, 1, 1)]);
    drop(a);
    // b long-polls: the close releases a's records and wakes it.
    let mut wait = Fetch::new("b", 0, id);
    wait.wait_ms = 8_000;
    let started = Instant::now();
    let r = wait.send(&mut client).await;
    assert_eq!(acquired(&r), vec![(0, 1, 2)]);
    assert!(started.elapsed() < Duration::from_secs(5), "released only by the lock timeout");
    // a's session is gone with its connection.
    let mut again = broker.client().await;
    assert_eq!(Fetch::new("a", 1, id).send(&mut again).await.error_code, error_code::SHARE_SESSION_NOT_FOUND);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_groups_removes_an_empty_share_group_and_its_state() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 2, &["a"]).await;
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(0, 1, 1)]);
    let delete = || kafka_protocol::messages::DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g"))]);
    assert_eq!(client.call(2, &delete()).await.results[0].error_code, error_code::NON_EMPTY_GROUP);
    assert_eq!(heartbeat(&mut client, "a", -1, None).await.error_code, 0);
    assert_eq!(client.call(2, &delete()).await.results[0].error_code, 0);
    assert!(broker.catalog.share_states().is_empty(), "the share-partitions' states went with it");
    let d = client.call(1, &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))])).await;
    assert_eq!(d.groups[0].error_code, error_code::GROUP_ID_NOT_FOUND);
    assert_eq!(client.call(2, &delete()).await.results[0].error_code, error_code::GROUP_ID_NOT_FOUND);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_takes_its_share_partitions_with_it() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 2, &["a"]).await;
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(0, 1, 1)]);
    assert_eq!(broker.catalog.share_states().len(), 1);
    let delete = kafka_protocol::messages::DeleteTopicsRequest::default().with_topic_names(vec![common::name("t")]);
    let r = client.call(4, &delete).await;
    assert_eq!(r.responses[0].error_code, 0, "{r:?}");
    assert!(broker.catalog.share_states().is_empty());
    // The session still names it: answered UNKNOWN_TOPIC_ID, nothing acquired.
    let gone = Fetch::new("a", 1, id).send(&mut client).await;
    assert_eq!(gone.responses[0].partitions[0].error_code, error_code::UNKNOWN_TOPIC_ID, "{gone:?}");
    broker.broker.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// AlterShareGroupOffsets and DeleteShareGroupOffsets.

async fn alter_offsets(
    client: &mut Client,
    group: &str,
    topics: &[(&str, &[(i32, i64)])],
) -> kafka_protocol::messages::AlterShareGroupOffsetsResponse {
    use kafka_protocol::messages::alter_share_group_offsets_request::{
        AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
    };
    let topics = topics
        .iter()
        .map(|(name, partitions)| {
            AlterShareGroupOffsetsRequestTopic::default().with_topic_name(common::name(name)).with_partitions(
                partitions
                    .iter()
                    .map(|(index, start)| {
                        AlterShareGroupOffsetsRequestPartition::default()
                            .with_partition_index(*index)
                            .with_start_offset(*start)
                    })
                    .collect(),
            )
        })
        .collect();
    let request = kafka_protocol::messages::AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(topics);
    client.call(0, &request).await
}

/// (topic, partition, error code) of each partition in an AlterShareGroupOffsets answer.
fn altered(r: &kafka_protocol::messages::AlterShareGroupOffsetsResponse) -> Vec<(String, i32, i16)> {
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_name.to_string(), p.partition_index, p.error_code)))
        .collect()
}

async fn delete_offsets(
    client: &mut Client,
    group: &str,
    topics: &[&str],
) -> kafka_protocol::messages::DeleteShareGroupOffsetsResponse {
    use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
    let request = kafka_protocol::messages::DeleteShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(
            topics
                .iter()
                .map(|t| DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(common::name(t)))
                .collect(),
        );
    client.call(0, &request).await
}

/// (topic, error code, message) of each topic in a DeleteShareGroupOffsets answer.
fn deleted(r: &kafka_protocol::messages::DeleteShareGroupOffsetsResponse) -> Vec<(String, i16, Option<String>)> {
    r.responses
        .iter()
        .map(|t| (t.topic_name.to_string(), t.error_code, t.error_message.as_ref().map(|m| m.to_string())))
        .collect()
}

/// Group `g`'s start offsets as DescribeShareGroupOffsets gives every one: (topic, partition, start).
async fn start_offsets(client: &mut Client) -> Vec<(String, i32, i64)> {
    use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
    let request = kafka_protocol::messages::DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default().with_group_id(GroupId(s("g"))).with_topics(None),
    ]);
    let r = client.call(0, &request).await;
    assert_eq!(r.groups[0].error_code, 0, "{r:?}");
    r.groups[0]
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_name.to_string(), p.partition_index, p.start_offset)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn altering_offsets_needs_an_empty_group_and_redelivers_from_the_new_start() {
    let (broker, config) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 10, &["a"]).await;
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(0, 9, 1)]);
    let r = acknowledge(&mut client, "a", 1, id, &vec![(0, 9, vec![ACCEPT])]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    assert_eq!(start_offsets(&mut client).await, vec![("t".into(), 0, 10)]);
    // A member is in the group: refused as a whole, with Kafka's message.
    let busy = alter_offsets(&mut client, "g", &[("t", &[(0, 0)])]).await;
    assert_eq!(busy.error_code, error_code::NON_EMPTY_GROUP);
    assert_eq!(busy.error_message.as_deref(), Some("The group is not empty."));
    assert!(busy.responses.is_empty());
    let gone = alter_offsets(&mut client, "nope", &[("t", &[(0, 0)])]).await;
    assert_eq!(gone.error_code, error_code::GROUP_ID_NOT_FOUND);
    assert_eq!(gone.error_message.as_deref(), Some("Group nope not found."));
    assert_eq!(heartbeat(&mut client, "a", -1, None).await.error_code, 0);
    // Empty: partition 0 moves back to 3; an unknown topic or partition is answered per
    // partition, the topics refused before the group is looked at first (Kafka's order).
    let r = alter_offsets(&mut client, "g", &[("t", &[(0, 3), (7, 0)]), ("missing", &[(0, 0)])]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        altered(&r),
        vec![
            ("missing".into(), 0, error_code::UNKNOWN_TOPIC_OR_PARTITION),
            ("t".into(), 0, 0),
            ("t".into(), 7, error_code::UNKNOWN_TOPIC_OR_PARTITION),
        ]
    );
    assert_eq!((r.responses[0].topic_id, r.responses[1].topic_id), (Uuid::nil(), id));
    assert_eq!(start_offsets(&mut client).await, vec![("t".into(), 0, 3)]);
    let stored = broker.catalog.share_states();
    assert_eq!((stored.len(), stored[0].start_offset, stored[0].batches.len()), (1, 3, 0), "{stored:?}");
    // It survives a restart; the member comes back and gets 3-9 again, as new deliveries.
    drop(client);
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_with(dir, catalog, config).await;
    let mut client = broker.client().await;
    assert_eq!(heartbeat(&mut client, "a", 0, Some(&["t"])).await.error_code, 0);
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(3, 9, 1)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_offsets_starts_the_group_again_from_auto_offset_reset() {
    let (broker, config) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 6, &["a"]).await;
    let mut fetch = Fetch::new("a", 0, id);
    fetch.records_max = 4;
    assert_eq!(acquired(&fetch.send(&mut client).await), vec![(0, 3, 1)]);
    let r = acknowledge(&mut client, "a", 1, id, &vec![(0, 3, vec![ACCEPT])]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    let busy = delete_offsets(&mut client, "g", &["t"]).await;
    assert_eq!((busy.error_code, busy.responses.len()), (error_code::NON_EMPTY_GROUP, 0));
    assert_eq!(heartbeat(&mut client, "a", -1, None).await.error_code, 0);
    let r = delete_offsets(&mut client, "g", &["t", "missing"]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        deleted(&r),
        vec![
            ("t".into(), 0, None),
            (
                "missing".into(),
                error_code::UNKNOWN_TOPIC_OR_PARTITION,
                Some("This server does not host this topic-partition.".into())
            ),
        ]
    );
    assert_eq!(r.responses[0].topic_id, id);
    assert!(start_offsets(&mut client).await.is_empty(), "no state left to describe");
    // Stored as a tombstone, which keeps the version: an older write cannot bring the state back.
    let stored = broker.catalog.share_states();
    assert_eq!((stored.len(), stored[0].start_offset), (1, kafgres_broker::catalog::UNSET_START_OFFSET));
    let again = delete_offsets(&mut client, "g", &["t"]).await;
    assert_eq!(
        deleted(&again),
        vec![(
            "t".into(),
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            Some("There is no offset information to delete.".into())
        )]
    );
    // Across a restart the group is still known, and reads from share.auto.offset.reset
    // (earliest here): every record again, first deliveries.
    drop(client);
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_with(dir, catalog, config).await;
    let mut client = broker.client().await;
    assert_eq!(delete_offsets(&mut client, "g", &["t"]).await.error_code, 0, "the group is still known");
    assert_eq!(heartbeat(&mut client, "a", 0, Some(&["t"])).await.error_code, 0);
    assert_eq!(acquired(&Fetch::new("a", 0, id).send(&mut client).await), vec![(0, 5, 1)]);
    assert_eq!(start_offsets(&mut client).await, vec![("t".into(), 0, 0)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_admin_is_authorized_as_kafka_authorizes_it() {
    use kafgres_broker::acl::{AclBinding, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME};
    use kafgres_broker::Catalog;
    let allow = |resource_type, name: &str, operation| AclBinding {
        resource_type,
        resource_name: name.into(),
        pattern_type: PatternType::Literal,
        principal: "User:ANONYMOUS".into(),
        host: "*".into(),
        operation,
        permission: Permission::Allow,
    };
    let catalog = Arc::new(MemoryCatalog::default());
    // May join group g (READ, and DESCRIBE on t), may not READ t, nor DELETE the group.
    let acls = vec![
        allow(ResourceType::Cluster, CLUSTER_NAME, Operation::All),
        allow(ResourceType::Topic, "t", Operation::Describe),
        allow(ResourceType::Topic, "t", Operation::Write),
        allow(ResourceType::Group, "g", Operation::Read),
    ];
    catalog.create_acls(acls).await.expect("seeded");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(&dir);
    c.authorizer_enabled = true;
    let broker = TestBroker::start_with(dir, catalog, c).await;
    let (mut client, _) = topic_with_members(&broker, 1, &["a"]).await;
    assert_eq!(heartbeat(&mut client, "a", -1, None).await.error_code, 0);
    let r = alter_offsets(&mut client, "g", &[("t", &[(0, 0)])]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(altered(&r), vec![("t".into(), 0, error_code::TOPIC_AUTHORIZATION_FAILED)]);
    let other = alter_offsets(&mut client, "other", &[("t", &[(0, 0)])]).await;
    assert_eq!(other.error_code, error_code::GROUP_AUTHORIZATION_FAILED);
    let r = delete_offsets(&mut client, "g", &["t"]).await;
    assert_eq!((r.error_code, r.responses.len()), (error_code::GROUP_AUTHORIZATION_FAILED, 0));
    assert_eq!(r.error_message.as_deref(), Some("Group authorization failed."));
    assert!(broker.catalog.share_states().is_empty(), "nothing changed");
    broker.broker.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Version 2 (Kafka 4.2+): KIP-1206's acquire modes and KIP-1222's RENEW.

const BATCH_OPTIMIZED: i8 = 0;
const RECORD_LIMIT: i8 = 1;

impl Fetch<'_> {
    /// This fetch at v2, in `mode`; `renew` flags RENEW acknowledgements (a
    /// renewal fetches nothing: its limits are 0, as KIP-1222 has them).
    async fn send_v2(&self, client: &mut Client, mode: i8, renew: bool) -> ShareFetchResponse {
        let mut request = messages::ShareFetchRequest::from(self.request());
        (request.share_acquire_mode, request.is_renew_ack) = (mode, renew);
        if renew {
            (request.max_wait_ms, request.min_bytes, request.max_bytes, request.max_records) = (0, 0, 0, 0);
        }
        client.call(2, &request).await.0
    }
}

/// A ShareAcknowledge v2, flagged `is_renew_ack` when it holds RENEW.
async fn acknowledge_v2(
    client: &mut Client,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &Acks,
) -> messages::ShareAcknowledgeResponse {
    let is_renew_ack = acks.iter().any(|(_, _, types)| types.contains(&RENEW));
    let request =
        messages::ShareAcknowledgeRequest { request: acknowledge_request(member, epoch, topic_id, acks), is_renew_ack };
    client.call(2, &request).await
}

fn ack_code(r: &ShareAcknowledgeResponse) -> i16 {
    r.responses[0].partitions[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_record_limit_acquires_at_most_max_records() {
    let (broker, _) = start(|_| {}).await;
    // One batch of 10 records: Kafka's batch-optimized mode would hand out all of it.
    let (mut client, id) = topic_with_members(&broker, 10, &["a"]).await;
    let mut fetch = Fetch::new("a", 0, id);
    fetch.records_max = 3;
    let got = fetch.send_v2(&mut client, RECORD_LIMIT, false).await;
    assert_eq!((got.error_code, got.acquisition_lock_timeout_ms), (0, 30_000));
    assert_eq!(acquired_offsets(&got), vec![0, 1, 2]);
    // Batch-optimized: Kafgres never goes past max_records either (docs/conformance.md).
    fetch.epoch = 1;
    fetch.records_max = 4;
    let got = fetch.send_v2(&mut client, BATCH_OPTIMIZED, false).await;
    assert_eq!(acquired(&got), vec![(3, 6, 1)]);
    // An acquire mode Kafka does not have.
    fetch.epoch = 2;
    let refused = fetch.send_v2(&mut client, 2, false).await;
    assert_eq!(refused.error_code, error_code::INVALID_REQUEST);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_extends_a_lock_past_its_expiry_without_redelivery() {
    // Wide margins: two shared cores may delay any step by a few hundred ms.
    let lock_ms = 2_000;
    let (broker, _) = start(|c| c.share.group_defaults.record_lock_duration_ms = lock_ms).await;
    let (mut client, id) = topic_with_members(&broker, 3, &["a", "b"]).await;
    let acquired_at = Instant::now();
    let got = Fetch::new("a", 0, id).send_v2(&mut client, RECORD_LIMIT, false).await;
    assert_eq!(acquired(&got), vec![(0, 2, 1)]);

    // Well before the lock expires, a renews 0-1 with ShareAcknowledge and 2 with ShareFetch.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let renewed = acknowledge_v2(&mut client, "a", 1, id, &vec![(0, 1, vec![RENEW])]).await;
    assert_eq!((ack_code(&renewed), renewed.acquisition_lock_timeout_ms), (0, lock_ms));
    let mut renew = Fetch::new("a", 2, id);
    renew.acks = vec![(2, 2, vec![RENEW])];
    let r = renew.send_v2(&mut client, RECORD_LIMIT, true).await;
    let p = &r.responses[0].partitions[0];
    assert_eq!((r.error_code, p.acknowledge_error_code), (0, 0), "{r:?}");
    assert!(p.acquired_records.is_empty(), "a renewal acquires nothing");
    // A renewal that asks to fetch is refused, as Kafka refuses it.
    let mut greedy = messages::ShareFetchRequest::from(Fetch::new("a", 3, id).request());
    greedy.is_renew_ack = true;
    let refused = client.call(2, &greedy).await;
    assert_eq!(refused.error_code, error_code::INVALID_REQUEST);

    // The original lock has expired: the records are still a's, b gets nothing.
    tokio::time::sleep((acquired_at + Duration::from_millis(2_200)).saturating_duration_since(Instant::now())).await;
    let mut b = broker.client().await;
    let none = Fetch::new("b", 0, id).send_v2(&mut b, RECORD_LIMIT, false).await;
    assert!(acquired(&none).is_empty(), "{none:?}");

    // Once the renewed locks expire, b gets the records at their second
    // delivery: a renewal is not a delivery. The two renewals were a few ms
    // apart, so b may get them in two fetches.
    let mut delivered = Vec::new();
    for epoch in 1..=3 {
        let mut wait = Fetch::new("b", epoch, id);
        wait.wait_ms = 8_000;
        let r = wait.send_v2(&mut b, RECORD_LIMIT, false).await;
        delivered
            .extend(acquired(&r).into_iter().flat_map(|(first, last, count)| (first..=last).map(move |o| (o, count))));
        if delivered.len() >= 3 {
            break;
        }
    }
    assert_eq!(delivered, vec![(0, 2), (1, 2), (2, 2)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_of_records_another_member_holds_or_nobody_acquired_is_refused() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 3, &["a", "b"]).await;
    let mut fetch = Fetch::new("a", 0, id);
    fetch.records_max = 2;
    assert_eq!(acquired(&fetch.send_v2(&mut client, RECORD_LIMIT, false).await), vec![(0, 1, 1)]);
    let mut b = broker.client().await;
    assert_eq!(acquired(&Fetch::new("b", 0, id).send_v2(&mut b, RECORD_LIMIT, false).await), vec![(2, 2, 1)]);

    let theirs = acknowledge_v2(&mut b, "b", 1, id, &vec![(0, 1, vec![RENEW])]).await;
    assert_eq!(ack_code(&theirs), error_code::INVALID_RECORD_STATE);
    let never = acknowledge_v2(&mut client, "a", 1, id, &vec![(5, 5, vec![RENEW])]).await;
    assert_eq!(ack_code(&never), error_code::INVALID_RECORD_STATE);
    // RENEW is no acknowledge type at v1.
    let v1 = acknowledge(&mut client, "a", 2, id, &vec![(0, 1, vec![RENEW])]).await;
    assert_eq!(ack_code(&v1), error_code::INVALID_REQUEST);
    // None of that touched a's records.
    let accepted = acknowledge(&mut client, "a", 3, id, &vec![(0, 1, vec![ACCEPT])]).await;
    assert_eq!(ack_code(&accepted), 0);
    broker.broker.shutdown().await;
}
