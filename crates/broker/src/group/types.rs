//! Plain request, response and effect types of the coordinator. They mirror
//! the Kafka messages field by field but carry no wire concerns: the dispatch
//! adapter translates versions (e.g. LeaveGroup v0–2's single member, the
//! top-level error of OffsetFetch v0–7) and fills `client_id`/`client_host`.

use bytes::Bytes;
use kafgres_wire::error_code;

/// Identifies a parked JoinGroup or SyncGroup until its answer is ready.
pub type Ticket = u64;

/// The answer to a request that may have to wait for other members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<T> {
    /// Send this now.
    Now(T),
    /// Hold the request; an `Effect::CompleteJoin`/`CompleteSync` with this
    /// ticket will carry the answer.
    Parked(Ticket),
}

/// Something the broker must do after a call, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Answer a parked JoinGroup.
    CompleteJoin { ticket: Ticket, response: JoinGroupResponse },
    /// Answer a parked SyncGroup.
    CompleteSync { ticket: Ticket, response: SyncGroupResponse },
    /// Upsert these committed offsets (key: group, topic, partition). The
    /// OffsetCommit response returned by the same call is sent once durable.
    PersistOffsets { group_id: String, offsets: Vec<CommittedOffset> },
    /// Delete these committed offsets (OffsetDelete).
    DeleteOffsets { group_id: String, partitions: Vec<TopicPartition> },
    /// Delete every committed offset of the group (DeleteGroups).
    DeleteGroup { group_id: String },
    /// The earliest deadline is now `at_ms`, earlier than before the call:
    /// wake the timer task (then call `on_deadline` at or after `at_ms`).
    ScheduleDeadline { at_ms: i64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
    /// Consumer protocol: the group epoch is ahead of the target assignment.
    Assigning,
    /// Consumer protocol: some member has not reached its target yet.
    Reconciling,
    /// Streams protocol: the topology is not configured yet (missing or
    /// misconfigured topics).
    NotReady,
}

impl GroupState {
    /// The name Kafka puts in ListGroups and DescribeGroups.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
            GroupState::Assigning => "Assigning",
            GroupState::Reconciling => "Reconciling",
            GroupState::NotReady => "NotReady",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

/// One of a member's protocols (for consumers: an assignor and its subscription).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupRequest {
    /// The JoinGroup version: v4+ requires a known member id (KIP-394), v9+
    /// lets a rejoining static leader skip the assignment.
    pub api_version: i16,
    pub group_id: String,
    /// Empty for a member that has none yet.
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: String,
    /// In the member's order of preference.
    pub protocols: Vec<Protocol>,
    pub session_timeout_ms: i32,
    /// v0 has none: the adapter passes the session timeout, as Kafka does.
    pub rebalance_timeout_ms: i32,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGroupResponse {
    pub error_code: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    pub member_id: String,
    /// Filled for the leader only.
    pub members: Vec<JoinGroupMember>,
}

impl JoinGroupResponse {
    pub fn error(member_id: &str, error_code: i16) -> JoinGroupResponse {
        JoinGroupResponse {
            error_code,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v5+; `None` skips the check.
    pub protocol_type: Option<String>,
    /// v5+; `None` skips the check.
    pub protocol_name: Option<String>,
    /// The leader's assignment, by member id; empty for followers.
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncGroupResponse {
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncGroupResponse {
    pub fn error(error_code: i16) -> SyncGroupResponse {
        SyncGroupResponse { error_code, protocol_type: None, protocol_name: None, assignment: Bytes::new() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupRequest {
    pub group_id: String,
    /// v0–2: the adapter passes the single `member_id` here.
    pub members: Vec<LeavingMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeavingMember {
    /// Empty to remove a static member by `group_instance_id` (admin removal).
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveGroupResponse {
    /// Group-level error; v0–2 report the single member's error here instead.
    pub error_code: i16,
    pub members: Vec<LeftMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub error_code: i16,
}

/// A committed offset as stored (one row per group, topic and partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// -1 when the client sent none.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitRequest {
    /// v9+ answers GROUP_ID_NOT_FOUND for an unknown group with a generation.
    pub api_version: i16,
    pub group_id: String,
    /// -1 for a simple (non-member) commit.
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: Vec<OffsetCommitTopic>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitTopic {
    pub name: String,
    pub partitions: Vec<OffsetCommitPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitPartition {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// Per topic, per partition error codes, in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitResponse {
    pub topics: Vec<(String, Vec<(i32, i16)>)>,
}

impl OffsetCommitResponse {
    /// The same error for every partition of `request` (e.g. when the
    /// Postgres write failed).
    pub fn all(request: &OffsetCommitRequest, error_code: i16) -> OffsetCommitResponse {
        OffsetCommitResponse {
            topics: request
                .topics
                .iter()
                .map(|t| (t.name.clone(), t.partitions.iter().map(|p| (p.partition, error_code)).collect()))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchRequest {
    pub group_id: String,
    /// `None`: every committed offset of the group.
    pub topics: Option<Vec<(String, Vec<i32>)>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetFetchResponse {
    pub group_id: String,
    pub error_code: i16,
    pub topics: Vec<(String, Vec<FetchedOffset>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    pub partition: i32,
    /// -1 when nothing is committed.
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub error_code: i16,
}

impl FetchedOffset {
    pub(super) fn none(partition: i32) -> FetchedOffset {
        FetchedOffset { partition, offset: -1, leader_epoch: -1, metadata: String::new(), error_code: error_code::NONE }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetDeleteRequest {
    pub group_id: String,
    pub topics: Vec<(String, Vec<i32>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetDeleteResponse {
    pub error_code: i16,
    pub topics: Vec<(String, Vec<(i32, i16)>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    /// "" for groups created by simple offset commits.
    pub protocol_type: String,
    pub state: GroupState,
    /// Always "classic" here.
    pub group_type: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    pub error_code: i16,
    /// Kafka's message with GROUP_ID_NOT_FOUND (v6+).
    pub error_message: Option<String>,
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    /// The selected protocol while Stable, else "".
    pub protocol_data: String,
    pub members: Vec<DescribedMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Metadata and assignment are filled only while the group is Stable.
    pub metadata: Bytes,
    pub assignment: Bytes,
}
