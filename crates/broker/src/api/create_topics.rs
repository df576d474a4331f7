//! CreateTopics, and the topic creation that Metadata's auto-creation shares.
//!
//! A topic is recorded in the catalog first and its logs are created after:
//! a crash in between leaves a catalog row whose directories are created
//! empty at the next start, never a log without a catalog row that matters.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use uuid::Uuid;

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::{str_bytes, topic_name};
use crate::acl::Operation;
use crate::catalog::{CatalogError, TopicRecord};
use crate::config::BrokerConfig;
use crate::topic_admin::{TopicAdmin, TopicChangeError};
use crate::topics::{validate_topic_name, Topic, Topics};

/// The most partitions one topic may have (a limit, so one request cannot ask
/// for a million directories).
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;

/// A refused creation: the Kafka error code and a message for the client.
pub type CreateError = (i16, String);

pub struct CreateTopics;

impl Handler for CreateTopics {
    const KEY: ApiKey = ApiKey::CreateTopics;
    /// v2-v7; from v5 a created topic is answered with its effective configs
    /// (KIP-525).
    const VERSIONS: Versions = Versions::new(2, 7);
    type Request = CreateTopicsRequest;
    type Response = CreateTopicsResponse;
    type Services<'a> = (&'a BrokerConfig, &'a Topics, &'a TopicAdmin);

    async fn handle(
        (config, topics, admin): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: CreateTopicsRequest,
    ) -> Answer<CreateTopicsResponse> {
        let version = cx.api_version;
        let mut response = CreateTopicsResponse::default();
        let mut seen = std::collections::HashSet::new();
        // CREATE on the cluster allows every topic; else each topic's own.
        let may_create_any = cx.may_on_cluster(Operation::Create);
        for topic in request.topics {
            let name = topic.name.0.to_string();
            let mut result = CreatableTopicResult::default();
            result.name = topic_name(&name);
            result.num_partitions = -1;
            result.replication_factor = -1;
            let mut effective = BTreeMap::new();
            let outcome = if !seen.insert(name.clone()) {
                Err((error_code::INVALID_REQUEST, format!("topic {name} appears more than once in the request")))
            } else if !may_create_any && !cx.may_on_topic(Operation::Create, &name) {
                Err((error_code::TOPIC_AUTHORIZATION_FAILED, "Authorization failed.".to_owned()))
            } else {
                let configs: BTreeMap<String, String> = topic
                    .configs
                    .iter()
                    .filter_map(|c| c.value.as_ref().map(|v| (c.name.to_string(), v.to_string())))
                    .collect();
                effective = configs.clone();
                create_checked(
                    (config, topics, admin),
                    &name,
                    topic.num_partitions,
                    topic.replication_factor,
                    topic
                        .assignments
                        .iter()
                        .map(|a| (a.partition_index, a.broker_ids.iter().map(|b| b.0).collect()))
                        .collect(),
                    configs,
                    request.validate_only,
                )
                .await
            };
            match outcome {
                Ok((id, partitions)) => {
                    // As Kafka: the partition count, replication factor and
                    // configs of the new topic are shown to a client that may
                    // describe its configs; the others get -1, -1, no configs
                    // and TOPIC_AUTHORIZATION_FAILED as the configs' error.
                    if cx.may_on_topic(Operation::DescribeConfigs, &name) {
                        if version >= CONFIGS_IN_RESPONSE_VERSION_MIN {
                            result.configs = Some(effective_configs(config, &effective));
                        }
                        result.num_partitions = partitions;
                        result.replication_factor = 1;
                    } else if version >= CONFIGS_IN_RESPONSE_VERSION_MIN {
                        result.configs = Some(Vec::new());
                        result.topic_config_error_code = error_code::TOPIC_AUTHORIZATION_FAILED;
                    }
                    result.error_message = None;
                    result.topic_id = id;
                }
                Err((code, message)) => {
                    result.error_code = code;
                    result.error_message = Some(str_bytes(&message));
                }
            }
            response.topics.push(result);
        }
        response.into()
    }
}

/// From v5 a created topic is answered with its effective configs (KIP-525).
const CONFIGS_IN_RESPONSE_VERSION_MIN: i16 = 5;

/// Every topic config with the value the new topic has and where it comes from.
fn effective_configs(config: &BrokerConfig, overrides: &BTreeMap<String, String>) -> Vec<CreatableTopicConfigs> {
    crate::topic_config::TOPIC_CONFIGS
        .iter()
        .map(|d| {
            let (value, source) = d.effective(overrides, |b| crate::topic_config::broker_topic_default(config, b));
            let mut c = CreatableTopicConfigs::default();
            c.name = str_bytes(d.name);
            c.value = Some(str_bytes(&value));
            c.config_source = source;
            c
        })
        .collect()
}

/// Manual replica assignments (Kafka's rules): with them, the partition count
/// and replication factor must be -1; partitions are 0..n; each names
/// distinct, existing brokers — here only this one. Returns the count.
fn check_assignments(
    node_id: i32,
    num_partitions: i32,
    replication_factor: i16,
    mut assignments: Vec<(i32, Vec<i32>)>,
) -> Result<i32, CreateError> {
    if num_partitions != -1 || replication_factor != -1 {
        return Err((
            error_code::INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."
                .into(),
        ));
    }
    assignments.sort_by_key(|(partition, _)| *partition);
    if assignments.iter().enumerate().any(|(i, (partition, _))| *partition != i as i32) {
        return Err((
            error_code::INVALID_REPLICA_ASSIGNMENT,
            "Partitions should be a consecutive 0-based integer sequence".into(),
        ));
    }
    for (partition, brokers) in &assignments {
        if brokers.is_empty() || brokers.iter().any(|b| *b != node_id) || brokers.len() > 1 {
            return Err((
                error_code::INVALID_REPLICA_ASSIGNMENT,
                format!("partition {partition}: replicas {brokers:?}, but only broker {node_id} exists"),
            ));
        }
    }
    Ok(assignments.len() as i32)
}

async fn create_checked(
    (config, topics, admin): (&BrokerConfig, &Topics, &TopicAdmin),
    name: &str,
    num_partitions: i32,
    replication_factor: i16,
    assignments: Vec<(i32, Vec<i32>)>,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(Uuid, i32), CreateError> {
    let (num_partitions, replication_factor) = if assignments.is_empty() {
        (num_partitions, replication_factor)
    } else {
        (check_assignments(config.node_id, num_partitions, replication_factor, assignments)?, 1)
    };
    if replication_factor != -1 && replication_factor != 1 {
        return Err((
            error_code::INVALID_REPLICATION_FACTOR,
            format!("Unable to replicate the partition {replication_factor} time(s): The target replication factor of {replication_factor} cannot be reached because only 1 broker(s) are registered or some brokers have all their log directories cordoned."),
        ));
    }
    crate::topic_config::validate_topic_config_names(configs.keys().map(String::as_str))
        .map_err(|m| (error_code::INVALID_CONFIG, m))?;
    let partitions = if num_partitions == -1 { config.live.default_partitions() } else { num_partitions };
    if partitions <= 0 {
        return Err((
            error_code::INVALID_PARTITIONS,
            "Number of partitions was set to an invalid non-positive value.".into(),
        ));
    }
    if partitions > PARTITIONS_PER_TOPIC_MAX {
        return Err((
            error_code::INVALID_PARTITIONS,
            format!(
                "Number of partitions {partitions} is above Kafgres's limit of {PARTITIONS_PER_TOPIC_MAX} per topic."
            ),
        ));
    }
    if validate_only {
        validate_new_topic(topics, name)?;
        return Ok((Uuid::nil(), partitions));
    }
    let topic = create_topic(admin, name, partitions, configs).await?;
    Ok((topic.id, partitions))
}

fn validate_new_topic(topics: &Topics, name: &str) -> Result<(), CreateError> {
    validate_topic_name(name).map_err(|m| (error_code::INVALID_TOPIC_EXCEPTION, m))?;
    let registry = topics.read();
    if registry.get(name).is_some() || registry.offline(name).is_some() {
        return Err((error_code::TOPIC_ALREADY_EXISTS, format!("Topic '{name}' already exists.")));
    }
    if let Some(other) = registry.colliding(name) {
        return Err((
            error_code::INVALID_TOPIC_EXCEPTION,
            format!("Topic '{name}' collides with existing topic: {other}"),
        ));
    }
    Ok(())
}

/// Creates a topic (checked under the admin lock, so the name is still
/// free when the catalog stores it).
pub(crate) async fn create_topic(
    admin: &TopicAdmin,
    name: &str,
    partitions: i32,
    configs: BTreeMap<String, String>,
) -> Result<Arc<Topic>, CreateError> {
    let change = admin.begin().await;
    validate_new_topic(change.topics(), name)?;
    let record = TopicRecord { topic_id: Uuid::new_v4(), name: name.to_owned(), partition_count: partitions, configs };
    change.create(record).await.map_err(|e| match e {
        TopicChangeError::Catalog(CatalogError::TopicExists(_)) => {
            (error_code::TOPIC_ALREADY_EXISTS, format!("Topic '{name}' already exists."))
        }
        TopicChangeError::Catalog(other) => (error_code::UNKNOWN_SERVER_ERROR, other.to_string()),
        TopicChangeError::Log(e) => (error_code::KAFKA_STORAGE_ERROR, e.to_string()),
    })
}
