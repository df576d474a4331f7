//! Produce v7 and v9 (first flexible version): acks -1, 1 and 0, offsets
//! assigned consecutively across requests, and every refusal leaving the log
//! untouched.

mod common;

use common::{batch, create_topic, produce, produce_request, records, TestBroker};
use kafgres_record::build::NewRecord;
use kafgres_record::rewrite_crc;
use kafgres_wire::error_code;
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::ApiVersionsRequest;

const RECORDS_COUNT_AT: usize = 57;
const LAST_OFFSET_DELTA_AT: usize = 23;

fn big_record(value_bytes: usize) -> Vec<NewRecord> {
    vec![NewRecord { key: None, value: Some(vec![7u8; value_bytes]), headers: vec![], timestamp_ms: 1 }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_and_consecutive_offsets() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    for version in [7i16, 9] {
        let topic = format!("acks-v{version}");
        create_topic(&mut client, &topic, 1).await;

        let all = produce(&mut client, version, &topic, 0, -1, batch(&records("a", 2))).await;
        assert_eq!((all.error_code, all.base_offset, all.log_start_offset, all.log_append_time_ms), (0, 0, 0, -1));
        let leader = produce(&mut client, version, &topic, 0, 1, batch(&records("b", 3))).await;
        assert_eq!((leader.error_code, leader.base_offset), (0, 2));

        // acks=0: no response at all. The next response on this connection is
        // the ApiVersions sent right after it.
        let request = produce_request(&topic, 0, 0, batch(&records("c", 1)));
        client.send(version, &request).await;
        let api_versions = client.call(0, &ApiVersionsRequest::default()).await;
        assert_eq!(api_versions.error_code, 0);

        // Two batches in one request get consecutive offsets too.
        let mut two = batch(&records("d", 2));
        two.extend(batch(&records("e", 1)));
        let after = produce(&mut client, version, &topic, 0, -1, two).await;
        assert_eq!((after.error_code, after.base_offset), (0, 6), "after 2 + 3 + 1 records");
        let last = produce(&mut client, version, &topic, 0, -1, batch(&records("f", 1))).await;
        assert_eq!((last.error_code, last.base_offset), (0, 9));
        assert_eq!(broker.log_end(&topic, 0), 10);
    }
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_leave_the_log_untouched() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let topic = "refusals";
    create_topic(&mut client, topic, 1).await;
    assert_eq!(produce(&mut client, 9, topic, 0, -1, batch(&records("ok", 2))).await.base_offset, 0);

    for version in [7i16, 9] {
        let refused = |code: i16, what: &str, r: PartitionProduceResponse| {
            assert_eq!((r.error_code, r.base_offset), (code, -1), "v{version}: {what}: {:?}", r.error_message);
        };
        refused(3, "unknown partition", produce(&mut client, version, topic, 1, -1, batch(&records("x", 1))).await);
        refused(3, "unknown topic", produce(&mut client, version, "nowhere", 0, -1, batch(&records("x", 1))).await);
        refused(21, "acks=2", produce(&mut client, version, topic, 0, 2, batch(&records("x", 1))).await);

        let mut corrupt = batch(&records("x", 2));
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0x55;
        refused(2, "CRC mismatch", produce(&mut client, version, topic, 0, -1, corrupt).await);

        // Records count above what the batch holds (lastOffsetDelta agreeing).
        let mut more = batch(&records("x", 2));
        more[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&3i32.to_be_bytes());
        more[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&2i32.to_be_bytes());
        rewrite_crc(&mut more);
        refused(87, "records count 3 for 2 records", produce(&mut client, version, topic, 0, -1, more).await);
        // Records count below it.
        let mut fewer = batch(&records("x", 2));
        fewer[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&1i32.to_be_bytes());
        fewer[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&0i32.to_be_bytes());
        rewrite_crc(&mut fewer);
        refused(87, "records count 1 for 2 records", produce(&mut client, version, topic, 0, -1, fewer).await);
        // Records count disagreeing with lastOffsetDelta.
        let mut inconsistent = batch(&records("x", 2));
        inconsistent[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&3i32.to_be_bytes());
        rewrite_crc(&mut inconsistent);
        refused(
            87,
            "records count 3, lastOffsetDelta 1",
            produce(&mut client, version, topic, 0, -1, inconsistent).await,
        );

        // One record of just over 1 MiB: the batch exceeds message.max.bytes (1048588).
        let large = batch(&big_record(1 << 20));
        assert!(large.len() > kafgres_broker::topic_config::MESSAGE_BYTES_MAX_DEFAULT);
        refused(10, "batch over message.max.bytes", produce(&mut client, version, topic, 0, -1, large).await);

        assert_eq!(broker.log_end(topic, 0), 2, "v{version}: nothing was written");
    }
    // And the partition still takes records at the next offset.
    assert_eq!(produce(&mut client, 9, topic, 0, -1, batch(&records("ok", 1))).await.base_offset, 2);
    broker.broker.shutdown().await;
}

/// Kafka applies `message.max.bytes` to each record batch (LogValidator), not
/// to the whole records field of a partition: two batches of 600 KB in one
/// produce are accepted by Kafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_bytes_max_applies_per_batch() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "two-large", 1).await;
    let mut records_field = batch(&big_record(600_000));
    records_field.extend(batch(&big_record(600_000)));
    let response = produce(&mut client, 9, "two-large", 0, -1, records_field).await;
    assert_eq!((response.error_code, response.base_offset), (0, 0), "{:?}", response.error_message);
    assert_eq!(broker.log_end("two-large", 0), 2);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v13_names_topics_by_id() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "by-id", 2).await;

    let mut request = produce_request("", 1, -1, batch(&records("a", 2)));
    request.topic_data[0].topic_id = id;
    let r = client.call(13, &request).await;
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((r.responses[0].topic_id, p.index, p.error_code, p.base_offset), (id, 1, 0, 0));
    assert_eq!(broker.log_end("by-id", 1), 2);

    // An unknown id is UNKNOWN_TOPIC_ID; a known id with an unknown partition
    // UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
    request.topic_data[0].topic_id = uuid::Uuid::from_u128(7);
    let r = client.call(13, &request).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, error_code::UNKNOWN_TOPIC_ID);
    let mut request = produce_request("", 5, -1, batch(&records("b", 1)));
    request.topic_data[0].topic_id = id;
    let r = client.call(13, &request).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION);
    broker.broker.shutdown().await;
}
