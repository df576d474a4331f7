//! The version sweep's requests for one family of APIs. Produce, fetch and the log: the record path and the APIs that read a log's shape.

use crate::common;
use crate::common::{
    batch, creatable, fetch_request, list_offset_request, metadata_request, produce_request, records, Client, TopicRef,
};
use kafgres_wire::messages;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::{ApiVersionsRequest, CreateTopicsRequest};
use kafka_protocol::protocol::StrBytes;

use super::check;

/// Whether `exchange` below has a request for `key`.
pub(super) fn covers(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::ApiVersions
            | ApiKey::Metadata
            | ApiKey::CreateTopics
            | ApiKey::Produce
            | ApiKey::Fetch
            | ApiKey::ListOffsets
            | ApiKey::OffsetForLeaderEpoch
            | ApiKey::DeleteRecords
            | ApiKey::DescribeTopicPartitions
    )
}

/// Sends one request of `key` at `version`; `Err` says what went wrong.
pub(super) async fn exchange(
    client: &mut Client,
    key: ApiKey,
    version: i16,
    id: uuid::Uuid,
    produced: &mut i64,
) -> Result<(), String> {
    match key {
        ApiKey::ApiVersions => {
            let r = client
                .try_call(
                    version,
                    &messages::ApiVersionsRequest::from(
                        ApiVersionsRequest::default()
                            .with_client_software_name(StrBytes::from_static_str("sweep"))
                            .with_client_software_version(StrBytes::from_static_str("1")),
                    ),
                )
                .await?;
            check(r.error_code == 0, format!("error {}", r.error_code))
        }
        ApiKey::Metadata => {
            let r = client.try_call(version, &metadata_request(Some(&["swept"]), true)).await?;
            let t = &r.topics[0];
            check(r.topics.len() == 1 && t.error_code == 0 && t.partitions.len() == 1, format!("{:?}", r.topics))
        }
        ApiKey::CreateTopics => {
            let request =
                CreateTopicsRequest::default().with_topics(vec![creatable(&format!("created-v{version}"), 1, 1)]);
            let r = client.try_call(version, &request).await?;
            check(r.topics[0].error_code == 0, format!("error {}", r.topics[0].error_code))
        }
        ApiKey::Produce => {
            let mut request = produce_request("swept", 0, -1, batch(&records("s", 1)));
            if version >= 13 {
                request.topic_data[0].topic_id = id; // v13 names topics by id only
            }
            let r = client.try_call(version, &request).await?;
            let p = &r.responses[0].partition_responses[0];
            *produced += 1;
            let topic_ok = version < 13 || r.responses[0].topic_id == id;
            check(topic_ok && (p.error_code, p.base_offset) == (0, *produced - 1), format!("{r:?}"))
        }
        ApiKey::Fetch => {
            let topic = if version >= 13 { TopicRef::Id(id) } else { TopicRef::Name("swept") };
            let r = client.try_call(version, &fetch_request(topic, 0, 0, 1 << 20, 0, 1)).await?;
            let p = &r.responses[0].partitions[0];
            let fetched = common::decode_records(&p.records.clone().unwrap_or_default()).len() as i64;
            check((p.error_code, p.high_watermark, fetched) == (0, *produced, *produced), format!("{p:?}"))
        }
        ApiKey::ListOffsets => {
            let r =
                client.try_call(version, &messages::ListOffsetsRequest(list_offset_request("swept", 0, -1))).await?;
            let p = &r.topics[0].partitions[0];
            check((p.error_code, p.offset) == (0, *produced), format!("{p:?}"))
        }
        ApiKey::DescribeTopicPartitions => {
            use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
            let request = kafka_protocol::messages::DescribeTopicPartitionsRequest::default()
                .with_topics(vec![TopicRequest::default().with_name(common::name("swept"))])
                .with_response_partition_limit(2000);
            let r = client.try_call(version, &request).await?;
            check(
                r.topics.len() == 1 && r.topics[0].error_code == 0 && !r.topics[0].partitions.is_empty(),
                format!("{r:?}"),
            )
        }
        ApiKey::DeleteRecords => {
            use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
            // Deleting up to offset 0 changes nothing and is valid at every version.
            let request = kafka_protocol::messages::DeleteRecordsRequest::default().with_topics(vec![
                DeleteRecordsTopic::default()
                    .with_name(common::name("swept"))
                    .with_partitions(vec![DeleteRecordsPartition::default().with_partition_index(0).with_offset(0)]),
            ]);
            let r = client.try_call(version, &request).await?;
            let p = &r.topics[0].partitions[0];
            check((p.error_code, p.low_watermark) == (0, 0), format!("{p:?}"))
        }
        ApiKey::OffsetForLeaderEpoch => {
            use kafka_protocol::messages::offset_for_leader_epoch_request::{
                OffsetForLeaderPartition, OffsetForLeaderTopic,
            };
            let request = kafka_protocol::messages::OffsetForLeaderEpochRequest::default()
                .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                .with_topics(vec![OffsetForLeaderTopic::default().with_topic(common::name("swept")).with_partitions(
                    vec![OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(0)
                        .with_leader_epoch(0)],
                )]);
            let r = client.try_call(version, &request).await?;
            let p = &r.topics[0].partitions[0];
            check((p.error_code, p.leader_epoch, p.end_offset) == (0, 0, *produced), format!("{p:?}"))
        }
        // Without kafgres.authentication, as on a Kafka PLAINTEXT listener
        // (tests/sasl.rs covers the exchange itself).
        other => Err(format!("{other:?} is not in this family")),
    }
}
