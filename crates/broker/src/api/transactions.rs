//! AddPartitionsToTxn (v0-5), AddOffsetsToTxn (v0-4), TxnOffsetCommit (v0-6)
//! and EndTxn (v0-5): translate between the wire messages and
//! [`crate::txn::TxnService`]. TxnOffsetCommit v5 and EndTxn v5 are
//! transaction version 2 (KIP-890 part 2): the group joins the transaction
//! with its offsets, and every end bumps the epoch, answered in EndTxn.
//! TxnOffsetCommit v6 (KIP-1319, Kafka 4.4) names topics by id: the ids are
//! turned into names first (an unknown id is UNKNOWN_TOPIC_ID for its
//! partitions), the rest works by name, and the answer names topics by id.
//! AddPartitionsToTxn v4+ is the batched form Kafka's partition leaders send
//! their coordinator (`verify_only`: is the partition in the transaction?),
//! served to holders of CLUSTER_ACTION as Kafka serves it.

use kafgres_wire::error_code;
use kafgres_wire::messages::{
    txn_offset_commit, TxnOffsetCommitRequest, TxnOffsetCommitResponse, TxnOffsetCommitResponseTopic,
};
use kafgres_wire::ApiKey;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_response::TxnOffsetCommitResponsePartition;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    EndTxnRequest, EndTxnResponse, ProducerId,
};

use super::handler::{refusal, Answer, Handler, RequestContext, Versions};
use super::topic_name;
use crate::acl::Operation;
use crate::topics::Topics;
use crate::txn::rules::fenced;
use crate::txn::TxnService;

/// The versions from which each API can carry PRODUCER_FENCED (older ones
/// get INVALID_PRODUCER_EPOCH, as Kafka maps it).
const FENCED_SINCE_VERSION: i16 = 2;

/// The first TxnOffsetCommit and EndTxn versions of transaction version 2.
const TRANSACTION_V2_VERSION: i16 = 5;

pub struct AddPartitionsToTxn;

impl Handler for AddPartitionsToTxn {
    const KEY: ApiKey = ApiKey::AddPartitionsToTxn;
    /// v0-v5: v4 batches transactions for brokers (KIP-890 part 1:
    /// `verify_only`, CLUSTER_ACTION required), v5 is its transaction
    /// version 2 form.
    const VERSIONS: Versions = Versions::new(0, 5);
    type Request = AddPartitionsToTxnRequest;
    type Response = AddPartitionsToTxnResponse;
    type Services<'a> = &'a TxnService;

    async fn handle(
        txns: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: AddPartitionsToTxnRequest,
    ) -> Answer<AddPartitionsToTxnResponse> {
        let version = cx.api_version;
        if version >= BATCHED_VERSION {
            return batched(txns, cx, &req).await.into();
        }
        let transactional_id = req.v3_and_below_transactional_id.0.to_string();
        if !cx.may_on_transactional_id(Operation::Write, &transactional_id) {
            return refusal::<Self>(cx, &req, error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        }
        // A topic the client may not write fails the request: its partitions
        // TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED.
        if req.v3_and_below_topics.iter().any(|t| !cx.may_on_topic(Operation::Write, &t.name.0)) {
            let mut response = refusal::<Self>(cx, &req, error_code::OPERATION_NOT_ATTEMPTED);
            if let Answer::Respond(r) = &mut response {
                for t in &mut r.results_by_topic_v3_and_below {
                    if !cx.may_on_topic(Operation::Write, &t.name.0) {
                        for p in &mut t.results_by_partition {
                            p.partition_error_code = error_code::TOPIC_AUTHORIZATION_FAILED;
                        }
                    }
                }
            }
            return response;
        }
        let producer = (req.v3_and_below_producer_id.0, req.v3_and_below_producer_epoch);
        let partitions: Vec<(String, i32)> = req
            .v3_and_below_topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), *p)))
            .collect();
        let fenced_code = fenced(version, FENCED_SINCE_VERSION);
        let results = txns.add_partitions(&transactional_id, producer, fenced_code, &partitions).await;
        let mut response = AddPartitionsToTxnResponse::default();
        response.results_by_topic_v3_and_below = by_topic(results);
        response.into()
    }

    fn refused(
        cx: &RequestContext<'_>,
        req: &AddPartitionsToTxnRequest,
        code: i16,
    ) -> Option<AddPartitionsToTxnResponse> {
        let mut response = AddPartitionsToTxnResponse::default();
        if cx.api_version >= BATCHED_VERSION {
            response.error_code = code;
            return Some(response);
        }
        response.results_by_topic_v3_and_below = req
            .v3_and_below_topics
            .iter()
            .map(|t| {
                let mut out = AddPartitionsToTxnTopicResult::default();
                out.name = t.name.clone();
                out.results_by_partition = t
                    .partitions
                    .iter()
                    .map(|&partition| {
                        let mut result = AddPartitionsToTxnPartitionResult::default();
                        result.partition_index = partition;
                        result.partition_error_code = code;
                        result
                    })
                    .collect();
                out
            })
            .collect();
        Some(response)
    }
}

/// AddPartitionsToTxn v4: transactions batched, for brokers.
const BATCHED_VERSION: i16 = 4;

/// AddPartitionsToTxn v4+: each transaction's partitions verified
/// (`verify_only`) or added; CLUSTER_ACTION on the cluster is required, as in
/// Kafka, where only brokers send these versions.
async fn batched(
    txns: &TxnService,
    cx: &RequestContext<'_>,
    req: &AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let mut response = AddPartitionsToTxnResponse::default();
    if !cx.may_on_cluster(Operation::ClusterAction) {
        response.error_code = error_code::CLUSTER_AUTHORIZATION_FAILED;
        return response;
    }
    for transaction in &req.transactions {
        let id = transaction.transactional_id.0.to_string();
        let producer = (transaction.producer_id.0, transaction.producer_epoch);
        let partitions: Vec<(String, i32)> = transaction
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), *p)))
            .collect();
        let results = if transaction.verify_only {
            txns.verify_partitions(&id, producer, &partitions).await
        } else {
            txns.add_partitions(&id, producer, error_code::PRODUCER_FENCED, &partitions).await
        };
        let mut result = AddPartitionsToTxnResult::default();
        result.transactional_id = transaction.transactional_id.clone();
        result.topic_results = by_topic(results);
        response.results_by_transaction.push(result);
    }
    response
}

/// Partition results grouped by topic, in the order topics first appear.
fn by_topic(results: Vec<((String, i32), i16)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut by_topic: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for ((topic, partition), code) in results {
        let mut result = AddPartitionsToTxnPartitionResult::default();
        result.partition_index = partition;
        result.partition_error_code = code;
        match by_topic.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.results_by_partition.push(result),
            None => {
                let mut t = AddPartitionsToTxnTopicResult::default();
                t.name = topic_name(&topic);
                t.results_by_partition.push(result);
                by_topic.push(t);
            }
        }
    }
    by_topic
}

pub struct AddOffsetsToTxn;

impl Handler for AddOffsetsToTxn {
    const KEY: ApiKey = ApiKey::AddOffsetsToTxn;
    const VERSIONS: Versions = Versions::new(0, 4);
    type Request = AddOffsetsToTxnRequest;
    type Response = AddOffsetsToTxnResponse;
    type Services<'a> = &'a TxnService;

    async fn handle(
        txns: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: AddOffsetsToTxnRequest,
    ) -> Answer<AddOffsetsToTxnResponse> {
        let version = cx.api_version;
        let mut response = AddOffsetsToTxnResponse::default();
        let group_id = req.group_id.0.to_string();
        response.error_code = if !cx.may_on_transactional_id(Operation::Write, &req.transactional_id.0) {
            error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        } else if !cx.may_on_group(Operation::Read, &group_id) {
            error_code::GROUP_AUTHORIZATION_FAILED
        } else if group_id.is_empty() {
            error_code::INVALID_GROUP_ID
        } else {
            let producer = (req.producer_id.0, req.producer_epoch);
            let fenced_code = fenced(version, FENCED_SINCE_VERSION);
            match txns.add_offsets(&req.transactional_id.0, producer, fenced_code, &group_id).await {
                Ok(()) => error_code::NONE,
                Err(code) => code,
            }
        };
        response.into()
    }

    fn refused(_: &RequestContext<'_>, _: &AddOffsetsToTxnRequest, code: i16) -> Option<AddOffsetsToTxnResponse> {
        let mut response = AddOffsetsToTxnResponse::default();
        response.error_code = code;
        Some(response)
    }
}

pub struct TxnOffsetCommit;

impl Handler for TxnOffsetCommit {
    const KEY: ApiKey = ApiKey::TxnOffsetCommit;
    /// v0-v6: v5 is transaction version 2 (KIP-890), sent without
    /// AddOffsetsToTxn; v6 names topics by id (KIP-1319, Kafka 4.4).
    const VERSIONS: Versions = Versions::new(0, txn_offset_commit::TOPIC_ID_VERSION);
    type Request = TxnOffsetCommitRequest;
    type Response = TxnOffsetCommitResponse;
    type Services<'a> = (&'a Topics, &'a TxnService);

    async fn handle(
        (topics, txns): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: TxnOffsetCommitRequest,
    ) -> Answer<TxnOffsetCommitResponse> {
        let version = cx.api_version;
        let by_id = version >= txn_offset_commit::TOPIC_ID_VERSION;
        let mut req = req;
        if by_id {
            name_topics_by_id(topics, &mut req);
        }
        if !cx.may_on_transactional_id(Operation::Write, &req.transactional_id.0) {
            return refusal::<Self>(cx, &req, error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        }
        if !cx.may_on_group(Operation::Read, &req.group_id.0) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        // A topic whose id this broker does not know is answered
        // UNKNOWN_TOPIC_ID (as Kafka 4.4's KafkaApis resolves ids before
        // anything else), one the client may not read
        // TOPIC_AUTHORIZATION_FAILED; the others' offsets are committed.
        let refused_code = |name: &str| {
            if by_id && name.is_empty() {
                Some(error_code::UNKNOWN_TOPIC_ID)
            } else if !cx.may_on_topic(Operation::Read, name) {
                Some(error_code::TOPIC_AUTHORIZATION_FAILED)
            } else {
                None
            }
        };
        let offsets = req
            .topics
            .iter()
            .filter(|t| refused_code(&t.name.0).is_none())
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (
                        t.name.0.to_string(),
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata.as_ref().map(|m| m.to_string()),
                    )
                })
            })
            .collect();
        let producer = (req.producer_id.0, req.producer_epoch);
        let fenced_code = fenced(version, FENCED_SINCE_VERSION);
        let group_id = req.group_id.0.to_string();
        let code = if group_id.is_empty() {
            error_code::INVALID_GROUP_ID
        } else {
            let implicit_add = version >= TRANSACTION_V2_VERSION;
            let committed = txns.txn_offset_commit(
                &req.transactional_id.0,
                producer,
                fenced_code,
                &group_id,
                offsets,
                implicit_add,
            );
            match committed.await {
                Ok(()) => error_code::NONE,
                Err(code) => code,
            }
        };
        every_partition_answered(version, &req, |name| refused_code(name).unwrap_or(code)).into()
    }

    fn refused(cx: &RequestContext<'_>, req: &TxnOffsetCommitRequest, code: i16) -> Option<TxnOffsetCommitResponse> {
        Some(every_partition_answered(cx.api_version, req, |_| code))
    }
}

/// Sets the name of each topic whose id this broker knows (the others keep
/// an empty name: no topic has one).
fn name_topics_by_id(topics: &Topics, req: &mut TxnOffsetCommitRequest) {
    for t in &mut req.topics {
        if let Some(topic) = topics.get_by_id(&t.topic_id) {
            t.name = topic_name(&topic.name);
        }
    }
}

/// TxnOffsetCommit's answer: each partition asked for, in request order,
/// with its topic's `code_of(name)` (the offsets are stored all or none);
/// from v6 each topic by its id, as asked.
fn every_partition_answered(
    version: i16,
    req: &TxnOffsetCommitRequest,
    code_of: impl Fn(&str) -> i16,
) -> TxnOffsetCommitResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let code = code_of(&t.name.0);
            let mut out = TxnOffsetCommitResponseTopic::default();
            if version >= txn_offset_commit::TOPIC_ID_VERSION {
                out.topic_id = t.topic_id;
            } else {
                out.name = t.name.clone();
            }
            out.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut r = TxnOffsetCommitResponsePartition::default();
                    r.partition_index = p.partition_index;
                    r.error_code = code;
                    r
                })
                .collect();
            out
        })
        .collect();
    TxnOffsetCommitResponse { topics, ..Default::default() }
}

pub struct EndTxn;

impl Handler for EndTxn {
    const KEY: ApiKey = ApiKey::EndTxn;
    /// v0-v5: v5 is transaction version 2 (KIP-890): the end bumps the
    /// epoch, and the answer carries the producer id and epoch to go on with.
    const VERSIONS: Versions = Versions::new(0, 5);
    type Request = EndTxnRequest;
    type Response = EndTxnResponse;
    type Services<'a> = &'a TxnService;

    async fn handle(txns: Self::Services<'_>, cx: &RequestContext<'_>, req: EndTxnRequest) -> Answer<EndTxnResponse> {
        let version = cx.api_version;
        let producer = (req.producer_id.0, req.producer_epoch);
        let fenced_code = fenced(version, FENCED_SINCE_VERSION);
        let mut response = EndTxnResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        if !cx.may_on_transactional_id(Operation::Write, &req.transactional_id.0) {
            response.error_code = error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
            return response.into();
        }
        let version_2 = version >= TRANSACTION_V2_VERSION;
        match txns.end_txn(&req.transactional_id.0, producer, fenced_code, req.committed, version_2).await {
            Ok((producer_id, producer_epoch)) => {
                response.producer_id = ProducerId(producer_id);
                response.producer_epoch = producer_epoch;
            }
            Err(code) => response.error_code = code,
        }
        response.into()
    }

    fn refused(_: &RequestContext<'_>, _: &EndTxnRequest, code: i16) -> Option<EndTxnResponse> {
        let mut response = EndTxnResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        response.error_code = code;
        Some(response)
    }
}
