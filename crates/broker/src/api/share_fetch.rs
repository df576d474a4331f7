//! ShareFetch and ShareAcknowledge (KIP-932): share sessions, piggybacked
//! acknowledgements, and the long poll that acquires records for a member.
//!
//! ShareFetch registers one fetch waiter with every partition of its session
//! before looking, as Fetch does, so an append (or a release that makes
//! records available again) between a look and the wait still wakes it; it
//! answers once it acquired `min_bytes` or its `max_wait_ms` passed.
//! Acknowledgements are stored before the answer; acquisitions are stored
//! without waiting (docs/architecture.md, "Share groups").
//!
//! v2 of both (Kafka 4.2+): RENEW acknowledgements extend a lock (KIP-1222;
//! a ShareFetch flagged `is_renew_ack` only acknowledges, it acquires
//! nothing), and ShareFetch's acquire mode (KIP-1206): record-limit never
//! acquires more than `max_records`, which Kafgres's batch-optimized mode
//! does not either (records are acquired one by one, docs/conformance.md).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kafgres_wire::error_code;
use kafgres_wire::messages::share_fetch::{acquire_mode, RENEW_VERSION};
use kafgres_wire::messages::{
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
};
use kafgres_wire::ApiKey;
use kafka_protocol::messages::share_acknowledge_response::{
    PartitionData as AckPartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::share_fetch_response::{AcquiredRecords, PartitionData, ShareFetchableTopicResponse};
use uuid::Uuid;

use super::fetch::{FinishOnDrop, FETCH_WAIT_MS_MAX};
use super::handler::{refusal, Answer, Handler, RequestContext, Versions};
use crate::acl::Operation;
use crate::config::BrokerConfig;
use crate::partition::{FetchWaiter, Partition};
use crate::share::session::{SessionOutcome, SessionPartition, SessionRequest, SessionUse};
use crate::share::{AckBatch, Acquired, SharePartitionKey, ShareService};
use crate::topics::Topics;

/// The Java share consumer's default `max.poll.records`, used when a
/// request asks for no limit.
const RECORDS_MAX_DEFAULT: usize = 500;

pub struct ShareFetch;

impl Handler for ShareFetch {
    const KEY: ApiKey = ApiKey::ShareFetch;
    /// v1-v2: what Kafka 4.4 serves (v0 was KIP-932's early access; v2 adds
    /// the acquire mode and RENEW).
    const VERSIONS: Versions = Versions::new(1, 2);
    type Request = ShareFetchRequest;
    type Response = ShareFetchResponse;
    type Services<'a> = (&'a ShareService, &'a Topics, &'a BrokerConfig);

    async fn handle(
        (shares, topics, config): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: ShareFetchRequest,
    ) -> Answer<ShareFetchResponse> {
        let (group_id, member_id) = match member_reading(
            cx,
            req.group_id.as_ref().map(|g| g.0.as_str()),
            req.member_id.as_ref().map(|m| m.as_str()),
        ) {
            Ok(ids) => ids,
            Err(code) => return refusal::<Self>(cx, &req, code),
        };
        // An acquire mode Kafka does not know is refused as Kafka's request
        // parsing refuses it (v1 requests are always batch-optimized).
        if !matches!(req.share_acquire_mode, acquire_mode::BATCH_OPTIMIZED | acquire_mode::RECORD_LIMIT) {
            return refusal::<Self>(cx, &req, error_code::INVALID_REQUEST);
        }
        // A renewal fetches nothing: KIP-1222 has its fetch limits all 0.
        let limits = [req.max_wait_ms, req.min_bytes, req.max_bytes, req.max_records];
        if req.is_renew_ack && limits.iter().any(|l| *l != 0) {
            return refusal::<Self>(cx, &req, error_code::INVALID_REQUEST);
        }
        let renew_allowed = cx.api_version >= RENEW_VERSION;
        let epoch = req.share_session_epoch;
        let acks: Vec<(SessionPartition, Vec<AckBatch>)> = req
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p)))
            .filter(|(_, p)| !p.acknowledgement_batches.is_empty())
            .map(|(topic_id, p)| {
                let batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| AckBatch {
                        first_offset: b.first_offset,
                        last_offset: b.last_offset,
                        types: b.acknowledge_types.clone(),
                    })
                    .collect();
                ((topic_id, p.partition_index), batches)
            })
            .collect();
        // An initial request has nothing acquired to acknowledge (Kafka's check).
        if epoch == crate::share::session::INITIAL_EPOCH && !acks.is_empty() {
            return refusal::<Self>(cx, &req, error_code::INVALID_REQUEST);
        }
        let added: Vec<SessionPartition> =
            req.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p.partition_index))).collect();
        let forgotten: Vec<SessionPartition> =
            req.forgotten_topics_data.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p))).collect();
        let session = SessionRequest {
            group_id: &group_id,
            member_id: &member_id,
            epoch,
            added: &added,
            forgotten: &forgotten,
            using: SessionUse::Fetch,
            connection: Some(cx.peer),
        };
        let outcome = match shares.update_session(session) {
            Ok(outcome) => outcome,
            Err(code) => return refusal::<Self>(cx, &req, code),
        };
        let ack_codes = acknowledge(shares, topics, cx, &group_id, &member_id, &acks, renew_allowed).await;
        let lock_ms = shares.group_config(&group_id).record_lock_duration_ms;
        let closed = outcome == SessionOutcome::Closed;
        let partitions = match outcome {
            SessionOutcome::Open { partitions, .. } if !req.is_renew_ack => partitions,
            _ => {
                if closed {
                    shares.release_member(&group_id, &member_id);
                }
                // Only the acknowledgements are answered (a renewal keeps its
                // session open but acquires nothing).
                let mut response = ShareFetchResponse::from(kafka_protocol::messages::ShareFetchResponse::default());
                response.acquisition_lock_timeout_ms = lock_ms;
                for ((topic_id, index), code) in ack_codes {
                    let mut data = partition_data(index, config);
                    data.acknowledge_error_code = code;
                    push_partition(&mut response.responses, topic_id, data);
                }
                return response.into();
            }
        };
        let wanted = resolve(topics, cx, &partitions);
        let acquired = long_poll(shares, topics, &group_id, &member_id, &req, &wanted).await;
        let mut response = ShareFetchResponse::from(kafka_protocol::messages::ShareFetchResponse::default());
        response.acquisition_lock_timeout_ms = lock_ms;
        for (w, got) in wanted.iter().zip(acquired) {
            let mut data = partition_data(w.index, config);
            data.error_code = if w.partition.is_some() { got.error_code } else { w.missing_code };
            data.acknowledge_error_code = ack_codes.get(&(w.topic_id, w.index)).copied().unwrap_or(error_code::NONE);
            data.records = Some(got.records());
            data.acquired_records = got
                .ranges
                .iter()
                .map(|r| {
                    let mut a = AcquiredRecords::default();
                    a.first_offset = r.first_offset;
                    a.last_offset = r.last_offset;
                    a.delivery_count = r.delivery_count;
                    a
                })
                .collect();
            push_partition(&mut response.responses, w.topic_id, data);
        }
        response.into()
    }

    fn refused(_: &RequestContext<'_>, _: &ShareFetchRequest, code: i16) -> Option<ShareFetchResponse> {
        let mut response = ShareFetchResponse::from(kafka_protocol::messages::ShareFetchResponse::default());
        response.error_code = code;
        Some(response)
    }
}

/// A partition of the session, resolved.
struct Wanted {
    topic_id: Uuid,
    index: i32,
    partition: Option<Arc<Partition>>,
    missing_code: i16,
}

/// The group and member a ShareFetch or ShareAcknowledge names, both
/// required, and the member's right to read the group; else the error code.
fn member_reading(cx: &RequestContext<'_>, group: Option<&str>, member: Option<&str>) -> Result<(String, String), i16> {
    let (group_id, member_id) = (group.unwrap_or_default().to_string(), member.unwrap_or_default().to_string());
    if group_id.is_empty() || member_id.is_empty() {
        return Err(error_code::INVALID_REQUEST);
    }
    if !cx.may_on_group(Operation::Read, &group_id) {
        return Err(error_code::GROUP_AUTHORIZATION_FAILED);
    }
    Ok((group_id, member_id))
}

fn resolve(topics: &Topics, cx: &RequestContext<'_>, partitions: &BTreeSet<SessionPartition>) -> Vec<Wanted> {
    partitions
        .iter()
        .map(|(topic_id, index)| {
            let topic = topics.get_by_id(topic_id);
            let (partition, missing_code) = match &topic {
                None => (None, error_code::UNKNOWN_TOPIC_ID),
                Some(t) if !cx.may_on_topic(Operation::Read, &t.name) => (None, error_code::TOPIC_AUTHORIZATION_FAILED),
                Some(t) => match t.partition(*index) {
                    Some(p) => (Some(Arc::clone(p)), error_code::NONE),
                    None => (None, error_code::UNKNOWN_TOPIC_OR_PARTITION),
                },
            };
            Wanted { topic_id: *topic_id, index: *index, partition, missing_code }
        })
        .collect()
}

/// Acquires from every wanted partition until `min_bytes` are acquired or
/// `max_wait_ms` passed; one [`Acquired`] per wanted partition.
async fn long_poll(
    shares: &ShareService,
    topics: &Topics,
    group_id: &str,
    member_id: &str,
    req: &ShareFetchRequest,
    wanted: &[Wanted],
) -> Vec<Acquired> {
    let waiter = Arc::new(FetchWaiter::default());
    let _finish = FinishOnDrop(&waiter);
    for p in wanted.iter().filter_map(|w| w.partition.as_ref()) {
        p.register_fetch_waiter(&waiter);
    }
    let wait_ms = req.max_wait_ms.clamp(0, FETCH_WAIT_MS_MAX) as u64;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    let min_bytes = req.min_bytes.max(1) as usize;
    let bytes_max = if req.max_bytes <= 0 { i32::MAX as u64 } else { req.max_bytes as u64 };
    let records_max = if req.max_records <= 0 { RECORDS_MAX_DEFAULT } else { req.max_records as usize };
    let mut acquired: Vec<Acquired> = wanted.iter().map(|_| Acquired::default()).collect();
    loop {
        let mut writes = Vec::new();
        // max_records and max_bytes are the whole answer's budget.
        let mut taken: usize = acquired.iter().map(|a| a.record_count() as usize).sum();
        let mut bytes_taken: u64 = acquired.iter().map(|a| a.byte_count() as u64).sum();
        for (w, got) in wanted.iter().zip(acquired.iter_mut()) {
            let Some(partition) = &w.partition else { continue };
            if taken >= records_max || bytes_taken >= bytes_max {
                break;
            }
            let key = SharePartitionKey { group_id: group_id.to_owned(), topic_id: w.topic_id, partition: w.index };
            let more =
                shares.acquire(&key, member_id, partition, records_max - taken, bytes_max - bytes_taken, &mut writes);
            taken += more.record_count() as usize;
            bytes_taken += more.byte_count() as u64;
            got.merge(more);
        }
        shares.store_in_background(writes);
        let bytes: usize = acquired.iter().map(Acquired::byte_count).sum();
        let any_error = acquired.iter().any(|a| a.error_code != error_code::NONE);
        let timed_out = tokio::time::Instant::now() >= deadline || topics.draining();
        if bytes >= min_bytes || any_error || timed_out || wait_ms == 0 {
            return acquired;
        }
        if tokio::time::timeout_at(deadline, waiter.notified()).await.is_err() {
            return acquired;
        }
    }
}

/// Applies acknowledgements per partition (RENEW among them if
/// `renew_allowed`: a v2 request) and waits until they are stored; the
/// acknowledge error code of each partition.
async fn acknowledge(
    shares: &ShareService,
    topics: &Topics,
    cx: &RequestContext<'_>,
    group_id: &str,
    member_id: &str,
    acks: &[(SessionPartition, Vec<AckBatch>)],
    renew_allowed: bool,
) -> BTreeMap<SessionPartition, i16> {
    let mut codes = BTreeMap::new();
    let mut writes = Vec::new();
    for ((topic_id, index), batches) in acks {
        let code = match topics.get_by_id(topic_id) {
            None => error_code::UNKNOWN_TOPIC_ID,
            Some(t) if !cx.may_on_topic(Operation::Read, &t.name) => error_code::TOPIC_AUTHORIZATION_FAILED,
            Some(t) if t.partition(*index).is_none() => error_code::UNKNOWN_TOPIC_OR_PARTITION,
            Some(_) => {
                let key = SharePartitionKey { group_id: group_id.to_owned(), topic_id: *topic_id, partition: *index };
                shares.acknowledge(&key, member_id, batches, renew_allowed, &mut writes)
            }
        };
        codes.insert((*topic_id, *index), code);
    }
    let stored: Vec<SessionPartition> = writes.iter().map(|w| (w.topic_id, w.partition)).collect();
    if let Some(write) = shares.store(writes) {
        if let Err(e) = write.await {
            log::warn!("storing the acknowledgements of share group {group_id} failed: {e}");
            for p in stored {
                codes.insert(p, error_code::COORDINATOR_NOT_AVAILABLE);
            }
        }
    }
    codes
}

fn partition_data(index: i32, config: &BrokerConfig) -> PartitionData {
    let mut data = PartitionData::default();
    data.partition_index = index;
    data.current_leader.leader_id = config.node_id;
    data.current_leader.leader_epoch = config.replication.leader_epoch();
    data.records = Some(bytes::Bytes::new());
    data
}

fn push_partition(responses: &mut Vec<ShareFetchableTopicResponse>, topic_id: Uuid, data: PartitionData) {
    match responses.iter_mut().find(|t| t.topic_id == topic_id) {
        Some(t) => t.partitions.push(data),
        None => {
            let mut t = ShareFetchableTopicResponse::default();
            t.topic_id = topic_id;
            t.partitions.push(data);
            responses.push(t);
        }
    }
}

pub struct ShareAcknowledge;

impl Handler for ShareAcknowledge {
    const KEY: ApiKey = ApiKey::ShareAcknowledge;
    /// v1-v2: what Kafka 4.4 serves (v2 adds RENEW and answers the lock's
    /// duration).
    const VERSIONS: Versions = Versions::new(1, 2);
    type Request = ShareAcknowledgeRequest;
    type Response = ShareAcknowledgeResponse;
    type Services<'a> = (&'a ShareService, &'a Topics, &'a BrokerConfig);

    async fn handle(
        (shares, topics, config): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: ShareAcknowledgeRequest,
    ) -> Answer<ShareAcknowledgeResponse> {
        let (group_id, member_id) = match member_reading(
            cx,
            req.group_id.as_ref().map(|g| g.0.as_str()),
            req.member_id.as_ref().map(|m| m.as_str()),
        ) {
            Ok(ids) => ids,
            Err(code) => return refusal::<Self>(cx, &req, code),
        };
        let session = SessionRequest {
            group_id: &group_id,
            member_id: &member_id,
            epoch: req.share_session_epoch,
            added: &[],
            forgotten: &[],
            using: SessionUse::Acknowledge,
            connection: Some(cx.peer),
        };
        let outcome = match shares.update_session(session) {
            Ok(outcome) => outcome,
            Err(code) => return refusal::<Self>(cx, &req, code),
        };
        let acks: Vec<(SessionPartition, Vec<AckBatch>)> = req
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p)))
            .map(|(topic_id, p)| {
                let batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| AckBatch {
                        first_offset: b.first_offset,
                        last_offset: b.last_offset,
                        types: b.acknowledge_types.clone(),
                    })
                    .collect();
                ((topic_id, p.partition_index), batches)
            })
            .collect();
        let renew_allowed = cx.api_version >= RENEW_VERSION;
        let codes = acknowledge(shares, topics, cx, &group_id, &member_id, &acks, renew_allowed).await;
        if outcome == SessionOutcome::Closed {
            shares.release_member(&group_id, &member_id);
        }
        let mut response =
            ShareAcknowledgeResponse::from(kafka_protocol::messages::ShareAcknowledgeResponse::default());
        // v2: how long the renewed records are now locked for (dropped below v2).
        response.acquisition_lock_timeout_ms = shares.group_config(&group_id).record_lock_duration_ms;
        for ((topic_id, index), code) in codes {
            let mut data = AckPartitionData::default();
            data.partition_index = index;
            data.error_code = code;
            data.current_leader.leader_id = config.node_id;
            data.current_leader.leader_epoch = config.replication.leader_epoch();
            match response.responses.iter_mut().find(|t| t.topic_id == topic_id) {
                Some(t) => t.partitions.push(data),
                None => {
                    let mut t = ShareAcknowledgeTopicResponse::default();
                    t.topic_id = topic_id;
                    t.partitions.push(data);
                    response.responses.push(t);
                }
            }
        }
        response.into()
    }

    fn refused(_: &RequestContext<'_>, _: &ShareAcknowledgeRequest, code: i16) -> Option<ShareAcknowledgeResponse> {
        let mut response =
            ShareAcknowledgeResponse::from(kafka_protocol::messages::ShareAcknowledgeResponse::default());
        response.error_code = code;
        Some(response)
    }
}
