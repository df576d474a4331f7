//! Transaction requests: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers, and the
//! admin ones DescribeProducers, ListTransactions, DescribeTransactions. (InitProducerId is in
//! `admin.rs`.)

use crate::guard::schema::{between, field, since, until, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// AddPartitionsToTxn (key 24): versions 0-5, flexible from 3. v4 batched transactions (a broker-
// to-broker form); the v0-3 fields stay, renamed `v3_and_below_*`.

pub(crate) static ADD_PARTITIONS_TO_TXN: ApiSchema =
    ApiSchema { key: 24, versions: between(0, 5), flexible_since: 3, body: &ADD_PARTITIONS_TO_TXN_REQUEST };

pub(crate) const ADD_PARTITIONS_TO_TXN_REQUEST: StructSchema = StructSchema::new(
    "AddPartitionsToTxnRequest",
    &[
        field("transactions", Kind::Array(&Kind::Struct(&ADD_PARTITIONS_TO_TXN_TRANSACTION)), since(4)),
        field("v3_and_below_transactional_id", Kind::String, until(3)),
        field("v3_and_below_producer_id", Kind::Int64, until(3)),
        field("v3_and_below_producer_epoch", Kind::Int16, until(3)),
        field("v3_and_below_topics", Kind::Array(&Kind::Struct(&ADD_PARTITIONS_TO_TXN_TOPIC)), until(3)),
    ],
);

pub(crate) const ADD_PARTITIONS_TO_TXN_TRANSACTION: StructSchema = StructSchema::new(
    "AddPartitionsToTxnTransaction",
    &[
        field("transactional_id", Kind::String, since(4)),
        field("producer_id", Kind::Int64, since(4)),
        field("producer_epoch", Kind::Int16, since(4)),
        field("verify_only", Kind::Bool, since(4)),
        field("topics", Kind::Array(&Kind::Struct(&ADD_PARTITIONS_TO_TXN_TOPIC)), since(4)),
    ],
);

pub(crate) const ADD_PARTITIONS_TO_TXN_TOPIC: StructSchema = StructSchema::new(
    "AddPartitionsToTxnTopic",
    &[field("name", Kind::String, ALL), field("partitions", Kind::Array(&Kind::Int32), ALL)],
);

// ---------------------------------------------------------------------------------------------
// AddOffsetsToTxn (key 25): versions 0-4, flexible from 3. No arrays.

pub(crate) static ADD_OFFSETS_TO_TXN: ApiSchema =
    ApiSchema { key: 25, versions: between(0, 4), flexible_since: 3, body: &ADD_OFFSETS_TO_TXN_REQUEST };

pub(crate) const ADD_OFFSETS_TO_TXN_REQUEST: StructSchema = StructSchema::new(
    "AddOffsetsToTxnRequest",
    &[
        field("transactional_id", Kind::String, ALL),
        field("producer_id", Kind::Int64, ALL),
        field("producer_epoch", Kind::Int16, ALL),
        field("group_id", Kind::String, ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// EndTxn (key 26): versions 0-5, flexible from 3. No arrays.

pub(crate) static END_TXN: ApiSchema =
    ApiSchema { key: 26, versions: between(0, 5), flexible_since: 3, body: &END_TXN_REQUEST };

pub(crate) const END_TXN_REQUEST: StructSchema = StructSchema::new(
    "EndTxnRequest",
    &[
        field("transactional_id", Kind::String, ALL),
        field("producer_id", Kind::Int64, ALL),
        field("producer_epoch", Kind::Int16, ALL),
        field("committed", Kind::Bool, ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// TxnOffsetCommit (key 28): versions 0-6, flexible from 3; v6 (Kafka 4.4, KIP-1319) names topics by id.

pub(crate) static TXN_OFFSET_COMMIT: ApiSchema =
    ApiSchema { key: 28, versions: between(0, 6), flexible_since: 3, body: &TXN_OFFSET_COMMIT_REQUEST };

pub(crate) const TXN_OFFSET_COMMIT_REQUEST: StructSchema = StructSchema::new(
    "TxnOffsetCommitRequest",
    &[
        field("transactional_id", Kind::String, ALL),
        field("group_id", Kind::String, ALL),
        field("producer_id", Kind::Int64, ALL),
        field("producer_epoch", Kind::Int16, ALL),
        field("generation_id_or_member_epoch", Kind::Int32, since(3)),
        field("member_id", Kind::String, since(3)),
        field("group_instance_id", Kind::NullableString, since(3)),
        field("topics", Kind::Array(&Kind::Struct(&TXN_OFFSET_COMMIT_REQUEST_TOPIC)), ALL),
    ],
);

pub(crate) const TXN_OFFSET_COMMIT_REQUEST_TOPIC: StructSchema = StructSchema::new(
    "TxnOffsetCommitRequestTopic",
    &[
        field("name", Kind::String, until(5)),
        field("topic_id", Kind::Uuid, since(6)),
        field("partitions", Kind::Array(&Kind::Struct(&TXN_OFFSET_COMMIT_REQUEST_PARTITION)), ALL),
    ],
);

pub(crate) const TXN_OFFSET_COMMIT_REQUEST_PARTITION: StructSchema = StructSchema::new(
    "TxnOffsetCommitRequestPartition",
    &[
        field("partition_index", Kind::Int32, ALL),
        field("committed_offset", Kind::Int64, ALL),
        field("committed_leader_epoch", Kind::Int32, since(2)),
        field("committed_metadata", Kind::NullableString, ALL),
    ],
);

// ---------------------------------------------------------------------------------------------
// WriteTxnMarkers (key 27): versions 1-2, flexible (Kafka 4 removed v0); v2 (Kafka 4.4,
// `crate::messages`) adds each marker's transaction version.

pub(crate) static WRITE_TXN_MARKERS: ApiSchema =
    ApiSchema { key: 27, versions: between(1, 2), flexible_since: 1, body: &WRITE_TXN_MARKERS_REQUEST };

pub(crate) const WRITE_TXN_MARKERS_REQUEST: StructSchema = StructSchema::new(
    "WriteTxnMarkersRequest",
    &[field("markers", Kind::Array(&Kind::Struct(&WRITABLE_TXN_MARKER)), ALL)],
);

pub(crate) const WRITABLE_TXN_MARKER: StructSchema = StructSchema::new(
    "WritableTxnMarker",
    &[
        field("producer_id", Kind::Int64, ALL),
        field("producer_epoch", Kind::Int16, ALL),
        field("transaction_result", Kind::Bool, ALL),
        field("topics", Kind::Array(&Kind::Struct(&WRITABLE_TXN_MARKER_TOPIC)), ALL),
        field("coordinator_epoch", Kind::Int32, ALL),
        field("transaction_version", Kind::Int8, since(2)),
    ],
);

pub(crate) const WRITABLE_TXN_MARKER_TOPIC: StructSchema = StructSchema::new(
    "WritableTxnMarkerTopic",
    &[field("name", Kind::String, ALL), field("partition_indexes", Kind::Array(&Kind::Int32), ALL)],
);

// ---------------------------------------------------------------------------------------------
// DescribeProducers (key 61): version 0, flexible.

pub(crate) static DESCRIBE_PRODUCERS: ApiSchema =
    ApiSchema { key: 61, versions: between(0, 0), flexible_since: 0, body: &DESCRIBE_PRODUCERS_REQUEST };

pub(crate) const DESCRIBE_PRODUCERS_REQUEST: StructSchema = StructSchema::new(
    "DescribeProducersRequest",
    &[field("topics", Kind::Array(&Kind::Struct(&DESCRIBE_PRODUCERS_TOPIC_REQUEST)), ALL)],
);

pub(crate) const DESCRIBE_PRODUCERS_TOPIC_REQUEST: StructSchema = StructSchema::new(
    "TopicRequest",
    &[field("name", Kind::String, ALL), field("partition_indexes", Kind::Array(&Kind::Int32), ALL)],
);

// ---------------------------------------------------------------------------------------------
// ListTransactions (key 66): versions 0-2, flexible.

pub(crate) static LIST_TRANSACTIONS: ApiSchema =
    ApiSchema { key: 66, versions: between(0, 2), flexible_since: 0, body: &LIST_TRANSACTIONS_REQUEST };

pub(crate) const LIST_TRANSACTIONS_REQUEST: StructSchema = StructSchema::new(
    "ListTransactionsRequest",
    &[
        field("state_filters", Kind::Array(&Kind::String), ALL),
        field("producer_id_filters", Kind::Array(&Kind::Int64), ALL),
        field("duration_filter", Kind::Int64, since(1)),
        field("transactional_id_pattern", Kind::NullableString, since(2)),
    ],
);

// ---------------------------------------------------------------------------------------------
// DescribeTransactions (key 65): version 0, flexible.

pub(crate) static DESCRIBE_TRANSACTIONS: ApiSchema =
    ApiSchema { key: 65, versions: between(0, 0), flexible_since: 0, body: &DESCRIBE_TRANSACTIONS_REQUEST };

pub(crate) const DESCRIBE_TRANSACTIONS_REQUEST: StructSchema =
    StructSchema::new("DescribeTransactionsRequest", &[field("transactional_ids", Kind::Array(&Kind::String), ALL)]);
