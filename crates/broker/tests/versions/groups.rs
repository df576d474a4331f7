//! The version sweep's requests for one family of APIs. Classic, consumer (KIP-848) and streams groups, and their offsets.

use crate::common;
use crate::common::Client;
use kafgres_wire::ApiKey;
use kafgres_wire::{error_code, messages};
use kafka_protocol::protocol::StrBytes;

use super::check;

/// Whether `exchange` below has a request for `key`.
pub(super) fn covers(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::FindCoordinator
            | ApiKey::JoinGroup
            | ApiKey::SyncGroup
            | ApiKey::Heartbeat
            | ApiKey::LeaveGroup
            | ApiKey::OffsetCommit
            | ApiKey::OffsetFetch
            | ApiKey::ListGroups
            | ApiKey::DescribeGroups
            | ApiKey::OffsetDelete
            | ApiKey::DeleteGroups
            | ApiKey::ConsumerGroupHeartbeat
            | ApiKey::ConsumerGroupDescribe
            | ApiKey::StreamsGroupHeartbeat
            | ApiKey::StreamsGroupDescribe
    )
}

/// Sends one request of `key` at `version`; `Err` says what went wrong.
pub(super) async fn exchange(client: &mut Client, key: ApiKey, version: i16, id: uuid::Uuid) -> Result<(), String> {
    match key {
        ApiKey::FindCoordinator => {
            use kafka_protocol::messages::FindCoordinatorRequest;
            let key = StrBytes::from_string(format!("group-v{version}"));
            let request = if version >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![key])
            } else {
                FindCoordinatorRequest::default().with_key(key)
            };
            let r = client.try_call(version, &request).await?;
            let (code, node) = if version >= 4 {
                (r.coordinators[0].error_code, r.coordinators[0].node_id.0)
            } else {
                (r.error_code, r.node_id.0)
            };
            check((code, node) == (0, 1), format!("{r:?}"))
        }
        ApiKey::JoinGroup => {
            let (code, _, _) = group_join(client, version, &format!("joined-v{version}")).await?;
            check(code == 0, format!("error {code}"))
        }
        ApiKey::SyncGroup => {
            let group = format!("synced-v{version}");
            let (_, member, generation) = group_join(client, 5, &group).await?;
            let request = kafka_protocol::messages::SyncGroupRequest::default()
                .with_group_id(kafka_protocol::messages::GroupId(StrBytes::from_string(group)))
                .with_generation_id(generation)
                .with_member_id(StrBytes::from_string(member.clone()))
                .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                .with_protocol_name(Some(StrBytes::from_static_str("range")))
                .with_assignments(vec![
                    kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(StrBytes::from_string(member))
                        .with_assignment(bytes::Bytes::from_static(b"assigned")),
                ]);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == 0 && &r.assignment[..] == b"assigned", format!("{r:?}"))
        }
        ApiKey::Heartbeat => {
            let group = format!("beating-v{version}");
            let (_, member, generation) = group_join(client, 5, &group).await?;
            let request = kafka_protocol::messages::HeartbeatRequest::default()
                .with_group_id(kafka_protocol::messages::GroupId(StrBytes::from_string(group)))
                .with_generation_id(generation)
                .with_member_id(StrBytes::from_string(member));
            let r = client.try_call(version, &request).await?;
            // Joined but not synced yet: Kafka answers REBALANCE_IN_PROGRESS
            // while the group is completing its rebalance.
            check(r.error_code == 0 || r.error_code == error_code::REBALANCE_IN_PROGRESS, format!("{r:?}"))
        }
        ApiKey::LeaveGroup => {
            let group = format!("leaving-v{version}");
            let (_, member, _) = group_join(client, 5, &group).await?;
            let mut request = kafka_protocol::messages::LeaveGroupRequest::default()
                .with_group_id(kafka_protocol::messages::GroupId(StrBytes::from_string(group)));
            if version >= 3 {
                request = request
                    .with_members(vec![kafka_protocol::messages::leave_group_request::MemberIdentity::default()
                        .with_member_id(StrBytes::from_string(member))]);
            } else {
                request = request.with_member_id(StrBytes::from_string(member));
            }
            let r = client.try_call(version, &request).await?;
            check(r.error_code == 0 && r.members.iter().all(|m| m.error_code == 0), format!("{r:?}"))
        }
        ApiKey::OffsetCommit => {
            use kafka_protocol::messages::offset_commit_request::{
                OffsetCommitRequestPartition, OffsetCommitRequestTopic,
            };
            // v10 names topics by id only.
            let topic = if version >= 10 {
                OffsetCommitRequestTopic::default().with_topic_id(id)
            } else {
                OffsetCommitRequestTopic::default().with_name(common::name("swept"))
            };
            let request = kafka_protocol::messages::OffsetCommitRequest::default()
                .with_group_id(kafka_protocol::messages::GroupId(StrBytes::from_static_str("committing")))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![topic.with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(i64::from(version))])]);
            let r = client.try_call(version, &messages::OffsetCommitRequest(request)).await?;
            let topic_ok = version < 10 || r.topics[0].topic_id == id;
            check(topic_ok && r.topics[0].partitions[0].error_code == 0, format!("{r:?}"))
        }
        ApiKey::OffsetFetch => {
            use kafka_protocol::messages::offset_fetch_request::{
                OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
            };
            let group = kafka_protocol::messages::GroupId(StrBytes::from_static_str("committing"));
            let request = if version >= 8 {
                kafka_protocol::messages::OffsetFetchRequest::default().with_groups(vec![
                    OffsetFetchRequestGroup::default().with_group_id(group).with_topics(Some(vec![if version >= 10 {
                        OffsetFetchRequestTopics::default().with_topic_id(id).with_partition_indexes(vec![0])
                    } else {
                        OffsetFetchRequestTopics::default()
                            .with_name(common::name("swept"))
                            .with_partition_indexes(vec![0])
                    }])),
                ])
            } else {
                kafka_protocol::messages::OffsetFetchRequest::default().with_group_id(group).with_topics(Some(vec![
                    OffsetFetchRequestTopic::default().with_name(common::name("swept")).with_partition_indexes(vec![0]),
                ]))
            };
            let r = client.try_call(version, &messages::OffsetFetchRequest(request)).await?;
            let offset = if version >= 8 {
                r.groups[0].topics[0].partitions[0].committed_offset
            } else {
                r.topics[0].partitions[0].committed_offset
            };
            // The OffsetCommit sweep committed its last version's number.
            let topic_ok = version < 10 || r.groups[0].topics[0].topic_id == id;
            check(topic_ok && offset == 10, format!("{r:?}"))
        }
        ApiKey::ListGroups => {
            let r = client.try_call(version, &kafka_protocol::messages::ListGroupsRequest::default()).await?;
            check(r.error_code == 0 && r.groups.iter().any(|g| g.group_id.0.as_str() == "committing"), format!("{r:?}"))
        }
        ApiKey::DescribeGroups => {
            let request = kafka_protocol::messages::DescribeGroupsRequest::default()
                .with_groups(vec![kafka_protocol::messages::GroupId(StrBytes::from_static_str("synced-v5"))]);
            let r = client.try_call(version, &request).await?;
            check(r.groups[0].error_code == 0 && r.groups[0].group_state.as_str() == "Stable", format!("{r:?}"))
        }
        ApiKey::OffsetDelete => {
            use kafka_protocol::messages::offset_delete_request::{
                OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
            };
            let request = kafka_protocol::messages::OffsetDeleteRequest::default()
                .with_group_id(kafka_protocol::messages::GroupId(StrBytes::from_static_str("committing")))
                .with_topics(vec![OffsetDeleteRequestTopic::default()
                    .with_name(common::name("swept"))
                    .with_partitions(vec![OffsetDeleteRequestPartition::default().with_partition_index(0)])]);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == 0 && r.topics[0].partitions[0].error_code == 0, format!("{r:?}"))
        }
        ApiKey::DeleteGroups => {
            let request = kafka_protocol::messages::DeleteGroupsRequest::default().with_groups_names(vec![
                kafka_protocol::messages::GroupId(StrBytes::from_string(format!("leaving-v{version}"))),
            ]);
            let r = client.try_call(version, &messages::DeleteGroupsRequest(request)).await?;
            check(r.results[0].result.error_code == 0 && r.results[0].error_message.is_none(), format!("{r:?}"))
        }
        ApiKey::ConsumerGroupHeartbeat => {
            use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, GroupId};
            let group = GroupId(StrBytes::from_string(format!("kip848-v{version}")));
            let request = ConsumerGroupHeartbeatRequest::default()
                .with_group_id(group)
                .with_member_id(StrBytes::from_string(format!("member-v{version}")))
                .with_member_epoch(0)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(vec![common::name("swept")]))
                .with_topic_partitions(Some(vec![]));
            let r = client.try_call(version, &request).await?;
            let assigned = r.assignment.as_ref().map(|a| a.topic_partitions.iter().map(|t| t.partitions.len()).sum());
            check(r.error_code == 0 && r.member_epoch == 1 && assigned.is_some_and(|n: usize| n >= 1), format!("{r:?}"))
        }
        ApiKey::ConsumerGroupDescribe => {
            use kafka_protocol::messages::{ConsumerGroupDescribeRequest, GroupId};
            let request = ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(StrBytes::from_string(format!("kip848-v{version}")))]);
            let r = client.try_call(version, &request).await?;
            let g = &r.groups[0];
            check(g.error_code == 0 && g.group_state.as_str() == "Stable" && g.members.len() == 1, format!("{r:?}"))
        }
        ApiKey::StreamsGroupHeartbeat => {
            use messages::streams_group::*;
            let subtopology =
                Subtopology { subtopology_id: "0".into(), source_topics: vec!["swept".into()], ..Default::default() };
            let request = StreamsGroupHeartbeatRequest {
                group_id: format!("streams-v{version}"),
                member_id: format!("streams-member-v{version}"),
                rebalance_timeout_ms: 30_000,
                topology: Some(Topology { epoch: 0, subtopologies: vec![subtopology], ..Default::default() }),
                process_id: Some("p".into()),
                ..Default::default()
            };
            let r = client.try_call(version, &request).await?;
            let active: Option<usize> = r.active_tasks.as_ref().map(|t| t.iter().map(|t| t.partitions.len()).sum());
            check(r.error_code == 0 && r.member_epoch == 1 && active == Some(1), format!("{r:?}"))
        }
        ApiKey::StreamsGroupDescribe => {
            use messages::streams_group::*;
            let request =
                StreamsGroupDescribeRequest { group_ids: vec![format!("streams-v{version}")], ..Default::default() };
            let r = client.try_call(version, &request).await?;
            let g = &r.groups[0];
            check(g.error_code == 0 && g.group_state == "Stable" && g.members.len() == 1, format!("{r:?}"))
        }
        other => Err(format!("{other:?} is not in this family")),
    }
}

/// Joins `group` as a new member (retrying once with the id a v4+ broker
/// hands out) and returns (error, member id, generation).
async fn group_join(client: &mut Client, version: i16, group: &str) -> Result<(i16, String, i32), String> {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    let mut member = String::new();
    for _ in 0..2 {
        let request = kafka_protocol::messages::JoinGroupRequest::default()
            .with_group_id(kafka_protocol::messages::GroupId(StrBytes::from_string(group.to_owned())))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(StrBytes::from_string(member.clone()))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str("range"))
                .with_metadata(bytes::Bytes::from_static(b"subscription"))]);
        let r = client.try_call(version, &request).await?;
        if r.error_code == error_code::MEMBER_ID_REQUIRED {
            member = r.member_id.to_string();
            continue;
        }
        return Ok((r.error_code, r.member_id.to_string(), r.generation_id));
    }
    Err("MEMBER_ID_REQUIRED twice".into())
}
