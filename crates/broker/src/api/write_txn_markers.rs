//! WriteTxnMarkers: commit or abort markers appended on request, answered
//! once durable. Kafka's coordinators send it to partition leaders; a client
//! sends it to end a hanging transaction (`kafka-transactions.sh abort`: a
//! partition holds records of a transaction its coordinator does not know),
//! which is what it is for here, as Kafgres's own coordinator appends its
//! markers directly (crate::txn).
//!
//! As in Kafka: CLUSTER_ACTION on the cluster is required (every partition
//! CLUSTER_AUTHORIZATION_FAILED otherwise), an unknown partition is
//! UNKNOWN_TOPIC_OR_PARTITION, a standby's NOT_LEADER_OR_FOLLOWER, and a
//! marker older than the producer's epoch in the partition
//! INVALID_PRODUCER_EPOCH. The coordinator epoch is written into the marker
//! but not checked: this node's one coordinator never moves, and
//! DescribeProducers, where the tool reads it, shows none (-1). v2's
//! transaction version (KIP-1228) is read and not used: the partition checks
//! the producer epoch of a marker the same way for every version.

use std::sync::Arc;
use std::time::Duration;

use kafgres_log::{SequenceCheck, TxnEnd};
use kafgres_wire::error_code;
use kafgres_wire::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafgres_wire::ApiKey;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};

use super::handler::{refusal, Answer, Handler, RequestContext, Versions};
use crate::acl::Operation;
use crate::config::BrokerConfig;
use crate::partition::{AppendOutcome, Partition};
use crate::topics::Topics;

/// How long the answer waits for the markers to be durable (and on the
/// synchronous standbys) before the partition is answered REQUEST_TIMED_OUT.
const DURABLE_TIMEOUT: Duration = Duration::from_secs(30);

pub struct WriteTxnMarkers;

impl Handler for WriteTxnMarkers {
    const KEY: ApiKey = ApiKey::WriteTxnMarkers;
    /// v1-v2: Kafka 4.4's range (4.0 removed v0); v2 adds each marker's
    /// transaction version.
    const VERSIONS: Versions = Versions::new(1, 2);
    type Request = WriteTxnMarkersRequest;
    type Response = WriteTxnMarkersResponse;
    type Services<'a> = (&'a BrokerConfig, &'a Topics);

    async fn handle(
        (config, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: WriteTxnMarkersRequest,
    ) -> Answer<WriteTxnMarkersResponse> {
        if !cx.may_on_cluster(Operation::ClusterAction) {
            return refusal::<Self>(cx, &req, error_code::CLUSTER_AUTHORIZATION_FAILED);
        }
        let now = crate::now_ms();
        // (marker, topic, partition) -> its code, or the partition and the
        // log end to wait for.
        let mut waits: Vec<(usize, usize, usize, Arc<Partition>, i64)> = Vec::new();
        let mut response = answer_every_partition(&req, error_code::NONE);
        for (m, marker) in req.markers.iter().map(|w| &w.marker).enumerate() {
            let end = if marker.transaction_result { TxnEnd::Commit } else { TxnEnd::Abort };
            for (t, topic) in marker.topics.iter().enumerate() {
                let found = topics.get(&topic.name.0);
                for (p, &index) in topic.partition_indexes.iter().enumerate() {
                    let code = &mut response.markers[m].topics[t].partitions[p].error_code;
                    let Some(partition) = found.as_ref().and_then(|t| t.partition(index)) else {
                        *code = topics.missing_code(&topic.name.0, error_code::UNKNOWN_TOPIC_OR_PARTITION);
                        continue;
                    };
                    if config.is_follower() {
                        *code = error_code::NOT_LEADER_OR_FOLLOWER;
                        continue;
                    }
                    let appended = partition.append_marker(
                        marker.producer_id.0,
                        marker.producer_epoch,
                        end,
                        marker.coordinator_epoch,
                        now,
                    );
                    match appended {
                        Ok(AppendOutcome::Appended(a)) => {
                            waits.push((m, t, p, Arc::clone(partition), a.last_offset + 1))
                        }
                        Ok(AppendOutcome::Refused(SequenceCheck::InvalidEpoch { .. })) => {
                            *code = error_code::INVALID_PRODUCER_EPOCH
                        }
                        Ok(other) => {
                            log::warn!("WriteTxnMarkers to {}-{index}: refused ({other:?})", topic.name.0);
                            *code = error_code::INVALID_PRODUCER_EPOCH;
                        }
                        Err(e) => {
                            log::error!("WriteTxnMarkers to {}-{index} failed: {e}", topic.name.0);
                            *code = error_code::KAFKA_STORAGE_ERROR;
                        }
                    }
                }
            }
        }
        for (m, t, p, partition, end_offset) in waits {
            if let Err(e) = partition.wait_committed(end_offset, DURABLE_TIMEOUT).await {
                log::warn!("marker in {}-{} not durable: {e}", partition.topic, partition.index);
                response.markers[m].topics[t].partitions[p].error_code = match e {
                    crate::partition::DurabilityError::NotReplicated => error_code::REQUEST_TIMED_OUT,
                    _ => error_code::KAFKA_STORAGE_ERROR,
                };
            }
        }
        response.into()
    }

    fn refused(_: &RequestContext<'_>, req: &WriteTxnMarkersRequest, code: i16) -> Option<WriteTxnMarkersResponse> {
        Some(answer_every_partition(req, code))
    }
}

/// The response's shape: every partition of every marker, in request order.
fn answer_every_partition(req: &WriteTxnMarkersRequest, code: i16) -> WriteTxnMarkersResponse {
    // Built as kafka-protocol's message, which v2 wraps.
    let mut response = kafka_protocol::messages::WriteTxnMarkersResponse::default();
    response.markers = req
        .markers
        .iter()
        .map(|w| &w.marker)
        .map(|marker| {
            let mut result = WritableTxnMarkerResult::default();
            result.producer_id = marker.producer_id;
            result.topics = marker
                .topics
                .iter()
                .map(|topic| {
                    let mut t = WritableTxnMarkerTopicResult::default();
                    t.name = topic.name.clone();
                    t.partitions = topic
                        .partition_indexes
                        .iter()
                        .map(|&index| {
                            let mut p = WritableTxnMarkerPartitionResult::default();
                            p.partition_index = index;
                            p.error_code = code;
                            p
                        })
                        .collect();
                    t
                })
                .collect();
            result
        })
        .collect();
    response.into()
}
