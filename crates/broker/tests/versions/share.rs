//! The version sweep's requests for one family of APIs. Share groups (KIP-932): membership, fetch and acknowledge, and their offsets.

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
        ApiKey::ShareGroupHeartbeat
            | ApiKey::ShareGroupDescribe
            | ApiKey::ShareFetch
            | ApiKey::ShareAcknowledge
            | ApiKey::DescribeShareGroupOffsets
            | ApiKey::AlterShareGroupOffsets
            | ApiKey::DeleteShareGroupOffsets
    )
}

/// Sends one request of `key` at `version`; `Err` says what went wrong.
pub(super) async fn exchange(
    client: &mut Client,
    key: ApiKey,
    version: i16,
    id: uuid::Uuid,
    _produced: &mut i64,
) -> Result<(), String> {
    match key {
        ApiKey::ShareGroupHeartbeat => {
            use kafka_protocol::messages::{GroupId, ShareGroupHeartbeatRequest};
            let request = ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(format!("share-v{version}"))))
                .with_member_id(StrBytes::from_string(format!("share-member-v{version}")))
                .with_member_epoch(0)
                .with_subscribed_topic_names(Some(vec![common::name("swept")]));
            let r = client.try_call(version, &request).await?;
            let assigned = r.assignment.as_ref().map(|a| a.topic_partitions.iter().map(|t| t.partitions.len()).sum());
            check(r.error_code == 0 && r.member_epoch == 1 && assigned == Some(1usize), format!("{r:?}"))
        }
        ApiKey::ShareGroupDescribe => {
            use kafka_protocol::messages::{GroupId, ShareGroupDescribeRequest};
            let request = ShareGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(StrBytes::from_string(format!("share-v{version}")))]);
            let r = client.try_call(version, &request).await?;
            let g = &r.groups[0];
            check(g.error_code == 0 && g.group_state.as_str() == "Stable" && g.members.len() == 1, format!("{r:?}"))
        }
        ApiKey::ShareFetch => {
            use kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic};
            use kafka_protocol::messages::{GroupId, ShareFetchRequest};
            let request: messages::ShareFetchRequest = ShareFetchRequest::default()
                .with_group_id(Some(GroupId(StrBytes::from_string(format!("share-v{version}")))))
                .with_member_id(Some(StrBytes::from_string(format!("share-member-v{version}"))))
                .with_share_session_epoch(0)
                .with_max_wait_ms(0)
                .with_max_records(10)
                .with_topics(vec![FetchTopic::default()
                    .with_topic_id(id)
                    .with_partitions(vec![FetchPartition::default().with_partition_index(0)])])
                .into();
            // v2: KIP-1206's record-limit mode.
            let request =
                messages::ShareFetchRequest { share_acquire_mode: if version >= 2 { 1 } else { 0 }, ..request };
            let r = client.try_call(version, &request).await?;
            check(
                r.error_code == 0 && r.responses.len() == 1 && r.acquisition_lock_timeout_ms == 30_000,
                format!("{r:?}"),
            )
        }
        ApiKey::ShareAcknowledge => {
            use kafka_protocol::messages::{GroupId, ShareAcknowledgeRequest};
            let request = ShareAcknowledgeRequest::default()
                .with_group_id(Some(GroupId(StrBytes::from_string(format!("share-v{version}")))))
                .with_member_id(Some(StrBytes::from_string(format!("share-member-v{version}"))))
                .with_share_session_epoch(1);
            let r = client.try_call(version, &messages::ShareAcknowledgeRequest::from(request)).await?;
            // v2 answers the lock's duration (the group's default here).
            let lock_ms = if version >= 2 { 30_000 } else { 0 };
            check(
                r.error_code == 0 && r.responses.is_empty() && r.acquisition_lock_timeout_ms == lock_ms,
                format!("{r:?}"),
            )
        }
        ApiKey::DescribeShareGroupOffsets => {
            use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
            use kafka_protocol::messages::{DescribeShareGroupOffsetsRequest, GroupId};
            let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("share-v1")))
                    .with_topics(None),
            ]);
            let r = client.try_call(version, &messages::DescribeShareGroupOffsetsRequest(request)).await?;
            // ShareFetch read partition 0 (share.auto.offset.reset latest: at its end).
            let g = &r.groups[0];
            let p = &g.topics[0].partitions[0];
            let lag_ok = if version >= 1 { p.lag >= 0 } else { p.lag == -1 };
            let ok = g.error_code == 0 && g.topics.len() == 1 && p.start_offset >= 0 && lag_ok;
            check(ok, format!("{r:?}"))
        }
        ApiKey::AlterShareGroupOffsets => {
            use kafka_protocol::messages::alter_share_group_offsets_request::{
                AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
            };
            use kafka_protocol::messages::{AlterShareGroupOffsetsRequest, GroupId};
            let request = AlterShareGroupOffsetsRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("share-v1")))
                .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(common::name("swept"))
                    .with_partitions(vec![AlterShareGroupOffsetsRequestPartition::default()
                        .with_partition_index(0)
                        .with_start_offset(0)])]);
            let r = client.try_call(version, &request).await?;
            // The group's member is still in it: Kafka refuses a non-empty group.
            check(r.error_code == error_code::NON_EMPTY_GROUP && r.responses.is_empty(), format!("{r:?}"))
        }
        ApiKey::DeleteShareGroupOffsets => {
            use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
            use kafka_protocol::messages::{DeleteShareGroupOffsetsRequest, GroupId};
            let request = DeleteShareGroupOffsetsRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("share-v1")))
                .with_topics(vec![
                    DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(common::name("swept"))
                ]);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == error_code::NON_EMPTY_GROUP && r.responses.is_empty(), format!("{r:?}"))
        }
        other => Err(format!("{other:?} is not in this family")),
    }
}
