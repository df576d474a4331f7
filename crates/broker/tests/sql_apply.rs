//! The SQL applier against a real broker: committed transactions land in
//! commit order, one batch per (transaction, partition), and replaying them
//! after a simulated crash (the checkpoint older than the log, the slot older
//! than the checkpoint) writes nothing twice.

mod common;

use common::*;
use kafgres_broker::sql_bridge::checkpoint::ApplierCheckpoint;
use kafgres_broker::sql_bridge::{CommittedTxn, OffsetCommitMessage, SendMessage, SqlApplier};

fn send(topic: &str, partition: i32, value: &str) -> SendMessage {
    SendMessage {
        topic: topic.into(),
        partition,
        timestamp_ms: 1_700_000_000_000,
        key: Some(value.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
        headers: vec![("h".into(), Some(b"v".to_vec()))],
    }
}

fn txn(end_lsn: u64, sends: Vec<SendMessage>) -> CommittedTxn {
    CommittedTxn { end_lsn, commit_time_ms: 1_700_000_000_500, sends, offsets: vec![] }
}

/// Values of partition `p` in offset order.
async fn values(broker: &TestBroker, topic: &str, p: i32) -> Vec<(i64, String)> {
    let mut client = broker.client().await;
    let data = fetch(&mut client, 12, TopicRef::Name(topic), p, 0, 1 << 20).await;
    let bytes = data.records.unwrap_or_default();
    decode_records(&bytes)
        .into_iter()
        .map(|(o, r)| (o, String::from_utf8(r.value.unwrap_or_default()).expect("utf-8")))
        .collect()
}

#[tokio::test]
async fn committed_transactions_land_in_commit_order_once_even_when_replayed() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "orders", 2).await;
    let ctx = broker.broker.context();
    let log_dir = broker.dir.path().to_path_buf();

    let round1 = vec![
        txn(100, vec![send("orders", 0, "a1"), send("orders", 1, "b1"), send("orders", 0, "a2")]),
        txn(200, vec![send("orders", 1, "b2")]),
    ];
    let mut applier = SqlApplier::open(log_dir.clone()).expect("opens");
    let report = applier.apply(ctx, &round1).await.expect("applies");
    assert_eq!((report.applied_lsn, report.records_appended, report.transactions), (200, 4, 2));
    let before_round2 = std::fs::read(ApplierCheckpoint::path(&log_dir)).expect("checkpoint written");

    let round2: Vec<CommittedTxn> =
        (0..8u64).map(|i| txn(300 + i, vec![send("orders", 0, &format!("c{i}"))])).collect();
    let report = applier.apply(ctx, &round2).await.expect("applies");
    assert_eq!(report.records_appended, 8);

    // Crash: the checkpoint on disk is the one from before round 2 (its
    // rename never happened), and the slot replays everything from LSN 0.
    std::fs::write(ApplierCheckpoint::path(&log_dir), &before_round2).expect("rewinds the checkpoint");
    let mut replayed = SqlApplier::open(log_dir.clone()).expect("reopens");
    let all: Vec<CommittedTxn> = round1.iter().chain(round2.iter()).cloned().collect();
    let report = replayed.apply(ctx, &all).await.expect("replay applies");
    assert_eq!(report.records_appended, 0, "nothing is written twice: {report:?}");
    // 8 batches of round 2 were written: 5 are in the duplicate window, the
    // 3 older ones are recognised by their sequence being behind.
    assert_eq!(report.batches_already_present, 8);
    assert_eq!(report.applied_lsn, 307);

    let expected0: Vec<String> =
        ["a1", "a2"].into_iter().map(String::from).chain((0..8).map(|i| format!("c{i}"))).collect();
    let got0: Vec<String> = values(&broker, "orders", 0).await.into_iter().map(|(_, v)| v).collect();
    assert_eq!(got0, expected0);
    let got1 = values(&broker, "orders", 1).await;
    assert_eq!(got1, vec![(0, "b1".to_string()), (1, "b2".to_string())]);

    // New work after the replay continues the sequences.
    replayed.apply(ctx, &[txn(400, vec![send("orders", 1, "b3")])]).await.expect("applies");
    assert_eq!(values(&broker, "orders", 1).await.last(), Some(&(2, "b3".to_string())));
}

#[tokio::test]
async fn a_restarted_broker_recognises_replayed_transactions_from_the_log_alone() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "events", 1).await;
    let log_dir = broker.dir.path().to_path_buf();
    let txns: Vec<CommittedTxn> = (0..3u64).map(|i| txn(10 + i, vec![send("events", 0, &format!("e{i}"))])).collect();
    let mut applier = SqlApplier::open(log_dir.clone()).expect("opens");
    applier.apply(broker.broker.context(), &txns).await.expect("applies");
    drop(client);
    let (dir, catalog) = broker.shutdown().await;

    // The checkpoint is lost entirely but the producer id survives in it only:
    // simulate the crash window "log durable, checkpoint not yet renamed" by
    // rewinding it to applied LSN 0 with the same producer.
    let mut checkpoint = ApplierCheckpoint::load(dir.path()).expect("loads");
    checkpoint.applied_lsn = 0;
    checkpoint.next_sequence.clear();
    checkpoint.store(dir.path()).expect("stores");

    let broker = TestBroker::start_on(dir, catalog).await;
    let mut applier = SqlApplier::open(log_dir).expect("reopens");
    let report = applier.apply(broker.broker.context(), &txns).await.expect("replays");
    assert_eq!(report.records_appended, 0, "{report:?}");
    let got: Vec<String> = values(&broker, "events", 0).await.into_iter().map(|(_, v)| v).collect();
    assert_eq!(got, ["e0", "e1", "e2"]);
}

#[tokio::test]
async fn records_for_a_missing_topic_are_dropped_and_offsets_reach_the_coordinator() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "kept", 1).await;
    let mut t = txn(5, vec![send("gone", 0, "x"), send("kept", 3, "y"), send("kept", 0, "z")]);
    t.offsets.push(OffsetCommitMessage { group_id: "sql-group".into(), topic: "kept".into(), partition: 0, offset: 1 });
    let mut applier = SqlApplier::open(broker.dir.path().to_path_buf()).expect("opens");
    let report = applier.apply(broker.broker.context(), &[t]).await.expect("applies");
    assert_eq!((report.records_appended, report.records_dropped, report.offsets_committed), (1, 2, 1));
    let request = kafgres_broker::group::types::OffsetFetchRequest { group_id: "sql-group".into(), topics: None };
    let fetched = broker.broker.context().groups.read(|c| c.offset_fetch(&request));
    let partitions: Vec<(i32, i64)> =
        fetched.topics.iter().flat_map(|(_, ps)| ps.iter().map(|p| (p.partition, p.offset))).collect();
    assert_eq!(partitions, [(0, 1)]);
}
