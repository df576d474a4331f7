//! The array rule divides by each element's smallest encoding; too large a minimum would refuse
//! valid requests whose arrays are tight. Here each struct's assumed minimum is compared, at every
//! version of its API, with the size of kafka-protocol's encoding of the struct's default value
//! (null or empty lengths, zero numbers, no tagged fields); then every array is filled with
//! smallest elements to measure how much decoding allocates per body byte.

use std::collections::BTreeSet;

use bytes::BytesMut;
use kafka_protocol::messages::add_partitions_to_txn_request::{AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction};
use kafka_protocol::messages::alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
use kafka_protocol::messages::alter_replica_log_dirs_request::{AlterReplicaLogDir, AlterReplicaLogDirTopic};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_partitions_request::{CreatePartitionsAssignment, CreatePartitionsTopic};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_topic_partitions_request::Cursor;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic, ReplicaState};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    alter_configs_request, describe_producers_request, describe_topic_partitions_request, elect_leaders_request,
    incremental_alter_configs_request, write_txn_markers_request, AddOffsetsToTxnRequest, AddPartitionsToTxnRequest,
    AlterConfigsRequest, ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, CreateAclsRequest,
    CreatePartitionsRequest, DeleteAclsRequest, DeleteRecordsRequest, DescribeAclsRequest, DescribeClusterRequest,
    DescribeProducersRequest, DescribeTopicPartitionsRequest, DescribeTransactionsRequest, EndTxnRequest,
    IncrementalAlterConfigsRequest, ListTransactionsRequest, OffsetDeleteRequest, OffsetForLeaderEpochRequest,
    SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::messages::{
    alter_share_group_offsets_request, delete_share_group_offsets_request, AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
};
use kafka_protocol::messages::{
    create_delegation_token_request::CreatableRenewers,
    describe_delegation_token_request::DescribeDelegationTokenOwner, CreateDelegationTokenRequest,
    DescribeDelegationTokenRequest, ExpireDelegationTokenRequest, RenewDelegationTokenRequest,
};
use kafka_protocol::messages::{describe_share_group_offsets_request, share_acknowledge_request, share_fetch_request};
use kafka_protocol::messages::{update_features_request, ListConfigResourcesRequest, UpdateFeaturesRequest};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest, ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
};
use kafka_protocol::messages::{AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest};
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest, DescribeGroupsRequest, FetchRequest,
    FindCoordinatorRequest, HeartbeatRequest, InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest,
    ListGroupsRequest, MetadataRequest, ProduceRequest, SyncGroupRequest,
};
use kafka_protocol::messages::{GetTelemetrySubscriptionsRequest, PushTelemetryRequest};
use kafka_protocol::messages::{
    ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupDescribeRequest, ShareGroupHeartbeatRequest,
};
use kafka_protocol::protocol::{Encodable, Message};

use crate::guard::schema::{Encoding, Kind, StructSchema};
use crate::guard::schemas::{
    self, acls, admin, cluster, consumer_groups, data, groups, quotas, replicas, share_groups, streams_groups,
    telemetry, tokens, topics, txn, users,
};
use crate::messages::{self, streams_group};

/// Checks one struct at every version of its API; returns the API and the struct's name (names
/// repeat across APIs: AlterConfigsResource, TopicRequest).
///
/// A kafka-protocol struct is checked up to the crate's last version; the versions beyond, which
/// `crate::messages` writes, are checked through its top-level types here and, for structs whose
/// layout changed, in [`minimum_sizes_of_kafka_4_4_elements`].
fn check<R: Encodable + Default + Message>(api_key: i16, schema: &StructSchema) -> (i16, &'static str) {
    let api = schemas::find(api_key).expect("covered API");
    for version in api.versions.min..=api.versions.max.min(R::VERSIONS.max) {
        let mut buf = BytesMut::new();
        R::default().encode(&mut buf, version).unwrap_or_else(|e| panic!("{} v{version}: {e:#}", schema.name));
        let assumed = schema.wire_bytes_min(crate::guard::encoding(api, version));
        assert_eq!(assumed, buf.len(), "{} v{version}", schema.name);
    }
    (api_key, schema.name)
}

#[test]
fn minimum_sizes_match_default_encodings() {
    let checked: BTreeSet<(i16, &str)> = [
        check::<ProduceRequest>(0, &data::PRODUCE_REQUEST),
        check::<TopicProduceData>(0, &data::TOPIC_PRODUCE_DATA),
        check::<PartitionProduceData>(0, &data::PARTITION_PRODUCE_DATA),
        check::<FetchRequest>(1, &data::FETCH_REQUEST),
        check::<ReplicaState>(1, &data::REPLICA_STATE),
        check::<FetchTopic>(1, &data::FETCH_TOPIC),
        check::<FetchPartition>(1, &data::FETCH_PARTITION),
        check::<ForgottenTopic>(1, &data::FORGOTTEN_TOPIC),
        check::<messages::ListOffsetsRequest>(2, &data::LIST_OFFSETS_REQUEST),
        check::<ListOffsetsTopic>(2, &data::LIST_OFFSETS_TOPIC),
        check::<ListOffsetsPartition>(2, &data::LIST_OFFSETS_PARTITION),
        check::<MetadataRequest>(3, &data::METADATA_REQUEST),
        check::<MetadataRequestTopic>(3, &data::METADATA_REQUEST_TOPIC),
        check::<messages::ApiVersionsRequest>(18, &admin::API_VERSIONS_REQUEST),
        check::<FindCoordinatorRequest>(10, &admin::FIND_COORDINATOR_REQUEST),
        check::<CreateTopicsRequest>(19, &admin::CREATE_TOPICS_REQUEST),
        check::<CreatableTopic>(19, &admin::CREATABLE_TOPIC),
        check::<CreatableReplicaAssignment>(19, &admin::CREATABLE_REPLICA_ASSIGNMENT),
        check::<CreatableTopicConfig>(19, &admin::CREATABLE_TOPIC_CONFIG),
        check::<DeleteTopicsRequest>(20, &admin::DELETE_TOPICS_REQUEST),
        check::<DeleteTopicState>(20, &admin::DELETE_TOPIC_STATE),
        check::<InitProducerIdRequest>(22, &admin::INIT_PRODUCER_ID_REQUEST),
        check::<DescribeConfigsRequest>(32, &admin::DESCRIBE_CONFIGS_REQUEST),
        check::<DescribeConfigsResource>(32, &admin::DESCRIBE_CONFIGS_RESOURCE),
        check::<messages::OffsetCommitRequest>(8, &groups::OFFSET_COMMIT_REQUEST),
        check::<OffsetCommitRequestTopic>(8, &groups::OFFSET_COMMIT_REQUEST_TOPIC),
        check::<OffsetCommitRequestPartition>(8, &groups::OFFSET_COMMIT_REQUEST_PARTITION),
        check::<messages::OffsetFetchRequest>(9, &groups::OFFSET_FETCH_REQUEST),
        check::<OffsetFetchRequestTopic>(9, &groups::OFFSET_FETCH_REQUEST_TOPIC),
        check::<OffsetFetchRequestGroup>(9, &groups::OFFSET_FETCH_REQUEST_GROUP),
        check::<OffsetFetchRequestTopics>(9, &groups::OFFSET_FETCH_REQUEST_TOPICS),
        check::<JoinGroupRequest>(11, &groups::JOIN_GROUP_REQUEST),
        check::<JoinGroupRequestProtocol>(11, &groups::JOIN_GROUP_REQUEST_PROTOCOL),
        check::<SyncGroupRequest>(14, &groups::SYNC_GROUP_REQUEST),
        check::<SyncGroupRequestAssignment>(14, &groups::SYNC_GROUP_REQUEST_ASSIGNMENT),
        check::<HeartbeatRequest>(12, &groups::HEARTBEAT_REQUEST),
        check::<LeaveGroupRequest>(13, &groups::LEAVE_GROUP_REQUEST),
        check::<MemberIdentity>(13, &groups::MEMBER_IDENTITY),
        check::<ListGroupsRequest>(16, &groups::LIST_GROUPS_REQUEST),
        check::<DescribeGroupsRequest>(15, &groups::DESCRIBE_GROUPS_REQUEST),
    ]
    .into_iter()
    .chain(checked_later())
    .chain(checked_streams())
    .collect();

    // Every struct reachable from the API table is in the list above.
    let mut reachable = BTreeSet::new();
    for api in schemas::APIS {
        collect_structs(api.key, api.body, &mut reachable);
    }
    assert_eq!(reachable, checked);
}

/// A struct of `crate::messages::streams_group` at every version of its API.
fn check_field<T: streams_group::Field + Default>(api_key: i16, schema: &StructSchema) -> (i16, &'static str) {
    let api = schemas::find(api_key).expect("covered API");
    for version in api.versions.min..=api.versions.max {
        let mut buf = BytesMut::new();
        T::default().put(&mut buf, version).unwrap_or_else(|e| panic!("{} v{version}: {e:#}", schema.name));
        let assumed = schema.wire_bytes_min(crate::guard::encoding(api, version));
        assert_eq!(assumed, buf.len(), "{} v{version}", schema.name);
    }
    (api_key, schema.name)
}

/// The structs of the Streams group APIs (KIP-1071).
fn checked_streams() -> Vec<(i16, &'static str)> {
    use streams_group::*;
    use streams_groups as s;
    vec![
        check_field::<StreamsGroupHeartbeatRequest>(88, &s::STREAMS_GROUP_HEARTBEAT_REQUEST),
        check_field::<Topology>(88, &s::TOPOLOGY),
        check_field::<Subtopology>(88, &s::SUBTOPOLOGY),
        check_field::<CopartitionGroup>(88, &s::COPARTITION_GROUP),
        check_field::<TopicInfo>(88, &s::TOPIC_INFO),
        check_field::<KeyValue>(88, &s::KEY_VALUE),
        check_field::<Endpoint>(88, &s::ENDPOINT),
        check_field::<TaskOffset>(88, &s::TASK_OFFSET),
        check_field::<TaskIds>(88, &s::TASK_IDS),
        check_field::<StreamsGroupDescribeRequest>(89, &s::STREAMS_GROUP_DESCRIBE_REQUEST),
        check_field::<StreamsGroupTopologyDescriptionUpdateRequest>(
            93,
            &s::STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE_REQUEST,
        ),
        check_field::<TopologyDescription>(93, &s::TOPOLOGY_DESCRIPTION),
        check_field::<TopologyDescriptionSubtopology>(93, &s::TOPOLOGY_DESCRIPTION_SUBTOPOLOGY),
        check_field::<TopologyDescriptionNode>(93, &s::TOPOLOGY_DESCRIPTION_NODE),
        check_field::<TopologyDescriptionGlobalStore>(93, &s::TOPOLOGY_DESCRIPTION_GLOBAL_STORE),
    ]
}

/// The structs of the APIs covered later (cluster, topics, consumer groups, transactions, SASL,
/// ACLs).
fn checked_later() -> Vec<(i16, &'static str)> {
    vec![
        check::<SaslHandshakeRequest>(17, &admin::SASL_HANDSHAKE_REQUEST),
        check::<kafka_protocol::messages::DescribeClientQuotasRequest>(48, &quotas::DESCRIBE_CLIENT_QUOTAS_REQUEST),
        check::<kafka_protocol::messages::describe_client_quotas_request::ComponentData>(48, &quotas::COMPONENT_DATA),
        check::<kafka_protocol::messages::AlterClientQuotasRequest>(49, &quotas::ALTER_CLIENT_QUOTAS_REQUEST),
        check::<kafka_protocol::messages::alter_client_quotas_request::EntryData>(49, &quotas::ENTRY_DATA),
        check::<kafka_protocol::messages::alter_client_quotas_request::EntityData>(49, &quotas::ENTITY_DATA),
        check::<kafka_protocol::messages::alter_client_quotas_request::OpData>(49, &quotas::OP_DATA),
        check::<SaslAuthenticateRequest>(36, &admin::SASL_AUTHENTICATE_REQUEST),
        check::<CreatePartitionsRequest>(37, &topics::CREATE_PARTITIONS_REQUEST),
        check::<CreatePartitionsTopic>(37, &topics::CREATE_PARTITIONS_TOPIC),
        check::<CreatePartitionsAssignment>(37, &topics::CREATE_PARTITIONS_ASSIGNMENT),
        check::<DeleteRecordsRequest>(21, &topics::DELETE_RECORDS_REQUEST),
        check::<DeleteRecordsTopic>(21, &topics::DELETE_RECORDS_TOPIC),
        check::<DeleteRecordsPartition>(21, &topics::DELETE_RECORDS_PARTITION),
        check::<OffsetForLeaderEpochRequest>(23, &topics::OFFSET_FOR_LEADER_EPOCH_REQUEST),
        check::<OffsetForLeaderTopic>(23, &topics::OFFSET_FOR_LEADER_TOPIC),
        check::<OffsetForLeaderPartition>(23, &topics::OFFSET_FOR_LEADER_PARTITION),
        check::<DescribeTopicPartitionsRequest>(75, &topics::DESCRIBE_TOPIC_PARTITIONS_REQUEST),
        check::<describe_topic_partitions_request::TopicRequest>(75, &topics::DESCRIBE_TOPIC_PARTITIONS_TOPIC_REQUEST),
        check::<Cursor>(75, &topics::CURSOR),
        check::<AlterConfigsRequest>(33, &cluster::ALTER_CONFIGS_REQUEST),
        check::<alter_configs_request::AlterConfigsResource>(33, &cluster::ALTER_CONFIGS_RESOURCE),
        check::<alter_configs_request::AlterableConfig>(33, &cluster::ALTERABLE_CONFIG),
        check::<IncrementalAlterConfigsRequest>(44, &cluster::INCREMENTAL_ALTER_CONFIGS_REQUEST),
        check::<incremental_alter_configs_request::AlterConfigsResource>(
            44,
            &cluster::INCREMENTAL_ALTER_CONFIGS_RESOURCE,
        ),
        check::<incremental_alter_configs_request::AlterableConfig>(44, &cluster::INCREMENTAL_ALTERABLE_CONFIG),
        check::<messages::DescribeLogDirsRequest>(35, &cluster::DESCRIBE_LOG_DIRS_REQUEST),
        check::<DescribableLogDirTopic>(35, &cluster::DESCRIBABLE_LOG_DIR_TOPIC),
        check::<DescribeClusterRequest>(60, &cluster::DESCRIBE_CLUSTER_REQUEST),
        check::<GetTelemetrySubscriptionsRequest>(71, &telemetry::GET_TELEMETRY_SUBSCRIPTIONS_REQUEST),
        check::<PushTelemetryRequest>(72, &telemetry::PUSH_TELEMETRY_REQUEST),
        check::<UpdateFeaturesRequest>(57, &cluster::UPDATE_FEATURES_REQUEST),
        check::<ListConfigResourcesRequest>(74, &cluster::LIST_CONFIG_RESOURCES_REQUEST),
        check::<update_features_request::FeatureUpdateKey>(57, &cluster::FEATURE_UPDATE_KEY),
        check::<AlterReplicaLogDirsRequest>(34, &replicas::ALTER_REPLICA_LOG_DIRS_REQUEST),
        check::<AlterReplicaLogDir>(34, &replicas::ALTER_REPLICA_LOG_DIR),
        check::<AlterReplicaLogDirTopic>(34, &replicas::ALTER_REPLICA_LOG_DIR_TOPIC),
        check::<ElectLeadersRequest>(43, &replicas::ELECT_LEADERS_REQUEST),
        check::<DescribeUserScramCredentialsRequest>(50, &users::DESCRIBE_USER_SCRAM_CREDENTIALS_REQUEST),
        check::<UserName>(50, &users::USER_NAME),
        check::<AlterUserScramCredentialsRequest>(51, &users::ALTER_USER_SCRAM_CREDENTIALS_REQUEST),
        check::<ScramCredentialDeletion>(51, &users::SCRAM_CREDENTIAL_DELETION),
        check::<ScramCredentialUpsertion>(51, &users::SCRAM_CREDENTIAL_UPSERTION),
        check::<CreateDelegationTokenRequest>(38, &tokens::CREATE_DELEGATION_TOKEN_REQUEST),
        check::<CreatableRenewers>(38, &tokens::CREATABLE_RENEWERS),
        check::<RenewDelegationTokenRequest>(39, &tokens::RENEW_DELEGATION_TOKEN_REQUEST),
        check::<ExpireDelegationTokenRequest>(40, &tokens::EXPIRE_DELEGATION_TOKEN_REQUEST),
        check::<DescribeDelegationTokenRequest>(41, &tokens::DESCRIBE_DELEGATION_TOKEN_REQUEST),
        check::<DescribeDelegationTokenOwner>(41, &tokens::DESCRIBE_DELEGATION_TOKEN_OWNER),
        check::<elect_leaders_request::TopicPartitions>(43, &replicas::ELECT_LEADERS_TOPIC_PARTITIONS),
        check::<AlterPartitionReassignmentsRequest>(45, &replicas::ALTER_PARTITION_REASSIGNMENTS_REQUEST),
        check::<ReassignableTopic>(45, &replicas::REASSIGNABLE_TOPIC),
        check::<ReassignablePartition>(45, &replicas::REASSIGNABLE_PARTITION),
        check::<ListPartitionReassignmentsRequest>(46, &replicas::LIST_PARTITION_REASSIGNMENTS_REQUEST),
        check::<ListPartitionReassignmentsTopics>(46, &replicas::LIST_PARTITION_REASSIGNMENTS_TOPICS),
        check::<DescribeAclsRequest>(29, &acls::DESCRIBE_ACLS_REQUEST),
        check::<CreateAclsRequest>(30, &acls::CREATE_ACLS_REQUEST),
        check::<AclCreation>(30, &acls::ACL_CREATION),
        check::<DeleteAclsRequest>(31, &acls::DELETE_ACLS_REQUEST),
        check::<DeleteAclsFilter>(31, &acls::DELETE_ACLS_FILTER),
        check::<messages::DeleteGroupsRequest>(42, &groups::DELETE_GROUPS_REQUEST),
        check::<OffsetDeleteRequest>(47, &groups::OFFSET_DELETE_REQUEST),
        check::<OffsetDeleteRequestTopic>(47, &groups::OFFSET_DELETE_REQUEST_TOPIC),
        check::<OffsetDeleteRequestPartition>(47, &groups::OFFSET_DELETE_REQUEST_PARTITION),
        check::<ConsumerGroupHeartbeatRequest>(68, &consumer_groups::CONSUMER_GROUP_HEARTBEAT_REQUEST),
        check::<TopicPartitions>(68, &consumer_groups::TOPIC_PARTITIONS),
        check::<ConsumerGroupDescribeRequest>(69, &consumer_groups::CONSUMER_GROUP_DESCRIBE_REQUEST),
        check::<ShareGroupHeartbeatRequest>(76, &share_groups::SHARE_GROUP_HEARTBEAT_REQUEST),
        check::<ShareGroupDescribeRequest>(77, &share_groups::SHARE_GROUP_DESCRIBE_REQUEST),
        check::<ShareFetchRequest>(78, &share_groups::SHARE_FETCH_REQUEST),
        check::<share_fetch_request::FetchTopic>(78, &share_groups::SHARE_FETCH_TOPIC),
        check::<share_fetch_request::FetchPartition>(78, &share_groups::SHARE_FETCH_PARTITION),
        check::<share_fetch_request::AcknowledgementBatch>(78, &share_groups::ACKNOWLEDGEMENT_BATCH),
        check::<share_fetch_request::ForgottenTopic>(78, &share_groups::SHARE_FORGOTTEN_TOPIC),
        check::<ShareAcknowledgeRequest>(79, &share_groups::SHARE_ACKNOWLEDGE_REQUEST),
        check::<share_acknowledge_request::AcknowledgeTopic>(79, &share_groups::ACKNOWLEDGE_TOPIC),
        check::<share_acknowledge_request::AcknowledgePartition>(79, &share_groups::ACKNOWLEDGE_PARTITION),
        check::<share_acknowledge_request::AcknowledgementBatch>(79, &share_groups::ACKNOWLEDGEMENT_BATCH),
        check::<messages::DescribeShareGroupOffsetsRequest>(90, &share_groups::DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST),
        check::<describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup>(
            90,
            &share_groups::DESCRIBE_SHARE_GROUP_OFFSETS_GROUP,
        ),
        check::<describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic>(
            90,
            &share_groups::DESCRIBE_SHARE_GROUP_OFFSETS_TOPIC,
        ),
        check::<AlterShareGroupOffsetsRequest>(91, &share_groups::ALTER_SHARE_GROUP_OFFSETS_REQUEST),
        check::<alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic>(
            91,
            &share_groups::ALTER_SHARE_GROUP_OFFSETS_TOPIC,
        ),
        check::<alter_share_group_offsets_request::AlterShareGroupOffsetsRequestPartition>(
            91,
            &share_groups::ALTER_SHARE_GROUP_OFFSETS_PARTITION,
        ),
        check::<DeleteShareGroupOffsetsRequest>(92, &share_groups::DELETE_SHARE_GROUP_OFFSETS_REQUEST),
        check::<delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic>(
            92,
            &share_groups::DELETE_SHARE_GROUP_OFFSETS_TOPIC,
        ),
        check::<AddPartitionsToTxnRequest>(24, &txn::ADD_PARTITIONS_TO_TXN_REQUEST),
        check::<AddPartitionsToTxnTransaction>(24, &txn::ADD_PARTITIONS_TO_TXN_TRANSACTION),
        check::<AddPartitionsToTxnTopic>(24, &txn::ADD_PARTITIONS_TO_TXN_TOPIC),
        check::<AddOffsetsToTxnRequest>(25, &txn::ADD_OFFSETS_TO_TXN_REQUEST),
        check::<EndTxnRequest>(26, &txn::END_TXN_REQUEST),
        check::<messages::TxnOffsetCommitRequest>(28, &txn::TXN_OFFSET_COMMIT_REQUEST),
        check::<TxnOffsetCommitRequestTopic>(28, &txn::TXN_OFFSET_COMMIT_REQUEST_TOPIC),
        check::<TxnOffsetCommitRequestPartition>(28, &txn::TXN_OFFSET_COMMIT_REQUEST_PARTITION),
        check::<messages::WriteTxnMarkersRequest>(27, &txn::WRITE_TXN_MARKERS_REQUEST),
        check::<write_txn_markers_request::WritableTxnMarker>(27, &txn::WRITABLE_TXN_MARKER),
        check::<write_txn_markers_request::WritableTxnMarkerTopic>(27, &txn::WRITABLE_TXN_MARKER_TOPIC),
        check::<DescribeProducersRequest>(61, &txn::DESCRIBE_PRODUCERS_REQUEST),
        check::<describe_producers_request::TopicRequest>(61, &txn::DESCRIBE_PRODUCERS_TOPIC_REQUEST),
        check::<ListTransactionsRequest>(66, &txn::LIST_TRANSACTIONS_REQUEST),
        check::<DescribeTransactionsRequest>(65, &txn::DESCRIBE_TRANSACTIONS_REQUEST),
    ]
}

fn collect_structs(api_key: i16, schema: &'static StructSchema, names: &mut BTreeSet<(i16, &'static str)>) {
    names.insert((api_key, schema.name));
    for field in schema.fields {
        let mut kind = &field.kind;
        while let Kind::Array(element) | Kind::NullableArray(element) = kind {
            kind = element;
        }
        if let Kind::Struct(inner) | Kind::NullableStruct(inner) = kind {
            collect_structs(api_key, inner, names);
        }
    }
}

/// Elements in the array under test in [`arrays_of_smallest_elements`].
const ELEMENTS: u32 = 100;

/// Writes the smallest encoding of `kind`, except for array instance number `target` (counted in
/// depth-first order), which gets [`ELEMENTS`] smallest elements; other arrays of structs get one
/// element so that nested arrays are reached. Returns whether the target was written.
fn smallest(kind: &Kind, encoding: Encoding, target: &mut Option<usize>, out: &mut Vec<u8>) -> bool {
    let length = |out: &mut Vec<u8>, n: u32, classic_bytes: usize| {
        if encoding.flexible {
            let mut v = n + 1;
            while v >= 0x80 {
                out.push((v as u8) | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        } else {
            out.extend_from_slice(&n.to_be_bytes()[4 - classic_bytes..]);
        }
    };
    match kind {
        Kind::Int8 | Kind::Bool => out.push(0),
        Kind::Int16 => out.extend([0; 2]),
        Kind::Int32 => out.extend([0; 4]),
        Kind::Int64 | Kind::Float64 => out.extend([0; 8]),
        Kind::Uuid => out.extend([0; 16]),
        Kind::String | Kind::NullableString => length(out, 0, 2),
        Kind::Bytes | Kind::NullableBytes | Kind::Records => length(out, 0, 4),
        Kind::Array(element) | Kind::NullableArray(element) => {
            let this = *target;
            *target = this.and_then(|t| t.checked_sub(1));
            if this == Some(0) {
                length(out, ELEMENTS, 4);
                for _ in 0..ELEMENTS {
                    smallest(element, encoding, &mut None, out);
                }
                return true;
            }
            if let Kind::Struct(_) = element {
                length(out, 1, 4);
                return smallest(element, encoding, target, out);
            }
            length(out, 0, 4);
        }
        // Present, so that arrays inside are reached.
        Kind::NullableStruct(schema) => {
            out.push(1);
            return smallest(&Kind::Struct(schema), encoding, target, out);
        }
        Kind::Struct(schema) => {
            let mut found = false;
            for field in schema.fields {
                if field.tag.is_none() && field.versions.contains(encoding.version) {
                    found |= smallest(&field.kind, encoding, target, out);
                }
            }
            if encoding.flexible {
                out.push(0);
            }
            return found;
        }
    }
    false
}

fn encoded_len<R: Encodable>(message: &R, version: i16) -> usize {
    let mut buf = BytesMut::new();
    message.encode(&mut buf, version).expect("encodes");
    buf.len()
}

/// The structs whose layout Kafka 4.4 changed: the smallest encoding of one is what one default
/// element adds to an otherwise default request (a count of 0 or 1 is one byte either way).
#[test]
fn minimum_sizes_of_kafka_4_4_elements() {
    let assumed = |api_key: i16, version: i16, schema: &StructSchema| {
        let api = schemas::find(api_key).expect("covered API");
        schema.wire_bytes_min(crate::guard::encoding(api, version))
    };
    let empty = messages::OffsetCommitRequest::default();
    let mut one = empty.clone();
    one.topics.push(OffsetCommitRequestTopic::default());
    let topic = encoded_len(&one, 10) - encoded_len(&empty, 10);
    assert_eq!(assumed(8, 10, &groups::OFFSET_COMMIT_REQUEST_TOPIC), topic);
    let mut two = one.clone();
    two.topics[0].partitions.push(OffsetCommitRequestPartition::default());
    assert_eq!(assumed(8, 10, &groups::OFFSET_COMMIT_REQUEST_PARTITION), encoded_len(&two, 10) - encoded_len(&one, 10));

    let mut empty = messages::OffsetFetchRequest::default();
    empty.groups.push(OffsetFetchRequestGroup::default().with_topics(Some(Vec::new())));
    let mut one = empty.clone();
    if let Some(topics) = one.groups[0].topics.as_mut() {
        topics.push(OffsetFetchRequestTopics::default());
    }
    assert_eq!(assumed(9, 10, &groups::OFFSET_FETCH_REQUEST_TOPICS), encoded_len(&one, 10) - encoded_len(&empty, 10));
    let none = messages::OffsetFetchRequest::default();
    let mut group = none.clone();
    group.groups.push(OffsetFetchRequestGroup::default());
    assert_eq!(assumed(9, 10, &groups::OFFSET_FETCH_REQUEST_GROUP), encoded_len(&group, 10) - encoded_len(&none, 10));

    let empty = messages::WriteTxnMarkersRequest::default();
    let mut one = empty.clone();
    one.markers.push(messages::WritableTxnMarker::default());
    assert_eq!(assumed(27, 2, &txn::WRITABLE_TXN_MARKER), encoded_len(&one, 2) - encoded_len(&empty, 2));
    let mut two = one.clone();
    two.markers[0].marker.topics.push(write_txn_markers_request::WritableTxnMarkerTopic::default());
    assert_eq!(assumed(27, 2, &txn::WRITABLE_TXN_MARKER_TOPIC), encoded_len(&two, 2) - encoded_len(&one, 2));
}

/// Every array instance of every request, at every version, filled with many elements of the
/// smallest encoding: the guard accepts it (so no minimum is overestimated), the decoder reads
/// it, and the largest allocation stays within the documented amplification.
#[test]
fn arrays_of_smallest_elements() {
    let mut worst = (0usize, String::new());
    for api in schemas::APIS {
        for version in api.versions.min..=api.versions.max {
            let encoding = crate::guard::encoding(api, version);
            for target in 0.. {
                let mut body = Vec::new();
                let root = Kind::Struct(api.body);
                if !smallest(&root, encoding, &mut Some(target), &mut body) {
                    break;
                }
                let at = format!("{} v{version} array #{target}", api.body.name);
                let used = crate::guard::walk_request_body(api.key, version, &body);
                assert_eq!(used, Ok(body.len()), "{at}");
                let (decoded, allocations) = super::decode_measured(api.key, version, &body);
                assert_eq!(decoded, Ok(()), "{at}");
                let ratio = allocations.largest_bytes.div_ceil(body.len());
                if ratio > worst.0 {
                    worst = (ratio, at);
                }
            }
        }
    }
    eprintln!("largest allocation per body byte: {} ({})", worst.0, worst.1);
    assert!(worst.0 <= super::AMPLIFICATION_MAX, "{worst:?}");
}
