//! Requests about the partitions of topics: CreatePartitions, DeleteRecords, OffsetForLeaderEpoch,
//! DescribeTopicPartitions.

use crate::guard::schema::{between, field, since, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// CreatePartitions (key 37): versions 0-3, flexible from 2. `assignments` is nullable.

pub(crate) static CREATE_PARTITIONS: ApiSchema =
    ApiSchema { key: 37, versions: between(0, 3), flexible_since: 2, body: &CREATE_PARTITIONS_REQUEST };

pub(crate) const CREATE_PARTITIONS_REQUEST: StructSchema = StructSchema::new(
    "CreatePartitionsRequest",
    &[
        field("topics", Kind::Array(&Kind::Struct(&CREATE_PARTITIONS_TOPIC)), ALL),
        field("timeout_ms", Kind::Int32, ALL),
        field("validate_only", Kind::Bool, ALL),
    ],
);

pub(crate) const CREATE_PARTITIONS_TOPIC: StructSchema = StructSchema::new(
    "CreatePartitionsTopic",
    &[
        field("name", Kind::String, ALL),
        field("count", Kind::Int32, ALL),
        field("assignments", Kind::NullableArray(&Kind::Struct(&CREATE_PARTITIONS_ASSIGNMENT)), ALL),
    ],
);

pub(crate) const CREATE_PARTITIONS_ASSIGNMENT: StructSchema =
    StructSchema::new("CreatePartitionsAssignment", &[field("broker_ids", Kind::Array(&Kind::Int32), ALL)]);

// ---------------------------------------------------------------------------------------------
// DeleteRecords (key 21): versions 0-2, flexible from 2.

pub(crate) static DELETE_RECORDS: ApiSchema =
    ApiSchema { key: 21, versions: between(0, 2), flexible_since: 2, body: &DELETE_RECORDS_REQUEST };

pub(crate) const DELETE_RECORDS_REQUEST: StructSchema = StructSchema::new(
    "DeleteRecordsRequest",
    &[field("topics", Kind::Array(&Kind::Struct(&DELETE_RECORDS_TOPIC)), ALL), field("timeout_ms", Kind::Int32, ALL)],
);

pub(crate) const DELETE_RECORDS_TOPIC: StructSchema = StructSchema::new(
    "DeleteRecordsTopic",
    &[
        field("name", Kind::String, ALL),
        field("partitions", Kind::Array(&Kind::Struct(&DELETE_RECORDS_PARTITION)), ALL),
    ],
);

pub(crate) const DELETE_RECORDS_PARTITION: StructSchema = StructSchema::new(
    "DeleteRecordsPartition",
    &[field("partition_index", Kind::Int32, ALL), field("offset", Kind::Int64, ALL)],
);

// ---------------------------------------------------------------------------------------------
// OffsetForLeaderEpoch (key 23): versions 2-4, flexible from 4. (v0-1 are not in kafka-protocol
// 0.18.0's decoder.)

pub(crate) static OFFSET_FOR_LEADER_EPOCH: ApiSchema =
    ApiSchema { key: 23, versions: between(2, 4), flexible_since: 4, body: &OFFSET_FOR_LEADER_EPOCH_REQUEST };

pub(crate) const OFFSET_FOR_LEADER_EPOCH_REQUEST: StructSchema = StructSchema::new(
    "OffsetForLeaderEpochRequest",
    &[
        field("replica_id", Kind::Int32, since(3)),
        field("topics", Kind::Array(&Kind::Struct(&OFFSET_FOR_LEADER_TOPIC)), ALL),
    ],
);

pub(crate) const OFFSET_FOR_LEADER_TOPIC: StructSchema = StructSchema::new(
    "OffsetForLeaderTopic",
    &[
        field("topic", Kind::String, ALL),
        field("partitions", Kind::Array(&Kind::Struct(&OFFSET_FOR_LEADER_PARTITION)), ALL),
    ],
);

pub(crate) const OFFSET_FOR_LEADER_PARTITION: StructSchema = StructSchema::new(
    "OffsetForLeaderPartition",
    &[
        field("partition", Kind::Int32, ALL),
        field("current_leader_epoch", Kind::Int32, ALL),
        field("leader_epoch", Kind::Int32, ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// DescribeTopicPartitions (key 75): version 0, flexible. The only covered request with a nullable
// struct (`cursor`, behind a presence byte).

pub(crate) static DESCRIBE_TOPIC_PARTITIONS: ApiSchema =
    ApiSchema { key: 75, versions: between(0, 0), flexible_since: 0, body: &DESCRIBE_TOPIC_PARTITIONS_REQUEST };

pub(crate) const DESCRIBE_TOPIC_PARTITIONS_REQUEST: StructSchema = StructSchema::new(
    "DescribeTopicPartitionsRequest",
    &[
        field("topics", Kind::Array(&Kind::Struct(&DESCRIBE_TOPIC_PARTITIONS_TOPIC_REQUEST)), ALL),
        field("response_partition_limit", Kind::Int32, ALL),
        field("cursor", Kind::NullableStruct(&CURSOR), ALL),
    ],
);

pub(crate) const DESCRIBE_TOPIC_PARTITIONS_TOPIC_REQUEST: StructSchema =
    StructSchema::new("TopicRequest", &[field("name", Kind::String, ALL)]);

pub(crate) const CURSOR: StructSchema =
    StructSchema::new("Cursor", &[field("topic_name", Kind::String, ALL), field("partition_index", Kind::Int32, ALL)]);
