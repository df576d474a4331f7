//! Metadata: this broker, and every requested topic with its partitions led
//! by it. Unknown topics are created when both the client and the broker
//! allow it (Kafka's `auto.create.topics.enable`).

use kafgres_wire::error_code;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use uuid::Uuid;

use super::authorized_operations::{self, if_asked};
use super::{str_bytes, topic_name};
use crate::server::BrokerContext;
use crate::topics::Topic;

pub async fn handle(ctx: &BrokerContext, version: i16, request: MetadataRequest) -> MetadataResponse {
    let mut response = MetadataResponse::default();
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = BrokerId(ctx.config.node_id);
    broker.host = str_bytes(&ctx.config.advertised_host);
    broker.port = i32::from(ctx.advertised_port);
    response.brokers = vec![broker];
    response.cluster_id = Some(str_bytes(&ctx.config.cluster_id));
    response.controller_id = BrokerId(ctx.config.node_id);
    // Asked for in v8-v10 only; every topic in the answer gets its set when asked.
    response.cluster_authorized_operations =
        if_asked(request.include_cluster_authorized_operations, authorized_operations::CLUSTER);
    let topic_operations = if_asked(request.include_topic_authorized_operations, authorized_operations::TOPIC);

    let everything = match &request.topics {
        None => true,
        Some(t) => t.is_empty() && version == 0,
    };
    if everything {
        let all = ctx.topics.read().unwrap_or_else(|p| p.into_inner()).all();
        response.topics = all.iter().map(|t| describe(t, ctx.config.node_id, topic_operations)).collect();
        return response;
    }
    let auto_create = ctx.config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
    for wanted in request.topics.unwrap_or_default() {
        let found = match &wanted.name {
            Some(name) => ctx.topic(&name.0),
            None => ctx.topic_by_id(&wanted.topic_id),
        };
        let topic = match (found, &wanted.name) {
            (Some(t), _) => Ok(t),
            (None, Some(name)) if auto_create => {
                super::create_topics::create_topic(ctx, &name.0, ctx.config.default_partitions, Default::default())
                    .await
                    .or_else(|(code, _)| match code {
                        // Created concurrently by another client: serve it.
                        error_code::TOPIC_ALREADY_EXISTS => ctx.topic(&name.0).ok_or(code),
                        other => Err(other),
                    })
            }
            (None, Some(_)) => Err(error_code::UNKNOWN_TOPIC_OR_PARTITION),
            (None, None) => Err(error_code::UNKNOWN_TOPIC_ID),
        };
        response.topics.push(match topic {
            Ok(t) => describe(&t, ctx.config.node_id, topic_operations),
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
    response
}

fn describe(topic: &Topic, node_id: i32, authorized_operations: i32) -> MetadataResponseTopic {
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
            mp.leader_epoch = 0;
            mp.replica_nodes = vec![BrokerId(node_id)];
            mp.isr_nodes = vec![BrokerId(node_id)];
            mp
        })
        .collect();
    t
}
