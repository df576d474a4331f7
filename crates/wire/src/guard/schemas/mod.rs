//! The request schemas, one table per API, written by hand from the `kafka-protocol` 0.18.0
//! decoders (`src/messages/*_request.rs`) and Kafka's message JSON. Each table keeps Kafka's field
//! names and says in which versions each field is on the wire; `versions` is exactly what
//! `kafka-protocol` 0.18.0 can decode for that API, or, where Kafka 4.4 goes further, what
//! `crate::messages` decodes.
//!
//! Adding an API: write its structs in the file for its family and add it to [`APIS`]; then, in
//! the tests, a request generator (`tests/requests_*.rs`), a line in the list of `tests/apis.rs`
//! (which makes its `roundtrip_*` test and its decoder arm), its structs in
//! `tests/minimum_sizes.rs`, and a hand-written huge count in `tests/hostile*.rs`. The property
//! tests compare the table with the real encoder and decoder at every version; they fail while the
//! list entry or minimum-size entries are missing, or if the versions differ from what
//! kafka-protocol decodes.
//!
//! Struct names follow Kafka's message definitions and so repeat across APIs (`TopicRequest`,
//! `AlterConfigsResource`); errors name the struct and field, the API key says which one.

pub(crate) mod acls;
pub(crate) mod admin;
pub(crate) mod cluster;
pub(crate) mod consumer_groups;
pub(crate) mod data;
pub(crate) mod groups;
pub(crate) mod quotas;
pub(crate) mod replicas;
pub(crate) mod share_groups;
pub(crate) mod streams_groups;
pub(crate) mod telemetry;
pub(crate) mod tokens;
pub(crate) mod topics;
pub(crate) mod txn;
pub(crate) mod users;

use super::schema::ApiSchema;

/// Every API the guard can walk, by API key.
pub(crate) static APIS: &[&ApiSchema] = &[
    &data::PRODUCE,
    &data::FETCH,
    &data::LIST_OFFSETS,
    &data::METADATA,
    &groups::OFFSET_COMMIT,
    &groups::OFFSET_FETCH,
    &admin::FIND_COORDINATOR,
    &groups::JOIN_GROUP,
    &groups::HEARTBEAT,
    &groups::LEAVE_GROUP,
    &groups::SYNC_GROUP,
    &groups::DESCRIBE_GROUPS,
    &groups::LIST_GROUPS,
    &admin::API_VERSIONS,
    &admin::CREATE_TOPICS,
    &admin::DELETE_TOPICS,
    &admin::INIT_PRODUCER_ID,
    &admin::DESCRIBE_CONFIGS,
    &admin::SASL_HANDSHAKE,
    &topics::DELETE_RECORDS,
    &topics::OFFSET_FOR_LEADER_EPOCH,
    &txn::ADD_PARTITIONS_TO_TXN,
    &txn::ADD_OFFSETS_TO_TXN,
    &txn::END_TXN,
    &txn::WRITE_TXN_MARKERS,
    &txn::TXN_OFFSET_COMMIT,
    &acls::DESCRIBE_ACLS,
    &acls::CREATE_ACLS,
    &acls::DELETE_ACLS,
    &cluster::ALTER_CONFIGS,
    &replicas::ALTER_REPLICA_LOG_DIRS,
    &cluster::DESCRIBE_LOG_DIRS,
    &admin::SASL_AUTHENTICATE,
    &tokens::CREATE_DELEGATION_TOKEN,
    &tokens::RENEW_DELEGATION_TOKEN,
    &tokens::EXPIRE_DELEGATION_TOKEN,
    &tokens::DESCRIBE_DELEGATION_TOKEN,
    &topics::CREATE_PARTITIONS,
    &groups::DELETE_GROUPS,
    &replicas::ELECT_LEADERS,
    &cluster::INCREMENTAL_ALTER_CONFIGS,
    &replicas::ALTER_PARTITION_REASSIGNMENTS,
    &replicas::LIST_PARTITION_REASSIGNMENTS,
    &quotas::DESCRIBE_CLIENT_QUOTAS,
    &quotas::ALTER_CLIENT_QUOTAS,
    &groups::OFFSET_DELETE,
    &users::DESCRIBE_USER_SCRAM_CREDENTIALS,
    &users::ALTER_USER_SCRAM_CREDENTIALS,
    &cluster::UPDATE_FEATURES,
    &cluster::DESCRIBE_CLUSTER,
    &txn::DESCRIBE_PRODUCERS,
    &txn::DESCRIBE_TRANSACTIONS,
    &txn::LIST_TRANSACTIONS,
    &consumer_groups::CONSUMER_GROUP_HEARTBEAT,
    &consumer_groups::CONSUMER_GROUP_DESCRIBE,
    &cluster::LIST_CONFIG_RESOURCES,
    &topics::DESCRIBE_TOPIC_PARTITIONS,
    &share_groups::SHARE_GROUP_HEARTBEAT,
    &share_groups::SHARE_GROUP_DESCRIBE,
    &share_groups::SHARE_FETCH,
    &share_groups::SHARE_ACKNOWLEDGE,
    &share_groups::DESCRIBE_SHARE_GROUP_OFFSETS,
    &share_groups::ALTER_SHARE_GROUP_OFFSETS,
    &share_groups::DELETE_SHARE_GROUP_OFFSETS,
    &streams_groups::STREAMS_GROUP_HEARTBEAT,
    &streams_groups::STREAMS_GROUP_DESCRIBE,
    &streams_groups::STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE,
    &telemetry::GET_TELEMETRY_SUBSCRIPTIONS,
    &telemetry::PUSH_TELEMETRY,
];

pub(crate) fn find(api_key: i16) -> Option<&'static ApiSchema> {
    APIS.iter().copied().find(|api| api.key == api_key)
}
