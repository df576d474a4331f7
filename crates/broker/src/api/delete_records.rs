//! DeleteRecords: move partitions' log start offsets forward (offset -1 means
//! the high watermark). The new log start is durable before the answer; whole
//! segments below it are deleted, and reads below it get OFFSET_OUT_OF_RANGE.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::handler::{Answer, Handler, RequestContext, Versions};
use crate::acl::Operation;
use crate::topics::Topics;
use kafgres_log::LogError;

pub struct DeleteRecords;

impl Handler for DeleteRecords {
    const KEY: ApiKey = ApiKey::DeleteRecords;
    const VERSIONS: Versions = Versions::new(0, 2);
    type Request = DeleteRecordsRequest;
    type Response = DeleteRecordsResponse;
    type Services<'a> = &'a Topics;

    async fn handle(
        topics: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: DeleteRecordsRequest,
    ) -> Answer<DeleteRecordsResponse> {
        let mut response = DeleteRecordsResponse::default();
        for topic in request.topics {
            let found = topics.get(&topic.name.0);
            let refused = !cx.may_on_topic(Operation::Delete, &topic.name.0);
            let mut out = DeleteRecordsTopicResult::default();
            out.name = topic.name.clone();
            for p in topic.partitions {
                let mut result = DeleteRecordsPartitionResult::default();
                result.partition_index = p.partition_index;
                result.low_watermark = -1;
                match found.as_ref().and_then(|t| t.partition(p.partition_index)).cloned() {
                    _ if refused => result.error_code = error_code::TOPIC_AUTHORIZATION_FAILED,
                    None => {
                        result.error_code = topics.missing_code(&topic.name.0, error_code::UNKNOWN_TOPIC_OR_PARTITION)
                    }
                    Some(partition) => {
                        let offset = p.offset;
                        let outcome = tokio::task::spawn_blocking(move || partition.delete_records(offset)).await;
                        match outcome {
                            Ok(Ok(low_watermark)) => result.low_watermark = low_watermark,
                            Ok(Err(LogError::OffsetOutOfRange { .. })) => {
                                result.error_code = error_code::OFFSET_OUT_OF_RANGE
                            }
                            Ok(Err(e)) => {
                                log::error!("DeleteRecords on {}-{}: {e}", topic.name.0.as_str(), p.partition_index);
                                result.error_code = error_code::KAFKA_STORAGE_ERROR;
                            }
                            Err(e) => {
                                log::error!("DeleteRecords task failed: {e}");
                                result.error_code = error_code::UNKNOWN_SERVER_ERROR;
                            }
                        }
                    }
                }
                out.partitions.push(result);
            }
            response.topics.push(out);
        }
        response.into()
    }
}
