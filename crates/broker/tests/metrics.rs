//! The broker's counters and connection table, as the SQL views read them:
//! requests by API, appends and group-commit flushes, and each live
//! connection with its client id until it closes.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;

#[tokio::test]
async fn requests_appends_flushes_and_connections_are_counted() {
    let broker = TestBroker::start().await;
    let metrics = broker.broker.context().config.metrics;
    let mut client = broker.client().await;
    create_topic(&mut client, "counted", 1).await;
    for i in 0..3 {
        let response = produce(&mut client, 9, "counted", 0, -1, batch(&records(&format!("r{i}"), 2))).await;
        assert_eq!(response.error_code, 0);
    }
    let data = fetch(&mut client, 12, TopicRef::Name("counted"), 0, 0, 1 << 20).await;
    assert_eq!(decode_records(&data.records.unwrap_or_default()).len(), 6);

    let counters: std::collections::HashMap<_, _> = metrics.counters().into_iter().collect();
    assert_eq!(counters["produce_requests"], 3);
    assert_eq!(counters["fetch_requests"], 1);
    // Each produce was timed up to its answer, which under fsync waited for
    // an fdatasync: at least the shortest flush per produce.
    assert_eq!(counters["produce_answered"], 3);
    let shortest_flush_micros = metrics
        .flush_histogram()
        .iter()
        .position(|&(_, n)| n > 0)
        .map_or(0, |bucket| if bucket == 0 { 0 } else { 1u64 << (bucket - 1) });
    assert!(counters["produce_micros_total"] >= 3 * shortest_flush_micros, "{counters:?}");
    assert!(counters["produce_micros_total"] > 0, "{counters:?}");
    assert!(counters["requests"] >= 5, "{counters:?}");
    assert_eq!(counters["appended_batches"], 3);
    assert!(counters["appended_bytes"] > 0);
    // acks=all under fsync: every batch was covered by some fdatasync.
    assert_eq!(counters["flushed_batches"], 3);
    assert!((1..=3).contains(&counters["flushes"]), "{counters:?}");
    assert_eq!(metrics.flush_histogram().iter().map(|(_, n)| n).sum::<u64>(), counters["flushes"]);

    let live = metrics.connections.snapshot();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].client_id, CLIENT_ID);
    assert_eq!(live[0].peer, client.stream.local_addr().expect("local address"));
    assert!(live[0].requests >= 5 && live[0].bytes_in > 0 && live[0].bytes_out > 0);

    drop(client);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !metrics.connections.snapshot().is_empty() {
        assert!(Instant::now() < deadline, "the closed connection stayed listed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(metrics.connections_open.load(Ordering::Relaxed), 0);
    assert_eq!(metrics.connections_accepted.load(Ordering::Relaxed), 1);
}
