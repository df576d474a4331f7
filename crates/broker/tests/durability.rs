//! Restart and recovery: a broker started again on the same directory with the
//! catalog's topics serves the same topic ids and records at the same offsets,
//! and a tail of garbage or a torn batch is cut without losing acked records.

mod common;

use std::io::Write;

use common::{
    as_stored, batch, create_topic, decode_records, expected, fetch, metadata_request, produce, records, TestBroker,
    TopicRef,
};
use kafgres_record::set_base_offset;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_topics_and_records() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "kept", 2).await;
    let (a, b) = (records("a", 3), records("b", 2));
    assert_eq!(produce(&mut client, 9, "kept", 0, -1, batch(&a)).await.base_offset, 0);
    assert_eq!(produce(&mut client, 9, "kept", 0, 1, batch(&b)).await.base_offset, 3);
    assert_eq!(produce(&mut client, 9, "kept", 1, -1, batch(&b)).await.base_offset, 0);
    drop(client);
    let (dir, catalog) = broker.shutdown().await;

    let broker = TestBroker::start_on(dir, catalog).await;
    let mut client = broker.client().await;
    let metadata = client.call(12, &metadata_request(None, false)).await;
    assert_eq!(metadata.topics.len(), 1);
    let topic = &metadata.topics[0];
    assert_eq!((topic.error_code, topic.topic_id, topic.partitions.len()), (0, id, 2));
    assert_eq!(metadata.brokers[0].port, i32::from(broker.addr().port()), "the new listener");

    let p0 = fetch(&mut client, 15, TopicRef::Id(id), 0, 0, 1 << 20).await;
    assert_eq!((p0.error_code, p0.high_watermark, p0.log_start_offset), (0, 5, 0));
    let bytes = p0.records.expect("records");
    assert_eq!(&bytes[..], &[as_stored(&batch(&a), 0), as_stored(&batch(&b), 3)].concat()[..]);
    assert_eq!(decode_records(&bytes), [expected(&a, 0), expected(&b, 3)].concat());
    let p1 = fetch(&mut client, 11, TopicRef::Name("kept"), 1, 0, 1 << 20).await;
    assert_eq!(decode_records(&p1.records.expect("records")), expected(&b, 0));

    let c = records("c", 1);
    assert_eq!(produce(&mut client, 9, "kept", 0, -1, batch(&c)).await.base_offset, 5);
    assert_eq!(produce(&mut client, 9, "kept", 1, -1, batch(&c)).await.base_offset, 2);
    let after = fetch(&mut client, 11, TopicRef::Name("kept"), 0, 5, 1 << 20).await;
    assert_eq!(decode_records(&after.records.expect("records")), expected(&c, 5));
    drop(client);
    broker.broker.shutdown().await;
}

/// What a crash can leave after the last acknowledged batch.
fn tails() -> Vec<(&'static str, Vec<u8>)> {
    // Half of a batch that would have been the next one (offset 5): a torn write.
    let mut torn = batch(&records("torn", 4));
    set_base_offset(&mut torn, 5);
    torn.truncate(torn.len() / 2);
    // A whole next batch whose last byte never reached the disk correctly.
    let mut bad_crc = batch(&records("crc", 2));
    set_base_offset(&mut bad_crc, 5);
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0xff;
    vec![("garbage", vec![0xab; 300]), ("short garbage", vec![0x11; 17]), ("torn batch", torn), ("bad CRC", bad_crc)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_cuts_a_damaged_tail_and_keeps_acked_records() {
    for (what, tail) in tails() {
        let broker = TestBroker::start().await;
        let mut client = broker.client().await;
        create_topic(&mut client, "crashy", 1).await;
        let (a, b) = (records("a", 2), records("b", 3));
        assert_eq!(produce(&mut client, 9, "crashy", 0, -1, batch(&a)).await.base_offset, 0);
        assert_eq!(produce(&mut client, 7, "crashy", 0, -1, batch(&b)).await.base_offset, 2);
        drop(client);
        let (dir, catalog) = broker.shutdown().await;

        let segment = dir.path().join("crashy-0").join("00000000000000000000.log");
        let clean_len = std::fs::metadata(&segment).expect("segment exists").len();
        let mut file = std::fs::OpenOptions::new().append(true).open(&segment).expect("open segment");
        file.write_all(&tail).expect("append tail");
        drop(file);

        let broker = TestBroker::start_on(dir, catalog).await;
        assert_eq!(std::fs::metadata(&segment).expect("segment").len(), clean_len, "{what}: the tail is cut");
        let mut client = broker.client().await;
        let fetched = fetch(&mut client, 11, TopicRef::Name("crashy"), 0, 0, 1 << 20).await;
        assert_eq!((fetched.error_code, fetched.high_watermark), (0, 5), "{what}");
        let acked = [expected(&a, 0), expected(&b, 2)].concat();
        assert_eq!(decode_records(&fetched.records.expect("records")), acked, "{what}");
        let c = records("c", 2);
        assert_eq!(produce(&mut client, 9, "crashy", 0, -1, batch(&c)).await.base_offset, 5, "{what}");
        let after = fetch(&mut client, 11, TopicRef::Name("crashy"), 0, 5, 1 << 20).await;
        assert_eq!(decode_records(&after.records.expect("records")), expected(&c, 5), "{what}");
        drop(client);
        broker.broker.shutdown().await;
    }
}
