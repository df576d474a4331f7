//! Fetch (one partition, long-polling) and Produce (one batch, acks=all).

use std::time::Duration;

use bytes::Bytes;
use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};
use kafgres_wire::error_code;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{BrokerId, FetchRequest, ProduceRequest};

use super::{topic_name, unexpected, Client};
use crate::error::ClientError;
use crate::records::{decode_batches, Record};
use crate::wait::Wait;

/// What one fetch of one partition returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResult {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Records at the requested offset or later, in offset order.
    pub records: Vec<Record>,
    /// Where the next fetch should start: past the last whole batch returned,
    /// control batches included (so a fetch that returned only control
    /// records still makes progress); the requested offset if none came.
    pub next_offset: i64,
}

impl<W: Wait> Client<W> {
    /// Fetches from `offset` of one partition: at most about `max_bytes` of
    /// batches (the first batch comes whole even if larger), waiting up to
    /// `max_wait` for data if there is none yet. An offset outside the log is
    /// [`ClientError::OffsetOutOfRange`].
    pub fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
        max_wait: Duration,
    ) -> Result<FetchResult, ClientError> {
        let mut results = self.fetch_many(topic, &[(partition, offset)], max_bytes, max_wait)?;
        results.pop().ok_or_else(|| unexpected("Fetch", format_args!("has no answer for {topic}-{partition}")))?
    }

    /// Fetches several partitions of one topic in one request: the broker
    /// answers as soon as any of them has data (or `max_wait` passes), so a
    /// long poll over many partitions wakes on the first record. One result
    /// per requested partition, in request order; a partition's own error
    /// (offset out of range, say) does not fail the others.
    pub fn fetch_many(
        &mut self,
        topic: &str,
        partitions: &[(i32, i64)],
        partition_max_bytes: i32,
        max_wait: Duration,
    ) -> Result<Vec<Result<FetchResult, ClientError>>, ClientError> {
        const API: &str = "Fetch";
        if partition_max_bytes <= 0 {
            return Err(ClientError::InvalidArgument(format!("fetch max bytes {partition_max_bytes}")));
        }
        let max_wait_ms = i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX);
        let requested = partitions
            .iter()
            .map(|&(partition, offset)| {
                FetchPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(partition_max_bytes)
            })
            .collect();
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(partition_max_bytes.saturating_mul(partitions.len().clamp(1, 64) as i32))
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default().with_topic(topic_name(topic)).with_partitions(requested)]);
        let deadline = self.deadline(max_wait);
        let response = self.conn.call(&request, deadline)?;
        if response.error_code != error_code::NONE {
            return Err(ClientError::kafka(API, response.error_code, topic.to_owned()));
        }
        let mut results = Vec::with_capacity(partitions.len());
        for &(partition, offset) in partitions {
            let Some(data) = response
                .responses
                .iter()
                .filter(|t| t.topic.as_str() == topic)
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == partition)
            else {
                results.push(Err(unexpected(API, format_args!("has no answer for {topic}-{partition}"))));
                continue;
            };
            let result = match data.error_code {
                error_code::NONE => {
                    let empty = Bytes::new();
                    decode_batches(data.records.as_ref().unwrap_or(&empty), offset, self.config.decompressed_bytes_max)
                        .map(|decoded| FetchResult {
                            high_watermark: data.high_watermark,
                            log_start_offset: data.log_start_offset,
                            records: decoded.records,
                            next_offset: decoded.next_offset.map_or(offset, |next| next.max(offset)),
                        })
                }
                error_code::OFFSET_OUT_OF_RANGE => Err(ClientError::OffsetOutOfRange {
                    topic: topic.to_owned(),
                    partition,
                    offset,
                    log_start_offset: data.log_start_offset,
                    log_end_offset: data.high_watermark,
                }),
                code => Err(ClientError::kafka(API, code, format!("{topic}-{partition}"))),
            };
            results.push(result);
        }
        Ok(results)
    }

    /// Produces `records` as one uncompressed batch with acks=all; returns
    /// the offset of the first.
    pub fn produce(&mut self, topic: &str, partition: i32, records: &[NewRecord]) -> Result<i64, ClientError> {
        if records.is_empty() {
            return Err(ClientError::InvalidArgument("produce needs at least one record".into()));
        }
        self.produce_batch(topic, partition, Bytes::from(encode_batch(records, ProducerStamp::NONE)))
    }

    /// Produces already encoded v2 batches (e.g. from
    /// `kafgres_record::build::encode_compressed_batch`) with acks=all;
    /// returns the base offset the broker assigned.
    pub fn produce_batch(&mut self, topic: &str, partition: i32, batches: Bytes) -> Result<i64, ClientError> {
        const API: &str = "Produce";
        let data = PartitionProduceData::default().with_index(partition).with_records(Some(batches));
        let request = ProduceRequest::default().with_acks(-1).with_timeout_ms(self.timeout_ms()).with_topic_data(vec![
            TopicProduceData::default().with_name(topic_name(topic)).with_partition_data(vec![data]),
        ]);
        let response = self.call(&request)?;
        let answer = response
            .responses
            .iter()
            .filter(|t| t.name.as_str() == topic)
            .flat_map(|t| t.partition_responses.iter())
            .find(|p| p.index == partition)
            .ok_or_else(|| unexpected(API, format_args!("has no answer for {topic}-{partition}")))?;
        if answer.error_code != error_code::NONE {
            let mut message = format!("{topic}-{partition}");
            if let Some(m) = answer.error_message.as_ref().filter(|m| !m.is_empty()) {
                message = format!("{message}: {m}");
            }
            for e in &answer.record_errors {
                message = format!(
                    "{message}; record {}: {}",
                    e.batch_index,
                    super::string(e.batch_index_error_message.as_ref())
                );
            }
            return Err(ClientError::kafka(API, answer.error_code, message));
        }
        Ok(answer.base_offset)
    }
}
