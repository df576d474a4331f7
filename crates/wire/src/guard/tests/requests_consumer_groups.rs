//! Random valid DeleteGroups, OffsetDelete, ConsumerGroupHeartbeat and ConsumerGroupDescribe
//! requests for one version (see `requests_data.rs` for the conventions).

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, DeleteGroupsRequest, GroupId, OffsetDeleteRequest,
    TopicName,
};
use proptest::prelude::*;

use super::gen::{list, list_or_null, name, text, text_or_null, unknown_tags, uuid, uuid_bytes};

pub(super) fn delete_groups(v: i16) -> impl Strategy<Value = crate::messages::DeleteGroupsRequest> {
    let flexible = v >= 2;
    (list(name::<GroupId>()), unknown_tags(flexible)).prop_map(|(groups, tags)| {
        crate::messages::DeleteGroupsRequest(
            DeleteGroupsRequest::default().with_groups_names(groups).with_unknown_tagged_fields(tags),
        )
    })
}

/// Version 0 only, never flexible: no tagged fields anywhere.
pub(super) fn offset_delete(_v: i16) -> impl Strategy<Value = OffsetDeleteRequest> {
    let partition = any::<i32>().prop_map(|index| OffsetDeleteRequestPartition::default().with_partition_index(index));
    let topic = (name::<TopicName>(), list(partition)).prop_map(|(topic, partitions)| {
        OffsetDeleteRequestTopic::default().with_name(topic).with_partitions(partitions)
    });
    (name::<GroupId>(), list(topic))
        .prop_map(|(group, topics)| OffsetDeleteRequest::default().with_group_id(group).with_topics(topics))
}

pub(super) fn consumer_group_heartbeat(v: i16) -> impl Strategy<Value = ConsumerGroupHeartbeatRequest> {
    let topic_partitions = (uuid_bytes(), list(any::<i32>()), unknown_tags(true)).prop_map(|(id, partitions, tags)| {
        TopicPartitions::default()
            .with_topic_id(uuid(id).topic_id)
            .with_partitions(partitions)
            .with_unknown_tagged_fields(tags)
    });
    (
        (name::<GroupId>(), text(), any::<i32>(), text_or_null(), text_or_null()),
        (any::<i32>(), list_or_null(name::<TopicName>()), text_or_null(), text_or_null()),
        list_or_null(topic_partitions),
        unknown_tags(true),
    )
        .prop_map(move |(head, subscription, topic_partitions, tags)| {
            let (group, member, epoch, instance, rack) = head;
            let (rebalance_timeout_ms, topic_names, regex, assignor) = subscription;
            let mut r = ConsumerGroupHeartbeatRequest::default()
                .with_group_id(group)
                .with_member_id(member)
                .with_member_epoch(epoch)
                .with_instance_id(instance)
                .with_rack_id(rack)
                .with_rebalance_timeout_ms(rebalance_timeout_ms)
                .with_subscribed_topic_names(topic_names)
                .with_server_assignor(assignor)
                .with_topic_partitions(topic_partitions)
                .with_unknown_tagged_fields(tags);
            if v >= 1 {
                r = r.with_subscribed_topic_regex(regex);
            }
            r
        })
}

pub(super) fn consumer_group_describe(_v: i16) -> impl Strategy<Value = ConsumerGroupDescribeRequest> {
    (list(name::<GroupId>()), any::<bool>(), unknown_tags(true)).prop_map(|(groups, include_operations, tags)| {
        ConsumerGroupDescribeRequest::default()
            .with_group_ids(groups)
            .with_include_authorized_operations(include_operations)
            .with_unknown_tagged_fields(tags)
    })
}
