//! DescribeProducers (KIP-664): the producers each partition holds state
//! for, as `kafka-transactions.sh describe-producers` and the SQL bridge
//! (after a restart, to learn how far its own sequences reached) ask.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::handler::{Answer, Handler, RequestContext, Versions};
use crate::acl::Operation;

use crate::topics::Topics;

/// A non-transactional producer has no coordinator epoch.
const NO_COORDINATOR_EPOCH: i32 = -1;

pub struct DescribeProducers;

impl Handler for DescribeProducers {
    const KEY: ApiKey = ApiKey::DescribeProducers;
    /// v0: Kafka 4.1's range. The SQL bridge reads its own sequences back
    /// with it after a restart.
    const VERSIONS: Versions = Versions::new(0, 0);
    type Request = DescribeProducersRequest;
    type Response = DescribeProducersResponse;
    type Services<'a> = &'a Topics;

    async fn handle(
        topics: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: DescribeProducersRequest,
    ) -> Answer<DescribeProducersResponse> {
        let mut response = DescribeProducersResponse::default();
        for topic in req.topics {
            let found = topics.get(&topic.name.0);
            let refused = !cx.may_on_topic(Operation::Read, &topic.name.0);
            let mut out = TopicResponse::default();
            out.name = topic.name.clone();
            for index in topic.partition_indexes {
                let mut p = PartitionResponse::default();
                p.partition_index = index;
                match found.as_ref().and_then(|t| t.partition(index)) {
                    _ if refused => p.error_code = error_code::TOPIC_AUTHORIZATION_FAILED,
                    None => p.error_code = topics.missing_code(&topic.name.0, error_code::UNKNOWN_TOPIC_OR_PARTITION),
                    Some(partition) => {
                        p.active_producers = partition
                            .producer_states()
                            .into_iter()
                            .map(|s| {
                                let mut state = ProducerState::default();
                                state.producer_id = ProducerId(s.producer_id);
                                state.producer_epoch = i32::from(s.producer_epoch);
                                state.last_sequence = s.last_sequence;
                                state.last_timestamp = s.last_timestamp_ms;
                                state.coordinator_epoch = NO_COORDINATOR_EPOCH;
                                state.current_txn_start_offset = s.open_txn_first_offset.unwrap_or(-1);
                                state
                            })
                            .collect();
                    }
                }
                out.partitions.push(p);
            }
            response.topics.push(out);
        }
        response.into()
    }
}
