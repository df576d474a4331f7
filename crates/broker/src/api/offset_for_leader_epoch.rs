//! OffsetForLeaderEpoch: the end offset of a leader epoch, which clients use
//! to detect log truncation after a leader change (the Java consumer's
//! position validation, librdkafka after it sees a new epoch).
//!
//! This broker is the only leader there has ever been, at epoch 0 (Metadata
//! reports 0 and every stored batch is stamped 0), so the answer is Kafka's
//! for a log whose epoch cache holds one entry, epoch 0 from the start:
//! epoch 0 ends at the log end; an undefined epoch (-1) or a later one is
//! unknown (-1, -1); an earlier one ends where epoch 0 starts. Consumers
//! (replica id -1, and every request before v3) get the high watermark as the
//! log end: they can never have read past it.

use kafgres_wire::error_code;
use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use kafka_protocol::messages::{ApiKey, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::handler::{Answer, Handler, RequestContext, Versions};

use crate::topics::Topics;

/// The one leader epoch of every partition.
pub const LEADER_EPOCH: i32 = 0;
/// Kafka's `UNDEFINED_EPOCH` and `UNDEFINED_EPOCH_OFFSET`.
const UNDEFINED_EPOCH: i32 = -1;
const UNDEFINED_EPOCH_OFFSET: i64 = -1;

pub struct OffsetForLeaderEpoch;

impl Handler for OffsetForLeaderEpoch {
    const KEY: ApiKey = ApiKey::OffsetForLeaderEpoch;
    /// v2-v4: Kafka 4.x removed v0-v1 (KIP-896), and kafka-protocol 0.18
    /// decodes only v2-v4.
    const VERSIONS: Versions = Versions::new(2, 4);
    type Request = OffsetForLeaderEpochRequest;
    type Response = OffsetForLeaderEpochResponse;
    type Services<'a> = &'a Topics;

    async fn handle(
        topics: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: OffsetForLeaderEpochRequest,
    ) -> Answer<OffsetForLeaderEpochResponse> {
        let version = cx.api_version;
        let consumer = version < 3 || request.replica_id.0 < 0;
        let mut response = OffsetForLeaderEpochResponse::default();
        for t in request.topics {
            let topic = topics.get(&t.topic.0);
            let mut out = OffsetForLeaderTopicResult::default();
            out.topic = t.topic.clone();
            for p in t.partitions {
                let mut result = EpochEndOffset::default();
                result.partition = p.partition;
                result.leader_epoch = UNDEFINED_EPOCH;
                result.end_offset = UNDEFINED_EPOCH_OFFSET;
                match topic.as_ref().and_then(|t| t.partition(p.partition)) {
                    None => result.error_code = topics.missing_code(&t.topic.0, error_code::UNKNOWN_TOPIC_OR_PARTITION),
                    // The client's idea of the current epoch is checked first.
                    Some(_) if p.current_leader_epoch > LEADER_EPOCH => {
                        result.error_code = error_code::UNKNOWN_LEADER_EPOCH
                    }
                    Some(_) if p.current_leader_epoch != UNDEFINED_EPOCH && p.current_leader_epoch < LEADER_EPOCH => {
                        result.error_code = error_code::FENCED_LEADER_EPOCH
                    }
                    Some(partition) => {
                        let (epoch, end) = match p.leader_epoch {
                            LEADER_EPOCH if consumer => (LEADER_EPOCH, partition.high_watermark().offset),
                            LEADER_EPOCH => (LEADER_EPOCH, partition.log_end_offset()),
                            e if e < UNDEFINED_EPOCH => (e, partition.log_start_offset()),
                            _ => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
                        };
                        result.leader_epoch = epoch;
                        result.end_offset = end;
                    }
                }
                out.partitions.push(result);
            }
            response.topics.push(out);
        }
        response.into()
    }
}
