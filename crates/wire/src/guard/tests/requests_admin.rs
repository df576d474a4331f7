//! Random valid ApiVersions, FindCoordinator, CreateTopics, DeleteTopics, InitProducerId,
//! DescribeConfigs, SaslHandshake and SaslAuthenticate requests for one version (see
//! `requests_data.rs` for the conventions).

use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    FindCoordinatorRequest, InitProducerIdRequest, ProducerId, SaslAuthenticateRequest, SaslHandshakeRequest,
    TopicName, TransactionalId,
};
use proptest::prelude::*;

use super::gen::{blob, list, list_or_null, name, name_or_null, text, text_or_null, unknown_tags, uuid, uuid_bytes};

pub(super) fn api_versions(v: i16) -> impl Strategy<Value = crate::messages::ApiVersionsRequest> {
    let flexible = v >= 3;
    (text(), text(), text_or_null(), any::<i32>(), unknown_tags(flexible)).prop_map(
        move |(software, software_version, cluster_id, node_id, tags)| {
            let mut r = ApiVersionsRequest::default().with_unknown_tagged_fields(tags);
            if v >= 3 {
                r = r.with_client_software_name(software).with_client_software_version(software_version);
            }
            let mut r = crate::messages::ApiVersionsRequest::from(r);
            if v >= 5 {
                (r.cluster_id, r.node_id) = (cluster_id, node_id);
            }
            r
        },
    )
}

pub(super) fn find_coordinator(v: i16) -> impl Strategy<Value = FindCoordinatorRequest> {
    let flexible = v >= 3;
    (text(), any::<i8>(), list(text()), unknown_tags(flexible)).prop_map(move |(key, key_type, keys, tags)| {
        let mut r = FindCoordinatorRequest::default().with_unknown_tagged_fields(tags);
        if v <= 3 {
            r = r.with_key(key);
        }
        if v >= 1 {
            r = r.with_key_type(key_type);
        }
        if v >= 4 {
            r = r.with_coordinator_keys(keys);
        }
        r
    })
}

pub(super) fn create_topics(v: i16) -> impl Strategy<Value = CreateTopicsRequest> {
    let flexible = v >= 5;
    let assignment = (any::<i32>(), list(any::<i32>()), unknown_tags(flexible)).prop_map(|(index, brokers, tags)| {
        CreatableReplicaAssignment::default()
            .with_partition_index(index)
            .with_broker_ids(brokers.into_iter().map(BrokerId).collect())
            .with_unknown_tagged_fields(tags)
    });
    let config = (text(), text_or_null(), unknown_tags(flexible)).prop_map(|(key, value, tags)| {
        CreatableTopicConfig::default().with_name(key).with_value(value).with_unknown_tagged_fields(tags)
    });
    let topic =
        (name::<TopicName>(), any::<i32>(), any::<i16>(), list(assignment), list(config), unknown_tags(flexible))
            .prop_map(|(topic, partitions, replication, assignments, configs, tags)| {
                CreatableTopic::default()
                    .with_name(topic)
                    .with_num_partitions(partitions)
                    .with_replication_factor(replication)
                    .with_assignments(assignments)
                    .with_configs(configs)
                    .with_unknown_tagged_fields(tags)
            });
    (list(topic), any::<i32>(), any::<bool>(), unknown_tags(flexible)).prop_map(
        |(topics, timeout_ms, validate_only, tags)| {
            CreateTopicsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(timeout_ms)
                .with_validate_only(validate_only)
                .with_unknown_tagged_fields(tags)
        },
    )
}

pub(super) fn delete_topics(v: i16) -> impl Strategy<Value = DeleteTopicsRequest> {
    let flexible = v >= 4;
    let state = (name_or_null::<TopicName>(), uuid_bytes(), unknown_tags(flexible)).prop_map(|(topic, id, tags)| {
        DeleteTopicState::default().with_name(topic).with_topic_id(uuid(id).topic_id).with_unknown_tagged_fields(tags)
    });
    (list(state), list(name::<TopicName>()), any::<i32>(), unknown_tags(flexible)).prop_map(
        move |(states, names, timeout_ms, tags)| {
            let mut r = DeleteTopicsRequest::default().with_timeout_ms(timeout_ms).with_unknown_tagged_fields(tags);
            if v >= 6 {
                r = r.with_topics(states);
            } else {
                r = r.with_topic_names(names);
            }
            r
        },
    )
}

pub(super) fn init_producer_id(v: i16) -> impl Strategy<Value = InitProducerIdRequest> {
    let flexible = v >= 2;
    (name_or_null::<TransactionalId>(), any::<i32>(), any::<i64>(), any::<i16>(), unknown_tags(flexible)).prop_map(
        move |(transactional_id, timeout_ms, producer_id, epoch, tags)| {
            let mut r = InitProducerIdRequest::default()
                .with_transactional_id(transactional_id)
                .with_transaction_timeout_ms(timeout_ms)
                .with_unknown_tagged_fields(tags);
            if v >= 3 {
                r = r.with_producer_id(ProducerId(producer_id)).with_producer_epoch(epoch);
            }
            r
        },
    )
}

pub(super) fn describe_configs(v: i16) -> impl Strategy<Value = DescribeConfigsRequest> {
    let flexible = v >= 4;
    let resource = (any::<i8>(), text(), list_or_null(text()), unknown_tags(flexible)).prop_map(
        |(resource_type, resource_name, keys, tags)| {
            DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(resource_name)
                .with_configuration_keys(keys)
                .with_unknown_tagged_fields(tags)
        },
    );
    (list(resource), any::<bool>(), any::<bool>(), unknown_tags(flexible)).prop_map(
        move |(resources, synonyms, documentation, tags)| {
            let mut r = DescribeConfigsRequest::default()
                .with_resources(resources)
                .with_include_synonyms(synonyms)
                .with_unknown_tagged_fields(tags);
            if v >= 3 {
                r = r.with_include_documentation(documentation);
            }
            r
        },
    )
}

pub(super) fn sasl_handshake(_v: i16) -> impl Strategy<Value = SaslHandshakeRequest> {
    text().prop_map(|mechanism| SaslHandshakeRequest::default().with_mechanism(mechanism))
}

pub(super) fn sasl_authenticate(v: i16) -> impl Strategy<Value = SaslAuthenticateRequest> {
    let flexible = v >= 2;
    (blob(), unknown_tags(flexible)).prop_map(|(auth_bytes, tags)| {
        SaslAuthenticateRequest::default().with_auth_bytes(auth_bytes).with_unknown_tagged_fields(tags)
    })
}
