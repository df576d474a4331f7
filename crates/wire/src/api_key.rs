//! Kafka's API keys as Kafka 4.4 numbers them: `kafka-protocol` 0.18's
//! [`ApiKey`](kafka_protocol::messages::ApiKey) stops at Kafka 4.1 and lacks
//! the keys Kafka added since (the Streams group APIs of KIP-1071). Header
//! versions of the crate's keys are the crate's; the newer keys are flexible
//! at every version (request header v2, response header v1).

use kafka_protocol::messages::ApiKey as CrateApiKey;

macro_rules! api_keys {
    ($($(#[$doc:meta])* $name:ident = $key:literal,)*) => {
        /// Every API key this build knows: `kafka-protocol`'s and Kafka 4.4's newer ones.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ApiKey {
            $($(#[$doc])* $name = $key,)*
        }

        impl TryFrom<i16> for ApiKey {
            type Error = ();

            fn try_from(key: i16) -> Result<ApiKey, ()> {
                match key {
                    $($key => Ok(ApiKey::$name),)*
                    _ => Err(()),
                }
            }
        }

        impl ApiKey {
            /// Every key, in key order.
            pub fn iter() -> impl Iterator<Item = ApiKey> {
                [$(ApiKey::$name),*].into_iter()
            }
        }
    };
}

api_keys! {
    Produce = 0,
    Fetch = 1,
    ListOffsets = 2,
    Metadata = 3,
    OffsetCommit = 8,
    OffsetFetch = 9,
    FindCoordinator = 10,
    JoinGroup = 11,
    Heartbeat = 12,
    LeaveGroup = 13,
    SyncGroup = 14,
    DescribeGroups = 15,
    ListGroups = 16,
    SaslHandshake = 17,
    ApiVersions = 18,
    CreateTopics = 19,
    DeleteTopics = 20,
    DeleteRecords = 21,
    InitProducerId = 22,
    OffsetForLeaderEpoch = 23,
    AddPartitionsToTxn = 24,
    AddOffsetsToTxn = 25,
    EndTxn = 26,
    WriteTxnMarkers = 27,
    TxnOffsetCommit = 28,
    DescribeAcls = 29,
    CreateAcls = 30,
    DeleteAcls = 31,
    DescribeConfigs = 32,
    AlterConfigs = 33,
    AlterReplicaLogDirs = 34,
    DescribeLogDirs = 35,
    SaslAuthenticate = 36,
    CreatePartitions = 37,
    CreateDelegationToken = 38,
    RenewDelegationToken = 39,
    ExpireDelegationToken = 40,
    DescribeDelegationToken = 41,
    DeleteGroups = 42,
    ElectLeaders = 43,
    IncrementalAlterConfigs = 44,
    AlterPartitionReassignments = 45,
    ListPartitionReassignments = 46,
    OffsetDelete = 47,
    DescribeClientQuotas = 48,
    AlterClientQuotas = 49,
    DescribeUserScramCredentials = 50,
    AlterUserScramCredentials = 51,
    Vote = 52,
    BeginQuorumEpoch = 53,
    EndQuorumEpoch = 54,
    DescribeQuorum = 55,
    AlterPartition = 56,
    UpdateFeatures = 57,
    Envelope = 58,
    FetchSnapshot = 59,
    DescribeCluster = 60,
    DescribeProducers = 61,
    BrokerRegistration = 62,
    BrokerHeartbeat = 63,
    UnregisterBroker = 64,
    DescribeTransactions = 65,
    ListTransactions = 66,
    AllocateProducerIds = 67,
    ConsumerGroupHeartbeat = 68,
    ConsumerGroupDescribe = 69,
    ControllerRegistration = 70,
    GetTelemetrySubscriptions = 71,
    PushTelemetry = 72,
    AssignReplicasToDirs = 73,
    ListConfigResources = 74,
    DescribeTopicPartitions = 75,
    ShareGroupHeartbeat = 76,
    ShareGroupDescribe = 77,
    ShareFetch = 78,
    ShareAcknowledge = 79,
    AddRaftVoter = 80,
    RemoveRaftVoter = 81,
    UpdateRaftVoter = 82,
    InitializeShareGroupState = 83,
    ReadShareGroupState = 84,
    WriteShareGroupState = 85,
    DeleteShareGroupState = 86,
    ReadShareGroupStateSummary = 87,
    DescribeShareGroupOffsets = 90,
    AlterShareGroupOffsets = 91,
    DeleteShareGroupOffsets = 92,
    /// StreamsGroupHeartbeat (KIP-1071, Kafka 4.1+).
    StreamsGroupHeartbeat = 88,
    /// StreamsGroupDescribe (KIP-1071, Kafka 4.1+).
    StreamsGroupDescribe = 89,
    /// StreamsGroupTopologyDescriptionUpdate (KIP-1331, Kafka 4.4).
    StreamsGroupTopologyDescriptionUpdate = 93,
}

impl ApiKey {
    /// `kafka-protocol`'s key, for the keys it knows.
    pub fn crate_key(self) -> Option<CrateApiKey> {
        CrateApiKey::try_from(self as i16).ok()
    }

    /// The request header version of this API at `version`.
    pub fn request_header_version(self, version: i16) -> i16 {
        self.crate_key().map_or(2, |k| k.request_header_version(version))
    }

    /// The response header version of this API at `version`.
    pub fn response_header_version(self, version: i16) -> i16 {
        self.crate_key().map_or(1, |k| k.response_header_version(version))
    }
}

impl From<CrateApiKey> for ApiKey {
    fn from(key: CrateApiKey) -> ApiKey {
        // Every crate key is listed above (a test checks it).
        ApiKey::try_from(key as i16).unwrap_or(ApiKey::ApiVersions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_crate_key_is_known_by_the_same_name() {
        for key in CrateApiKey::iter() {
            let ours = ApiKey::try_from(key as i16).expect("listed");
            assert_eq!(format!("{ours:?}"), format!("{key:?}"));
        }
        assert_eq!(ApiKey::iter().count(), CrateApiKey::iter().count() + 3);
    }
}
