//! CreatePartitions: raise a topic's partition count. The catalog is updated
//! first; the new partitions' logs are created after, as for CreateTopics.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::create_topics::PARTITIONS_PER_TOPIC_MAX;
use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::config::BrokerConfig;
use crate::topic_admin::{TopicAdmin, TopicChangeError};

pub struct CreatePartitions;

impl Handler for CreatePartitions {
    const KEY: ApiKey = ApiKey::CreatePartitions;
    const VERSIONS: Versions = Versions::new(0, 3);
    type Request = CreatePartitionsRequest;
    type Response = CreatePartitionsResponse;
    type Services<'a> = (&'a BrokerConfig, &'a TopicAdmin);

    async fn handle(
        (config, admin): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: CreatePartitionsRequest,
    ) -> Answer<CreatePartitionsResponse> {
        let mut response = CreatePartitionsResponse::default();
        let mut seen = std::collections::HashSet::new();
        for t in request.topics {
            let mut result = CreatePartitionsTopicResult::default();
            result.name = t.name.clone();
            let name = t.name.0.to_string();
            let outcome = if !seen.insert(name.clone()) {
                Err((error_code::INVALID_REQUEST, Some(format!("topic {name} appears more than once in the request"))))
            } else if !cx.may_on_topic(Operation::Alter, &name) {
                Err((error_code::TOPIC_AUTHORIZATION_FAILED, Some("The topic authorization is failed.".to_owned())))
            } else {
                let single_node = t
                    .assignments
                    .as_ref()
                    .is_none_or(|a| a.iter().all(|r| r.broker_ids.iter().all(|b| b.0 == config.node_id)));
                if single_node {
                    add_partitions(admin, &name, t.count, request.validate_only).await
                } else {
                    Err((
                        error_code::INVALID_REPLICA_ASSIGNMENT,
                        Some(format!("only broker {} exists", config.node_id)),
                    ))
                }
            };
            if let Err((code, message)) = outcome {
                result.error_code = code;
                result.error_message = message.as_deref().map(str_bytes);
            }
            response.results.push(result);
        }
        response.into()
    }
}

async fn add_partitions(
    admin: &TopicAdmin,
    name: &str,
    count: i32,
    validate_only: bool,
) -> Result<(), (i16, Option<String>)> {
    let change = admin.begin().await;
    // Kafka's messages (an unknown topic has none).
    let topic = change.topics().get(name).ok_or((error_code::UNKNOWN_TOPIC_OR_PARTITION, None))?;
    let current = topic.partitions.len() as i32;
    if count == current {
        return Err((error_code::INVALID_PARTITIONS, Some(format!("Topic already has {current} partition(s)."))));
    }
    if count < current {
        return Err((
            error_code::INVALID_PARTITIONS,
            Some(format!("The topic {name} currently has {current} partition(s); {count} would not be an increase.")),
        ));
    }
    if count > PARTITIONS_PER_TOPIC_MAX {
        return Err((
            error_code::INVALID_PARTITIONS,
            Some(format!("at most {PARTITIONS_PER_TOPIC_MAX} partitions per topic")),
        ));
    }
    if validate_only {
        return Ok(());
    }
    change.set_partition_count(&topic, count).await.map_err(|e| match e {
        TopicChangeError::Catalog(e) => (error_code::UNKNOWN_SERVER_ERROR, Some(e.to_string())),
        TopicChangeError::Log(e) => (error_code::KAFKA_STORAGE_ERROR, Some(e.to_string())),
    })
}
