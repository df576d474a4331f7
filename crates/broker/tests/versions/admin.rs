//! The version sweep's requests for one family of APIs. Topic, config, feature and log-directory administration.

use crate::common;
use crate::common::{create_topic, Client};
use kafgres_wire::ApiKey;
use kafgres_wire::{error_code, messages};
use kafka_protocol::protocol::StrBytes;

use super::check;

/// Whether `exchange` below has a request for `key`.
pub(super) fn covers(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::DescribeConfigs
            | ApiKey::DescribeCluster
            | ApiKey::CreatePartitions
            | ApiKey::DeleteTopics
            | ApiKey::IncrementalAlterConfigs
            | ApiKey::AlterConfigs
            | ApiKey::ElectLeaders
            | ApiKey::AlterPartitionReassignments
            | ApiKey::ListPartitionReassignments
            | ApiKey::AlterReplicaLogDirs
            | ApiKey::UpdateFeatures
            | ApiKey::ListConfigResources
            | ApiKey::DescribeLogDirs
    )
}

/// Sends one request of `key` at `version`; `Err` says what went wrong.
pub(super) async fn exchange(client: &mut Client, key: ApiKey, version: i16) -> Result<(), String> {
    match key {
        ApiKey::DescribeConfigs => {
            use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
            let resource = DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("swept"));
            let r = client
                .try_call(
                    version,
                    &kafka_protocol::messages::DescribeConfigsRequest::default().with_resources(vec![resource]),
                )
                .await?;
            check(r.results[0].error_code == 0 && !r.results[0].configs.is_empty(), format!("{:?}", r.results[0]))
        }
        ApiKey::DescribeCluster => {
            let request = kafka_protocol::messages::DescribeClusterRequest::default().with_endpoint_type(1);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == 0 && r.brokers.len() == 1, format!("{r:?}"))
        }
        ApiKey::CreatePartitions => {
            use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
            let topic = format!("grown-v{version}");
            create_topic(client, &topic, 1).await;
            let request = kafka_protocol::messages::CreatePartitionsRequest::default()
                .with_topics(vec![CreatePartitionsTopic::default().with_name(common::name(&topic)).with_count(2)]);
            let r = client.try_call(version, &request).await?;
            check(r.results[0].error_code == 0, format!("{:?}", r.results[0]))
        }
        ApiKey::DeleteTopics => {
            use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
            // Each version deletes one of the topics CreateTopics made.
            let topic = common::name(&format!("created-v{}", version + 1));
            let request = if version >= 6 {
                kafka_protocol::messages::DeleteTopicsRequest::default()
                    .with_topics(vec![DeleteTopicState::default().with_name(Some(topic))])
            } else {
                kafka_protocol::messages::DeleteTopicsRequest::default().with_topic_names(vec![topic])
            };
            let r = client.try_call(version, &request).await?;
            check(r.responses[0].error_code == 0, format!("{:?}", r.responses[0]))
        }
        ApiKey::IncrementalAlterConfigs => {
            use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
            let value = format!("{}", 86_400_000 + i64::from(version));
            let request = kafka_protocol::messages::IncrementalAlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("swept"))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("retention.ms"))
                        .with_config_operation(0)
                        .with_value(Some(StrBytes::from_string(value.clone())))]),
            ]);
            let r = client.try_call(version, &request).await?;
            let stored = common::topic_configs(client, "swept").await.get("retention.ms").cloned();
            check(r.responses[0].error_code == 0 && stored == Some(value), format!("{r:?} {stored:?}"))
        }
        ApiKey::AlterConfigs => {
            use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
            let value = format!("{}", 2_000_000 + i64::from(version));
            let request = kafka_protocol::messages::AlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("swept"))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("max.message.bytes"))
                        .with_value(Some(StrBytes::from_string(value.clone())))]),
            ]);
            let r = client.try_call(version, &request).await?;
            let configs = common::topic_configs(client, "swept").await;
            let only = configs.len() == 1 && configs.get("max.message.bytes") == Some(&value);
            check(r.responses[0].error_code == 0 && only, format!("{r:?} {configs:?}"))
        }
        // A quota per version, set and then described back.
        ApiKey::ElectLeaders => {
            use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
            let request = kafka_protocol::messages::ElectLeadersRequest::default().with_topic_partitions(Some(vec![
                TopicPartitions::default().with_topic(common::name("swept")).with_partitions(vec![0, 99]),
            ]));
            let r = client.try_call(version, &request).await?;
            let codes: Vec<i16> =
                r.replica_election_results.iter().flat_map(|t| &t.partition_result).map(|p| p.error_code).collect();
            let expected = [error_code::ELECTION_NOT_NEEDED, error_code::UNKNOWN_TOPIC_OR_PARTITION];
            check(r.error_code == 0 && codes == expected, format!("{r:?}"))
        }
        ApiKey::AlterPartitionReassignments => {
            use kafka_protocol::messages::alter_partition_reassignments_request::{
                ReassignablePartition, ReassignableTopic,
            };
            use kafka_protocol::messages::BrokerId;
            let partitions = vec![
                ReassignablePartition::default().with_partition_index(0).with_replicas(Some(vec![BrokerId(1)])),
                ReassignablePartition::default().with_partition_index(0).with_replicas(None),
                ReassignablePartition::default().with_partition_index(0).with_replicas(Some(vec![BrokerId(7)])),
            ];
            let request = kafka_protocol::messages::AlterPartitionReassignmentsRequest::default().with_topics(vec![
                ReassignableTopic::default().with_name(common::name("swept")).with_partitions(partitions),
            ]);
            let r = client.try_call(version, &request).await?;
            let codes: Vec<i16> = r.responses.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).collect();
            let expected =
                [error_code::NONE, error_code::NO_REASSIGNMENT_IN_PROGRESS, error_code::INVALID_REPLICA_ASSIGNMENT];
            check(r.error_code == 0 && codes == expected, format!("{r:?}"))
        }
        ApiKey::ListPartitionReassignments => {
            let request = kafka_protocol::messages::ListPartitionReassignmentsRequest::default().with_topics(None);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == 0 && r.topics.is_empty(), format!("{r:?}"))
        }
        ApiKey::AlterReplicaLogDirs => {
            use kafka_protocol::messages::alter_replica_log_dirs_request::{
                AlterReplicaLogDir, AlterReplicaLogDirTopic,
            };
            let dirs = client
                .try_call(1, &kafka_protocol::messages::DescribeLogDirsRequest::default().with_topics(Some(vec![])))
                .await?;
            let here = dirs.results[0].log_dir.clone();
            let topic = |partitions: Vec<i32>| {
                vec![AlterReplicaLogDirTopic::default().with_name(common::name("swept")).with_partitions(partitions)]
            };
            let request = kafka_protocol::messages::AlterReplicaLogDirsRequest::default().with_dirs(vec![
                AlterReplicaLogDir::default().with_path(here).with_topics(topic(vec![0, 99])),
                AlterReplicaLogDir::default()
                    .with_path(StrBytes::from_static_str("/elsewhere"))
                    .with_topics(topic(vec![0])),
            ]);
            let r = client.try_call(version, &request).await?;
            let codes: Vec<i16> = r.results.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).collect();
            let expected = [error_code::NONE, error_code::UNKNOWN_TOPIC_OR_PARTITION, error_code::LOG_DIR_NOT_FOUND];
            check(codes == expected, format!("{r:?}"))
        }
        ApiKey::UpdateFeatures => {
            use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
            let update = |feature: &'static str, level: i16| {
                FeatureUpdateKey::default()
                    .with_feature(StrBytes::from_static_str(feature))
                    .with_max_version_level(level)
            };
            let same = kafka_protocol::messages::UpdateFeaturesRequest::default()
                .with_feature_updates(vec![update("group.version", 1), update("kraft.version", 0)]);
            let r = client.try_call(version, &same).await?;
            let results_ok = if version < 2 { r.results.len() == 2 } else { r.results.is_empty() };
            let change = kafka_protocol::messages::UpdateFeaturesRequest::default()
                .with_feature_updates(vec![update("group.version", 1), update("transaction.version", 1)]);
            let refused = client.try_call(version, &change).await?;
            check(
                r.error_code == 0 && results_ok && refused.error_code == error_code::INVALID_UPDATE_VERSION,
                format!("{r:?} {refused:?}"),
            )
        }
        ApiKey::ListConfigResources => {
            let request = kafka_protocol::messages::ListConfigResourcesRequest::default()
                .with_resource_types(if version >= 1 { vec![2, 4] } else { Vec::new() });
            let r = client.try_call(version, &request).await?;
            let listed: Vec<(i8, String)> =
                r.config_resources.iter().map(|c| (c.resource_type, c.resource_name.to_string())).collect();
            // v0 lists client metrics subscriptions only: none.
            let ok = if version == 0 {
                listed.is_empty()
            } else {
                listed.contains(&(2, "swept".into())) && listed.contains(&(4, "1".into()))
            };
            check(r.error_code == 0 && ok, format!("{r:?}"))
        }
        ApiKey::DescribeLogDirs => {
            let request = kafka_protocol::messages::DescribeLogDirsRequest::default().with_topics(None);
            let r = client.try_call(version, &messages::DescribeLogDirsRequest(request)).await?;
            let cordoned = r.results[0].is_cordoned;
            let dir = &r.results[0].result;
            let swept = dir.topics.iter().find(|t| t.name.0.as_str() == "swept");
            let size = swept.map_or(0, |t| t.partitions[0].partition_size);
            let space_ok = if version >= 4 { dir.total_bytes > 0 && dir.usable_bytes >= 0 } else { true };
            check(r.results.len() == 1 && dir.error_code == 0 && size > 0 && space_ok && !cordoned, format!("{r:?}"))
        }
        other => Err(format!("{other:?} is not in this family")),
    }
}
