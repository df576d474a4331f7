//! The applier's [`Broker`] port over a `kafgres-client` connection: the
//! bridge talks to the broker as any Kafka producer does.

use bytes::Bytes;
use kafgres_client::{error_code, Client, ClientError, PartitionBatch, Wait};

use crate::applier::{Broker, BrokerError, OutgoingBatch, ProduceOutcome};

/// The topic config that bounds one batch.
const MESSAGE_BYTES_MAX_CONFIG: &str = "max.message.bytes";

/// A producer connection to the broker.
pub struct KafkaBroker<W: Wait> {
    client: Client<W>,
    /// Each topic's `max.message.bytes`, read once: a limit raised since
    /// only splits batches more than needed, and one lowered since is
    /// answered MESSAGE_TOO_LARGE, which drops the entry and reads it again.
    limits: std::collections::HashMap<String, usize>,
}

impl<W: Wait> KafkaBroker<W> {
    pub fn new(client: Client<W>) -> KafkaBroker<W> {
        KafkaBroker { client, limits: std::collections::HashMap::new() }
    }

    /// Whether an error left the connection unusable (reconnect, then
    /// [`crate::Applier::resync`]).
    pub fn is_broken(&self) -> bool {
        self.client.is_broken()
    }

    pub fn client_mut(&mut self) -> &mut Client<W> {
        &mut self.client
    }
}

fn broker_error(api: &'static str, e: ClientError) -> BrokerError {
    match e {
        ClientError::Io { .. } | ClientError::Timeout { .. } | ClientError::Broken => {
            BrokerError::Unreachable(e.to_string())
        }
        other => BrokerError::Refused { api, reason: other.to_string() },
    }
}

impl<W: Wait> Broker for KafkaBroker<W> {
    fn init_producer_id(&mut self) -> Result<(i64, i16), BrokerError> {
        self.client.init_producer_id().map_err(|e| broker_error("InitProducerId", e))
    }

    fn last_sequences(
        &mut self,
        producer_id: i64,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Option<i32>>, BrokerError> {
        let asked: Vec<(&str, i32)> = partitions.iter().map(|(t, p)| (t.as_str(), *p)).collect();
        let answers =
            self.client.describe_producer(producer_id, &asked).map_err(|e| broker_error("DescribeProducers", e))?;
        answers
            .into_iter()
            .map(|answer| match answer {
                Ok(state) => Ok(state.map(|s| s.last_sequence).filter(|&seq| seq >= 0)),
                // Gone since: nothing of ours is there, and the produce says so.
                Err(e) if e.kafka_code() == Some(error_code::UNKNOWN_TOPIC_OR_PARTITION) => Ok(None),
                Err(e) => Err(broker_error("DescribeProducers", e)),
            })
            .collect()
    }

    fn produce(&mut self, batches: &[OutgoingBatch]) -> Result<Vec<ProduceOutcome>, BrokerError> {
        let parts: Vec<PartitionBatch<'_>> = batches
            .iter()
            .map(|b| PartitionBatch {
                topic: &b.topic,
                partition: b.partition,
                batch: Bytes::copy_from_slice(&b.bytes),
            })
            .collect();
        let answers = self.client.produce_many(&parts).map_err(|e| broker_error("Produce", e))?;
        Ok(answers
            .into_iter()
            .zip(batches)
            .map(|(a, batch)| match a.error_code {
                error_code::MESSAGE_TOO_LARGE | error_code::RECORD_LIST_TOO_LARGE => {
                    self.limits.remove(&batch.topic);
                    ProduceOutcome::TooLarge
                }
                error_code::NONE | error_code::DUPLICATE_SEQUENCE_NUMBER => ProduceOutcome::Acknowledged,
                error_code::UNKNOWN_TOPIC_OR_PARTITION | error_code::UNKNOWN_TOPIC_ID => {
                    ProduceOutcome::UnknownPartition
                }
                error_code::OUT_OF_ORDER_SEQUENCE_NUMBER => ProduceOutcome::OutOfOrderSequence,
                error_code::INVALID_PRODUCER_EPOCH | error_code::UNKNOWN_PRODUCER_ID | error_code::PRODUCER_FENCED => {
                    ProduceOutcome::ProducerFenced
                }
                code => {
                    log::warn!("the broker refused a batch sent from SQL with error {code}: {}", a.error_message);
                    ProduceOutcome::Failed(code)
                }
            })
            .collect())
    }

    fn message_bytes_max(&mut self, topic: &str) -> Result<Option<usize>, BrokerError> {
        if let Some(&limit) = self.limits.get(topic) {
            return Ok(Some(limit));
        }
        let value = self
            .client
            .topic_config(topic, MESSAGE_BYTES_MAX_CONFIG)
            .map_err(|e| broker_error("DescribeConfigs", e))?;
        value
            .map(|v| {
                v.trim().parse::<usize>().map_err(|_| BrokerError::Refused {
                    api: "DescribeConfigs",
                    reason: format!("{MESSAGE_BYTES_MAX_CONFIG} of {topic} is {v:?}"),
                })
            })
            .transpose()
            .inspect(|limit| {
                if let Some(limit) = limit {
                    self.limits.insert(topic.to_owned(), *limit);
                }
            })
    }
}
