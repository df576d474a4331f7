//! A reload's settings on a running broker (`Broker::reload`): each takes
//! effect on the next request or connection, and a connection that was open
//! before stays open and served.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::*;
use kafgres_broker::settings::Reloadable;
use kafgres_broker::FlushPolicy;
use kafka_protocol::messages::ApiVersionsRequest;

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn current(broker: &TestBroker) -> Reloadable {
    Reloadable::from(broker.broker.context().config.as_ref())
}

#[tokio::test]
async fn limits_and_topic_creation_follow_a_reload_and_open_connections_stay() {
    let broker = TestBroker::start().await;
    let mut kept = broker.client().await;
    create_topic(&mut kept, "reloaded", 1).await;
    let initial = current(&broker);

    // Frame limit: a request over it now closes its connection.
    broker.broker.reload(&Reloadable { frame_bytes_max: 200, ..initial.clone() });
    let mut big = broker.client().await;
    let request = produce_request("reloaded", 0, -1, batch(&records("big", 20)));
    big.send_raw(&request_frame(kafgres_wire::ApiKey::Produce, 9, 1, &request)).await;
    big.expect_closed().await;
    assert_eq!(kept.call(0, &ApiVersionsRequest::default()).await.error_code, 0, "the old connection is served");

    // Topic auto-creation and its partition count.
    broker.broker.reload(&Reloadable { auto_create_topics: false, ..initial.clone() });
    let absent = kept.call(12, &metadata_request(Some(&["auto-off"]), true)).await;
    assert_ne!(absent.topics[0].error_code, 0, "created while auto-creation is off");
    broker.broker.reload(&Reloadable { default_partitions: 3, ..initial.clone() });
    let created = kept.call(12, &metadata_request(Some(&["auto-three"]), true)).await;
    assert_eq!(created.topics[0].error_code, 0);
    assert_eq!(created.topics[0].partitions.len(), 3);

    // Connections: the limit counts what is open; lowering it keeps them.
    broker.broker.reload(&Reloadable { connections_max: 1, ..initial.clone() });
    let mut refused = broker.client().await;
    refused.expect_closed().await;
    assert_eq!(kept.call(0, &ApiVersionsRequest::default()).await.error_code, 0);
    broker.broker.reload(&Reloadable { connections_max: 10, ..initial.clone() });
    let mut admitted = broker.client().await;
    assert_eq!(admitted.call(0, &ApiVersionsRequest::default()).await.error_code, 0);
    drop(admitted);

    // The request budget shrinks and grows with requests going on.
    broker.broker.reload(&Reloadable { request_memory_bytes_max: 64 << 10, ..initial.clone() });
    assert_eq!(broker.broker.context().request_memory.budget_bytes(), 64 << 10);
    assert_eq!(produce(&mut kept, 9, "reloaded", 0, -1, batch(&records("small", 2))).await.error_code, 0);
    broker.broker.reload(&initial);
    assert_eq!(broker.broker.context().request_memory.budget_bytes(), initial.request_memory_bytes_max);
    assert_eq!(produce(&mut kept, 9, "reloaded", 0, -1, batch(&records("after", 2))).await.error_code, 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn the_flush_policy_switches_every_partition() {
    let broker = TestBroker::start().await;
    let metrics = broker.broker.context().config.metrics;
    let mut client = broker.client().await;
    create_topic(&mut client, "switched", 2).await;
    let initial = current(&broker);
    assert_eq!(initial.flush_policy, FlushPolicy::Fsync);

    broker.broker.reload(&Reloadable { flush_policy: FlushPolicy::PageCache, ..initial.clone() });
    let flushes = metrics.flushes.load(Ordering::Relaxed);
    for i in 0..5 {
        let answer = produce(&mut client, 9, "switched", i % 2, -1, batch(&records("cached", 3))).await;
        assert_eq!(answer.error_code, 0);
    }
    assert_eq!(metrics.flushes.load(Ordering::Relaxed), flushes, "page_cache fdatasynced an append");
    let partition = broker.broker.context().topics.partition("switched", 0).expect("partition 0");
    assert_eq!(partition.flush_policy(), FlushPolicy::PageCache);
    assert_eq!(partition.high_watermark().offset, 9, "visible without an fdatasync");

    // Back to fsync: the tail written without one is flushed, and acks=all
    // waits for its own fdatasync again.
    broker.broker.reload(&initial);
    eventually("the tail written under page_cache is made durable", || partition.durable_offset() == 9).await;
    let flushes = metrics.flushes.load(Ordering::Relaxed);
    assert_eq!(produce(&mut client, 9, "switched", 0, -1, batch(&records("synced", 1))).await.error_code, 0);
    assert!(metrics.flushes.load(Ordering::Relaxed) > flushes, "fsync did not fdatasync an acks=all append");
    assert_eq!(partition.durable_offset(), 10);
    broker.shutdown().await;
}
