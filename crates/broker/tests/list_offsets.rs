//! ListOffsets v1 and v7: earliest (-2), latest (-1, the high watermark),
//! unknown topics, and lookups by timestamp.

mod common;

use common::{batch, create_topic, list_offset, produce, records, TestBroker, TIMESTAMP_BASE_MS};
use kafgres_wire::error_code;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

async fn earliest_and_latest_follow_the_log(version: i16) {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "offsets", 2).await;
    let empty = list_offset(&mut client, version, "offsets", 0, LATEST).await;
    assert_eq!((empty.error_code, empty.offset, empty.timestamp), (0, 0, -1));
    produce(&mut client, 9, "offsets", 0, -1, batch(&records("a", 3))).await;
    produce(&mut client, 9, "offsets", 0, -1, batch(&records("b", 4))).await;

    let earliest = list_offset(&mut client, version, "offsets", 0, EARLIEST).await;
    assert_eq!((earliest.partition_index, earliest.error_code, earliest.offset), (0, 0, 0));
    let latest = list_offset(&mut client, version, "offsets", 0, LATEST).await;
    assert_eq!((latest.error_code, latest.offset, latest.timestamp), (0, 7, -1), "the high watermark");
    if version >= 4 {
        assert_eq!((earliest.leader_epoch, latest.leader_epoch), (0, 0));
    }
    // The other partition is untouched.
    let other = list_offset(&mut client, version, "offsets", 1, LATEST).await;
    assert_eq!((other.partition_index, other.error_code, other.offset), (1, 0, 0));

    let unknown_topic = list_offset(&mut client, version, "nowhere", 0, LATEST).await;
    assert_eq!((unknown_topic.error_code, unknown_topic.offset), (3, -1));
    let unknown_partition = list_offset(&mut client, version, "offsets", 2, EARLIEST).await;
    assert_eq!(unknown_partition.error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION);
    broker.broker.shutdown().await;
}

/// v1-v3 responses have no leader epoch field: it must stay -1 (its default)
/// for the response to be encodable at those versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earliest_and_latest_v1() {
    earliest_and_latest_follow_the_log(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earliest_and_latest_v7() {
    earliest_and_latest_follow_the_log(7).await;
}

/// Kafka answers a timestamp with the first offset whose record timestamp is
/// at or after it (the module doc of api/list_offsets.rs promises the same),
/// and with offset -1 when every record is older.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_by_timestamp() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "timed", 1).await;
    // Records at TIMESTAMP_BASE_MS + 0, 1, 2 (offsets 0..3), then + 0..4 (offsets 3..7).
    produce(&mut client, 9, "timed", 0, -1, batch(&records("a", 3))).await;
    let mut later = records("b", 4);
    for r in &mut later {
        r.timestamp_ms += 1_000;
    }
    produce(&mut client, 9, "timed", 0, -1, batch(&later)).await;
    for version in [7i16, 1] {
        let first = list_offset(&mut client, version, "timed", 0, TIMESTAMP_BASE_MS).await;
        assert_eq!((first.error_code, first.offset, first.timestamp), (0, 0, TIMESTAMP_BASE_MS), "v{version}");
        let second = list_offset(&mut client, version, "timed", 0, TIMESTAMP_BASE_MS + 500).await;
        assert_eq!(
            (second.error_code, second.offset, second.timestamp),
            (0, 3, TIMESTAMP_BASE_MS + 1_000),
            "v{version}"
        );
        let none = list_offset(&mut client, version, "timed", 0, TIMESTAMP_BASE_MS + 10_000).await;
        assert_eq!((none.error_code, none.offset, none.timestamp), (0, -1, -1), "v{version}");
    }
    broker.broker.shutdown().await;
}

/// Inside compressed batches the answers are exact, as in Kafka (which
/// decompresses): max timestamp (-3) names the record with the largest
/// timestamp, not its batch's first offset, and a lookup by time finds the
/// record inside the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_batches_are_looked_into() {
    use kafgres_record::build::{encode_compressed_batch, ProducerStamp};
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    create_topic(&mut client, "zipped", 1).await;
    // Offsets 0..4 at base + 0, 1, 2, 3; then offsets 4..8 at base + 10, 13, 11, 12.
    let first = records("a", 4);
    let mut second = records("b", 4);
    for (r, ts) in second.iter_mut().zip([10, 13, 11, 12]) {
        r.timestamp_ms = TIMESTAMP_BASE_MS + ts;
    }
    for (codec, batch) in [(1u8, &first), (4u8, &second)] {
        let bytes = encode_compressed_batch(batch, ProducerStamp::NONE, codec);
        assert_eq!(produce(&mut client, 9, "zipped", 0, -1, bytes).await.error_code, 0);
    }
    let max = list_offset(&mut client, 7, "zipped", 0, -3).await;
    assert_eq!((max.error_code, max.offset, max.timestamp), (0, 5, TIMESTAMP_BASE_MS + 13));
    let at_2 = list_offset(&mut client, 7, "zipped", 0, TIMESTAMP_BASE_MS + 2).await;
    assert_eq!((at_2.offset, at_2.timestamp), (2, TIMESTAMP_BASE_MS + 2));
    let at_12 = list_offset(&mut client, 7, "zipped", 0, TIMESTAMP_BASE_MS + 12).await;
    assert_eq!((at_12.offset, at_12.timestamp), (5, TIMESTAMP_BASE_MS + 13), "the first record at or after it");
    broker.broker.shutdown().await;
}
