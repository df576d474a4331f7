//! Hand-written hostile bodies, laid out from the Kafka protocol guide (not from the guard's
//! tables): for each covered API, a huge count with a few bytes of body is refused as
//! `ArrayTooLong` naming the right field, and without the guard allocating anything. (The topic,
//! cluster, ACL, SASL and transaction APIs are in `hostile_admin.rs` and `hostile_txn.rs`.)

use super::decode_measured;
use super::wire::{assert_accepted_and_decoded, assert_array_too_long, assert_truncated, guard, Wire};
use crate::guard::{FieldPath, GuardError};

/// The ten-byte body that motivated the guard: Metadata v0 asking for i32::MAX topics, which
/// kafka-protocol would reserve (~100 GB) before reading the first one.
#[test]
fn the_ten_byte_metadata_request() {
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(3, 0, &body, "MetadataRequest", "topics");
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(3, 9, &body, "MetadataRequest", "topics");
}

#[test]
fn huge_counts_data_plane() {
    // Produce: transactional_id (null), acks, timeout_ms, topic_data.
    let body = Wire::new().i16(-1).i16(-1).i32(30_000).huge_count().tail();
    assert_array_too_long(0, 3, &body, "ProduceRequest", "topic_data");
    let body = Wire::new().uvarint(0).i16(-1).i32(30_000).huge_compact_count().tail();
    assert_array_too_long(0, 9, &body, "ProduceRequest", "topic_data");
    // One topic (by name, then by id) with a huge partition count.
    let body = Wire::new().i16(-1).i16(1).i32(0).i32(1).string("t").huge_count().tail();
    assert_array_too_long(0, 8, &body, "TopicProduceData", "partition_data");
    let body = Wire::new().uvarint(0).i16(1).i32(0).uvarint(2).uuid().huge_compact_count().tail();
    assert_array_too_long(0, 13, &body, "TopicProduceData", "partition_data");

    // Fetch v4: replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, topics.
    let fetch_head = || Wire::new().i32(-1).i32(500).i32(1).i32(1 << 20).i8(0);
    assert_array_too_long(1, 4, &fetch_head().huge_count().tail(), "FetchRequest", "topics");
    // v7 adds session_id, session_epoch and forgotten_topics_data after topics.
    let body = fetch_head().i32(0).i32(-1).i32(0).huge_count().tail();
    assert_array_too_long(1, 7, &body, "FetchRequest", "forgotten_topics_data");
    // v12 (flexible): one topic, one partition, then a huge forgotten-partitions count.
    let body = fetch_head().i32(0).i32(-1).uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(1, 12, &body, "FetchTopic", "partitions");
    let body = fetch_head().i32(0).i32(-1).uvarint(1).uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(1, 12, &body, "ForgottenTopic", "partitions");

    // ListOffsets v1: replica_id, topics; v6: replica_id, isolation_level, topics (compact).
    let body = Wire::new().i32(-1).huge_count().tail();
    assert_array_too_long(2, 1, &body, "ListOffsetsRequest", "topics");
    let body = Wire::new().i32(-1).i8(0).huge_compact_count().tail();
    assert_array_too_long(2, 6, &body, "ListOffsetsRequest", "topics");
    let body = Wire::new().i32(-1).i8(0).uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(2, 10, &body, "ListOffsetsTopic", "partitions");
}

#[test]
fn huge_counts_admin() {
    // CreateTopics: topics first.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(19, 2, &body, "CreateTopicsRequest", "topics");
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(19, 5, &body, "CreateTopicsRequest", "topics");
    // One topic whose assignment has a huge broker list.
    let body = Wire::new().i32(1).string("t").i32(1).i16(1).i32(1).i32(0).huge_count().tail();
    assert_array_too_long(19, 4, &body, "CreatableReplicaAssignment", "broker_ids");

    // FindCoordinator v4: key_type, coordinator_keys.
    let body = Wire::new().i8(0).huge_compact_count().tail();
    assert_array_too_long(10, 4, &body, "FindCoordinatorRequest", "coordinator_keys");

    // DescribeConfigs: resources first; inside, configuration_keys (nullable).
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(32, 1, &body, "DescribeConfigsRequest", "resources");
    let body = Wire::new().uvarint(2).i8(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(32, 4, &body, "DescribeConfigsResource", "configuration_keys");

    // DeleteTopics: topic_names (v1-5), topics (v6).
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(20, 1, &body, "DeleteTopicsRequest", "topic_names");
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(20, 4, &body, "DeleteTopicsRequest", "topic_names");
    assert_array_too_long(20, 6, &body, "DeleteTopicsRequest", "topics");

    // No arrays: a huge string length instead.
    let body = Wire::new().huge_compact_count().tail();
    assert_truncated(18, 3, &body, "ApiVersionsRequest", "client_software_name");
    let body = Wire::new().i16(i16::MAX).tail();
    assert_truncated(22, 0, &body, "InitProducerIdRequest", "transactional_id");
}

#[test]
fn huge_counts_groups() {
    // OffsetCommit v2: group_id, generation, member_id, retention_time_ms, topics.
    let body = Wire::new().string("g").i32(1).string("m").i64(-1).huge_count().tail();
    assert_array_too_long(8, 2, &body, "OffsetCommitRequest", "topics");
    // v8: group_id, generation, member_id, group_instance_id, topics; one topic, huge partitions.
    let body = Wire::new()
        .compact_string("g")
        .i32(1)
        .compact_string("m")
        .uvarint(0)
        .uvarint(2)
        .compact_string("t")
        .huge_compact_count()
        .tail();
    assert_array_too_long(8, 8, &body, "OffsetCommitRequestTopic", "partitions");

    // OffsetFetch v1: group_id, topics; v8: groups; inside a group, topics.
    let body = Wire::new().string("g").huge_count().tail();
    assert_array_too_long(9, 1, &body, "OffsetFetchRequest", "topics");
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(9, 8, &body, "OffsetFetchRequest", "groups");
    let body = Wire::new().uvarint(2).compact_string("g").uvarint(0).i32(0).huge_compact_count().tail();
    assert_array_too_long(9, 9, &body, "OffsetFetchRequestGroup", "topics");

    // JoinGroup v0: group_id, session_timeout_ms, member_id, protocol_type, protocols.
    let body = Wire::new().string("g").i32(10_000).string("").string("consumer").huge_count().tail();
    assert_array_too_long(11, 0, &body, "JoinGroupRequest", "protocols");
    let body = Wire::new()
        .compact_string("g")
        .i32(10_000)
        .i32(10_000)
        .compact_string("")
        .uvarint(0)
        .compact_string("consumer")
        .huge_compact_count()
        .tail();
    assert_array_too_long(11, 6, &body, "JoinGroupRequest", "protocols");

    // SyncGroup v0: group_id, generation_id, member_id, assignments.
    let body = Wire::new().string("g").i32(1).string("m").huge_count().tail();
    assert_array_too_long(14, 0, &body, "SyncGroupRequest", "assignments");

    // LeaveGroup v3: group_id, members.
    let body = Wire::new().string("g").huge_count().tail();
    assert_array_too_long(13, 3, &body, "LeaveGroupRequest", "members");
    let body = Wire::new().compact_string("g").huge_compact_count().tail();
    assert_array_too_long(13, 5, &body, "LeaveGroupRequest", "members");

    // ListGroups v4: states_filter.
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(16, 4, &body, "ListGroupsRequest", "states_filter");

    // DescribeGroups: groups.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(15, 0, &body, "DescribeGroupsRequest", "groups");
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(15, 6, &body, "DescribeGroupsRequest", "groups");

    // Heartbeat has no array: a huge group id length.
    let body = Wire::new().uvarint(u32::MAX).tail();
    assert_truncated(12, 4, &body, "HeartbeatRequest", "group_id");

    // DeleteGroups: groups_names.
    let body = Wire::new().huge_count().tail();
    assert_array_too_long(42, 0, &body, "DeleteGroupsRequest", "groups_names");
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(42, 2, &body, "DeleteGroupsRequest", "groups_names");

    // OffsetDelete: group_id, topics; a topic is name, partitions.
    let body = Wire::new().string("g").huge_count().tail();
    assert_array_too_long(47, 0, &body, "OffsetDeleteRequest", "topics");
    let body = Wire::new().string("g").i32(1).string("t").huge_count().tail();
    assert_array_too_long(47, 0, &body, "OffsetDeleteRequestTopic", "partitions");

    // ConsumerGroupHeartbeat: group_id, member_id, member_epoch, instance_id, rack_id,
    // rebalance_timeout_ms, subscribed_topic_names, (v1: subscribed_topic_regex),
    // server_assignor, topic_partitions; nulls mean "unchanged".
    let head = || Wire::new().compact_string("g").compact_string("m").i32(0).uvarint(0).uvarint(0).i32(-1);
    let body = head().huge_compact_count().tail();
    assert_array_too_long(68, 0, &body, "ConsumerGroupHeartbeatRequest", "subscribed_topic_names");
    let body = head().uvarint(0).uvarint(0).uvarint(0).huge_compact_count().tail();
    assert_array_too_long(68, 1, &body, "ConsumerGroupHeartbeatRequest", "topic_partitions");
    let body = head().uvarint(0).uvarint(0).uvarint(2).uuid().huge_compact_count().tail();
    assert_array_too_long(68, 0, &body, "TopicPartitions", "partitions");

    // ConsumerGroupDescribe: group_ids.
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(69, 1, &body, "ConsumerGroupDescribeRequest", "group_ids");
}

#[test]
fn huge_counts_streams_groups() {
    // StreamsGroupHeartbeat: group_id, member_id, member_epoch, endpoint_information_epoch,
    // instance_id, rack_id, rebalance_timeout_ms, topology (nullable struct: a presence byte, then
    // epoch, subtopologies), active_tasks, ...
    let head = || Wire::new().compact_string("g").compact_string("m").i32(0).i32(0).uvarint(0).uvarint(0).i32(-1);
    let body = head().uvarint(1).i32(1).huge_compact_count().tail();
    assert_array_too_long(88, 0, &body, "Topology", "subtopologies");
    let body = head().uvarint(1).i32(1).uvarint(2).compact_string("0").huge_compact_count().tail();
    assert_array_too_long(88, 1, &body, "Subtopology", "source_topics");
    // A null topology (presence byte -1), then active_tasks.
    let body = head().i8(-1).huge_compact_count().tail();
    assert_array_too_long(88, 1, &body, "StreamsGroupHeartbeatRequest", "active_tasks");

    // StreamsGroupDescribe: group_ids.
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(89, 1, &body, "StreamsGroupDescribeRequest", "group_ids");

    // StreamsGroupTopologyDescriptionUpdate: group_id, member_id, topology_epoch, description.
    let body = Wire::new().compact_string("g").compact_string("m").i32(0).huge_compact_count().tail();
    assert_array_too_long(93, 0, &body, "TopologyDescription", "subtopologies");
}

#[test]
fn huge_counts_share_groups() {
    // ShareGroupHeartbeat v1: group_id, member_id, member_epoch, rack_id, subscribed_topic_names.
    let body = Wire::new().compact_string("g").compact_string("m").i32(0).uvarint(0).huge_compact_count().tail();
    assert_array_too_long(76, 1, &body, "ShareGroupHeartbeatRequest", "subscribed_topic_names");
    let body = Wire::new().huge_compact_count().tail();
    assert_array_too_long(77, 1, &body, "ShareGroupDescribeRequest", "group_ids");

    // ShareFetch v1: group_id, member_id, share_session_epoch, max_wait_ms, min_bytes, max_bytes,
    // max_records, batch_size, topics (topic_id, partitions (partition_index, acknowledgement
    // batches (first, last, types))), forgotten_topics_data.
    let head =
        || Wire::new().compact_string("g").compact_string("m").i32(1).i32(500).i32(1).i32(1 << 20).i32(500).i32(500);
    assert_array_too_long(78, 1, &head().huge_compact_count().tail(), "ShareFetchRequest", "topics");
    let topic = || head().uvarint(2).uuid();
    assert_array_too_long(78, 1, &topic().huge_compact_count().tail(), "FetchTopic", "partitions");
    let partition = || topic().uvarint(2).i32(0);
    assert_array_too_long(78, 1, &partition().huge_compact_count().tail(), "FetchPartition", "acknowledgement_batches");
    let body = partition().uvarint(2).i64(0).i64(9).huge_compact_count().tail();
    assert_array_too_long(78, 1, &body, "AcknowledgementBatch", "acknowledge_types");

    // ShareAcknowledge v1: group_id, member_id, share_session_epoch, topics.
    let body = Wire::new().compact_string("g").compact_string("m").i32(1).huge_compact_count().tail();
    assert_array_too_long(79, 1, &body, "ShareAcknowledgeRequest", "topics");

    // DescribeShareGroupOffsets v0: groups (group_id, topics (topic_name, partitions)).
    assert_array_too_long(
        90,
        0,
        &Wire::new().huge_compact_count().tail(),
        "DescribeShareGroupOffsetsRequest",
        "groups",
    );
    let group = || Wire::new().uvarint(2).compact_string("g");
    let body = group().huge_compact_count().tail();
    assert_array_too_long(90, 0, &body, "DescribeShareGroupOffsetsRequestGroup", "topics");
    let body = group().uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(90, 0, &body, "DescribeShareGroupOffsetsRequestTopic", "partitions");

    // AlterShareGroupOffsets v0: group_id, topics (topic_name, partitions (index, start offset)).
    let body = Wire::new().compact_string("g").huge_compact_count().tail();
    assert_array_too_long(91, 0, &body, "AlterShareGroupOffsetsRequest", "topics");
    let body = Wire::new().compact_string("g").uvarint(2).compact_string("t").huge_compact_count().tail();
    assert_array_too_long(91, 0, &body, "AlterShareGroupOffsetsRequestTopic", "partitions");
    // DeleteShareGroupOffsets v0: group_id, topics (topic_name).
    let body = Wire::new().compact_string("g").huge_compact_count().tail();
    assert_array_too_long(92, 0, &body, "DeleteShareGroupOffsetsRequest", "topics");
}

/// A count is compared with what is left *after* it: exactly enough elements are fine, one more
/// is not.
#[test]
fn count_limit_is_exact() {
    // DescribeGroups v0: groups of empty names take 2 bytes each; then include_authorized... is
    // absent before v3.
    let fits = Wire::new().i32(3).i16(0).i16(0).i16(0).done();
    assert_accepted_and_decoded(15, 0, &fits);
    let one_more = Wire::new().i32(4).i16(0).i16(0).i16(0).done();
    assert!(matches!(
        guard(15, 0, &one_more),
        Err(GuardError::ArrayTooLong { count: 4, element_bytes_min: 2, remaining_bytes: 6, .. })
    ));
}

#[test]
fn nulls_and_negative_lengths() {
    // Metadata topics may be null (v0 too, in kafka-protocol), classic and compact.
    assert_accepted_and_decoded(3, 0, &Wire::new().i32(-1).done());
    assert_accepted_and_decoded(3, 9, &Wire::new().uvarint(0).i8(1).i8(0).i8(0).no_tags().done());
    // Produce topic_data may not.
    let body = Wire::new().i16(-1).i16(1).i32(0).i32(-1).done();
    let at = FieldPath { structure: "ProduceRequest", field: "topic_data" };
    assert_eq!(guard(0, 3, &body), Err(GuardError::UnexpectedNull { field: at, offset: 8 }));
    assert!(decode_measured(0, 3, &body).0.is_err());
    // Below -1 is never a length.
    let body = Wire::new().i16(-1).i16(1).i32(0).i32(-2).done();
    assert_eq!(guard(0, 3, &body), Err(GuardError::NegativeLength { field: at, offset: 8, length: -2 }));
    let body = Wire::new().i16(-7).done();
    assert!(matches!(guard(0, 3, &body), Err(GuardError::NegativeLength { length: -7, .. })));
    // A compact null where a string is required.
    let body = Wire::new().uvarint(0).done();
    assert!(matches!(guard(12, 4, &body), Err(GuardError::UnexpectedNull { .. })));
}

#[test]
fn varints() {
    // Six bytes: refused (Kafka refuses; kafka-protocol would stop after five and misparse).
    let body = Wire::new().raw(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]).done();
    assert!(matches!(guard(3, 9, &body), Err(GuardError::VarintTooLong { offset: 0, .. })));
    // Five bytes whose last carries bits past 32: dropped, as the decoders do. Here the value is
    // 0 (null topics), then the three booleans and no tags.
    let body = Wire::new().raw(&[0x80, 0x80, 0x80, 0x80, 0x70]).i8(1).i8(0).i8(1).no_tags().done();
    assert_accepted_and_decoded(3, 9, &body);
    // A varint cut short.
    let body = Wire::new().raw(&[0xff, 0xff]).done();
    assert!(matches!(guard(3, 9, &body), Err(GuardError::Truncated { offset: 2, .. })));
}

/// Fetch v17/v18 partition: partition, current_leader_epoch, fetch_offset, last_fetched_epoch,
/// log_start_offset, partition_max_bytes, then tags.
fn fetch_request_with_partition_tags(tags: Wire) -> Vec<u8> {
    let mut partition = Wire::new().i32(0).i32(-1).i64(0).i32(-1).i64(-1).i32(1 << 20).done();
    partition.extend(tags.done());
    Wire::new()
        .i32(500) // max_wait_ms (replica_id is gone from v15)
        .i32(1)
        .i32(1 << 20)
        .i8(0)
        .i32(0)
        .i32(-1)
        .uvarint(2) // one topic
        .uuid()
        .uvarint(2) // one partition
        .raw(&partition)
        .no_tags() // end of topic
        .uvarint(1) // no forgotten topics
        .compact_string("") // rack_id
        .no_tags()
        .done()
}

#[test]
fn known_tagged_fields_are_read_structurally() {
    // ReplicaDirectoryId (tag 0, a UUID) with a size prefix that lies (0): kafka-protocol ignores
    // the size of a known tag and reads 16 bytes, and so does the guard.
    let tags = Wire::new().uvarint(1).uvarint(0).uvarint(0).uuid();
    assert_accepted_and_decoded(1, 17, &fetch_request_with_partition_tags(tags));
    // The same size lie on an unknown tag would skip 0 bytes and misparse: the UUID's first
    // byte (7) is read as the topic's tag count and the body runs out.
    let tags = Wire::new().uvarint(1).uvarint(9).uvarint(0).uuid();
    let body = fetch_request_with_partition_tags(tags);
    assert!(guard(1, 17, &body).is_err());
    // Tag 0 before v17 is a known tag at the wrong version: kafka-protocol refuses it.
    let tags = Wire::new().uvarint(1).uvarint(0).uvarint(16).uuid();
    let body = fetch_request_with_partition_tags(tags);
    assert!(matches!(guard(1, 16, &body), Err(GuardError::TagNotValidForVersion { tag: 0, version: 16, .. })));
    assert!(decode_measured(1, 16, &body).0.is_err());
    // HighWatermark (tag 1, v18) cut short.
    let tags = Wire::new().uvarint(1).uvarint(1).uvarint(8).i32(0);
    let body = fetch_request_with_partition_tags(tags);
    assert!(matches!(guard(1, 18, &body), Err(GuardError::Truncated { .. })));

    // Request-level ClusterId (tag 0): a compact string, here with an impossible length.
    let body = Wire::new()
        .i32(-1)
        .i32(500)
        .i32(1)
        .i32(1 << 20)
        .i8(0)
        .i32(0)
        .i32(-1)
        .uvarint(1)
        .uvarint(1)
        .compact_string("")
        .uvarint(1) // one tag
        .uvarint(0)
        .uvarint(5)
        .uvarint(u32::MAX)
        .tail();
    assert_truncated(1, 12, &body, "FetchRequest", "cluster_id");
    // Request-level ReplicaState (tag 1, v15+): a struct with its own tag section.
    let state = Wire::new().i32(3).i64(9).no_tags().done();
    let head =
        || Wire::new().i32(500).i32(1).i32(1 << 20).i8(0).i32(0).i32(-1).uvarint(1).uvarint(1).compact_string("");
    let body = head().uvarint(1).uvarint(1).uvarint(13).raw(&state).done();
    assert_accepted_and_decoded(1, 15, &body);
    let body = head().uvarint(1).uvarint(1).uvarint(13).raw(&state[..12]).done();
    assert!(matches!(guard(1, 15, &body), Err(GuardError::Truncated { .. })));
}

#[test]
fn unknown_tagged_fields() {
    // ApiVersions v3: client_software_name, client_software_version, tags.
    let head = || Wire::new().compact_string("x").compact_string("1");
    assert_accepted_and_decoded(18, 3, &head().uvarint(2).uvarint(5).uvarint(1).i8(9).uvarint(7).uvarint(0).done());
    // A tag whose size runs past the end.
    let body = head().uvarint(1).uvarint(5).uvarint(100).tail();
    assert_truncated(18, 3, &body, "ApiVersionsRequest", "(tagged fields)");
    // More tags than bytes to hold them.
    let body = head().uvarint(u32::MAX).tail();
    assert!(matches!(guard(18, 3, &body), Err(GuardError::ArrayTooLong { .. })));
}

/// Kafka and kafka-protocol ignore bytes after the body; so does the guard.
#[test]
fn trailing_bytes_are_ignored() {
    let body = Wire::new().string("g").i32(1).string("m").raw(b"trailing").done();
    assert_accepted_and_decoded(12, 0, &body);
    assert_accepted_and_decoded(18, 0, b"anything");
}

#[test]
fn unknown_apis_and_versions() {
    let unknown = |api_key, api_version| GuardError::UnknownApi { api_key, api_version };
    assert_eq!(guard(999, 0, &[]), Err(unknown(999, 0)));
    assert_eq!(guard(0, 2, &[]), Err(unknown(0, 2)));
    assert_eq!(guard(0, 14, &[]), Err(unknown(0, 14)));
    assert_eq!(guard(1, -1, &[]), Err(unknown(1, -1)));
    assert_eq!(crate::guard::schema_versions(0), Some(3..=13));
    assert_eq!(crate::guard::schema_versions(999), None);
}
