//! What an idempotent producer needs beyond Produce itself: a producer id
//! (InitProducerId), what the broker holds of it per partition
//! (DescribeProducers), and one Produce carrying a batch for each of several
//! partitions, with an outcome per partition.

use bytes::Bytes;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{DescribeProducersRequest, InitProducerIdRequest, ProduceRequest, ProducerId};

use super::{check_code, topic_name, unexpected, Client};
use crate::error::ClientError;
use crate::wait::Wait;

/// One partition's batch in [`Client::produce_many`].
#[derive(Debug, Clone)]
pub struct PartitionBatch<'a> {
    pub topic: &'a str,
    pub partition: i32,
    /// One encoded v2 batch (Kafka takes one batch per partition from an
    /// idempotent producer).
    pub batch: Bytes,
}

/// The broker's answer for one partition of a produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionAnswer {
    /// Kafka's error code; 0 when the batch was written (or was a retry of one
    /// already written) and is durable as acks=all requires.
    pub error_code: i16,
    pub base_offset: i64,
    pub error_message: String,
}

/// What a partition holds of one producer (DescribeProducers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerState {
    pub producer_epoch: i32,
    pub last_sequence: i32,
    pub last_timestamp_ms: i64,
}

impl<W: Wait> Client<W> {
    /// A new producer id and epoch for an idempotent producer (no
    /// transactional id).
    pub fn init_producer_id(&mut self) -> Result<(i64, i16), ClientError> {
        const API: &str = "InitProducerId";
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(i32::MAX)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let response = self.call(&request)?;
        check_code(API, response.error_code, None, "a producer id")?;
        Ok((response.producer_id.0, response.producer_epoch))
    }

    /// What each partition holds of `producer_id`: `Ok(None)` where it holds
    /// nothing of it, an error where the partition could not be described
    /// (UNKNOWN_TOPIC_OR_PARTITION for one that does not exist).
    pub fn describe_producer(
        &mut self,
        producer_id: i64,
        partitions: &[(&str, i32)],
    ) -> Result<Vec<Result<Option<ProducerState>, ClientError>>, ClientError> {
        const API: &str = "DescribeProducers";
        let mut topics: Vec<TopicRequest> = Vec::new();
        for (topic, partition) in partitions {
            match topics.iter_mut().find(|t| t.name.as_str() == *topic) {
                Some(t) => t.partition_indexes.push(*partition),
                None => topics.push(
                    TopicRequest::default().with_name(topic_name(topic)).with_partition_indexes(vec![*partition]),
                ),
            }
        }
        let response = self.call(&DescribeProducersRequest::default().with_topics(topics))?;
        let mut out = Vec::with_capacity(partitions.len());
        for (topic, partition) in partitions {
            let answer = response
                .topics
                .iter()
                .filter(|t| t.name.as_str() == *topic)
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == *partition)
                .ok_or_else(|| unexpected(API, format_args!("has no answer for {topic}-{partition}")))?;
            let what = format!("{topic}-{partition}");
            out.push(check_code(API, answer.error_code, answer.error_message.as_ref(), &what).map(|()| {
                answer.active_producers.iter().find(|p| p.producer_id.0 == producer_id).map(|p| ProducerState {
                    producer_epoch: p.producer_epoch,
                    last_sequence: p.last_sequence,
                    last_timestamp_ms: p.last_timestamp,
                })
            }));
        }
        Ok(out)
    }

    /// Produces one batch to each of several partitions in one request with
    /// acks=all; one answer per batch, in order. Partition-level errors are
    /// answers, not `Err`: the caller decides per partition.
    pub fn produce_many(&mut self, batches: &[PartitionBatch<'_>]) -> Result<Vec<PartitionAnswer>, ClientError> {
        const API: &str = "Produce";
        let mut topics: Vec<TopicProduceData> = Vec::new();
        for b in batches {
            let data = PartitionProduceData::default().with_index(b.partition).with_records(Some(b.batch.clone()));
            match topics.iter_mut().find(|t| t.name.as_str() == b.topic) {
                Some(t) => t.partition_data.push(data),
                None => topics
                    .push(TopicProduceData::default().with_name(topic_name(b.topic)).with_partition_data(vec![data])),
            }
        }
        let request =
            ProduceRequest::default().with_acks(-1).with_timeout_ms(self.timeout_ms()).with_topic_data(topics);
        let response = self.call(&request)?;
        batches
            .iter()
            .map(|b| {
                let answer = response
                    .responses
                    .iter()
                    .filter(|t| t.name.as_str() == b.topic)
                    .flat_map(|t| t.partition_responses.iter())
                    .find(|p| p.index == b.partition)
                    .ok_or_else(|| unexpected(API, format_args!("has no answer for {}-{}", b.topic, b.partition)))?;
                Ok(PartitionAnswer {
                    error_code: answer.error_code,
                    base_offset: answer.base_offset,
                    error_message: super::string(answer.error_message.as_ref()),
                })
            })
            .collect()
    }
}
