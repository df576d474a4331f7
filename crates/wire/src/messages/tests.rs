//! Byte-exact fixtures: each hex string is what Kafka 4.4.0's own message
//! classes (`org.apache.kafka.common.message.*Data`, written with
//! `MessageUtil.toByteBufferAccessor`) serialize for the sample built in each
//! test. Decoding must give the sample back, and encoding the sample must give
//! the same bytes.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages as kp;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::*;

/// The topic id of every fixture.
const TOPIC_ID: uuid::Uuid = uuid::Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);

fn unhex(hex: &str) -> Bytes {
    let bytes: Vec<u8> =
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("fixture hex")).collect();
    Bytes::from(bytes)
}

/// Decodes `hex` at `version`, checks that nothing is left and that the
/// message encodes back to the same bytes with the size it announces.
fn roundtrip<M: Encodable + Decodable + PartialEq + std::fmt::Debug>(hex: &str, version: i16) -> M {
    let wire = unhex(hex);
    let mut input = wire.clone();
    let decoded = M::decode(&mut input, version).expect("decodes");
    assert!(input.is_empty(), "{} bytes left over", input.len());
    let mut out = BytesMut::new();
    decoded.encode(&mut out, version).expect("encodes");
    assert_eq!(out.freeze(), wire, "re-encoded bytes");
    assert_eq!(decoded.compute_size(version).expect("sizes"), wire.len());
    decoded
}

fn encoded<M: Encodable>(message: &M, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).expect("encodes");
    out.freeze()
}

fn s(text: &'static str) -> StrBytes {
    StrBytes::from_static_str(text)
}

#[test]
fn offset_commit_v10_names_topics_by_id() {
    let r: OffsetCommitRequest = roundtrip(
        "026700000003026d00020102030405060708090a0b0c0d0e0f100200000001000000000000002a00000007036d64000000",
        10,
    );
    assert_eq!((r.group_id.as_str(), r.generation_id_or_member_epoch, r.member_id.as_str()), ("g", 3, "m"));
    assert_eq!(r.group_instance_id, None);
    let t = &r.topics[0];
    assert_eq!((t.topic_id, t.name.as_str()), (TOPIC_ID, ""));
    let p = &t.partitions[0];
    assert_eq!((p.partition_index, p.committed_offset, p.committed_leader_epoch), (1, 42, 7));
    assert_eq!(p.committed_metadata.as_deref(), Some("md"));

    let r: OffsetCommitResponse = roundtrip("00000005020102030405060708090a0b0c0d0e0f1002000000010064000000", 10);
    assert_eq!(r.throttle_time_ms, 5);
    assert_eq!((r.topics[0].topic_id, r.topics[0].partitions[0].error_code), (TOPIC_ID, 100));
}

#[test]
fn offset_commit_v10_refuses_a_topic_name() {
    let mut r = OffsetCommitRequest::default();
    r.topics.push(kp::offset_commit_request::OffsetCommitRequestTopic::default().with_name(s("t").into()));
    assert!(r.encode(&mut BytesMut::new(), 10).is_err());
}

#[test]
fn offset_fetch_v10_names_topics_by_id() {
    let r: OffsetFetchRequest = roundtrip(
        "030267026d00000004020102030405060708090a0b0c0d0e0f100300000000000000020000026800ffffffff00000100",
        10,
    );
    assert!(r.require_stable);
    let (g, h) = (&r.groups[0], &r.groups[1]);
    assert_eq!((g.group_id.as_str(), g.member_id.as_deref(), g.member_epoch), ("g", Some("m"), 4));
    let topics = g.topics.as_ref().expect("topics");
    assert_eq!((topics[0].topic_id, topics[0].partition_indexes.as_slice()), (TOPIC_ID, &[0, 2][..]));
    assert_eq!((h.group_id.as_str(), h.member_id.as_deref(), h.member_epoch, &h.topics), ("h", None, -1, &None));
}

#[test]
fn api_versions_v5_carries_the_cluster_and_node() {
    let r: ApiVersionsRequest = roundtrip("026304312e30086b6166677265730000000100", 5);
    assert_eq!((r.client_software_name.as_str(), r.client_software_version.as_str()), ("c", "1.0"));
    assert_eq!((r.cluster_id.as_deref(), r.node_id), (Some("kafgres"), 1));
    let r: ApiVersionsRequest = roundtrip("026304312e3000ffffffff00", 5);
    assert_eq!((r.cluster_id, r.node_id), (None, -1));
    // Below v5 the fields do not exist.
    let with_node = ApiVersionsRequest { node_id: 1, ..ApiVersionsRequest::default() };
    assert!(with_node.encode(&mut BytesMut::new(), 4).is_err());
}

#[test]
fn api_versions_v5_answers_as_v4() {
    let mut r = ApiVersionsResponse::default();
    r.api_keys.push(kp::api_versions_response::ApiVersion::default().with_api_key(18).with_max_version(5));
    assert_eq!(encoded(&r, 5), encoded(&r.0, 4));
}

#[test]
fn delete_groups_v3_has_error_messages() {
    let r: DeleteGroupsResponse =
        roundtrip("0000000003026700451d5468652067726f757020696420646f6573206e6f742065786973742e0002680000000000", 3);
    let (g, h) = (&r.results[0], &r.results[1]);
    assert_eq!((g.result.group_id.as_str(), g.result.error_code), ("g", 69));
    assert_eq!(g.error_message.as_deref(), Some("The group id does not exist."));
    assert_eq!((h.result.group_id.as_str(), h.result.error_code, &h.error_message), ("h", 0, &None));
}

#[test]
fn delete_groups_below_v3_is_kafka_protocols() {
    let mut result = kp::delete_groups_response::DeletableGroupResult::default();
    result.group_id = s("g").into();
    result.error_code = 69;
    let ours = DeleteGroupsResponse {
        throttle_time_ms: 7,
        results: vec![DeletableGroupResult { result: result.clone(), error_message: Some(s("dropped")) }],
        ..DeleteGroupsResponse::default()
    };
    let theirs = kp::DeleteGroupsResponse::default().with_throttle_time_ms(7).with_results(vec![result]);
    for version in 0..=2 {
        assert_eq!(encoded(&ours, version), encoded(&theirs, version), "v{version}");
        let decoded = DeleteGroupsResponse::decode(&mut encoded(&theirs, version), version).expect("decodes");
        assert_eq!(decoded.results[0].error_message, None);
    }
}

#[test]
fn describe_log_dirs_v5_has_is_cordoned() {
    let r: DescribeLogDirsResponse = roundtrip(
        "000000000000020000032f640202740200000000000000000000000a000000000000000000000000000000000003e800000000000001f4010000",
        5,
    );
    let d = &r.results[0];
    assert!(d.is_cordoned);
    assert_eq!((d.result.log_dir.as_str(), d.result.total_bytes, d.result.usable_bytes), ("/d", 1000, 500));
    let p = &d.result.topics[0].partitions[0];
    assert_eq!((d.result.topics[0].name.as_str(), p.partition_size), ("t", 10));
}

#[test]
fn describe_log_dirs_below_v5_is_kafka_protocols() {
    let mut dir = kp::describe_log_dirs_response::DescribeLogDirsResult::default();
    dir.log_dir = s("/d");
    dir.total_bytes = 1000;
    let ours = DescribeLogDirsResponse {
        results: vec![DescribeLogDirsResult { result: dir.clone(), is_cordoned: false }],
        ..DescribeLogDirsResponse::default()
    };
    let theirs = kp::DescribeLogDirsResponse::default().with_results(vec![dir]);
    for version in 1..=4 {
        assert_eq!(encoded(&ours, version), encoded(&theirs, version), "v{version}");
    }
}

#[test]
fn write_txn_markers_v2_has_the_transaction_version() {
    let r: WriteTxnMarkersRequest = roundtrip("02000000000000000900020102027402000000000000000003020000", 2);
    let m = &r.markers[0];
    assert_eq!((m.marker.producer_id.0, m.marker.producer_epoch, m.marker.transaction_result), (9, 2, true));
    assert_eq!((m.marker.coordinator_epoch, m.transaction_version), (3, 2));
    assert_eq!(m.marker.topics[0].partition_indexes, [0]);
}

#[test]
fn list_offsets_v11_is_laid_out_as_v10() {
    let r = ListOffsetsRequest(kp::ListOffsetsRequest::default().with_isolation_level(1));
    assert_eq!(encoded(&r, 11), encoded(&r.0, 10));
    assert!(r.encode(&mut BytesMut::new(), 12).is_err());
}

#[test]
fn share_fetch_v2_has_the_acquire_mode_and_renew_flag() {
    let r: ShareFetchRequest = roundtrip(
        "0267026d00000002000001f4000000010000040000000003000000030101020102030405060708090a0b0c0d0e0f10020000000002000000000000000500000000000000060204000000020102030405060708090a0b0c0d0e0f1002000000010000",
        2,
    );
    assert_eq!((r.share_acquire_mode, r.is_renew_ack), (share_fetch::acquire_mode::RECORD_LIMIT, true));
    assert_eq!((r.share_session_epoch, r.max_wait_ms, r.min_bytes, r.max_bytes), (2, 500, 1, 1024));
    assert_eq!((r.max_records, r.batch_size), (3, 3));
    let p = &r.topics[0].partitions[0];
    assert_eq!((r.topics[0].topic_id, p.partition_index), (TOPIC_ID, 0));
    let b = &p.acknowledgement_batches[0];
    assert_eq!((b.first_offset, b.last_offset, b.acknowledge_types.as_slice()), (5, 6, &[4][..]));
    assert_eq!(
        (r.forgotten_topics_data[0].topic_id, r.forgotten_topics_data[0].partitions.as_slice()),
        (TOPIC_ID, &[1][..])
    );

    // The same request at v1 (batch-optimized, no renew) is kafka-protocol's.
    let v1: ShareFetchRequest = roundtrip(
        "0267026d00000002000001f400000001000004000000000300000003020102030405060708090a0b0c0d0e0f10020000000002000000000000000500000000000000060204000000020102030405060708090a0b0c0d0e0f1002000000010000",
        1,
    );
    assert_eq!(v1.request, r.request);
    // v1 cannot carry either new field.
    assert!(r.encode(&mut BytesMut::new(), 1).is_err());
}

#[test]
fn share_fetch_response_v2_is_laid_out_as_v1() {
    let hex = "0000000000000000003a98020102030405060708090a0b0c0d0e0f10020000000000000000000000000001000000000001020000000000000005000000000000000600010000000100";
    let r: ShareFetchResponse = roundtrip(hex, 2);
    assert_eq!(r.acquisition_lock_timeout_ms, 15000);
    let a = &r.responses[0].partitions[0].acquired_records[0];
    assert_eq!((a.first_offset, a.last_offset, a.delivery_count), (5, 6, 1));
    assert_eq!(encoded(&r, 2), encoded(&r.0, 1));
}

#[test]
fn share_acknowledge_v2_has_the_renew_flag() {
    let r: ShareAcknowledgeRequest =
        roundtrip("0267026d0000000301020102030405060708090a0b0c0d0e0f100200000000020000000000000005000000000000000603040100000000", 2);
    assert!(r.is_renew_ack);
    assert_eq!((r.group_id.as_ref().map(|g| g.0.as_str()), r.share_session_epoch), (Some("g"), 3));
    let b = &r.topics[0].partitions[0].acknowledgement_batches[0];
    assert_eq!((b.first_offset, b.last_offset, b.acknowledge_types.as_slice()), (5, 6, &[4, 1][..]));
    assert!(r.encode(&mut BytesMut::new(), 1).is_err());
}

#[test]
fn share_acknowledge_response_v2_has_the_lock_timeout() {
    let r: ShareAcknowledgeResponse = roundtrip(
        "0000000000000000003a98020102030405060708090a0b0c0d0e0f10020000000000790000000001000000000000000100",
        2,
    );
    assert_eq!(r.acquisition_lock_timeout_ms, 15000);
    let p = &r.responses[0].partitions[0];
    assert_eq!((r.responses[0].topic_id, p.error_code, p.current_leader.leader_id), (TOPIC_ID, 121, 1));
    // Ignorable: v1 drops it, as Kafka's class writes v1.
    assert_eq!(
        encoded(&r, 1),
        unhex("00000000000000020102030405060708090a0b0c0d0e0f10020000000000790000000001000000000000000100")
    );
}

#[test]
fn txn_offset_commit_v6_names_topics_by_id() {
    let r: TxnOffsetCommitRequest = roundtrip(
        "03747802670000000000000009000200000005026d00020102030405060708090a0b0c0d0e0f100200000001000000000000002affffffff01000000",
        6,
    );
    assert_eq!((r.transactional_id.as_str(), r.group_id.as_str()), ("tx", "g"));
    assert_eq!((r.producer_id.0, r.producer_epoch), (9, 2));
    assert_eq!((r.generation_id_or_member_epoch, r.member_id.as_str(), &r.group_instance_id), (5, "m", &None));
    let t = &r.topics[0];
    assert_eq!((t.topic_id, t.name.as_str()), (TOPIC_ID, ""));
    let p = &t.partitions[0];
    assert_eq!((p.partition_index, p.committed_offset, p.committed_leader_epoch), (1, 42, -1));
    assert_eq!(p.committed_metadata.as_deref(), Some(""));

    let r: TxnOffsetCommitResponse = roundtrip("00000000020102030405060708090a0b0c0d0e0f1002000000010000000000", 6);
    assert_eq!(r.throttle_time_ms, 0);
    assert_eq!((r.topics[0].topic_id, r.topics[0].partitions[0].partition_index), (TOPIC_ID, 1));
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
}

#[test]
fn txn_offset_commit_names_and_ids_stay_in_their_versions() {
    let by_name = TxnOffsetCommitRequest {
        topics: vec![TxnOffsetCommitRequestTopic { name: s("t").into(), ..Default::default() }],
        ..Default::default()
    };
    assert!(by_name.encode(&mut BytesMut::new(), 6).is_err());
    let by_id = TxnOffsetCommitRequest {
        topics: vec![TxnOffsetCommitRequestTopic { topic_id: TOPIC_ID, ..Default::default() }],
        ..Default::default()
    };
    assert!(by_id.encode(&mut BytesMut::new(), 5).is_err());
}

#[test]
fn txn_offset_commit_below_v6_is_kafka_protocols() {
    let mut topic = kp::txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    topic.name = s("t").into();
    topic.partitions.push(kp::txn_offset_commit_request::TxnOffsetCommitRequestPartition::default());
    let theirs = kp::TxnOffsetCommitRequest::default().with_topics(vec![topic]).with_generation_id(3);
    let ours = TxnOffsetCommitRequest::from(theirs.clone());
    for version in 3..=5 {
        assert_eq!(encoded(&ours, version), encoded(&theirs, version), "v{version}");
        let decoded = TxnOffsetCommitRequest::decode(&mut encoded(&theirs, version), version).expect("decodes");
        assert_eq!(decoded, ours);
    }
}

#[test]
fn describe_share_group_offsets_v1_has_the_lag() {
    let v1: DescribeShareGroupOffsetsResponse = roundtrip(
        "000000000302670202740102030405060708090a0b0c0d0e0f1003000000000000000000000005ffffffff00000000000000030000000000000001ffffffffffffffffffffffffffffffffffffffff000302780000000000000268010045036e660000",
        1,
    );
    let (g, h) = (&v1.groups[0], &v1.groups[1]);
    assert_eq!((g.group_id.as_str(), g.error_code, &g.error_message), ("g", 0, &None));
    assert_eq!((h.group_id.as_str(), h.error_code, h.error_message.as_deref()), ("h", 69, Some("nf")));
    let t = &g.topics[0];
    assert_eq!((t.topic_name.as_str(), t.topic_id), ("t", TOPIC_ID));
    let (p, q) = (&t.partitions[0], &t.partitions[1]);
    assert_eq!((p.partition_index, p.start_offset, p.leader_epoch, p.lag, p.error_code), (0, 5, -1, 3, 0));
    assert_eq!((q.partition_index, q.start_offset, q.lag, q.error_code), (1, -1, -1, 3));
    assert_eq!(q.error_message.as_deref(), Some("x"));

    // v0 has no lag: the same answer without it.
    let v0: DescribeShareGroupOffsetsResponse = roundtrip(
        "000000000302670202740102030405060708090a0b0c0d0e0f1003000000000000000000000005ffffffff0000000000000001ffffffffffffffffffffffff000302780000000000000268010045036e660000",
        0,
    );
    assert_eq!(v0.groups[0].topics[0].partitions[0].lag, -1);
    let mut without_lag = v1.clone();
    without_lag.groups[0].topics[0].partitions[0].lag = -1;
    assert_eq!(v0, without_lag);
}

// ---------------------------------------------------------------- Streams groups (KIP-1071)

mod streams {
    //! Serialized by Kafka 4.4.0's `StreamsGroup*Data` classes (a word-count
    //! topology with a repartition topic, a changelog, a copartition group,
    //! an endpoint, client tags, statuses and tasks).

    use super::roundtrip;
    use crate::messages::streams_group::*;

    const HB_REQUEST_V1: &str = "0267026d00000000ffffffff000372310000753001000000020302300206776f72647301010202720101000231010102026300000000000301000102027200000000000002026b0276000002010102000000000001010002700102689c400002057a6f6e6502610000000100";
    const HB_RESPONSE_V0: &str = "00000001000000026d0000000300001388000027100000ea600203027800020230030000000000000002000100000000040202681b59000206776f726473020000000100010000";
    const HB_RESPONSE_V1: &str = "00000001000000026d00000003000013880000ea600000000000002710020302780002023003000000000000000200010000000000040202681b59000206776f726473020000000100010000";
    const DESCRIBE_REQUEST_V1: &str = "0302670278010100";
    const DESCRIBE_RESPONSE_V0: &str = "0000000003000000026707537461626c65000000020000000201000000000202300206776f72647301020263000000030000010001000002026d00000002000003636c0b2f3132372e302e302e31000000000270ff0101010202300200000001000101000202300200000001000101000000800000000000451347726f75702078206e6f7420666f756e642e0278010000000000000000ff01800000000000";
    const DESCRIBE_RESPONSE_V1: &str = "0000000003000000026707537461626c65000000020000000201000000000202300206776f72647301020263000000030000010001000002026d00000002000003636c0b2f3132372e302e302e31000000000270ff010101020230020000000100010100020230020000000100010100000080000000ff0107737469636b790000451347726f75702078206e6f7420666f756e642e0278010000000000000000ff0180000000ff00000000";

    #[test]
    fn heartbeat_request_matches_kafka() {
        for version in [0, 1] {
            let r: StreamsGroupHeartbeatRequest = roundtrip(HB_REQUEST_V1, version);
            assert_eq!((r.group_id.as_str(), r.member_id.as_str(), r.endpoint_information_epoch), ("g", "m", -1));
            assert_eq!((r.instance_id, r.rack_id.as_deref()), (None, Some("r1")));
            let topology = r.topology.expect("topology");
            assert_eq!(topology.epoch, 2);
            assert_eq!(topology.subtopologies[1].repartition_source_topics[0].topic_configs[0].key, "k");
            assert_eq!(topology.subtopologies[1].state_changelog_topics[0].replication_factor, 3);
            assert_eq!(topology.subtopologies[1].copartition_groups[0].repartition_source_topics, vec![0]);
            assert_eq!((r.active_tasks, r.warmup_tasks), (Some(vec![]), None));
            assert_eq!(r.user_endpoint.map(|e| (e.host, e.port)), Some(("h".to_string(), 40000)));
            assert!(r.shutdown_application);
        }
    }

    #[test]
    fn heartbeat_response_matches_kafka() {
        let r: StreamsGroupHeartbeatResponse = roundtrip(HB_RESPONSE_V0, 0);
        assert_eq!((r.member_epoch, r.acceptable_recovery_lag_legacy.0, r.acceptable_recovery_lag.0), (3, 10_000, 0));
        let r: StreamsGroupHeartbeatResponse = roundtrip(HB_RESPONSE_V1, 1);
        assert_eq!((r.acceptable_recovery_lag_legacy.0, r.acceptable_recovery_lag.0), (0, 10_000));
        assert_eq!(r.status.as_ref().map(|s| s[0].status_code), Some(3));
        assert_eq!(r.active_tasks.as_ref().map(|t| t[0].partitions.clone()), Some(vec![0, 2]));
        assert_eq!(r.warmup_tasks, None);
        let endpoints = r.partitions_by_user_endpoint.expect("endpoints");
        assert_eq!(
            (endpoints[0].user_endpoint.port, endpoints[0].active_partitions[0].topic.as_str()),
            (7001, "words")
        );
    }

    #[test]
    fn describe_matches_kafka() {
        let r: StreamsGroupDescribeRequest = roundtrip(DESCRIBE_REQUEST_V1, 1);
        assert_eq!(
            (r.group_ids.len(), r.include_authorized_operations, r.include_topology_description.0),
            (2, true, true)
        );
        for (hex, version) in [(DESCRIBE_RESPONSE_V0, 0), (DESCRIBE_RESPONSE_V1, 1)] {
            let r: StreamsGroupDescribeResponse = roundtrip(hex, version);
            let g = &r.groups[0];
            assert_eq!((g.group_state.as_str(), g.members[0].client_host.as_str()), ("Stable", "/127.0.0.1"));
            let topology = g.topology.as_ref().expect("topology");
            assert_eq!(topology.subtopologies.as_ref().map(|s| s[0].state_changelog_topics[0].partitions), Some(3));
            assert_eq!(g.members[0].assignment.active_tasks[0].partitions, vec![1]);
            assert_eq!(r.groups[1].error_code, 69);
            assert_eq!(r.groups[1].topology, None);
            if version == 1 {
                assert_eq!((g.topology_description_status.0, g.assignor_name.0.as_deref()), (1, Some("sticky")));
            }
        }
    }
}
