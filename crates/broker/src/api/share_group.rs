//! ShareGroupHeartbeat and ShareGroupDescribe (KIP-932): translate between
//! the wire messages and the share coordinator's plain structs.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment as DescribedAssignment, DescribedGroup, Member, TopicPartitions as DescribedPartitions,
};
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    GroupId, ShareGroupDescribeRequest, ShareGroupDescribeResponse, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse, TopicName,
};

use super::handler::{refusal, Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::{Operation, ResourceType};
use crate::group::TopicLookup;
use crate::share::membership::{ShareAssignment, ASSIGNOR_NAME};
use crate::share::{ShareHeartbeat, ShareService};
use crate::topics::Topics;

pub struct ShareGroupHeartbeat;

impl Handler for ShareGroupHeartbeat {
    const KEY: ApiKey = ApiKey::ShareGroupHeartbeat;
    /// v1: what Kafka 4.1 serves (v0 was KIP-932's early access, removed in 4.1).
    const VERSIONS: Versions = Versions::new(1, 1);
    type Request = ShareGroupHeartbeatRequest;
    type Response = ShareGroupHeartbeatResponse;
    type Services<'a> = (&'a ShareService, &'a Topics);

    async fn handle(
        (shares, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: ShareGroupHeartbeatRequest,
    ) -> Answer<ShareGroupHeartbeatResponse> {
        if !cx.may_on_group(Operation::Read, &req.group_id.0) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        let unauthorized: Vec<&str> = req
            .subscribed_topic_names
            .iter()
            .flatten()
            .map(|t| t.0.as_str())
            .filter(|name| !cx.may_on_topic(Operation::Describe, name))
            .collect();
        if !unauthorized.is_empty() {
            let mut response = ShareGroupHeartbeatResponse::default();
            response.error_code = error_code::TOPIC_AUTHORIZATION_FAILED;
            response.error_message = Some(str_bytes(&format!("Unauthorized topics: {}", unauthorized.join(", "))));
            return response.into();
        }
        let request = ShareHeartbeat {
            group_id: req.group_id.0.to_string(),
            member_id: req.member_id.to_string(),
            member_epoch: req.member_epoch,
            rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
            subscribed_topic_names: req
                .subscribed_topic_names
                .as_ref()
                .map(|n| n.iter().map(|t| t.0.to_string()).collect()),
            client_id: cx.client_id.to_owned(),
            client_host: cx.client_host(),
        };
        let answer = shares.heartbeat(request, &*topics.read());
        let mut response = ShareGroupHeartbeatResponse::default();
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
        _: &ShareGroupHeartbeatRequest,
        code: i16,
    ) -> Option<ShareGroupHeartbeatResponse> {
        let mut response = ShareGroupHeartbeatResponse::default();
        response.error_code = code;
        Some(response)
    }
}

fn described(assignment: &ShareAssignment, topics: &dyn TopicLookup) -> DescribedAssignment {
    let mut out = DescribedAssignment::default();
    out.topic_partitions = assignment
        .iter()
        .map(|(topic_id, partitions)| {
            let mut tp = DescribedPartitions::default();
            tp.topic_id = *topic_id;
            tp.topic_name = TopicName(str_bytes(&topics.topic_name(*topic_id).unwrap_or_default()));
            tp.partitions = partitions.iter().copied().collect();
            tp
        })
        .collect();
    out
}

pub struct ShareGroupDescribe;

impl Handler for ShareGroupDescribe {
    const KEY: ApiKey = ApiKey::ShareGroupDescribe;
    /// v1: what Kafka 4.1 serves.
    const VERSIONS: Versions = Versions::new(1, 1);
    type Request = ShareGroupDescribeRequest;
    type Response = ShareGroupDescribeResponse;
    type Services<'a> = (&'a ShareService, &'a Topics);

    async fn handle(
        (shares, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: ShareGroupDescribeRequest,
    ) -> Answer<ShareGroupDescribeResponse> {
        let registry = topics.read();
        let mut response = ShareGroupDescribeResponse::default();
        for group_id in &req.group_ids {
            let id = group_id.0.to_string();
            let mut out = DescribedGroup::default();
            out.group_id = GroupId(str_bytes(&id));
            if !cx.may_on_group(Operation::Describe, &id) {
                out.error_code = error_code::GROUP_AUTHORIZATION_FAILED;
                out.error_message = Some(str_bytes(super::authorized_operations::GROUP_REFUSED));
                response.groups.push(out);
                continue;
            }
            shares.read_membership(|m| match m.group(&id) {
                None => {
                    out.error_code = error_code::GROUP_ID_NOT_FOUND;
                    out.error_message = Some(str_bytes(&format!("Group {id} not found.")));
                }
                Some(g) => {
                    out.group_state = str_bytes(g.state());
                    out.group_epoch = g.group_epoch;
                    out.assignment_epoch = g.assignment_epoch;
                    out.assignor_name = str_bytes(ASSIGNOR_NAME);
                    out.authorized_operations =
                        cx.authorized_operations(req.include_authorized_operations, ResourceType::Group, &id);
                    out.members = g
                        .members
                        .values()
                        .map(|m| {
                            let mut member = Member::default();
                            member.member_id = str_bytes(&m.member_id);
                            member.rack_id = m.rack_id.as_deref().map(str_bytes);
                            member.member_epoch = m.member_epoch;
                            member.client_id = str_bytes(&m.client_id);
                            member.client_host = str_bytes(&m.client_host);
                            member.subscribed_topic_names =
                                m.subscribed_topic_names.iter().map(|n| TopicName(str_bytes(n))).collect();
                            member.assignment = described(&m.assignment, &*registry);
                            member
                        })
                        .collect();
                }
            });
            response.groups.push(out);
        }
        response.into()
    }
}
