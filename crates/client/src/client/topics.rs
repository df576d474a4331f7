//! Metadata and topic administration.

use kafgres_wire::error_code;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest, MetadataRequest,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{check_code, string, topic_name, unexpected, Client};
use crate::error::ClientError;
use crate::wait::Wait;

/// One topic as Metadata describes it; a topic that does not exist comes
/// back with `error_code` UNKNOWN_TOPIC_OR_PARTITION and no partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub topic_id: Uuid,
    pub error_code: i16,
    pub is_internal: bool,
    pub partitions: Vec<PartitionInfo>,
    /// KIP-430's bit field of what this client may do with the topic
    /// (`1 << AclOperation code`).
    pub authorized_operations: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionInfo {
    pub index: i32,
    /// The leader's node id (-1 if none).
    pub leader: i32,
    pub error_code: i16,
}

/// Kafka's resource type of a topic in config requests.
const RESOURCE_TOPIC: i8 = 2;

impl<W: Wait> Client<W> {
    /// The current value of one config of a topic (its override, or the
    /// broker's default); `Ok(None)` when the topic does not exist.
    pub fn topic_config(&mut self, topic: &str, key: &str) -> Result<Option<String>, ClientError> {
        const API: &str = "DescribeConfigs";
        let resource = DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(StrBytes::from_string(topic.to_owned()))
            .with_configuration_keys(Some(vec![StrBytes::from_string(key.to_owned())]));
        let response = self.call(&DescribeConfigsRequest::default().with_resources(vec![resource]))?;
        let result = response
            .results
            .iter()
            .find(|r| r.resource_name.as_str() == topic)
            .ok_or_else(|| unexpected(API, format_args!("has no answer for topic {topic}")))?;
        if result.error_code == error_code::UNKNOWN_TOPIC_OR_PARTITION {
            return Ok(None);
        }
        check_code(API, result.error_code, result.error_message.as_ref(), topic)?;
        let value = result.configs.iter().find(|c| c.name.as_str() == key).and_then(|c| c.value.as_ref());
        value.map(|v| v.to_string()).map(Some).ok_or_else(|| unexpected(API, format_args!("has no {key} for {topic}")))
    }

    /// Describes `topics` (all topics for `None`), never creating any.
    /// Partitions are sorted by index.
    pub fn metadata(&mut self, topics: Option<&[&str]>) -> Result<Vec<TopicInfo>, ClientError> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|t| {
                t.iter().map(|name| MetadataRequestTopic::default().with_name(Some(topic_name(name)))).collect()
            }))
            .with_allow_auto_topic_creation(false)
            .with_include_topic_authorized_operations(true);
        let response = self.call(&request)?;
        let topics = response.topics.into_iter().map(|t| {
            let mut partitions: Vec<PartitionInfo> = t
                .partitions
                .iter()
                .map(|p| PartitionInfo { index: p.partition_index, leader: p.leader_id.0, error_code: p.error_code })
                .collect();
            partitions.sort_by_key(|p| p.index);
            TopicInfo {
                name: string(t.name.as_deref()),
                topic_id: t.topic_id,
                error_code: t.error_code,
                is_internal: t.is_internal,
                partitions,
                authorized_operations: t.topic_authorized_operations,
            }
        });
        Ok(topics.collect())
    }

    /// Creates a topic with the broker's replication factor and `configs`;
    /// returns its id.
    pub fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<Uuid, ClientError> {
        let configs = configs
            .iter()
            .map(|(k, v)| {
                CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string(k.clone()))
                    .with_value(Some(StrBytes::from_string(v.clone())))
            })
            .collect();
        let topic = CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(-1)
            .with_configs(configs);
        let request = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(self.timeout_ms());
        let response = self.call(&request)?;
        let [result] = response.topics.as_slice() else {
            return Err(unexpected("CreateTopics", format_args!("has {} topics, not 1", response.topics.len())));
        };
        check_code("CreateTopics", result.error_code, result.error_message.as_ref(), name)?;
        Ok(result.topic_id)
    }

    /// Deletes a topic by name.
    pub fn delete_topic(&mut self, name: &str) -> Result<(), ClientError> {
        let request = DeleteTopicsRequest::default()
            .with_topics(vec![DeleteTopicState::default().with_name(Some(topic_name(name)))])
            .with_timeout_ms(self.timeout_ms());
        let response = self.call(&request)?;
        let [result] = response.responses.as_slice() else {
            return Err(unexpected("DeleteTopics", format_args!("has {} topics, not 1", response.responses.len())));
        };
        check_code("DeleteTopics", result.error_code, result.error_message.as_ref(), name)
    }

    /// Changes a topic's config overrides (IncrementalAlterConfigs): a value
    /// sets the config, `None` deletes the override (back to the default).
    /// Configs not named keep their value.
    pub fn alter_topic_configs(&mut self, name: &str, configs: &[(String, Option<String>)]) -> Result<(), ClientError> {
        const SET: i8 = 0;
        const DELETE: i8 = 1;
        let configs = configs
            .iter()
            .map(|(k, v)| {
                AlterableConfig::default()
                    .with_name(StrBytes::from_string(k.clone()))
                    .with_config_operation(if v.is_some() { SET } else { DELETE })
                    .with_value(v.clone().map(StrBytes::from_string))
            })
            .collect();
        let resource = AlterConfigsResource::default()
            .with_resource_type(2) // TOPIC
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configs(configs);
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![resource]);
        let response = self.call(&request)?;
        let [result] = response.responses.as_slice() else {
            return Err(unexpected(
                "IncrementalAlterConfigs",
                format_args!("has {} resources, not 1", response.responses.len()),
            ));
        };
        check_code("IncrementalAlterConfigs", result.error_code, result.error_message.as_ref(), name)
    }

    /// Grows a topic to `total` partitions.
    pub fn create_partitions(&mut self, name: &str, total: i32) -> Result<(), ClientError> {
        let topic = CreatePartitionsTopic::default().with_name(topic_name(name)).with_count(total);
        let request = CreatePartitionsRequest::default().with_topics(vec![topic]).with_timeout_ms(self.timeout_ms());
        let response = self.call(&request)?;
        let [result] = response.results.as_slice() else {
            return Err(unexpected("CreatePartitions", format_args!("has {} topics, not 1", response.results.len())));
        };
        check_code("CreatePartitions", result.error_code, result.error_message.as_ref(), name)
    }
}
