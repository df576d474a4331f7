//! OffsetCommit, OffsetFetch and OffsetDelete. A commit is answered only once
//! Postgres has it durably: the coordinator validates and applies it, the
//! catalog stores it (batched with concurrent commits in one transaction).
//!
//! From OffsetCommit and OffsetFetch v10 (KIP-848, Kafka 4.4) topics are named
//! by id: the ids are turned into names first (an unknown id is
//! UNKNOWN_TOPIC_ID for its partitions), the rest works by name, and the
//! answer names topics by id again.

use kafgres_wire::error_code;
use kafgres_wire::messages::{
    offset_commit, offset_fetch, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
};
use kafgres_wire::ApiKey;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchResponse};

use super::handler::{refusal, Answer, Handler, RequestContext, Versions};
use super::{str_bytes, topic_name};
use crate::acl::Operation;
use crate::group;
use crate::group_service::{durable, GroupService};
use crate::topics::Topics;

pub struct OffsetCommit;

impl Handler for OffsetCommit {
    const KEY: ApiKey = ApiKey::OffsetCommit;
    /// v2-v10, Kafka 4.4's range: v6 adds leader epochs, v7 static members,
    /// v8 is flexible, v9 takes KIP-848 member epochs, v10 names topics by id.
    const VERSIONS: Versions = Versions::new(2, offset_commit::TOPIC_ID_VERSION);
    type Request = OffsetCommitRequest;
    type Response = OffsetCommitResponse;
    type Services<'a> = (&'a Topics, &'a GroupService);

    async fn handle(
        (topics, groups): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: OffsetCommitRequest,
    ) -> Answer<OffsetCommitResponse> {
        let version = cx.api_version;
        let by_id = version >= offset_commit::TOPIC_ID_VERSION;
        let mut req = req;
        if by_id {
            name_topics_by_id(topics, &mut req);
        }
        let group_id = req.group_id.0.to_string();
        if !cx.may_on_group(Operation::Read, &group_id) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        // Partitions of unknown topics (and of topics the client may not
        // read) are refused here; the rest go to the coordinator.
        let mut unknown: Vec<(String, Vec<i32>, i16)> = Vec::new();
        let mut known = Vec::new();
        for t in &req.topics {
            let name = t.name.0.to_string();
            if by_id && name.is_empty() {
                let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                unknown.push((name, partitions, error_code::UNKNOWN_TOPIC_ID));
                continue;
            }
            if !cx.may_on_topic(Operation::Read, &name) {
                let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                unknown.push((name, partitions, error_code::TOPIC_AUTHORIZATION_FAILED));
                continue;
            }
            let topic = topics.get(&name);
            let (ok, bad): (Vec<_>, Vec<_>) = t
                .partitions
                .iter()
                .partition(|p| topic.as_ref().is_some_and(|t| t.partition(p.partition_index).is_some()));
            if !bad.is_empty() {
                let partitions = bad.iter().map(|p| p.partition_index).collect();
                unknown.push((name.clone(), partitions, error_code::UNKNOWN_TOPIC_OR_PARTITION));
            }
            if !ok.is_empty() {
                known.push(group::OffsetCommitTopic {
                    name,
                    partitions: ok
                        .into_iter()
                        .map(|p| group::OffsetCommitPartition {
                            partition: p.partition_index,
                            offset: p.committed_offset,
                            leader_epoch: if version >= 6 { p.committed_leader_epoch } else { -1 },
                            metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                        })
                        .collect(),
                });
            }
        }
        let request = group::OffsetCommitRequest {
            api_version: version,
            group_id,
            generation_id: req.generation_id_or_member_epoch,
            member_id: req.member_id.to_string(),
            group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
            topics: known,
        };
        let mut codes_by_topic: Vec<(String, Vec<(i32, i16)>)> = Vec::new();
        if !request.topics.is_empty() {
            let now = crate::now_ms();
            let (answer, writes) = groups.call(|c| c.offset_commit(now, &request));
            codes_by_topic = match durable(writes).await {
                Ok(()) => answer.topics,
                Err(e) => {
                    log::warn!("storing offsets of group {} failed: {e}", request.group_id);
                    groups.reload_group_offsets(&request.group_id).await;
                    // Kafka's answer to a commit whose write failed: retriable.
                    group::OffsetCommitResponse::all(&request, error_code::COORDINATOR_NOT_AVAILABLE).topics
                }
            };
        }
        for (name, partitions, code) in unknown {
            codes_by_topic.push((name, partitions.into_iter().map(|p| (p, code)).collect()));
        }
        answered_in_request_order(version, &req, |name, index| {
            codes_by_topic
                .iter()
                .filter(|(n, _)| n == name)
                .flat_map(|(_, p)| p.iter())
                .find(|(i, _)| *i == index)
                .map_or(error_code::UNKNOWN_SERVER_ERROR, |(_, c)| *c)
        })
        .into()
    }

    fn refused(cx: &RequestContext<'_>, req: &OffsetCommitRequest, code: i16) -> Option<OffsetCommitResponse> {
        Some(answered_in_request_order(cx.api_version, req, |_, _| code))
    }
}

/// Sets the name of each topic whose id this broker knows (the others keep
/// an empty name: no topic has one).
fn name_topics_by_id(topics: &Topics, req: &mut OffsetCommitRequest) {
    for t in &mut req.topics {
        if let Some(topic) = topics.get_by_id(&t.topic_id) {
            t.name = topic_name(&topic.name);
        }
    }
}

/// OffsetCommit's answer: each partition asked for, in request order, with
/// `code_of(topic, partition)`; from v10 each topic by its id, as asked.
fn answered_in_request_order(
    version: i16,
    req: &OffsetCommitRequest,
    code_of: impl Fn(&str, i32) -> i16,
) -> OffsetCommitResponse {
    // Built as kafka-protocol's message, which v10 wraps.
    let mut response = kafka_protocol::messages::OffsetCommitResponse::default();
    response.topics = req
        .topics
        .iter()
        .map(|t| {
            let mut out = OffsetCommitResponseTopic::default();
            if version >= offset_commit::TOPIC_ID_VERSION {
                out.topic_id = t.topic_id;
            } else {
                out.name = t.name.clone();
            }
            out.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut r = OffsetCommitResponsePartition::default();
                    r.partition_index = p.partition_index;
                    r.error_code = code_of(t.name.0.as_str(), p.partition_index);
                    r
                })
                .collect();
            out
        })
        .collect();
    response.into()
}

pub struct OffsetFetch;

impl Handler for OffsetFetch {
    const KEY: ApiKey = ApiKey::OffsetFetch;
    /// v1-v10, Kafka 4.4's range: v8 batches groups, v9 takes KIP-848 member
    /// epochs, v10 names topics by id.
    const VERSIONS: Versions = Versions::new(1, offset_fetch::TOPIC_ID_VERSION);
    type Request = OffsetFetchRequest;
    type Response = OffsetFetchResponse;
    type Services<'a> = (&'a Topics, &'a GroupService);

    async fn handle(
        (topic_table, groups): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: OffsetFetchRequest,
    ) -> Answer<OffsetFetchResponse> {
        let version = cx.api_version;
        let by_id = version >= offset_fetch::TOPIC_ID_VERSION;
        let req = req.0;
        let mut response = OffsetFetchResponse::default();
        if version >= 8 {
            for g in req.groups {
                // From v10, topics by id: those this broker does not know are
                // answered UNKNOWN_TOPIC_ID, after the group's own checks.
                let mut unknown_ids = Vec::new();
                let topics = g.topics.map(|ts| {
                    ts.into_iter()
                        .filter_map(|t| {
                            if !by_id {
                                return Some((t.name.0.to_string(), t.partition_indexes));
                            }
                            match topic_table.get_by_id(&t.topic_id) {
                                Some(topic) => Some((topic.name.clone(), t.partition_indexes)),
                                None => {
                                    unknown_ids.push((t.topic_id, t.partition_indexes));
                                    None
                                }
                            }
                        })
                        .collect()
                });
                let answer = fetch_one(cx, groups, g.group_id.0.to_string(), topics);
                let mut out = OffsetFetchResponseGroup::default();
                out.group_id = g.group_id;
                out.error_code = answer.error_code;
                let named = answer.topics.into_iter().filter_map(|(name, partitions)| {
                    if !by_id {
                        return Some((topic_name(&name), Default::default(), partitions));
                    }
                    // A topic that no longer exists has no id to name it by.
                    topic_table.get(&name).map(|t| (Default::default(), t.id, partitions))
                });
                out.topics = named
                    .map(|(name, topic_id, partitions)| {
                        let mut t = OffsetFetchResponseTopics::default();
                        t.name = name;
                        t.topic_id = topic_id;
                        t.partitions = partitions
                            .into_iter()
                            .map(|p| {
                                let mut r = OffsetFetchResponsePartitions::default();
                                r.partition_index = p.partition;
                                r.committed_offset = p.offset;
                                r.committed_leader_epoch = p.leader_epoch;
                                r.metadata = Some(str_bytes(&p.metadata));
                                r.error_code = p.error_code;
                                r
                            })
                            .collect();
                        t
                    })
                    .collect();
                if answer.error_code == error_code::NONE {
                    out.topics.extend(unknown_ids.into_iter().map(|(topic_id, partitions)| {
                        let mut t = OffsetFetchResponseTopics::default();
                        t.topic_id = topic_id;
                        t.partitions = partitions
                            .into_iter()
                            .map(|index| {
                                let mut r = OffsetFetchResponsePartitions::default();
                                r.partition_index = index;
                                r.committed_offset = -1;
                                r.committed_leader_epoch = -1;
                                r.metadata = Some(str_bytes(""));
                                r.error_code = error_code::UNKNOWN_TOPIC_ID;
                                r
                            })
                            .collect();
                        t
                    }));
                }
                response.groups.push(out);
            }
            return response.into();
        }
        if !cx.may_on_group(Operation::Describe, &req.group_id.0) {
            return refusal::<Self>(cx, &OffsetFetchRequest(req), error_code::GROUP_AUTHORIZATION_FAILED);
        }
        let topics = req.topics.map(|ts| ts.into_iter().map(|t| (t.name.0.to_string(), t.partition_indexes)).collect());
        let answer = fetch_one(cx, groups, req.group_id.0.to_string(), topics);
        if version >= 2 {
            response.error_code = answer.error_code;
        }
        response.topics = answer
            .topics
            .into_iter()
            .map(|(name, partitions)| {
                let mut t = OffsetFetchResponseTopic::default();
                t.name = topic_name(&name);
                t.partitions = partitions
                    .into_iter()
                    .map(|p| {
                        let mut r = OffsetFetchResponsePartition::default();
                        r.partition_index = p.partition;
                        r.committed_offset = p.offset;
                        if version >= 5 {
                            r.committed_leader_epoch = p.leader_epoch;
                        }
                        r.metadata = Some(str_bytes(&p.metadata));
                        r.error_code = p.error_code;
                        r
                    })
                    .collect();
                t
            })
            .collect();
        response.into()
    }

    fn refused(cx: &RequestContext<'_>, req: &OffsetFetchRequest, code: i16) -> Option<OffsetFetchResponse> {
        let mut response = OffsetFetchResponse::default();
        if cx.api_version >= 8 {
            response.groups = req
                .groups
                .iter()
                .map(|g| {
                    let mut out = OffsetFetchResponseGroup::default();
                    out.group_id = g.group_id.clone();
                    out.error_code = code;
                    out
                })
                .collect();
            return Some(response);
        }
        if cx.api_version >= 2 {
            response.error_code = code;
            return Some(response);
        }
        // v1 has no group-level error: each partition asked for carries it.
        response.topics = req
            .topics
            .iter()
            .flatten()
            .map(|t| {
                let mut out = OffsetFetchResponseTopic::default();
                out.name = t.name.clone();
                out.partitions = t
                    .partition_indexes
                    .iter()
                    .map(|&index| {
                        let mut r = OffsetFetchResponsePartition::default();
                        r.partition_index = index;
                        r.committed_offset = -1;
                        r.metadata = Some(str_bytes(""));
                        r.error_code = code;
                        r
                    })
                    .collect();
                out
            })
            .collect();
        Some(response)
    }
}

/// One group's committed offsets, as far as the client may see them: the
/// group needs DESCRIBE; a topic asked for by name without DESCRIBE is
/// answered TOPIC_AUTHORIZATION_FAILED, and left out of "every topic".
fn fetch_one(
    cx: &RequestContext<'_>,
    groups: &GroupService,
    group_id: String,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> group::OffsetFetchResponse {
    if !cx.may_on_group(Operation::Describe, &group_id) {
        return group::OffsetFetchResponse {
            group_id,
            error_code: error_code::GROUP_AUTHORIZATION_FAILED,
            topics: Vec::new(),
        };
    }
    let visible = |name: &str| cx.may_on_topic(Operation::Describe, name);
    let (topics, refused): (Option<Vec<_>>, Vec<_>) = match topics {
        None => (None, Vec::new()),
        Some(ts) => {
            let (ok, refused) = ts.into_iter().partition(|(name, _)| visible(name));
            (Some(ok), refused)
        }
    };
    let every_topic = topics.is_none();
    let asked_none = topics.as_ref().is_some_and(Vec::is_empty) && !refused.is_empty();
    let mut answer = if asked_none {
        group::OffsetFetchResponse { group_id, error_code: error_code::NONE, topics: Vec::new() }
    } else {
        groups.read(|c| c.offset_fetch(&group::OffsetFetchRequest { group_id, topics }))
    };
    if every_topic {
        answer.topics.retain(|(name, _)| visible(name));
    }
    for (name, partitions) in refused {
        let refused_partition = |partition| group::FetchedOffset {
            partition,
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
            error_code: error_code::TOPIC_AUTHORIZATION_FAILED,
        };
        answer.topics.push((name, partitions.into_iter().map(refused_partition).collect()));
    }
    answer
}

pub struct OffsetDelete;

impl Handler for OffsetDelete {
    const KEY: ApiKey = ApiKey::OffsetDelete;
    const VERSIONS: Versions = Versions::new(0, 0);
    type Request = OffsetDeleteRequest;
    type Response = OffsetDeleteResponse;
    type Services<'a> = &'a GroupService;

    async fn handle(
        groups: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: OffsetDeleteRequest,
    ) -> Answer<OffsetDeleteResponse> {
        // DELETE on the group, READ on each topic, as Kafka asks.
        if !cx.may_on_group(Operation::Delete, &req.group_id.0) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        let (topics, refused): (Vec<_>, Vec<_>) = req
            .topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partitions.iter().map(|p| p.partition_index).collect::<Vec<i32>>()))
            .partition(|(name, _)| cx.may_on_topic(Operation::Read, name));
        let request = group::OffsetDeleteRequest { group_id: req.group_id.0.to_string(), topics };
        let now = crate::now_ms();
        let (answer, writes) = groups.call(|c| c.offset_delete(now, &request));
        let mut response = OffsetDeleteResponse::default();
        if let Err(e) = durable(writes).await {
            log::warn!("deleting offsets of group {} failed: {e}", request.group_id);
            response.error_code = error_code::COORDINATOR_NOT_AVAILABLE;
            return response.into();
        }
        response.error_code = answer.error_code;
        let refused = refused.into_iter().map(|(name, partitions)| {
            (name, partitions.into_iter().map(|p| (p, error_code::TOPIC_AUTHORIZATION_FAILED)).collect::<Vec<_>>())
        });
        response.topics = answer
            .topics
            .into_iter()
            .chain(refused)
            .map(|(name, partitions)| {
                let mut t = OffsetDeleteResponseTopic::default();
                t.name = topic_name(&name);
                t.partitions = partitions
                    .into_iter()
                    .map(|(index, code)| {
                        let mut p = OffsetDeleteResponsePartition::default();
                        p.partition_index = index;
                        p.error_code = code;
                        p
                    })
                    .collect();
                t
            })
            .collect();
        response.into()
    }

    fn refused(_: &RequestContext<'_>, _: &OffsetDeleteRequest, code: i16) -> Option<OffsetDeleteResponse> {
        let mut response = OffsetDeleteResponse::default();
        response.error_code = code;
        Some(response)
    }
}
