//! Fetch v11 (topics by name), v13 and v15 (by topic id): exactly the stored
//! batches, the offsets around the log end, KIP-74's first-batch rule, and the
//! long poll.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{
    as_stored, batch, create_topic, decode_records, expected, fetch, fetch_request, produce, records, single_partition,
    TestBroker, TopicRef,
};
use kafgres_wire::error_code;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_returns_exactly_what_was_produced() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "fetched", 1).await;
    let first_records = records("a", 3);
    let second_records = records("b", 2);
    let (first, second) = (batch(&first_records), batch(&second_records));
    assert_eq!(produce(&mut client, 9, "fetched", 0, -1, first.clone()).await.base_offset, 0);
    assert_eq!(produce(&mut client, 9, "fetched", 0, -1, second.clone()).await.base_offset, 3);
    let both: Vec<u8> = [as_stored(&first, 0), as_stored(&second, 3)].concat();
    let all_records = [expected(&first_records, 0), expected(&second_records, 3)].concat();

    for (version, topic) in [(11i16, TopicRef::Name("fetched")), (13, TopicRef::Id(id)), (15, TopicRef::Id(id))] {
        let response = client.call(version, &fetch_request(topic, 0, 0, 1 << 20, 0, 1)).await;
        assert_eq!(response.session_id, 0);
        match topic {
            TopicRef::Name(n) => assert_eq!(response.responses[0].topic, common::name(n)),
            TopicRef::Id(id) => assert_eq!(response.responses[0].topic_id, id),
        }
        let p = single_partition(response);
        assert_eq!((p.partition_index, p.error_code), (0, 0), "v{version}");
        assert_eq!((p.high_watermark, p.last_stable_offset, p.log_start_offset), (5, 5, 0), "v{version}");
        let bytes = p.records.expect("records");
        assert_eq!(&bytes[..], &both[..], "v{version}: the stored batches, byte for byte");
        assert_eq!(decode_records(&bytes), all_records, "v{version}");

        // From inside the first batch: Kafka serves from that batch's start.
        let middle = fetch(&mut client, version, topic, 0, 1, 1 << 20).await;
        assert_eq!(middle.records.as_deref(), Some(&both[..]), "v{version}");
        // From the second batch.
        let tail = fetch(&mut client, version, topic, 0, 3, 1 << 20).await;
        assert_eq!(tail.records.as_deref(), Some(&as_stored(&second, 3)[..]), "v{version}");
        // partition_max_bytes below the first batch: that batch whole, and only it (KIP-74).
        let small = fetch(&mut client, version, topic, 0, 0, 10).await;
        assert_eq!((small.error_code, small.records.as_deref()), (0, Some(&as_stored(&first, 0)[..])), "v{version}");
        // At the log end: no records, no error.
        let at_end = fetch(&mut client, version, topic, 0, 5, 1 << 20).await;
        assert_eq!((at_end.error_code, at_end.high_watermark), (0, 5), "v{version}");
        assert_eq!(at_end.records.unwrap_or_default(), Bytes::new(), "v{version}");
        // Past it: OFFSET_OUT_OF_RANGE.
        let past = fetch(&mut client, version, topic, 0, 6, 1 << 20).await;
        assert_eq!(past.error_code, error_code::OFFSET_OUT_OF_RANGE, "v{version}");
        assert!(past.records.unwrap_or_default().is_empty());
    }

    let unknown_name = fetch(&mut client, 11, TopicRef::Name("nowhere"), 0, 0, 1 << 20).await;
    assert_eq!(unknown_name.error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION);
    for version in [13i16, 15] {
        let unknown_id = fetch(&mut client, version, TopicRef::Id(Uuid::from_u128(42)), 0, 0, 1 << 20).await;
        assert_eq!(unknown_id.error_code, error_code::UNKNOWN_TOPIC_ID, "v{version}: UNKNOWN_TOPIC_ID");
    }
    broker.broker.shutdown().await;
}

/// A known topic id with a partition it does not have: Kafka answers
/// UNKNOWN_TOPIC_OR_PARTITION (the topic id is known, the partition is not);
/// UNKNOWN_TOPIC_ID is for ids the broker does not know.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_by_id_of_a_missing_partition_is_unknown_partition() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "one-partition", 1).await;
    let by_name = fetch(&mut client, 11, TopicRef::Name("one-partition"), 7, 0, 1 << 20).await;
    assert_eq!(by_name.error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION);
    let by_id = fetch(&mut client, 13, TopicRef::Id(id), 7, 0, 1 << 20).await;
    assert_eq!(by_id.error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION, "known topic id, unknown partition");
    broker.broker.shutdown().await;
}

/// The request's max_bytes bounds the whole response, the first partition
/// included; only a first batch larger than it may exceed it (KIP-74).
/// Kafka reads min(partition_max_bytes, max_bytes left) from each partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_max_bytes_bounds_the_first_partition() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "bounded", 1).await;
    let first = batch(&records("a", 2));
    for tag in ["a", "b", "c"] {
        produce(&mut client, 9, "bounded", 0, -1, batch(&records(tag, 2))).await;
    }
    let max_bytes = first.len() as i32 + 10;
    let request = fetch_request(TopicRef::Name("bounded"), 0, 0, 1 << 20, 0, 1).with_max_bytes(max_bytes);
    let p = single_partition(client.call(11, &request).await);
    let bytes = p.records.expect("records");
    assert!(bytes.starts_with(&as_stored(&first, 0)), "the first batch, whole");
    assert!(bytes.len() <= max_bytes as usize, "{} bytes returned for max_bytes {max_bytes}", bytes.len());
    broker.broker.shutdown().await;
}

/// `Partition::register_fetch_waiter` promises to drop the entries of fetches
/// that have finished, even on idle partitions whose high watermark never
/// moves: a fetch registers one waiter with every partition it reads, so a
/// consumer long-polling idle partitions would otherwise grow these lists
/// by one entry per partition per fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_fetch_waiters_are_released() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "idle", 2).await;
    let topic = broker.broker.context().topics.get("idle").expect("topic");
    // A fetch over both partitions, as fetch.rs registers it, then finished.
    let finished = std::sync::Arc::new(kafgres_broker::partition::FetchWaiter::default());
    for p in &topic.partitions {
        p.register_fetch_waiter(&finished);
    }
    let finished_weak = std::sync::Arc::downgrade(&finished);
    finished.finish();
    drop(finished);
    // The next fetch registers: finished entries must go now.
    let next = std::sync::Arc::new(kafgres_broker::partition::FetchWaiter::default());
    for p in &topic.partitions {
        p.register_fetch_waiter(&next);
    }
    assert_eq!(finished_weak.strong_count(), 0, "a finished fetch's waiter is still held by the partitions");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_wakes_on_produce() {
    let broker = TestBroker::start().await;
    let mut consumer = broker.client().await;
    let id = create_topic(&mut consumer, "polled", 1).await;
    let produced = records("late", 1);

    let started = Instant::now();
    let correlation_id = consumer.send(15, &fetch_request(TopicRef::Id(id), 0, 0, 1 << 20, 10_000, 1)).await;
    let mut producer = broker.client().await;
    let stored = batch(&produced);
    let producing = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        produce(&mut producer, 9, "polled", 0, -1, stored).await
    });
    let response = consumer.receive::<kafka_protocol::messages::FetchRequest>(15, correlation_id).await;
    let elapsed = started.elapsed();
    assert_eq!(producing.await.expect("producer task").base_offset, 0);
    let p = single_partition(response);
    assert_eq!((p.error_code, p.high_watermark), (0, 1));
    assert_eq!(decode_records(&p.records.expect("records")), expected(&produced, 0));
    // Behaviour check that the wake-up is event-driven: a fetch that only
    // re-checked on a timer (or at its deadline) would answer after the full
    // 10 s max_wait_ms. The produce lands after ~300 ms.
    assert!(elapsed >= Duration::from_millis(300), "answered before the data existed: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "fetch waited {elapsed:?} for a produce made after 300 ms");
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_without_data_waits_for_max_wait() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "quiet", 1).await;
    for version in [11i16, 15] {
        let topic = if version >= 13 {
            TopicRef::Id(broker.broker.context().topics.get("quiet").expect("topic").id)
        } else {
            TopicRef::Name("quiet")
        };
        let started = Instant::now();
        let response = client.call(version, &fetch_request(topic, 0, 0, 1 << 20, 200, 1)).await;
        let elapsed = started.elapsed();
        let p = single_partition(response);
        assert_eq!((p.error_code, p.high_watermark), (0, 0));
        assert!(p.records.unwrap_or_default().is_empty());
        assert!(elapsed >= Duration::from_millis(200), "v{version}: answered after {elapsed:?}, before max_wait_ms");
        assert!(elapsed < Duration::from_secs(5), "v{version}: answered after {elapsed:?}");
    }
    broker.broker.shutdown().await;
}
