//! Produce: validate each partition's batches, append them with assigned
//! offsets, and answer when the request's `acks` condition holds.
//!
//! Each partition's records go through, in order: batch validation (framing,
//! CRC, and every record, compressed batches decompressed under a cap, see
//! [`decompress_limit`]), the topic's `max.message.bytes` per batch, the
//! producer-id checks, then the topic's timestamp policy: CreateTime records
//! must lie within `message.timestamp.before.max.ms` / `after.max.ms` of the
//! broker's clock (INVALID_TIMESTAMP otherwise), and LogAppendTime batches get
//! the broker's time written into them (attribute bit, base and max
//! timestamp, CRC recomputed) and answered in `log_append_time_ms`.
//!
//! `acks=0` gets no response at all (the client does not read one); `acks=1`
//! is answered once the write reached the page cache; `acks=all` (-1), on a
//! single node, once the records are durable under the flush policy.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::{str_bytes, topic_name};
use crate::acl::Operation;
use crate::config::BrokerConfig;
use crate::partition::{AppendOutcome, DurabilityError, Partition};
use crate::topic_config::RecordPolicy;
use crate::topics::Topics;
use crate::txn::TxnService;
use kafgres_log::SequenceCheck;
use kafgres_record::{
    peek_offset_and_size, record_timestamps_decompressing, set_log_append_time, validate_produced_batches, BatchError,
    BatchHeader, DecompressLimit, ValidatedBatches,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A partition's answer, or the durability it still waits for.
struct Pending {
    partition: Option<Arc<Partition>>,
    end_offset: i64,
    response: PartitionProduceResponse,
}

/// Produce v8 added per-record errors (KIP-467).
const RECORD_ERRORS_VERSION_MIN: i16 = 8;
/// Produce v13 names topics by id (KIP-516); an unknown id is UNKNOWN_TOPIC_ID.
const TOPIC_ID_VERSION_MIN: i16 = 13;
/// Produce v12 is the first a client of transaction version 2 sends (KIP-890
/// part 2): its transactional batches add their partitions to the
/// transaction, with no AddPartitionsToTxn before them.
const IMPLICIT_ADD_VERSION_MIN: i16 = 12;

pub struct Produce;

impl Handler for Produce {
    const KEY: ApiKey = ApiKey::Produce;
    /// - v0-v2 are advertised but not accepted (only v3+ carries magic v2
    ///   batches): Kafka 4.x does the same because librdkafka disables
    ///   compression when Produce's minimum version is above 0 (KAFKA-18659,
    ///   librdkafka #4956).
    /// - v3-v13: Kafka 4.1's range; v8 adds per-record errors (KIP-467); v13
    ///   addresses topics by id (KIP-516), an unknown id is UNKNOWN_TOPIC_ID.
    const VERSIONS: Versions = Versions::new(3, 13).advertised_from(0);
    type Request = ProduceRequest;
    type Response = ProduceResponse;
    type Services<'a> = (&'a BrokerConfig, &'a Topics, &'a TxnService);

    async fn handle(
        (config, topics, txns): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: ProduceRequest,
    ) -> Answer<ProduceResponse> {
        let version = cx.api_version;
        let acks = request.acks;
        let mut answers: Answers = Vec::with_capacity(request.topic_data.len());
        // Kafka refuses a transactional produce whole when the client may
        // not write the transactional id.
        let transaction_refused =
            request.transactional_id.as_deref().is_some_and(|id| !cx.may_on_transactional_id(Operation::Write, id));
        let not_added = match request.transactional_id.as_deref() {
            Some(id) if version >= IMPLICIT_ADD_VERSION_MIN && !transaction_refused && !config.is_follower() => {
                add_partitions_implicitly(topics, txns, cx, id, &request).await
            }
            _ => HashMap::new(),
        };
        for topic_data in request.topic_data {
            let by_id = version >= TOPIC_ID_VERSION_MIN;
            let topic = if by_id { topics.get_by_id(&topic_data.topic_id) } else { topics.get(&topic_data.name.0) };
            let name = topic.as_ref().map_or_else(|| topic_data.name.0.to_string(), |t| t.name.clone());
            let unknown_topic = match &topic {
                Some(_) => error_code::UNKNOWN_TOPIC_OR_PARTITION,
                None if by_id && topics.offline_by_id(&topic_data.topic_id).is_some() => {
                    error_code::KAFKA_STORAGE_ERROR
                }
                None if by_id => error_code::UNKNOWN_TOPIC_ID,
                None => topics.missing_code(&topic_data.name.0, error_code::UNKNOWN_TOPIC_OR_PARTITION),
            };
            // Checked before existence, so that a client learns nothing of
            // topics it may not write; a topic id no topic has names nothing
            // to check.
            let refused = if transaction_refused {
                Some(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            } else if !(by_id && topic.is_none() || cx.may_on_topic(Operation::Write, &name)) {
                Some(error_code::TOPIC_AUTHORIZATION_FAILED)
            } else {
                None
            };
            // The topic's overrides over the dynamic broker defaults
            // (`message.max.bytes`, `log.message.timestamp.*`).
            let dynamic = config.live.dynamic();
            let none = Default::default();
            let configs = dynamic.effective_topic_configs(topic.as_ref().map_or(&none, |t| &t.configs));
            let policy = RecordPolicy::from_configs(&configs, config.message_bytes_max);
            let mut pending = Vec::with_capacity(topic_data.partition_data.len());
            for data in topic_data.partition_data {
                let mut response = PartitionProduceResponse::default();
                response.index = data.index;
                response.base_offset = -1;
                response.log_append_time_ms = -1;
                response.log_start_offset = -1;
                let mut item = Pending { partition: None, end_offset: -1, response };
                let acks_valid = matches!(acks, -1..=1);
                match (acks_valid, refused, topic.as_ref().and_then(|t| t.partition(data.index))) {
                    (false, _, _) => item.response.error_code = error_code::INVALID_REQUIRED_ACKS,
                    (true, Some(code), _) => item.response.error_code = code,
                    // A standby's copy takes no records but the leader's.
                    (true, None, Some(_)) if config.is_follower() => {
                        item.response.error_code = error_code::NOT_LEADER_OR_FOLLOWER
                    }
                    (true, None, None) => item.response.error_code = unknown_topic,
                    (true, None, Some(partition)) => match not_added.get(&(name.clone(), data.index)) {
                        Some(&code) => {
                            item.response.error_code = code;
                            item.response.error_message = Some(str_bytes(&format!(
                                "the partition could not be added to the transaction (error {code})"
                            )));
                        }
                        None => append_one(config, txns, partition, &policy, data.records, &mut item),
                    },
                }
                pending.push(item);
            }
            answers.push((name, topic_data.topic_id, pending));
        }
        if acks == 0 {
            return Answer::Silent;
        }
        // acks=all with a synchronous policy waits for the standbys at most
        // the request's own timeout, as Kafka bounds its ISR wait.
        let replication_timeout = std::time::Duration::from_millis(request.timeout_ms.clamp(0, i32::MAX) as u64);
        let throttle_time_ms = cx.throttle_time_ms;
        let appended = answers.iter().any(|(_, _, pending)| pending.iter().any(|item| item.partition.is_some()));
        if acks == -1 && appended {
            // Only the wait is left: the connection starts the next produce
            // meanwhile, so one client's requests share fdatasyncs too.
            return Answer::Later(Box::pin(async move {
                wait_committed(&mut answers, replication_timeout).await;
                into_response(answers, version, throttle_time_ms)
            }));
        }
        into_response(answers, version, throttle_time_ms).into()
    }
}

/// Adds to their transaction the partitions whose transactional batches find
/// them outside it (a version 2 client's first batch to each), before any is
/// appended; answers the partitions that could not be added, with their
/// error as Kafka's Produce gives it. Partitions the request may not write,
/// or that do not exist, are left to the checks of the append.
async fn add_partitions_implicitly(
    topics: &Topics,
    txns: &TxnService,
    cx: &RequestContext<'_>,
    transactional_id: &str,
    request: &ProduceRequest,
) -> HashMap<(String, i32), i16> {
    let by_id = cx.api_version >= TOPIC_ID_VERSION_MIN;
    let mut to_add: BTreeMap<(i64, i16), Vec<(String, i32)>> = BTreeMap::new();
    for topic_data in &request.topic_data {
        let topic = if by_id { topics.get_by_id(&topic_data.topic_id) } else { topics.get(&topic_data.name.0) };
        let Some(topic) = topic else { continue };
        if !cx.may_on_topic(Operation::Write, &topic.name) {
            continue;
        }
        for data in &topic_data.partition_data {
            let Some(records) = &data.records else { continue };
            let Ok(header) = BatchHeader::parse(records) else { continue };
            if !header.is_transactional() || header.producer_id < 0 || topic.partition(data.index).is_none() {
                continue;
            }
            let producer = (header.producer_id, header.producer_epoch);
            if !txns.in_open_transaction(producer, &topic.name, data.index) {
                to_add.entry(producer).or_default().push((topic.name.clone(), data.index));
            }
        }
    }
    let mut not_added = HashMap::new();
    for (producer, partitions) in to_add {
        if let Err(code) = txns.add_partitions_implicitly(transactional_id, producer, &partitions).await {
            // Kafka's Produce answers a coordinator that cannot take the
            // partition now with a retriable NOT_ENOUGH_REPLICAS, which every
            // client retries without refreshing its metadata.
            let code = match code {
                error_code::CONCURRENT_TRANSACTIONS
                | error_code::COORDINATOR_NOT_AVAILABLE
                | error_code::COORDINATOR_LOAD_IN_PROGRESS
                | error_code::NOT_COORDINATOR => error_code::NOT_ENOUGH_REPLICAS,
                other => other,
            };
            not_added.extend(partitions.into_iter().map(|tp| (tp, code)));
        }
    }
    not_added
}

/// Each topic's name, id and partitions' answers, in request order.
type Answers = Vec<(String, uuid::Uuid, Vec<Pending>)>;

/// Waits until every appended partition's records are committed (durable,
/// and on the standbys a synchronous policy names), turning a failure into
/// the partition's error.
async fn wait_committed(answers: &mut Answers, replication_timeout: std::time::Duration) {
    for item in answers.iter_mut().flat_map(|(_, _, pending)| pending.iter_mut()) {
        let Some(partition) = &item.partition else { continue };
        if let Err(e) = partition.wait_committed(item.end_offset, replication_timeout).await {
            item.response.error_code = match e {
                DurabilityError::NotReplicated => error_code::REQUEST_TIMED_OUT,
                _ => error_code::KAFKA_STORAGE_ERROR,
            };
            item.response.error_message = Some(str_bytes(&e.to_string()));
            item.response.base_offset = -1;
        }
    }
}

fn into_response(answers: Answers, version: i16, throttle_time_ms: i32) -> ProduceResponse {
    let mut response = ProduceResponse::default().with_throttle_time_ms(throttle_time_ms);
    for (name, topic_id, pending) in answers {
        let mut topic_response = TopicProduceResponse::default();
        topic_response.name = topic_name(&name);
        topic_response.topic_id = topic_id;
        for mut item in pending {
            if version < RECORD_ERRORS_VERSION_MIN {
                item.response.record_errors.clear();
            }
            topic_response.partition_responses.push(item.response);
        }
        response.responses.push(topic_response);
    }
    response
}

/// How much one partition's records may decompress to: 16 times their
/// compressed size (generous for real data, where gzip or zstd rarely pass
/// 10x), but never less than the topic's `max.message.bytes` (so a small,
/// very repetitive batch still goes through) nor more than the frame limit.
/// Batches are decompressed one at a time, so this bounds the memory one
/// partition of a produce request can make the broker allocate.
pub fn decompress_limit(records_bytes: usize, policy: &RecordPolicy, frame_bytes_max: usize) -> DecompressLimit {
    let bytes_max = records_bytes.saturating_mul(16).max(policy.message_bytes_max).min(frame_bytes_max);
    DecompressLimit { bytes_max }
}

fn append_one(
    config: &BrokerConfig,
    txns: &TxnService,
    partition: &Arc<Partition>,
    policy: &RecordPolicy,
    records: Option<bytes::Bytes>,
    item: &mut Pending,
) {
    let Some(records) = records else {
        item.response.error_code = error_code::CORRUPT_MESSAGE;
        return;
    };
    let limit = decompress_limit(records.len(), policy, config.live.frame_bytes_max());
    let validated = match validate_produced_batches(&records, limit) {
        Ok(v) => v,
        Err(e) => {
            item.response.error_code = match e {
                BatchError::UnsupportedMagic(_) => error_code::UNSUPPORTED_FOR_MESSAGE_FORMAT,
                ref e if e.is_invalid_record() => error_code::INVALID_RECORD,
                _ => error_code::CORRUPT_MESSAGE,
            };
            item.response.error_message = Some(str_bytes(&e.to_string()));
            log::info!("refused produce to {}-{}: {e}", partition.topic, partition.index);
            return;
        }
    };
    // Kafka's max.message.bytes bounds each batch, not the request.
    if let Some(big) = validated.headers.iter().find(|h| h.total_bytes() > policy.message_bytes_max) {
        item.response.error_code = error_code::MESSAGE_TOO_LARGE;
        item.response.error_message = Some(str_bytes(&format!(
            "a record batch of {} bytes exceeds the limit of {} bytes",
            big.total_bytes(),
            policy.message_bytes_max
        )));
        return;
    }
    if partition.is_compacted() {
        let keyless = crate::partition::keyless_record_refusal(
            &partition.topic,
            partition.index,
            &records,
            &validated.headers,
            limit,
        );
        if let Some(message) = keyless {
            item.response.error_code = error_code::INVALID_RECORD;
            item.response.error_message = Some(str_bytes(&message));
            return;
        }
    }
    if let Some(refusal) = producer_refusal(&validated.headers) {
        item.response.error_code = refusal.0;
        item.response.error_message = Some(str_bytes(refusal.1));
        return;
    }
    // A transactional batch goes only to a partition its transaction added
    // (AddPartitionsToTxn), at the transaction's epoch.
    if let Some(h) = validated.headers.iter().find(|h| h.is_transactional()) {
        if let Err(code) = txns.verify_partition(h.producer_id, h.producer_epoch, &partition.topic, partition.index) {
            item.response.error_code = code;
            item.response.error_message = Some(str_bytes(&format!(
                "producer {} epoch {} has no open transaction with {}-{}",
                h.producer_id, h.producer_epoch, partition.topic, partition.index
            )));
            return;
        }
    }
    let now_ms = crate::now_ms();
    if !policy.log_append_time {
        if let Some(message) = timestamp_refusal(&validated, policy, now_ms) {
            log::info!("refused produce to {}-{}: {message}", partition.topic, partition.index);
            item.response.error_code = error_code::INVALID_TIMESTAMP;
            item.response.error_message = Some(str_bytes(INVALID_TIMESTAMP_MESSAGE));
            item.response.record_errors = timestamp_record_errors(&records, limit, policy, now_ms);
            return;
        }
    }
    let mut headers = validated.headers;
    // Written straight from the request frame (the log stamps offsets into
    // its own copy of each batch head); only LogAppendTime, which changes
    // bytes under the CRC, needs a copy to rewrite.
    let rewritten: Vec<u8>;
    let bytes: &[u8] = if policy.log_append_time {
        let mut copy = records.to_vec();
        stamp_log_append_time(&mut copy, &mut headers, now_ms);
        rewritten = copy;
        &rewritten
    } else {
        &records
    };
    match partition.append(bytes, &headers, now_ms) {
        Ok(AppendOutcome::Appended(appended)) => {
            if policy.log_append_time {
                item.response.log_append_time_ms = now_ms;
            }
            item.response.base_offset = appended.base_offset;
            item.response.log_start_offset = partition.log_start_offset();
            item.end_offset = appended.last_offset + 1;
            item.partition = Some(Arc::clone(partition));
        }
        Ok(AppendOutcome::Duplicate { first_offset, last_offset, timestamp_ms }) => {
            // Kafka answers a retried batch with its original offsets (and, a
            // quirk kept here, its max timestamp as the log-append time). It
            // may not be durable yet: acks=all still waits for it.
            item.response.base_offset = first_offset;
            item.response.log_append_time_ms = timestamp_ms;
            item.response.log_start_offset = partition.log_start_offset();
            item.end_offset = last_offset + 1;
            item.partition = Some(Arc::clone(partition));
        }
        Ok(AppendOutcome::Refused(check)) => {
            let (code, message) = match check {
                SequenceCheck::InvalidEpoch { current_epoch } => (
                    error_code::INVALID_PRODUCER_EPOCH,
                    format!("the producer's epoch is older than its current epoch {current_epoch}"),
                ),
                SequenceCheck::OutOfOrder { expected_seq, received_seq } => (
                    error_code::OUT_OF_ORDER_SEQUENCE_NUMBER,
                    format!("out of order sequence number: expected {expected_seq}, received {received_seq}"),
                ),
                SequenceCheck::InvalidTxnState => (
                    error_code::INVALID_TXN_STATE,
                    "a non-transactional batch while the producer's transaction is open".to_string(),
                ),
                other => (error_code::UNKNOWN_SERVER_ERROR, format!("unexpected sequence check {other:?}")),
            };
            log::info!("refused produce to {}-{}: {message}", partition.topic, partition.index);
            item.response.error_code = code;
            item.response.error_message = Some(str_bytes(&message));
        }
        Err(e) => {
            log::error!("append to {}-{} failed: {e}", partition.topic, partition.index);
            item.response.error_code = error_code::KAFKA_STORAGE_ERROR;
            item.response.error_message = Some(str_bytes(&e.to_string()));
        }
    }
}

/// A record without a timestamp (Kafka does not check it).
const NO_TIMESTAMP: i64 = -1;

/// Kafka's partition-level message when records are refused for their timestamps.
const INVALID_TIMESTAMP_MESSAGE: &str = "One or more records have been rejected due to invalid timestamp";

/// Kafka's per-record errors (KIP-467) for the records whose timestamps are
/// out of range: each record's index in its batch and Kafka's message (whose
/// "offset" is the record's offset as the client sent it, base + delta).
fn timestamp_record_errors(
    records: &[u8],
    limit: DecompressLimit,
    policy: &RecordPolicy,
    now_ms: i64,
) -> Vec<BatchIndexAndErrorMessage> {
    let (earliest, latest) = policy.timestamp_range(now_ms);
    let mut out = Vec::new();
    let mut rest = records;
    while let Some((base_offset, size)) = peek_offset_and_size(rest) {
        let Some(batch) = rest.get(..size) else { break };
        let records = record_timestamps_decompressing(batch, limit).unwrap_or_default();
        for (index, (delta, timestamp)) in records.into_iter().enumerate() {
            if timestamp == NO_TIMESTAMP || (earliest..=latest).contains(&timestamp) {
                continue;
            }
            let mut error = BatchIndexAndErrorMessage::default();
            error.batch_index = index as i32;
            error.batch_index_error_message = Some(str_bytes(&format!(
                "Timestamp {timestamp} of message with offset {} is out of range. The timestamp should be within [{earliest}, {latest}]",
                base_offset + i64::from(delta)
            )));
            out.push(error);
        }
        rest = &rest[size..];
    }
    out
}

/// Kafka's CreateTime check: every record's timestamp (other than -1) must
/// lie within the topic's window around the broker's clock.
fn timestamp_refusal(validated: &ValidatedBatches, policy: &RecordPolicy, now_ms: i64) -> Option<String> {
    let (earliest, latest) = policy.timestamp_range(now_ms);
    validated.timestamp_bounds.iter().flatten().find_map(|&(lo, hi)| {
        let bad = if lo < earliest {
            lo
        } else if hi > latest {
            hi
        } else {
            return None;
        };
        Some(format!(
            "Timestamp {bad} of a record is out of range. The timestamp should be within [{earliest}, {latest}]"
        ))
    })
}

/// Writes the broker's time into every batch (and its parsed header) of a
/// LogAppendTime topic.
fn stamp_log_append_time(bytes: &mut [u8], headers: &mut [BatchHeader], now_ms: i64) {
    let mut pos = 0;
    for header in headers.iter_mut() {
        let end = pos + header.total_bytes();
        set_log_append_time(&mut bytes[pos..end], now_ms);
        if let Ok(stamped) = BatchHeader::parse(&bytes[pos..end]) {
            *header = BatchHeader { base_offset: header.base_offset, ..stamped };
        }
        pos = end;
    }
}

/// Batches no client may send: control batches (transaction markers are the
/// coordinator's), and several batches in one partition's
/// records when any carries a producer id (Kafka refuses more than one batch
/// per partition from Produce v3 on; Kafgres keeps accepting several plain
/// batches, but sequence checks need one).
fn producer_refusal(headers: &[BatchHeader]) -> Option<(i16, &'static str)> {
    if headers.iter().any(|h| h.is_control()) {
        return Some((error_code::INVALID_RECORD, "Clients are not allowed to write control records"));
    }
    if headers.len() > 1 && headers.iter().any(|h| h.has_producer_id()) {
        return Some((
            error_code::INVALID_RECORD,
            "Produce requests with version 3 and above must contain exactly one record batch per partition",
        ));
    }
    None
}
