//! Random valid AlterReplicaLogDirs, ElectLeaders, AlterPartitionReassignments and
//! ListPartitionReassignments requests for one version (see `requests_data.rs` for the
//! conventions).

use kafka_protocol::messages::alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
use kafka_protocol::messages::alter_replica_log_dirs_request::{AlterReplicaLogDir, AlterReplicaLogDirTopic};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest, BrokerId, ElectLeadersRequest,
    ListPartitionReassignmentsRequest, TopicName,
};
use proptest::prelude::*;

use super::gen::{list, list_or_null, name, text, unknown_tags};

pub(super) fn alter_replica_log_dirs(v: i16) -> impl Strategy<Value = AlterReplicaLogDirsRequest> {
    let flexible = v >= 2;
    let topic =
        (name::<TopicName>(), list(any::<i32>()), unknown_tags(flexible)).prop_map(|(name, partitions, tags)| {
            AlterReplicaLogDirTopic::default()
                .with_name(name)
                .with_partitions(partitions)
                .with_unknown_tagged_fields(tags)
        });
    let dir = (text(), list(topic), unknown_tags(flexible)).prop_map(|(path, topics, tags)| {
        AlterReplicaLogDir::default().with_path(path).with_topics(topics).with_unknown_tagged_fields(tags)
    });
    (list(dir), unknown_tags(flexible))
        .prop_map(|(dirs, tags)| AlterReplicaLogDirsRequest::default().with_dirs(dirs).with_unknown_tagged_fields(tags))
}

pub(super) fn elect_leaders(v: i16) -> impl Strategy<Value = ElectLeadersRequest> {
    let flexible = v >= 2;
    let topic =
        (name::<TopicName>(), list(any::<i32>()), unknown_tags(flexible)).prop_map(|(topic, partitions, tags)| {
            TopicPartitions::default().with_topic(topic).with_partitions(partitions).with_unknown_tagged_fields(tags)
        });
    (any::<i8>(), list_or_null(topic), any::<i32>(), unknown_tags(flexible)).prop_map(
        move |(election_type, topics, timeout_ms, tags)| {
            ElectLeadersRequest::default()
                .with_election_type(if v >= 1 { election_type } else { 0 })
                .with_topic_partitions(topics)
                .with_timeout_ms(timeout_ms)
                .with_unknown_tagged_fields(tags)
        },
    )
}

pub(super) fn alter_partition_reassignments(v: i16) -> impl Strategy<Value = AlterPartitionReassignmentsRequest> {
    let partition = (any::<i32>(), list_or_null(any::<i32>().prop_map(BrokerId)), unknown_tags(true)).prop_map(
        |(partition_index, replicas, tags)| {
            ReassignablePartition::default()
                .with_partition_index(partition_index)
                .with_replicas(replicas)
                .with_unknown_tagged_fields(tags)
        },
    );
    let topic = (name::<TopicName>(), list(partition), unknown_tags(true)).prop_map(|(name, partitions, tags)| {
        ReassignableTopic::default().with_name(name).with_partitions(partitions).with_unknown_tagged_fields(tags)
    });
    (any::<i32>(), any::<bool>(), list(topic), unknown_tags(true)).prop_map(move |(timeout_ms, allow, topics, tags)| {
        AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_allow_replication_factor_change(if v >= 1 { allow } else { true })
            .with_topics(topics)
            .with_unknown_tagged_fields(tags)
    })
}

pub(super) fn list_partition_reassignments(_v: i16) -> impl Strategy<Value = ListPartitionReassignmentsRequest> {
    let topic = (name::<TopicName>(), list(any::<i32>()), unknown_tags(true)).prop_map(|(name, partitions, tags)| {
        ListPartitionReassignmentsTopics::default()
            .with_name(name)
            .with_partition_indexes(partitions)
            .with_unknown_tagged_fields(tags)
    });
    (any::<i32>(), list_or_null(topic), unknown_tags(true)).prop_map(|(timeout_ms, topics, tags)| {
        ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(topics)
            .with_unknown_tagged_fields(tags)
    })
}
