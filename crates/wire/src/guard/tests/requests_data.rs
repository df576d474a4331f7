//! Random valid Produce, Fetch, ListOffsets and Metadata requests for one version.
//!
//! Which fields exist in which version comes from kafka-protocol's own documentation of each
//! struct ("Supported API versions"), not from the guard's tables: a field is set to a random
//! value where it exists and left at its default elsewhere (the encoder refuses non-default
//! values for absent fields). Flexible thresholds are written out here again on purpose.

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic, ReplicaState};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, ListOffsetsRequest, MetadataRequest, ProduceRequest, TopicName, TransactionalId,
};
use proptest::prelude::*;

use super::gen::{
    blob_or_null, list, list_or_null, name, name_or_null, text, text_or_null, unknown_tags, uuid, uuid_bytes,
};

pub(super) fn produce(v: i16) -> impl Strategy<Value = ProduceRequest> {
    let flexible = v >= 9;
    (name_or_null::<TransactionalId>(), any::<i16>(), any::<i32>(), list(topic_produce_data(v)), unknown_tags(flexible))
        .prop_map(|(transactional_id, acks, timeout_ms, topic_data, tags)| {
            ProduceRequest::default()
                .with_transactional_id(transactional_id)
                .with_acks(acks)
                .with_timeout_ms(timeout_ms)
                .with_topic_data(topic_data)
                .with_unknown_tagged_fields(tags)
        })
}

fn topic_produce_data(v: i16) -> impl Strategy<Value = TopicProduceData> {
    let flexible = v >= 9;
    let partition = (any::<i32>(), blob_or_null(), unknown_tags(flexible)).prop_map(|(index, records, tags)| {
        PartitionProduceData::default().with_index(index).with_records(records).with_unknown_tagged_fields(tags)
    });
    (name::<TopicName>(), uuid_bytes(), list(partition), unknown_tags(flexible)).prop_map(
        move |(topic, id, partitions, tags)| {
            let mut t = TopicProduceData::default().with_partition_data(partitions).with_unknown_tagged_fields(tags);
            if v <= 12 {
                t = t.with_name(topic);
            }
            if v >= 13 {
                t = t.with_topic_id(uuid(id).topic_id);
            }
            t
        },
    )
}

pub(super) fn fetch(v: i16) -> impl Strategy<Value = FetchRequest> {
    let flexible = v >= 12;
    let replica_state = (any::<i32>(), any::<i64>())
        .prop_map(|(id, epoch)| ReplicaState::default().with_replica_id(BrokerId(id)).with_replica_epoch(epoch));
    (
        (text_or_null(), any::<i32>(), replica_state, any::<i32>()),
        (any::<i32>(), any::<i32>(), any::<i8>(), any::<i32>(), any::<i32>()),
        (list(fetch_topic(v)), list(forgotten_topic(v)), text()),
        unknown_tags(flexible),
    )
        .prop_map(move |(head, limits, lists, tags)| {
            let (cluster_id, replica_id, replica_state, max_wait_ms) = head;
            let (min_bytes, max_bytes, isolation_level, session_id, session_epoch) = limits;
            let (topics, forgotten, rack_id) = lists;
            let mut r = FetchRequest::default()
                .with_max_wait_ms(max_wait_ms)
                .with_min_bytes(min_bytes)
                .with_max_bytes(max_bytes)
                .with_isolation_level(isolation_level)
                .with_topics(topics)
                .with_unknown_tagged_fields(tags);
            if v >= 12 {
                r = r.with_cluster_id(cluster_id);
            }
            if v <= 14 {
                r = r.with_replica_id(BrokerId(replica_id));
            }
            if v >= 15 {
                r = r.with_replica_state(replica_state);
            }
            if v >= 7 {
                r = r
                    .with_session_id(session_id)
                    .with_session_epoch(session_epoch)
                    .with_forgotten_topics_data(forgotten);
            }
            if v >= 11 {
                r = r.with_rack_id(rack_id);
            }
            r
        })
}

fn fetch_topic(v: i16) -> impl Strategy<Value = FetchTopic> {
    let flexible = v >= 12;
    (name::<TopicName>(), uuid_bytes(), list(fetch_partition(v)), unknown_tags(flexible)).prop_map(
        move |(topic, id, partitions, tags)| {
            let mut t = FetchTopic::default().with_partitions(partitions).with_unknown_tagged_fields(tags);
            if v <= 12 {
                t = t.with_topic(topic);
            }
            if v >= 13 {
                t = t.with_topic_id(uuid(id).topic_id);
            }
            t
        },
    )
}

fn fetch_partition(v: i16) -> impl Strategy<Value = FetchPartition> {
    let flexible = v >= 12;
    (
        (any::<i32>(), any::<i32>(), any::<i64>(), any::<i32>()),
        (any::<i64>(), any::<i32>()),
        // The two tagged fields are written only when not at their defaults (nil, i64::MAX).
        (uuid_bytes(), prop_oneof![Just(i64::MAX), any::<i64>()]),
        unknown_tags(flexible),
    )
        .prop_map(move |(head, tail, tagged, tags)| {
            let (partition, current_leader_epoch, fetch_offset, last_fetched_epoch) = head;
            let (log_start_offset, partition_max_bytes) = tail;
            let (directory_id, high_watermark) = tagged;
            let mut p = FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(fetch_offset)
                .with_partition_max_bytes(partition_max_bytes)
                .with_unknown_tagged_fields(tags);
            if v >= 9 {
                p = p.with_current_leader_epoch(current_leader_epoch);
            }
            if v >= 12 {
                p = p.with_last_fetched_epoch(last_fetched_epoch);
            }
            if v >= 5 {
                p = p.with_log_start_offset(log_start_offset);
            }
            if v >= 17 {
                p = p.with_replica_directory_id(uuid(directory_id).topic_id);
            }
            if v >= 18 {
                p = p.with_high_watermark(high_watermark);
            }
            p
        })
}

fn forgotten_topic(v: i16) -> impl Strategy<Value = ForgottenTopic> {
    let flexible = v >= 12;
    (name::<TopicName>(), uuid_bytes(), list(any::<i32>()), unknown_tags(flexible)).prop_map(
        move |(topic, id, partitions, tags)| {
            let mut t = ForgottenTopic::default().with_partitions(partitions).with_unknown_tagged_fields(tags);
            if (7..=12).contains(&v) {
                t = t.with_topic(topic);
            }
            if v >= 13 {
                t = t.with_topic_id(uuid(id).topic_id);
            }
            t
        },
    )
}

pub(super) fn list_offsets(v: i16) -> impl Strategy<Value = crate::messages::ListOffsetsRequest> {
    let flexible = v >= 6;
    let partition = (any::<i32>(), any::<i32>(), any::<i64>(), unknown_tags(flexible)).prop_map(
        move |(index, epoch, timestamp, tags)| {
            let mut p = ListOffsetsPartition::default()
                .with_partition_index(index)
                .with_timestamp(timestamp)
                .with_unknown_tagged_fields(tags);
            if v >= 4 {
                p = p.with_current_leader_epoch(epoch);
            }
            p
        },
    );
    let topic = (name::<TopicName>(), list(partition), unknown_tags(flexible)).prop_map(|(topic, partitions, tags)| {
        ListOffsetsTopic::default().with_name(topic).with_partitions(partitions).with_unknown_tagged_fields(tags)
    });
    (any::<i32>(), any::<i8>(), list(topic), any::<i32>(), unknown_tags(flexible)).prop_map(
        move |(replica_id, isolation_level, topics, timeout_ms, tags)| {
            let mut r = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(replica_id))
                .with_topics(topics)
                .with_unknown_tagged_fields(tags);
            if v >= 2 {
                r = r.with_isolation_level(isolation_level);
            }
            if v >= 10 {
                r = r.with_timeout_ms(timeout_ms);
            }
            crate::messages::ListOffsetsRequest(r)
        },
    )
}

pub(super) fn metadata(v: i16) -> impl Strategy<Value = MetadataRequest> {
    let flexible = v >= 9;
    let topic =
        (uuid_bytes(), name_or_null::<TopicName>(), unknown_tags(flexible)).prop_map(move |(id, topic, tags)| {
            let mut t = MetadataRequestTopic::default().with_name(topic).with_unknown_tagged_fields(tags);
            if v >= 10 {
                t = t.with_topic_id(uuid(id).topic_id);
            }
            t
        });
    (list_or_null(topic), any::<[bool; 3]>(), unknown_tags(flexible)).prop_map(
        move |(topics, [auto_create, cluster_ops, topic_ops], tags)| {
            let mut r = MetadataRequest::default().with_topics(topics).with_unknown_tagged_fields(tags);
            if v >= 4 {
                r = r.with_allow_auto_topic_creation(auto_create);
            }
            if (8..=10).contains(&v) {
                r = r.with_include_cluster_authorized_operations(cluster_ops);
            }
            if v >= 8 {
                r = r.with_include_topic_authorized_operations(topic_ops);
            }
            r
        },
    )
}
