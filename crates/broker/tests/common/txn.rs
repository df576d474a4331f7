//! Transactions through the wire: the requests of a transactional producer,
//! and batches marked transactional, shared by the version 1 and version 2
//! tests.

use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};
use kafgres_record::rewrite_crc;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::{fetch_request, single_partition, Client, TopicRef};

pub fn txn_id(s: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(s.to_string()))
}

pub async fn init(client: &mut Client, id: &str, timeout_ms: i32) -> (i64, i16, i16) {
    let r = client
        .call(
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id(id)))
                .with_transaction_timeout_ms(timeout_ms)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
        .await;
    (r.producer_id.0, r.producer_epoch, r.error_code)
}

pub async fn end(client: &mut Client, version: i16, id: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    end_answer(client, version, id, pid, epoch, commit).await.error_code
}

/// EndTxn's whole answer (v5+ carries the producer id and epoch to go on with).
pub async fn end_answer(
    client: &mut Client,
    version: i16,
    id: &str,
    pid: i64,
    epoch: i16,
    commit: bool,
) -> EndTxnResponse {
    client
        .call(
            version,
            &EndTxnRequest::default()
                .with_transactional_id(txn_id(id))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(commit),
        )
        .await
}

/// A transactional batch of `n` records.
pub fn txn_batch(pid: i64, epoch: i16, seq: i32, n: usize, tag: &str) -> Vec<u8> {
    let records: Vec<NewRecord> = (0..n)
        .map(|i| NewRecord {
            value: Some(format!("{tag}-{i}").into_bytes()),
            timestamp_ms: 1_000,
            ..Default::default()
        })
        .collect();
    let mut b = encode_batch(&records, ProducerStamp { producer_id: pid, producer_epoch: epoch, base_sequence: seq });
    let attributes = i16::from_be_bytes([b[21], b[22]]) | 0x10;
    b[21..23].copy_from_slice(&attributes.to_be_bytes());
    rewrite_crc(&mut b);
    b
}

pub async fn produce_txn(client: &mut Client, id: &str, topic: &str, partition: i32, batch: Vec<u8>) -> i16 {
    produce_txn_at(client, 9, id, topic, partition, batch).await
}

/// A transactional produce at `version` (v12+ is transaction version 2's).
pub async fn produce_txn_at(
    client: &mut Client,
    version: i16,
    id: &str,
    topic: &str,
    partition: i32,
    batch: Vec<u8>,
) -> i16 {
    let request = super::produce_request(topic, partition, -1, batch).with_transactional_id(Some(txn_id(id)));
    let r = client.call(version, &request).await;
    r.responses[0].partition_responses[0].error_code
}

pub async fn fetch(
    client: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
    committed: bool,
) -> fetch_response::PartitionData {
    let request = fetch_request(TopicRef::Name(topic), partition, offset, 1 << 20, 0, 1)
        .with_isolation_level(if committed { 1 } else { 0 });
    single_partition(client.call(11, &request).await)
}

pub fn record_count(data: &fetch_response::PartitionData) -> usize {
    super::decode_records(data.records.as_ref().expect("records")).len()
}

/// A group's committed offset for one partition (-1: none).
pub async fn fetch_offset(client: &mut Client, group: &str, topic: &str, partition: i32) -> i64 {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    let r = client
        .call(
            5,
            &OffsetFetchRequest::default().with_group_id(GroupId(StrBytes::from_string(group.into()))).with_topics(
                Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(super::name(topic))
                    .with_partition_indexes(vec![partition])]),
            ),
        )
        .await;
    r.topics[0].partitions[0].committed_offset
}
