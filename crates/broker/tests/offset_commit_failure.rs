//! A commit the catalog fails to store is answered COORDINATOR_NOT_AVAILABLE
//! and leaves no trace: OffsetFetch keeps answering what is durable (the
//! coordinator reloads the group's rows), in memory and after a restart.

mod common;

use std::sync::Arc;

use common::*;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, OffsetFetchRequest};
use kafka_protocol::protocol::StrBytes;

const GROUP: &str = "failing-commits";

async fn commit(client: &mut Client, offset: i64) -> i16 {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(name("t")).with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(offset),
        ])]);
    let response = client.call(8, &request).await;
    response.topics[0].partitions[0].error_code
}

async fn fetched(client: &mut Client) -> i64 {
    let request =
        OffsetFetchRequest::default().with_group_id(GroupId(StrBytes::from_static_str(GROUP))).with_topics(Some(vec![
            OffsetFetchRequestTopic::default().with_name(name("t")).with_partition_indexes(vec![0]),
        ]));
    let response = client.call(7, &request).await;
    response.topics[0].partitions[0].committed_offset
}

#[tokio::test]
async fn a_failed_commit_is_not_answered_by_offset_fetch() {
    let catalog = Arc::new(kafgres_broker::MemoryCatalog::default());
    let broker = TestBroker::start_on(tempfile::tempdir().expect("tempdir"), Arc::clone(&catalog)).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;

    assert_eq!(commit(&mut client, 5).await, 0);
    assert_eq!(fetched(&mut client).await, 5);

    catalog.set_failing_commits(true);
    assert_eq!(commit(&mut client, 9).await, 15, "COORDINATOR_NOT_AVAILABLE");
    assert_eq!(fetched(&mut client).await, 5, "the view went back to what is stored");

    catalog.set_failing_commits(false);
    assert_eq!(commit(&mut client, 11).await, 0);
    assert_eq!(fetched(&mut client).await, 11);
    drop(client);

    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    let mut client = broker.client().await;
    assert_eq!(fetched(&mut client).await, 11);
}
