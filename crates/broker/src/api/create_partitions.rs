//! CreatePartitions: raise a topic's partition count. The catalog is updated
//! first; the new partitions' logs are created after, as for CreateTopics.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::create_topics::PARTITIONS_PER_TOPIC_MAX;
use super::str_bytes;
use crate::errors;
use crate::server::BrokerContext;

pub async fn handle(ctx: &BrokerContext, _version: i16, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let mut response = CreatePartitionsResponse::default();
    let mut seen = std::collections::HashSet::new();
    for t in request.topics {
        let mut result = CreatePartitionsTopicResult::default();
        result.name = t.name.clone();
        let name = t.name.0.to_string();
        let outcome = if !seen.insert(name.clone()) {
            Err((errors::INVALID_REQUEST, format!("topic {name} appears more than once in the request")))
        } else {
            let single_node = t
                .assignments
                .as_ref()
                .is_none_or(|a| a.iter().all(|r| r.broker_ids.iter().all(|b| b.0 == ctx.config.node_id)));
            if single_node {
                add_partitions(ctx, &name, t.count, request.validate_only).await
            } else {
                Err((errors::INVALID_REPLICA_ASSIGNMENT, format!("only broker {} exists", ctx.config.node_id)))
            }
        };
        if let Err((code, message)) = outcome {
            result.error_code = code;
            result.error_message = Some(str_bytes(&message));
        }
        response.results.push(result);
    }
    response
}

async fn add_partitions(ctx: &BrokerContext, name: &str, count: i32, validate_only: bool) -> Result<(), (i16, String)> {
    let _serialized = ctx.topic_creation.lock().await;
    let topic =
        ctx.topic(name).ok_or((errors::UNKNOWN_TOPIC_OR_PARTITION, format!("The topic '{name}' does not exist.")))?;
    let current = topic.partitions.len() as i32;
    if count == current {
        return Err((errors::INVALID_PARTITIONS, format!("Topic already has {current} partitions.")));
    }
    if count < current {
        return Err((
            errors::INVALID_PARTITIONS,
            format!("Topic currently has {current} partitions, which is higher than the requested {count}."),
        ));
    }
    if count > PARTITIONS_PER_TOPIC_MAX {
        return Err((errors::INVALID_PARTITIONS, format!("at most {PARTITIONS_PER_TOPIC_MAX} partitions per topic")));
    }
    if validate_only {
        return Ok(());
    }
    ctx.catalog
        .set_partition_count(topic.id, count)
        .await
        .map_err(|e| (errors::UNKNOWN_SERVER_ERROR, e.to_string()))?;
    let grown = topic.with_partitions(count, &ctx.config, &ctx.housekeeping, crate::now_ms()).map_err(|e| {
        log::error!("topic {name}: the catalog has {count} partitions but their logs could not be created: {e}");
        (errors::KAFKA_STORAGE_ERROR, e.to_string())
    })?;
    ctx.topics.write().unwrap_or_else(|p| p.into_inner()).replace(grown);
    log::info!("topic {name} now has {count} partitions (was {current})");
    Ok(())
}
