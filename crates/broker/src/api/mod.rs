//! One module per Kafka API (or per family of a few), each declaring a
//! [`Handler`]: its key, the versions it serves with why, the services it
//! uses, and the function that turns the decoded request into the response.
//! Per-partition failures are Kafka error codes inside the response.
//!
//! `served_apis!` is the one list of handlers. The served table
//! ([`SERVED_APIS`]: what ApiVersions advertises and what dispatch accepts)
//! and dispatch's routing are both generated from it, so an API cannot be
//! advertised without being handled. Adding an API is its module and one line
//! in the list (docs/architecture.md, "How to add an API").

pub mod acls;
pub mod alter_configs;
pub mod api_versions;
pub mod authorized_operations;
pub mod client_quotas;
pub mod consumer_group;
pub mod create_partitions;
pub mod create_topics;
pub mod delegation_tokens;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_topic_partitions;
pub mod error_counts;
pub mod features;
pub mod fetch;
pub mod group_admin;
pub mod group_membership;
pub mod group_offsets;
pub mod handler;
pub mod init_producer_id;
pub mod list_config_resources;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod replicas;
pub mod sasl;
pub mod share_fetch;
pub mod share_group;
pub mod share_offsets;
pub mod share_offsets_admin;
pub mod streams_group;
pub mod telemetry;
pub mod throttle_time;
pub mod transaction_admin;
pub mod transactions;
pub mod user_scram;
pub mod write_txn_markers;

pub use handler::{Answer, Gate, Gates, Handler, RequestContext, Served, ServedApi, Versions};

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

/// Every served API, by its handler, in the order ApiVersions lists them.
/// Expands to `$then! { handler, ... }`: [`SERVED_APIS`] below, and the
/// routing in `crate::dispatch`.
macro_rules! served_apis {
    ($then:ident) => {
        $then! {
            $crate::api::produce::Produce,
            $crate::api::fetch::Fetch,
            $crate::api::list_offsets::ListOffsets,
            $crate::api::metadata::Metadata,
            $crate::api::api_versions::ApiVersions,
            $crate::api::create_topics::CreateTopics,
            $crate::api::delete_topics::DeleteTopics,
            $crate::api::describe_configs::DescribeConfigs,
            $crate::api::create_partitions::CreatePartitions,
            $crate::api::describe_cluster::DescribeCluster,
            $crate::api::delete_records::DeleteRecords,
            $crate::api::group_admin::FindCoordinator,
            $crate::api::group_membership::JoinGroup,
            $crate::api::group_membership::SyncGroup,
            $crate::api::group_membership::Heartbeat,
            $crate::api::group_membership::LeaveGroup,
            $crate::api::group_offsets::OffsetCommit,
            $crate::api::group_offsets::OffsetFetch,
            $crate::api::group_admin::ListGroups,
            $crate::api::group_admin::DescribeGroups,
            $crate::api::group_admin::DeleteGroups,
            $crate::api::consumer_group::ConsumerGroupHeartbeat,
            $crate::api::consumer_group::ConsumerGroupDescribe,
            $crate::api::group_offsets::OffsetDelete,
            $crate::api::init_producer_id::InitProducerId,
            $crate::api::transactions::AddPartitionsToTxn,
            $crate::api::transactions::AddOffsetsToTxn,
            $crate::api::transactions::EndTxn,
            $crate::api::transactions::TxnOffsetCommit,
            $crate::api::write_txn_markers::WriteTxnMarkers,
            $crate::api::alter_configs::IncrementalAlterConfigs,
            $crate::api::alter_configs::AlterConfigs,
            $crate::api::describe_log_dirs::DescribeLogDirs,
            $crate::api::replicas::AlterReplicaLogDirs,
            $crate::api::replicas::ElectLeaders,
            $crate::api::replicas::AlterPartitionReassignments,
            $crate::api::replicas::ListPartitionReassignments,
            $crate::api::offset_for_leader_epoch::OffsetForLeaderEpoch,
            $crate::api::describe_topic_partitions::DescribeTopicPartitions,
            $crate::api::describe_producers::DescribeProducers,
            $crate::api::transaction_admin::DescribeTransactions,
            $crate::api::transaction_admin::ListTransactions,
            $crate::api::sasl::SaslHandshake,
            $crate::api::sasl::SaslAuthenticate,
            $crate::api::delegation_tokens::CreateDelegationToken,
            $crate::api::delegation_tokens::RenewDelegationToken,
            $crate::api::delegation_tokens::ExpireDelegationToken,
            $crate::api::delegation_tokens::DescribeDelegationToken,
            $crate::api::acls::DescribeAcls,
            $crate::api::acls::CreateAcls,
            $crate::api::acls::DeleteAcls,
            $crate::api::client_quotas::DescribeClientQuotas,
            $crate::api::client_quotas::AlterClientQuotas,
            $crate::api::user_scram::DescribeUserScramCredentials,
            $crate::api::user_scram::AlterUserScramCredentials,
            $crate::api::features::UpdateFeatures,
            $crate::api::list_config_resources::ListConfigResources,
            $crate::api::share_group::ShareGroupHeartbeat,
            $crate::api::share_group::ShareGroupDescribe,
            $crate::api::share_fetch::ShareFetch,
            $crate::api::share_fetch::ShareAcknowledge,
            $crate::api::streams_group::StreamsGroupHeartbeat,
            $crate::api::streams_group::StreamsGroupDescribe,
            $crate::api::share_offsets::DescribeShareGroupOffsets,
            $crate::api::share_offsets_admin::AlterShareGroupOffsets,
            $crate::api::share_offsets_admin::DeleteShareGroupOffsets,
            $crate::api::telemetry::GetTelemetrySubscriptions,
            $crate::api::telemetry::PushTelemetry,
        }
    };
}
pub(crate) use served_apis;

macro_rules! served_table {
    ($($handler:path),* $(,)?) => {
        /// Every API the broker answers, with its versions (ApiVersions
        /// advertises exactly this, in this order).
        pub const SERVED_APIS: &[ServedApi] = &[$(ServedApi::of::<$handler>()),*];
    };
}
served_apis!(served_table);

// Two handlers for one key would leave the second unreachable.
const _: () = assert!(keys_are_distinct(SERVED_APIS), "two handlers in the list serve the same API key");

const fn keys_are_distinct(apis: &[ServedApi]) -> bool {
    let mut i = 0;
    while i < apis.len() {
        let mut j = i + 1;
        while j < apis.len() {
            if apis[i].key as i16 == apis[j].key as i16 {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

/// Looks up an API key and version in [`SERVED_APIS`]; an API whose gate is
/// closed is unknown, as if not in the table.
pub fn served(api_key: i16, api_version: i16, gates: Gates) -> Served {
    match served_now(gates).find(|a| a.key as i16 == api_key) {
        None => Served::Unknown,
        Some(a) if a.versions.accepts(api_version) => Served::Yes(a.key),
        Some(a) => Served::UnsupportedVersion(a.key),
    }
}

/// The lines of [`SERVED_APIS`] whose gates are open: what ApiVersions
/// advertises and dispatch accepts, from the same filter.
pub fn served_now(gates: Gates) -> impl Iterator<Item = &'static ServedApi> {
    SERVED_APIS.iter().filter(move |a| gates.open(a.gate))
}

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

pub(crate) fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

#[cfg(test)]
mod tests {
    use kafgres_wire::ApiKey;

    use super::*;

    const ALL_OPEN: Gates = Gates { client_telemetry: true };

    #[test]
    fn dispatch_and_advertisement_agree() {
        let served = |key, version| served(key, version, ALL_OPEN);
        for a in SERVED_APIS {
            let v = a.versions;
            assert!(v.advertised_min <= v.accepted_min && v.accepted_min <= v.max, "{a:?}");
            for version in v.accepted_min..=v.max {
                assert_eq!(served(a.key as i16, version), Served::Yes(a.key));
            }
            assert_eq!(served(a.key as i16, v.max + 1), Served::UnsupportedVersion(a.key));
        }
        assert_eq!(served(ApiKey::Produce as i16, 2), Served::UnsupportedVersion(ApiKey::Produce));
        assert_eq!(served(999, 0), Served::Unknown);
    }

    #[test]
    fn a_closed_gate_hides_its_apis_from_both() {
        let closed = Gates::default();
        for key in [ApiKey::GetTelemetrySubscriptions, ApiKey::PushTelemetry] {
            assert_eq!(super::served(key as i16, 0, closed), Served::Unknown);
            assert_eq!(super::served(key as i16, 0, ALL_OPEN), Served::Yes(key));
            assert!(!served_now(closed).any(|a| a.key == key));
            assert!(served_now(ALL_OPEN).any(|a| a.key == key));
        }
        assert_eq!(served_now(closed).count() + 2, SERVED_APIS.len(), "only the telemetry APIs are gated");
    }

    #[test]
    fn the_guard_knows_every_served_version() {
        // The guard answers UnknownApi for a schema it lacks; an empty body is
        // otherwise either accepted or refused for being short, never unknown.
        for a in SERVED_APIS {
            for version in a.versions.accepted_min..=a.versions.max {
                let r = kafgres_wire::guard::check_request_body(a.key as i16, version, &[]);
                assert!(
                    !matches!(r, Err(kafgres_wire::guard::GuardError::UnknownApi { .. })),
                    "guard has no schema for {:?} v{version}",
                    a.key
                );
            }
        }
    }
}
