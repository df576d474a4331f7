//! Every version in the served table answers: for each API and each accepted
//! version, a valid request gets a response that decodes at that version (a
//! handler that sets a field the version lacks makes encoding fail, and the
//! broker closes the connection instead of answering). The requests live in
//! one module per family of APIs (versions/*.rs).

mod common;
// A test's crate root resolves `mod x;` next to itself (tests/x.rs), as a
// mod.rs would: hence the paths.
#[path = "versions/admin.rs"]
mod admin;
#[path = "versions/data.rs"]
mod data;
#[path = "versions/groups.rs"]
mod groups;
#[path = "versions/security.rs"]
mod security;
#[path = "versions/share.rs"]
mod share;
#[path = "versions/txn.rs"]
mod txn;

use common::{create_topic, Client, TestBroker};
use kafgres_broker::api::SERVED_APIS;
use kafgres_wire::ApiKey;

/// `Ok` if `ok`, else `what` went wrong.
fn check(ok: bool, what: String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what)
    }
}

/// Sends one request of `key` at `version` through its family's module;
/// `Err` says what went wrong.
async fn exchange(
    client: &mut Client,
    key: ApiKey,
    version: i16,
    id: uuid::Uuid,
    produced: &mut i64,
) -> Result<(), String> {
    if data::covers(key) {
        data::exchange(client, key, version, id, produced).await
    } else if admin::covers(key) {
        admin::exchange(client, key, version).await
    } else if groups::covers(key) {
        groups::exchange(client, key, version, id).await
    } else if share::covers(key) {
        share::exchange(client, key, version, id, produced).await
    } else if txn::covers(key) {
        txn::exchange(client, key, version, id, produced).await
    } else if security::covers(key) {
        security::exchange(client, key, version).await
    } else {
        Err(format!("{key:?} has no case in this sweep"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_served_version_answers() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "swept", 1).await;
    let mut produced = 0i64;
    let mut failures = Vec::new();
    // Produce before Fetch and ListOffsets, so they have records to report.
    use ApiKey::*;
    let order = [
        ApiVersions,
        Metadata,
        CreateTopics,
        Produce,
        Fetch,
        ListOffsets,
        OffsetForLeaderEpoch,
        DescribeLogDirs,
        AlterReplicaLogDirs,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        DescribeConfigs,
        IncrementalAlterConfigs,
        AlterConfigs,
        DescribeCluster,
        CreatePartitions,
        DeleteTopics,
        FindCoordinator,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        ListGroups,
        DescribeGroups,
        OffsetDelete,
        DeleteGroups,
        DeleteRecords,
        InitProducerId,
        DescribeTopicPartitions,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        TxnOffsetCommit,
        EndTxn,
        WriteTxnMarkers,
        SaslHandshake,
        SaslAuthenticate,
        CreateDelegationToken,
        RenewDelegationToken,
        ExpireDelegationToken,
        DescribeDelegationToken,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        AlterClientQuotas,
        DescribeClientQuotas,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        UpdateFeatures,
        ListConfigResources,
        ShareGroupHeartbeat,
        ShareGroupDescribe,
        ShareFetch,
        ShareAcknowledge,
        StreamsGroupHeartbeat,
        StreamsGroupDescribe,
        DescribeShareGroupOffsets,
        AlterShareGroupOffsets,
        DeleteShareGroupOffsets,
    ];
    for key in order {
        let api = SERVED_APIS.iter().find(|a| a.key == key).expect("served");
        for version in api.versions.accepted_min..=api.versions.max {
            if let Err(e) = exchange(&mut client, key, version, id, &mut produced).await {
                failures.push(format!("{key:?} v{version}: {e}"));
                client = broker.client().await; // the broker may have closed it
            }
        }
    }
    // The gated APIs (telemetry, off here) are swept in telemetry.rs.
    let gated = SERVED_APIS.iter().filter(|a| a.gate != kafgres_broker::api::Gate::Always).count();
    assert_eq!(SERVED_APIS.len() - gated, order.len(), "a served API is missing from the sweep");
    assert!(failures.is_empty(), "versions that do not answer:\n{}", failures.join("\n"));
    broker.broker.shutdown().await;
}
