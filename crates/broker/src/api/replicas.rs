//! The replica placement APIs, as a single-node Kafka answers them: every
//! partition has one replica, on this broker, in its one log directory, and
//! it is always the preferred leader. So there is never a leader to elect
//! (ElectLeaders: ELECTION_NOT_NEEDED), a reassignment to this broker is
//! complete the moment it is asked for and any other is invalid
//! (AlterPartitionReassignments), none is ever in progress
//! (ListPartitionReassignments), and the only directory a replica can move to
//! is the one it is in (AlterReplicaLogDirs). `kafka-leader-election.sh` and
//! `kafka-reassign-partitions.sh` (execute, verify, list, cancel) work
//! through these. Errors and messages are those of Kafka's KRaft controller
//! (`ReplicationControlManager`) and `ReplicaManager.alterReplicaLogDirs`.

use std::path::Path;

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse, ElectLeadersRequest, ElectLeadersResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
};

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::config::BrokerConfig;
use crate::topics::Topics;

/// ElectLeaders' `election_type`: 0 preferred, 1 unclean (v1+; v0 is preferred).
const ELECTION_TYPES: std::ops::RangeInclusive<i8> = 0..=1;

/// Kafka's `Errors.ELECTION_NOT_NEEDED.message()`, which the controller sends.
const ELECTION_NOT_NEEDED_MESSAGE: &str = "Leader election not needed for topic partition.";
const NO_REASSIGNMENT_MESSAGE: &str = "No partition reassignment is in progress.";

pub struct ElectLeaders;

impl Handler for ElectLeaders {
    const KEY: ApiKey = ApiKey::ElectLeaders;
    /// v0-v2: Kafka 4.1's range; v1 adds the election type and a top-level
    /// error, v2 is flexible.
    const VERSIONS: Versions = Versions::new(0, 2);
    type Request = ElectLeadersRequest;
    type Response = ElectLeadersResponse;
    type Services<'a> = &'a Topics;

    async fn handle(
        topics: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: ElectLeadersRequest,
    ) -> Answer<Self::Response> {
        let mut response = ElectLeadersResponse::default();
        let refused = if !cx.may_on_cluster(Operation::Alter) {
            Some((error_code::CLUSTER_AUTHORIZATION_FAILED, None))
        } else if !ELECTION_TYPES.contains(&req.election_type) {
            let message =
                format!("Unknown election type {}; 0 (preferred) and 1 (unclean) are defined", req.election_type);
            Some((error_code::INVALID_REQUEST, Some(message)))
        } else {
            None
        };
        if let Some((code, message)) = refused {
            // Kafka's `getErrorResponse`: the code on top and on every partition asked for.
            if cx.api_version >= 1 {
                response.error_code = code;
            }
            for topic in req.topic_partitions.unwrap_or_default() {
                let mut result = ReplicaElectionResult::default();
                result.topic = topic.topic;
                result.partition_result = topic
                    .partitions
                    .into_iter()
                    .map(|index| partition_result(index, code, message.as_deref()))
                    .collect();
                response.replica_election_results.push(result);
            }
            return response.into();
        }
        // Asked for every partition, the controller lists only those it
        // elected for or failed on: none here.
        for topic in req.topic_partitions.unwrap_or_default() {
            let found = topics.get(&topic.topic.0);
            let mut result = ReplicaElectionResult::default();
            result.partition_result = topic
                .partitions
                .into_iter()
                .map(|index| match &found {
                    None => partition_result(
                        index,
                        error_code::UNKNOWN_TOPIC_OR_PARTITION,
                        Some(&format!("No such topic as {}", topic.topic.0)),
                    ),
                    Some(t) if t.partition(index).is_none() => partition_result(
                        index,
                        error_code::UNKNOWN_TOPIC_OR_PARTITION,
                        Some(&format!("No such partition as {}-{index}", topic.topic.0)),
                    ),
                    Some(_) => {
                        partition_result(index, error_code::ELECTION_NOT_NEEDED, Some(ELECTION_NOT_NEEDED_MESSAGE))
                    }
                })
                .collect();
            result.topic = topic.topic;
            response.replica_election_results.push(result);
        }
        response.into()
    }
}

fn partition_result(partition_id: i32, error_code: i16, message: Option<&str>) -> PartitionResult {
    let mut result = PartitionResult::default();
    result.partition_id = partition_id;
    result.error_code = error_code;
    result.error_message = message.map(str_bytes);
    result
}

pub struct AlterPartitionReassignments;

impl Handler for AlterPartitionReassignments {
    const KEY: ApiKey = ApiKey::AlterPartitionReassignments;
    /// v0-v1: Kafka 4.1's range; v1 adds `allow_replication_factor_change`
    /// (KIP-860), which one broker can never act on (any other replica
    /// count names a broker that does not exist), echoed as Kafka does.
    const VERSIONS: Versions = Versions::new(0, 1);
    type Request = AlterPartitionReassignmentsRequest;
    type Response = AlterPartitionReassignmentsResponse;
    type Services<'a> = (&'a BrokerConfig, &'a Topics);

    async fn handle(
        (config, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: AlterPartitionReassignmentsRequest,
    ) -> Answer<Self::Response> {
        let mut response = AlterPartitionReassignmentsResponse::default();
        response.allow_replication_factor_change = req.allow_replication_factor_change;
        let refused = (!cx.may_on_cluster(Operation::Alter)).then_some(error_code::CLUSTER_AUTHORIZATION_FAILED);
        if let Some(code) = refused {
            response.error_code = code;
        }
        for topic in req.topics {
            let found = topics.get(&topic.name.0);
            let mut out = ReassignableTopicResponse::default();
            out.partitions = topic
                .partitions
                .into_iter()
                .map(|partition| {
                    let index = partition.partition_index;
                    let outcome = match (refused, &found) {
                        (Some(code), _) => Err((code, None)),
                        (None, None) => Err((
                            error_code::UNKNOWN_TOPIC_OR_PARTITION,
                            Some(format!("Unable to find a topic named {}.", topic.name.0)),
                        )),
                        (None, Some(t)) if t.partition(index).is_none() => Err((
                            error_code::UNKNOWN_TOPIC_OR_PARTITION,
                            Some(format!("Unable to find partition {}:{index}.", topic.name.0)),
                        )),
                        (None, Some(_)) => match partition.replicas {
                            None => {
                                Err((error_code::NO_REASSIGNMENT_IN_PROGRESS, Some(NO_REASSIGNMENT_MESSAGE.to_owned())))
                            }
                            Some(replicas) => {
                                check_replicas(config.node_id, &replicas.iter().map(|b| b.0).collect::<Vec<_>>())
                                    .map_err(|message| (error_code::INVALID_REPLICA_ASSIGNMENT, Some(message)))
                            }
                        },
                    };
                    let mut result = ReassignablePartitionResponse::default();
                    result.partition_index = index;
                    if let Err((code, message)) = outcome {
                        result.error_code = code;
                        result.error_message = message.as_deref().map(str_bytes);
                    }
                    result
                })
                .collect();
            out.name = topic.name;
            response.responses.push(out);
        }
        response.into()
    }
}

/// Kafka's `validateManualPartitionAssignment`, with this broker as the only
/// registered one: the replicas must be exactly `[node_id]`, which is also
/// where the partition already is, so nothing moves.
fn check_replicas(node_id: i32, replicas: &[i32]) -> Result<(), String> {
    if replicas.is_empty() {
        return Err("The manual partition assignment includes an empty replica list.".to_owned());
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    let mut previous = None;
    for broker in sorted {
        if broker != node_id {
            return Err(format!(
                "The manual partition assignment includes broker {broker}, but no such broker is registered."
            ));
        }
        if previous == Some(broker) {
            return Err(format!("The manual partition assignment includes the broker {broker} more than once."));
        }
        previous = Some(broker);
    }
    Ok(())
}

pub struct ListPartitionReassignments;

impl Handler for ListPartitionReassignments {
    const KEY: ApiKey = ApiKey::ListPartitionReassignments;
    /// v0: Kafka 4.1's range.
    const VERSIONS: Versions = Versions::new(0, 0);
    type Request = ListPartitionReassignmentsRequest;
    type Response = ListPartitionReassignmentsResponse;
    type Services<'a> = ();

    async fn handle(
        _: Self::Services<'_>,
        cx: &RequestContext<'_>,
        _req: ListPartitionReassignmentsRequest,
    ) -> Answer<Self::Response> {
        let mut response = ListPartitionReassignmentsResponse::default();
        if !cx.may_on_cluster(Operation::Describe) {
            response.error_code = error_code::CLUSTER_AUTHORIZATION_FAILED;
        }
        // No reassignment is ever in progress, for the topics asked about or any other.
        response.into()
    }
}

pub struct AlterReplicaLogDirs;

impl Handler for AlterReplicaLogDirs {
    const KEY: ApiKey = ApiKey::AlterReplicaLogDirs;
    /// v1-v2: Kafka 4.1's range (KIP-896 removed v0); v2 is flexible.
    const VERSIONS: Versions = Versions::new(1, 2);
    type Request = AlterReplicaLogDirsRequest;
    type Response = AlterReplicaLogDirsResponse;
    type Services<'a> = (&'a BrokerConfig, &'a Topics);

    async fn handle(
        (config, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: AlterReplicaLogDirsRequest,
    ) -> Answer<Self::Response> {
        let allowed = cx.may_on_cluster(Operation::Alter);
        let mut response = AlterReplicaLogDirsResponse::default();
        for dir in req.dirs {
            let known_dir = Path::new(dir.path.as_str()) == config.log_dir.as_path();
            for topic in dir.topics {
                let found = topics.get(&topic.name.0);
                let mut out = AlterReplicaLogDirTopicResult::default();
                out.partitions = topic
                    .partitions
                    .into_iter()
                    .map(|index| {
                        let mut result = AlterReplicaLogDirPartitionResult::default();
                        result.partition_index = index;
                        result.error_code = if !allowed {
                            error_code::CLUSTER_AUTHORIZATION_FAILED
                        } else if !known_dir {
                            error_code::LOG_DIR_NOT_FOUND
                        } else if found.as_ref().and_then(|t| t.partition(index)).is_none() {
                            topics.missing_code(&topic.name.0, error_code::UNKNOWN_TOPIC_OR_PARTITION)
                        } else {
                            // Already in that directory: nothing to move.
                            error_code::NONE
                        };
                        result
                    })
                    .collect();
                out.topic_name = topic.name;
                response.results.push(out);
            }
        }
        response.into()
    }
}
