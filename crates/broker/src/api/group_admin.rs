//! FindCoordinator (this broker coordinates every group and transactional
//! id), ListGroups,
//! DescribeGroups and DeleteGroups.

use kafgres_wire::ApiKey;
use kafgres_wire::{error_code, messages};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    BrokerId, DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    ListGroupsRequest, ListGroupsResponse,
};

use super::authorized_operations::{GROUP_REFUSED, TRANSACTIONAL_ID_REFUSED};
use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::{Operation, ResourceType};
use crate::config::BrokerConfig;
use crate::group_service::{durable, GroupService};

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// (error, message) for one coordinator key; DESCRIBE on the group or the
/// transactional id is asked first, as Kafka does.
fn coordinator_for(cx: &RequestContext<'_>, key_type: i8, key: &str) -> (i16, Option<&'static str>) {
    match key_type {
        KEY_TYPE_GROUP if !cx.may_on_group(Operation::Describe, key) => {
            (error_code::GROUP_AUTHORIZATION_FAILED, Some(GROUP_REFUSED))
        }
        KEY_TYPE_GROUP if key.is_empty() => (error_code::INVALID_GROUP_ID, Some("the group id is empty")),
        KEY_TYPE_GROUP => (error_code::NONE, None),
        KEY_TYPE_TRANSACTION if !cx.may_on_transactional_id(Operation::Describe, key) => {
            (error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Some(TRANSACTIONAL_ID_REFUSED))
        }
        KEY_TYPE_TRANSACTION if key.is_empty() => (error_code::INVALID_REQUEST, Some("the transactional id is empty")),
        KEY_TYPE_TRANSACTION => (error_code::NONE, None),
        _ => (error_code::INVALID_REQUEST, Some("unknown coordinator key type")),
    }
}

pub struct FindCoordinator;

impl Handler for FindCoordinator {
    const KEY: ApiKey = ApiKey::FindCoordinator;
    /// v0-v6; v4 looks up several keys in one request (KIP-699).
    const VERSIONS: Versions = Versions::new(0, 6);
    type Request = FindCoordinatorRequest;
    type Response = FindCoordinatorResponse;
    type Services<'a> = &'a BrokerConfig;

    async fn handle(
        config: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: FindCoordinatorRequest,
    ) -> Answer<FindCoordinatorResponse> {
        let version = cx.api_version;
        let mut response = FindCoordinatorResponse::default();
        let (node_id, host, port) = cx.serving_node(config);
        let node = BrokerId(node_id);
        let host = str_bytes(host);
        let port = i32::from(port);
        if version >= 4 {
            response.coordinators = req
                .coordinator_keys
                .iter()
                .map(|key| {
                    let (code, message) = coordinator_for(cx, req.key_type, key);
                    let mut c = Coordinator::default();
                    c.key = key.clone();
                    c.error_code = code;
                    c.error_message = message.map(str_bytes);
                    if code == error_code::NONE {
                        c.error_message = None;
                        c.node_id = node;
                        c.host = host.clone();
                        c.port = port;
                    } else {
                        c.node_id = BrokerId(-1);
                        c.port = -1;
                    }
                    c
                })
                .collect();
            return response.into();
        }
        let key_type = if version >= 1 { req.key_type } else { KEY_TYPE_GROUP };
        let (code, message) = coordinator_for(cx, key_type, &req.key);
        response.error_code = code;
        if version >= 1 {
            response.error_message = message.map(str_bytes);
        }
        if code == error_code::NONE {
            response.node_id = node;
            response.host = host;
            response.port = port;
        } else {
            response.node_id = BrokerId(-1);
            response.port = -1;
        }
        response.into()
    }
}

pub struct ListGroups;

impl Handler for ListGroups {
    const KEY: ApiKey = ApiKey::ListGroups;
    const VERSIONS: Versions = Versions::new(0, 5);
    type Request = ListGroupsRequest;
    type Response = ListGroupsResponse;
    type Services<'a> = (&'a GroupService, &'a crate::share::ShareService);

    async fn handle(
        (groups, shares): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: ListGroupsRequest,
    ) -> Answer<ListGroupsResponse> {
        let version = cx.api_version;
        let states: Vec<String> =
            if version >= 4 { req.states_filter.iter().map(|s| s.to_string()).collect() } else { vec![] };
        let types: Vec<String> =
            if version >= 5 { req.types_filter.iter().map(|s| s.to_string()).collect() } else { vec![] };
        let mut listed = groups.read(|c| c.list_groups(&states, &types));
        // Share groups, as Kafka lists them: protocol type and group type "share".
        listed.extend(shares.listed_groups(&states, &types));
        // DESCRIBE on the cluster lists every group; else those the client may describe.
        let all = cx.may_on_cluster(Operation::Describe);
        let mut response = ListGroupsResponse::default();
        response.groups = listed
            .into_iter()
            .filter(|g| all || cx.may_on_group(Operation::Describe, &g.group_id))
            .map(|g| {
                let mut out = ListedGroup::default();
                out.group_id = GroupId(str_bytes(&g.group_id));
                out.protocol_type = str_bytes(&g.protocol_type);
                if version >= 4 {
                    out.group_state = str_bytes(g.state.as_str());
                }
                if version >= 5 {
                    out.group_type = str_bytes(g.group_type);
                }
                out
            })
            .collect();
        response.into()
    }
}

/// DescribeGroups v6 added an error message (with GROUP_ID_NOT_FOUND, KIP-1043).
const GROUP_ID_NOT_FOUND_VERSION_MIN: i16 = 6;

pub struct DescribeGroups;

impl Handler for DescribeGroups {
    const KEY: ApiKey = ApiKey::DescribeGroups;
    /// v0-v6: v6 answers an unknown group (or a consumer-protocol group) with
    /// GROUP_ID_NOT_FOUND and an error message (KIP-1043).
    const VERSIONS: Versions = Versions::new(0, 6);
    type Request = DescribeGroupsRequest;
    type Response = DescribeGroupsResponse;
    type Services<'a> = &'a GroupService;

    async fn handle(
        groups: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: DescribeGroupsRequest,
    ) -> Answer<DescribeGroupsResponse> {
        let version = cx.api_version;
        let ids: Vec<String> = req.groups.iter().map(|g| g.0.to_string()).collect();
        let described = groups.read(|c| c.describe_groups(version, &ids));
        let mut response = DescribeGroupsResponse::default();
        response.groups = described
            .into_iter()
            .map(|g| {
                let mut out = DescribedGroup::default();
                out.group_id = GroupId(str_bytes(&g.group_id));
                if !cx.may_on_group(Operation::Describe, &g.group_id) {
                    out.error_code = error_code::GROUP_AUTHORIZATION_FAILED;
                    return out;
                }
                out.error_code = g.error_code;
                if version >= GROUP_ID_NOT_FOUND_VERSION_MIN {
                    out.error_message = g.error_message.as_deref().map(str_bytes);
                }
                // Kafka fills them in (v3+) for the groups it describes without an error.
                out.authorized_operations = cx.authorized_operations(
                    req.include_authorized_operations && g.error_code == error_code::NONE,
                    ResourceType::Group,
                    &g.group_id,
                );
                out.group_state = str_bytes(g.state.as_str());
                out.protocol_type = str_bytes(&g.protocol_type);
                out.protocol_data = str_bytes(&g.protocol_data);
                out.members = g
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut member = DescribedGroupMember::default();
                        member.member_id = str_bytes(&m.member_id);
                        if version >= 4 {
                            member.group_instance_id = m.group_instance_id.as_deref().map(str_bytes);
                        }
                        member.client_id = str_bytes(&m.client_id);
                        member.client_host = str_bytes(&m.client_host);
                        member.member_metadata = m.metadata;
                        member.member_assignment = m.assignment;
                        member
                    })
                    .collect();
                out
            })
            .collect();
        response.into()
    }
}

pub struct DeleteGroups;

impl Handler for DeleteGroups {
    const KEY: ApiKey = ApiKey::DeleteGroups;
    /// v0-v3, Kafka 4.4's range: v2 is flexible, v3 adds an error message per
    /// group, which Kafka 4.4 leaves null for the errors Kafgres gives
    /// (its group shard sets only the code of GROUP_ID_NOT_FOUND and
    /// NON_EMPTY_GROUP, KafkaApis only that of GROUP_AUTHORIZATION_FAILED), and
    /// so does Kafgres.
    const VERSIONS: Versions = Versions::new(0, 3);
    type Request = messages::DeleteGroupsRequest;
    type Response = messages::DeleteGroupsResponse;
    type Services<'a> = (&'a GroupService, &'a crate::share::ShareService);

    async fn handle(
        (groups, shares): Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: messages::DeleteGroupsRequest,
    ) -> Answer<messages::DeleteGroupsResponse> {
        let (ids, refused): (Vec<String>, Vec<String>) =
            req.groups_names.iter().map(|g| g.0.to_string()).partition(|g| cx.may_on_group(Operation::Delete, g));
        let now = crate::now_ms();
        let (mut results, mut writes) = groups.call(|c| c.delete_groups(now, &ids));
        // A group the classic/consumer coordinator does not know may be a share group.
        for (group_id, code) in results.iter_mut().filter(|(_, code)| *code == error_code::GROUP_ID_NOT_FOUND) {
            match shares.delete_group(group_id) {
                Ok(write) => {
                    writes.push(write);
                    *code = error_code::NONE;
                }
                Err(share_code) => *code = share_code,
            }
        }
        let stored = durable(writes).await;
        let result = |group_id: &str, code| {
            let mut r = DeletableGroupResult::default();
            r.group_id = GroupId(str_bytes(group_id));
            r.error_code = code;
            messages::DeletableGroupResult { result: r, error_message: None }
        };
        let mut response = messages::DeleteGroupsResponse {
            results: results
                .into_iter()
                .map(|(group_id, code)| match (&stored, code) {
                    (Err(_), error_code::NONE) => result(&group_id, error_code::COORDINATOR_NOT_AVAILABLE),
                    (_, code) => result(&group_id, code),
                })
                .collect(),
            ..messages::DeleteGroupsResponse::default()
        };
        response
            .results
            .extend(refused.iter().map(|group_id| result(group_id, error_code::GROUP_AUTHORIZATION_FAILED)));
        response.into()
    }
}
