//! The data-plane requests: Produce, Fetch, ListOffsets, Metadata.

use crate::guard::schema::{between, field, since, tagged, until, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// Produce (key 0): versions 3-13, flexible from 9. v13 names topics by id (KIP-516).

pub(crate) static PRODUCE: ApiSchema =
    ApiSchema { key: 0, versions: between(3, 13), flexible_since: 9, body: &PRODUCE_REQUEST };

pub(crate) const PRODUCE_REQUEST: StructSchema = StructSchema::new(
    "ProduceRequest",
    &[
        field("transactional_id", Kind::NullableString, ALL),
        field("acks", Kind::Int16, ALL),
        field("timeout_ms", Kind::Int32, ALL),
        field("topic_data", Kind::Array(&Kind::Struct(&TOPIC_PRODUCE_DATA)), ALL),
    ],
);

pub(crate) const TOPIC_PRODUCE_DATA: StructSchema = StructSchema::new(
    "TopicProduceData",
    &[
        field("name", Kind::String, until(12)),
        field("topic_id", Kind::Uuid, since(13)),
        field("partition_data", Kind::Array(&Kind::Struct(&PARTITION_PRODUCE_DATA)), ALL),
    ],
);

pub(crate) const PARTITION_PRODUCE_DATA: StructSchema = StructSchema::new(
    "PartitionProduceData",
    &[field("index", Kind::Int32, ALL), field("records", Kind::Records, ALL)],
);

// ---------------------------------------------------------------------------------------------
// Fetch (key 1): versions 4-18, flexible from 12. The only covered API with known tagged fields:
// ClusterId (tag 0, v12+) and ReplicaState (tag 1, v15+, a struct) on the request, and
// ReplicaDirectoryId (tag 0, v17+) and HighWatermark (tag 1, v18+) on each partition.

pub(crate) static FETCH: ApiSchema =
    ApiSchema { key: 1, versions: between(4, 18), flexible_since: 12, body: &FETCH_REQUEST };

pub(crate) const FETCH_REQUEST: StructSchema = StructSchema::new(
    "FetchRequest",
    &[
        tagged("cluster_id", 0, Kind::NullableString, since(12)),
        field("replica_id", Kind::Int32, until(14)),
        tagged("replica_state", 1, Kind::Struct(&REPLICA_STATE), since(15)),
        field("max_wait_ms", Kind::Int32, ALL),
        field("min_bytes", Kind::Int32, ALL),
        field("max_bytes", Kind::Int32, since(3)),
        field("isolation_level", Kind::Int8, since(4)),
        field("session_id", Kind::Int32, since(7)),
        field("session_epoch", Kind::Int32, since(7)),
        field("topics", Kind::Array(&Kind::Struct(&FETCH_TOPIC)), ALL),
        field("forgotten_topics_data", Kind::Array(&Kind::Struct(&FORGOTTEN_TOPIC)), since(7)),
        field("rack_id", Kind::String, since(11)),
    ],
);

pub(crate) const REPLICA_STATE: StructSchema = StructSchema::new(
    "ReplicaState",
    &[field("replica_id", Kind::Int32, since(15)), field("replica_epoch", Kind::Int64, since(15))],
);

pub(crate) const FETCH_TOPIC: StructSchema = StructSchema::new(
    "FetchTopic",
    &[
        field("topic", Kind::String, until(12)),
        field("topic_id", Kind::Uuid, since(13)),
        field("partitions", Kind::Array(&Kind::Struct(&FETCH_PARTITION)), ALL),
    ],
);

pub(crate) const FETCH_PARTITION: StructSchema = StructSchema::new(
    "FetchPartition",
    &[
        field("partition", Kind::Int32, ALL),
        field("current_leader_epoch", Kind::Int32, since(9)),
        field("fetch_offset", Kind::Int64, ALL),
        field("last_fetched_epoch", Kind::Int32, since(12)),
        field("log_start_offset", Kind::Int64, since(5)),
        field("partition_max_bytes", Kind::Int32, ALL),
        tagged("replica_directory_id", 0, Kind::Uuid, since(17)),
        tagged("high_watermark", 1, Kind::Int64, since(18)),
    ],
);

pub(crate) const FORGOTTEN_TOPIC: StructSchema = StructSchema::new(
    "ForgottenTopic",
    &[
        field("topic", Kind::String, between(7, 12)),
        field("topic_id", Kind::Uuid, since(13)),
        field("partitions", Kind::Array(&Kind::Int32), since(7)),
    ],
);

// ---------------------------------------------------------------------------------------------
// ListOffsets (key 2): versions 1-11 (v11, Kafka 4.4, is laid out as v10), flexible from 6.

pub(crate) static LIST_OFFSETS: ApiSchema =
    ApiSchema { key: 2, versions: between(1, 11), flexible_since: 6, body: &LIST_OFFSETS_REQUEST };

pub(crate) const LIST_OFFSETS_REQUEST: StructSchema = StructSchema::new(
    "ListOffsetsRequest",
    &[
        field("replica_id", Kind::Int32, ALL),
        field("isolation_level", Kind::Int8, since(2)),
        field("topics", Kind::Array(&Kind::Struct(&LIST_OFFSETS_TOPIC)), ALL),
        field("timeout_ms", Kind::Int32, since(10)),
    ],
);

pub(crate) const LIST_OFFSETS_TOPIC: StructSchema = StructSchema::new(
    "ListOffsetsTopic",
    &[field("name", Kind::String, ALL), field("partitions", Kind::Array(&Kind::Struct(&LIST_OFFSETS_PARTITION)), ALL)],
);

pub(crate) const LIST_OFFSETS_PARTITION: StructSchema = StructSchema::new(
    "ListOffsetsPartition",
    &[
        field("partition_index", Kind::Int32, ALL),
        field("current_leader_epoch", Kind::Int32, since(4)),
        field("timestamp", Kind::Int64, ALL),
        // MaxNumOffsets existed only in v0, which kafka-protocol 0.18.0 no longer decodes.
    ],
);

// ---------------------------------------------------------------------------------------------
// Metadata (key 3): versions 0-13, flexible from 9. `topics` null means "all topics" (v1+; the
// crate accepts null at v0 too).

pub(crate) static METADATA: ApiSchema =
    ApiSchema { key: 3, versions: between(0, 13), flexible_since: 9, body: &METADATA_REQUEST };

pub(crate) const METADATA_REQUEST: StructSchema = StructSchema::new(
    "MetadataRequest",
    &[
        field("topics", Kind::NullableArray(&Kind::Struct(&METADATA_REQUEST_TOPIC)), ALL),
        field("allow_auto_topic_creation", Kind::Bool, since(4)),
        field("include_cluster_authorized_operations", Kind::Bool, between(8, 10)),
        field("include_topic_authorized_operations", Kind::Bool, since(8)),
    ],
);

pub(crate) const METADATA_REQUEST_TOPIC: StructSchema = StructSchema::new(
    "MetadataRequestTopic",
    &[field("topic_id", Kind::Uuid, since(10)), field("name", Kind::NullableString, ALL)],
);
