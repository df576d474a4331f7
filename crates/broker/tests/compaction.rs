//! Log compaction end to end: a compacted topic with small segments is
//! cleaned by the broker's cleaner task after rolls, without any request
//! asking for it, and a consumer reading from offset 0 ends up with the
//! latest value of every key.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use kafgres_record::build::NewRecord;
use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
use kafka_protocol::messages::CreateTopicsRequest;
use kafka_protocol::protocol::StrBytes;

fn config(name: &str, value: &str) -> CreatableTopicConfig {
    CreatableTopicConfig::default()
        .with_name(StrBytes::from_string(name.into()))
        .with_value(Some(StrBytes::from_string(value.into())))
}

/// Every record from offset 0 on, fetched in rounds.
async fn read_all(client: &mut Client, topic: &str, end: i64) -> Vec<(i64, NewRecord)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for _ in 0..1_000 {
        if offset >= end {
            break;
        }
        let p = fetch(client, 12, TopicRef::Name(topic), 0, offset, 1 << 20).await;
        assert_eq!(p.error_code, 0, "fetch at {offset}");
        let got = decode_records(p.records.as_ref().expect("records"));
        let last = got.last().map(|(o, _)| *o).expect("progress below the log end");
        out.extend(got.into_iter().filter(|(o, _)| *o >= offset));
        offset = last + 1;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_keeps_the_latest_value_of_each_key() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    // Small segments (CreateTopics stores segment.bytes as given); retention.ms
    // of 1 ms would delete every closed segment of a `delete` topic, and must
    // not touch a `compact` one.
    let topic = creatable("latest", 1, 1).with_configs(vec![
        config("cleanup.policy", "compact"),
        config("segment.bytes", "2000"),
        config("retention.ms", "1"),
    ]);
    assert_eq!(client.call(7, &CreateTopicsRequest::default().with_topics(vec![topic])).await.topics[0].error_code, 0);
    let keys = 5;
    let updates = 60;
    let mut latest = BTreeMap::new();
    for round in 0..updates {
        let records: Vec<NewRecord> = (0..keys)
            .map(|k| NewRecord {
                key: Some(format!("key-{k}").into_bytes()),
                value: Some(format!("value-{round}-{k}").into_bytes()),
                headers: vec![],
                timestamp_ms: TIMESTAMP_BASE_MS + round,
            })
            .collect();
        for r in &records {
            latest.insert(r.key.clone().unwrap(), r.value.clone().unwrap());
        }
        let answer = produce(&mut client, 9, "latest", 0, -1, batch(&records)).await;
        assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    }
    let end = updates * keys as i64;
    let partition = broker.broker.context().topics.get("latest").unwrap().partition(0).unwrap().clone();
    let written: usize =
        (0..updates).map(|round| (0..keys).map(|k| format!("value-{round}-{k}").len()).sum::<usize>()).sum();
    // The cleaner runs on its own after the rolls; wait (bounded) for it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut fetched = Vec::new();
    while Instant::now() < deadline {
        fetched = read_all(&mut client, "latest", end).await;
        if fetched.len() < end as usize / 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(fetched.len() < end as usize / 4, "compacted: {} of {end} records left", fetched.len());
    assert!(partition.log_size_bytes() > 0);
    let offsets: Vec<i64> = fetched.iter().map(|(o, _)| *o).collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets increase: {offsets:?}");
    assert_eq!(*offsets.last().unwrap(), end - 1, "the newest record is kept");
    let mut replayed = BTreeMap::new();
    for (_, r) in &fetched {
        replayed.insert(r.key.clone().unwrap(), r.value.clone().unwrap());
    }
    assert_eq!(replayed, latest, "a consumer from offset 0 ends with the latest value per key");
    let kept_bytes: usize = fetched.iter().map(|(_, r)| r.value.as_ref().map_or(0, Vec::len)).sum();
    assert!(kept_bytes < written / 4);
    assert_eq!(list_offset(&mut client, 7, "latest", 0, -2).await.offset, 0, "compact alone deletes nothing");
    // And after a restart (the cleaned segments, the cleaner checkpoint).
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    let mut client = broker.client().await;
    assert_eq!(read_all(&mut client, "latest", end).await, fetched);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_without_a_key_is_refused_on_a_compacted_topic() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let topic = creatable("keyed", 1, 1).with_configs(vec![config("cleanup.policy", "compact")]);
    assert_eq!(client.call(7, &CreateTopicsRequest::default().with_topics(vec![topic])).await.topics[0].error_code, 0);
    let keyless = vec![NewRecord { key: None, value: Some(b"v".to_vec()), headers: vec![], timestamp_ms: 1_000 }];
    let refused = produce(&mut client, 9, "keyed", 0, -1, batch(&keyless)).await;
    assert_eq!((refused.error_code, refused.base_offset), (87, -1), "INVALID_RECORD");
    assert_eq!(
        refused.error_message.as_deref(),
        Some("Compacted topic cannot accept message without key in topic partition keyed-0.")
    );
    let keyed = produce(&mut client, 9, "keyed", 0, -1, batch(&records("k", 2))).await;
    assert_eq!((keyed.error_code, keyed.base_offset), (0, 0));
    broker.broker.shutdown().await;
}
