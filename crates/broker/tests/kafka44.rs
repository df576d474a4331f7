//! What Kafka 4.4's new versions mean, over the wire (their layouts are
//! checked byte for byte against Kafka's own classes in kafgres-wire):
//! OffsetCommit/OffsetFetch v10 and TxnOffsetCommit v6 by topic id,
//! ApiVersions v5's cluster and node check, DeleteGroups v3's error message,
//! DescribeLogDirs v5's IsCordoned and ListOffsets v11's -6.

mod common;

use common::txn::{end_answer, fetch_offset, init, txn_id};
use common::{create_topic, list_offset_request, Client, TestBroker};
use kafgres_wire::{error_code, messages};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition;
use kafka_protocol::messages::{
    ApiVersionsRequest, DeleteGroupsRequest, DescribeLogDirsRequest, GroupId, OffsetCommitRequest, OffsetFetchRequest,
    ProducerId,
};
use kafka_protocol::protocol::StrBytes;

fn group(name: &'static str) -> GroupId {
    GroupId(StrBytes::from_static_str(name))
}

/// Commits `offset` to partition 0 of the topic `id` at v10.
async fn commit_v10(client: &mut Client, id: uuid::Uuid, offset: i64) -> messages::OffsetCommitResponse {
    let request = OffsetCommitRequest::default()
        .with_group_id(group("by-id"))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default().with_topic_id(id).with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(offset),
        ])]);
    client.call(10, &messages::OffsetCommitRequest(request)).await
}

async fn fetch_v10(client: &mut Client, id: uuid::Uuid) -> kafka_protocol::messages::OffsetFetchResponse {
    let request = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(group("by-id"))
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_topic_id(id)
            .with_partition_indexes(vec![0])]))]);
    client.call(10, &messages::OffsetFetchRequest(request)).await
}

#[tokio::test]
async fn offsets_commit_and_fetch_by_topic_id() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "by-id", 1).await;

    let r = commit_v10(&mut client, id, 42).await;
    assert_eq!((r.topics[0].topic_id, r.topics[0].name.as_str()), (id, ""));
    assert_eq!(r.topics[0].partitions[0].error_code, error_code::NONE);

    let r = fetch_v10(&mut client, id).await;
    let t = &r.groups[0].topics[0];
    assert_eq!((t.topic_id, t.name.as_str()), (id, ""));
    assert_eq!((t.partitions[0].committed_offset, t.partitions[0].error_code), (42, error_code::NONE));

    // The same commit read by name at v9.
    let request = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(group("by-id"))
        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
            .with_name(common::name("by-id"))
            .with_partition_indexes(vec![0])]))]);
    let r = client.call(9, &request).await;
    assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, 42);

    // Every topic of the group (topics null), by id.
    let request = OffsetFetchRequest::default()
        .with_groups(vec![OffsetFetchRequestGroup::default().with_group_id(group("by-id")).with_topics(None)]);
    let r = client.call(10, &messages::OffsetFetchRequest(request)).await;
    let ids: Vec<_> = r.groups[0].topics.iter().map(|t| t.topic_id).collect();
    assert_eq!(ids, [id]);
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn an_unknown_topic_id_is_unknown_topic_id() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let unknown = uuid::Uuid::from_u128(0x1234);

    let r = commit_v10(&mut client, unknown, 1).await;
    assert_eq!(r.topics[0].topic_id, unknown);
    assert_eq!(r.topics[0].partitions[0].error_code, error_code::UNKNOWN_TOPIC_ID);

    let r = fetch_v10(&mut client, unknown).await;
    assert_eq!(r.groups[0].error_code, error_code::NONE);
    let t = &r.groups[0].topics[0];
    assert_eq!(t.topic_id, unknown);
    assert_eq!((t.partitions[0].error_code, t.partitions[0].committed_offset), (error_code::UNKNOWN_TOPIC_ID, -1));
    broker.broker.shutdown().await;
}

/// TxnOffsetCommit v6 (transaction version 2: no AddOffsetsToTxn) of
/// `offset` for partition 0 of each topic id, in group "txn-by-id".
async fn txn_commit_v6(
    client: &mut Client,
    pid: i64,
    epoch: i16,
    ids: &[uuid::Uuid],
    offset: i64,
) -> messages::TxnOffsetCommitResponse {
    let topics = ids
        .iter()
        .map(|&topic_id| messages::TxnOffsetCommitRequestTopic {
            topic_id,
            partitions: vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)],
            ..Default::default()
        })
        .collect();
    let request = messages::TxnOffsetCommitRequest {
        transactional_id: txn_id("t6"),
        group_id: group("txn-by-id"),
        producer_id: ProducerId(pid),
        producer_epoch: epoch,
        topics,
        ..Default::default()
    };
    client.call(6, &request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn txn_offsets_by_topic_id_follow_their_transaction() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "txn-by-id", 1).await;
    let unknown = uuid::Uuid::from_u128(0x1234);
    let (pid, epoch, code) = init(&mut client, "t6", 60_000).await;
    assert_eq!(code, error_code::NONE);

    // The known id is committed with the transaction, the unknown one is
    // answered UNKNOWN_TOPIC_ID; the answer names both by id, in order.
    let r = txn_commit_v6(&mut client, pid, epoch, &[id, unknown], 7).await;
    let answered: Vec<_> =
        r.topics.iter().map(|t| (t.topic_id, t.name.to_string(), t.partitions[0].error_code)).collect();
    assert_eq!(
        answered,
        [(id, String::new(), error_code::NONE), (unknown, String::new(), error_code::UNKNOWN_TOPIC_ID)]
    );
    assert_eq!(fetch_offset(&mut client, "txn-by-id", "txn-by-id", 0).await, -1, "not before the commit");
    let ended = end_answer(&mut client, 5, "t6", pid, epoch, true).await;
    assert_eq!(ended.error_code, error_code::NONE);
    assert_eq!(fetch_offset(&mut client, "txn-by-id", "txn-by-id", 0).await, 7);

    // The next transaction's offsets go with its abort.
    let epoch = ended.producer_epoch;
    let r = txn_commit_v6(&mut client, pid, epoch, &[id], 9).await;
    assert_eq!(r.topics[0].partitions[0].error_code, error_code::NONE);
    assert_eq!(end_answer(&mut client, 5, "t6", pid, epoch, false).await.error_code, error_code::NONE);
    assert_eq!(fetch_offset(&mut client, "txn-by-id", "txn-by-id", 0).await, 7);
    broker.broker.shutdown().await;
}

async fn api_versions_v5(
    client: &mut Client,
    cluster_id: Option<&'static str>,
    node_id: i32,
) -> messages::ApiVersionsResponse {
    let mut request = messages::ApiVersionsRequest::from(
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("kafka44"))
            .with_client_software_version(StrBytes::from_static_str("1")),
    );
    request.cluster_id = cluster_id.map(StrBytes::from_static_str);
    request.node_id = node_id;
    client.call(5, &request).await
}

#[tokio::test]
async fn api_versions_v5_checks_the_cluster_and_node() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    // This broker (BrokerConfig::for_tests): cluster "kafgres-test-cluster", node 1.
    for (cluster_id, node_id) in [(None, -1), (Some("kafgres-test-cluster"), 1)] {
        let r = api_versions_v5(&mut client, cluster_id, node_id).await;
        assert_eq!(r.error_code, error_code::NONE, "{cluster_id:?} {node_id}");
        assert!(!r.api_keys.is_empty());
    }
    for (cluster_id, node_id, code) in [
        (Some("another-cluster"), 1, error_code::REBOOTSTRAP_REQUIRED),
        (Some("kafgres-test-cluster"), 2, error_code::REBOOTSTRAP_REQUIRED),
        (Some("kafgres-test-cluster"), -1, error_code::INVALID_REQUEST),
        (None, 1, error_code::INVALID_REQUEST),
    ] {
        let r = api_versions_v5(&mut client, cluster_id, node_id).await;
        // Only the code, as Kafka's getErrorResponse answers.
        assert_eq!((r.error_code, r.api_keys.len()), (code, 0), "{cluster_id:?} {node_id}");
    }
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn delete_groups_v3_error_message_is_null_as_in_kafka() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let request = DeleteGroupsRequest::default().with_groups_names(vec![group("never-was")]);
    let r = client.call(3, &messages::DeleteGroupsRequest(request)).await;
    let g = &r.results[0];
    assert_eq!((g.result.group_id.as_str(), g.result.error_code), ("never-was", error_code::GROUP_ID_NOT_FOUND));
    assert_eq!(g.error_message, None);
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn describe_log_dirs_v5_is_never_cordoned() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let r = client.call(5, &messages::DescribeLogDirsRequest(DescribeLogDirsRequest::default())).await;
    assert_eq!(r.results.len(), 1);
    assert_eq!((r.results[0].result.error_code, r.results[0].is_cordoned), (error_code::NONE, false));
    broker.broker.shutdown().await;
}

#[tokio::test]
async fn list_offsets_v11_earliest_pending_upload_is_none_without_tiered_storage() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "pending", 1).await;
    let r = client.call(11, &messages::ListOffsetsRequest(list_offset_request("pending", 0, -6))).await;
    let p = &r.topics[0].partitions[0];
    assert_eq!((p.error_code, p.offset, p.timestamp, p.leader_epoch), (error_code::NONE, -1, -1, -1));
    broker.broker.shutdown().await;
}
