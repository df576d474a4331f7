//! Random valid AlterConfigs, IncrementalAlterConfigs, DescribeLogDirs and DescribeCluster
//! requests for one version (see `requests_data.rs` for the conventions).

use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{
    alter_configs_request, incremental_alter_configs_request, AlterConfigsRequest, DescribeClusterRequest,
    DescribeLogDirsRequest, IncrementalAlterConfigsRequest, ListConfigResourcesRequest, TopicName,
    UpdateFeaturesRequest,
};
use proptest::prelude::*;

use super::gen::{list, list_or_null, name, text, text_or_null, unknown_tags};

pub(super) fn alter_configs(v: i16) -> impl Strategy<Value = AlterConfigsRequest> {
    use alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let flexible = v >= 2;
    let config = (text(), text_or_null(), unknown_tags(flexible)).prop_map(|(key, value, tags)| {
        AlterableConfig::default().with_name(key).with_value(value).with_unknown_tagged_fields(tags)
    });
    let resource = (any::<i8>(), text(), list(config), unknown_tags(flexible)).prop_map(
        |(resource_type, resource_name, configs, tags)| {
            AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(resource_name)
                .with_configs(configs)
                .with_unknown_tagged_fields(tags)
        },
    );
    (list(resource), any::<bool>(), unknown_tags(flexible)).prop_map(|(resources, validate_only, tags)| {
        AlterConfigsRequest::default()
            .with_resources(resources)
            .with_validate_only(validate_only)
            .with_unknown_tagged_fields(tags)
    })
}

pub(super) fn incremental_alter_configs(v: i16) -> impl Strategy<Value = IncrementalAlterConfigsRequest> {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let flexible = v >= 1;
    let config =
        (text(), any::<i8>(), text_or_null(), unknown_tags(flexible)).prop_map(|(key, operation, value, tags)| {
            AlterableConfig::default()
                .with_name(key)
                .with_config_operation(operation)
                .with_value(value)
                .with_unknown_tagged_fields(tags)
        });
    let resource = (any::<i8>(), text(), list(config), unknown_tags(flexible)).prop_map(
        |(resource_type, resource_name, configs, tags)| {
            AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(resource_name)
                .with_configs(configs)
                .with_unknown_tagged_fields(tags)
        },
    );
    (list(resource), any::<bool>(), unknown_tags(flexible)).prop_map(|(resources, validate_only, tags)| {
        IncrementalAlterConfigsRequest::default()
            .with_resources(resources)
            .with_validate_only(validate_only)
            .with_unknown_tagged_fields(tags)
    })
}

pub(super) fn describe_log_dirs(v: i16) -> impl Strategy<Value = crate::messages::DescribeLogDirsRequest> {
    let flexible = v >= 2;
    let topic =
        (name::<TopicName>(), list(any::<i32>()), unknown_tags(flexible)).prop_map(|(topic, partitions, tags)| {
            DescribableLogDirTopic::default()
                .with_topic(topic)
                .with_partitions(partitions)
                .with_unknown_tagged_fields(tags)
        });
    (list_or_null(topic), unknown_tags(flexible)).prop_map(|(topics, tags)| {
        crate::messages::DescribeLogDirsRequest(
            DescribeLogDirsRequest::default().with_topics(topics).with_unknown_tagged_fields(tags),
        )
    })
}

pub(super) fn describe_cluster(v: i16) -> impl Strategy<Value = DescribeClusterRequest> {
    (any::<bool>(), any::<i8>(), any::<bool>(), unknown_tags(true)).prop_map(
        move |(include_operations, endpoint_type, include_fenced, tags)| {
            let mut r = DescribeClusterRequest::default()
                .with_include_cluster_authorized_operations(include_operations)
                .with_unknown_tagged_fields(tags);
            if v >= 1 {
                r = r.with_endpoint_type(endpoint_type);
            }
            if v >= 2 {
                r = r.with_include_fenced_brokers(include_fenced);
            }
            r
        },
    )
}

pub(super) fn update_features(v: i16) -> impl Strategy<Value = UpdateFeaturesRequest> {
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    let update = (text(), any::<i16>(), any::<bool>(), any::<i8>(), unknown_tags(true)).prop_map(
        move |(feature, level, allow_downgrade, upgrade_type, tags)| {
            FeatureUpdateKey::default()
                .with_feature(feature)
                .with_max_version_level(level)
                .with_allow_downgrade(v == 0 && allow_downgrade)
                .with_upgrade_type(if v >= 1 { upgrade_type } else { 1 })
                .with_unknown_tagged_fields(tags)
        },
    );
    (any::<i32>(), list(update), any::<bool>(), unknown_tags(true)).prop_map(
        move |(timeout_ms, updates, validate, tags)| {
            UpdateFeaturesRequest::default()
                .with_timeout_ms(timeout_ms)
                .with_feature_updates(updates)
                .with_validate_only(v >= 1 && validate)
                .with_unknown_tagged_fields(tags)
        },
    )
}

pub(super) fn list_config_resources(v: i16) -> impl Strategy<Value = ListConfigResourcesRequest> {
    (list(any::<i8>()), unknown_tags(true)).prop_map(move |(types, tags)| {
        ListConfigResourcesRequest::default()
            .with_resource_types(if v >= 1 { types } else { Vec::new() })
            .with_unknown_tagged_fields(tags)
    })
}
