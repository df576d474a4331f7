//! The broker's counters and connection table, as the SQL views read them:
//! requests by API, appends and group-commit flushes, each live connection
//! with its client id until it closes, and the time woken fetches spend in
//! the broker.

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
    let shortest_flush_micros = metrics.flush_histogram().iter().position(|&(_, n)| n > 0).map_or(0, |bucket| {
        if bucket == 0 {
            0
        } else {
            1u64 << (bucket - 1)
        }
    });
    assert!(counters["produce_micros_total"] >= 3 * shortest_flush_micros, "{counters:?}");
    assert!(counters["produce_micros_total"] > 0, "{counters:?}");
    // Each of them is also in the Produce histogram, none faster than the
    // shortest flush it waited for.
    let histograms: std::collections::HashMap<_, _> = metrics.span_histograms().into_iter().collect();
    assert_eq!(histograms["produce"].iter().map(|(_, n)| n).sum::<u64>(), 3);
    assert!(histograms["produce"].iter().all(|&(below, n)| n == 0 || below > shortest_flush_micros), "{histograms:?}");
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
    assert_eq!(live[0].peer, client.local_addr);
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

/// `fetch_woken` counts only fetches whose long poll an append ended, and
/// times them from that append's publish to the answer sent: a fetch that
/// found data at once, or waited out its deadline, is not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_woken_by_an_append_are_timed_from_it() {
    let broker = TestBroker::start().await;
    let metrics = broker.broker.context().config.metrics;
    let woken = || {
        let counters: std::collections::HashMap<_, _> = metrics.counters().into_iter().collect();
        (counters["fetch_woken"], counters["fetch_woken_micros_total"])
    };
    let mut consumer = broker.client().await;
    create_topic(&mut consumer, "woken", 1).await;
    let mut producer = broker.client().await;
    assert_eq!(produce(&mut producer, 9, "woken", 0, -1, batch(&records("early", 1))).await.error_code, 0);

    // Data already there: answered without waiting.
    let found = consumer.call(11, &fetch_request(TopicRef::Name("woken"), 0, 0, 1 << 20, 10_000, 1)).await;
    assert_eq!(decode_records(&single_partition(found).records.unwrap_or_default()).len(), 1);
    // Nothing arrives: answered at the deadline.
    let empty = consumer.call(11, &fetch_request(TopicRef::Name("woken"), 0, 1, 1 << 20, 50, 1)).await;
    assert_eq!(single_partition(empty).records.unwrap_or_default().len(), 0);
    assert_eq!(woken(), (0, 0));

    // Parked at the log end, then woken by a produce.
    let correlation_id = consumer.send(11, &fetch_request(TopicRef::Name("woken"), 0, 1, 1 << 20, 10_000, 1)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let produce_sent = Instant::now();
    assert_eq!(produce(&mut producer, 9, "woken", 0, -1, batch(&records("late", 1))).await.error_code, 0);
    let answer = consumer.receive::<kafka_protocol::messages::FetchRequest>(11, correlation_id).await;
    let produce_to_answer = produce_sent.elapsed();
    assert_eq!(decode_records(&single_partition(answer).records.unwrap_or_default()).len(), 1);
    let (count, micros) = woken();
    assert_eq!(count, 1);
    // The span starts after the produce was sent and ends before the
    // consumer had the answer, so it cannot exceed what the test saw.
    assert!(micros > 0 && micros <= produce_to_answer.as_micros() as u64, "{micros} µs of {produce_to_answer:?}");
    // The histogram holds that one span, in the bucket of its duration.
    let histograms: std::collections::HashMap<_, _> = metrics.span_histograms().into_iter().collect();
    let filled: Vec<_> = histograms["fetch_woken"].iter().filter(|&&(_, n)| n > 0).collect();
    assert_eq!(filled.len(), 1, "{filled:?}");
    let &&(below, n) = filled.first().expect("one bucket");
    assert!(n == 1 && micros < below && micros >= below / 2, "{micros} µs counted below {below}");
    broker.broker.shutdown().await;
}
