//! ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848): translate
//! between the wire messages and the coordinator's plain structs.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribedAssignment, DescribedGroup, Member, TopicPartitions as DescribedPartitions,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};

use super::handler::{refusal, Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::{Operation, ResourceType};
use crate::group::{self, NamedPartitions};
use crate::group_service::GroupService;
use crate::topics::Topics;

/// ConsumerGroupDescribe v1's member type of a consumer-protocol member.
const MEMBER_TYPE_CONSUMER: i8 = 1;

pub struct ConsumerGroupHeartbeat;

impl Handler for ConsumerGroupHeartbeat {
    const KEY: ApiKey = ApiKey::ConsumerGroupHeartbeat;
    /// v0-v1 (KIP-848); v1 adds subscriptions by regular expression.
    const VERSIONS: Versions = Versions::new(0, 1);
    type Request = ConsumerGroupHeartbeatRequest;
    type Response = ConsumerGroupHeartbeatResponse;
    type Services<'a> = (&'a GroupService, &'a Topics);

    async fn handle(
        (groups, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: ConsumerGroupHeartbeatRequest,
    ) -> Answer<ConsumerGroupHeartbeatResponse> {
        let version = cx.api_version;
        if !cx.may_on_group(Operation::Read, &req.group_id.0) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        // Kafka refuses a subscription naming topics the member may not describe.
        let unauthorized: Vec<&str> = req
            .subscribed_topic_names
            .iter()
            .flatten()
            .map(|t| t.0.as_str())
            .filter(|name| !cx.may_on_topic(Operation::Describe, name))
            .collect();
        if !unauthorized.is_empty() {
            let mut response = ConsumerGroupHeartbeatResponse::default();
            response.error_code = error_code::TOPIC_AUTHORIZATION_FAILED;
            response.error_message = Some(str_bytes(&format!("Unauthorized topics: {}", unauthorized.join(", "))));
            return response.into();
        }
        let owned = req.topic_partitions.as_ref().map(|owned_topics| {
            let mut owned = group::Assignment::new();
            for t in owned_topics {
                owned.entry(t.topic_id).or_default().extend(t.partitions.iter().copied());
            }
            owned
        });
        let request = group::ConsumerHeartbeatRequest {
            api_version: version,
            group_id: req.group_id.0.to_string(),
            member_id: req.member_id.to_string(),
            member_epoch: req.member_epoch,
            instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
            rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            subscribed_topic_names: req
                .subscribed_topic_names
                .as_ref()
                .map(|n| n.iter().map(|t| t.0.to_string()).collect()),
            subscribed_topic_regex: if version >= 1 {
                req.subscribed_topic_regex.as_ref().map(|s| s.to_string())
            } else {
                None
            },
            server_assignor: req.server_assignor.as_ref().map(|s| s.to_string()),
            owned_partitions: owned,
            client_id: cx.client_id.to_owned(),
            client_host: cx.client_host(),
        };
        let now = crate::now_ms();
        let (answer, writes) = groups.call(|c| c.consumer_group_heartbeat(now, request, &*topics.read()));
        drop(writes); // heartbeats never write offsets
        let mut response = ConsumerGroupHeartbeatResponse::default();
        response.error_code = answer.error_code;
        response.error_message = answer.error_message.as_deref().map(str_bytes);
        response.member_id = answer.member_id.as_deref().map(str_bytes);
        response.member_epoch = answer.member_epoch;
        response.heartbeat_interval_ms = answer.heartbeat_interval_ms;
        response.assignment = answer.assignment.map(|assignment| {
            let mut out = Assignment::default();
            out.topic_partitions = assignment
                .into_iter()
                .map(|(topic_id, partitions)| {
                    let mut tp = TopicPartitions::default();
                    tp.topic_id = topic_id;
                    tp.partitions = partitions.into_iter().collect();
                    tp
                })
                .collect();
            out
        });
        response.into()
    }

    fn refused(
        _: &RequestContext<'_>,
        _: &ConsumerGroupHeartbeatRequest,
        code: i16,
    ) -> Option<ConsumerGroupHeartbeatResponse> {
        let mut response = ConsumerGroupHeartbeatResponse::default();
        response.error_code = code;
        Some(response)
    }
}

fn described_partitions(partitions: Vec<NamedPartitions>) -> DescribedAssignment {
    let mut out = DescribedAssignment::default();
    out.topic_partitions = partitions
        .into_iter()
        .map(|p| {
            let mut tp = DescribedPartitions::default();
            tp.topic_id = p.topic_id;
            tp.topic_name = TopicName(str_bytes(&p.topic_name));
            tp.partitions = p.partitions;
            tp
        })
        .collect();
    out
}

pub struct ConsumerGroupDescribe;

impl Handler for ConsumerGroupDescribe {
    const KEY: ApiKey = ApiKey::ConsumerGroupDescribe;
    /// v0-v1 (KIP-848); v1 adds each member's type.
    const VERSIONS: Versions = Versions::new(0, 1);
    type Request = ConsumerGroupDescribeRequest;
    type Response = ConsumerGroupDescribeResponse;
    type Services<'a> = (&'a GroupService, &'a Topics);

    async fn handle(
        (groups, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: ConsumerGroupDescribeRequest,
    ) -> Answer<ConsumerGroupDescribeResponse> {
        let version = cx.api_version;
        let group_ids: Vec<String> = req.group_ids.iter().map(|g| g.0.to_string()).collect();
        let described = groups.read(|c| c.consumer_group_describe(&group_ids, &*topics.read()));
        let mut response = ConsumerGroupDescribeResponse::default();
        response.groups = described
            .into_iter()
            .map(|g| {
                let mut out = DescribedGroup::default();
                if !cx.may_on_group(Operation::Describe, &g.group_id) {
                    out.group_id = GroupId(str_bytes(&g.group_id));
                    out.error_code = error_code::GROUP_AUTHORIZATION_FAILED;
                    out.error_message = Some(str_bytes(super::authorized_operations::GROUP_REFUSED));
                    return out;
                }
                out.error_code = g.error_code;
                out.error_message = g.error_message.as_deref().map(str_bytes);
                out.group_id = GroupId(str_bytes(&g.group_id));
                out.group_state = str_bytes(&g.group_state);
                out.group_epoch = g.group_epoch;
                out.assignment_epoch = g.assignment_epoch;
                out.assignor_name = str_bytes(&g.assignor_name);
                // Kafka fills them in for the groups it describes without an error.
                out.authorized_operations = cx.authorized_operations(
                    req.include_authorized_operations && g.error_code == error_code::NONE,
                    ResourceType::Group,
                    &g.group_id,
                );
                out.members = g
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut member = Member::default();
                        member.member_id = str_bytes(&m.member_id);
                        member.instance_id = m.instance_id.as_deref().map(str_bytes);
                        member.rack_id = m.rack_id.as_deref().map(str_bytes);
                        member.member_epoch = m.member_epoch;
                        member.client_id = str_bytes(&m.client_id);
                        member.client_host = str_bytes(&m.client_host);
                        member.subscribed_topic_names =
                            m.subscribed_topic_names.iter().map(|n| TopicName(str_bytes(n))).collect();
                        member.subscribed_topic_regex = m.subscribed_topic_regex.as_deref().map(str_bytes);
                        member.assignment = described_partitions(m.assignment);
                        member.target_assignment = described_partitions(m.target_assignment);
                        if version >= 1 {
                            member.member_type = MEMBER_TYPE_CONSUMER;
                        }
                        member
                    })
                    .collect();
                out
            })
            .collect();
        response.into()
    }
}
