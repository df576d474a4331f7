//! Plain request and response types of the consumer group protocol, mirroring
//! ConsumerGroupHeartbeat and ConsumerGroupDescribe without wire concerns.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// Partitions by topic id, as the protocol carries them.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// The member epoch that asks to join (or rejoin after being fenced).
pub const JOIN_MEMBER_EPOCH: i32 = 0;
/// The member epoch of a member leaving the group.
pub const LEAVE_MEMBER_EPOCH: i32 = -1;
/// The member epoch of a static member leaving temporarily (it keeps its
/// assignment until its session expires or it comes back).
pub const LEAVE_STATIC_MEMBER_EPOCH: i32 = -2;

/// What the coordinator needs to know about topics: their ids and partition
/// counts, read at the call (the broker's topic registry implements it).
pub trait TopicLookup {
    /// (topic id, partition count) of an existing topic.
    fn topic(&self, name: &str) -> Option<(Uuid, i32)>;
    /// The name of an existing topic.
    fn topic_name(&self, id: Uuid) -> Option<String>;
    /// Every topic's name (for regular-expression subscriptions).
    fn topic_names(&self) -> Vec<String>;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatRequest {
    /// v1+ requires the client to choose its member id (KIP-1082).
    pub api_version: i16,
    pub group_id: String,
    /// Empty when a v0 member joins: the coordinator makes one.
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// `None`: unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// `None`: unchanged.
    pub subscribed_topic_regex: Option<String>,
    /// `None`: unchanged (or the group's default).
    pub server_assignor: Option<String>,
    /// The partitions the member owns; `None`: unchanged.
    pub owned_partitions: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHeartbeatResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent when it changed, or when the request was a full one.
    pub assignment: Option<Assignment>,
}

impl ConsumerHeartbeatResponse {
    pub fn error(error_code: i16, message: impl Into<String>) -> ConsumerHeartbeatResponse {
        ConsumerHeartbeatResponse {
            error_code,
            error_message: Some(message.into()),
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

/// A topic's partitions with its name, as ConsumerGroupDescribe shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPartitions {
    pub topic_id: Uuid,
    pub topic_name: String,
    pub partitions: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub assignment: Vec<NamedPartitions>,
    pub target_assignment: Vec<NamedPartitions>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedConsumerGroup {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub group_id: String,
    pub group_state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<DescribedConsumerMember>,
}
