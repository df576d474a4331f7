//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup: translate between the
//! wire messages (every version) and the coordinator's plain structs.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    SyncGroupRequest, SyncGroupResponse,
};

use super::handler::{refusal, Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::group;
use crate::group_service::{GroupService, Pending};

fn opt(s: &Option<kafka_protocol::protocol::StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

pub struct JoinGroup;

impl Handler for JoinGroup {
    const KEY: ApiKey = ApiKey::JoinGroup;
    /// v0-v9; from v4 a new member first gets MEMBER_ID_REQUIRED and its id
    /// (KIP-394); v9 adds skip_assignment (KIP-814).
    const VERSIONS: Versions = Versions::new(0, 9);
    type Request = JoinGroupRequest;
    type Response = JoinGroupResponse;
    type Services<'a> = &'a GroupService;

    async fn handle(
        groups: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: JoinGroupRequest,
    ) -> Answer<JoinGroupResponse> {
        if !cx.may_on_group(Operation::Read, &req.group_id.0) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        let version = cx.api_version;
        let request = group::JoinGroupRequest {
            api_version: version,
            group_id: req.group_id.0.to_string(),
            member_id: req.member_id.to_string(),
            group_instance_id: opt(&req.group_instance_id),
            protocol_type: req.protocol_type.to_string(),
            protocols: req
                .protocols
                .iter()
                .map(|p| group::Protocol { name: p.name.to_string(), metadata: p.metadata.clone() })
                .collect(),
            session_timeout_ms: req.session_timeout_ms,
            // v0 has no rebalance timeout: Kafka uses the session timeout.
            rebalance_timeout_ms: if version == 0 { req.session_timeout_ms } else { req.rebalance_timeout_ms },
            client_id: cx.client_id.to_owned(),
            client_host: cx.client_host(),
        };
        let member_id = request.member_id.clone();
        let now = crate::now_ms();
        let answer = match groups.join(|c| c.join_group(now, request)) {
            Pending::Now(r) => r,
            Pending::Later(rx) => rx
                .await
                .unwrap_or_else(|_| group::JoinGroupResponse::error(&member_id, error_code::UNKNOWN_SERVER_ERROR)),
        };
        let mut response = JoinGroupResponse::default();
        response.error_code = answer.error_code;
        response.generation_id = answer.generation_id;
        response.protocol_type = answer.protocol_type.as_deref().map(str_bytes);
        response.protocol_name = answer.protocol_name.as_deref().map(str_bytes);
        if version < 7 && response.protocol_name.is_none() {
            response.protocol_name = Some(str_bytes("")); // not nullable before v7
        }
        response.leader = str_bytes(&answer.leader);
        response.skip_assignment = version >= 9 && answer.skip_assignment;
        response.member_id = str_bytes(&answer.member_id);
        response.members = answer
            .members
            .into_iter()
            .map(|m| {
                let mut out = JoinGroupResponseMember::default();
                out.member_id = str_bytes(&m.member_id);
                out.group_instance_id = if version >= 5 { m.group_instance_id.as_deref().map(str_bytes) } else { None };
                out.metadata = m.metadata;
                out
            })
            .collect();
        response.into()
    }

    fn refused(cx: &RequestContext<'_>, req: &JoinGroupRequest, code: i16) -> Option<JoinGroupResponse> {
        let mut response = JoinGroupResponse::default();
        response.error_code = code;
        response.generation_id = -1;
        response.member_id = req.member_id.clone();
        if cx.api_version < 7 {
            response.protocol_name = Some(str_bytes("")); // not nullable before v7
        }
        Some(response)
    }
}

pub struct SyncGroup;

impl Handler for SyncGroup {
    const KEY: ApiKey = ApiKey::SyncGroup;
    const VERSIONS: Versions = Versions::new(0, 5);
    type Request = SyncGroupRequest;
    type Response = SyncGroupResponse;
    type Services<'a> = &'a GroupService;

    async fn handle(
        groups: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: SyncGroupRequest,
    ) -> Answer<SyncGroupResponse> {
        if !cx.may_on_group(Operation::Read, &req.group_id.0) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        let version = cx.api_version;
        let request = group::SyncGroupRequest {
            group_id: req.group_id.0.to_string(),
            generation_id: req.generation_id,
            member_id: req.member_id.to_string(),
            group_instance_id: opt(&req.group_instance_id),
            protocol_type: if version >= 5 { opt(&req.protocol_type) } else { None },
            protocol_name: if version >= 5 { opt(&req.protocol_name) } else { None },
            assignments: req.assignments.iter().map(|a| (a.member_id.to_string(), a.assignment.clone())).collect(),
        };
        let now = crate::now_ms();
        let answer = match groups.sync(|c| c.sync_group(now, request)) {
            Pending::Now(r) => r,
            Pending::Later(rx) => {
                rx.await.unwrap_or_else(|_| group::SyncGroupResponse::error(error_code::UNKNOWN_SERVER_ERROR))
            }
        };
        let mut response = SyncGroupResponse::default();
        response.error_code = answer.error_code;
        if version >= 5 {
            response.protocol_type = answer.protocol_type.as_deref().map(str_bytes);
            response.protocol_name = answer.protocol_name.as_deref().map(str_bytes);
        }
        response.assignment = answer.assignment;
        response.into()
    }

    fn refused(_: &RequestContext<'_>, _: &SyncGroupRequest, code: i16) -> Option<SyncGroupResponse> {
        let mut response = SyncGroupResponse::default();
        response.error_code = code;
        Some(response)
    }
}

pub struct Heartbeat;

impl Handler for Heartbeat {
    const KEY: ApiKey = ApiKey::Heartbeat;
    const VERSIONS: Versions = Versions::new(0, 4);
    type Request = HeartbeatRequest;
    type Response = HeartbeatResponse;
    type Services<'a> = &'a GroupService;

    async fn handle(
        groups: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: HeartbeatRequest,
    ) -> Answer<HeartbeatResponse> {
        if !cx.may_on_group(Operation::Read, &req.group_id.0) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        let request = group::HeartbeatRequest {
            group_id: req.group_id.0.to_string(),
            generation_id: req.generation_id,
            member_id: req.member_id.to_string(),
            group_instance_id: opt(&req.group_instance_id),
        };
        let now = crate::now_ms();
        let (error_code, writes) = groups.call(|c| c.heartbeat(now, request));
        drop(writes); // heartbeats never write
        let mut response = HeartbeatResponse::default();
        response.error_code = error_code;
        response.into()
    }

    fn refused(_: &RequestContext<'_>, _: &HeartbeatRequest, code: i16) -> Option<HeartbeatResponse> {
        let mut response = HeartbeatResponse::default();
        response.error_code = code;
        Some(response)
    }
}

pub struct LeaveGroup;

impl Handler for LeaveGroup {
    const KEY: ApiKey = ApiKey::LeaveGroup;
    /// v0-v5; from v3 one request removes several members (KIP-345).
    const VERSIONS: Versions = Versions::new(0, 5);
    type Request = LeaveGroupRequest;
    type Response = LeaveGroupResponse;
    type Services<'a> = &'a GroupService;

    async fn handle(
        groups: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: LeaveGroupRequest,
    ) -> Answer<LeaveGroupResponse> {
        if !cx.may_on_group(Operation::Read, &req.group_id.0) {
            return refusal::<Self>(cx, &req, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        let version = cx.api_version;
        let members = if version >= 3 {
            req.members
                .iter()
                .map(|m| group::LeavingMember {
                    member_id: m.member_id.to_string(),
                    group_instance_id: opt(&m.group_instance_id),
                })
                .collect()
        } else {
            vec![group::LeavingMember { member_id: req.member_id.to_string(), group_instance_id: None }]
        };
        let request = group::LeaveGroupRequest { group_id: req.group_id.0.to_string(), members };
        let now = crate::now_ms();
        let (answer, writes) = groups.call(|c| c.leave_group(now, request));
        drop(writes);
        let mut response = LeaveGroupResponse::default();
        response.error_code = answer.error_code;
        if version >= 3 {
            response.members = answer
                .members
                .into_iter()
                .map(|m| {
                    let mut out = MemberResponse::default();
                    out.member_id = str_bytes(&m.member_id);
                    out.group_instance_id = m.group_instance_id.as_deref().map(str_bytes);
                    out.error_code = m.error_code;
                    out
                })
                .collect();
        }
        response.into()
    }

    fn refused(_: &RequestContext<'_>, _: &LeaveGroupRequest, code: i16) -> Option<LeaveGroupResponse> {
        let mut response = LeaveGroupResponse::default();
        response.error_code = code;
        Some(response)
    }
}
