//! DeleteTopics, by name (v1-v5) or by name or id (v6).
//!
//! Order, so that a crash at any point leaves no topic half there: the catalog
//! row goes first (the topic no longer exists for a restarted broker), then the
//! topic leaves the registry, its partitions are flushed and closed, and their
//! directories are renamed to `*-delete` and removed in the background. A
//! crash before the rename leaves directories whose `partition.metadata` names
//! a topic id the catalog no longer has; a topic re-created with the same name
//! sets them aside instead of serving their records (see topics.rs).

use std::sync::Arc;

use kafgres_wire::error_code;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use uuid::Uuid;

use super::{str_bytes, topic_name};
use crate::catalog::CatalogError;
use crate::server::BrokerContext;
use crate::topics::{deleted_dir_name, partition_dir, Topic};

pub async fn handle(ctx: &BrokerContext, version: i16, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let wanted: Vec<(Option<TopicName>, Uuid)> = if version >= 6 {
        request.topics.into_iter().map(|t| (t.name, t.topic_id)).collect()
    } else {
        request.topic_names.into_iter().map(|n| (Some(n), Uuid::nil())).collect()
    };
    let mut response = DeleteTopicsResponse::default();
    let mut seen = std::collections::HashSet::new();
    for (name, id) in wanted {
        let mut result = DeletableTopicResult::default();
        result.name = name.clone();
        result.topic_id = id;
        let outcome = match (&name, id.is_nil()) {
            (Some(_), false) => {
                Err((error_code::INVALID_REQUEST, "give a topic name or a topic id, not both".to_owned()))
            }
            (None, true) => Err((error_code::INVALID_REQUEST, "neither a topic name nor a topic id".to_owned())),
            (Some(n), true) => ctx.topic(&n.0).ok_or((error_code::UNKNOWN_TOPIC_OR_PARTITION, String::new())),
            (None, false) => ctx.topic_by_id(&id).ok_or((error_code::UNKNOWN_TOPIC_ID, String::new())),
        }
        .and_then(|topic| {
            if seen.insert(topic.id) {
                Ok(topic)
            } else {
                Err((error_code::INVALID_REQUEST, format!("topic {} is listed more than once", topic.name)))
            }
        });
        let outcome = match outcome {
            Ok(topic) => {
                result.name = Some(topic_name(&topic.name));
                result.topic_id = topic.id;
                delete_topic(ctx, topic).await
            }
            Err(e) => Err(e),
        };
        if let Err((code, message)) = outcome {
            result.error_code = code;
            if !message.is_empty() {
                result.error_message = Some(str_bytes(&message));
            }
        }
        response.responses.push(result);
    }
    response
}

async fn delete_topic(ctx: &BrokerContext, topic: Arc<Topic>) -> Result<(), (i16, String)> {
    let _serialized = ctx.topic_creation.lock().await;
    ctx.catalog.delete_topic(topic.id).await.map_err(|e| match e {
        CatalogError::UnknownTopic(_) => (error_code::UNKNOWN_TOPIC_OR_PARTITION, String::new()),
        other => (error_code::UNKNOWN_SERVER_ERROR, other.to_string()),
    })?;
    ctx.topics.write().unwrap_or_else(|p| p.into_inner()).remove(&topic.name);
    ctx.groups.forget_topic(&topic.name);
    let log_dir = ctx.config.log_dir.clone();
    let name = topic.name.clone();
    let partitions = topic.partitions.clone();
    // The directories are renamed aside before the creation lock is
    // released: a topic re-created under the same name must not have its
    // new directories renamed away by this deletion.
    let renamed = tokio::task::spawn_blocking(move || {
        let mut renamed = Vec::new();
        for p in &partitions {
            if let Err(e) = p.close() {
                log::warn!("closing {}-{} for deletion: {e}", p.topic, p.index);
            }
            let dir = partition_dir(&log_dir, &name, p.index);
            let aside = deleted_dir_name(&dir, "deleted");
            match std::fs::rename(&dir, &aside) {
                Ok(()) => renamed.push(aside),
                Err(e) => log::warn!("cannot rename {} for deletion: {e}", dir.display()),
            }
        }
        if let Err(e) = kafgres_log::partition::sync_dir(&log_dir) {
            log::warn!("{e}");
        }
        renamed
    })
    .await
    .unwrap_or_default();
    // The topic is gone once the catalog says so; removing files can finish
    // after the answer (and is redone at startup if interrupted).
    drop(tokio::task::spawn_blocking(move || {
        for dir in renamed {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                log::warn!("cannot remove {}: {e} (removed at next start)", dir.display());
            }
        }
    }));
    log::info!("deleted topic {} (id {})", topic.name, topic.id);
    Ok(())
}
