//! The `throttle_time_ms` of every served response, so dispatch can put a
//! request quota's throttle in whichever answer the client gets (KIP-219:
//! the client learns it is throttled from the answer). SaslHandshake and
//! SaslAuthenticate answers have no such field and are never throttled (the
//! request quota exempts them, as Kafka does). Every served response
//! implements [`ThrottleTime`]: routing will not compile without it.

use kafgres_wire::messages;
use kafka_protocol::messages::*;

pub trait ThrottleTime {
    /// Raises the answer's throttle time to at least `ms`.
    fn raise_throttle_time_ms(&mut self, ms: i32);
}

macro_rules! with_throttle_time {
    ($($response:ty),* $(,)?) => {
        $(impl ThrottleTime for $response {
            fn raise_throttle_time_ms(&mut self, ms: i32) {
                self.throttle_time_ms = self.throttle_time_ms.max(ms);
            }
        })*
    };
}

with_throttle_time!(
    ProduceResponse,
    FetchResponse,
    messages::ListOffsetsResponse,
    MetadataResponse,
    messages::ApiVersionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeConfigsResponse,
    CreatePartitionsResponse,
    DescribeClusterResponse,
    DeleteRecordsResponse,
    FindCoordinatorResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    messages::OffsetCommitResponse,
    OffsetFetchResponse,
    ListGroupsResponse,
    DescribeGroupsResponse,
    messages::DeleteGroupsResponse,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupDescribeResponse,
    ShareGroupHeartbeatResponse,
    ShareGroupDescribeResponse,
    messages::ShareFetchResponse,
    messages::ShareAcknowledgeResponse,
    messages::DescribeShareGroupOffsetsResponse,
    messages::streams_group::StreamsGroupHeartbeatResponse,
    messages::streams_group::StreamsGroupDescribeResponse,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponse,
    OffsetDeleteResponse,
    InitProducerIdResponse,
    AddPartitionsToTxnResponse,
    AddOffsetsToTxnResponse,
    EndTxnResponse,
    messages::TxnOffsetCommitResponse,
    IncrementalAlterConfigsResponse,
    AlterConfigsResponse,
    messages::DescribeLogDirsResponse,
    AlterReplicaLogDirsResponse,
    ElectLeadersResponse,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
    OffsetForLeaderEpochResponse,
    DescribeTopicPartitionsResponse,
    DescribeProducersResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
    DescribeAclsResponse,
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeClientQuotasResponse,
    AlterClientQuotasResponse,
    DescribeUserScramCredentialsResponse,
    AlterUserScramCredentialsResponse,
    UpdateFeaturesResponse,
    ListConfigResourcesResponse,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
    CreateDelegationTokenResponse,
    RenewDelegationTokenResponse,
    ExpireDelegationTokenResponse,
    DescribeDelegationTokenResponse,
);

/// No field: the request quota exempts these (a client must be able to
/// authenticate; WriteTxnMarkers is a cluster action, which Kafka exempts).
macro_rules! without_throttle_time {
    ($($response:ty),* $(,)?) => {
        $(impl ThrottleTime for $response {
            fn raise_throttle_time_ms(&mut self, _ms: i32) {}
        })*
    };
}

without_throttle_time!(SaslHandshakeResponse, SaslAuthenticateResponse, messages::WriteTxnMarkersResponse);
