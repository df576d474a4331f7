//! Produce: validate each partition's batches, append them with assigned
//! offsets, and answer when the request's `acks` condition holds.
//!
//! `acks=0` gets no response at all (the client does not read one); `acks=1`
//! is answered once the write reached the page cache; `acks=all` (-1), on a
//! single node, once the records are durable under the flush policy.

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::{str_bytes, topic_name};
use crate::config::FlushPolicy;
use crate::errors;
use crate::partition::Partition;
use crate::server::BrokerContext;
use kafgres_wire::batch::{validate_batches, BatchError};
use std::sync::Arc;

/// A partition's answer, or the durability it still waits for.
struct Pending {
    partition: Option<Arc<Partition>>,
    end_offset: i64,
    response: PartitionProduceResponse,
}

pub async fn handle(ctx: &BrokerContext, _version: i16, request: ProduceRequest) -> Option<ProduceResponse> {
    let acks = request.acks;
    let mut topics = Vec::with_capacity(request.topic_data.len());
    for topic_data in request.topic_data {
        let name = topic_data.name.0.to_string();
        let topic = ctx.topic(&name);
        let mut pending = Vec::with_capacity(topic_data.partition_data.len());
        for data in topic_data.partition_data {
            let mut response = PartitionProduceResponse::default();
            response.index = data.index;
            response.base_offset = -1;
            response.log_append_time_ms = -1;
            response.log_start_offset = -1;
            let mut item = Pending { partition: None, end_offset: -1, response };
            let refusal = if !matches!(acks, -1..=1) {
                Some((errors::INVALID_REQUIRED_ACKS, None))
            } else if request.transactional_id.is_some() {
                Some((errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Some("transactions are not supported yet".to_owned())))
            } else {
                None
            };
            match (refusal, topic.as_ref().and_then(|t| t.partition(data.index))) {
                (Some((code, msg)), _) => {
                    item.response.error_code = code;
                    item.response.error_message = msg.map(|m| str_bytes(&m));
                }
                (None, None) => item.response.error_code = errors::UNKNOWN_TOPIC_OR_PARTITION,
                (None, Some(partition)) => append_one(ctx, partition, data.records, &mut item),
            }
            pending.push(item);
        }
        topics.push((name, pending));
    }
    if acks == 0 {
        return None;
    }
    let mut response = ProduceResponse::default();
    for (name, pending) in topics {
        let mut topic_response = TopicProduceResponse::default();
        topic_response.name = topic_name(&name);
        for mut item in pending {
            if let Some(partition) = &item.partition {
                if acks == -1 && partition.flush_policy() == FlushPolicy::Fsync {
                    if let Err(e) = partition.wait_durable(item.end_offset).await {
                        item.response.error_code = errors::KAFKA_STORAGE_ERROR;
                        item.response.error_message = Some(str_bytes(&e.to_string()));
                        item.response.base_offset = -1;
                    }
                }
            }
            topic_response.partition_responses.push(item.response);
        }
        response.responses.push(topic_response);
    }
    Some(response)
}

fn append_one(ctx: &BrokerContext, partition: &Arc<Partition>, records: Option<bytes::Bytes>, item: &mut Pending) {
    let Some(records) = records else {
        item.response.error_code = errors::CORRUPT_MESSAGE;
        return;
    };
    let validated = match validate_batches(&records) {
        Ok(v) => v,
        Err(e) => {
            item.response.error_code = match e {
                BatchError::UnsupportedMagic(_) => errors::UNSUPPORTED_FOR_MESSAGE_FORMAT,
                ref e if e.is_invalid_record() => errors::INVALID_RECORD,
                _ => errors::CORRUPT_MESSAGE,
            };
            item.response.error_message = Some(str_bytes(&e.to_string()));
            log::info!("refused produce to {}-{}: {e}", partition.topic, partition.index);
            return;
        }
    };
    // Kafka's max.message.bytes bounds each batch, not the request.
    if let Some(big) = validated.headers.iter().find(|h| h.total_bytes() > ctx.config.message_bytes_max) {
        item.response.error_code = errors::MESSAGE_TOO_LARGE;
        item.response.error_message = Some(str_bytes(&format!(
            "a record batch of {} bytes exceeds the limit of {} bytes",
            big.total_bytes(),
            ctx.config.message_bytes_max
        )));
        return;
    }
    let mut bytes = records.to_vec();
    match partition.append(&mut bytes, &validated.headers, crate::now_ms()) {
        Ok(appended) => {
            item.response.base_offset = appended.base_offset;
            item.response.log_start_offset = partition.log_start_offset();
            item.end_offset = appended.last_offset + 1;
            item.partition = Some(Arc::clone(partition));
        }
        Err(e) => {
            log::error!("append to {}-{} failed: {e}", partition.topic, partition.index);
            item.response.error_code = errors::KAFKA_STORAGE_ERROR;
            item.response.error_message = Some(str_bytes(&e.to_string()));
        }
    }
}
