//! DeleteTopics, by name (v1-v5) or by name or id (v6). The order of the
//! deletion itself, crash by crash, is [`crate::topic_admin::TopicChange::delete`]'s.

use std::sync::Arc;

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use uuid::Uuid;

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::{str_bytes, topic_name};
use crate::acl::Operation;
use crate::catalog::CatalogError;
use crate::topic_admin::TopicAdmin;
use crate::topics::OfflineTopic;
use crate::topics::{Topic, Topics};

pub struct DeleteTopics;

impl Handler for DeleteTopics {
    const KEY: ApiKey = ApiKey::DeleteTopics;
    /// v1-v6; v6 names topics by name or by id.
    const VERSIONS: Versions = Versions::new(1, 6);
    type Request = DeleteTopicsRequest;
    type Response = DeleteTopicsResponse;
    type Services<'a> = (&'a Topics, &'a TopicAdmin);

    async fn handle(
        (topics, admin): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: DeleteTopicsRequest,
    ) -> Answer<DeleteTopicsResponse> {
        let version = cx.api_version;
        let wanted: Vec<(Option<TopicName>, Uuid)> = if version >= 6 {
            request.topics.into_iter().map(|t| (t.name, t.topic_id)).collect()
        } else {
            request.topic_names.into_iter().map(|n| (Some(n), Uuid::nil())).collect()
        };
        let mut response = DeleteTopicsResponse::default();
        let mut seen = std::collections::HashSet::new();
        // As Kafka's controller: DELETE on the cluster lets a client describe
        // and delete every topic; else DESCRIBE and DELETE on each topic.
        let may_delete_any = cx.may_on_cluster(Operation::Delete);
        for (name, id) in wanted {
            let mut result = DeletableTopicResult::default();
            result.name = name.clone();
            result.topic_id = id;
            let outcome = match (&name, id.is_nil()) {
                (Some(_), false) => {
                    Err((error_code::INVALID_REQUEST, "give a topic name or a topic id, not both".to_owned()))
                }
                (None, true) => Err((error_code::INVALID_REQUEST, "neither a topic name nor a topic id".to_owned())),
                // DESCRIBE before existence, as Kafka: a client learns
                // nothing of a topic it may not describe.
                (Some(n), true) if !may_delete_any && !cx.may_on_topic(Operation::Describe, &n.0) => {
                    Err((error_code::TOPIC_AUTHORIZATION_FAILED, String::new()))
                }
                (Some(n), true) => topics
                    .get(&n.0)
                    .map(Target::Online)
                    .or_else(|| topics.offline(&n.0).map(Target::Offline))
                    .ok_or((error_code::UNKNOWN_TOPIC_OR_PARTITION, String::new())),
                (None, false) => topics
                    .get_by_id(&id)
                    .map(Target::Online)
                    .or_else(|| topics.offline_by_id(&id).map(Target::Offline))
                    .ok_or((error_code::UNKNOWN_TOPIC_ID, String::new())),
            }
            .and_then(|target| {
                if !may_delete_any && !cx.may_on_topic(Operation::Delete, target.name()) {
                    Err((error_code::TOPIC_AUTHORIZATION_FAILED, String::new()))
                } else if seen.insert(target.id()) {
                    Ok(target)
                } else {
                    Err((error_code::INVALID_REQUEST, format!("topic {} is listed more than once", target.name())))
                }
            });
            let outcome = match outcome {
                Ok(target) => {
                    result.name = Some(topic_name(target.name()));
                    result.topic_id = target.id();
                    delete_topic(admin, target).await
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
        response.into()
    }
}

/// A topic to delete: served, or offline (its log could not be opened).
enum Target {
    Online(Arc<Topic>),
    Offline(Arc<OfflineTopic>),
}

impl Target {
    fn id(&self) -> Uuid {
        match self {
            Target::Online(t) => t.id,
            Target::Offline(t) => t.record.topic_id,
        }
    }

    fn name(&self) -> &str {
        match self {
            Target::Online(t) => &t.name,
            Target::Offline(t) => &t.record.name,
        }
    }
}

async fn delete_topic(admin: &TopicAdmin, target: Target) -> Result<(), (i16, String)> {
    let change = admin.begin().await;
    let deleted = match target {
        Target::Online(topic) => change.delete(topic).await,
        Target::Offline(topic) => change.delete_offline(&topic).await,
    };
    deleted.map_err(|e| match e {
        CatalogError::UnknownTopic(_) => (error_code::UNKNOWN_TOPIC_OR_PARTITION, String::new()),
        other => (error_code::UNKNOWN_SERVER_ERROR, other.to_string()),
    })
}
