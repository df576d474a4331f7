//! The error codes each response carries, as Kafka's `AbstractResponse::errorCounts`
//! gives them: every partition's, topic's, group's or entry's code once per
//! occurrence, NONE (0) included, and a top-level code where the response has
//! one. Dispatch counts them per API for `kafka_network_requestmetrics_errors_total`
//! (docs/operations.md). Every served response implements [`ErrorCounts`]:
//! routing will not compile without it.

use kafgres_wire::messages;
use kafka_protocol::messages::*;

/// Calls `count` once for each error code in the response.
pub trait ErrorCounts {
    fn error_codes(&self, count: &mut dyn FnMut(i16));
}

/// Responses whose only code is a top-level `error_code`.
macro_rules! top_level_only {
    ($($response:ty),* $(,)?) => {
        $(impl ErrorCounts for $response {
            fn error_codes(&self, count: &mut dyn FnMut(i16)) {
                count(self.error_code);
            }
        })*
    };
}

top_level_only!(
    ApiVersionsResponse,
    DescribeClusterResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    HeartbeatResponse,
    ListGroupsResponse,
    ConsumerGroupHeartbeatResponse,
    ShareGroupHeartbeatResponse,
    InitProducerIdResponse,
    AddOffsetsToTxnResponse,
    EndTxnResponse,
    SaslHandshakeResponse,
    SaslAuthenticateResponse,
    DescribeAclsResponse,
    DescribeClientQuotasResponse,
    ListPartitionReassignmentsResponse,
    ListConfigResourcesResponse,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryResponse,
    ListTransactionsResponse,
    CreateDelegationTokenResponse,
    RenewDelegationTokenResponse,
    ExpireDelegationTokenResponse,
    DescribeDelegationTokenResponse,
);

impl ErrorCounts for DescribeTransactionsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.transaction_states.iter().for_each(|t| count(t.error_code));
    }
}

impl ErrorCounts for ProduceResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.responses.iter().flat_map(|t| &t.partition_responses).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for FetchResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.responses.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for ListOffsetsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.topics.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for MetadataResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        for topic in &self.topics {
            count(topic.error_code);
            topic.partitions.iter().for_each(|p| count(p.error_code));
        }
    }
}

impl ErrorCounts for CreateTopicsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.topics.iter().for_each(|t| count(t.error_code));
    }
}

impl ErrorCounts for DeleteTopicsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.responses.iter().for_each(|t| count(t.error_code));
    }
}

impl ErrorCounts for DescribeConfigsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.results.iter().for_each(|r| count(r.error_code));
    }
}

impl ErrorCounts for CreatePartitionsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.results.iter().for_each(|r| count(r.error_code));
    }
}

impl ErrorCounts for DeleteRecordsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.topics.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for FindCoordinatorResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        // v4+ answers per key, and the top-level code is unused.
        if self.coordinators.is_empty() {
            count(self.error_code);
        }
        self.coordinators.iter().for_each(|c| count(c.error_code));
    }
}

impl ErrorCounts for LeaveGroupResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.members.iter().for_each(|m| count(m.error_code));
    }
}

impl ErrorCounts for OffsetCommitResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.topics.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for OffsetFetchResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        if self.groups.is_empty() {
            count(self.error_code);
            self.topics.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
        }
        for group in &self.groups {
            count(group.error_code);
            group.topics.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
        }
    }
}

impl ErrorCounts for DescribeGroupsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.groups.iter().for_each(|g| count(g.error_code));
    }
}

impl ErrorCounts for messages::DeleteGroupsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.results.iter().for_each(|g| count(g.result.error_code));
    }
}

impl ErrorCounts for ConsumerGroupDescribeResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.groups.iter().for_each(|g| count(g.error_code));
    }
}

impl ErrorCounts for ShareGroupDescribeResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.groups.iter().for_each(|g| count(g.error_code));
    }
}

impl ErrorCounts for ShareFetchResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        for p in self.responses.iter().flat_map(|t| &t.partitions) {
            count(p.error_code);
            count(p.acknowledge_error_code);
        }
    }
}

impl ErrorCounts for messages::streams_group::StreamsGroupHeartbeatResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
    }
}

impl ErrorCounts for messages::streams_group::StreamsGroupDescribeResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.groups.iter().for_each(|g| count(g.error_code));
    }
}

impl ErrorCounts for messages::DescribeShareGroupOffsetsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        for g in &self.groups {
            count(g.error_code);
            g.topics.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
        }
    }
}

impl ErrorCounts for AlterShareGroupOffsetsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.responses.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for DeleteShareGroupOffsetsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.responses.iter().for_each(|t| count(t.error_code));
    }
}

impl ErrorCounts for ShareAcknowledgeResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.responses.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for OffsetDeleteResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.topics.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for AddPartitionsToTxnResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.results_by_transaction
            .iter()
            .flat_map(|t| &t.topic_results)
            .flat_map(|t| &t.results_by_partition)
            .for_each(|p| count(p.partition_error_code));
        // v0-3: one transaction's results at the top level.
        self.results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| &t.results_by_partition)
            .for_each(|p| count(p.partition_error_code));
    }
}

impl ErrorCounts for messages::TxnOffsetCommitResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.topics.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for IncrementalAlterConfigsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.responses.iter().for_each(|r| count(r.error_code));
    }
}

impl ErrorCounts for AlterConfigsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.responses.iter().for_each(|r| count(r.error_code));
    }
}

impl ErrorCounts for messages::DescribeLogDirsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.results.iter().for_each(|r| count(r.result.error_code));
    }
}

/// Kafka 4.4's versions of responses whose layout is kafka-protocol's up to a
/// field (`kafgres_wire::messages`): counted as the response they wrap.
macro_rules! as_wrapped {
    ($($response:ty),* $(,)?) => {
        $(impl ErrorCounts for $response {
            fn error_codes(&self, count: &mut dyn FnMut(i16)) {
                self.0.error_codes(count);
            }
        })*
    };
}

as_wrapped!(
    messages::ListOffsetsResponse,
    messages::ApiVersionsResponse,
    messages::OffsetCommitResponse,
    messages::WriteTxnMarkersResponse,
    messages::ShareFetchResponse,
);

impl ErrorCounts for messages::ShareAcknowledgeResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.response.error_codes(count);
    }
}

impl ErrorCounts for DescribeUserScramCredentialsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.results.iter().for_each(|r| count(r.error_code));
    }
}

impl ErrorCounts for AlterUserScramCredentialsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.results.iter().for_each(|r| count(r.error_code));
    }
}

impl ErrorCounts for UpdateFeaturesResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.results.iter().for_each(|r| count(r.error_code));
    }
}

impl ErrorCounts for AlterReplicaLogDirsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.results.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for ElectLeadersResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.replica_election_results.iter().flat_map(|t| &t.partition_result).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for AlterPartitionReassignmentsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        count(self.error_code);
        self.responses.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for OffsetForLeaderEpochResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.topics.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for DescribeTopicPartitionsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.topics.iter().for_each(|t| count(t.error_code));
    }
}

impl ErrorCounts for DescribeProducersResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.topics.iter().flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for WriteTxnMarkersResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.markers.iter().flat_map(|m| &m.topics).flat_map(|t| &t.partitions).for_each(|p| count(p.error_code));
    }
}

impl ErrorCounts for CreateAclsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.results.iter().for_each(|r| count(r.error_code));
    }
}

impl ErrorCounts for DeleteAclsResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.filter_results.iter().for_each(|r| count(r.error_code));
    }
}

impl ErrorCounts for AlterClientQuotasResponse {
    fn error_codes(&self, count: &mut dyn FnMut(i16)) {
        self.entries.iter().for_each(|e| count(e.error_code));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(response: &dyn ErrorCounts) -> Vec<i16> {
        let mut out = Vec::new();
        response.error_codes(&mut |c| out.push(c));
        out
    }

    #[test]
    fn every_partition_counts_once_and_none_counts_too() {
        let mut response = ProduceResponse::default();
        let mut topic = produce_response::TopicProduceResponse::default();
        for code in [0, 6, 0] {
            let mut p = produce_response::PartitionProduceResponse::default();
            p.error_code = code;
            topic.partition_responses.push(p);
        }
        response.responses.push(topic);
        assert_eq!(codes(&response), vec![0, 6, 0]);
    }

    #[test]
    fn offset_fetch_counts_its_groups_from_v8_and_its_top_level_before() {
        let mut old = OffsetFetchResponse::default();
        old.error_code = 16;
        assert_eq!(codes(&old), vec![16]);
        let mut batched = OffsetFetchResponse::default();
        let mut group = offset_fetch_response::OffsetFetchResponseGroup::default();
        group.error_code = 15;
        batched.groups.push(group);
        assert_eq!(codes(&batched), vec![15]);
    }
}
