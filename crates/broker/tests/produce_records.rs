//! Produce's record-level policy: compressed batches walked under a cap and
//! stored as sent, per-topic `max.message.bytes`, LogAppendTime stamping and
//! the CreateTime timestamp window (INVALID_TIMESTAMP).

mod common;

use common::{as_stored, batch, creatable, fetch, produce, records, Client, TestBroker, TopicRef};
use kafgres_record::build::{assemble_batch, encode_compressed_batch, NewRecord, ProducerStamp};
use kafgres_record::compression::encode::{compress, raw_snappy};
use kafgres_record::compression::{CODEC_LZ4, CODEC_SNAPPY, CODEC_ZSTD};
use kafgres_record::BatchHeader;
use kafgres_wire::error_code;
use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
use kafka_protocol::messages::CreateTopicsRequest;
use kafka_protocol::protocol::StrBytes;

async fn create_with(client: &mut Client, topic: &str, configs: &[(&str, &str)]) {
    let configs = configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(k.to_string()))
                .with_value(Some(StrBytes::from_string(v.to_string())))
        })
        .collect();
    let request = CreateTopicsRequest::default().with_topics(vec![creatable(topic, 1, 1).with_configs(configs)]);
    let created = client.call(7, &request).await;
    assert_eq!(created.topics[0].error_code, 0, "{:?}", created.topics[0].error_message);
}

async fn fetched(client: &mut Client, topic: &str) -> Vec<u8> {
    let data = fetch(client, 12, TopicRef::Name(topic), 0, 0, 1 << 20).await;
    assert_eq!(data.error_code, 0);
    data.records.map(|b| b.to_vec()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_batches_are_stored_and_served_byte_identical() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_with(&mut client, "compressed", &[]).await;
    let mut expected = Vec::new();
    let mut next = 0;
    for codec in 1u8..=4 {
        let recs = records(&format!("c{codec}"), 5);
        let b = encode_compressed_batch(&recs, ProducerStamp::NONE, codec);
        let r = produce(&mut client, 9, "compressed", 0, -1, b.clone()).await;
        assert_eq!((r.error_code, r.base_offset), (0, next), "codec {codec}: {:?}", r.error_message);
        expected.extend(as_stored(&b, next));
        next += 5;
    }
    // librdkafka's raw (unframed) snappy.
    let recs = records("raw-snappy", 3);
    let body = kafgres_record::build::encode_records(&recs);
    let b = assemble_batch(&recs, ProducerStamp::NONE, CODEC_SNAPPY, &raw_snappy(&body));
    assert_eq!(produce(&mut client, 9, "compressed", 0, -1, b.clone()).await.base_offset, next);
    expected.extend(as_stored(&b, next));
    assert_eq!(fetched(&mut client, "compressed").await, expected);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decompression_bomb_is_refused_and_nothing_written() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_with(&mut client, "bomb", &[]).await;
    let zeros = vec![0u8; 256 << 20];
    for codec in [CODEC_ZSTD, CODEC_LZ4] {
        let payload = compress(codec, &zeros);
        let one = vec![NewRecord { key: None, value: Some(vec![0]), headers: vec![], timestamp_ms: 1 }];
        let b = assemble_batch(&one, ProducerStamp::NONE, codec, &payload);
        let r = produce(&mut client, 9, "bomb", 0, -1, b).await;
        assert_eq!((r.error_code, r.base_offset), (error_code::CORRUPT_MESSAGE, -1), "codec {codec}");
        let message = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        assert!(message.contains("decompresses to more than"), "{message}");
    }
    // Corrupt compressed payload (CRC valid): also CORRUPT_MESSAGE.
    let recs = records("x", 2);
    let b = assemble_batch(&recs, ProducerStamp::NONE, CODEC_ZSTD, b"definitely not zstd");
    assert_eq!(produce(&mut client, 9, "bomb", 0, -1, b).await.error_code, error_code::CORRUPT_MESSAGE);
    assert_eq!(broker.log_end("bomb", 0), 0);
    assert!(fetched(&mut client, "bomb").await.is_empty());
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_append_time_topics_stamp_the_broker_time() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_with(&mut client, "appended", &[("message.timestamp.type", "LogAppendTime")]).await;
    let before = kafgres_broker::now_ms();
    let b = encode_compressed_batch(&records("lat", 3), ProducerStamp::NONE, CODEC_LZ4);
    let r = produce(&mut client, 9, "appended", 0, -1, b).await;
    let after = kafgres_broker::now_ms();
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert!((before..=after).contains(&r.log_append_time_ms), "{} not in {before}..={after}", r.log_append_time_ms);
    let stored = fetched(&mut client, "appended").await;
    let h = BatchHeader::parse(&stored).unwrap();
    assert!(h.is_log_append_time());
    assert_eq!((h.base_timestamp, h.max_timestamp), (r.log_append_time_ms, r.log_append_time_ms));
    // The stored batch is still valid (CRC rewritten).
    kafgres_record::validate_batches(&stored).unwrap();
    // A CreateTime topic answers -1, as Kafka does.
    create_with(&mut client, "created", &[]).await;
    assert_eq!(produce(&mut client, 9, "created", 0, -1, batch(&records("ct", 1))).await.log_append_time_ms, -1);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_time_outside_the_window_is_invalid_timestamp() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_with(&mut client, "window", &[("message.timestamp.before.max.ms", "60000")]).await;
    let now = kafgres_broker::now_ms();
    let at = |ts: i64| vec![NewRecord { key: None, value: Some(b"v".to_vec()), headers: vec![], timestamp_ms: ts }];
    let old = produce(&mut client, 9, "window", 0, -1, batch(&at(now - 3_600_000))).await;
    assert_eq!((old.error_code, old.base_offset), (error_code::INVALID_TIMESTAMP, -1), "{:?}", old.error_message);
    assert_eq!(old.error_message.as_deref(), Some("One or more records have been rejected due to invalid timestamp"));
    // The default after.max.ms (one hour) applies too, compressed or not;
    // v8+ lists each refused record (KIP-467) by its index in the batch.
    let mixed = [at(now), at(now + 2 * 3_600_000), at(-1), at(now + 3 * 3_600_000)].concat();
    let future = encode_compressed_batch(&mixed, ProducerStamp::NONE, CODEC_ZSTD);
    let refused = produce(&mut client, 9, "window", 0, -1, future.clone()).await;
    assert_eq!(refused.error_code, error_code::INVALID_TIMESTAMP);
    let listed: Vec<(i32, String)> = refused
        .record_errors
        .iter()
        .map(|e| (e.batch_index, e.batch_index_error_message.as_deref().unwrap_or_default().to_string()))
        .collect();
    assert_eq!(listed.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![1, 3], "{listed:?}");
    let expected = format!("Timestamp {} of message with offset 1 is out of range.", now + 2 * 3_600_000);
    assert!(listed[0].1.starts_with(&expected), "{listed:?}");
    assert!(listed[0].1.contains("The timestamp should be within ["), "{listed:?}");
    // v7 has no per-record errors.
    let v7 = produce(&mut client, 7, "window", 0, -1, future).await;
    assert_eq!((v7.error_code, v7.record_errors.len()), (error_code::INVALID_TIMESTAMP, 0));
    assert_eq!(broker.log_end("window", 0), 0);
    let fine = produce(&mut client, 9, "window", 0, -1, batch(&at(now))).await;
    assert_eq!((fine.error_code, fine.base_offset), (0, 0));
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_message_bytes_is_per_topic() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_with(&mut client, "small", &[("max.message.bytes", "200")]).await;
    let big = vec![NewRecord { key: None, value: Some(vec![7; 300]), headers: vec![], timestamp_ms: 1 }];
    assert_eq!(produce(&mut client, 9, "small", 0, -1, batch(&big)).await.error_code, error_code::MESSAGE_TOO_LARGE);
    let tiny = vec![NewRecord { key: None, value: Some(vec![7; 10]), headers: vec![], timestamp_ms: 1 }];
    assert_eq!(produce(&mut client, 9, "small", 0, -1, batch(&tiny)).await.error_code, 0);
    broker.broker.shutdown().await;
}
