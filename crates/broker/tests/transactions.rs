//! Transactions through the wire, against the in-process broker: the
//! coordinator's answers (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
//! TxnOffsetCommit, EndTxn), markers and the last stable offset in Fetch and
//! ListOffsets, fencing, the timeout abort, and state kept across a restart.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::txn::{end, fetch, fetch_offset, init, produce_txn, record_count, txn_batch, txn_id};
use common::{create_topic, name, Client, TestBroker};
use kafgres_broker::{BrokerConfig, MemoryCatalog};
use kafgres_wire::error_code;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

async fn add_partitions(
    client: &mut Client,
    id: &str,
    pid: i64,
    epoch: i16,
    topic: &str,
    partitions: &[i32],
) -> Vec<i16> {
    let r = client
        .call(
            3,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(txn_id(id))
                .with_v3_and_below_producer_id(ProducerId(pid))
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(name(topic))
                    .with_partitions(partitions.to_vec())]),
        )
        .await;
    r.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| t.results_by_partition.iter().map(|p| p.partition_error_code))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_abort_and_the_last_stable_offset() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "tx", 2).await;
    let found = client
        .call(
            4,
            &FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![StrBytes::from_static_str("t1")]),
        )
        .await;
    assert_eq!(found.coordinators[0].error_code, 0);

    assert_eq!(init(&mut client, "t1", 900_001).await.2, error_code::INVALID_TRANSACTION_TIMEOUT);
    let (pid, epoch, code) = init(&mut client, "t1", 60_000).await;
    assert_eq!((epoch, code), (0, 0));
    assert!(pid >= 0);

    // A transaction that aborts: nothing of it is read_committed-visible.
    assert_eq!(add_partitions(&mut client, "t1", pid, epoch, "tx", &[0]).await, vec![0]);
    assert_eq!(produce_txn(&mut client, "t1", "tx", 0, txn_batch(pid, epoch, 0, 2, "aborted")).await, 0);
    assert_eq!(
        produce_txn(&mut client, "t1", "tx", 1, txn_batch(pid, epoch, 0, 1, "x")).await,
        error_code::INVALID_TXN_STATE
    );
    let open = fetch(&mut client, "tx", 0, 0, true).await;
    assert_eq!((open.high_watermark, open.last_stable_offset, record_count(&open)), (2, 0, 0));
    assert_eq!(record_count(&fetch(&mut client, "tx", 0, 0, false).await), 2, "read_uncommitted sees it");
    assert_eq!(end(&mut client, 3, "t1", pid, epoch, false).await, 0);
    let aborted = fetch(&mut client, "tx", 0, 0, true).await;
    assert_eq!((aborted.high_watermark, aborted.last_stable_offset), (3, 3));
    let list = aborted.aborted_transactions.clone().unwrap_or_default();
    assert_eq!(list.iter().map(|a| (a.producer_id.0, a.first_offset)).collect::<Vec<_>>(), vec![(pid, 0)]);
    // A retried abort is answered; a commit now is not.
    assert_eq!(end(&mut client, 3, "t1", pid, epoch, false).await, 0);
    assert_eq!(end(&mut client, 3, "t1", pid, epoch, true).await, error_code::INVALID_TXN_STATE);

    // A transaction that commits, with the group's offsets.
    assert_eq!(add_partitions(&mut client, "t1", pid, epoch, "tx", &[0, 1]).await, vec![0, 0]);
    assert_eq!(produce_txn(&mut client, "t1", "tx", 0, txn_batch(pid, epoch, 2, 3, "committed")).await, 0);
    let added = client
        .call(
            3,
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn_id("t1"))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_group_id(GroupId(StrBytes::from_static_str("g"))),
        )
        .await;
    assert_eq!(added.error_code, 0);
    let committed = client
        .call(
            3,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id("t1"))
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_generation_id(-1)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default().with_name(name("tx")).with_partitions(vec![
                    TxnOffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(6),
                ])]),
        )
        .await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    let before = fetch_offset(&mut client, "g", "tx", 0).await;
    assert_eq!(before, -1, "not visible before the commit");
    assert_eq!(end(&mut client, 3, "t1", pid, epoch, true).await, 0);
    assert_eq!(fetch_offset(&mut client, "g", "tx", 0).await, 6);
    let done = fetch(&mut client, "tx", 0, 3, true).await;
    // The three committed records and the commit marker (clients skip it).
    assert_eq!((done.last_stable_offset, record_count(&done)), (7, 4));
    assert_eq!(done.aborted_transactions.clone().unwrap_or_default().len(), 0);
    let latest = client.call(5, &common::list_offset_request("tx", 0, -1).with_isolation_level(1)).await;
    assert_eq!(latest.topics[0].partitions[0].offset, 7);

    // A new instance fences the old: its EndTxn is refused.
    let (pid2, epoch2, _) = init(&mut client, "t1", 60_000).await;
    assert_eq!((pid2, epoch2), (pid, 1));
    assert_eq!(add_partitions(&mut client, "t1", pid, epoch, "tx", &[0]).await, vec![error_code::PRODUCER_FENCED]);
    assert_eq!(end(&mut client, 1, "t1", pid, epoch, true).await, error_code::INVALID_PRODUCER_EPOCH);
    assert_eq!(end(&mut client, 3, "t1", pid, epoch, true).await, error_code::PRODUCER_FENCED);

    // The state outlives a restart.
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    let mut client = broker.client().await;
    assert_eq!(init(&mut client, "t1", 60_000).await, (pid, 2, 0));
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_is_aborted_at_its_timeout_or_by_a_new_instance() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "slow", 1).await;
    let (pid, epoch, _) = init(&mut client, "t-slow", 300).await;
    assert_eq!(add_partitions(&mut client, "t-slow", pid, epoch, "slow", &[0]).await, vec![0]);
    assert_eq!(produce_txn(&mut client, "t-slow", "slow", 0, txn_batch(pid, epoch, 0, 1, "late")).await, 0);
    let mut lso = 0;
    // Until the marker is durable too: the high watermark (and so the last
    // stable offset) can stand at 1 between the marker's append and its flush.
    for _ in 0..100 {
        lso = fetch(&mut client, "slow", 0, 0, true).await.last_stable_offset;
        if lso >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(lso, 2, "the timeout wrote an abort marker");
    assert_eq!(
        end(&mut client, 3, "t-slow", pid, epoch, true).await,
        error_code::PRODUCER_FENCED,
        "the abort bumped the epoch"
    );
    let data = fetch(&mut client, "slow", 0, 0, true).await;
    assert_eq!(data.aborted_transactions.unwrap_or_default().len(), 1);

    // An open transaction of a previous instance is aborted by InitProducerId.
    let (pid, epoch, _) = init(&mut client, "t-new", 60_000).await;
    assert_eq!(add_partitions(&mut client, "t-new", pid, epoch, "slow", &[0]).await, vec![0]);
    assert_eq!(produce_txn(&mut client, "t-new", "slow", 0, txn_batch(pid, epoch, 0, 1, "zombie")).await, 0);
    let (_, new_epoch, code) = init(&mut client, "t-new", 60_000).await;
    assert_eq!((new_epoch, code), (epoch + 2, 0));
    let after = fetch(&mut client, "slow", 0, 0, true).await;
    assert_eq!(after.last_stable_offset, after.high_watermark);
    assert_eq!(
        produce_txn(&mut client, "t-new", "slow", 0, txn_batch(pid, epoch, 1, 1, "zombie")).await,
        error_code::INVALID_PRODUCER_EPOCH
    );
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_interrupted_after_prepare_is_finished_at_startup() {
    use kafgres_broker::catalog::Catalog;
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "crash", 1).await;
    let (pid, epoch, _) = init(&mut client, "t-crash", 60_000).await;
    assert_eq!(add_partitions(&mut client, "t-crash", pid, epoch, "crash", &[0]).await, vec![0]);
    assert_eq!(produce_txn(&mut client, "t-crash", "crash", 0, txn_batch(pid, epoch, 0, 2, "in-flight")).await, 0);
    let added = client
        .call(
            3,
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn_id("t-crash"))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_group_id(GroupId(StrBytes::from_static_str("g-crash"))),
        )
        .await;
    assert_eq!(added.error_code, 0);
    let committed = client
        .call(
            3,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id("t-crash"))
                .with_group_id(GroupId(StrBytes::from_static_str("g-crash")))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_generation_id(-1)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default().with_name(name("crash")).with_partitions(
                    vec![TxnOffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(42)],
                )]),
        )
        .await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    drop(client);
    let (dir, catalog) = broker.shutdown().await;

    // The state a crash right after "PrepareCommit is stored" leaves: no
    // marker in the partition, the pending offsets only in the row.
    let mut record = catalog.transactions().into_iter().find(|r| r.transactional_id == "t-crash").expect("stored");
    assert_eq!((record.state.as_str(), record.pending_offsets.len()), ("Ongoing", 1));
    record.state = "PrepareCommit".into();
    catalog.store_transaction(record).await.expect("stored");

    let broker = TestBroker::start_on(dir, Arc::clone(&catalog)).await;
    let mut client = broker.client().await;
    let mut data = fetch(&mut client, "crash", 0, 0, true).await;
    for _ in 0..50 {
        if data.last_stable_offset == data.high_watermark && data.high_watermark == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        data = fetch(&mut client, "crash", 0, 0, true).await;
    }
    assert_eq!((data.high_watermark, data.last_stable_offset), (3, 3), "the commit marker was written");
    assert_eq!(data.aborted_transactions.unwrap_or_default().len(), 0);
    assert_eq!(fetch_offset(&mut client, "g-crash", "crash", 0).await, 42);
    let stored = catalog.transactions().into_iter().find(|r| r.transactional_id == "t-crash").expect("stored");
    assert_eq!((stored.state.as_str(), stored.pending_offsets.len()), ("CompleteCommit", 0));
    // The producer can go on with its next transaction.
    assert_eq!(add_partitions(&mut client, "t-crash", pid, epoch, "crash", &[0]).await, vec![0]);
    broker.broker.shutdown().await;
}

async fn describe_txns(client: &mut Client, ids: &[&str]) -> DescribeTransactionsResponse {
    client
        .call(
            0,
            &DescribeTransactionsRequest::default().with_transactional_ids(ids.iter().map(|i| txn_id(i)).collect()),
        )
        .await
}

async fn list_txns(client: &mut Client, states: &[&'static str]) -> ListTransactionsResponse {
    let request = ListTransactionsRequest::default()
        .with_state_filters(states.iter().map(|s| StrBytes::from_static_str(s)).collect())
        .with_duration_filter(-1);
    client.call(2, &request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_apis_show_each_id_as_stored_across_a_restart() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "admin", 2).await;
    let (idle_pid, _, _) = init(&mut client, "t-idle", 60_000).await;
    let (pid, epoch, _) = init(&mut client, "t-open", 45_000).await;
    assert_eq!(add_partitions(&mut client, "t-open", pid, epoch, "admin", &[1, 0]).await, vec![0, 0]);

    let r = describe_txns(&mut client, &["t-open", "t-idle", "t-unknown"]).await;
    let [open, idle, unknown] = &r.transaction_states[..] else { panic!("three answers: {r:?}") };
    assert_eq!((open.error_code, open.transaction_state.as_str()), (0, "Ongoing"));
    assert_eq!((open.producer_id.0, open.producer_epoch, open.transaction_timeout_ms), (pid, epoch, 45_000));
    assert!(open.transaction_start_time_ms > 0);
    assert_eq!(open.topics.len(), 1);
    assert_eq!((open.topics[0].topic.0.as_str(), &open.topics[0].partitions[..]), ("admin", &[0, 1][..]));
    assert_eq!((idle.error_code, idle.transaction_state.as_str()), (0, "Empty"));
    assert_eq!((idle.producer_id.0, idle.transaction_start_time_ms), (idle_pid, -1), "no transaction started yet");
    assert!(idle.topics.is_empty());
    assert_eq!(unknown.error_code, error_code::TRANSACTIONAL_ID_NOT_FOUND);

    let listed = list_txns(&mut client, &["Ongoing", "Bogus"]).await;
    assert_eq!(listed.error_code, 0);
    assert_eq!(listed.unknown_state_filters.iter().map(|s| s.as_str()).collect::<Vec<_>>(), ["Bogus"]);
    let ids: Vec<&str> = listed.transaction_states.iter().map(|t| t.transactional_id.0.as_str()).collect();
    assert_eq!(ids, ["t-open"]);
    let only_unknown = list_txns(&mut client, &["Bogus"]).await;
    assert!(only_unknown.transaction_states.is_empty(), "a filter of unknown states matches nothing, as Kafka");
    let bad_pattern = client
        .call(
            2,
            &ListTransactionsRequest::default()
                .with_duration_filter(-1)
                .with_transactional_id_pattern(Some(StrBytes::from_static_str("("))),
        )
        .await;
    assert_eq!(bad_pattern.error_code, error_code::INVALID_REGULAR_EXPRESSION);

    // What the coordinator loads at start is what it describes.
    drop(client);
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    let mut client = broker.client().await;
    let all = list_txns(&mut client, &[]).await;
    let mut states: Vec<(&str, &str)> =
        all.transaction_states.iter().map(|t| (t.transactional_id.0.as_str(), t.transaction_state.as_str())).collect();
    states.sort();
    assert_eq!(states, [("t-idle", "Empty"), ("t-open", "Ongoing")]);
    let r = describe_txns(&mut client, &["t-open"]).await;
    assert_eq!(r.transaction_states[0].topics[0].partitions, [0, 1]);
    assert_eq!(end(&mut client, 3, "t-open", pid, epoch, false).await, 0);
    let r = describe_txns(&mut client, &["t-open"]).await;
    assert_eq!(r.transaction_states[0].transaction_state.as_str(), "CompleteAbort");
    assert!(r.transaction_states[0].topics.is_empty());
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_transactional_id_expires_and_an_open_one_does_not() {
    // transactional.id.expiration.ms of 1.5 s: the idle ids go, the open one stays.
    let dir = tempfile::tempdir().expect("tempdir");
    let config =
        BrokerConfig { transactional_id_expiration_ms: 1_500, ..BrokerConfig::for_tests(dir.path().to_path_buf()) };
    let broker = TestBroker::start_with(dir, Arc::default(), config).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "expiring", 1).await;
    let (idle_pid, _, _) = init(&mut client, "x-idle", 60_000).await;
    let (done_pid, done_epoch, _) = init(&mut client, "x-done", 60_000).await;
    assert_eq!(add_partitions(&mut client, "x-done", done_pid, done_epoch, "expiring", &[0]).await, vec![0]);
    assert_eq!(end(&mut client, 3, "x-done", done_pid, done_epoch, true).await, 0);
    let (open_pid, open_epoch, _) = init(&mut client, "x-open", 60_000).await;
    assert_eq!(add_partitions(&mut client, "x-open", open_pid, open_epoch, "expiring", &[0]).await, vec![0]);
    let stored = |catalog: &MemoryCatalog| {
        let mut ids: Vec<String> = catalog.transactions().into_iter().map(|t| t.transactional_id).collect();
        ids.sort();
        ids
    };
    assert_eq!(stored(&broker.catalog), ["x-done", "x-idle", "x-open"]);

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while stored(&broker.catalog) != ["x-open"] {
        assert!(std::time::Instant::now() < deadline, "not expired: {:?}", stored(&broker.catalog));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let r = describe_txns(&mut client, &["x-idle", "x-done", "x-open"]).await;
    let codes: Vec<i16> = r.transaction_states.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, [error_code::TRANSACTIONAL_ID_NOT_FOUND, error_code::TRANSACTIONAL_ID_NOT_FOUND, 0]);
    assert_eq!(r.transaction_states[2].transaction_state.as_str(), "Ongoing");
    // A forgotten id starts afresh: a new producer id at epoch 0.
    let (again_pid, again_epoch, code) = init(&mut client, "x-idle", 60_000).await;
    assert_eq!(code, 0);
    assert_ne!(again_pid, idle_pid);
    assert_eq!(again_epoch, 0);
    // The open transaction still commits; once complete it expires in turn.
    assert_eq!(end(&mut client, 3, "x-open", open_pid, open_epoch, true).await, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while stored(&broker.catalog).contains(&"x-open".to_owned()) {
        assert!(std::time::Instant::now() < deadline, "x-open not expired after its commit");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    broker.broker.shutdown().await;
}

async fn write_markers(client: &mut Client, pid: i64, epoch: i16, topic: &str, partitions: Vec<i32>) -> Vec<i16> {
    use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
    let request = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_transaction_result(false)
        .with_coordinator_epoch(-1)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(name(topic))
            .with_partition_indexes(partitions)])]);
    let r = client.call(1, &request).await;
    r.markers[0].topics[0].partitions.iter().map(|p| p.error_code).collect()
}

/// `kafka-transactions.sh abort` ends a transaction left open in a partition
/// with WriteTxnMarkers: the marker moves the last stable offset past it and
/// lists it as aborted; an older epoch or an unknown partition is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_txn_markers_ends_a_hanging_transaction() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "hang", 1).await;
    let (pid, epoch, _) = init(&mut client, "hanging", 60_000).await;
    assert_eq!(add_partitions(&mut client, "hanging", pid, epoch, "hang", &[0]).await, vec![0]);
    assert_eq!(produce_txn(&mut client, "hanging", "hang", 0, txn_batch(pid, epoch, 0, 3, "h")).await, 0);
    let open = fetch(&mut client, "hang", 0, 0, true).await;
    assert_eq!((open.high_watermark, open.last_stable_offset), (3, 0));

    assert_eq!(write_markers(&mut client, pid, epoch, "hang", vec![0, 7]).await, vec![0, 3]);
    let ended = fetch(&mut client, "hang", 0, 0, true).await;
    assert_eq!((ended.high_watermark, ended.last_stable_offset), (4, 4));
    let aborted = ended.aborted_transactions.clone().unwrap_or_default();
    assert_eq!(aborted.iter().map(|a| (a.producer_id.0, a.first_offset)).collect::<Vec<_>>(), vec![(pid, 0)]);

    // A newer epoch in the partition refuses an older marker.
    assert_eq!(write_markers(&mut client, pid, epoch + 1, "hang", vec![0]).await, vec![0]);
    assert_eq!(write_markers(&mut client, pid, epoch, "hang", vec![0]).await, vec![error_code::INVALID_PRODUCER_EPOCH]);
    broker.broker.shutdown().await;
}
