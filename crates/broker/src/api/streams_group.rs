//! StreamsGroupHeartbeat and StreamsGroupDescribe (KIP-1071): translate
//! between the wire messages (`kafgres_wire::messages::streams_group`, which
//! kafka-protocol 0.18 lacks) and the coordinator's plain structs, and create
//! the internal topics the coordinator asks for.

use std::collections::{BTreeMap, BTreeSet};

use kafgres_wire::error_code;
use kafgres_wire::messages::streams_group as wire;
use kafgres_wire::ApiKey;

use super::handler::{refusal, Answer, Handler, RequestContext, Versions};
use crate::acl::{Operation, ResourceType};
use crate::group::streams_types::*;
use crate::group_service::GroupService;
use crate::topic_admin::TopicAdmin;
use crate::topics::Topics;

/// Kafka 4.4's `group.streams.task.offset.interval.ms` default, told to members.
const TASK_OFFSET_INTERVAL_MS: i32 = 60_000;
/// Kafka 4.4's `group.streams.acceptable.recovery.lag` default (v1+).
const ACCEPTABLE_RECOVERY_LAG: i64 = 10_000;

pub struct StreamsGroupHeartbeat;

impl Handler for StreamsGroupHeartbeat {
    const KEY: ApiKey = ApiKey::StreamsGroupHeartbeat;
    /// v0-v1 (KIP-1071); v1 (Kafka 4.4, KIP-1331) adds TopologyDescriptionRequired and
    /// AcceptableRecoveryLag as int64 to the response.
    const VERSIONS: Versions = Versions::new(0, 1);
    type Request = wire::StreamsGroupHeartbeatRequest;
    type Response = wire::StreamsGroupHeartbeatResponse;
    type Services<'a> = (&'a GroupService, &'a Topics, &'a TopicAdmin);

    async fn handle(
        (groups, topics, admin): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: wire::StreamsGroupHeartbeatRequest,
    ) -> Answer<wire::StreamsGroupHeartbeatResponse> {
        if !cx.may_on_group(Operation::Read, &req.group_id) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        if let Some(topology) = &req.topology {
            let unauthorized: BTreeSet<&str> = topology
                .subtopologies
                .iter()
                .flat_map(|s| {
                    s.source_topics
                        .iter()
                        .chain(&s.repartition_sink_topics)
                        .map(String::as_str)
                        .chain(s.state_changelog_topics.iter().map(|t| t.name.as_str()))
                        .chain(s.repartition_source_topics.iter().map(|t| t.name.as_str()))
                })
                .filter(|name| !cx.may_on_topic(Operation::Describe, name))
                .collect();
            if !unauthorized.is_empty() {
                let message = unauthorized.into_iter().collect::<Vec<_>>().join(", ");
                return wire::StreamsGroupHeartbeatResponse {
                    error_code: error_code::TOPIC_AUTHORIZATION_FAILED,
                    error_message: Some(format!("Unauthorized topics: {message}")),
                    ..Default::default()
                }
                .into();
            }
        }
        let request = plain_request(cx, &req);
        let now = crate::now_ms();
        let (mut answer, writes) = groups.call(|c| c.streams_group_heartbeat(now, request, &*topics.read()));
        drop(writes); // heartbeats never write offsets
        let mut status = std::mem::take(&mut answer.status);
        create_internal_topics(cx, admin, &answer.topics_to_create, &mut status).await;
        wire_response(cx.api_version, answer, status).into()
    }

    fn refused(
        _: &RequestContext<'_>,
        _: &wire::StreamsGroupHeartbeatRequest,
        code: i16,
    ) -> Option<wire::StreamsGroupHeartbeatResponse> {
        Some(wire::StreamsGroupHeartbeatResponse { error_code: code, ..Default::default() })
    }
}

fn tasks(ids: &[wire::TaskIds]) -> Tasks {
    let mut out = Tasks::new();
    for t in ids {
        out.entry(t.subtopology_id.clone()).or_default().extend(t.partitions.iter().copied());
    }
    out
}

fn wire_tasks(tasks: &Tasks) -> Vec<wire::TaskIds> {
    tasks
        .iter()
        .filter(|(_, partitions)| !partitions.is_empty())
        .map(|(id, partitions)| wire::TaskIds {
            subtopology_id: id.clone(),
            partitions: partitions.iter().copied().collect(),
            ..Default::default()
        })
        .collect()
}

fn topic_info(t: &wire::TopicInfo) -> StreamsTopicInfo {
    StreamsTopicInfo {
        name: t.name.clone(),
        partitions: t.partitions,
        replication_factor: t.replication_factor,
        configs: t.topic_configs.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect(),
    }
}

fn wire_topic_info(t: &StreamsTopicInfo) -> wire::TopicInfo {
    wire::TopicInfo {
        name: t.name.clone(),
        partitions: t.partitions,
        replication_factor: t.replication_factor,
        topic_configs: t
            .configs
            .iter()
            .map(|(k, v)| wire::KeyValue { key: k.clone(), value: v.clone(), ..Default::default() })
            .collect(),
        ..Default::default()
    }
}

/// The topology with copartition groups resolved to names; an index out of
/// range is an invalid topology.
fn topology(t: &wire::Topology) -> Result<StreamsTopology, String> {
    let mut subtopologies = Vec::with_capacity(t.subtopologies.len());
    for s in &t.subtopologies {
        let repartition_source_topics: Vec<StreamsTopicInfo> =
            s.repartition_source_topics.iter().map(topic_info).collect();
        let mut copartition_groups = Vec::new();
        for g in &s.copartition_groups {
            let mut names = BTreeSet::new();
            let pick = |list: &[String], i: i16| usize::try_from(i).ok().and_then(|i| list.get(i).cloned());
            for &i in &g.source_topics {
                names.insert(pick(&s.source_topics, i).ok_or_else(|| bad_index(&s.subtopology_id, i))?);
            }
            let repartition: Vec<String> = repartition_source_topics.iter().map(|t| t.name.clone()).collect();
            for &i in &g.repartition_source_topics {
                names.insert(pick(&repartition, i).ok_or_else(|| bad_index(&s.subtopology_id, i))?);
            }
            copartition_groups.push(names);
        }
        subtopologies.push(StreamsSubtopology {
            subtopology_id: s.subtopology_id.clone(),
            source_topics: s.source_topics.clone(),
            repartition_sink_topics: s.repartition_sink_topics.clone(),
            state_changelog_topics: s.state_changelog_topics.iter().map(topic_info).collect(),
            repartition_source_topics,
            copartition_groups,
        });
    }
    Ok(StreamsTopology { epoch: t.epoch, subtopologies })
}

fn bad_index(subtopology: &str, index: i16) -> String {
    format!("Copartition group of subtopology {subtopology} refers to topic index {index}, which does not exist.")
}

fn plain_request(cx: &RequestContext<'_>, req: &wire::StreamsGroupHeartbeatRequest) -> StreamsHeartbeatRequest {
    let owned = |t: &Option<Vec<wire::TaskIds>>| t.as_deref().map(tasks);
    StreamsHeartbeatRequest {
        group_id: req.group_id.clone(),
        member_id: req.member_id.clone(),
        member_epoch: req.member_epoch,
        endpoint_information_epoch: req.endpoint_information_epoch,
        instance_id: req.instance_id.clone(),
        rack_id: req.rack_id.clone(),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        topology: req.topology.as_ref().map(topology),
        active_tasks: owned(&req.active_tasks),
        standby_tasks: owned(&req.standby_tasks),
        warmup_tasks: owned(&req.warmup_tasks),
        process_id: req.process_id.clone(),
        user_endpoint: req.user_endpoint.as_ref().map(|e| StreamsEndpoint { host: e.host.clone(), port: e.port }),
        client_tags: req
            .client_tags
            .as_ref()
            .map(|tags| tags.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect()),
        shutdown_application: req.shutdown_application,
        uses_source_regex: req
            .topology
            .as_ref()
            .is_some_and(|t| t.subtopologies.iter().any(|s| !s.source_topic_regex.is_empty())),
        client_id: cx.client_id.to_owned(),
        client_host: cx.client_host(),
    }
}

/// Creates the internal topics the coordinator found missing, as Kafka's
/// group coordinator does; the next heartbeat finds them. A topic the
/// principal may not create, or whose creation fails, is named in the
/// MISSING_INTERNAL_TOPICS status.
async fn create_internal_topics(
    cx: &RequestContext<'_>,
    admin: &TopicAdmin,
    missing: &[InternalTopic],
    status: &mut [StreamsStatus],
) {
    let mut failures = Vec::new();
    for topic in missing {
        if !cx.may_on_cluster(Operation::Create) && !cx.may_on_topic(Operation::Create, &topic.name) {
            failures.push(format!("Unauthorized to CREATE on topics {}.", topic.name));
            continue;
        }
        match super::create_topics::create_topic(admin, &topic.name, topic.partitions, topic.configs.clone()).await {
            Ok(_) => log::info!(
                "created internal topic {} ({} partitions) for a streams group",
                topic.name,
                topic.partitions
            ),
            Err((code, _)) if code == error_code::TOPIC_ALREADY_EXISTS => {}
            Err((_, message)) => {
                log::warn!("creating internal topic {} for a streams group failed: {message}", topic.name);
                failures.push(format!("Creating topic {} failed: {message}", topic.name));
            }
        }
    }
    if failures.is_empty() {
        return;
    }
    if let Some(s) = status.iter_mut().find(|s| s.code == status::MISSING_INTERNAL_TOPICS) {
        s.detail = format!("{} {}", s.detail, failures.join(" "));
    }
}

fn wire_response(
    version: i16,
    answer: StreamsHeartbeatResponse,
    status: Vec<StreamsStatus>,
) -> wire::StreamsGroupHeartbeatResponse {
    let mut response = wire::StreamsGroupHeartbeatResponse {
        error_code: answer.error_code,
        error_message: answer.error_message,
        ..Default::default()
    };
    if answer.error_code != error_code::NONE {
        return response;
    }
    response.member_id = answer.member_id;
    response.member_epoch = answer.member_epoch;
    response.heartbeat_interval_ms = answer.heartbeat_interval_ms;
    response.acceptable_recovery_lag_legacy = wire::Until(ACCEPTABLE_RECOVERY_LAG as i32);
    response.acceptable_recovery_lag = wire::Since(ACCEPTABLE_RECOVERY_LAG);
    response.task_offset_interval_ms = TASK_OFFSET_INTERVAL_MS;
    // MISSING_CLIENT_TAGS (6) is v1+ only; this coordinator never sends it.
    let _ = version;
    response.status = Some(
        status
            .into_iter()
            .map(|s| wire::Status { status_code: s.code, status_detail: s.detail, ..Default::default() })
            .collect(),
    );
    if let Some(t) = &answer.tasks {
        response.active_tasks = Some(wire_tasks(&t.active));
        response.standby_tasks = Some(wire_tasks(&t.standby));
        response.warmup_tasks = Some(wire_tasks(&t.warmup));
    }
    response.endpoint_information_epoch = answer.endpoint_information_epoch;
    response.partitions_by_user_endpoint = answer.partitions_by_user_endpoint.map(|list| {
        let topic_partitions = |m: BTreeMap<String, Vec<i32>>| {
            m.into_iter()
                .map(|(topic, partitions)| wire::TopicPartition { topic, partitions, ..Default::default() })
                .collect()
        };
        list.into_iter()
            .map(|e| wire::EndpointToPartitions {
                user_endpoint: wire::Endpoint { host: e.endpoint.host, port: e.endpoint.port, ..Default::default() },
                active_partitions: topic_partitions(e.active),
                standby_partitions: topic_partitions(e.standby),
                ..Default::default()
            })
            .collect()
    });
    response
}

pub struct StreamsGroupDescribe;

impl Handler for StreamsGroupDescribe {
    const KEY: ApiKey = ApiKey::StreamsGroupDescribe;
    /// v0-v1 (KIP-1071); v1 (Kafka 4.4, KIP-1331) can ask for the topology
    /// description, which this broker never stores (status NOT_STORED).
    const VERSIONS: Versions = Versions::new(0, 1);
    type Request = wire::StreamsGroupDescribeRequest;
    type Response = wire::StreamsGroupDescribeResponse;
    type Services<'a> = &'a GroupService;

    async fn handle(
        groups: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: wire::StreamsGroupDescribeRequest,
    ) -> Answer<wire::StreamsGroupDescribeResponse> {
        let described = groups.read(|c| c.streams_group_describe(&req.group_ids));
        let groups = described
            .into_iter()
            .map(|g| {
                let mut out = wire::DescribedGroup { group_id: g.group_id.clone(), ..Default::default() };
                out.authorized_operations = i32::MIN;
                if !cx.may_on_group(Operation::Describe, &g.group_id) {
                    out.error_code = error_code::GROUP_AUTHORIZATION_FAILED;
                    out.error_message = Some(super::authorized_operations::GROUP_REFUSED.to_string());
                    return out;
                }
                out.error_code = g.error_code;
                out.error_message = g.error_message;
                if g.error_code != error_code::NONE {
                    return out;
                }
                out.group_state = g.group_state;
                out.group_epoch = g.group_epoch;
                out.assignment_epoch = g.assignment_epoch;
                out.topology = g.topology.map(|(epoch, subtopologies)| wire::DescribedTopology {
                    epoch,
                    subtopologies: subtopologies.map(|list| {
                        list.into_iter()
                            .map(|s| wire::DescribedSubtopology {
                                subtopology_id: s.subtopology_id,
                                source_topics: s.source_topics,
                                repartition_sink_topics: s.repartition_sink_topics,
                                state_changelog_topics: s.state_changelog_topics.iter().map(wire_topic_info).collect(),
                                repartition_source_topics: s
                                    .repartition_source_topics
                                    .iter()
                                    .map(wire_topic_info)
                                    .collect(),
                                ..Default::default()
                            })
                            .collect()
                    }),
                    ..Default::default()
                });
                let assignment = |t: &TasksTuple| wire::Assignment {
                    active_tasks: wire_tasks(&t.active),
                    standby_tasks: wire_tasks(&t.standby),
                    warmup_tasks: wire_tasks(&t.warmup),
                    ..Default::default()
                };
                out.members = g
                    .members
                    .into_iter()
                    .map(|m| wire::DescribedMember {
                        member_id: m.member_id,
                        member_epoch: m.member_epoch,
                        instance_id: m.instance_id,
                        rack_id: m.rack_id,
                        client_id: m.client_id,
                        client_host: m.client_host,
                        topology_epoch: m.topology_epoch,
                        process_id: m.process_id,
                        user_endpoint: m.user_endpoint.map(|e| wire::Endpoint {
                            host: e.host,
                            port: e.port,
                            ..Default::default()
                        }),
                        client_tags: m
                            .client_tags
                            .into_iter()
                            .map(|(key, value)| wire::KeyValue { key, value, ..Default::default() })
                            .collect(),
                        task_offsets: Vec::new(),
                        task_end_offsets: Vec::new(),
                        assignment: assignment(&m.assignment),
                        target_assignment: assignment(&m.target_assignment),
                        is_classic: false,
                        ..Default::default()
                    })
                    .collect();
                out.authorized_operations =
                    cx.authorized_operations(req.include_authorized_operations, ResourceType::Group, &g.group_id);
                out.topology_description_status = wire::Since(if req.include_topology_description.0 {
                    wire::TOPOLOGY_DESCRIPTION_NOT_STORED
                } else {
                    wire::TOPOLOGY_DESCRIPTION_NOT_REQUESTED
                });
                out.assignor_name = wire::Since(Some("sticky".to_string()));
                out
            })
            .collect();
        wire::StreamsGroupDescribeResponse { groups, ..Default::default() }.into()
    }
}
