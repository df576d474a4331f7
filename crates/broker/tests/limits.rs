//! The limits around clients: the broker-wide budget for request frames in
//! flight (Kafka's `queued.max.request.bytes`) and the connections one
//! address may hold (`max.connections.per.ip`).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use kafgres_broker::BrokerConfig;
use kafka_protocol::messages::ApiVersionsRequest;

/// Waits until `done` holds, at most 5 s.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The first bytes of a frame announcing `len` bytes, and some of its body.
fn stalled_frame(len: usize, sent: usize) -> Vec<u8> {
    let mut out = (len as i32).to_be_bytes().to_vec();
    out.extend(std::iter::repeat_n(0u8, sent));
    out
}

#[tokio::test]
async fn stalled_frames_hold_no_more_than_the_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = BrokerConfig {
        frame_bytes_max: 8 << 20,
        request_memory_bytes_max: 20 << 20,
        ..BrokerConfig::for_tests(dir.path().to_path_buf())
    };
    let broker = TestBroker::start_with(dir, Arc::default(), config).await;
    // Five clients announce 7 MiB frames, send 1 MiB of each and stall: two
    // fit the 20 MiB budget, the other three wait before any buffer is made.
    let mut stalled = Vec::new();
    for _ in 0..5 {
        let mut client = broker.client().await;
        client.send_raw(&stalled_frame(7 << 20, 1 << 20)).await;
        stalled.push(client);
    }
    let reserved = || broker.broker.request_bytes_reserved();
    // The semaphore is fair: the first waiter takes what is left as it frees
    // up, so the whole budget shows as reserved, but only two buffers exist.
    eventually("the budget reserved", || reserved() == 20 << 20).await;
    // Every read now waits, a small request too: the broker stays inside
    // its budget rather than read more.
    let addr = broker.addr();
    let small = tokio::spawn(async move {
        let mut client = Client::connect(addr).await;
        client.call(2, &ApiVersionsRequest::default()).await.error_code
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!small.is_finished(), "a read went past a spent budget");
    assert_eq!(reserved(), 20 << 20);
    // The stalled clients go away: their reservations are given back, and
    // the small request is read and answered.
    drop(stalled);
    let answered = tokio::time::timeout(Duration::from_secs(5), small).await;
    assert_eq!(answered.expect("answered once the budget is free").expect("task"), 0);
    eventually("the budget is free again", || reserved() == 0).await;
}

#[tokio::test]
async fn one_address_cannot_open_connections_faster_than_its_rate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config =
        BrokerConfig { connection_rate_per_address_max: 1.0, ..BrokerConfig::for_tests(dir.path().to_path_buf()) };
    let broker = TestBroker::start_with(dir, Arc::default(), config).await;
    // 1 per second over the 10 s minimum window: ten at once are served...
    for _ in 0..10 {
        let mut client = broker.client().await;
        assert_eq!(client.call(2, &ApiVersionsRequest::default()).await.error_code, 0);
    }
    // ...the eleventh is closed unanswered, however few are open.
    let mut refused = broker.client().await;
    assert!(refused.try_call(2, &ApiVersionsRequest::default()).await.is_err());
    let mut elsewhere = Client::connect_from("127.0.0.2".parse().expect("address"), broker.addr()).await;
    assert_eq!(elsewhere.call(2, &ApiVersionsRequest::default()).await.error_code, 0);
    let counters: std::collections::HashMap<_, _> =
        broker.broker.context().config.metrics.counters().into_iter().collect();
    assert_eq!(counters["connections_refused"], 1);
}

#[tokio::test]
async fn one_address_cannot_take_every_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = BrokerConfig {
        connections_max: 1000,
        connections_per_address_max: 20,
        ..BrokerConfig::for_tests(dir.path().to_path_buf())
    };
    let broker = TestBroker::start_with(dir, Arc::default(), config).await;
    let mut idle = Vec::new();
    for _ in 0..20 {
        let mut client = broker.client().await;
        assert_eq!(client.call(2, &ApiVersionsRequest::default()).await.error_code, 0);
        idle.push(client);
    }
    // The 21st from 127.0.0.1 is closed at once, unanswered.
    let mut refused = broker.client().await;
    let sent = refused.try_call(2, &ApiVersionsRequest::default()).await;
    assert!(sent.is_err(), "the connection over the limit was served: {sent:?}");
    // A client from another address (127.0.0.2 is loopback too) is served.
    let mut elsewhere = Client::connect_from("127.0.0.2".parse().expect("address"), broker.addr()).await;
    assert_eq!(elsewhere.call(2, &ApiVersionsRequest::default()).await.error_code, 0);
    // A slot given back is taken again.
    drop(idle.pop());
    let mut again = None;
    let deadline = Instant::now() + Duration::from_secs(5);
    while again.is_none() {
        assert!(Instant::now() < deadline, "the freed slot was not given back");
        let mut client = broker.client().await;
        if client.try_call(2, &ApiVersionsRequest::default()).await.is_ok() {
            again = Some(client);
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
