//! Every version in the served table answers: for each API and each accepted
//! version, a valid request gets a response that decodes at that version (a
//! handler that sets a field the version lacks makes encoding fail, and the
//! broker closes the connection instead of answering).

mod common;

use common::{
    batch, creatable, create_topic, fetch_request, list_offset_request, metadata_request, produce_request, records,
    Client, TestBroker, TopicRef,
};
use kafgres_broker::api::SERVED_APIS;
use kafgres_wire::ApiKey;
use kafgres_wire::{error_code, messages};
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateAclsRequest, CreateTopicsRequest, DeleteAclsRequest, DescribeAclsRequest,
};
use kafka_protocol::protocol::StrBytes;

/// Sends one request of `key` at `version`; `Err` says what went wrong.
async fn exchange(
    client: &mut Client,
    key: ApiKey,
    version: i16,
    id: uuid::Uuid,
    produced: &mut i64,
) -> Result<(), String> {
    let check = |ok: bool, what: String| if ok { Ok(()) } else { Err(what) };
    match key {
        ApiKey::ApiVersions => {
            let r = client
                .try_call(
                    version,
                    &messages::ApiVersionsRequest::from(
                        ApiVersionsRequest::default()
                            .with_client_software_name(StrBytes::from_static_str("sweep"))
                            .with_client_software_version(StrBytes::from_static_str("1")),
                    ),
                )
                .await?;
            check(r.error_code == 0, format!("error {}", r.error_code))
        }
        ApiKey::Metadata => {
            let r = client.try_call(version, &metadata_request(Some(&["swept"]), true)).await?;
            let t = &r.topics[0];
            check(r.topics.len() == 1 && t.error_code == 0 && t.partitions.len() == 1, format!("{:?}", r.topics))
        }
        ApiKey::CreateTopics => {
            let request =
                CreateTopicsRequest::default().with_topics(vec![creatable(&format!("created-v{version}"), 1, 1)]);
            let r = client.try_call(version, &request).await?;
            check(r.topics[0].error_code == 0, format!("error {}", r.topics[0].error_code))
        }
        ApiKey::Produce => {
            let mut request = produce_request("swept", 0, -1, batch(&records("s", 1)));
            if version >= 13 {
                request.topic_data[0].topic_id = id; // v13 names topics by id only
            }
            let r = client.try_call(version, &request).await?;
            let p = &r.responses[0].partition_responses[0];
            *produced += 1;
            let topic_ok = version < 13 || r.responses[0].topic_id == id;
            check(topic_ok && (p.error_code, p.base_offset) == (0, *produced - 1), format!("{r:?}"))
        }
        ApiKey::Fetch => {
            let topic = if version >= 13 { TopicRef::Id(id) } else { TopicRef::Name("swept") };
            let r = client.try_call(version, &fetch_request(topic, 0, 0, 1 << 20, 0, 1)).await?;
            let p = &r.responses[0].partitions[0];
            let fetched = common::decode_records(&p.records.clone().unwrap_or_default()).len() as i64;
            check((p.error_code, p.high_watermark, fetched) == (0, *produced, *produced), format!("{p:?}"))
        }
        ApiKey::ListOffsets => {
            let r =
                client.try_call(version, &messages::ListOffsetsRequest(list_offset_request("swept", 0, -1))).await?;
            let p = &r.topics[0].partitions[0];
            check((p.error_code, p.offset) == (0, *produced), format!("{p:?}"))
        }
        ApiKey::DescribeConfigs => {
            use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
            let resource = DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("swept"));
            let r = client
                .try_call(
                    version,
                    &kafka_protocol::messages::DescribeConfigsRequest::default().with_resources(vec![resource]),
                )
                .await?;
            check(r.results[0].error_code == 0 && !r.results[0].configs.is_empty(), format!("{:?}", r.results[0]))
        }
        ApiKey::DescribeTopicPartitions => {
            use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
            let request = kafka_protocol::messages::DescribeTopicPartitionsRequest::default()
                .with_topics(vec![TopicRequest::default().with_name(common::name("swept"))])
                .with_response_partition_limit(2000);
            let r = client.try_call(version, &request).await?;
            check(
                r.topics.len() == 1 && r.topics[0].error_code == 0 && !r.topics[0].partitions.is_empty(),
                format!("{r:?}"),
            )
        }
        ApiKey::DescribeTransactions => {
            // No transactional id has been used here: each is not found.
            let request =
                kafka_protocol::messages::DescribeTransactionsRequest::default().with_transactional_ids(vec![
                    kafka_protocol::messages::TransactionalId(StrBytes::from_static_str("none")),
                ]);
            let r = client.try_call(version, &request).await?;
            let codes: Vec<i16> = r.transaction_states.iter().map(|t| t.error_code).collect();
            check(codes == [error_code::TRANSACTIONAL_ID_NOT_FOUND], format!("{r:?}"))
        }
        ApiKey::ListTransactions => {
            let request = kafka_protocol::messages::ListTransactionsRequest::default()
                .with_state_filters(vec![StrBytes::from_static_str("NoSuchState")])
                .with_duration_filter(-1);
            let r = client.try_call(version, &request).await?;
            check(
                r.error_code == 0 && r.unknown_state_filters.len() == 1 && r.transaction_states.is_empty(),
                format!("{r:?}"),
            )
        }
        ApiKey::DescribeProducers => {
            use kafka_protocol::messages::describe_producers_request::TopicRequest;
            let request =
                kafka_protocol::messages::DescribeProducersRequest::default()
                    .with_topics(vec![TopicRequest::default()
                        .with_name(common::name("swept"))
                        .with_partition_indexes(vec![0])]);
            let r = client.try_call(version, &request).await?;
            check(
                r.topics.len() == 1 && r.topics[0].partitions.len() == 1 && r.topics[0].partitions[0].error_code == 0,
                format!("{r:?}"),
            )
        }
        ApiKey::DescribeCluster => {
            let request = kafka_protocol::messages::DescribeClusterRequest::default().with_endpoint_type(1);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == 0 && r.brokers.len() == 1, format!("{r:?}"))
        }
        ApiKey::CreatePartitions => {
            use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
            let topic = format!("grown-v{version}");
            create_topic(client, &topic, 1).await;
            let request = kafka_protocol::messages::CreatePartitionsRequest::default()
                .with_topics(vec![CreatePartitionsTopic::default().with_name(common::name(&topic)).with_count(2)]);
            let r = client.try_call(version, &request).await?;
            check(r.results[0].error_code == 0, format!("{:?}", r.results[0]))
        }
        ApiKey::DeleteTopics => {
            use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
            // Each version deletes one of the topics CreateTopics made.
            let topic = common::name(&format!("created-v{}", version + 1));
            let request = if version >= 6 {
                kafka_protocol::messages::DeleteTopicsRequest::default()
                    .with_topics(vec![DeleteTopicState::default().with_name(Some(topic))])
            } else {
                kafka_protocol::messages::DeleteTopicsRequest::default().with_topic_names(vec![topic])
            };
            let r = client.try_call(version, &request).await?;
            check(r.responses[0].error_code == 0, format!("{:?}", r.responses[0]))
        }
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
        ApiKey::DeleteRecords => {
            use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
            // Deleting up to offset 0 changes nothing and is valid at every version.
            let request = kafka_protocol::messages::DeleteRecordsRequest::default().with_topics(vec![
                DeleteRecordsTopic::default()
                    .with_name(common::name("swept"))
                    .with_partitions(vec![DeleteRecordsPartition::default().with_partition_index(0).with_offset(0)]),
            ]);
            let r = client.try_call(version, &request).await?;
            let p = &r.topics[0].partitions[0];
            check((p.error_code, p.low_watermark) == (0, 0), format!("{p:?}"))
        }
        ApiKey::InitProducerId => {
            // v3+ carry the current producer id and epoch; a non-transactional
            // request gets a fresh id with epoch 0 at every version.
            let request = kafka_protocol::messages::InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(kafka_protocol::messages::ProducerId(-1))
                .with_producer_epoch(-1);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == 0 && r.producer_id.0 >= 0 && r.producer_epoch == 0, format!("{r:?}"))
        }
        ApiKey::DeleteGroups => {
            let request = kafka_protocol::messages::DeleteGroupsRequest::default().with_groups_names(vec![
                kafka_protocol::messages::GroupId(StrBytes::from_string(format!("leaving-v{version}"))),
            ]);
            let r = client.try_call(version, &messages::DeleteGroupsRequest(request)).await?;
            check(r.results[0].result.error_code == 0 && r.results[0].error_message.is_none(), format!("{r:?}"))
        }
        ApiKey::AddPartitionsToTxn => {
            let (pid, epoch) = txn_init(client, &format!("apt-v{version}")).await?;
            use kafka_protocol::messages::add_partitions_to_txn_request::{
                AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
            };
            let topics =
                vec![AddPartitionsToTxnTopic::default().with_name(common::name("swept")).with_partitions(vec![0])];
            if version < 4 {
                let request = kafka_protocol::messages::AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(txn_id(&format!("apt-v{version}")))
                    .with_v3_and_below_producer_id(kafka_protocol::messages::ProducerId(pid))
                    .with_v3_and_below_producer_epoch(epoch)
                    .with_v3_and_below_topics(topics);
                let r = client.try_call(version, &request).await?;
                let code = r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
                return check(code == 0, format!("{r:?}"));
            }
            // v4+: the brokers' batched form; verify (not yet added), add, verify again.
            let transaction = |verify_only: bool| {
                kafka_protocol::messages::AddPartitionsToTxnRequest::default().with_transactions(vec![
                    AddPartitionsToTxnTransaction::default()
                        .with_transactional_id(txn_id(&format!("apt-v{version}")))
                        .with_producer_id(kafka_protocol::messages::ProducerId(pid))
                        .with_producer_epoch(epoch)
                        .with_verify_only(verify_only)
                        .with_topics(topics.clone()),
                ])
            };
            let mut codes = Vec::new();
            for verify_only in [true, false, true] {
                let r = client.try_call(version, &transaction(verify_only)).await?;
                codes.push(r.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code);
            }
            check(codes == [error_code::INVALID_TXN_STATE, 0, 0], format!("{codes:?}"))
        }
        ApiKey::AddOffsetsToTxn => {
            let id = format!("aot-v{version}");
            let (pid, epoch) = txn_init(client, &id).await?;
            let r = client.try_call(version, &add_offsets(&id, pid, epoch)).await?;
            check(r.error_code == 0, format!("{r:?}"))
        }
        ApiKey::TxnOffsetCommit => {
            use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition;
            let id_or_name = id;
            let id = format!("toc-v{version}");
            let (pid, epoch) = txn_init(client, &id).await?;
            let added = client.try_call(3, &add_offsets(&id, pid, epoch)).await?;
            check(added.error_code == 0, format!("{added:?}"))?;
            // v6 names topics by id only.
            let mut topic = messages::TxnOffsetCommitRequestTopic {
                partitions: vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(1)],
                ..Default::default()
            };
            if version >= 6 {
                topic.topic_id = id_or_name;
            } else {
                topic.name = common::name("swept");
            }
            let request = messages::TxnOffsetCommitRequest {
                transactional_id: txn_id(&id),
                group_id: kafka_protocol::messages::GroupId(StrBytes::from_static_str("txn-sweep")),
                producer_id: kafka_protocol::messages::ProducerId(pid),
                producer_epoch: epoch,
                topics: vec![topic],
                ..Default::default()
            };
            let r = client.try_call(version, &request).await?;
            let topic_ok = version < 6 || r.topics[0].topic_id == id_or_name;
            check(topic_ok && r.topics[0].partitions[0].error_code == 0, format!("{r:?}"))
        }
        ApiKey::EndTxn => {
            let id = format!("end-v{version}");
            let (pid, epoch) = txn_init(client, &id).await?;
            let added = client.try_call(3, &add_offsets(&id, pid, epoch)).await?;
            check(added.error_code == 0, format!("{added:?}"))?;
            let request = kafka_protocol::messages::EndTxnRequest::default()
                .with_transactional_id(txn_id(&id))
                .with_producer_id(kafka_protocol::messages::ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(true);
            let r = client.try_call(version, &request).await?;
            // v5 is transaction version 2: the end bumps the epoch and says so.
            let bumped = version < 5 || (r.producer_id.0, r.producer_epoch) == (pid, epoch + 1);
            check(r.error_code == 0 && bumped, format!("{r:?}"))
        }
        ApiKey::WriteTxnMarkers => {
            use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
            // A topic of its own: a marker in "swept" would move Produce's offsets.
            let topic = format!("marked-v{version}");
            create_topic(client, &topic, 1).await;
            let marker = WritableTxnMarker::default()
                .with_producer_id(kafka_protocol::messages::ProducerId(4_242))
                .with_producer_epoch(0)
                .with_transaction_result(false)
                .with_coordinator_epoch(0)
                .with_topics(vec![WritableTxnMarkerTopic::default()
                    .with_name(common::name(&topic))
                    .with_partition_indexes(vec![0])]);
            // v2 says which transaction version wrote the transaction.
            let transaction_version = if version >= 2 { 2 } else { 0 };
            let request = messages::WriteTxnMarkersRequest {
                markers: vec![messages::WritableTxnMarker { marker, transaction_version }],
                ..Default::default()
            };
            let r = client.try_call(version, &request).await?;
            check(r.markers[0].topics[0].partitions[0].error_code == 0, format!("{r:?}"))
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
        ApiKey::IncrementalAlterConfigs => {
            use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
            let value = format!("{}", 86_400_000 + i64::from(version));
            let request = kafka_protocol::messages::IncrementalAlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("swept"))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("retention.ms"))
                        .with_config_operation(0)
                        .with_value(Some(StrBytes::from_string(value.clone())))]),
            ]);
            let r = client.try_call(version, &request).await?;
            let stored = common::topic_configs(client, "swept").await.get("retention.ms").cloned();
            check(r.responses[0].error_code == 0 && stored == Some(value), format!("{r:?} {stored:?}"))
        }
        ApiKey::AlterConfigs => {
            use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
            let value = format!("{}", 2_000_000 + i64::from(version));
            let request = kafka_protocol::messages::AlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("swept"))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(StrBytes::from_static_str("max.message.bytes"))
                        .with_value(Some(StrBytes::from_string(value.clone())))]),
            ]);
            let r = client.try_call(version, &request).await?;
            let configs = common::topic_configs(client, "swept").await;
            let only = configs.len() == 1 && configs.get("max.message.bytes") == Some(&value);
            check(r.responses[0].error_code == 0 && only, format!("{r:?} {configs:?}"))
        }
        // A quota per version, set and then described back.
        ApiKey::AlterClientQuotas => {
            use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
            let entry = EntryData::default()
                .with_entity(vec![EntityData::default()
                    .with_entity_type(StrBytes::from_static_str("client-id"))
                    .with_entity_name(Some(StrBytes::from_string(format!("sweep-v{version}"))))])
                .with_ops(vec![OpData::default()
                    .with_key(StrBytes::from_static_str("producer_byte_rate"))
                    .with_value(1e9 + f64::from(version))]);
            let request = kafka_protocol::messages::AlterClientQuotasRequest::default().with_entries(vec![entry]);
            let r = client.try_call(version, &request).await?;
            check(r.entries.len() == 1 && r.entries[0].error_code == 0, format!("{r:?}"))
        }
        ApiKey::DescribeClientQuotas => {
            use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
            let component = ComponentData::default()
                .with_entity_type(StrBytes::from_static_str("client-id"))
                .with_match_type(0)
                .with_match(Some(StrBytes::from_string(format!("sweep-v{version}"))));
            let request =
                kafka_protocol::messages::DescribeClientQuotasRequest::default().with_components(vec![component]);
            let r = client.try_call(version, &request).await?;
            let values: Vec<f64> = r.entries.iter().flatten().flat_map(|e| e.values.iter().map(|v| v.value)).collect();
            check(r.error_code == 0 && values == vec![1e9 + f64::from(version)], format!("{r:?}"))
        }
        // The sweep's broker has no authorizer: SECURITY_DISABLED, as Kafka's.
        ApiKey::DescribeAcls => {
            let request = DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(1)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == error_code::SECURITY_DISABLED, format!("{r:?}"))
        }
        ApiKey::CreateAcls => {
            use kafka_protocol::messages::create_acls_request::AclCreation;
            let creation = AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("swept"))
                .with_resource_pattern_type(3)
                .with_principal(StrBytes::from_static_str("User:sweep"))
                .with_host(StrBytes::from_static_str("*"))
                .with_operation(3)
                .with_permission_type(3);
            let r = client.try_call(version, &CreateAclsRequest::default().with_creations(vec![creation])).await?;
            check(r.results.len() == 1 && r.results[0].error_code == error_code::SECURITY_DISABLED, format!("{r:?}"))
        }
        ApiKey::DeleteAcls => {
            use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
            let filter = DeleteAclsFilter::default()
                .with_resource_type_filter(1)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(1)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1);
            let r = client.try_call(version, &DeleteAclsRequest::default().with_filters(vec![filter])).await?;
            let ok = r.filter_results.len() == 1 && r.filter_results[0].error_code == error_code::SECURITY_DISABLED;
            check(ok, format!("{r:?}"))
        }
        ApiKey::ElectLeaders => {
            use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
            let request = kafka_protocol::messages::ElectLeadersRequest::default().with_topic_partitions(Some(vec![
                TopicPartitions::default().with_topic(common::name("swept")).with_partitions(vec![0, 99]),
            ]));
            let r = client.try_call(version, &request).await?;
            let codes: Vec<i16> =
                r.replica_election_results.iter().flat_map(|t| &t.partition_result).map(|p| p.error_code).collect();
            let expected = [error_code::ELECTION_NOT_NEEDED, error_code::UNKNOWN_TOPIC_OR_PARTITION];
            check(r.error_code == 0 && codes == expected, format!("{r:?}"))
        }
        ApiKey::AlterPartitionReassignments => {
            use kafka_protocol::messages::alter_partition_reassignments_request::{
                ReassignablePartition, ReassignableTopic,
            };
            use kafka_protocol::messages::BrokerId;
            let partitions = vec![
                ReassignablePartition::default().with_partition_index(0).with_replicas(Some(vec![BrokerId(1)])),
                ReassignablePartition::default().with_partition_index(0).with_replicas(None),
                ReassignablePartition::default().with_partition_index(0).with_replicas(Some(vec![BrokerId(7)])),
            ];
            let request = kafka_protocol::messages::AlterPartitionReassignmentsRequest::default().with_topics(vec![
                ReassignableTopic::default().with_name(common::name("swept")).with_partitions(partitions),
            ]);
            let r = client.try_call(version, &request).await?;
            let codes: Vec<i16> = r.responses.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).collect();
            let expected =
                [error_code::NONE, error_code::NO_REASSIGNMENT_IN_PROGRESS, error_code::INVALID_REPLICA_ASSIGNMENT];
            check(r.error_code == 0 && codes == expected, format!("{r:?}"))
        }
        ApiKey::ListPartitionReassignments => {
            let request = kafka_protocol::messages::ListPartitionReassignmentsRequest::default().with_topics(None);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == 0 && r.topics.is_empty(), format!("{r:?}"))
        }
        ApiKey::AlterReplicaLogDirs => {
            use kafka_protocol::messages::alter_replica_log_dirs_request::{
                AlterReplicaLogDir, AlterReplicaLogDirTopic,
            };
            let dirs = client
                .try_call(1, &kafka_protocol::messages::DescribeLogDirsRequest::default().with_topics(Some(vec![])))
                .await?;
            let here = dirs.results[0].log_dir.clone();
            let topic = |partitions: Vec<i32>| {
                vec![AlterReplicaLogDirTopic::default().with_name(common::name("swept")).with_partitions(partitions)]
            };
            let request = kafka_protocol::messages::AlterReplicaLogDirsRequest::default().with_dirs(vec![
                AlterReplicaLogDir::default().with_path(here).with_topics(topic(vec![0, 99])),
                AlterReplicaLogDir::default()
                    .with_path(StrBytes::from_static_str("/elsewhere"))
                    .with_topics(topic(vec![0])),
            ]);
            let r = client.try_call(version, &request).await?;
            let codes: Vec<i16> = r.results.iter().flat_map(|t| &t.partitions).map(|p| p.error_code).collect();
            let expected = [error_code::NONE, error_code::UNKNOWN_TOPIC_OR_PARTITION, error_code::LOG_DIR_NOT_FOUND];
            check(codes == expected, format!("{r:?}"))
        }
        ApiKey::DescribeUserScramCredentials => {
            use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
            let request = kafka_protocol::messages::DescribeUserScramCredentialsRequest::default()
                .with_users(Some(vec![UserName::default().with_name(StrBytes::from_static_str("nobody"))]));
            let r = client.try_call(version, &request).await?;
            let codes: Vec<i16> = r.results.iter().map(|u| u.error_code).collect();
            check(r.error_code == 0 && codes == [error_code::RESOURCE_NOT_FOUND], format!("{r:?}"))
        }
        ApiKey::AlterUserScramCredentials => {
            use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
            let upsertion = |name: &'static str| {
                ScramCredentialUpsertion::default()
                    .with_name(StrBytes::from_static_str(name))
                    .with_mechanism(1)
                    .with_iterations(4096)
                    .with_salt(bytes::Bytes::from_static(b"salt"))
                    .with_salted_password(bytes::Bytes::from_static(&[7; 32]))
            };
            let request = kafka_protocol::messages::AlterUserScramCredentialsRequest::default()
                .with_upsertions(vec![upsertion("someone"), upsertion("")]);
            let r = client.try_call(version, &request).await?;
            let mut codes: Vec<(String, i16)> = r.results.iter().map(|u| (u.user.to_string(), u.error_code)).collect();
            codes.sort();
            // Unauthenticated: no role's password may be changed.
            let expected = [
                (String::new(), error_code::UNACCEPTABLE_CREDENTIAL),
                ("someone".to_owned(), error_code::CLUSTER_AUTHORIZATION_FAILED),
            ];
            check(codes == expected, format!("{r:?}"))
        }
        ApiKey::UpdateFeatures => {
            use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
            let update = |feature: &'static str, level: i16| {
                FeatureUpdateKey::default()
                    .with_feature(StrBytes::from_static_str(feature))
                    .with_max_version_level(level)
            };
            let same = kafka_protocol::messages::UpdateFeaturesRequest::default()
                .with_feature_updates(vec![update("group.version", 1), update("kraft.version", 0)]);
            let r = client.try_call(version, &same).await?;
            let results_ok = if version < 2 { r.results.len() == 2 } else { r.results.is_empty() };
            let change = kafka_protocol::messages::UpdateFeaturesRequest::default()
                .with_feature_updates(vec![update("group.version", 1), update("transaction.version", 1)]);
            let refused = client.try_call(version, &change).await?;
            check(
                r.error_code == 0 && results_ok && refused.error_code == error_code::INVALID_UPDATE_VERSION,
                format!("{r:?} {refused:?}"),
            )
        }
        ApiKey::ListConfigResources => {
            let request = kafka_protocol::messages::ListConfigResourcesRequest::default()
                .with_resource_types(if version >= 1 { vec![2, 4] } else { Vec::new() });
            let r = client.try_call(version, &request).await?;
            let listed: Vec<(i8, String)> =
                r.config_resources.iter().map(|c| (c.resource_type, c.resource_name.to_string())).collect();
            // v0 lists client metrics subscriptions only: none.
            let ok = if version == 0 {
                listed.is_empty()
            } else {
                listed.contains(&(2, "swept".into())) && listed.contains(&(4, "1".into()))
            };
            check(r.error_code == 0 && ok, format!("{r:?}"))
        }
        ApiKey::DescribeLogDirs => {
            let request = kafka_protocol::messages::DescribeLogDirsRequest::default().with_topics(None);
            let r = client.try_call(version, &messages::DescribeLogDirsRequest(request)).await?;
            let cordoned = r.results[0].is_cordoned;
            let dir = &r.results[0].result;
            let swept = dir.topics.iter().find(|t| t.name.0.as_str() == "swept");
            let size = swept.map_or(0, |t| t.partitions[0].partition_size);
            let space_ok = if version >= 4 { dir.total_bytes > 0 && dir.usable_bytes >= 0 } else { true };
            check(r.results.len() == 1 && dir.error_code == 0 && size > 0 && space_ok && !cordoned, format!("{r:?}"))
        }
        ApiKey::OffsetForLeaderEpoch => {
            use kafka_protocol::messages::offset_for_leader_epoch_request::{
                OffsetForLeaderPartition, OffsetForLeaderTopic,
            };
            let request = kafka_protocol::messages::OffsetForLeaderEpochRequest::default()
                .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                .with_topics(vec![OffsetForLeaderTopic::default().with_topic(common::name("swept")).with_partitions(
                    vec![OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(0)
                        .with_leader_epoch(0)],
                )]);
            let r = client.try_call(version, &request).await?;
            let p = &r.topics[0].partitions[0];
            check((p.error_code, p.leader_epoch, p.end_offset) == (0, 0, *produced), format!("{p:?}"))
        }
        // Without kafgres.authentication, as on a Kafka PLAINTEXT listener
        // (tests/sasl.rs covers the exchange itself).
        ApiKey::SaslHandshake => {
            let request = kafka_protocol::messages::SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256"));
            let r = client.try_call(version, &request).await?;
            check(r.error_code == error_code::ILLEGAL_SASL_STATE, format!("{r:?}"))
        }
        ApiKey::SaslAuthenticate => {
            let request = kafka_protocol::messages::SaslAuthenticateRequest::default()
                .with_auth_bytes(bytes::Bytes::from_static(b"n,,n=user,r=abc"));
            let r = client.try_call(version, &request).await?;
            check(r.error_code == error_code::ILLEGAL_SASL_STATE, format!("{r:?}"))
        }
        // Without authentication, as on a Kafka PLAINTEXT listener: refused
        // (tests/delegation_tokens.rs covers them over SASL).
        ApiKey::CreateDelegationToken => {
            let request = kafka_protocol::messages::CreateDelegationTokenRequest::default().with_max_lifetime_ms(-1);
            let r = client.try_call(version, &request).await?;
            let requester = if version >= 3 { "ANONYMOUS" } else { "" };
            check(
                (r.error_code, r.principal_name.as_str(), r.token_requester_principal_name.as_str())
                    == (error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "ANONYMOUS", requester),
                format!("{r:?}"),
            )
        }
        ApiKey::RenewDelegationToken => {
            let request = kafka_protocol::messages::RenewDelegationTokenRequest::default()
                .with_hmac(bytes::Bytes::from_static(b"hmac"))
                .with_renew_period_ms(-1);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, format!("{r:?}"))
        }
        ApiKey::ExpireDelegationToken => {
            let request = kafka_protocol::messages::ExpireDelegationTokenRequest::default()
                .with_hmac(bytes::Bytes::from_static(b"hmac"))
                .with_expiry_time_period_ms(-1);
            let r = client.try_call(version, &request).await?;
            check(r.error_code == error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, format!("{r:?}"))
        }
        ApiKey::DescribeDelegationToken => {
            let r =
                client.try_call(version, &kafka_protocol::messages::DescribeDelegationTokenRequest::default()).await?;
            check(r.error_code == error_code::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, format!("{r:?}"))
        }
        other => Err(format!("{other:?} has no case in this sweep")),
    }
}

/// Joins `group` as a new member (retrying once with the id a v4+ broker
/// hands out) and returns (error, member id, generation).
fn txn_id(id: &str) -> kafka_protocol::messages::TransactionalId {
    kafka_protocol::messages::TransactionalId(StrBytes::from_string(id.to_string()))
}

/// A transactional id's producer id and epoch (InitProducerId v4).
async fn txn_init(client: &mut Client, id: &str) -> Result<(i64, i16), String> {
    let request = kafka_protocol::messages::InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(kafka_protocol::messages::ProducerId(-1))
        .with_producer_epoch(-1);
    let r = client.try_call(4, &request).await?;
    if r.error_code != 0 {
        return Err(format!("InitProducerId for {id}: {r:?}"));
    }
    Ok((r.producer_id.0, r.producer_epoch))
}

fn add_offsets(id: &str, pid: i64, epoch: i16) -> kafka_protocol::messages::AddOffsetsToTxnRequest {
    kafka_protocol::messages::AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(kafka_protocol::messages::ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(kafka_protocol::messages::GroupId(StrBytes::from_static_str("txn-sweep")))
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_served_version_answers() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let id = create_topic(&mut client, "swept", 1).await;
    let mut produced = 0i64;
    let mut failures = Vec::new();
    // Produce before Fetch and ListOffsets, so they have records to report.
    use ApiKey::*;
    let order = [
        ApiVersions,
        Metadata,
        CreateTopics,
        Produce,
        Fetch,
        ListOffsets,
        OffsetForLeaderEpoch,
        DescribeLogDirs,
        AlterReplicaLogDirs,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        DescribeConfigs,
        IncrementalAlterConfigs,
        AlterConfigs,
        DescribeCluster,
        CreatePartitions,
        DeleteTopics,
        FindCoordinator,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        ListGroups,
        DescribeGroups,
        OffsetDelete,
        DeleteGroups,
        DeleteRecords,
        InitProducerId,
        DescribeTopicPartitions,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        TxnOffsetCommit,
        EndTxn,
        WriteTxnMarkers,
        SaslHandshake,
        SaslAuthenticate,
        CreateDelegationToken,
        RenewDelegationToken,
        ExpireDelegationToken,
        DescribeDelegationToken,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        AlterClientQuotas,
        DescribeClientQuotas,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        UpdateFeatures,
        ListConfigResources,
        ShareGroupHeartbeat,
        ShareGroupDescribe,
        ShareFetch,
        ShareAcknowledge,
        StreamsGroupHeartbeat,
        StreamsGroupDescribe,
        DescribeShareGroupOffsets,
        AlterShareGroupOffsets,
        DeleteShareGroupOffsets,
    ];
    for key in order {
        let api = SERVED_APIS.iter().find(|a| a.key == key).expect("served");
        for version in api.versions.accepted_min..=api.versions.max {
            if let Err(e) = exchange(&mut client, key, version, id, &mut produced).await {
                failures.push(format!("{key:?} v{version}: {e}"));
                client = broker.client().await; // the broker may have closed it
            }
        }
    }
    // The gated APIs (telemetry, off here) are swept in telemetry.rs.
    let gated = SERVED_APIS.iter().filter(|a| a.gate != kafgres_broker::api::Gate::Always).count();
    assert_eq!(SERVED_APIS.len() - gated, order.len(), "a served API is missing from the sweep");
    assert!(failures.is_empty(), "versions that do not answer:\n{}", failures.join("\n"));
    broker.broker.shutdown().await;
}
