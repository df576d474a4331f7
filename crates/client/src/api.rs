//! The one table of what this client sends: each request type at one pinned
//! version, the name used in errors, and the schema its response is guarded
//! with. Every version is one the Kafgres broker serves (`kafgres_broker::api`,
//! checked by a test) and flexible, which is all [`crate::guard`] knows.

use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    DescribeProducersRequest, FetchRequest, IncrementalAlterConfigsRequest, InitProducerIdRequest, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest, SaslAuthenticateRequest, ShareAcknowledgeRequest,
    ShareFetchRequest, ShareGroupHeartbeatRequest,
};
use kafka_protocol::protocol::Request;

use crate::guard::{schemas, Kind};

/// A request type at the version this client sends.
pub trait Pinned: Request {
    /// Kafka's name of the API, used in errors.
    const API: &'static str;
    const VERSION: i16;
    /// The response body's schema at [`Pinned::VERSION`].
    const RESPONSE: &'static Kind;
}

macro_rules! pinned {
    ($($request:ty => $api:literal, $version:literal, $schema:path;)*) => {
        $(
            impl Pinned for $request {
                const API: &'static str = $api;
                const VERSION: i16 = $version;
                const RESPONSE: &'static Kind = &$schema;
            }
        )*
        /// `(name, api key, version)` of every request this client sends.
        pub const PINNED_VERSIONS: &[(&str, i16, i16)] = &[$(($api, <$request as Request>::KEY, $version)),*];
    };
}

// Fetch v12 is the last version that names topics (v13+ uses topic ids).
// ListOffsets v7 has everything but the v10 timeout field.
pinned! {
    ProduceRequest => "Produce", 9, schemas::PRODUCE_V9;
    FetchRequest => "Fetch", 12, schemas::FETCH_V12;
    ListOffsetsRequest => "ListOffsets", 7, schemas::LIST_OFFSETS_V7;
    MetadataRequest => "Metadata", 12, schemas::METADATA_V12;
    DescribeGroupsRequest => "DescribeGroups", 5, schemas::DESCRIBE_GROUPS_V5;
    ListGroupsRequest => "ListGroups", 4, schemas::LIST_GROUPS_V4;
    CreateTopicsRequest => "CreateTopics", 7, schemas::CREATE_TOPICS_V7;
    DeleteTopicsRequest => "DeleteTopics", 6, schemas::DELETE_TOPICS_V6;
    CreatePartitionsRequest => "CreatePartitions", 3, schemas::CREATE_PARTITIONS_V3;
    IncrementalAlterConfigsRequest => "IncrementalAlterConfigs", 1, schemas::INCREMENTAL_ALTER_CONFIGS_V1;
    InitProducerIdRequest => "InitProducerId", 4, schemas::INIT_PRODUCER_ID_V4;
    DescribeProducersRequest => "DescribeProducers", 0, schemas::DESCRIBE_PRODUCERS_V0;
    DescribeConfigsRequest => "DescribeConfigs", 4, schemas::DESCRIBE_CONFIGS_V4;
    SaslAuthenticateRequest => "SaslAuthenticate", 2, schemas::SASL_AUTHENTICATE_V2;
    ShareGroupHeartbeatRequest => "ShareGroupHeartbeat", 1, schemas::SHARE_GROUP_HEARTBEAT_V1;
    ShareFetchRequest => "ShareFetch", 1, schemas::SHARE_FETCH_V1;
    ShareAcknowledgeRequest => "ShareAcknowledge", 1, schemas::SHARE_ACKNOWLEDGE_V1;
}

#[cfg(test)]
mod tests {
    use kafgres_broker::api::{served, Gates, Served};
    use kafka_protocol::messages::ApiKey;

    use super::*;

    #[test]
    fn every_pinned_version_is_served_by_kafgres_and_flexible() {
        for &(name, key, version) in PINNED_VERSIONS {
            // Served whatever the settings: with every optional API off.
            assert!(
                matches!(served(key, version, Gates::default()), Served::Yes(_)),
                "{name} v{version} is not served"
            );
            let api_key = ApiKey::try_from(key).expect("known key");
            assert_eq!(api_key.request_header_version(version), 2, "{name} v{version} is not flexible");
            assert_eq!(api_key.response_header_version(version), 1, "{name} v{version} is not flexible");
        }
    }
}
