//! The version sweep's requests for one family of APIs. Transactions and producer state.

use crate::common;
use crate::common::{create_topic, Client};
use kafgres_wire::ApiKey;
use kafgres_wire::{error_code, messages};
use kafka_protocol::protocol::StrBytes;

use super::check;

/// Whether `exchange` below has a request for `key`.
pub(super) fn covers(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::DescribeTransactions
            | ApiKey::ListTransactions
            | ApiKey::DescribeProducers
            | ApiKey::InitProducerId
            | ApiKey::AddPartitionsToTxn
            | ApiKey::AddOffsetsToTxn
            | ApiKey::TxnOffsetCommit
            | ApiKey::EndTxn
            | ApiKey::WriteTxnMarkers
    )
}

/// Sends one request of `key` at `version`; `Err` says what went wrong.
pub(super) async fn exchange(
    client: &mut Client,
    key: ApiKey,
    version: i16,
    id: uuid::Uuid,
    _produced: &mut i64,
) -> Result<(), String> {
    match key {
        ApiKey::DescribeTransactions => {
            // No transactional id has been used here: each is not found.
            let request =
                kafka_protocol::messages::DescribeTransactionsRequest::default().with_transactional_ids(vec![
                    kafka_protocol::messages::TransactionalId(StrBytes::from_static_str("none")),
                ]);
            let r = client.try_call(version, &request).await?;
            let codes: Vec<i16> = r.transaction_states.iter().map(|t| t.error_code).collect();
            check(codes == [error_code::TRANSACTIONAL_ID_NOT_FOUND], format!("{r:?}"))
        }
        ApiKey::ListTransactions => {
            let request = kafka_protocol::messages::ListTransactionsRequest::default()
                .with_state_filters(vec![StrBytes::from_static_str("NoSuchState")])
                .with_duration_filter(-1);
            let r = client.try_call(version, &request).await?;
            check(
                r.error_code == 0 && r.unknown_state_filters.len() == 1 && r.transaction_states.is_empty(),
                format!("{r:?}"),
            )
        }
        ApiKey::DescribeProducers => {
            use kafka_protocol::messages::describe_producers_request::TopicRequest;
            let request =
                kafka_protocol::messages::DescribeProducersRequest::default()
                    .with_topics(vec![TopicRequest::default()
                        .with_name(common::name("swept"))
                        .with_partition_indexes(vec![0])]);
            let r = client.try_call(version, &request).await?;
            check(
                r.topics.len() == 1 && r.topics[0].partitions.len() == 1 && r.topics[0].partitions[0].error_code == 0,
                format!("{r:?}"),
            )
        }
        ApiKey::InitProducerId => {
            // v3+ carry the current producer id and epoch; a non-transactional
            // request gets a fresh id with epoch 0 at every version.
            let request = kafka_protocol::messages::InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(kafka_protocol::messages::ProducerId(-1))
                .with_producer_epoch(-1);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == 0 && r.producer_id.0 >= 0 && r.producer_epoch == 0, format!("{r:?}"))
        }
        ApiKey::AddPartitionsToTxn => {
            let (pid, epoch) = txn_init(client, &format!("apt-v{version}")).await?;
            use kafka_protocol::messages::add_partitions_to_txn_request::{
                AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
            };
            let topics =
                vec![AddPartitionsToTxnTopic::default().with_name(common::name("swept")).with_partitions(vec![0])];
            if version < 4 {
                let request = kafka_protocol::messages::AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(txn_id(&format!("apt-v{version}")))
                    .with_v3_and_below_producer_id(kafka_protocol::messages::ProducerId(pid))
                    .with_v3_and_below_producer_epoch(epoch)
                    .with_v3_and_below_topics(topics);
                let r = client.try_call(version, &request).await?;
                let code = r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
                return check(code == 0, format!("{r:?}"));
            }
            // v4+: the brokers' batched form; verify (not yet added), add, verify again.
            let transaction = |verify_only: bool| {
                kafka_protocol::messages::AddPartitionsToTxnRequest::default().with_transactions(vec![
                    AddPartitionsToTxnTransaction::default()
                        .with_transactional_id(txn_id(&format!("apt-v{version}")))
                        .with_producer_id(kafka_protocol::messages::ProducerId(pid))
                        .with_producer_epoch(epoch)
                        .with_verify_only(verify_only)
                        .with_topics(topics.clone()),
                ])
            };
            let mut codes = Vec::new();
            for verify_only in [true, false, true] {
                let r = client.try_call(version, &transaction(verify_only)).await?;
                codes.push(r.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code);
            }
            check(codes == [error_code::INVALID_TXN_STATE, 0, 0], format!("{codes:?}"))
        }
        ApiKey::AddOffsetsToTxn => {
            let id = format!("aot-v{version}");
            let (pid, epoch) = txn_init(client, &id).await?;
            let r = client.try_call(version, &add_offsets(&id, pid, epoch)).await?;
            check(r.error_code == 0, format!("{r:?}"))
        }
        ApiKey::TxnOffsetCommit => {
            use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition;
            let id_or_name = id;
            let id = format!("toc-v{version}");
            let (pid, epoch) = txn_init(client, &id).await?;
            let added = client.try_call(3, &add_offsets(&id, pid, epoch)).await?;
            check(added.error_code == 0, format!("{added:?}"))?;
            // v6 names topics by id only.
            let mut topic = messages::TxnOffsetCommitRequestTopic {
                partitions: vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(1)],
                ..Default::default()
            };
            if version >= 6 {
                topic.topic_id = id_or_name;
            } else {
                topic.name = common::name("swept");
            }
            let request = messages::TxnOffsetCommitRequest {
                transactional_id: txn_id(&id),
                group_id: kafka_protocol::messages::GroupId(StrBytes::from_static_str("txn-sweep")),
                producer_id: kafka_protocol::messages::ProducerId(pid),
                producer_epoch: epoch,
                topics: vec![topic],
                ..Default::default()
            };
            let r = client.try_call(version, &request).await?;
            let topic_ok = version < 6 || r.topics[0].topic_id == id_or_name;
            check(topic_ok && r.topics[0].partitions[0].error_code == 0, format!("{r:?}"))
        }
        ApiKey::EndTxn => {
            let id = format!("end-v{version}");
            let (pid, epoch) = txn_init(client, &id).await?;
            let added = client.try_call(3, &add_offsets(&id, pid, epoch)).await?;
            check(added.error_code == 0, format!("{added:?}"))?;
            let request = kafka_protocol::messages::EndTxnRequest::default()
                .with_transactional_id(txn_id(&id))
                .with_producer_id(kafka_protocol::messages::ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(true);
            let r = client.try_call(version, &request).await?;
            // v5 is transaction version 2: the end bumps the epoch and says so.
            let bumped = version < 5 || (r.producer_id.0, r.producer_epoch) == (pid, epoch + 1);
            check(r.error_code == 0 && bumped, format!("{r:?}"))
        }
        ApiKey::WriteTxnMarkers => {
            use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
            // A topic of its own: a marker in "swept" would move Produce's offsets.
            let topic = format!("marked-v{version}");
            create_topic(client, &topic, 1).await;
            let marker = WritableTxnMarker::default()
                .with_producer_id(kafka_protocol::messages::ProducerId(4_242))
                .with_producer_epoch(0)
                .with_transaction_result(false)
                .with_coordinator_epoch(0)
                .with_topics(vec![WritableTxnMarkerTopic::default()
                    .with_name(common::name(&topic))
                    .with_partition_indexes(vec![0])]);
            // v2 says which transaction version wrote the transaction.
            let transaction_version = if version >= 2 { 2 } else { 0 };
            let request = messages::WriteTxnMarkersRequest {
                markers: vec![messages::WritableTxnMarker { marker, transaction_version }],
                ..Default::default()
            };
            let r = client.try_call(version, &request).await?;
            check(r.markers[0].topics[0].partitions[0].error_code == 0, format!("{r:?}"))
        }
        other => Err(format!("{other:?} is not in this family")),
    }
}

/// The request's transactional id.
fn txn_id(id: &str) -> kafka_protocol::messages::TransactionalId {
    kafka_protocol::messages::TransactionalId(StrBytes::from_string(id.to_string()))
}

/// A transactional id's producer id and epoch (InitProducerId v4).
async fn txn_init(client: &mut Client, id: &str) -> Result<(i64, i16), String> {
    let request = kafka_protocol::messages::InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(kafka_protocol::messages::ProducerId(-1))
        .with_producer_epoch(-1);
    let r = client.try_call(4, &request).await?;
    if r.error_code != 0 {
        return Err(format!("InitProducerId for {id}: {r:?}"));
    }
    Ok((r.producer_id.0, r.producer_epoch))
}

fn add_offsets(id: &str, pid: i64, epoch: i16) -> kafka_protocol::messages::AddOffsetsToTxnRequest {
    kafka_protocol::messages::AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(kafka_protocol::messages::ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(kafka_protocol::messages::GroupId(StrBytes::from_static_str("txn-sweep")))
}
