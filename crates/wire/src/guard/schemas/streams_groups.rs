//! Requests of the Streams group protocol (KIP-1071): StreamsGroupHeartbeat (versions 0-1; v1
//! has v0's layout), StreamsGroupDescribe (versions 0-1) and StreamsGroupTopologyDescriptionUpdate
//! (version 0, KIP-1331). All are flexible. Kafka's uint16 port is walked as an int16 (same size).

use crate::guard::schema::{between, field, since, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// StreamsGroupHeartbeat (key 88): versions 0-1. Most fields are null when unchanged.

pub(crate) static STREAMS_GROUP_HEARTBEAT: ApiSchema =
    ApiSchema { key: 88, versions: between(0, 1), flexible_since: 0, body: &STREAMS_GROUP_HEARTBEAT_REQUEST };

pub(crate) const STREAMS_GROUP_HEARTBEAT_REQUEST: StructSchema = StructSchema::new(
    "StreamsGroupHeartbeatRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("member_id", Kind::String, ALL),
        field("member_epoch", Kind::Int32, ALL),
        field("endpoint_information_epoch", Kind::Int32, ALL),
        field("instance_id", Kind::NullableString, ALL),
        field("rack_id", Kind::NullableString, ALL),
        field("rebalance_timeout_ms", Kind::Int32, ALL),
        field("topology", Kind::NullableStruct(&TOPOLOGY), ALL),
        field("active_tasks", Kind::NullableArray(&Kind::Struct(&TASK_IDS)), ALL),
        field("standby_tasks", Kind::NullableArray(&Kind::Struct(&TASK_IDS)), ALL),
        field("warmup_tasks", Kind::NullableArray(&Kind::Struct(&TASK_IDS)), ALL),
        field("process_id", Kind::NullableString, ALL),
        field("user_endpoint", Kind::NullableStruct(&ENDPOINT), ALL),
        field("client_tags", Kind::NullableArray(&Kind::Struct(&KEY_VALUE)), ALL),
        field("task_offsets", Kind::NullableArray(&Kind::Struct(&TASK_OFFSET)), ALL),
        field("task_end_offsets", Kind::NullableArray(&Kind::Struct(&TASK_OFFSET)), ALL),
        field("shutdown_application", Kind::Bool, ALL),
    ],
);

pub(crate) const TOPOLOGY: StructSchema = StructSchema::new(
    "Topology",
    &[field("epoch", Kind::Int32, ALL), field("subtopologies", Kind::Array(&Kind::Struct(&SUBTOPOLOGY)), ALL)],
);

pub(crate) const SUBTOPOLOGY: StructSchema = StructSchema::new(
    "Subtopology",
    &[
        field("subtopology_id", Kind::String, ALL),
        field("source_topics", Kind::Array(&Kind::String), ALL),
        field("source_topic_regex", Kind::Array(&Kind::String), ALL),
        field("state_changelog_topics", Kind::Array(&Kind::Struct(&TOPIC_INFO)), ALL),
        field("repartition_sink_topics", Kind::Array(&Kind::String), ALL),
        field("repartition_source_topics", Kind::Array(&Kind::Struct(&TOPIC_INFO)), ALL),
        field("copartition_groups", Kind::Array(&Kind::Struct(&COPARTITION_GROUP)), ALL),
    ],
);

pub(crate) const COPARTITION_GROUP: StructSchema = StructSchema::new(
    "CopartitionGroup",
    &[
        field("source_topics", Kind::Array(&Kind::Int16), ALL),
        field("source_topic_regex", Kind::Array(&Kind::Int16), ALL),
        field("repartition_source_topics", Kind::Array(&Kind::Int16), ALL),
    ],
);

pub(crate) const TOPIC_INFO: StructSchema = StructSchema::new(
    "TopicInfo",
    &[
        field("name", Kind::String, ALL),
        field("partitions", Kind::Int32, ALL),
        field("replication_factor", Kind::Int16, ALL),
        field("topic_configs", Kind::Array(&Kind::Struct(&KEY_VALUE)), ALL),
    ],
);

pub(crate) const KEY_VALUE: StructSchema =
    StructSchema::new("KeyValue", &[field("key", Kind::String, ALL), field("value", Kind::String, ALL)]);

pub(crate) const ENDPOINT: StructSchema =
    StructSchema::new("Endpoint", &[field("host", Kind::String, ALL), field("port", Kind::Int16, ALL)]);

pub(crate) const TASK_OFFSET: StructSchema = StructSchema::new(
    "TaskOffset",
    &[
        field("subtopology_id", Kind::String, ALL),
        field("partition", Kind::Int32, ALL),
        field("offset", Kind::Int64, ALL),
    ],
);

pub(crate) const TASK_IDS: StructSchema = StructSchema::new(
    "TaskIds",
    &[field("subtopology_id", Kind::String, ALL), field("partitions", Kind::Array(&Kind::Int32), ALL)],
);

// ---------------------------------------------------------------------------------------------
// StreamsGroupDescribe (key 89): versions 0-1; v1 adds IncludeTopologyDescription.

pub(crate) static STREAMS_GROUP_DESCRIBE: ApiSchema =
    ApiSchema { key: 89, versions: between(0, 1), flexible_since: 0, body: &STREAMS_GROUP_DESCRIBE_REQUEST };

pub(crate) const STREAMS_GROUP_DESCRIBE_REQUEST: StructSchema = StructSchema::new(
    "StreamsGroupDescribeRequest",
    &[
        field("group_ids", Kind::Array(&Kind::String), ALL),
        field("include_authorized_operations", Kind::Bool, ALL),
        field("include_topology_description", Kind::Bool, since(1)),
    ],
);

// ---------------------------------------------------------------------------------------------
// StreamsGroupTopologyDescriptionUpdate (key 93): version 0 (KIP-1331).

pub(crate) static STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE: ApiSchema = ApiSchema {
    key: 93,
    versions: between(0, 0),
    flexible_since: 0,
    body: &STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE_REQUEST,
};

pub(crate) const STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE_REQUEST: StructSchema = StructSchema::new(
    "StreamsGroupTopologyDescriptionUpdateRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("member_id", Kind::String, ALL),
        field("topology_epoch", Kind::Int32, ALL),
        field("topology_description", Kind::Struct(&TOPOLOGY_DESCRIPTION), ALL),
    ],
);

pub(crate) const TOPOLOGY_DESCRIPTION: StructSchema = StructSchema::new(
    "TopologyDescription",
    &[
        field("subtopologies", Kind::Array(&Kind::Struct(&TOPOLOGY_DESCRIPTION_SUBTOPOLOGY)), ALL),
        field("global_stores", Kind::Array(&Kind::Struct(&TOPOLOGY_DESCRIPTION_GLOBAL_STORE)), ALL),
    ],
);

pub(crate) const TOPOLOGY_DESCRIPTION_SUBTOPOLOGY: StructSchema = StructSchema::new(
    "TopologyDescriptionSubtopology",
    &[
        field("subtopology_id", Kind::String, ALL),
        field("nodes", Kind::Array(&Kind::Struct(&TOPOLOGY_DESCRIPTION_NODE)), ALL),
    ],
);

pub(crate) const TOPOLOGY_DESCRIPTION_NODE: StructSchema = StructSchema::new(
    "TopologyDescriptionNode",
    &[
        field("name", Kind::String, ALL),
        field("node_type", Kind::Int8, ALL),
        field("source_topics", Kind::Array(&Kind::String), ALL),
        field("sink_topic", Kind::NullableString, ALL),
        field("stores", Kind::Array(&Kind::String), ALL),
        field("successors", Kind::Array(&Kind::String), ALL),
    ],
);

pub(crate) const TOPOLOGY_DESCRIPTION_GLOBAL_STORE: StructSchema = StructSchema::new(
    "TopologyDescriptionGlobalStore",
    &[
        field("source", Kind::Struct(&TOPOLOGY_DESCRIPTION_NODE), ALL),
        field("processor", Kind::Struct(&TOPOLOGY_DESCRIPTION_NODE), ALL),
    ],
);
