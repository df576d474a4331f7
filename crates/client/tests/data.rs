//! Produce, fetch and list offsets against an in-process broker.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{assert_records, records, TestBroker, TIMESTAMP_BASE_MS};
use kafgres_client::{ClientError, LogBounds, OffsetSpec, TimestampType};
use kafgres_record::build::{encode_compressed_batch, ProducerStamp};
use kafgres_record::compression::{CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY, CODEC_ZSTD};
use kafgres_wire::error_code;

const MAX_BYTES: i32 = 1 << 20;

#[test]
fn produced_records_come_back_exactly_from_any_offset() {
    let broker = TestBroker::start();
    let mut client = broker.client();
    client.create_topic("events", 1, &[]).unwrap();
    let first = records("a", 5);
    let second = records("b", 4);
    assert_eq!(client.produce("events", 0, &first).unwrap(), 0);
    assert_eq!(client.produce("events", 0, &second).unwrap(), 5);

    let all = client.fetch("events", 0, 0, MAX_BYTES, Duration::ZERO).unwrap();
    assert_eq!((all.high_watermark, all.log_start_offset, all.next_offset), (9, 0, 9));
    let expected: Vec<_> = first.iter().chain(&second).cloned().collect();
    assert_records(&all.records, &expected, 0);
    assert!(all.records.iter().all(|r| r.timestamp_type == TimestampType::CreateTime));

    // From the middle of the first batch, and of the second.
    let middle = client.fetch("events", 0, 3, MAX_BYTES, Duration::ZERO).unwrap();
    assert_records(&middle.records, &expected[3..], 3);
    let late = client.fetch("events", 0, 7, MAX_BYTES, Duration::ZERO).unwrap();
    assert_records(&late.records, &second[2..], 7);

    // At the end: nothing, after (about) the wait.
    let started = Instant::now();
    let end = client.fetch("events", 0, 9, MAX_BYTES, Duration::from_millis(200)).unwrap();
    assert!(end.records.is_empty());
    assert_eq!(end.next_offset, 9);
    assert!(started.elapsed() >= Duration::from_millis(150), "{:?}", started.elapsed());
}

#[test]
fn a_long_poll_is_woken_by_an_append() {
    let broker = TestBroker::start();
    let mut client = broker.client();
    client.create_topic("poll", 1, &[]).unwrap();
    let addr = broker.addr();
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut other = kafgres_client::Client::connect(addr, "producer", kafgres_client::PollWait).unwrap();
        other.produce("poll", 0, &records("late", 2)).unwrap();
    });
    let started = Instant::now();
    let fetched = client.fetch("poll", 0, 0, MAX_BYTES, Duration::from_secs(20)).unwrap();
    let waited = started.elapsed();
    producer.join().unwrap();
    assert_records(&fetched.records, &records("late", 2), 0);
    assert!(waited >= Duration::from_millis(250) && waited < Duration::from_secs(10), "{waited:?}");
}

#[test]
fn an_offset_outside_the_log_is_a_typed_error() {
    let broker = TestBroker::start();
    let mut client = broker.client();
    client.create_topic("oor", 1, &[]).unwrap();
    client.produce("oor", 0, &records("x", 3)).unwrap();
    let err = client.fetch("oor", 0, 100, MAX_BYTES, Duration::ZERO).unwrap_err();
    match err {
        ClientError::OffsetOutOfRange { ref topic, partition, offset, log_start_offset, log_end_offset } => {
            assert_eq!((topic.as_str(), partition, offset), ("oor", 0, 100));
            assert_eq!((log_start_offset, log_end_offset), (0, 3));
        }
        other => panic!("expected OffsetOutOfRange, got {other}"),
    }
    assert_eq!(err.kafka_code(), Some(error_code::OFFSET_OUT_OF_RANGE));
    // The connection stays usable after a Kafka error.
    assert_eq!(client.fetch("oor", 0, 0, MAX_BYTES, Duration::ZERO).unwrap().records.len(), 3);
}

#[test]
fn unknown_topics_and_partitions_are_kafka_errors() {
    let broker = TestBroker::start();
    let mut client = broker.client();
    match client.fetch("missing", 0, 0, MAX_BYTES, Duration::ZERO).unwrap_err() {
        ClientError::Kafka {
            api: "Fetch",
            code: error_code::UNKNOWN_TOPIC_OR_PARTITION,
            name: "UNKNOWN_TOPIC_OR_PARTITION",
            ..
        } => {}
        other => panic!("{other}"),
    }
    match client.list_offsets("missing", 0, OffsetSpec::Latest).unwrap_err() {
        ClientError::Kafka { api: "ListOffsets", code: error_code::UNKNOWN_TOPIC_OR_PARTITION, .. } => {}
        other => panic!("{other}"),
    }
    client.create_topic("one", 1, &[]).unwrap();
    match client.produce("one", 5, &records("p", 1)).unwrap_err() {
        ClientError::Kafka { api: "Produce", code: error_code::UNKNOWN_TOPIC_OR_PARTITION, .. } => {}
        other => panic!("{other}"),
    }
    assert!(!client.is_broken());
}

#[test]
fn list_offsets_earliest_latest_and_by_time() {
    let broker = TestBroker::start();
    let mut client = broker.client();
    client.create_topic("times", 2, &[]).unwrap();
    client.produce("times", 0, &records("t", 5)).unwrap();
    client.produce("times", 1, &records("u", 2)).unwrap();

    assert_eq!(client.list_offsets("times", 0, OffsetSpec::Earliest).unwrap().0, 0);
    assert_eq!(client.list_offsets("times", 0, OffsetSpec::Latest).unwrap().0, 5);
    let at = client.list_offsets("times", 0, OffsetSpec::Timestamp(TIMESTAMP_BASE_MS + 2)).unwrap();
    assert_eq!(at, (2, TIMESTAMP_BASE_MS + 2));
    let after_all = client.list_offsets("times", 0, OffsetSpec::Timestamp(TIMESTAMP_BASE_MS + 1_000)).unwrap();
    assert_eq!(after_all.0, -1);

    let many = client.list_offsets_many(&[("times", 1), ("times", 0), ("nope", 0)], OffsetSpec::Latest).unwrap();
    let got: Vec<_> = many.iter().map(|p| (p.topic.as_str(), p.partition, p.error_code, p.offset)).collect();
    assert_eq!(got, [("times", 1, 0, 2), ("times", 0, 0, 5), ("nope", 0, 3, -1)]);

    let bounds = client.log_bounds(&[("times", 0), ("times", 1), ("nope", 0)]).unwrap();
    let bound = |topic: &str, partition, error_code, start, end| LogBounds {
        topic: topic.into(),
        partition,
        error_code,
        log_start_offset: start,
        log_end_offset: end,
    };
    assert_eq!(bounds, [bound("times", 0, 0, 0, 5), bound("times", 1, 0, 0, 2), bound("nope", 0, 3, -1, -1)]);
    assert!(matches!(
        client.list_offsets_many(&[("times", 0), ("times", 0)], OffsetSpec::Latest),
        Err(ClientError::InvalidArgument(_))
    ));
}

#[test]
fn compressed_batches_decode_with_every_codec() {
    let broker = TestBroker::start();
    let mut client = broker.client();
    client.create_topic("packed", 1, &[]).unwrap();
    let mut expected = Vec::new();
    for (i, codec) in [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD].into_iter().enumerate() {
        let batch = records(&format!("c{codec}"), 6);
        let encoded = encode_compressed_batch(&batch, ProducerStamp::NONE, codec);
        assert_eq!(client.produce_batch("packed", 0, Bytes::from(encoded)).unwrap(), 6 * i as i64);
        expected.extend(batch);
    }
    let all = client.fetch("packed", 0, 0, MAX_BYTES, Duration::ZERO).unwrap();
    assert_records(&all.records, &expected, 0);
    // From inside the zstd batch.
    let tail = client.fetch("packed", 0, 20, MAX_BYTES, Duration::ZERO).unwrap();
    assert_records(&tail.records, &expected[20..], 20);
}
