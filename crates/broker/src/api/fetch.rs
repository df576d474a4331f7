//! Fetch: committed record bytes from each requested partition, with the
//! long-poll woken by appends.
//!
//! The fetch registers one `Notify` with every partition it reads *before*
//! reading, so an append that lands between the read and the wait still wakes
//! it; it then waits for that notification or its `max_wait_ms` deadline,
//! whichever comes first. No timer ticks: an idle fetch costs nothing until
//! data arrives or its deadline passes. Fetch sessions (KIP-227) are declined
//! with session id 0, which every client supports: each fetch is a full fetch.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId};

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::topic_name;
use crate::acl::Operation;
use crate::config::BrokerConfig;
use crate::partition::{FetchWaiter, Partition};
use crate::replication::check_leader_epoch;
use crate::splice::FileRanges;
use crate::topics::Topics;
use kafgres_log::LogError;

mod follower;

/// Fetch's isolation level of `read_committed` consumers: records up to the
/// last stable offset, with the aborted transactions among them.
const READ_COMMITTED: i8 = 1;

/// Caps on what one fetch may ask for, whatever the client says.
pub(super) const FETCH_WAIT_MS_MAX: i32 = 5 * 60 * 1000;

struct Wanted {
    topic_index: usize,
    partition: Option<Arc<Partition>>,
    partition_index: i32,
    fetch_offset: i64,
    partition_bytes_max: i32,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
}

pub struct Fetch;

impl Handler for Fetch {
    const KEY: ApiKey = ApiKey::Fetch;
    /// v4-v18: Kafka 4.1's range. v13+ names topics by id, which Metadata
    /// returns from v10; v18 only adds the high watermark a follower knows
    /// (KIP-1166, a tagged field consumers do not send), ignored here.
    const VERSIONS: Versions = Versions::new(4, 18);
    type Request = FetchRequest;
    type Response = FetchResponse;
    type Services<'a> = (&'a Topics, &'a BrokerConfig);

    async fn handle(
        (topics, config): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: FetchRequest,
    ) -> Answer<FetchResponse> {
        let version = cx.api_version;
        let replica_id = if version >= 15 { request.replica_state.replica_id.0 } else { request.replica_id.0 };
        if config.is_follower() {
            return not_the_leader(request);
        }
        if replica_id >= 0 {
            // A standby's copy reads every partition: Kafka asks followers
            // for CLUSTER_ACTION on the cluster.
            if !cx.may_on_cluster(Operation::ClusterAction) {
                return every_partition(request, error_code::TOPIC_AUTHORIZATION_FAILED);
            }
            return follower::handle(topics, &config.replication, replica_id, request).await;
        }
        if cx.throttle_time_ms > 0 {
            // Over its consumer_byte_rate: no records and no wait, only the
            // time to back off (Kafka's throttled fetch answer).
            let response = FetchResponse::default().with_throttle_time_ms(cx.throttle_time_ms);
            return Answer::Spliced { response, ranges: FileRanges::default(), woken_at: None };
        }
        let leader_epoch = config.replication.leader_epoch();
        let by_id = version >= 13;
        let mut response = FetchResponse::default();
        let mut wanted = Vec::new();
        let mut missing_codes = Vec::new();
        for topic in &request.topics {
            let found = if by_id { topics.get_by_id(&topic.topic_id) } else { topics.get(&topic.topic.0) };
            // READ is checked before existence (an id no topic has names
            // nothing to check); a refused topic is read as if absent.
            let name = found.as_ref().map_or(&*topic.topic.0, |t| t.name.as_str());
            let refused = !(by_id && found.is_none() || cx.may_on_topic(Operation::Read, name));
            let found = if refused { None } else { found };
            let mut out = FetchableTopicResponse::default();
            if by_id {
                out.topic_id = topic.topic_id;
            } else {
                out.topic = topic.topic.clone();
            }
            let topic_index = response.responses.len();
            response.responses.push(out);
            for p in &topic.partitions {
                wanted.push(Wanted {
                    topic_index,
                    partition: found.as_ref().and_then(|t| t.partition(p.partition).cloned()),
                    partition_index: p.partition,
                    fetch_offset: p.fetch_offset,
                    partition_bytes_max: p.partition_max_bytes,
                    current_leader_epoch: p.current_leader_epoch,
                    last_fetched_epoch: p.last_fetched_epoch,
                });
            }
            if let (false, Some(t)) = (by_id, &found) {
                response.responses[topic_index].topic = topic_name(&t.name);
            }
            // What a partition of a topic not served answers: an id nobody
            // knows is UNKNOWN_TOPIC_ID, an offline topic KAFKA_STORAGE_ERROR.
            let offline = match &found {
                Some(_) => false,
                None if by_id => topics.offline_by_id(&topic.topic_id).is_some(),
                None => topics.offline(&topic.topic.0).is_some(),
            };
            missing_codes.push(match (&found, offline, by_id) {
                _ if refused => error_code::TOPIC_AUTHORIZATION_FAILED,
                (Some(_), _, _) => error_code::UNKNOWN_TOPIC_OR_PARTITION,
                (None, true, _) => error_code::KAFKA_STORAGE_ERROR,
                (None, false, true) => error_code::UNKNOWN_TOPIC_ID,
                (None, false, false) => error_code::UNKNOWN_TOPIC_OR_PARTITION,
            });
        }

        let waiter = Arc::new(FetchWaiter::default());
        let _finish = FinishOnDrop(&waiter);
        for w in &wanted {
            if let Some(p) = &w.partition {
                p.register_fetch_waiter(&waiter);
            }
        }
        let wait_ms = request.max_wait_ms.clamp(0, FETCH_WAIT_MS_MAX) as u64;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        let min_bytes = request.min_bytes.max(0) as usize;
        let max_bytes = if request.max_bytes <= 0 { i32::MAX as usize } else { request.max_bytes as usize };
        let mut ranges = FileRanges::default();
        let committed_only = request.isolation_level == READ_COMMITTED;
        let mut woken_at = None;
        loop {
            let (partitions, total, any_error) =
                read_all(&wanted, &missing_codes, leader_epoch, max_bytes, committed_only, &mut ranges);
            let timed_out = tokio::time::Instant::now() >= deadline || topics.draining();
            if total >= min_bytes.max(1) || any_error || timed_out || wait_ms == 0 {
                for (topic_index, data) in partitions {
                    response.responses[topic_index].partitions.push(data);
                }
                return Answer::Spliced { response, ranges, woken_at: woken_at.filter(|_| total > 0) };
            }
            if tokio::time::timeout_at(deadline, waiter.notified()).await.is_err() {
                // Deadline: answer with whatever is there now (usually nothing).
                let (partitions, _, _) =
                    read_all(&wanted, &missing_codes, leader_epoch, max_bytes, committed_only, &mut ranges);
                for (topic_index, data) in partitions {
                    response.responses[topic_index].partitions.push(data);
                }
                return Answer::Spliced { response, ranges, woken_at: None };
            }
            // The latest wake counts: with fetch.min.bytes above one record, the
            // publish that completed the answer is where the broker's part starts.
            woken_at = waiter.take_woken_at().or(woken_at);
        }
    }
}

/// A standby's answer to any fetch: NOT_LEADER_OR_FOLLOWER everywhere, so
/// the client refreshes its metadata and finds the leader.
fn not_the_leader(request: FetchRequest) -> Answer<FetchResponse> {
    every_partition(request, error_code::NOT_LEADER_OR_FOLLOWER)
}

/// Every requested partition answered `code`, with no records.
fn every_partition(request: FetchRequest, code: i16) -> Answer<FetchResponse> {
    let mut response = FetchResponse::default();
    for topic in request.topics {
        let mut out = FetchableTopicResponse::default();
        out.topic_id = topic.topic_id;
        out.topic = topic.topic;
        for p in topic.partitions {
            let mut data = PartitionData::default();
            data.partition_index = p.partition;
            data.error_code = code;
            data.high_watermark = -1;
            data.last_stable_offset = -1;
            data.log_start_offset = -1;
            data.preferred_read_replica = BrokerId(-1);
            data.records = Some(Bytes::new());
            out.partitions.push(data);
        }
        response.responses.push(out);
    }
    Answer::Spliced { response, ranges: FileRanges::default(), woken_at: None }
}

/// Reads every wanted partition within the response byte budget.
/// Marks a fetch's waiter finished however the fetch ends.
pub(super) struct FinishOnDrop<'a>(pub(super) &'a FetchWaiter);

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

fn read_all(
    wanted: &[Wanted],
    missing_codes: &[i16],
    leader_epoch: i32,
    max_bytes: usize,
    committed_only: bool,
    ranges: &mut FileRanges,
) -> (Vec<(usize, PartitionData)>, usize, bool) {
    ranges.clear();
    let mut out = Vec::with_capacity(wanted.len());
    let mut total = 0usize;
    let mut any_error = false;
    for w in wanted {
        let mut data = PartitionData::default();
        data.partition_index = w.partition_index;
        data.high_watermark = -1;
        data.last_stable_offset = -1;
        data.log_start_offset = -1;
        data.preferred_read_replica = BrokerId(-1);
        data.records = Some(Bytes::new());
        match &w.partition {
            None => {
                data.error_code = missing_codes[w.topic_index];
                any_error = true;
            }
            Some(p) => {
                if let Err(code) = check_leader_epoch(w.current_leader_epoch, leader_epoch) {
                    data.error_code = code;
                    any_error = true;
                    out.push((w.topic_index, data));
                    continue;
                }
                let hw = p.high_watermark().offset;
                data.high_watermark = hw;
                // KIP-320 (v12+): the epoch of the last record the client has,
                // if it ends before that record in our history, diverged (a
                // failover cut it): say where, and send nothing.
                if w.last_fetched_epoch >= 0 {
                    let (epoch, end) = p.end_offset_for_epoch(w.last_fetched_epoch);
                    if epoch < w.last_fetched_epoch || end < w.fetch_offset {
                        data.diverging_epoch.epoch = epoch;
                        data.diverging_epoch.end_offset = end;
                        out.push((w.topic_index, data));
                        continue;
                    }
                }
                data.last_stable_offset = p.last_stable_offset();
                data.log_start_offset = p.log_start_offset();
                data.aborted_transactions = Some(Vec::new());
                // Each partition gets what is left of the response budget;
                // the log returns the first batch whole even when it is larger
                // (KIP-74), so the first partition with data always progresses.
                let budget = (w.partition_bytes_max.max(0) as u64).min(max_bytes.saturating_sub(total) as u64);
                if total > 0 && budget == 0 {
                    out.push((w.topic_index, data));
                    continue;
                }
                // Sent from the file without copying when it can be; read
                // into memory otherwise.
                let slice = if committed_only {
                    p.read_committed(w.fetch_offset, budget, total == 0).map(|(slice, lso, aborted)| {
                        data.last_stable_offset = lso;
                        data.aborted_transactions = Some(
                            aborted
                                .iter()
                                .map(|a| {
                                    let mut out = AbortedTransaction::default();
                                    out.producer_id = ProducerId(a.producer_id);
                                    out.first_offset = a.first_offset;
                                    out
                                })
                                .collect(),
                        );
                        slice
                    })
                } else {
                    p.read(w.fetch_offset, budget, total == 0)
                };
                let records = slice.and_then(|slice| match ranges.placeholder(slice.clone()) {
                    Some(placeholder) => Ok(placeholder),
                    None => slice.read_to_vec().map(Bytes::from),
                });
                match records {
                    Ok(bytes) => {
                        total += bytes.len();
                        p.count_bytes_out(bytes.len() as u64);
                        data.records = Some(bytes);
                    }
                    Err(LogError::OffsetOutOfRange { .. }) => {
                        data.error_code = error_code::OFFSET_OUT_OF_RANGE;
                        any_error = true;
                    }
                    Err(e) => {
                        log::error!("fetch from {}-{} failed: {e}", p.topic, p.index);
                        data.error_code = error_code::KAFKA_STORAGE_ERROR;
                        any_error = true;
                    }
                }
            }
        }
        out.push((w.topic_index, data));
    }
    (out, total, any_error)
}
