//! Random valid transaction requests for one version: AddPartitionsToTxn, AddOffsetsToTxn,
//! EndTxn, TxnOffsetCommit, WriteTxnMarkers, DescribeProducers, ListTransactions, DescribeTransactions (see
//! `requests_data.rs` for the conventions).

use kafka_protocol::messages::add_partitions_to_txn_request::{AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition;
use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeProducersRequest, DescribeTransactionsRequest,
    EndTxnRequest, GroupId, ListTransactionsRequest, ProducerId, TopicName, TransactionalId,
};
use proptest::prelude::*;

use super::gen::{list, name, text, text_or_null, unknown_tags, uuid_bytes};
use crate::messages;

fn add_partitions_to_txn_topic(flexible: bool) -> impl Strategy<Value = AddPartitionsToTxnTopic> {
    (name::<TopicName>(), list(any::<i32>()), unknown_tags(flexible)).prop_map(|(topic, partitions, tags)| {
        AddPartitionsToTxnTopic::default().with_name(topic).with_partitions(partitions).with_unknown_tagged_fields(tags)
    })
}

pub(super) fn add_partitions_to_txn(v: i16) -> impl Strategy<Value = AddPartitionsToTxnRequest> {
    let flexible = v >= 3;
    let transaction = (
        (name::<TransactionalId>(), any::<i64>(), any::<i16>(), any::<bool>()),
        list(add_partitions_to_txn_topic(flexible)),
        unknown_tags(flexible),
    )
        .prop_map(|((transactional_id, producer_id, epoch, verify_only), topics, tags)| {
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(transactional_id)
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_verify_only(verify_only)
                .with_topics(topics)
                .with_unknown_tagged_fields(tags)
        });
    (
        list(transaction),
        (name::<TransactionalId>(), any::<i64>(), any::<i16>()),
        list(add_partitions_to_txn_topic(flexible)),
        unknown_tags(flexible),
    )
        .prop_map(move |(transactions, (transactional_id, producer_id, epoch), topics, tags)| {
            let r = AddPartitionsToTxnRequest::default().with_unknown_tagged_fields(tags);
            if v >= 4 {
                r.with_transactions(transactions)
            } else {
                r.with_v3_and_below_transactional_id(transactional_id)
                    .with_v3_and_below_producer_id(ProducerId(producer_id))
                    .with_v3_and_below_producer_epoch(epoch)
                    .with_v3_and_below_topics(topics)
            }
        })
}

pub(super) fn add_offsets_to_txn(v: i16) -> impl Strategy<Value = AddOffsetsToTxnRequest> {
    let flexible = v >= 3;
    (name::<TransactionalId>(), any::<i64>(), any::<i16>(), name::<GroupId>(), unknown_tags(flexible)).prop_map(
        |(transactional_id, producer_id, epoch, group, tags)| {
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(transactional_id)
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_group_id(group)
                .with_unknown_tagged_fields(tags)
        },
    )
}

pub(super) fn end_txn(v: i16) -> impl Strategy<Value = EndTxnRequest> {
    let flexible = v >= 3;
    (name::<TransactionalId>(), any::<i64>(), any::<i16>(), any::<bool>(), unknown_tags(flexible)).prop_map(
        |(transactional_id, producer_id, epoch, committed, tags)| {
            EndTxnRequest::default()
                .with_transactional_id(transactional_id)
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_committed(committed)
                .with_unknown_tagged_fields(tags)
        },
    )
}

pub(super) fn txn_offset_commit(v: i16) -> impl Strategy<Value = messages::TxnOffsetCommitRequest> {
    let flexible = v >= 3;
    let partition = (any::<i32>(), any::<i64>(), any::<i32>(), text_or_null(), unknown_tags(flexible)).prop_map(
        move |(index, offset, epoch, metadata, tags)| {
            let mut p = TxnOffsetCommitRequestPartition::default()
                .with_partition_index(index)
                .with_committed_offset(offset)
                .with_committed_metadata(metadata)
                .with_unknown_tagged_fields(tags);
            if v >= 2 {
                p = p.with_committed_leader_epoch(epoch);
            }
            p
        },
    );
    let topic = (name::<TopicName>(), uuid_bytes(), list(partition), unknown_tags(flexible)).prop_map(
        move |(topic, id, partitions, tags)| {
            let mut t =
                messages::TxnOffsetCommitRequestTopic { partitions, unknown_tagged_fields: tags, ..Default::default() };
            // v6 names topics by id only.
            if v >= 6 {
                t.topic_id = uuid::Uuid::from_bytes(id);
            } else {
                t.name = topic;
            }
            t
        },
    );
    (
        (name::<TransactionalId>(), name::<GroupId>(), any::<i64>(), any::<i16>()),
        (any::<i32>(), text(), text_or_null()),
        list(topic),
        unknown_tags(flexible),
    )
        .prop_map(move |(head, member, topics, tags)| {
            let (transactional_id, group_id, producer_id, producer_epoch) = head;
            let (generation, member_id, instance) = member;
            let mut r = messages::TxnOffsetCommitRequest {
                transactional_id,
                group_id,
                producer_id: ProducerId(producer_id),
                producer_epoch,
                topics,
                unknown_tagged_fields: tags,
                ..Default::default()
            };
            if v >= 3 {
                r.generation_id_or_member_epoch = generation;
                r.member_id = member_id;
                r.group_instance_id = instance;
            }
            r
        })
}

pub(super) fn write_txn_markers(v: i16) -> impl Strategy<Value = crate::messages::WriteTxnMarkersRequest> {
    let topic = (name::<TopicName>(), list(any::<i32>()), unknown_tags(true)).prop_map(|(topic, partitions, tags)| {
        WritableTxnMarkerTopic::default()
            .with_name(topic)
            .with_partition_indexes(partitions)
            .with_unknown_tagged_fields(tags)
    });
    let marker =
        (any::<i64>(), any::<i16>(), any::<bool>(), list(topic), any::<i32>(), any::<i8>(), unknown_tags(true))
            .prop_map(move |(producer_id, epoch, commit, topics, coordinator_epoch, transaction_version, tags)| {
                let marker = WritableTxnMarker::default()
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(epoch)
                    .with_transaction_result(commit)
                    .with_topics(topics)
                    .with_coordinator_epoch(coordinator_epoch)
                    .with_unknown_tagged_fields(tags);
                // v2 adds the transaction version.
                let transaction_version = if v >= 2 { transaction_version } else { 0 };
                crate::messages::WritableTxnMarker { marker, transaction_version }
            });
    (list(marker), unknown_tags(true))
        .prop_map(|(markers, tags)| crate::messages::WriteTxnMarkersRequest { markers, unknown_tagged_fields: tags })
}

pub(super) fn describe_producers(_v: i16) -> impl Strategy<Value = DescribeProducersRequest> {
    let topic = (name::<TopicName>(), list(any::<i32>()), unknown_tags(true)).prop_map(|(topic, partitions, tags)| {
        TopicRequest::default().with_name(topic).with_partition_indexes(partitions).with_unknown_tagged_fields(tags)
    });
    (list(topic), unknown_tags(true)).prop_map(|(topics, tags)| {
        DescribeProducersRequest::default().with_topics(topics).with_unknown_tagged_fields(tags)
    })
}

pub(super) fn list_transactions(v: i16) -> impl Strategy<Value = ListTransactionsRequest> {
    (list(text()), list(any::<i64>()), any::<i64>(), text_or_null(), unknown_tags(true)).prop_map(
        move |(states, producer_ids, duration, pattern, tags)| {
            let mut r = ListTransactionsRequest::default()
                .with_state_filters(states)
                .with_producer_id_filters(producer_ids.into_iter().map(ProducerId).collect())
                .with_unknown_tagged_fields(tags);
            if v >= 1 {
                r = r.with_duration_filter(duration);
            }
            if v >= 2 {
                r = r.with_transactional_id_pattern(pattern);
            }
            r
        },
    )
}

pub(super) fn describe_transactions(_v: i16) -> impl Strategy<Value = DescribeTransactionsRequest> {
    (list(name::<TransactionalId>()), unknown_tags(true)).prop_map(|(ids, tags)| {
        DescribeTransactionsRequest::default().with_transactional_ids(ids).with_unknown_tagged_fields(tags)
    })
}
