//! ListOffsets: the earliest offset (-2), the latest (-1, the high
//! watermark), the record with the largest timestamp (-3, KIP-734), and by
//! timestamp the first record at or after it (offset -1 when none is).

use kafgres_wire::error_code;
use kafgres_wire::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafgres_wire::ApiKey;
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};

use super::handler::{Answer, Handler, RequestContext, Versions};
use crate::acl::Operation;

use crate::config::BrokerConfig;
use crate::partition::Partition;
use crate::replication::check_leader_epoch;
use crate::topics::Topics;

pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
/// KIP-405: the earliest offset in local storage, which without tiered
/// storage is the log start.
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// KIP-1005: the latest offset in tiered storage; none here (offset -1).
pub const LATEST_TIERED_TIMESTAMP: i64 = -5;
/// KIP-1023 (v11): the earliest offset not yet uploaded to tiered storage.
/// Without tiered storage Kafka 4.4 answers no offset (-1, leader epoch -1,
/// no error), and so does Kafgres.
pub const EARLIEST_PENDING_UPLOAD_TIMESTAMP: i64 = -6;
/// Leader epochs appear in the response from v4.
const LEADER_EPOCH_VERSION_MIN: i16 = 4;

pub struct ListOffsets;

impl Handler for ListOffsets {
    const KEY: ApiKey = ApiKey::ListOffsets;
    /// v1-v11, Kafka 4.4's range; leader epochs are in the response from v4,
    /// v11 lets a client ask for -6 (laid out as v10).
    const VERSIONS: Versions = Versions::new(1, 11);
    type Request = ListOffsetsRequest;
    type Response = ListOffsetsResponse;
    type Services<'a> = (&'a Topics, &'a BrokerConfig);

    async fn handle(
        (topics, config): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: ListOffsetsRequest,
    ) -> Answer<ListOffsetsResponse> {
        let version = cx.api_version;
        let current = config.replication.leader_epoch();
        let committed_only = request.isolation_level == 1;
        let mut response = ListOffsetsResponse::default();
        for topic in request.0.topics {
            let found = topics.get(&topic.name.0);
            let refused = !cx.may_on_topic(Operation::Describe, &topic.name.0);
            let mut out = ListOffsetsTopicResponse::default();
            out.name = topic.name.clone();
            for p in topic.partitions {
                let mut r = ListOffsetsPartitionResponse::default();
                r.partition_index = p.partition_index;
                r.timestamp = -1;
                r.offset = -1;
                match found.as_ref().and_then(|t| t.partition(p.partition_index)) {
                    _ if refused => r.error_code = error_code::TOPIC_AUTHORIZATION_FAILED,
                    None => r.error_code = topics.missing_code(&topic.name.0, error_code::UNKNOWN_TOPIC_OR_PARTITION),
                    Some(_) if config.is_follower() => r.error_code = error_code::NOT_LEADER_OR_FOLLOWER,
                    Some(partition) => match check_leader_epoch(p.current_leader_epoch, current)
                        .and_then(|()| lookup(partition, p.timestamp, committed_only))
                    {
                        Ok(Some((offset, timestamp))) => {
                            r.offset = offset;
                            r.timestamp = timestamp;
                            if version >= LEADER_EPOCH_VERSION_MIN {
                                // The epoch of the record found; at the log
                                // end (latest), the current one.
                                r.leader_epoch = partition.epoch_of(offset).unwrap_or(current);
                            }
                        }
                        Ok(None) => {}
                        Err(code) => r.error_code = code,
                    },
                }
                if version < LEADER_EPOCH_VERSION_MIN {
                    r.leader_epoch = -1;
                }
                out.partitions.push(r);
            }
            response.topics.push(out);
        }
        response.into()
    }
}

/// `read_committed` (isolation level 1): the latest offset is the last stable offset.
fn lookup(partition: &Partition, timestamp: i64, committed_only: bool) -> Result<Option<(i64, i64)>, i16> {
    let storage_error = |e: kafgres_log::LogError| {
        log::error!("ListOffsets on {}-{}: {e}", partition.topic, partition.index);
        error_code::KAFKA_STORAGE_ERROR
    };
    match timestamp {
        LATEST_TIMESTAMP if committed_only => Ok(Some((partition.last_stable_offset(), -1))),
        LATEST_TIMESTAMP => Ok(Some((partition.high_watermark().offset, -1))),
        EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => Ok(Some((partition.log_start_offset(), -1))),
        LATEST_TIERED_TIMESTAMP | EARLIEST_PENDING_UPLOAD_TIMESTAMP => Ok(None),
        MAX_TIMESTAMP => partition.offset_of_max_timestamp().map_err(storage_error),
        t if t >= 0 => partition.offset_for_timestamp(t).map_err(storage_error),
        _ => Err(error_code::INVALID_REQUEST),
    }
}
