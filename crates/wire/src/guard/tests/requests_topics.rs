//! Random valid CreatePartitions, DeleteRecords, OffsetForLeaderEpoch and DescribeTopicPartitions
//! requests for one version (see `requests_data.rs` for the conventions).

use kafka_protocol::messages::create_partitions_request::{CreatePartitionsAssignment, CreatePartitionsTopic};
use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, DeleteRecordsRequest, DescribeTopicPartitionsRequest,
    OffsetForLeaderEpochRequest, TopicName,
};
use proptest::prelude::*;

use super::gen::{list, list_or_null, name, unknown_tags};

pub(super) fn create_partitions(v: i16) -> impl Strategy<Value = CreatePartitionsRequest> {
    let flexible = v >= 2;
    let assignment = (list(any::<i32>()), unknown_tags(flexible)).prop_map(|(brokers, tags)| {
        CreatePartitionsAssignment::default()
            .with_broker_ids(brokers.into_iter().map(BrokerId).collect())
            .with_unknown_tagged_fields(tags)
    });
    let topic = (name::<TopicName>(), any::<i32>(), list_or_null(assignment), unknown_tags(flexible)).prop_map(
        |(topic, count, assignments, tags)| {
            CreatePartitionsTopic::default()
                .with_name(topic)
                .with_count(count)
                .with_assignments(assignments)
                .with_unknown_tagged_fields(tags)
        },
    );
    (list(topic), any::<i32>(), any::<bool>(), unknown_tags(flexible)).prop_map(
        |(topics, timeout_ms, validate_only, tags)| {
            CreatePartitionsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(timeout_ms)
                .with_validate_only(validate_only)
                .with_unknown_tagged_fields(tags)
        },
    )
}

pub(super) fn delete_records(v: i16) -> impl Strategy<Value = DeleteRecordsRequest> {
    let flexible = v >= 2;
    let partition = (any::<i32>(), any::<i64>(), unknown_tags(flexible)).prop_map(|(index, offset, tags)| {
        DeleteRecordsPartition::default()
            .with_partition_index(index)
            .with_offset(offset)
            .with_unknown_tagged_fields(tags)
    });
    let topic = (name::<TopicName>(), list(partition), unknown_tags(flexible)).prop_map(|(topic, partitions, tags)| {
        DeleteRecordsTopic::default().with_name(topic).with_partitions(partitions).with_unknown_tagged_fields(tags)
    });
    (list(topic), any::<i32>(), unknown_tags(flexible)).prop_map(|(topics, timeout_ms, tags)| {
        DeleteRecordsRequest::default().with_topics(topics).with_timeout_ms(timeout_ms).with_unknown_tagged_fields(tags)
    })
}

pub(super) fn offset_for_leader_epoch(v: i16) -> impl Strategy<Value = OffsetForLeaderEpochRequest> {
    let flexible = v >= 4;
    let partition = (any::<i32>(), any::<i32>(), any::<i32>(), unknown_tags(flexible)).prop_map(
        |(index, current_epoch, epoch, tags)| {
            OffsetForLeaderPartition::default()
                .with_partition(index)
                .with_current_leader_epoch(current_epoch)
                .with_leader_epoch(epoch)
                .with_unknown_tagged_fields(tags)
        },
    );
    let topic = (name::<TopicName>(), list(partition), unknown_tags(flexible)).prop_map(|(topic, partitions, tags)| {
        OffsetForLeaderTopic::default().with_topic(topic).with_partitions(partitions).with_unknown_tagged_fields(tags)
    });
    (any::<i32>(), list(topic), unknown_tags(flexible)).prop_map(move |(replica, topics, tags)| {
        let mut r = OffsetForLeaderEpochRequest::default().with_topics(topics).with_unknown_tagged_fields(tags);
        if v >= 3 {
            r = r.with_replica_id(BrokerId(replica));
        }
        r
    })
}

pub(super) fn describe_topic_partitions(_v: i16) -> impl Strategy<Value = DescribeTopicPartitionsRequest> {
    let topic = (name::<TopicName>(), unknown_tags(true))
        .prop_map(|(topic, tags)| TopicRequest::default().with_name(topic).with_unknown_tagged_fields(tags));
    let cursor = (name::<TopicName>(), any::<i32>(), unknown_tags(true)).prop_map(|(topic, index, tags)| {
        Cursor::default().with_topic_name(topic).with_partition_index(index).with_unknown_tagged_fields(tags)
    });
    (list(topic), any::<i32>(), proptest::option::of(cursor), unknown_tags(true)).prop_map(
        |(topics, limit, cursor, tags)| {
            DescribeTopicPartitionsRequest::default()
                .with_topics(topics)
                .with_response_partition_limit(limit)
                .with_cursor(cursor)
                .with_unknown_tagged_fields(tags)
        },
    )
}
