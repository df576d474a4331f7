//! Plain request and response types of the Streams group protocol (KIP-1071),
//! mirroring StreamsGroupHeartbeat and StreamsGroupDescribe without wire
//! concerns.

use std::collections::{BTreeMap, BTreeSet};

/// Task ids by subtopology: one task per partition of the subtopology's
/// source topics.
pub type Tasks = BTreeMap<String, BTreeSet<i32>>;

/// A member's tasks in each role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TasksTuple {
    pub active: Tasks,
    pub standby: Tasks,
    pub warmup: Tasks,
}

impl TasksTuple {
    pub fn is_empty(&self) -> bool {
        [&self.active, &self.standby, &self.warmup].iter().all(|t| t.values().all(BTreeSet::is_empty))
    }
}

/// StreamsGroupHeartbeat status codes (the response's `Status` list).
pub mod status {
    pub const STALE_TOPOLOGY: i8 = 0;
    pub const MISSING_SOURCE_TOPICS: i8 = 1;
    pub const INCORRECTLY_PARTITIONED_TOPICS: i8 = 2;
    pub const MISSING_INTERNAL_TOPICS: i8 = 3;
    pub const SHUTDOWN_APPLICATION: i8 = 4;
}

/// An internal topic as the topology declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsTopicInfo {
    pub name: String,
    /// 0: derived by the coordinator.
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

/// A subtopology as the member declares it; copartition groups are resolved
/// to topic names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsSubtopology {
    pub subtopology_id: String,
    pub source_topics: Vec<String>,
    pub repartition_sink_topics: Vec<String>,
    pub state_changelog_topics: Vec<StreamsTopicInfo>,
    pub repartition_source_topics: Vec<StreamsTopicInfo>,
    pub copartition_groups: Vec<BTreeSet<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsTopology {
    pub epoch: i32,
    pub subtopologies: Vec<StreamsSubtopology>,
}

impl StreamsTopology {
    /// Whether a subtopology reads `topic` (a user or repartition source).
    pub fn reads(&self, topic: &str) -> bool {
        self.subtopologies.iter().any(|s| {
            s.source_topics.iter().any(|t| t == topic) || s.repartition_source_topics.iter().any(|t| t.name == topic)
        })
    }
}

/// A member's endpoint for interactive queries.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StreamsEndpoint {
    pub host: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsHeartbeatRequest {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub endpoint_information_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// Only when joining. `Err` carries a topology the request could not
    /// express (a copartition index out of range): STREAMS_INVALID_TOPOLOGY.
    pub topology: Option<Result<StreamsTopology, String>>,
    /// The tasks the member owns; `None`: unchanged. The three are null or
    /// non-null together (checked by validation).
    pub active_tasks: Option<Tasks>,
    pub standby_tasks: Option<Tasks>,
    pub warmup_tasks: Option<Tasks>,
    pub process_id: Option<String>,
    pub user_endpoint: Option<StreamsEndpoint>,
    pub client_tags: Option<BTreeMap<String, String>>,
    pub shutdown_application: bool,
    /// Any subtopology with a source topic regex (not served by Kafka either).
    pub uses_source_regex: bool,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsStatus {
    pub code: i8,
    pub detail: String,
}

/// An internal topic the coordinator wants created (Kafka's group coordinator
/// creates missing repartition and changelog topics itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalTopic {
    pub name: String,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
}

/// What one member serves, for interactive queries: topic → partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPartitions {
    pub endpoint: StreamsEndpoint,
    pub active: BTreeMap<String, Vec<i32>>,
    pub standby: BTreeMap<String, Vec<i32>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsHeartbeatResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub status: Vec<StreamsStatus>,
    /// Sent when changed, when joining, or on a full request.
    pub tasks: Option<TasksTuple>,
    pub endpoint_information_epoch: i32,
    pub partitions_by_user_endpoint: Option<Vec<EndpointPartitions>>,
    /// Internal topics to create before answering.
    pub topics_to_create: Vec<InternalTopic>,
}

impl StreamsHeartbeatResponse {
    pub fn error(error_code: i16, message: impl Into<String>) -> StreamsHeartbeatResponse {
        StreamsHeartbeatResponse {
            error_code,
            error_message: Some(message.into()),
            member_id: String::new(),
            member_epoch: 0,
            heartbeat_interval_ms: 0,
            status: Vec::new(),
            tasks: None,
            endpoint_information_epoch: 0,
            partitions_by_user_endpoint: None,
            topics_to_create: Vec::new(),
        }
    }
}

/// A subtopology as StreamsGroupDescribe shows it (internal topics with the
/// partition counts the coordinator decided).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedSubtopology {
    pub subtopology_id: String,
    pub source_topics: Vec<String>,
    pub repartition_sink_topics: Vec<String>,
    pub state_changelog_topics: Vec<StreamsTopicInfo>,
    pub repartition_source_topics: Vec<StreamsTopicInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedStreamsMember {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub topology_epoch: i32,
    pub process_id: String,
    pub user_endpoint: Option<StreamsEndpoint>,
    pub client_tags: BTreeMap<String, String>,
    pub assignment: TasksTuple,
    pub target_assignment: TasksTuple,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedStreamsGroup {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub group_id: String,
    pub group_state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    /// (epoch, configured subtopologies: `None` while not configured).
    pub topology: Option<(i32, Option<Vec<DescribedSubtopology>>)>,
    pub members: Vec<DescribedStreamsMember>,
}
