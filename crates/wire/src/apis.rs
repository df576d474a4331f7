//! The one declaration of what Kafgres serves.
//!
//! Dispatch consults [`served`] before decoding a request, and the ApiVersions
//! answer is built from [`SERVED_APIS`], so what is advertised is exactly what
//! is handled. When a version is added here, its handler must cover it and the
//! guard (`crate::guard`) must know its schema; the tests below check the latter.

use kafka_protocol::messages::ApiKey;

/// One served API: the versions advertised in ApiVersions and the versions
/// actually accepted (they differ only where Kafka itself advertises more than
/// it accepts, see `advertised_min`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedApi {
    pub key: ApiKey,
    /// The lowest version listed in ApiVersions.
    pub advertised_min: i16,
    /// The lowest version handled; lower ones get UNSUPPORTED_VERSION.
    pub accepted_min: i16,
    pub max: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> ServedApi {
    ServedApi { key, advertised_min: min, accepted_min: min, max }
}

/// Every API the broker answers, with its version range.
///
/// History of the choices:
/// - Produce is advertised from v0 although only v3+ (magic v2 batches) is
///   accepted: Kafka 4.x does the same because librdkafka disables compression
///   when Produce's minimum version is above 0 (KAFKA-18659, librdkafka #4956).
/// - Produce serves v3-v13 (Kafka 4.1's range); v13 addresses topics by id
///   (KIP-516), an unknown id is UNKNOWN_TOPIC_ID.
/// - Fetch serves v4-v18 (Kafka 4.1's range); v13+ uses topic ids, which
///   Metadata returns from v10; v18 only adds the high watermark a follower
///   knows (KIP-1166, a tagged field consumers do not send), ignored here.
/// - DescribeGroups serves v0-v6: v6 answers an unknown group (or a
///   consumer-protocol group) with GROUP_ID_NOT_FOUND and an error message.
/// - Metadata serves v0-v13 (Kafka 4.x brought v0-v3 back after KIP-896).
/// - InitProducerId serves v0-v5 (Kafka 4.x's v6 adds two-phase commit, KIP-939).
/// - Transactions (version 1): AddPartitionsToTxn v0-3 (v4+ is the brokers'
///   verification call and v5 transaction version 2, KIP-890), AddOffsetsToTxn
///   v0-4, EndTxn v0-4 and TxnOffsetCommit v0-4 (v5 of both is transaction
///   version 2, which ApiVersions does not offer as a feature).
/// - IncrementalAlterConfigs v0-1, AlterConfigs v0-2, DescribeLogDirs v1-4:
///   Kafka 4.1's ranges (KIP-896 removed DescribeLogDirs v0).
/// - SaslHandshake v0-1 and SaslAuthenticate v0-2 (Kafka 4.1's ranges) are
///   answered by the connection's SASL gate (`kafgres_broker::sasl`), never
///   by dispatch: ILLEGAL_SASL_STATE without authentication or after it, as
///   Kafka's request handler answers them; the SCRAM exchange otherwise
///   (v0 handshakes are followed by bare tokens, as in Kafka).
/// - DescribeProducers serves v0 (Kafka 4.1's range): the SQL bridge reads its
///   own sequences back with it after a restart.
/// - OffsetForLeaderEpoch serves v2-v4: Kafka 4.x removed v0-v1 (KIP-896),
///   and kafka-protocol 0.18 decodes only v2-v4.
pub const SERVED_APIS: &[ServedApi] = &[
    ServedApi { key: ApiKey::Produce, advertised_min: 0, accepted_min: 3, max: 13 },
    api(ApiKey::Fetch, 4, 18),
    api(ApiKey::ListOffsets, 1, 10),
    api(ApiKey::Metadata, 0, 13),
    api(ApiKey::ApiVersions, 0, 4),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::DescribeCluster, 0, 2),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::OffsetCommit, 2, 9),
    api(ApiKey::OffsetFetch, 1, 9),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::DescribeGroups, 0, 6),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 1),
    api(ApiKey::OffsetDelete, 0, 0),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::AddPartitionsToTxn, 0, 3),
    api(ApiKey::AddOffsetsToTxn, 0, 4),
    api(ApiKey::EndTxn, 0, 4),
    api(ApiKey::TxnOffsetCommit, 0, 4),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::DescribeLogDirs, 1, 4),
    api(ApiKey::OffsetForLeaderEpoch, 2, 4),
    api(ApiKey::DescribeTopicPartitions, 0, 0),
    api(ApiKey::DescribeProducers, 0, 0),
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::SaslAuthenticate, 0, 2),
];

/// What dispatch should do with a request's API key and version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Yes(ApiKey),
    /// Known and served, but not at this version.
    UnsupportedVersion(ApiKey),
    /// An API key this broker does not serve at all.
    Unknown,
}

/// Looks up an API key and version in [`SERVED_APIS`].
pub fn served(api_key: i16, api_version: i16) -> Served {
    match SERVED_APIS.iter().find(|a| a.key as i16 == api_key) {
        None => Served::Unknown,
        Some(a) if api_version >= a.accepted_min && api_version <= a.max => Served::Yes(a.key),
        Some(a) => Served::UnsupportedVersion(a.key),
    }
}

/// The ApiVersions range, for the KIP-511 fallback answer.
pub fn api_versions_range() -> ServedApi {
    SERVED_APIS.iter().copied().find(|a| a.key == ApiKey::ApiVersions).expect("ApiVersions is always served")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_and_advertisement_agree() {
        for a in SERVED_APIS {
            assert!(a.advertised_min <= a.accepted_min && a.accepted_min <= a.max, "{a:?}");
            for v in a.accepted_min..=a.max {
                assert_eq!(served(a.key as i16, v), Served::Yes(a.key));
            }
            assert_eq!(served(a.key as i16, a.max + 1), Served::UnsupportedVersion(a.key));
        }
        assert_eq!(served(ApiKey::Produce as i16, 2), Served::UnsupportedVersion(ApiKey::Produce));
        assert_eq!(served(999, 0), Served::Unknown);
    }

    #[test]
    fn the_guard_knows_every_served_version() {
        // The guard answers UnknownApi for a schema it lacks; an empty body is
        // otherwise either accepted or refused for being short, never unknown.
        for a in SERVED_APIS {
            for v in a.accepted_min..=a.max {
                let r = crate::guard::check_request_body(a.key as i16, v, &[]);
                assert!(
                    !matches!(r, Err(crate::guard::GuardError::UnknownApi { .. })),
                    "guard has no schema for {:?} v{v}",
                    a.key
                );
            }
        }
    }
}
