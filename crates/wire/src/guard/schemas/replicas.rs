//! Replica placement requests, which a single node answers without moving anything:
//! ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments, AlterReplicaLogDirs.

use crate::guard::schema::{between, field, since, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// AlterReplicaLogDirs (key 34): versions 1-2, flexible from 2 (KIP-896 removed v0).

pub(crate) static ALTER_REPLICA_LOG_DIRS: ApiSchema =
    ApiSchema { key: 34, versions: between(1, 2), flexible_since: 2, body: &ALTER_REPLICA_LOG_DIRS_REQUEST };

pub(crate) const ALTER_REPLICA_LOG_DIRS_REQUEST: StructSchema = StructSchema::new(
    "AlterReplicaLogDirsRequest",
    &[field("dirs", Kind::Array(&Kind::Struct(&ALTER_REPLICA_LOG_DIR)), ALL)],
);

pub(crate) const ALTER_REPLICA_LOG_DIR: StructSchema = StructSchema::new(
    "AlterReplicaLogDir",
    &[field("path", Kind::String, ALL), field("topics", Kind::Array(&Kind::Struct(&ALTER_REPLICA_LOG_DIR_TOPIC)), ALL)],
);

pub(crate) const ALTER_REPLICA_LOG_DIR_TOPIC: StructSchema = StructSchema::new(
    "AlterReplicaLogDirTopic",
    &[field("name", Kind::String, ALL), field("partitions", Kind::Array(&Kind::Int32), ALL)],
);

// ---------------------------------------------------------------------------------------------
// ElectLeaders (key 43): versions 0-2, flexible from 2. `topic_partitions` null means "all".

pub(crate) static ELECT_LEADERS: ApiSchema =
    ApiSchema { key: 43, versions: between(0, 2), flexible_since: 2, body: &ELECT_LEADERS_REQUEST };

pub(crate) const ELECT_LEADERS_REQUEST: StructSchema = StructSchema::new(
    "ElectLeadersRequest",
    &[
        field("election_type", Kind::Int8, since(1)),
        field("topic_partitions", Kind::NullableArray(&Kind::Struct(&ELECT_LEADERS_TOPIC_PARTITIONS)), ALL),
        field("timeout_ms", Kind::Int32, ALL),
    ],
);

pub(crate) const ELECT_LEADERS_TOPIC_PARTITIONS: StructSchema = StructSchema::new(
    "TopicPartitions",
    &[field("topic", Kind::String, ALL), field("partitions", Kind::Array(&Kind::Int32), ALL)],
);

// ---------------------------------------------------------------------------------------------
// AlterPartitionReassignments (key 45): versions 0-1, flexible at all of them. `replicas` null
// cancels a reassignment.

pub(crate) static ALTER_PARTITION_REASSIGNMENTS: ApiSchema =
    ApiSchema { key: 45, versions: between(0, 1), flexible_since: 0, body: &ALTER_PARTITION_REASSIGNMENTS_REQUEST };

pub(crate) const ALTER_PARTITION_REASSIGNMENTS_REQUEST: StructSchema = StructSchema::new(
    "AlterPartitionReassignmentsRequest",
    &[
        field("timeout_ms", Kind::Int32, ALL),
        field("allow_replication_factor_change", Kind::Bool, since(1)),
        field("topics", Kind::Array(&Kind::Struct(&REASSIGNABLE_TOPIC)), ALL),
    ],
);

pub(crate) const REASSIGNABLE_TOPIC: StructSchema = StructSchema::new(
    "ReassignableTopic",
    &[field("name", Kind::String, ALL), field("partitions", Kind::Array(&Kind::Struct(&REASSIGNABLE_PARTITION)), ALL)],
);

pub(crate) const REASSIGNABLE_PARTITION: StructSchema = StructSchema::new(
    "ReassignablePartition",
    &[field("partition_index", Kind::Int32, ALL), field("replicas", Kind::NullableArray(&Kind::Int32), ALL)],
);

// ---------------------------------------------------------------------------------------------
// ListPartitionReassignments (key 46): version 0, flexible. `topics` null means "all".

pub(crate) static LIST_PARTITION_REASSIGNMENTS: ApiSchema =
    ApiSchema { key: 46, versions: between(0, 0), flexible_since: 0, body: &LIST_PARTITION_REASSIGNMENTS_REQUEST };

pub(crate) const LIST_PARTITION_REASSIGNMENTS_REQUEST: StructSchema = StructSchema::new(
    "ListPartitionReassignmentsRequest",
    &[
        field("timeout_ms", Kind::Int32, ALL),
        field("topics", Kind::NullableArray(&Kind::Struct(&LIST_PARTITION_REASSIGNMENTS_TOPICS)), ALL),
    ],
);

pub(crate) const LIST_PARTITION_REASSIGNMENTS_TOPICS: StructSchema = StructSchema::new(
    "ListPartitionReassignmentsTopics",
    &[field("name", Kind::String, ALL), field("partition_indexes", Kind::Array(&Kind::Int32), ALL)],
);
