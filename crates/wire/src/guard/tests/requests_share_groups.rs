//! Random valid ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and ShareAcknowledge
//! requests (version 1, and 2 for ShareFetch and ShareAcknowledge; flexible; see
//! `requests_data.rs` for the conventions), and the
//! Describe/Alter/DeleteShareGroupOffsets admin requests (version 0).

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, GroupId, ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest, TopicName,
};
use proptest::prelude::*;

use super::gen::{list, list_or_null, name, name_or_null, text, text_or_null, unknown_tags, uuid, uuid_bytes};

pub(super) fn share_group_heartbeat(_v: i16) -> impl Strategy<Value = ShareGroupHeartbeatRequest> {
    (name::<GroupId>(), text(), any::<i32>(), text_or_null(), list_or_null(name::<TopicName>()), unknown_tags(true))
        .prop_map(|(group, member, epoch, rack, topics, tags)| {
            ShareGroupHeartbeatRequest::default()
                .with_group_id(group)
                .with_member_id(member)
                .with_member_epoch(epoch)
                .with_rack_id(rack)
                .with_subscribed_topic_names(topics)
                .with_unknown_tagged_fields(tags)
        })
}

pub(super) fn share_group_describe(_v: i16) -> impl Strategy<Value = ShareGroupDescribeRequest> {
    (list(name::<GroupId>()), any::<bool>(), unknown_tags(true)).prop_map(|(groups, ops, tags)| {
        ShareGroupDescribeRequest::default()
            .with_group_ids(groups)
            .with_include_authorized_operations(ops)
            .with_unknown_tagged_fields(tags)
    })
}

fn fetch_ack_batch() -> impl Strategy<Value = AcknowledgementBatch> {
    (any::<i64>(), any::<i64>(), list(any::<i8>()), unknown_tags(true)).prop_map(|(first, last, types, tags)| {
        AcknowledgementBatch::default()
            .with_first_offset(first)
            .with_last_offset(last)
            .with_acknowledge_types(types)
            .with_unknown_tagged_fields(tags)
    })
}

pub(super) fn share_fetch(v: i16) -> impl Strategy<Value = crate::messages::ShareFetchRequest> {
    let partition = (any::<i32>(), list(fetch_ack_batch()), unknown_tags(true)).prop_map(|(index, acks, tags)| {
        FetchPartition::default()
            .with_partition_index(index)
            .with_acknowledgement_batches(acks)
            .with_unknown_tagged_fields(tags)
    });
    let topic = (uuid_bytes(), list(partition), unknown_tags(true)).prop_map(|(id, partitions, tags)| {
        FetchTopic::default()
            .with_topic_id(uuid(id).topic_id)
            .with_partitions(partitions)
            .with_unknown_tagged_fields(tags)
    });
    let forgotten = (uuid_bytes(), list(any::<i32>()), unknown_tags(true)).prop_map(|(id, partitions, tags)| {
        ForgottenTopic::default()
            .with_topic_id(uuid(id).topic_id)
            .with_partitions(partitions)
            .with_unknown_tagged_fields(tags)
    });
    (
        (name_or_null::<GroupId>(), text_or_null(), any::<i32>()),
        (any::<i32>(), any::<i32>(), any::<i32>(), any::<i32>(), any::<i32>()),
        list(topic),
        list(forgotten),
        unknown_tags(true),
        (any::<i8>(), any::<bool>()),
    )
        .prop_map(move |(head, limits, topics, forgotten, tags, v2)| {
            let (group, member, epoch) = head;
            let (wait, min, max, records, batch) = limits;
            let request = ShareFetchRequest::default()
                .with_group_id(group)
                .with_member_id(member)
                .with_share_session_epoch(epoch)
                .with_max_wait_ms(wait)
                .with_min_bytes(min)
                .with_max_bytes(max)
                .with_max_records(records)
                .with_batch_size(batch)
                .with_topics(topics)
                .with_forgotten_topics_data(forgotten)
                .with_unknown_tagged_fields(tags);
            let mut r = crate::messages::ShareFetchRequest::from(request);
            if v >= 2 {
                (r.share_acquire_mode, r.is_renew_ack) = v2;
            }
            r
        })
}

pub(super) fn share_acknowledge(v: i16) -> impl Strategy<Value = crate::messages::ShareAcknowledgeRequest> {
    let batch =
        (any::<i64>(), any::<i64>(), list(any::<i8>()), unknown_tags(true)).prop_map(|(first, last, types, tags)| {
            AckBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(types)
                .with_unknown_tagged_fields(tags)
        });
    let partition = (any::<i32>(), list(batch), unknown_tags(true)).prop_map(|(index, acks, tags)| {
        AcknowledgePartition::default()
            .with_partition_index(index)
            .with_acknowledgement_batches(acks)
            .with_unknown_tagged_fields(tags)
    });
    let topic = (uuid_bytes(), list(partition), unknown_tags(true)).prop_map(|(id, partitions, tags)| {
        AcknowledgeTopic::default()
            .with_topic_id(uuid(id).topic_id)
            .with_partitions(partitions)
            .with_unknown_tagged_fields(tags)
    });
    (name_or_null::<GroupId>(), text_or_null(), any::<i32>(), list(topic), unknown_tags(true), any::<bool>()).prop_map(
        move |(group, member, epoch, topics, tags, renew)| {
            let request = ShareAcknowledgeRequest::default()
                .with_group_id(group)
                .with_member_id(member)
                .with_share_session_epoch(epoch)
                .with_topics(topics)
                .with_unknown_tagged_fields(tags);
            crate::messages::ShareAcknowledgeRequest { request, is_renew_ack: v >= 2 && renew }
        },
    )
}

pub(super) fn describe_share_group_offsets(
    _v: i16,
) -> impl Strategy<Value = crate::messages::DescribeShareGroupOffsetsRequest> {
    let topic = (name::<TopicName>(), list(any::<i32>()), unknown_tags(true)).prop_map(|(topic, partitions, tags)| {
        DescribeShareGroupOffsetsRequestTopic::default()
            .with_topic_name(topic)
            .with_partitions(partitions)
            .with_unknown_tagged_fields(tags)
    });
    let group = (name::<GroupId>(), list_or_null(topic), unknown_tags(true)).prop_map(|(group, topics, tags)| {
        DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(group)
            .with_topics(topics)
            .with_unknown_tagged_fields(tags)
    });
    (list(group), unknown_tags(true)).prop_map(|(groups, tags)| {
        crate::messages::DescribeShareGroupOffsetsRequest(
            DescribeShareGroupOffsetsRequest::default().with_groups(groups).with_unknown_tagged_fields(tags),
        )
    })
}

pub(super) fn alter_share_group_offsets(_v: i16) -> impl Strategy<Value = AlterShareGroupOffsetsRequest> {
    let partition = (any::<i32>(), any::<i64>(), unknown_tags(true)).prop_map(|(index, start, tags)| {
        AlterShareGroupOffsetsRequestPartition::default()
            .with_partition_index(index)
            .with_start_offset(start)
            .with_unknown_tagged_fields(tags)
    });
    let topic = (name::<TopicName>(), list(partition), unknown_tags(true)).prop_map(|(topic, partitions, tags)| {
        AlterShareGroupOffsetsRequestTopic::default()
            .with_topic_name(topic)
            .with_partitions(partitions)
            .with_unknown_tagged_fields(tags)
    });
    (name::<GroupId>(), list(topic), unknown_tags(true)).prop_map(|(group, topics, tags)| {
        AlterShareGroupOffsetsRequest::default()
            .with_group_id(group)
            .with_topics(topics)
            .with_unknown_tagged_fields(tags)
    })
}

pub(super) fn delete_share_group_offsets(_v: i16) -> impl Strategy<Value = DeleteShareGroupOffsetsRequest> {
    let topic = (name::<TopicName>(), unknown_tags(true)).prop_map(|(topic, tags)| {
        DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(topic).with_unknown_tagged_fields(tags)
    });
    (name::<GroupId>(), list(topic), unknown_tags(true)).prop_map(|(group, topics, tags)| {
        DeleteShareGroupOffsetsRequest::default()
            .with_group_id(group)
            .with_topics(topics)
            .with_unknown_tagged_fields(tags)
    })
}
