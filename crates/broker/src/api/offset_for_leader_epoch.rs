//! OffsetForLeaderEpoch: the end offset of a leader epoch, which clients use
//! to detect log truncation after a leader change (the Java consumer's
//! position validation, librdkafka after it sees a new epoch).
//!
//! The answer comes from the partition's leader epoch history (each batch
//! carries the epoch of the leader that appended it; every start of a
//! primary and every promotion starts a new epoch, docs/replication.md):
//! the largest epoch at or below the one asked for, and where it ends (the
//! start of the next one, or the log end for the current one); an undefined
//! epoch (-1) or a later one than any is unknown (-1, -1). Consumers
//! (replica id -1, and every request before v3) get at most the high
//! watermark as the end: they can never have read past it. Followers get the
//! log end, and truncate what lies past the answer.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::handler::{Answer, Handler, RequestContext, Versions};
use crate::acl::Operation;

use crate::config::BrokerConfig;
use crate::replication::check_leader_epoch;
use crate::topics::Topics;
use kafgres_log::epochs::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};

pub struct OffsetForLeaderEpoch;

impl Handler for OffsetForLeaderEpoch {
    const KEY: ApiKey = ApiKey::OffsetForLeaderEpoch;
    /// v2-v4: Kafka 4.x removed v0-v1 (KIP-896), and kafka-protocol 0.18
    /// decodes only v2-v4.
    const VERSIONS: Versions = Versions::new(2, 4);
    type Request = OffsetForLeaderEpochRequest;
    type Response = OffsetForLeaderEpochResponse;
    type Services<'a> = (&'a Topics, &'a BrokerConfig);

    async fn handle(
        (topics, config): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: OffsetForLeaderEpochRequest,
    ) -> Answer<OffsetForLeaderEpochResponse> {
        let version = cx.api_version;
        let current = config.replication.leader_epoch();
        let consumer = version < 3 || request.replica_id.0 < 0;
        let mut response = OffsetForLeaderEpochResponse::default();
        // A follower needs CLUSTER_ACTION on the cluster, a consumer DESCRIBE on
        // the topic or (as in Kafka) CLUSTER_ACTION on the cluster.
        let cluster_action = cx.may_on_cluster(Operation::ClusterAction);
        let follower_refused = !consumer && !cluster_action;
        for t in request.topics {
            let topic = topics.get(&t.topic.0);
            let refused = if follower_refused {
                Some(error_code::CLUSTER_AUTHORIZATION_FAILED)
            } else if !cluster_action && !cx.may_on_topic(Operation::Describe, &t.topic.0) {
                Some(error_code::TOPIC_AUTHORIZATION_FAILED)
            } else {
                None
            };
            let mut out = OffsetForLeaderTopicResult::default();
            out.topic = t.topic.clone();
            for p in t.partitions {
                let mut result = EpochEndOffset::default();
                result.partition = p.partition;
                result.leader_epoch = UNDEFINED_EPOCH;
                result.end_offset = UNDEFINED_EPOCH_OFFSET;
                if let Some(code) = refused {
                    result.error_code = code;
                    out.partitions.push(result);
                    continue;
                }
                let found = topic.as_ref().and_then(|t| t.partition(p.partition));
                // The client's idea of the current epoch is checked first.
                match (found, check_leader_epoch(p.current_leader_epoch, current)) {
                    (None, _) => {
                        result.error_code = topics.missing_code(&t.topic.0, error_code::UNKNOWN_TOPIC_OR_PARTITION)
                    }
                    (Some(_), _) if config.is_follower() => result.error_code = error_code::NOT_LEADER_OR_FOLLOWER,
                    (Some(_), Err(code)) => result.error_code = code,
                    (Some(partition), Ok(())) => {
                        let (epoch, end) = partition.end_offset_for_epoch(p.leader_epoch);
                        let end = if consumer { end.min(partition.high_watermark().offset) } else { end };
                        (result.leader_epoch, result.end_offset) = match epoch {
                            UNDEFINED_EPOCH => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
                            epoch => (epoch, end),
                        };
                    }
                }
                out.partitions.push(result);
            }
            response.topics.push(out);
        }
        response.into()
    }
}
