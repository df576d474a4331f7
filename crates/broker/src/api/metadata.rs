//! Metadata: this broker, and every requested topic with its partitions led
//! by it. Unknown topics are created when both the client and the broker
//! allow it (Kafka's `auto.create.topics.enable`).

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use uuid::Uuid;

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::{str_bytes, topic_name};
use crate::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::config::BrokerConfig;
use crate::topic_admin::TopicAdmin;
use crate::topics::OfflineTopic;
use crate::topics::{Topic, Topics};

pub struct Metadata;

impl Handler for Metadata {
    const KEY: ApiKey = ApiKey::Metadata;
    /// v0-v13: Kafka 4.x brought v0-v3 back after KIP-896; topic ids from v10.
    const VERSIONS: Versions = Versions::new(0, 13);
    type Request = MetadataRequest;
    type Response = MetadataResponse;
    type Services<'a> = (&'a BrokerConfig, &'a Topics, &'a TopicAdmin);

    async fn handle(
        (config, topics, admin): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: MetadataRequest,
    ) -> Answer<MetadataResponse> {
        let version = cx.api_version;
        let mut response = MetadataResponse::default();
        let (node_id, host, port) = cx.serving_node(config);
        let mut broker = MetadataResponseBroker::default();
        broker.node_id = BrokerId(node_id);
        broker.host = str_bytes(host);
        broker.port = i32::from(port);
        response.brokers = vec![broker];
        response.cluster_id = Some(str_bytes(&config.cluster_id));
        response.controller_id = BrokerId(node_id);
        // Asked for in v8-v10 only; every topic in the answer gets its set when asked.
        response.cluster_authorized_operations = cx.authorized_operations(
            request.include_cluster_authorized_operations,
            ResourceType::Cluster,
            CLUSTER_NAME,
        );
        let asked = request.include_topic_authorized_operations;
        let operations = |name: &str| cx.authorized_operations(asked, ResourceType::Topic, name);

        let everything = match &request.topics {
            None => true,
            Some(t) => t.is_empty() && version == 0,
        };
        if everything {
            // Topics the client may not describe are left out, as Kafka does.
            let visible = |name: &str| cx.may_on_topic(Operation::Describe, name);
            response.topics = topics
                .all()
                .iter()
                .filter(|t| visible(&t.name))
                .map(|t| describe(t, config, operations(&t.name)))
                .collect();
            let registry = topics.read();
            response.topics.extend(
                registry
                    .all_offline()
                    .iter()
                    .filter(|t| visible(&t.record.name))
                    .map(|t| describe_offline(t, operations(&t.record.name))),
            );
            response.topics.sort_by(|a, b| a.name.cmp(&b.name));
            return response.into();
        }
        let auto_create = config.live.auto_create_topics() && (version < 4 || request.allow_auto_topic_creation);
        for wanted in request.topics.unwrap_or_default() {
            let found = match &wanted.name {
                Some(name) => topics.get(&name.0),
                None => topics.get_by_id(&wanted.topic_id),
            };
            let offline = match &wanted.name {
                Some(name) => topics.offline(&name.0),
                None => topics.offline_by_id(&wanted.topic_id),
            };
            // DESCRIBE before existence: a refused name is answered
            // TOPIC_AUTHORIZATION_FAILED whether it exists or not; a refused
            // id (not secret, says Kafka) with the id and no name.
            let name = wanted.name.as_ref().map(|n| n.0.to_string()).or_else(|| found.as_ref().map(|t| t.name.clone()));
            if name.as_ref().is_some_and(|n| !cx.may_on_topic(Operation::Describe, n)) {
                let mut t = MetadataResponseTopic::default();
                t.error_code = error_code::TOPIC_AUTHORIZATION_FAILED;
                t.name = wanted.name.clone();
                t.topic_id = if wanted.name.is_some() { Uuid::nil() } else { wanted.topic_id };
                response.topics.push(t);
                continue;
            }
            let topic_operations = operations(name.as_deref().unwrap_or(""));
            if let (None, Some(offline)) = (&found, offline) {
                response.topics.push(describe_offline(&offline, topic_operations));
                continue;
            }
            let may_create =
                |name: &str| cx.may_on_cluster(Operation::Create) || cx.may_on_topic(Operation::Create, name);
            let topic = match (found, &wanted.name) {
                (Some(t), _) => Ok(t),
                (None, Some(name)) if auto_create && !may_create(&name.0) => {
                    Err(error_code::TOPIC_AUTHORIZATION_FAILED)
                }
                (None, Some(name)) if auto_create => {
                    super::create_topics::create_topic(
                        admin,
                        &name.0,
                        config.live.default_partitions(),
                        Default::default(),
                    )
                    .await
                    .or_else(|(code, _)| match code {
                        // Created concurrently by another client: serve it.
                        error_code::TOPIC_ALREADY_EXISTS => topics.get(&name.0).ok_or(code),
                        other => Err(other),
                    })
                }
                (None, Some(_)) => Err(error_code::UNKNOWN_TOPIC_OR_PARTITION),
                (None, None) => Err(error_code::UNKNOWN_TOPIC_ID),
            };
            response.topics.push(match topic {
                Ok(t) => describe(&t, config, topic_operations),
                Err(code) => {
                    let mut t = MetadataResponseTopic::default();
                    t.error_code = code;
                    t.name = wanted.name.clone();
                    t.topic_id = if wanted.name.is_some() { Uuid::nil() } else { wanted.topic_id };
                    t.topic_authorized_operations = topic_operations;
                    t
                }
            });
        }
        response.into()
    }
}

/// A topic whose log could not be opened: known, with no leader for any
/// partition (clients retry; the data APIs answer KAFKA_STORAGE_ERROR).
fn describe_offline(topic: &OfflineTopic, authorized_operations: i32) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.name = Some(topic_name(&topic.record.name));
    t.topic_id = topic.record.topic_id;
    t.topic_authorized_operations = authorized_operations;
    t.partitions = (0..topic.record.partition_count)
        .map(|index| {
            let mut mp = MetadataResponsePartition::default();
            mp.error_code = error_code::LEADER_NOT_AVAILABLE;
            mp.partition_index = index;
            mp.leader_id = BrokerId(-1);
            mp.leader_epoch = -1;
            mp
        })
        .collect();
    t
}

fn describe(topic: &Topic, config: &BrokerConfig, authorized_operations: i32) -> MetadataResponseTopic {
    let (node_id, _, _) = config.serving_node();
    let leader_epoch = config.replication.leader_epoch();
    let mut t = MetadataResponseTopic::default();
    t.name = Some(topic_name(&topic.name));
    t.topic_id = topic.id;
    t.topic_authorized_operations = authorized_operations;
    t.partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let mut mp = MetadataResponsePartition::default();
            mp.error_code = error_code::NONE;
            mp.partition_index = p.index;
            mp.leader_id = BrokerId(node_id);
            mp.leader_epoch = leader_epoch;
            mp.replica_nodes = vec![BrokerId(node_id)];
            mp.isr_nodes = vec![BrokerId(node_id)];
            mp
        })
        .collect();
    t
}
