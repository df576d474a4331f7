//! Hand-written hostile bodies for the transaction APIs (see `hostile.rs`).

use super::wire::{assert_array_too_long, assert_truncated, Wire};

#[test]
fn huge_counts_txn() {
    // AddPartitionsToTxn v0-3: transactional_id, producer_id, producer_epoch, topics; a topic is
    // name, partitions. v4+: transactions, each with its own id, epoch, verify_only, topics.
    let body = Wire::new().string("tx").i64(1).i16(0).huge_count().tail();
    assert_array_too_long(24, 0, &body, "AddPartitionsToTxnRequest", "v3_and_below_topics");
    let body = Wire::new().string("tx").i64(1).i16(0).i32(1).string("t").huge_count().tail();
    assert_array_too_long(24, 2, &body, "AddPartitionsToTxnTopic", "partitions");
    let body = Wire::new().compact_string("tx").i64(1).i16(0).huge_compact_count().tail();
    assert_array_too_long(24, 3, &body, "AddPartitionsToTxnRequest", "v3_and_below_topics");
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(24, 4, &body, "AddPartitionsToTxnRequest", "transactions");
    let body = Wire::new().uvarint(2).compact_string("tx").i64(1).i16(0).i8(0).huge_compact_count().tail();
    assert_array_too_long(24, 5, &body, "AddPartitionsToTxnTransaction", "topics");

    // TxnOffsetCommit: transactional_id, group_id, producer_id, producer_epoch, (v3+:
    // generation_id, member_id, group_instance_id), topics; a topic is name, partitions.
    let body = Wire::new().string("tx").string("g").i64(1).i16(0).huge_count().tail();
    assert_array_too_long(28, 0, &body, "TxnOffsetCommitRequest", "topics");
    let body = Wire::new().string("tx").string("g").i64(1).i16(0).i32(1).string("t").huge_count().tail();
    assert_array_too_long(28, 2, &body, "TxnOffsetCommitRequestTopic", "partitions");
    let body = Wire::new()
        .compact_string("tx")
        .compact_string("g")
        .i64(1)
        .i16(0)
        .i32(-1)
        .compact_string("m")
        .uvarint(0)
        .huge_compact_count()
        .tail();
    assert_array_too_long(28, 3, &body, "TxnOffsetCommitRequest", "topics");

    // WriteTxnMarkers v1: markers; a marker is producer_id, producer_epoch, transaction_result,
    // topics, coordinator_epoch; a topic is name, partition_indexes.
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(27, 1, &body, "WriteTxnMarkersRequest", "markers");
    let body = Wire::new().uvarint(2).i64(1).i16(0).i8(0).huge_compact_count().tail();
    assert_array_too_long(27, 1, &body, "WritableTxnMarker", "topics");
    let body = Wire::new().uvarint(2).i64(1).i16(0).i8(0).uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(27, 1, &body, "WritableTxnMarkerTopic", "partition_indexes");

    // DescribeProducers: topics; a topic is name, partition_indexes.
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(61, 0, &body, "DescribeProducersRequest", "topics");
    let body = Wire::new().uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(61, 0, &body, "TopicRequest", "partition_indexes");

    // ListTransactions: state_filters, producer_id_filters (8 bytes each), ...
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(66, 0, &body, "ListTransactionsRequest", "state_filters");
    let body = Wire::new().uvarint(1).huge_compact_count().tail();
    assert_array_too_long(66, 2, &body, "ListTransactionsRequest", "producer_id_filters");

    // DescribeTransactions: transactional_ids.
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(65, 0, &body, "DescribeTransactionsRequest", "transactional_ids");

    // AddOffsetsToTxn and EndTxn have no array: a huge id length, and a body cut short.
    let body = Wire::new().i16(i16::MAX).tail();
    assert_truncated(25, 0, &body, "AddOffsetsToTxnRequest", "transactional_id");
    let body = Wire::new().compact_string("tx").i64(1).i16(0).huge_compact_count().tail();
    assert_truncated(25, 3, &body, "AddOffsetsToTxnRequest", "group_id");
    let body = Wire::new().huge_compact_count().tail();
    assert_truncated(26, 4, &body, "EndTxnRequest", "transactional_id");
    let body = Wire::new().string("tx").i64(1).i16(0).done();
    assert_truncated(26, 0, &body, "EndTxnRequest", "committed");
}
