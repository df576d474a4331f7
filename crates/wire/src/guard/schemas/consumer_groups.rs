//! Requests of the consumer-group protocol of KIP-848: ConsumerGroupHeartbeat,
//! ConsumerGroupDescribe. Both are flexible at every version.

use crate::guard::schema::{between, field, since, ApiSchema, Kind, StructSchema, ALL};

// ---------------------------------------------------------------------------------------------
// ConsumerGroupHeartbeat (key 68): versions 0-1, flexible. Most fields are null when unchanged
// since the last heartbeat, arrays included.

pub(crate) static CONSUMER_GROUP_HEARTBEAT: ApiSchema =
    ApiSchema { key: 68, versions: between(0, 1), flexible_since: 0, body: &CONSUMER_GROUP_HEARTBEAT_REQUEST };

pub(crate) const CONSUMER_GROUP_HEARTBEAT_REQUEST: StructSchema = StructSchema::new(
    "ConsumerGroupHeartbeatRequest",
    &[
        field("group_id", Kind::String, ALL),
        field("member_id", Kind::String, ALL),
        field("member_epoch", Kind::Int32, ALL),
        field("instance_id", Kind::NullableString, ALL),
        field("rack_id", Kind::NullableString, ALL),
        field("rebalance_timeout_ms", Kind::Int32, ALL),
        field("subscribed_topic_names", Kind::NullableArray(&Kind::String), ALL),
        field("subscribed_topic_regex", Kind::NullableString, since(1)),
        field("server_assignor", Kind::NullableString, ALL),
        field("topic_partitions", Kind::NullableArray(&Kind::Struct(&TOPIC_PARTITIONS)), ALL),
    ],
);

pub(crate) const TOPIC_PARTITIONS: StructSchema = StructSchema::new(
    "TopicPartitions",
    &[field("topic_id", Kind::Uuid, ALL), field("partitions", Kind::Array(&Kind::Int32), ALL)],
);

// ---------------------------------------------------------------------------------------------
// ConsumerGroupDescribe (key 69): versions 0-1, flexible.

pub(crate) static CONSUMER_GROUP_DESCRIBE: ApiSchema =
    ApiSchema { key: 69, versions: between(0, 1), flexible_since: 0, body: &CONSUMER_GROUP_DESCRIBE_REQUEST };

pub(crate) const CONSUMER_GROUP_DESCRIBE_REQUEST: StructSchema = StructSchema::new(
    "ConsumerGroupDescribeRequest",
    &[field("group_ids", Kind::Array(&Kind::String), ALL), field("include_authorized_operations", Kind::Bool, ALL)],
);
