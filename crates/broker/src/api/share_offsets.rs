//! DescribeShareGroupOffsets (KIP-932): each share-partition's start offset,
//! what `kafka-share-groups.sh --describe` shows as a share group's offsets,
//! and from v1 (KIP-1226, Kafka 4.2) its lag: the records below the high
//! watermark not delivered completely yet, high watermark - start offset -
//! records after the start already acknowledged or archived (Kafka's
//! delivery-complete count), as `kafgres.share_group_partitions` counts it
//! in SQL; -1 for a partition the group has not read yet.

use kafgres_wire::error_code;
use kafgres_wire::messages::describe_share_group_offsets::LAG_VERSION;
use kafgres_wire::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition, DescribeShareGroupOffsetsResponseTopic,
};
use kafgres_wire::ApiKey;
use kafka_protocol::messages::TopicName;

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::share::ShareService;
use crate::topics::Topics;

/// A partition the group has not read yet has no start offset.
const NO_START_OFFSET: i64 = -1;

pub struct DescribeShareGroupOffsets;

impl Handler for DescribeShareGroupOffsets {
    const KEY: ApiKey = ApiKey::DescribeShareGroupOffsets;
    /// v0-v1: v1 (Kafka 4.2, KIP-1226) adds each partition's lag.
    const VERSIONS: Versions = Versions::new(0, LAG_VERSION);
    type Request = DescribeShareGroupOffsetsRequest;
    type Response = DescribeShareGroupOffsetsResponse;
    type Services<'a> = (&'a ShareService, &'a Topics);

    async fn handle(
        (shares, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: DescribeShareGroupOffsetsRequest,
    ) -> Answer<DescribeShareGroupOffsetsResponse> {
        let mut response = DescribeShareGroupOffsetsResponse::default();
        for group in req.0.groups {
            let group_id = group.group_id.0.to_string();
            let mut out =
                DescribeShareGroupOffsetsResponseGroup { group_id: group.group_id.clone(), ..Default::default() };
            if !cx.may_on_group(Operation::Describe, &group_id) {
                out.error_code = error_code::GROUP_AUTHORIZATION_FAILED;
                out.error_message = Some(str_bytes(super::authorized_operations::GROUP_REFUSED));
                response.groups.push(out);
                continue;
            }
            if !shares.group_exists(&group_id) {
                out.error_code = error_code::GROUP_ID_NOT_FOUND;
                out.error_message = Some(str_bytes(&format!("Group {group_id} not found.")));
                response.groups.push(out);
                continue;
            }
            let stored = shares.start_offsets(&group_id);
            // Null topics: every share-partition the group has read.
            let wanted: Vec<(String, Vec<i32>)> = match group.topics {
                Some(requested) => requested.into_iter().map(|t| (t.topic_name.0.to_string(), t.partitions)).collect(),
                None => {
                    let mut by_topic: Vec<(String, Vec<i32>)> = Vec::new();
                    for (topic_id, partition, _, _) in &stored {
                        let Some(topic) = topics.get_by_id(topic_id) else { continue };
                        match by_topic.iter_mut().find(|(name, _)| *name == topic.name) {
                            Some((_, partitions)) => partitions.push(*partition),
                            None => by_topic.push((topic.name.clone(), vec![*partition])),
                        }
                    }
                    by_topic
                }
            };
            for (name, partitions) in wanted {
                if !cx.may_on_topic(Operation::Describe, &name) {
                    continue; // Kafka leaves out the topics the client may not describe
                }
                let topic = topics.get(&name);
                let mut t = DescribeShareGroupOffsetsResponseTopic::default();
                t.topic_name = TopicName(str_bytes(&name));
                t.topic_id = topic.as_ref().map(|t| t.id).unwrap_or_default();
                for index in partitions {
                    let mut p = DescribeShareGroupOffsetsResponsePartition {
                        partition_index: index,
                        leader_epoch: -1,
                        ..Default::default()
                    };
                    match topic.as_ref().filter(|t| t.partition(index).is_some()) {
                        None => {
                            p.start_offset = NO_START_OFFSET;
                            p.error_code = error_code::UNKNOWN_TOPIC_OR_PARTITION;
                        }
                        Some(found) => {
                            let share_partition =
                                stored.iter().find(|(id, partition, _, _)| *id == found.id && *partition == index);
                            p.start_offset = share_partition.map_or(NO_START_OFFSET, |(_, _, start, _)| *start);
                            if let (Some((_, _, start, done)), Some(log)) = (share_partition, found.partition(index)) {
                                let high_watermark = log.high_watermark().offset;
                                p.lag = crate::share::partition::lag(high_watermark, *start, *done);
                            }
                        }
                    }
                    t.partitions.push(p);
                }
                out.topics.push(t);
            }
            response.groups.push(out);
        }
        response.into()
    }
}
