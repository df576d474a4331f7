//! Classic consumer-group requests: OffsetCommit, OffsetFetch, JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete. (The KIP-848 protocol's
//! requests are in `consumer_groups.rs`.)

use crate::guard::schema::{between, field, since, until, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// OffsetCommit (key 8): versions 2-10, flexible from 8; v10 (`crate::messages`) names topics by id.

pub(crate) static OFFSET_COMMIT: ApiSchema =
    ApiSchema { key: 8, versions: between(2, 10), flexible_since: 8, body: &OFFSET_COMMIT_REQUEST };

pub(crate) const OFFSET_COMMIT_REQUEST: StructSchema = StructSchema::new(
    "OffsetCommitRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("generation_id_or_member_epoch", Kind::Int32, since(1)),
        field("member_id", Kind::String, since(1)),
        field("group_instance_id", Kind::NullableString, since(7)),
        field("retention_time_ms", Kind::Int64, between(2, 4)),
        field("topics", Kind::Array(&Kind::Struct(&OFFSET_COMMIT_REQUEST_TOPIC)), ALL),
    ],
);

pub(crate) const OFFSET_COMMIT_REQUEST_TOPIC: StructSchema = StructSchema::new(
    "OffsetCommitRequestTopic",
    &[
        field("name", Kind::String, until(9)),
        field("topic_id", Kind::Uuid, since(10)),
        field("partitions", Kind::Array(&Kind::Struct(&OFFSET_COMMIT_REQUEST_PARTITION)), ALL),
    ],
);

pub(crate) const OFFSET_COMMIT_REQUEST_PARTITION: StructSchema = StructSchema::new(
    "OffsetCommitRequestPartition",
    &[
        field("partition_index", Kind::Int32, ALL),
        field("committed_offset", Kind::Int64, ALL),
        field("committed_leader_epoch", Kind::Int32, since(6)),
        // CommitTimestamp existed only in v1.
        field("committed_metadata", Kind::NullableString, ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// OffsetFetch (key 9): versions 1-10, flexible from 6. v8 batches groups; v10 (`crate::messages`)
// names topics by id.

pub(crate) static OFFSET_FETCH: ApiSchema =
    ApiSchema { key: 9, versions: between(1, 10), flexible_since: 6, body: &OFFSET_FETCH_REQUEST };

pub(crate) const OFFSET_FETCH_REQUEST: StructSchema = StructSchema::new(
    "OffsetFetchRequest",
    &[
        field("group_id", Kind::String, until(7)),
        field("topics", Kind::NullableArray(&Kind::Struct(&OFFSET_FETCH_REQUEST_TOPIC)), until(7)),
        field("groups", Kind::Array(&Kind::Struct(&OFFSET_FETCH_REQUEST_GROUP)), since(8)),
        field("require_stable", Kind::Bool, since(7)),
    ],
);

pub(crate) const OFFSET_FETCH_REQUEST_TOPIC: StructSchema = StructSchema::new(
    "OffsetFetchRequestTopic",
    &[field("name", Kind::String, until(7)), field("partition_indexes", Kind::Array(&Kind::Int32), until(7))],
);

pub(crate) const OFFSET_FETCH_REQUEST_GROUP: StructSchema = StructSchema::new(
    "OffsetFetchRequestGroup",
    &[
        field("group_id", Kind::String, since(8)),
        field("member_id", Kind::NullableString, since(9)),
        field("member_epoch", Kind::Int32, since(9)),
        field("topics", Kind::NullableArray(&Kind::Struct(&OFFSET_FETCH_REQUEST_TOPICS)), since(8)),
    ],
);

pub(crate) const OFFSET_FETCH_REQUEST_TOPICS: StructSchema = StructSchema::new(
    "OffsetFetchRequestTopics",
    &[
        field("name", Kind::String, between(8, 9)),
        field("topic_id", Kind::Uuid, since(10)),
        field("partition_indexes", Kind::Array(&Kind::Int32), since(8)),
    ],
);

// ---------------------------------------------------------------------------------------------
// JoinGroup (key 11): versions 0-9, flexible from 6.

pub(crate) static JOIN_GROUP: ApiSchema =
    ApiSchema { key: 11, versions: between(0, 9), flexible_since: 6, body: &JOIN_GROUP_REQUEST };

pub(crate) const JOIN_GROUP_REQUEST: StructSchema = StructSchema::new(
    "JoinGroupRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("session_timeout_ms", Kind::Int32, ALL),
        field("rebalance_timeout_ms", Kind::Int32, since(1)),
        field("member_id", Kind::String, ALL),
        field("group_instance_id", Kind::NullableString, since(5)),
        field("protocol_type", Kind::String, ALL),
        field("protocols", Kind::Array(&Kind::Struct(&JOIN_GROUP_REQUEST_PROTOCOL)), ALL),
        field("reason", Kind::NullableString, since(8)),
    ],
);

pub(crate) const JOIN_GROUP_REQUEST_PROTOCOL: StructSchema = StructSchema::new(
    "JoinGroupRequestProtocol",
    &[field("name", Kind::String, ALL), field("metadata", Kind::Bytes, ALL)],
);

// ---------------------------------------------------------------------------------------------
// SyncGroup (key 14): versions 0-5, flexible from 4.

pub(crate) static SYNC_GROUP: ApiSchema =
    ApiSchema { key: 14, versions: between(0, 5), flexible_since: 4, body: &SYNC_GROUP_REQUEST };

pub(crate) const SYNC_GROUP_REQUEST: StructSchema = StructSchema::new(
    "SyncGroupRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("generation_id", Kind::Int32, ALL),
        field("member_id", Kind::String, ALL),
        field("group_instance_id", Kind::NullableString, since(3)),
        field("protocol_type", Kind::NullableString, since(5)),
        field("protocol_name", Kind::NullableString, since(5)),
        field("assignments", Kind::Array(&Kind::Struct(&SYNC_GROUP_REQUEST_ASSIGNMENT)), ALL),
    ],
);

pub(crate) const SYNC_GROUP_REQUEST_ASSIGNMENT: StructSchema = StructSchema::new(
    "SyncGroupRequestAssignment",
    &[field("member_id", Kind::String, ALL), field("assignment", Kind::Bytes, ALL)],
);

// ---------------------------------------------------------------------------------------------
// Heartbeat (key 12): versions 0-4, flexible from 4.

pub(crate) static HEARTBEAT: ApiSchema =
    ApiSchema { key: 12, versions: between(0, 4), flexible_since: 4, body: &HEARTBEAT_REQUEST };

pub(crate) const HEARTBEAT_REQUEST: StructSchema = StructSchema::new(
    "HeartbeatRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("generation_id", Kind::Int32, ALL),
        field("member_id", Kind::String, ALL),
        field("group_instance_id", Kind::NullableString, since(3)),
    ],
);

// ---------------------------------------------------------------------------------------------
// LeaveGroup (key 13): versions 0-5, flexible from 4. v3 batches members.

pub(crate) static LEAVE_GROUP: ApiSchema =
    ApiSchema { key: 13, versions: between(0, 5), flexible_since: 4, body: &LEAVE_GROUP_REQUEST };

pub(crate) const LEAVE_GROUP_REQUEST: StructSchema = StructSchema::new(
    "LeaveGroupRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("member_id", Kind::String, until(2)),
        field("members", Kind::Array(&Kind::Struct(&MEMBER_IDENTITY)), since(3)),
    ],
);

pub(crate) const MEMBER_IDENTITY: StructSchema = StructSchema::new(
    "MemberIdentity",
    &[
        field("member_id", Kind::String, since(3)),
        field("group_instance_id", Kind::NullableString, since(3)),
        field("reason", Kind::NullableString, since(5)),
    ],
);

// ---------------------------------------------------------------------------------------------
// ListGroups (key 16): versions 0-5, flexible from 3.

pub(crate) static LIST_GROUPS: ApiSchema =
    ApiSchema { key: 16, versions: between(0, 5), flexible_since: 3, body: &LIST_GROUPS_REQUEST };

pub(crate) const LIST_GROUPS_REQUEST: StructSchema = StructSchema::new(
    "ListGroupsRequest",
    &[
        field("states_filter", Kind::Array(&Kind::String), since(4)),
        field("types_filter", Kind::Array(&Kind::String), since(5)),
    ],
);

// ---------------------------------------------------------------------------------------------
// DescribeGroups (key 15): versions 0-6, flexible from 5.

pub(crate) static DESCRIBE_GROUPS: ApiSchema =
    ApiSchema { key: 15, versions: between(0, 6), flexible_since: 5, body: &DESCRIBE_GROUPS_REQUEST };

pub(crate) const DESCRIBE_GROUPS_REQUEST: StructSchema = StructSchema::new(
    "DescribeGroupsRequest",
    &[field("groups", Kind::Array(&Kind::String), ALL), field("include_authorized_operations", Kind::Bool, since(3))],
);

// ---------------------------------------------------------------------------------------------
// DeleteGroups (key 42): versions 0-3 (v3, Kafka 4.4, is laid out as v2), flexible from 2.

pub(crate) static DELETE_GROUPS: ApiSchema =
    ApiSchema { key: 42, versions: between(0, 3), flexible_since: 2, body: &DELETE_GROUPS_REQUEST };

pub(crate) const DELETE_GROUPS_REQUEST: StructSchema =
    StructSchema::new("DeleteGroupsRequest", &[field("groups_names", Kind::Array(&Kind::String), ALL)]);

// ---------------------------------------------------------------------------------------------
// OffsetDelete (key 47): version 0, not flexible.

pub(crate) static OFFSET_DELETE: ApiSchema =
    ApiSchema { key: 47, versions: between(0, 0), flexible_since: i16::MAX, body: &OFFSET_DELETE_REQUEST };

pub(crate) const OFFSET_DELETE_REQUEST: StructSchema = StructSchema::new(
    "OffsetDeleteRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("topics", Kind::Array(&Kind::Struct(&OFFSET_DELETE_REQUEST_TOPIC)), ALL),
    ],
);

pub(crate) const OFFSET_DELETE_REQUEST_TOPIC: StructSchema = StructSchema::new(
    "OffsetDeleteRequestTopic",
    &[
        field("name", Kind::String, ALL),
        field("partitions", Kind::Array(&Kind::Struct(&OFFSET_DELETE_REQUEST_PARTITION)), ALL),
    ],
);

pub(crate) const OFFSET_DELETE_REQUEST_PARTITION: StructSchema =
    StructSchema::new("OffsetDeleteRequestPartition", &[field("partition_index", Kind::Int32, ALL)]);
