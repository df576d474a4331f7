//! Transaction version 2 (KIP-890 part 2) through the wire, against the
//! in-process broker: ApiVersions finalizes it; Produce v12+ and
//! TxnOffsetCommit v5 add their partition or group to the transaction with
//! no AddPartitionsToTxn or AddOffsetsToTxn; every EndTxn v5 bumps the epoch
//! (markers included), answers it, and fences the ended transaction's late
//! batches; retries of an end are answered with the bumped epoch; the epoch
//! running out hands out a new producer id; and a version 1 client of the
//! same broker keeps its epoch.

mod common;

use common::txn::{
    end, end_answer, fetch, fetch_offset, init, produce_txn, produce_txn_at, record_count, txn_batch, txn_id,
};
use common::{create_topic, name, Client, TestBroker};
use kafgres_wire::error_code;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// Produce v12: the first version a version 2 client sends.
const PRODUCE_V2: i16 = 12;
/// EndTxn and TxnOffsetCommit v5.
const END_V2: i16 = 5;

async fn txn_offset_commit_v5(client: &mut Client, id: &str, pid: i64, epoch: i16, group: &str, offset: i64) -> i16 {
    let r = client
        .call(
            END_V2,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id(id))
                .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_generation_id(-1)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default().with_name(name("tv2")).with_partitions(
                    vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)],
                )]),
        )
        .await;
    r.topics[0].partitions[0].error_code
}

/// (error, producer id, epoch) of a version 2 EndTxn.
async fn end_v2(client: &mut Client, id: &str, pid: i64, epoch: i16, commit: bool) -> (i16, i64, i16) {
    let r = end_answer(client, END_V2, id, pid, epoch, commit).await;
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_join_with_their_batches_and_every_end_bumps_the_epoch() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "tv2", 2).await;
    let versions = client.call(3, &ApiVersionsRequest::default()).await;
    let finalized: Vec<(String, i16)> =
        versions.finalized_features.iter().map(|f| (f.name.to_string(), f.max_version_level)).collect();
    assert!(finalized.contains(&("transaction.version".to_string(), 2)), "{finalized:?}");

    let (pid, epoch, code) = init(&mut client, "v2", 60_000).await;
    assert_eq!((epoch, code), (0, 0));

    // No AddPartitionsToTxn: the v12 batch adds partition 0 and opens the
    // transaction; a v11 batch (a version 1 client) is still refused.
    assert_eq!(produce_txn_at(&mut client, PRODUCE_V2, "v2", "tv2", 0, txn_batch(pid, 0, 0, 3, "one")).await, 0);
    assert_eq!(
        produce_txn_at(&mut client, 11, "v2", "tv2", 1, txn_batch(pid, 0, 0, 1, "v1")).await,
        error_code::INVALID_TXN_STATE
    );
    assert_eq!(produce_txn_at(&mut client, PRODUCE_V2, "v2", "tv2", 0, txn_batch(pid, 0, 3, 1, "one")).await, 0);
    let open = fetch(&mut client, "tv2", 0, 0, true).await;
    assert_eq!((open.high_watermark, open.last_stable_offset), (4, 0), "open until the end");
    // No AddOffsetsToTxn either.
    assert_eq!(txn_offset_commit_v5(&mut client, "v2", pid, 0, "g2", 4).await, 0);
    assert_eq!(fetch_offset(&mut client, "g2", "tv2", 0).await, -1, "not before the commit");

    assert_eq!(end_v2(&mut client, "v2", pid, 0, true).await, (0, pid, 1), "the commit bumps the epoch");
    let done = fetch(&mut client, "tv2", 0, 0, true).await;
    assert_eq!((done.last_stable_offset, record_count(&done)), (5, 5), "four records and the marker");
    assert_eq!(fetch_offset(&mut client, "g2", "tv2", 0).await, 4);
    // The retry of that end (its answer lost) carries the old epoch.
    assert_eq!(end_v2(&mut client, "v2", pid, 0, true).await, (0, pid, 1));
    assert_eq!(end_v2(&mut client, "v2", pid, 0, false).await.0, error_code::INVALID_TXN_STATE);

    // A batch of the ended transaction arriving late is fenced: it would
    // otherwise open a transaction nobody ends.
    assert_eq!(
        produce_txn_at(&mut client, PRODUCE_V2, "v2", "tv2", 1, txn_batch(pid, 0, 0, 1, "late")).await,
        error_code::INVALID_PRODUCER_EPOCH
    );
    let untouched = fetch(&mut client, "tv2", 1, 0, false).await;
    assert_eq!(untouched.high_watermark, 0);

    // The next transaction, at the bumped epoch, sequences from 0 again
    // (partition 0 got the epoch from the marker, partition 1 never had it).
    assert_eq!(produce_txn_at(&mut client, PRODUCE_V2, "v2", "tv2", 0, txn_batch(pid, 1, 0, 2, "two")).await, 0);
    assert_eq!(produce_txn_at(&mut client, PRODUCE_V2, "v2", "tv2", 1, txn_batch(pid, 1, 0, 2, "two")).await, 0);
    assert_eq!(end_v2(&mut client, "v2", pid, 1, false).await, (0, pid, 2));
    let aborted = fetch(&mut client, "tv2", 1, 0, true).await;
    let list = aborted.aborted_transactions.clone().unwrap_or_default();
    assert_eq!(list.iter().map(|a| (a.producer_id.0, a.first_offset)).collect::<Vec<_>>(), vec![(pid, 0)]);

    // With nothing open, an abort only moves the epoch; a commit is refused.
    assert_eq!(end_v2(&mut client, "v2", pid, 2, false).await, (0, pid, 3));
    assert_eq!(end_v2(&mut client, "v2", pid, 3, true).await.0, error_code::INVALID_TXN_STATE);
    assert_eq!(end_v2(&mut client, "v2", pid, 1, true).await.0, error_code::PRODUCER_FENCED);

    // A version 1 client on the same broker keeps its epoch across ends.
    let (pid1, epoch1, _) = init(&mut client, "v1", 60_000).await;
    let added = client
        .call(
            3,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(txn_id("v1"))
                .with_v3_and_below_producer_id(ProducerId(pid1))
                .with_v3_and_below_producer_epoch(epoch1)
                .with_v3_and_below_topics(vec![add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(name("tv2"))
                    .with_partitions(vec![1])]),
        )
        .await;
    assert_eq!(added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code, 0);
    assert_eq!(produce_txn(&mut client, "v1", "tv2", 1, txn_batch(pid1, epoch1, 0, 1, "v1")).await, 0);
    assert_eq!(end(&mut client, 4, "v1", pid1, epoch1, true).await, 0);
    assert_eq!(end(&mut client, 4, "v1", pid1, epoch1, true).await, 0, "a retry at the same epoch");

    // The bumped epoch is what was stored: a restart keeps it.
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    let mut client = broker.client().await;
    assert_eq!(produce_txn_at(&mut client, PRODUCE_V2, "v2", "tv2", 0, txn_batch(pid, 3, 0, 1, "three")).await, 0);
    assert_eq!(end_v2(&mut client, "v2", pid, 3, true).await, (0, pid, 4));
    assert_eq!(init(&mut client, "v2", 60_000).await, (pid, 5, 0));
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_epoch_hands_out_a_new_producer_id() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "tv2", 1).await;
    let (pid, mut epoch, _) = init(&mut client, "spent", 60_000).await;
    // Empty aborts walk the epoch up to the last one Kafka bumps from.
    while epoch < i16::MAX - 1 {
        let (code, same, next) = end_v2(&mut client, "spent", pid, epoch, false).await;
        assert_eq!((code, same, next), (0, pid, epoch + 1));
        epoch = next;
    }
    assert_eq!(produce_txn_at(&mut client, PRODUCE_V2, "spent", "tv2", 0, txn_batch(pid, epoch, 0, 1, "x")).await, 0);
    let (code, new_pid, new_epoch) = end_v2(&mut client, "spent", pid, epoch, true).await;
    assert_eq!((code, new_epoch), (0, 0));
    assert_ne!(new_pid, pid);
    // The retry names the old producer id at its last epoch.
    assert_eq!(end_v2(&mut client, "spent", pid, epoch, true).await, (0, new_pid, 0));
    // The marker carried the last epoch of the old id; the new id starts clean.
    let committed = fetch(&mut client, "tv2", 0, 0, true).await;
    assert_eq!((committed.last_stable_offset, record_count(&committed)), (2, 2));
    assert_eq!(produce_txn_at(&mut client, PRODUCE_V2, "spent", "tv2", 0, txn_batch(new_pid, 0, 0, 1, "y")).await, 0);
    assert_eq!(end_v2(&mut client, "spent", new_pid, 0, true).await, (0, new_pid, 1));
    broker.broker.shutdown().await;
}

/// A version 2 transaction left open past its timeout is aborted and its
/// producer fenced: its EndTxn, which a version 2 retry rule would otherwise
/// take for a retry of a bumped end, is PRODUCER_FENCED, as on Kafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_transaction_fences_its_version_2_producer() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "tv2-slow", 1).await;
    let (pid, epoch, _) = init(&mut client, "v2-slow", 300).await;
    assert_eq!(
        produce_txn_at(&mut client, PRODUCE_V2, "v2-slow", "tv2-slow", 0, txn_batch(pid, epoch, 0, 1, "s")).await,
        0
    );
    let mut lso = 0;
    // Until the abort marker is durable too.
    for _ in 0..100 {
        lso = fetch(&mut client, "tv2-slow", 0, 0, true).await.last_stable_offset;
        if lso >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(lso, 2, "the timeout wrote an abort marker");
    assert_eq!(end_v2(&mut client, "v2-slow", pid, epoch, false).await.0, error_code::PRODUCER_FENCED);
    assert_eq!(end_v2(&mut client, "v2-slow", pid, epoch, true).await.0, error_code::PRODUCER_FENCED);
    assert_eq!(
        produce_txn_at(&mut client, PRODUCE_V2, "v2-slow", "tv2-slow", 0, txn_batch(pid, epoch, 1, 1, "late")).await,
        error_code::INVALID_PRODUCER_EPOCH
    );
    broker.broker.shutdown().await;
}
