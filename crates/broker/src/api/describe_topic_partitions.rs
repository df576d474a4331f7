//! DescribeTopicPartitions (KIP-966): topics and their partitions in pages.
//! Kafka 4.x admin tools (`kafka-topics --describe`) prefer it to Metadata.
//!
//! As in Kafka: an empty topic list means every topic; topics are answered
//! in name order; at most `response_partition_limit` partitions (capped at
//! [`PARTITIONS_PER_RESPONSE_MAX`], Kafka's `max.request.partition.size.limit`)
//! go in one answer, and `next_cursor` says where the next request starts; a
//! request's `cursor` skips the topics before it and its topic's partitions
//! before its index. Every partition is led by this broker with epoch 0 and
//! one replica in sync; the eligible-leader-replica lists are empty.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse};
use uuid::Uuid;

use super::authorized_operations;
use super::handler::{Answer, Handler, RequestContext, Versions};
use super::topic_name;
use crate::acl::{Operation, ResourceType};
use crate::config::BrokerConfig;
use crate::topics::Topics;

/// Kafka's `max.request.partition.size.limit` default.
pub const PARTITIONS_PER_RESPONSE_MAX: i32 = 2000;

pub struct DescribeTopicPartitions;

impl Handler for DescribeTopicPartitions {
    const KEY: ApiKey = ApiKey::DescribeTopicPartitions;
    const VERSIONS: Versions = Versions::new(0, 0);
    type Request = DescribeTopicPartitionsRequest;
    type Response = DescribeTopicPartitionsResponse;
    type Services<'a> = (&'a BrokerConfig, &'a Topics);

    async fn handle(
        (config, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: DescribeTopicPartitionsRequest,
    ) -> Answer<DescribeTopicPartitionsResponse> {
        let mut response = DescribeTopicPartitionsResponse::default();
        let visible = |name: &str| cx.may_on_topic(Operation::Describe, name);
        let operations = |name: &str| cx.authorized_operations(true, ResourceType::Topic, name);
        // Every topic: those the client may describe; named: the others are
        // answered TOPIC_AUTHORIZATION_FAILED.
        let mut names: Vec<String> = if request.topics.is_empty() {
            topics.all().iter().map(|t| t.name.clone()).filter(|n| visible(n)).collect()
        } else {
            request.topics.iter().map(|t| t.name.to_string()).collect()
        };
        names.sort();
        names.dedup();
        let (cursor_topic, cursor_partition) = match &request.cursor {
            Some(c) => (Some(c.topic_name.to_string()), c.partition_index.max(0)),
            None => (None, 0),
        };
        let mut budget = request.response_partition_limit.clamp(1, PARTITIONS_PER_RESPONSE_MAX) as usize;
        for name in names {
            if cursor_topic.as_ref().is_some_and(|c| name < *c) {
                continue;
            }
            let first = if cursor_topic.as_ref() == Some(&name) { cursor_partition } else { 0 };
            if !visible(&name) {
                response.topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
                        .with_name(Some(topic_name(&name)))
                        .with_topic_id(Uuid::nil())
                        .with_topic_authorized_operations(authorized_operations::OMITTED),
                );
                continue;
            }
            let Some(topic) = topics.get(&name) else {
                response.topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION)
                        .with_name(Some(topic_name(&name)))
                        .with_topic_id(Uuid::nil())
                        .with_topic_authorized_operations(operations(&name)),
                );
                continue;
            };
            if budget == 0 {
                response.next_cursor =
                    Some(Cursor::default().with_topic_name(topic_name(&name)).with_partition_index(first));
                break;
            }
            let node = BrokerId(config.serving_node().0);
            let partitions: Vec<_> = topic
                .partitions
                .iter()
                .filter(|p| p.index >= first)
                .take(budget)
                .map(|p| {
                    DescribeTopicPartitionsResponsePartition::default()
                        .with_error_code(error_code::NONE)
                        .with_partition_index(p.index)
                        .with_leader_id(node)
                        .with_leader_epoch(config.replication.leader_epoch())
                        .with_replica_nodes(vec![node])
                        .with_isr_nodes(vec![node])
                        .with_eligible_leader_replicas(Some(Vec::new()))
                        .with_last_known_elr(Some(Vec::new()))
                        .with_offline_replicas(Vec::new())
                })
                .collect();
            budget -= partitions.len();
            let next = partitions.last().map_or(first, |p| p.partition_index + 1);
            let more_in_topic = topic.partitions.iter().any(|p| p.index >= next);
            response.topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(error_code::NONE)
                    .with_name(Some(topic_name(&topic.name)))
                    .with_topic_id(topic.id)
                    .with_partitions(partitions)
                    .with_topic_authorized_operations(operations(&topic.name)),
            );
            if more_in_topic && budget == 0 {
                response.next_cursor =
                    Some(Cursor::default().with_topic_name(topic_name(&topic.name)).with_partition_index(next));
                break;
            }
        }
        response.into()
    }
}
