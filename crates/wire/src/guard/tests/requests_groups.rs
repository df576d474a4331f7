//! Random valid consumer-group requests for one version (see `requests_data.rs` for the
//! conventions).

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    DescribeGroupsRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
    OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest, TopicName,
};
use proptest::prelude::*;

use super::gen::{blob, list, list_or_null, name, text, text_or_null, unknown_tags, uuid_bytes};
use crate::messages;

pub(super) fn offset_commit(v: i16) -> impl Strategy<Value = messages::OffsetCommitRequest> {
    let flexible = v >= 8;
    let partition = (any::<i32>(), any::<i64>(), any::<i32>(), text_or_null(), unknown_tags(flexible)).prop_map(
        move |(index, offset, epoch, metadata, tags)| {
            let mut p = OffsetCommitRequestPartition::default()
                .with_partition_index(index)
                .with_committed_offset(offset)
                .with_committed_metadata(metadata)
                .with_unknown_tagged_fields(tags);
            if v >= 6 {
                p = p.with_committed_leader_epoch(epoch);
            }
            p
        },
    );
    let topic = (name::<TopicName>(), uuid_bytes(), list(partition), unknown_tags(flexible)).prop_map(
        move |(topic, id, partitions, tags)| {
            let t = OffsetCommitRequestTopic::default().with_partitions(partitions).with_unknown_tagged_fields(tags);
            // v10 names topics by id only.
            if v >= 10 {
                t.with_topic_id(uuid::Uuid::from_bytes(id))
            } else {
                t.with_name(topic)
            }
        },
    );
    ((name::<GroupId>(), any::<i32>(), text(), text_or_null()), any::<i64>(), list(topic), unknown_tags(flexible))
        .prop_map(move |((group, generation, member, instance), retention, topics, tags)| {
            let mut r = OffsetCommitRequest::default()
                .with_group_id(group)
                .with_generation_id_or_member_epoch(generation)
                .with_member_id(member)
                .with_topics(topics)
                .with_unknown_tagged_fields(tags);
            if v >= 7 {
                r = r.with_group_instance_id(instance);
            }
            if v <= 4 {
                r = r.with_retention_time_ms(retention);
            }
            messages::OffsetCommitRequest(r)
        })
}

pub(super) fn offset_fetch(v: i16) -> impl Strategy<Value = messages::OffsetFetchRequest> {
    let flexible = v >= 6;
    let topic =
        (name::<TopicName>(), list(any::<i32>()), unknown_tags(flexible)).prop_map(|(topic, partitions, tags)| {
            OffsetFetchRequestTopic::default()
                .with_name(topic)
                .with_partition_indexes(partitions)
                .with_unknown_tagged_fields(tags)
        });
    let group_topics = (name::<TopicName>(), uuid_bytes(), list(any::<i32>()), unknown_tags(flexible)).prop_map(
        move |(topic, id, partitions, tags)| {
            let t =
                OffsetFetchRequestTopics::default().with_partition_indexes(partitions).with_unknown_tagged_fields(tags);
            // v10 names topics by id only.
            if v >= 10 {
                t.with_topic_id(uuid::Uuid::from_bytes(id))
            } else {
                t.with_name(topic)
            }
        },
    );
    let group = (name::<GroupId>(), text_or_null(), any::<i32>(), list_or_null(group_topics), unknown_tags(flexible))
        .prop_map(move |(group, member, epoch, topics, tags)| {
            let mut g = OffsetFetchRequestGroup::default()
                .with_group_id(group)
                .with_topics(topics)
                .with_unknown_tagged_fields(tags);
            if v >= 9 {
                g = g.with_member_id(member).with_member_epoch(epoch);
            }
            g
        });
    (name::<GroupId>(), list_or_null(topic), list(group), any::<bool>(), unknown_tags(flexible)).prop_map(
        move |(group, topics, groups, require_stable, tags)| {
            let mut r = OffsetFetchRequest::default().with_unknown_tagged_fields(tags);
            if v <= 7 {
                r = r.with_group_id(group).with_topics(topics);
            } else {
                r = r.with_groups(groups);
            }
            if v >= 7 {
                r = r.with_require_stable(require_stable);
            }
            messages::OffsetFetchRequest(r)
        },
    )
}

pub(super) fn join_group(v: i16) -> impl Strategy<Value = JoinGroupRequest> {
    let flexible = v >= 6;
    let protocol = (text(), blob(), unknown_tags(flexible)).prop_map(|(protocol, metadata, tags)| {
        JoinGroupRequestProtocol::default().with_name(protocol).with_metadata(metadata).with_unknown_tagged_fields(tags)
    });
    (
        (name::<GroupId>(), any::<i32>(), any::<i32>(), text()),
        (text_or_null(), text(), list(protocol), text_or_null()),
        unknown_tags(flexible),
    )
        .prop_map(move |(head, tail, tags)| {
            let (group, session_timeout, rebalance_timeout, member) = head;
            let (instance, protocol_type, protocols, reason) = tail;
            let mut r = JoinGroupRequest::default()
                .with_group_id(group)
                .with_session_timeout_ms(session_timeout)
                .with_member_id(member)
                .with_protocol_type(protocol_type)
                .with_protocols(protocols)
                .with_unknown_tagged_fields(tags);
            if v >= 1 {
                r = r.with_rebalance_timeout_ms(rebalance_timeout);
            }
            if v >= 5 {
                r = r.with_group_instance_id(instance);
            }
            if v >= 8 {
                r = r.with_reason(reason);
            }
            r
        })
}

pub(super) fn sync_group(v: i16) -> impl Strategy<Value = SyncGroupRequest> {
    let flexible = v >= 4;
    let assignment = (text(), blob(), unknown_tags(flexible)).prop_map(|(member, data, tags)| {
        SyncGroupRequestAssignment::default()
            .with_member_id(member)
            .with_assignment(data)
            .with_unknown_tagged_fields(tags)
    });
    (
        (name::<GroupId>(), any::<i32>(), text(), text_or_null()),
        (text_or_null(), text_or_null(), list(assignment)),
        unknown_tags(flexible),
    )
        .prop_map(move |(head, tail, tags)| {
            let (group, generation, member, instance) = head;
            let (protocol_type, protocol_name, assignments) = tail;
            let mut r = SyncGroupRequest::default()
                .with_group_id(group)
                .with_generation_id(generation)
                .with_member_id(member)
                .with_assignments(assignments)
                .with_unknown_tagged_fields(tags);
            if v >= 3 {
                r = r.with_group_instance_id(instance);
            }
            if v >= 5 {
                r = r.with_protocol_type(protocol_type).with_protocol_name(protocol_name);
            }
            r
        })
}

pub(super) fn heartbeat(v: i16) -> impl Strategy<Value = HeartbeatRequest> {
    let flexible = v >= 4;
    (name::<GroupId>(), any::<i32>(), text(), text_or_null(), unknown_tags(flexible)).prop_map(
        move |(group, generation, member, instance, tags)| {
            let mut r = HeartbeatRequest::default()
                .with_group_id(group)
                .with_generation_id(generation)
                .with_member_id(member)
                .with_unknown_tagged_fields(tags);
            if v >= 3 {
                r = r.with_group_instance_id(instance);
            }
            r
        },
    )
}

pub(super) fn leave_group(v: i16) -> impl Strategy<Value = LeaveGroupRequest> {
    let flexible = v >= 4;
    let member = (text(), text_or_null(), text_or_null(), unknown_tags(flexible)).prop_map(
        move |(member, instance, reason, tags)| {
            let mut m = MemberIdentity::default()
                .with_member_id(member)
                .with_group_instance_id(instance)
                .with_unknown_tagged_fields(tags);
            if v >= 5 {
                m = m.with_reason(reason);
            }
            m
        },
    );
    (name::<GroupId>(), text(), list(member), unknown_tags(flexible)).prop_map(move |(group, member, members, tags)| {
        let mut r = LeaveGroupRequest::default().with_group_id(group).with_unknown_tagged_fields(tags);
        if v <= 2 {
            r = r.with_member_id(member);
        } else {
            r = r.with_members(members);
        }
        r
    })
}

pub(super) fn list_groups(v: i16) -> impl Strategy<Value = ListGroupsRequest> {
    let flexible = v >= 3;
    (list(text()), list(text()), unknown_tags(flexible)).prop_map(move |(states, types, tags)| {
        let mut r = ListGroupsRequest::default().with_unknown_tagged_fields(tags);
        if v >= 4 {
            r = r.with_states_filter(states);
        }
        if v >= 5 {
            r = r.with_types_filter(types);
        }
        r
    })
}

pub(super) fn describe_groups(v: i16) -> impl Strategy<Value = DescribeGroupsRequest> {
    let flexible = v >= 5;
    (list(name::<GroupId>()), any::<bool>(), unknown_tags(flexible)).prop_map(
        move |(groups, include_operations, tags)| {
            let mut r = DescribeGroupsRequest::default().with_groups(groups).with_unknown_tagged_fields(tags);
            if v >= 3 {
                r = r.with_include_authorized_operations(include_operations);
            }
            r
        },
    )
}
