//! Random valid StreamsGroupHeartbeat, StreamsGroupDescribe and
//! StreamsGroupTopologyDescriptionUpdate requests for one version (see `requests_data.rs` for the
//! conventions).

use proptest::prelude::*;

use super::gen::{list, list_or_null, text, text_or_null, unknown_tags};
use crate::messages::streams_group::*;

fn string() -> impl Strategy<Value = String> {
    text().prop_map(|s| s.to_string())
}

fn string_or_null() -> impl Strategy<Value = Option<String>> {
    text_or_null().prop_map(|s| s.map(|s| s.to_string()))
}

fn key_value() -> impl Strategy<Value = KeyValue> {
    (string(), string(), unknown_tags(true)).prop_map(|(key, value, unknown_tagged_fields)| KeyValue {
        key,
        value,
        unknown_tagged_fields,
    })
}

fn topic_info() -> impl Strategy<Value = TopicInfo> {
    (string(), any::<i32>(), any::<i16>(), list(key_value()), unknown_tags(true)).prop_map(
        |(name, partitions, replication_factor, topic_configs, unknown_tagged_fields)| TopicInfo {
            name,
            partitions,
            replication_factor,
            topic_configs,
            unknown_tagged_fields,
        },
    )
}

fn task_ids() -> impl Strategy<Value = TaskIds> {
    (string(), list(any::<i32>()), unknown_tags(true)).prop_map(
        |(subtopology_id, partitions, unknown_tagged_fields)| TaskIds {
            subtopology_id,
            partitions,
            unknown_tagged_fields,
        },
    )
}

fn task_offset() -> impl Strategy<Value = TaskOffset> {
    (string(), any::<i32>(), any::<i64>(), unknown_tags(true)).prop_map(
        |(subtopology_id, partition, offset, unknown_tagged_fields)| TaskOffset {
            subtopology_id,
            partition,
            offset,
            unknown_tagged_fields,
        },
    )
}

fn subtopology() -> impl Strategy<Value = Subtopology> {
    let copartition = (list(any::<i16>()), list(any::<i16>()), list(any::<i16>()), unknown_tags(true)).prop_map(
        |(source_topics, source_topic_regex, repartition_source_topics, unknown_tagged_fields)| CopartitionGroup {
            source_topics,
            source_topic_regex,
            repartition_source_topics,
            unknown_tagged_fields,
        },
    );
    (
        (string(), list(string()), list(string()), list(topic_info())),
        (list(string()), list(topic_info()), list(copartition), unknown_tags(true)),
    )
        .prop_map(|(head, tail)| Subtopology {
            subtopology_id: head.0,
            source_topics: head.1,
            source_topic_regex: head.2,
            state_changelog_topics: head.3,
            repartition_sink_topics: tail.0,
            repartition_source_topics: tail.1,
            copartition_groups: tail.2,
            unknown_tagged_fields: tail.3,
        })
}

pub(super) fn streams_group_heartbeat(_v: i16) -> impl Strategy<Value = StreamsGroupHeartbeatRequest> {
    let topology = (any::<i32>(), list(subtopology()), unknown_tags(true)).prop_map(
        |(epoch, subtopologies, unknown_tagged_fields)| Topology { epoch, subtopologies, unknown_tagged_fields },
    );
    let endpoint = (string(), any::<u16>(), unknown_tags(true))
        .prop_map(|(host, port, unknown_tagged_fields)| Endpoint { host, port, unknown_tagged_fields });
    (
        (string(), string(), any::<i32>(), any::<i32>(), string_or_null(), string_or_null(), any::<i32>()),
        (proptest::option::of(topology), list_or_null(task_ids()), list_or_null(task_ids()), list_or_null(task_ids())),
        (string_or_null(), proptest::option::of(endpoint), list_or_null(key_value())),
        (list_or_null(task_offset()), list_or_null(task_offset()), any::<bool>(), unknown_tags(true)),
    )
        .prop_map(|(head, tasks, client, tail)| StreamsGroupHeartbeatRequest {
            group_id: head.0,
            member_id: head.1,
            member_epoch: head.2,
            endpoint_information_epoch: head.3,
            instance_id: head.4,
            rack_id: head.5,
            rebalance_timeout_ms: head.6,
            topology: tasks.0,
            active_tasks: tasks.1,
            standby_tasks: tasks.2,
            warmup_tasks: tasks.3,
            process_id: client.0,
            user_endpoint: client.1,
            client_tags: client.2,
            task_offsets: tail.0,
            task_end_offsets: tail.1,
            shutdown_application: tail.2,
            unknown_tagged_fields: tail.3,
        })
}

pub(super) fn streams_group_describe(v: i16) -> impl Strategy<Value = StreamsGroupDescribeRequest> {
    (list(string()), any::<bool>(), any::<bool>(), unknown_tags(true)).prop_map(
        move |(group_ids, include_authorized_operations, include_topology, unknown_tagged_fields)| {
            StreamsGroupDescribeRequest {
                group_ids,
                include_authorized_operations,
                include_topology_description: Since(v >= 1 && include_topology),
                unknown_tagged_fields,
            }
        },
    )
}

fn node() -> impl Strategy<Value = TopologyDescriptionNode> {
    ((string(), any::<i8>(), list(string()), string_or_null()), (list(string()), list(string()), unknown_tags(true)))
        .prop_map(|(head, tail)| TopologyDescriptionNode {
            name: head.0,
            node_type: head.1,
            source_topics: head.2,
            sink_topic: head.3,
            stores: tail.0,
            successors: tail.1,
            unknown_tagged_fields: tail.2,
        })
}

pub(super) fn streams_group_topology_description_update(
    _v: i16,
) -> impl Strategy<Value = StreamsGroupTopologyDescriptionUpdateRequest> {
    let subtopology =
        (string(), list(node()), unknown_tags(true)).prop_map(|(subtopology_id, nodes, unknown_tagged_fields)| {
            TopologyDescriptionSubtopology { subtopology_id, nodes, unknown_tagged_fields }
        });
    let store = (node(), node(), unknown_tags(true)).prop_map(|(source, processor, unknown_tagged_fields)| {
        TopologyDescriptionGlobalStore { source, processor, unknown_tagged_fields }
    });
    let description = (list(subtopology), list(store), unknown_tags(true)).prop_map(
        |(subtopologies, global_stores, unknown_tagged_fields)| TopologyDescription {
            subtopologies,
            global_stores,
            unknown_tagged_fields,
        },
    );
    (string(), string(), any::<i32>(), description, unknown_tags(true)).prop_map(
        |(group_id, member_id, topology_epoch, topology_description, unknown_tagged_fields)| {
            StreamsGroupTopologyDescriptionUpdateRequest {
                group_id,
                member_id,
                topology_epoch,
                topology_description,
                unknown_tagged_fields,
            }
        },
    )
}
