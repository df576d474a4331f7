//! Connection and administration requests: ApiVersions, FindCoordinator, CreateTopics,
//! DeleteTopics, InitProducerId, DescribeConfigs, SaslHandshake, SaslAuthenticate.

use crate::guard::schema::{between, field, since, until, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// ApiVersions (key 18): versions 0-5, flexible from 3; v5 (Kafka 4.4, `crate::messages`) adds the
// cluster and node the client means to reach. Note: a client sends ApiVersions before it
// knows our versions; the caller answers unknown versions in v0 format (KIP-511) without decoding.

pub(crate) static API_VERSIONS: ApiSchema =
    ApiSchema { key: 18, versions: between(0, 5), flexible_since: 3, body: &API_VERSIONS_REQUEST };

pub(crate) const API_VERSIONS_REQUEST: StructSchema = StructSchema::new(
    "ApiVersionsRequest",
    &[
        field("client_software_name", Kind::String, since(3)),
        field("client_software_version", Kind::String, since(3)),
        field("cluster_id", Kind::NullableString, since(5)),
        field("node_id", Kind::Int32, since(5)),
    ],
);

// ---------------------------------------------------------------------------------------------
// FindCoordinator (key 10): versions 0-6, flexible from 3. v4 replaced the single key with a batch.

pub(crate) static FIND_COORDINATOR: ApiSchema =
    ApiSchema { key: 10, versions: between(0, 6), flexible_since: 3, body: &FIND_COORDINATOR_REQUEST };

pub(crate) const FIND_COORDINATOR_REQUEST: StructSchema = StructSchema::new(
    "FindCoordinatorRequest",
    &[
        field("key", Kind::String, until(3)),
        field("key_type", Kind::Int8, since(1)),
        field("coordinator_keys", Kind::Array(&Kind::String), since(4)),
    ],
);

// ---------------------------------------------------------------------------------------------
// CreateTopics (key 19): versions 2-7, flexible from 5.

pub(crate) static CREATE_TOPICS: ApiSchema =
    ApiSchema { key: 19, versions: between(2, 7), flexible_since: 5, body: &CREATE_TOPICS_REQUEST };

pub(crate) const CREATE_TOPICS_REQUEST: StructSchema = StructSchema::new(
    "CreateTopicsRequest",
    &[
        field("topics", Kind::Array(&Kind::Struct(&CREATABLE_TOPIC)), ALL),
        field("timeout_ms", Kind::Int32, ALL),
        field("validate_only", Kind::Bool, since(1)),
    ],
);

pub(crate) const CREATABLE_TOPIC: StructSchema = StructSchema::new(
    "CreatableTopic",
    &[
        field("name", Kind::String, ALL),
        field("num_partitions", Kind::Int32, ALL),
        field("replication_factor", Kind::Int16, ALL),
        field("assignments", Kind::Array(&Kind::Struct(&CREATABLE_REPLICA_ASSIGNMENT)), ALL),
        field("configs", Kind::Array(&Kind::Struct(&CREATABLE_TOPIC_CONFIG)), ALL),
    ],
);

pub(crate) const CREATABLE_REPLICA_ASSIGNMENT: StructSchema = StructSchema::new(
    "CreatableReplicaAssignment",
    &[field("partition_index", Kind::Int32, ALL), field("broker_ids", Kind::Array(&Kind::Int32), ALL)],
);

pub(crate) const CREATABLE_TOPIC_CONFIG: StructSchema = StructSchema::new(
    "CreatableTopicConfig",
    &[field("name", Kind::String, ALL), field("value", Kind::NullableString, ALL)],
);

// ---------------------------------------------------------------------------------------------
// DeleteTopics (key 20): versions 1-6, flexible from 4. v6 names topics by name or id.

pub(crate) static DELETE_TOPICS: ApiSchema =
    ApiSchema { key: 20, versions: between(1, 6), flexible_since: 4, body: &DELETE_TOPICS_REQUEST };

pub(crate) const DELETE_TOPICS_REQUEST: StructSchema = StructSchema::new(
    "DeleteTopicsRequest",
    &[
        field("topics", Kind::Array(&Kind::Struct(&DELETE_TOPIC_STATE)), since(6)),
        field("topic_names", Kind::Array(&Kind::String), until(5)),
        field("timeout_ms", Kind::Int32, ALL),
    ],
);

pub(crate) const DELETE_TOPIC_STATE: StructSchema = StructSchema::new(
    "DeleteTopicState",
    &[field("name", Kind::NullableString, since(6)), field("topic_id", Kind::Uuid, since(6))],
);

// ---------------------------------------------------------------------------------------------
// InitProducerId (key 22): versions 0-5, flexible from 2. (Enable2Pc and KeepPreparedTxn are v6,
// which kafka-protocol 0.18.0 does not decode.)

pub(crate) static INIT_PRODUCER_ID: ApiSchema =
    ApiSchema { key: 22, versions: between(0, 5), flexible_since: 2, body: &INIT_PRODUCER_ID_REQUEST };

pub(crate) const INIT_PRODUCER_ID_REQUEST: StructSchema = StructSchema::new(
    "InitProducerIdRequest",
    &[
        field("transactional_id", Kind::NullableString, ALL),
        field("transaction_timeout_ms", Kind::Int32, ALL),
        field("producer_id", Kind::Int64, since(3)),
        field("producer_epoch", Kind::Int16, since(3)),
    ],
);

// ---------------------------------------------------------------------------------------------
// DescribeConfigs (key 32): versions 1-4, flexible from 4.

pub(crate) static DESCRIBE_CONFIGS: ApiSchema =
    ApiSchema { key: 32, versions: between(1, 4), flexible_since: 4, body: &DESCRIBE_CONFIGS_REQUEST };

pub(crate) const DESCRIBE_CONFIGS_REQUEST: StructSchema = StructSchema::new(
    "DescribeConfigsRequest",
    &[
        field("resources", Kind::Array(&Kind::Struct(&DESCRIBE_CONFIGS_RESOURCE)), ALL),
        field("include_synonyms", Kind::Bool, since(1)),
        field("include_documentation", Kind::Bool, since(3)),
    ],
);

pub(crate) const DESCRIBE_CONFIGS_RESOURCE: StructSchema = StructSchema::new(
    "DescribeConfigsResource",
    &[
        field("resource_type", Kind::Int8, ALL),
        field("resource_name", Kind::String, ALL),
        field("configuration_keys", Kind::NullableArray(&Kind::String), ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// SaslHandshake (key 17): versions 0-1, never flexible.

pub(crate) static SASL_HANDSHAKE: ApiSchema =
    ApiSchema { key: 17, versions: between(0, 1), flexible_since: i16::MAX, body: &SASL_HANDSHAKE_REQUEST };

pub(crate) const SASL_HANDSHAKE_REQUEST: StructSchema =
    StructSchema::new("SaslHandshakeRequest", &[field("mechanism", Kind::String, ALL)]);

// ---------------------------------------------------------------------------------------------
// SaslAuthenticate (key 36): versions 0-2, flexible from 2. `auth_bytes` decodes to `Bytes`
// (a view of the body), so only its length needs checking.

pub(crate) static SASL_AUTHENTICATE: ApiSchema =
    ApiSchema { key: 36, versions: between(0, 2), flexible_since: 2, body: &SASL_AUTHENTICATE_REQUEST };

pub(crate) const SASL_AUTHENTICATE_REQUEST: StructSchema =
    StructSchema::new("SaslAuthenticateRequest", &[field("auth_bytes", Kind::Bytes, ALL)]);
