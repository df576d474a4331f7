//! OffsetCommit, OffsetFetch and OffsetDelete. A commit is answered only once
//! Postgres has it durably: the coordinator validates and applies it, the
//! catalog stores it (batched with concurrent commits in one transaction).

use kafgres_wire::error_code;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest,
    OffsetFetchResponse,
};

use super::{str_bytes, topic_name};
use crate::group;
use crate::group_service::durable;
use crate::server::BrokerContext;

pub async fn offset_commit(ctx: &BrokerContext, version: i16, req: OffsetCommitRequest) -> OffsetCommitResponse {
    let group_id = req.group_id.0.to_string();
    // Partitions of unknown topics are refused here; the rest go to the coordinator.
    let mut unknown: Vec<(String, Vec<i32>)> = Vec::new();
    let mut known = Vec::new();
    for t in &req.topics {
        let name = t.name.0.to_string();
        let topic = ctx.topic(&name);
        let (ok, bad): (Vec<_>, Vec<_>) =
            t.partitions.iter().partition(|p| topic.as_ref().is_some_and(|t| t.partition(p.partition_index).is_some()));
        if !bad.is_empty() {
            unknown.push((name.clone(), bad.iter().map(|p| p.partition_index).collect()));
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
        let (answer, writes) = ctx.groups.call(|c| c.offset_commit(now, &request));
        codes_by_topic = match durable(writes).await {
            Ok(()) => answer.topics,
            Err(e) => {
                log::warn!("storing offsets of group {} failed: {e}", request.group_id);
                reload_group_offsets(ctx, &request.group_id).await;
                // Kafka's answer to a commit whose write failed: retriable.
                group::OffsetCommitResponse::all(&request, error_code::COORDINATOR_NOT_AVAILABLE).topics
            }
        };
    }
    for (name, partitions) in unknown {
        codes_by_topic
            .push((name, partitions.into_iter().map(|p| (p, error_code::UNKNOWN_TOPIC_OR_PARTITION)).collect()));
    }
    let mut response = OffsetCommitResponse::default();
    // Answer in request order.
    for t in &req.topics {
        let name = t.name.0.to_string();
        let found: Vec<(i32, i16)> =
            codes_by_topic.iter().filter(|(n, _)| *n == name).flat_map(|(_, p)| p.clone()).collect();
        let mut out = OffsetCommitResponseTopic::default();
        out.name = t.name.clone();
        out.partitions = t
            .partitions
            .iter()
            .map(|p| {
                let mut r = OffsetCommitResponsePartition::default();
                r.partition_index = p.partition_index;
                r.error_code = found
                    .iter()
                    .find(|(i, _)| *i == p.partition_index)
                    .map_or(error_code::UNKNOWN_SERVER_ERROR, |(_, c)| *c);
                r
            })
            .collect();
        response.topics.push(out);
    }
    response
}

pub fn offset_fetch(ctx: &BrokerContext, version: i16, req: OffsetFetchRequest) -> OffsetFetchResponse {
    let mut response = OffsetFetchResponse::default();
    if version >= 8 {
        for g in req.groups {
            let topics =
                g.topics.map(|ts| ts.into_iter().map(|t| (t.name.0.to_string(), t.partition_indexes)).collect());
            let answer = fetch_one(ctx, g.group_id.0.to_string(), topics);
            let mut out = OffsetFetchResponseGroup::default();
            out.group_id = g.group_id;
            out.error_code = answer.error_code;
            out.topics = answer
                .topics
                .into_iter()
                .map(|(name, partitions)| {
                    let mut t = OffsetFetchResponseTopics::default();
                    t.name = topic_name(&name);
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
            response.groups.push(out);
        }
        return response;
    }
    let topics = req.topics.map(|ts| ts.into_iter().map(|t| (t.name.0.to_string(), t.partition_indexes)).collect());
    let answer = fetch_one(ctx, req.group_id.0.to_string(), topics);
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
    response
}

fn fetch_one(
    ctx: &BrokerContext,
    group_id: String,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> group::OffsetFetchResponse {
    ctx.groups.read(|c| c.offset_fetch(&group::OffsetFetchRequest { group_id, topics }))
}

pub async fn offset_delete(ctx: &BrokerContext, _version: i16, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let request = group::OffsetDeleteRequest {
        group_id: req.group_id.0.to_string(),
        topics: req
            .topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.partitions.iter().map(|p| p.partition_index).collect()))
            .collect(),
    };
    let now = crate::now_ms();
    let (answer, writes) = ctx.groups.call(|c| c.offset_delete(now, &request));
    let mut response = OffsetDeleteResponse::default();
    if let Err(e) = durable(writes).await {
        log::warn!("deleting offsets of group {} failed: {e}", request.group_id);
        response.error_code = error_code::COORDINATOR_NOT_AVAILABLE;
        return response;
    }
    response.error_code = answer.error_code;
    response.topics = answer
        .topics
        .into_iter()
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
    response
}

/// After a failed write the coordinator's view holds offsets the catalog does
/// not: read the group's rows back so OffsetFetch answers what is durable.
/// If that read fails too, the view stays ahead until the broker restarts
/// (and says so in the log).
async fn reload_group_offsets(ctx: &BrokerContext, group_id: &str) {
    match ctx.catalog.load_group_offsets(group_id.to_string()).await {
        Ok(rows) => ctx.groups.replace_group_offsets(group_id, rows),
        Err(e) => log::error!(
            "reloading the offsets of group {group_id} failed too ({e}); OffsetFetch may answer offsets \
             that are not stored until the broker restarts"
        ),
    }
}
