//! The tests' one list of covered APIs: for each, its request type (kafka-protocol's, or
//! `crate::messages`' where Kafka 4.4 goes further), the versions
//! the guard must cover (written out again here, and checked against the crate's own
//! `Message::VERSIONS`), and its random-request generator. The list makes the decoder used by
//! every probe, one `roundtrip_*` test per API, and a test that the list and the guard's table
//! name the same APIs.

use bytes::Bytes;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AlterClientQuotasRequest, AlterConfigsRequest,
    AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest, AlterUserScramCredentialsRequest,
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, CreateAclsRequest, CreatePartitionsRequest,
    CreateTopicsRequest, DeleteAclsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeAclsRequest,
    DescribeClientQuotasRequest, DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    DescribeProducersRequest, DescribeTopicPartitionsRequest, DescribeTransactionsRequest,
    DescribeUserScramCredentialsRequest, ElectLeadersRequest, EndTxnRequest, FetchRequest, FindCoordinatorRequest,
    HeartbeatRequest, IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest,
    ListConfigResourcesRequest, ListGroupsRequest, ListPartitionReassignmentsRequest, ListTransactionsRequest,
    MetadataRequest, OffsetDeleteRequest, OffsetForLeaderEpochRequest, ProduceRequest, SaslAuthenticateRequest,
    SaslHandshakeRequest, ShareGroupDescribeRequest, ShareGroupHeartbeatRequest, SyncGroupRequest,
    UpdateFeaturesRequest,
};
use kafka_protocol::messages::{AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest};
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, DescribeDelegationTokenRequest, ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
};
use kafka_protocol::messages::{GetTelemetrySubscriptionsRequest, PushTelemetryRequest};
use kafka_protocol::protocol::{Decodable, Message};

use super::{
    alloc, requests_acls, requests_admin, requests_cluster, requests_consumer_groups, requests_data, requests_groups,
    requests_quotas, requests_replicas, requests_share_groups, requests_streams_groups, requests_telemetry,
    requests_tokens, requests_topics, requests_txn, requests_users, roundtrip,
};
use crate::guard::schemas;
use crate::messages;

fn decode_measured_as<R: Decodable>(version: i16, body: &[u8]) -> (Result<(), String>, alloc::Allocations) {
    let mut input = Bytes::copy_from_slice(body);
    let (decoded, allocations) = alloc::measure(|| R::decode(&mut input, version));
    (decoded.map(drop).map_err(|e| format!("{e:#}")), allocations)
}

macro_rules! covered_apis {
    ($($key:literal $test:ident: $request:ty, $versions:expr, $requests:path;)*) => {
        /// Decodes `body` as the request type of `api_key`, measuring the allocations.
        pub(super) fn decode_measured(
            api_key: i16,
            version: i16,
            body: &[u8],
        ) -> (Result<(), String>, alloc::Allocations) {
            match api_key {
                $($key => decode_measured_as::<$request>(version, body),)*
                _ => panic!("no decoder wired for api key {api_key}"),
            }
        }

        $(
            #[test]
            fn $test() {
                let versions = <$request as Message>::VERSIONS;
                assert_eq!(versions.min..=versions.max, $versions, "kafka-protocol's versions");
                roundtrip::<$request, _>($key, $versions, $requests);
            }
        )*

        /// The list above and the guard's table name the same APIs.
        #[test]
        fn every_covered_api_has_a_roundtrip_test() {
            let mut covered: Vec<i16> = schemas::APIS.iter().map(|api| api.key).collect();
            covered.sort_unstable();
            let mut listed: Vec<i16> = vec![$($key),*];
            listed.sort_unstable();
            assert_eq!(covered, listed);
        }
    };
}

covered_apis! {
    0 roundtrip_produce: ProduceRequest, 3..=13, requests_data::produce;
    1 roundtrip_fetch: FetchRequest, 4..=18, requests_data::fetch;
    2 roundtrip_list_offsets: messages::ListOffsetsRequest, 1..=11, requests_data::list_offsets;
    3 roundtrip_metadata: MetadataRequest, 0..=13, requests_data::metadata;
    8 roundtrip_offset_commit: messages::OffsetCommitRequest, 2..=10, requests_groups::offset_commit;
    9 roundtrip_offset_fetch: messages::OffsetFetchRequest, 1..=10, requests_groups::offset_fetch;
    10 roundtrip_find_coordinator: FindCoordinatorRequest, 0..=6,
        requests_admin::find_coordinator;
    11 roundtrip_join_group: JoinGroupRequest, 0..=9, requests_groups::join_group;
    12 roundtrip_heartbeat: HeartbeatRequest, 0..=4, requests_groups::heartbeat;
    13 roundtrip_leave_group: LeaveGroupRequest, 0..=5, requests_groups::leave_group;
    14 roundtrip_sync_group: SyncGroupRequest, 0..=5, requests_groups::sync_group;
    15 roundtrip_describe_groups: DescribeGroupsRequest, 0..=6, requests_groups::describe_groups;
    16 roundtrip_list_groups: ListGroupsRequest, 0..=5, requests_groups::list_groups;
    17 roundtrip_sasl_handshake: SaslHandshakeRequest, 0..=1, requests_admin::sasl_handshake;
    18 roundtrip_api_versions: messages::ApiVersionsRequest, 0..=5, requests_admin::api_versions;
    19 roundtrip_create_topics: CreateTopicsRequest, 2..=7, requests_admin::create_topics;
    20 roundtrip_delete_topics: DeleteTopicsRequest, 1..=6, requests_admin::delete_topics;
    21 roundtrip_delete_records: DeleteRecordsRequest, 0..=2, requests_topics::delete_records;
    22 roundtrip_init_producer_id: InitProducerIdRequest, 0..=5,
        requests_admin::init_producer_id;
    23 roundtrip_offset_for_leader_epoch: OffsetForLeaderEpochRequest, 2..=4,
        requests_topics::offset_for_leader_epoch;
    24 roundtrip_add_partitions_to_txn: AddPartitionsToTxnRequest, 0..=5,
        requests_txn::add_partitions_to_txn;
    25 roundtrip_add_offsets_to_txn: AddOffsetsToTxnRequest, 0..=4,
        requests_txn::add_offsets_to_txn;
    26 roundtrip_end_txn: EndTxnRequest, 0..=5, requests_txn::end_txn;
    28 roundtrip_txn_offset_commit: messages::TxnOffsetCommitRequest, 0..=6,
        requests_txn::txn_offset_commit;
    29 roundtrip_describe_acls: DescribeAclsRequest, 1..=3, requests_acls::describe_acls;
    30 roundtrip_create_acls: CreateAclsRequest, 1..=3, requests_acls::create_acls;
    31 roundtrip_delete_acls: DeleteAclsRequest, 1..=3, requests_acls::delete_acls;
    32 roundtrip_describe_configs: DescribeConfigsRequest, 1..=4,
        requests_admin::describe_configs;
    33 roundtrip_alter_configs: AlterConfigsRequest, 0..=2, requests_cluster::alter_configs;
    34 roundtrip_alter_replica_log_dirs: AlterReplicaLogDirsRequest, 1..=2,
        requests_replicas::alter_replica_log_dirs;
    35 roundtrip_describe_log_dirs: messages::DescribeLogDirsRequest, 1..=5,
        requests_cluster::describe_log_dirs;
    36 roundtrip_sasl_authenticate: SaslAuthenticateRequest, 0..=2,
        requests_admin::sasl_authenticate;
    38 roundtrip_create_delegation_token: CreateDelegationTokenRequest, 1..=3,
        requests_tokens::create_delegation_token;
    39 roundtrip_renew_delegation_token: RenewDelegationTokenRequest, 1..=2,
        requests_tokens::renew_delegation_token;
    40 roundtrip_expire_delegation_token: ExpireDelegationTokenRequest, 1..=2,
        requests_tokens::expire_delegation_token;
    41 roundtrip_describe_delegation_token: DescribeDelegationTokenRequest, 1..=3,
        requests_tokens::describe_delegation_token;
    37 roundtrip_create_partitions: CreatePartitionsRequest, 0..=3,
        requests_topics::create_partitions;
    42 roundtrip_delete_groups: messages::DeleteGroupsRequest, 0..=3,
        requests_consumer_groups::delete_groups;
    43 roundtrip_elect_leaders: ElectLeadersRequest, 0..=2, requests_replicas::elect_leaders;
    44 roundtrip_incremental_alter_configs: IncrementalAlterConfigsRequest, 0..=1,
        requests_cluster::incremental_alter_configs;
    45 roundtrip_alter_partition_reassignments: AlterPartitionReassignmentsRequest, 0..=1,
        requests_replicas::alter_partition_reassignments;
    46 roundtrip_list_partition_reassignments: ListPartitionReassignmentsRequest, 0..=0,
        requests_replicas::list_partition_reassignments;
    48 roundtrip_describe_client_quotas: DescribeClientQuotasRequest, 0..=1,
        requests_quotas::describe_client_quotas;
    49 roundtrip_alter_client_quotas: AlterClientQuotasRequest, 0..=1,
        requests_quotas::alter_client_quotas;
    47 roundtrip_offset_delete: OffsetDeleteRequest, 0..=0,
        requests_consumer_groups::offset_delete;
    50 roundtrip_describe_user_scram_credentials: DescribeUserScramCredentialsRequest, 0..=0,
        requests_users::describe_user_scram_credentials;
    51 roundtrip_alter_user_scram_credentials: AlterUserScramCredentialsRequest, 0..=0,
        requests_users::alter_user_scram_credentials;
    57 roundtrip_update_features: UpdateFeaturesRequest, 0..=2, requests_cluster::update_features;
    60 roundtrip_describe_cluster: DescribeClusterRequest, 0..=2,
        requests_cluster::describe_cluster;
    27 roundtrip_write_txn_markers: messages::WriteTxnMarkersRequest, 1..=2,
        requests_txn::write_txn_markers;
    61 roundtrip_describe_producers: DescribeProducersRequest, 0..=0,
        requests_txn::describe_producers;
    65 roundtrip_describe_transactions: DescribeTransactionsRequest, 0..=0,
        requests_txn::describe_transactions;
    66 roundtrip_list_transactions: ListTransactionsRequest, 0..=2,
        requests_txn::list_transactions;
    68 roundtrip_consumer_group_heartbeat: ConsumerGroupHeartbeatRequest, 0..=1,
        requests_consumer_groups::consumer_group_heartbeat;
    69 roundtrip_consumer_group_describe: ConsumerGroupDescribeRequest, 0..=1,
        requests_consumer_groups::consumer_group_describe;
    74 roundtrip_list_config_resources: ListConfigResourcesRequest, 0..=1,
        requests_cluster::list_config_resources;
    75 roundtrip_describe_topic_partitions: DescribeTopicPartitionsRequest, 0..=0,
        requests_topics::describe_topic_partitions;
    76 roundtrip_share_group_heartbeat: ShareGroupHeartbeatRequest, 1..=1,
        requests_share_groups::share_group_heartbeat;
    77 roundtrip_share_group_describe: ShareGroupDescribeRequest, 1..=1,
        requests_share_groups::share_group_describe;
    78 roundtrip_share_fetch: messages::ShareFetchRequest, 1..=2, requests_share_groups::share_fetch;
    79 roundtrip_share_acknowledge: messages::ShareAcknowledgeRequest, 1..=2, requests_share_groups::share_acknowledge;
    90 roundtrip_describe_share_group_offsets: messages::DescribeShareGroupOffsetsRequest, 0..=1,
        requests_share_groups::describe_share_group_offsets;
    91 roundtrip_alter_share_group_offsets: AlterShareGroupOffsetsRequest, 0..=0,
        requests_share_groups::alter_share_group_offsets;
    92 roundtrip_delete_share_group_offsets: DeleteShareGroupOffsetsRequest, 0..=0,
        requests_share_groups::delete_share_group_offsets;
    88 roundtrip_streams_group_heartbeat: messages::streams_group::StreamsGroupHeartbeatRequest, 0..=1,
        requests_streams_groups::streams_group_heartbeat;
    89 roundtrip_streams_group_describe: messages::streams_group::StreamsGroupDescribeRequest, 0..=1,
        requests_streams_groups::streams_group_describe;
    93 roundtrip_streams_group_topology_description_update:
        messages::streams_group::StreamsGroupTopologyDescriptionUpdateRequest, 0..=0,
        requests_streams_groups::streams_group_topology_description_update;
    71 roundtrip_get_telemetry_subscriptions: GetTelemetrySubscriptionsRequest, 0..=0,
        requests_telemetry::get_telemetry_subscriptions;
    72 roundtrip_push_telemetry: PushTelemetryRequest, 0..=0, requests_telemetry::push_telemetry;
}
