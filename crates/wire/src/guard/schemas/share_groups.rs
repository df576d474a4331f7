//! Requests of share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe (Kafka serves
//! only version 1 of each: version 0 was the early-access protocol), ShareFetch, ShareAcknowledge
//! (versions 1-2: Kafka 4.2's v2 adds KIP-1206's acquire mode and KIP-1222's renew flag), and the admin APIs DescribeShareGroupOffsets, AlterShareGroupOffsets and
//! DeleteShareGroupOffsets (version 0 each). All are flexible.

use crate::guard::schema::{between, field, since, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// ShareGroupHeartbeat (key 76): version 1. The subscription is null when unchanged.

pub(crate) static SHARE_GROUP_HEARTBEAT: ApiSchema =
    ApiSchema { key: 76, versions: between(1, 1), flexible_since: 0, body: &SHARE_GROUP_HEARTBEAT_REQUEST };

pub(crate) const SHARE_GROUP_HEARTBEAT_REQUEST: StructSchema = StructSchema::new(
    "ShareGroupHeartbeatRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("member_id", Kind::String, ALL),
        field("member_epoch", Kind::Int32, ALL),
        field("rack_id", Kind::NullableString, ALL),
        field("subscribed_topic_names", Kind::NullableArray(&Kind::String), ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// ShareGroupDescribe (key 77): version 1.

pub(crate) static SHARE_GROUP_DESCRIBE: ApiSchema =
    ApiSchema { key: 77, versions: between(1, 1), flexible_since: 0, body: &SHARE_GROUP_DESCRIBE_REQUEST };

pub(crate) const SHARE_GROUP_DESCRIBE_REQUEST: StructSchema = StructSchema::new(
    "ShareGroupDescribeRequest",
    &[field("group_ids", Kind::Array(&Kind::String), ALL), field("include_authorized_operations", Kind::Bool, ALL)],
);

// ---------------------------------------------------------------------------------------------
// ShareFetch (key 78): versions 1-2. Acknowledgements ride on each fetched partition.

pub(crate) static SHARE_FETCH: ApiSchema =
    ApiSchema { key: 78, versions: between(1, 2), flexible_since: 0, body: &SHARE_FETCH_REQUEST };

pub(crate) const SHARE_FETCH_REQUEST: StructSchema = StructSchema::new(
    "ShareFetchRequest",
    &[
        field("group_id", Kind::NullableString, ALL),
        field("member_id", Kind::NullableString, ALL),
        field("share_session_epoch", Kind::Int32, ALL),
        field("max_wait_ms", Kind::Int32, ALL),
        field("min_bytes", Kind::Int32, ALL),
        field("max_bytes", Kind::Int32, ALL),
        field("max_records", Kind::Int32, ALL),
        field("batch_size", Kind::Int32, ALL),
        field("share_acquire_mode", Kind::Int8, since(2)),
        field("is_renew_ack", Kind::Bool, since(2)),
        field("topics", Kind::Array(&Kind::Struct(&SHARE_FETCH_TOPIC)), ALL),
        field("forgotten_topics_data", Kind::Array(&Kind::Struct(&SHARE_FORGOTTEN_TOPIC)), ALL),
    ],
);

pub(crate) const SHARE_FETCH_TOPIC: StructSchema = StructSchema::new(
    "FetchTopic",
    &[field("topic_id", Kind::Uuid, ALL), field("partitions", Kind::Array(&Kind::Struct(&SHARE_FETCH_PARTITION)), ALL)],
);

pub(crate) const SHARE_FETCH_PARTITION: StructSchema = StructSchema::new(
    "FetchPartition",
    &[
        field("partition_index", Kind::Int32, ALL),
        field("acknowledgement_batches", Kind::Array(&Kind::Struct(&ACKNOWLEDGEMENT_BATCH)), ALL),
    ],
);

pub(crate) const ACKNOWLEDGEMENT_BATCH: StructSchema = StructSchema::new(
    "AcknowledgementBatch",
    &[
        field("first_offset", Kind::Int64, ALL),
        field("last_offset", Kind::Int64, ALL),
        field("acknowledge_types", Kind::Array(&Kind::Int8), ALL),
    ],
);

pub(crate) const SHARE_FORGOTTEN_TOPIC: StructSchema = StructSchema::new(
    "ForgottenTopic",
    &[field("topic_id", Kind::Uuid, ALL), field("partitions", Kind::Array(&Kind::Int32), ALL)],
);

// ---------------------------------------------------------------------------------------------
// ShareAcknowledge (key 79): versions 1-2.

pub(crate) static SHARE_ACKNOWLEDGE: ApiSchema =
    ApiSchema { key: 79, versions: between(1, 2), flexible_since: 0, body: &SHARE_ACKNOWLEDGE_REQUEST };

pub(crate) const SHARE_ACKNOWLEDGE_REQUEST: StructSchema = StructSchema::new(
    "ShareAcknowledgeRequest",
    &[
        field("group_id", Kind::NullableString, ALL),
        field("member_id", Kind::NullableString, ALL),
        field("share_session_epoch", Kind::Int32, ALL),
        field("is_renew_ack", Kind::Bool, since(2)),
        field("topics", Kind::Array(&Kind::Struct(&ACKNOWLEDGE_TOPIC)), ALL),
    ],
);

pub(crate) const ACKNOWLEDGE_TOPIC: StructSchema = StructSchema::new(
    "AcknowledgeTopic",
    &[field("topic_id", Kind::Uuid, ALL), field("partitions", Kind::Array(&Kind::Struct(&ACKNOWLEDGE_PARTITION)), ALL)],
);

pub(crate) const ACKNOWLEDGE_PARTITION: StructSchema = StructSchema::new(
    "AcknowledgePartition",
    &[
        field("partition_index", Kind::Int32, ALL),
        field("acknowledgement_batches", Kind::Array(&Kind::Struct(&ACKNOWLEDGEMENT_BATCH)), ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// DescribeShareGroupOffsets (key 90): versions 0-1 (v1, KIP-1226, changes only the response). Null
// topics ask for every partition.

pub(crate) static DESCRIBE_SHARE_GROUP_OFFSETS: ApiSchema =
    ApiSchema { key: 90, versions: between(0, 1), flexible_since: 0, body: &DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST };

pub(crate) const DESCRIBE_SHARE_GROUP_OFFSETS_REQUEST: StructSchema = StructSchema::new(
    "DescribeShareGroupOffsetsRequest",
    &[field("groups", Kind::Array(&Kind::Struct(&DESCRIBE_SHARE_GROUP_OFFSETS_GROUP)), ALL)],
);

pub(crate) const DESCRIBE_SHARE_GROUP_OFFSETS_GROUP: StructSchema = StructSchema::new(
    "DescribeShareGroupOffsetsRequestGroup",
    &[
        field("group_id", Kind::String, ALL),
        field("topics", Kind::NullableArray(&Kind::Struct(&DESCRIBE_SHARE_GROUP_OFFSETS_TOPIC)), ALL),
    ],
);

pub(crate) const DESCRIBE_SHARE_GROUP_OFFSETS_TOPIC: StructSchema = StructSchema::new(
    "DescribeShareGroupOffsetsRequestTopic",
    &[field("topic_name", Kind::String, ALL), field("partitions", Kind::Array(&Kind::Int32), ALL)],
);

// ---------------------------------------------------------------------------------------------
// AlterShareGroupOffsets (key 91): version 0, what Kafka 4.1 serves. Each partition's new
// share-partition start offset.

pub(crate) static ALTER_SHARE_GROUP_OFFSETS: ApiSchema =
    ApiSchema { key: 91, versions: between(0, 0), flexible_since: 0, body: &ALTER_SHARE_GROUP_OFFSETS_REQUEST };

pub(crate) const ALTER_SHARE_GROUP_OFFSETS_REQUEST: StructSchema = StructSchema::new(
    "AlterShareGroupOffsetsRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("topics", Kind::Array(&Kind::Struct(&ALTER_SHARE_GROUP_OFFSETS_TOPIC)), ALL),
    ],
);

pub(crate) const ALTER_SHARE_GROUP_OFFSETS_TOPIC: StructSchema = StructSchema::new(
    "AlterShareGroupOffsetsRequestTopic",
    &[
        field("topic_name", Kind::String, ALL),
        field("partitions", Kind::Array(&Kind::Struct(&ALTER_SHARE_GROUP_OFFSETS_PARTITION)), ALL),
    ],
);

pub(crate) const ALTER_SHARE_GROUP_OFFSETS_PARTITION: StructSchema = StructSchema::new(
    "AlterShareGroupOffsetsRequestPartition",
    &[field("partition_index", Kind::Int32, ALL), field("start_offset", Kind::Int64, ALL)],
);

// ---------------------------------------------------------------------------------------------
// DeleteShareGroupOffsets (key 92): version 0. Topics by name; a topic's every partition goes.

pub(crate) static DELETE_SHARE_GROUP_OFFSETS: ApiSchema =
    ApiSchema { key: 92, versions: between(0, 0), flexible_since: 0, body: &DELETE_SHARE_GROUP_OFFSETS_REQUEST };

pub(crate) const DELETE_SHARE_GROUP_OFFSETS_REQUEST: StructSchema = StructSchema::new(
    "DeleteShareGroupOffsetsRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("topics", Kind::Array(&Kind::Struct(&DELETE_SHARE_GROUP_OFFSETS_TOPIC)), ALL),
    ],
);

pub(crate) const DELETE_SHARE_GROUP_OFFSETS_TOPIC: StructSchema =
    StructSchema::new("DeleteShareGroupOffsetsRequestTopic", &[field("topic_name", Kind::String, ALL)]);
