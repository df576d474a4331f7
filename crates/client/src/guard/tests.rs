use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::*;
use crate::api::Pinned;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn encode<R: Pinned>(response: &R::Response) -> Vec<u8>
where
    R::Response: Encodable,
{
    let mut buf = BytesMut::new();
    response.encode(&mut buf, R::VERSION).expect("encodes");
    buf.to_vec()
}

/// The guard accepts `body`, and so does every decoder; every strict prefix
/// and every single-byte change is either refused by the guard or decodes.
fn accepted_and_robust<R: Pinned>(body: &[u8]) {
    check(R::RESPONSE, body).unwrap_or_else(|e| panic!("{} v{}: {e}", R::API, R::VERSION));
    R::Response::decode(&mut Bytes::copy_from_slice(body), R::VERSION).expect("decodes");
    for len in 0..body.len() {
        assert!(check(R::RESPONSE, &body[..len]).is_err(), "{}: prefix of {len} bytes accepted", R::API);
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..body.len() {
        for _ in 0..4 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut mutated = body.to_vec();
            mutated[i] = seed as u8;
            if check(R::RESPONSE, &mutated).is_ok() {
                // Must not abort on a huge allocation; an error is fine.
                let _ = R::Response::decode(&mut Bytes::from(mutated), R::VERSION);
            }
        }
    }
}

#[test]
fn fetch_with_tagged_fields_and_records() {
    let partition = PartitionData::default()
        .with_partition_index(3)
        .with_high_watermark(10)
        .with_aborted_transactions(Some(vec![AbortedTransaction::default()
            .with_producer_id(ProducerId(7))
            .with_first_offset(2)]))
        .with_diverging_epoch(EpochEndOffset::default().with_epoch(4).with_end_offset(9))
        .with_current_leader(LeaderIdAndEpoch::default().with_leader_id(BrokerId(1)).with_leader_epoch(2))
        .with_records(Some(Bytes::from_static(b"not really a batch")));
    let response = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic(TopicName(s("events")))
        .with_partitions(vec![partition.clone(), partition])]);
    accepted_and_robust::<FetchRequest>(&encode::<FetchRequest>(&response));
}

#[test]
fn metadata_with_brokers_topics_and_replicas() {
    let p = MetadataResponsePartition::default()
        .with_partition_index(1)
        .with_leader_id(BrokerId(1))
        .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
        .with_isr_nodes(vec![BrokerId(1)]);
    let response = MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default().with_node_id(BrokerId(1)).with_host(s("localhost"))])
        .with_cluster_id(Some(s("c")))
        .with_topics(vec![MetadataResponseTopic::default()
            .with_name(Some(TopicName(s("t"))))
            .with_partitions(vec![p])]);
    accepted_and_robust::<MetadataRequest>(&encode::<MetadataRequest>(&response));
}

#[test]
fn describe_groups_with_members() {
    let member = DescribedGroupMember::default()
        .with_member_id(s("m-1"))
        .with_client_id(s("rdkafka"))
        .with_member_metadata(Bytes::from_static(b"\x00\x01meta"))
        .with_member_assignment(Bytes::from_static(b"assign"));
    let group = DescribedGroup::default()
        .with_group_id(GroupId(s("g")))
        .with_group_state(s("Stable"))
        .with_protocol_type(s("consumer"))
        .with_members(vec![member.clone(), member]);
    let response = DescribeGroupsResponse::default().with_groups(vec![group]);
    accepted_and_robust::<DescribeGroupsRequest>(&encode::<DescribeGroupsRequest>(&response));
}

#[test]
fn create_topics_with_configs_and_the_config_error_tag() {
    let result = CreatableTopicResult::default()
        .with_name(TopicName(s("t")))
        .with_num_partitions(3)
        .with_topic_config_error_code(40)
        .with_configs(Some(vec![CreatableTopicConfigs::default()
            .with_name(s("retention.ms"))
            .with_value(Some(s("1")))]));
    let response = CreateTopicsResponse::default().with_topics(vec![result]);
    accepted_and_robust::<CreateTopicsRequest>(&encode::<CreateTopicsRequest>(&response));
}

#[test]
fn incremental_alter_configs_with_errors() {
    use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
    let ok = AlterConfigsResourceResponse::default()
        .with_resource_type(2)
        .with_resource_name(s("t"))
        .with_error_message(None);
    let refused = AlterConfigsResourceResponse::default()
        .with_error_code(40)
        .with_error_message(Some(s("Unknown topic config name: x")))
        .with_resource_type(2)
        .with_resource_name(s("u"));
    let response = IncrementalAlterConfigsResponse::default().with_responses(vec![ok, refused]);
    accepted_and_robust::<IncrementalAlterConfigsRequest>(&encode::<IncrementalAlterConfigsRequest>(&response));
}

#[test]
fn refuses_impossible_counts_before_decoding() {
    // ListGroups v4: throttle, error code, then a compact array claiming 2^32 - 2 groups.
    let mut body = vec![0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    body.push(0);
    let err = check(<ListGroupsRequest as Pinned>::RESPONSE, &body).unwrap_err();
    assert!(err.contains("array of"), "{err}");
    // A string longer than what is left.
    let body = [0, 0, 0, 0, 0, 0, 2, 100, 0];
    assert!(check(<ListGroupsRequest as Pinned>::RESPONSE, &body).is_err());
    // Too many tagged fields for the bytes left.
    assert!(skip_tagged_fields(&[0x7f]).is_err());
}

#[test]
fn a_known_tag_must_fill_its_size() {
    // CreatableTopicResult's tag 0 is an int16; declare it as 3 bytes long.
    let mut body = vec![0, 0, 0, 0, 2]; // throttle, one topic
    body.extend_from_slice(&[2, b't']); // name
    body.extend_from_slice(&[0; 16]); // topic id
    body.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 0, 0, 0]); // error, message, partitions, rf, configs
    body.extend_from_slice(&[1, 0, 3, 0, 40, 0]); // one tag: 0, size 3, int16 + a stray byte
    body.push(0); // response tags
    let err = check(<CreateTopicsRequest as Pinned>::RESPONSE, &body).unwrap_err();
    assert!(err.contains("does not fill"), "{err}");
}

#[test]
fn share_group_heartbeat_with_and_without_an_assignment() {
    use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
    let assigned = ShareGroupHeartbeatResponse::default()
        .with_member_id(Some(s("m-1")))
        .with_member_epoch(3)
        .with_assignment(Some(Assignment::default().with_topic_partitions(vec![
            TopicPartitions::default().with_topic_id(uuid::Uuid::from_u128(7)).with_partitions(vec![0, 1, 2]),
        ])));
    accepted_and_robust::<ShareGroupHeartbeatRequest>(&encode::<ShareGroupHeartbeatRequest>(&assigned));
    let unassigned = ShareGroupHeartbeatResponse::default().with_member_epoch(1);
    accepted_and_robust::<ShareGroupHeartbeatRequest>(&encode::<ShareGroupHeartbeatRequest>(&unassigned));
}

#[test]
fn share_fetch_with_acquired_records() {
    use kafka_protocol::messages::share_fetch_response::{
        AcquiredRecords, NodeEndpoint, PartitionData, ShareFetchableTopicResponse,
    };
    let partition = PartitionData::default()
        .with_partition_index(2)
        .with_records(Some(Bytes::from_static(b"not really a batch")))
        .with_acquired_records(vec![AcquiredRecords::default()
            .with_first_offset(4)
            .with_last_offset(9)
            .with_delivery_count(2)]);
    let response = ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(30_000)
        .with_responses(vec![ShareFetchableTopicResponse::default()
            .with_topic_id(uuid::Uuid::from_u128(9))
            .with_partitions(vec![partition.clone(), partition])])
        .with_node_endpoints(vec![NodeEndpoint::default().with_node_id(BrokerId(1)).with_host(s("127.0.0.1"))]);
    accepted_and_robust::<ShareFetchRequest>(&encode::<ShareFetchRequest>(&response));
}

#[test]
fn share_acknowledge_with_partition_errors() {
    use kafka_protocol::messages::share_acknowledge_response::{PartitionData, ShareAcknowledgeTopicResponse};
    let response = ShareAcknowledgeResponse::default().with_responses(vec![ShareAcknowledgeTopicResponse::default()
        .with_topic_id(uuid::Uuid::from_u128(9))
        .with_partitions(vec![PartitionData::default().with_partition_index(1).with_error_code(121)])]);
    accepted_and_robust::<ShareAcknowledgeRequest>(&encode::<ShareAcknowledgeRequest>(&response));
}
